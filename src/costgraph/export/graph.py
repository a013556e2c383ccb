"""The operator graph as a picture and as data: DOT, SVG, GraphML, JSON.

:func:`operator_graph` turns a model's :class:`~costgraph.engine.graph.CostGraph`
(or one scope of it) into a ``networkx.MultiDiGraph`` whose attributes are
plain data, and the writers below render it:

nodes (keyed by path, program order)
    ``type`` ``op`` (an operator node), ``input`` (a model input),
    ``storage`` (a saved storage shared by several instances of its
    keepers, the ``saved:`` rows of ``derive --breakdown``) or ``outside``
    (a node outside the scope that feeds it or reads from it); ``kind`` (the
    operator); ``name`` (last part of the path); ``cluster`` (the innermost
    repeat group or block around it, ``""`` for none); ``count`` (instances
    in the scope, as text, and ``count_tree``); ``outputs`` (``tensor``,
    ``shape`` as text, ``role``); ``weights`` it owns and ``tied`` weights it
    reads (ids ``node/weight``); ``saved`` (tensors it keeps for the
    backward pass); ``kv_cache`` (true for a ``cache`` node: its tensor is
    kept at inference); ``matmul`` (true when its forward pass has matrix
    products); ``quantities``: every quantity of
    :data:`costgraph.engine.totals.QUANTITIES` for *one* instance, ``{expr, tree}``
    and ``value`` when every symbol has one (the node rows of ``costgraph
    derive --breakdown``).
edges
    ``type`` ``tensor`` (keyed by tensor id: ``tensor``, ``shape``, ``role``,
    ``saved`` = the producer or the consumer keeps this tensor for
    backward) or ``tied`` (keyed ``tied:<weight>``, from the node owning a
    weight to a node reading it: a tied output head).
graph
    ``model``, ``scope``, ``convention``, ``causal``, ``precision``,
    ``profile``, ``dropout``, ``symbols``, ``values`` and ``clusters``: one
    per repeat group and block call in the scope (``path``, ``type``
    ``repeat``/``block``, ``kind``, ``count`` and ``active`` as text,
    ``parent`` and ``label``: ``layers × l``; a mixture's experts ``experts
    × E (active k)``; a block that only some layers of a pattern take,
    ``global (global_layer) × floor(l/6)``).

Writers: :func:`to_dot` (Graphviz DOT through the ``graphviz`` package:
clusters for groups and blocks, tied weights dashed, tensors kept for
backward in red, KV-cache nodes as cylinders), :func:`to_svg` (DOT laid out
by Graphviz's ``dot`` program, within the bounds of :mod:`.dot_layout`), :func:`to_graphml` (NetworkX's GraphML
writer, every attribute a string) and :func:`to_json` (NetworkX's
node-link form, formulas with their expression trees; JSON Schema
``costgraph schema graph``). :func:`model_html` is the Jupyter view of a
:class:`~costgraph.model.Model`.
"""

from __future__ import annotations

import json

from ..choices import CAUSAL, CONVENTION, PRECISION
from ..errors import CostgraphError, CostgraphValueError
from ..optional import need
from .dot_layout import INSTALL_HINT, check_layout, check_node_count, clip, run_dot

#: what ``costgraph graph --format`` writes
FORMATS = ("dot", "svg", "graphml", "json")
#: quantities shown in a node's picture label, with their short names
LABEL_QUANTITIES = (("params", "params"), ("flops_forward", "FLOPs"), ("activation_bytes", "saves"),
                    ("kv_cache_bytes", "KV"))
SAVED_COLOR = "#c0392b"
TIED_COLOR = "#7f7f7f"
LEGEND = ("red edge: tensor kept for the backward pass; cylinder: KV cache; dashed edge: tied weight; "
          "boxes around nodes: repeat groups (× count) and blocks; quantities per instance")


def _text(e) -> str:
    from .printing import field_order, to_text
    from ..engine.symbols import as_expr

    return to_text(field_order(as_expr(e)))


def _shape(shape) -> str:
    return "[" + ", ".join(_text(d) for d in shape) + "]"


def _formula(e, values) -> dict:
    from .printing import field_order, to_python, to_text
    from ..engine.symbols import as_expr
    from .exprtree import to_tree

    e = as_expr(e)
    ordered = field_order(e)
    out = {"expr": to_python(ordered), "text": to_text(ordered), "tree": to_tree(ordered)}
    if values is not None and e.free_symbols <= set(values):
        v = e.xreplace(values)
        if v.is_integer:
            out["value"] = int(v)
    return out


def operator_graph(model, scope: str = "model", *, convention: str = CONVENTION.default, precision: str = PRECISION.default,
                   causal: str = CAUSAL.default, values: dict | None = None):
    """The operator graph of ``scope`` of ``model`` (a :class:`costgraph.model.Model`)
    as a ``networkx.MultiDiGraph`` of plain data (see the module docstring).

    ``scope``: ``model``, ``layer`` or the path of a group, block or node (as
    ``costgraph derive --scope``); ``convention``, ``precision``, ``causal``
    as :meth:`~costgraph.model.Model.costs`; ``values`` (symbol → int, e.g.
    ``model.values("gpt2")``) adds exact ``value``\\ s.

    Raises
    ------
    CostgraphValueError
        Unknown scope, convention, precision or causal convention.
    """
    import networkx as nx

    from ..engine.totals import QUANTITIES

    costs = model.costs(scope, convention=convention, precision=precision, causal=causal)
    cg = model.graph
    sc = costs._scope
    rows = {r["path"]: r for r in costs.leaves}
    clusters = _clusters(cg, sc)
    cluster_paths = sorted((c["path"] for c in clusters), key=len, reverse=True)

    def home(path: str) -> str:
        return next((c for c in cluster_paths if path.startswith(c + "/")), "")

    g = nx.MultiDiGraph(model=model.name, scope=costs.scope, convention=convention, causal=causal,
                        precision=costs.precision.name, profile=model.settings.profile,
                        dropout=model.settings.dropout, symbols=model.symbols,
                        values={str(k): int(v) for k, v in (values or {}).items()}, clusters=clusters,
                        legend=LEGEND)
    inside = [(p, d) for p, d in cg.nodes.items() if sc.contains(p) and (d["kind"] != "input" or sc.prefix == "")]
    names = {p for p, _ in inside}
    caches = {c.path for c in cg.caches}
    for path, d in inside:
        row = rows.get(path)
        outputs = [{"tensor": t, "shape": _shape(cg.tensors[t].shape), "role": cg.tensors[t].role}
                   for t in d["outputs"] if t in cg.tensors]
        c = d["cost"]
        count = row["count"] if row is not None else d["count"]
        g.add_node(path, type="input" if d["kind"] == "input" else "op", kind=d["kind"], name=path.rsplit("/", 1)[-1],
                   cluster=home(path), count=_text(count), count_tree=_formula(count, None)["tree"],
                   outputs=outputs,
                   weights=[{"id": w, "shape": _shape(cg.weights[w].shape)} for w in c.weights if w in cg.weights],
                   tied=list(c.tied), saved=list(c.saved), kv_cache=path in caches, matmul=c.forward.matmul != 0,
                   quantities={q: _formula(row[q] if row is not None else 0, values) for q in QUANTITIES})
    for path, row in rows.items():   # shared storages: their own rows
        if row["kind"] == "storage":
            tensor = path.split("saved:", 1)[1]
            t = cg.tensors.get(tensor)
            g.add_node(path, type="storage", kind="storage", name=path.rsplit("/", 1)[-1], cluster=home(path),
                       count=_text(row["count"]), count_tree=_formula(row["count"], None)["tree"],
                       outputs=[{"tensor": tensor, "shape": _shape(t.shape), "role": t.role}] if t else [],
                       weights=[], tied=[], saved=[tensor], kv_cache=False, matmul=False,
                       quantities={q: _formula(row[q], values) for q in QUANTITIES})
    for producer, consumer, tid, attrs in cg.edges:
        a, b = producer in names, consumer in names
        if not (a or b):
            continue
        for end, ok in ((producer, a), (consumer, b)):
            if not ok and end not in g:
                _outside(g, cg, end)
        kept = (b and tid in cg.nodes[consumer]["cost"].saved) or (a and tid in cg.nodes[producer]["cost"].saved)
        g.add_edge(producer, consumer, key=tid, type="tensor", tensor=tid, shape=_shape(attrs["shape"]),
                   role=attrs.get("role", ""), saved=bool(kept))
    owner = {w: p for p, d in cg.nodes.items() for w in d["cost"].weights}
    for path in names:
        for w in cg.nodes[path]["cost"].tied:
            src = owner.get(w)
            if src is None:
                continue
            if src not in g:
                _outside(g, cg, src)
            g.add_edge(src, path, key=f"tied:{w}", type="tied", tensor=w, shape=_shape(cg.weights[w].shape),
                       role="weight", saved=False)
    return g


def _outside(g, cg, path: str) -> None:
    """A node outside the scope that feeds it or reads from it (no quantities)."""
    d = cg.nodes[path]
    g.add_node(path, type="outside", kind=d["kind"], name=path, cluster="", count=_text(d["count"]),
               count_tree=_formula(d["count"], None)["tree"], outputs=[], weights=[], tied=[], saved=[],
               kv_cache=False, matmul=False, quantities={})


def _clusters(cg, sc) -> list[dict]:
    """The repeat groups and block calls inside scope ``sc``, outermost first,
    with their labels (module docstring)."""
    from .printing import field_order
    from ..engine.totals import _rel

    out = []
    paths = sorted([*cg.groups, *cg.blocks], key=lambda p: (p.count("/"), p))
    for path in paths:
        if not (sc.contains(path) or sc.prefix.startswith(path + "/")):   # inside the scope, or around it
            continue
        parent = max((p for p in paths if path.startswith(p + "/")), key=len, default="")
        name = path.rsplit("/", 1)[-1]
        if path in cg.groups:
            gr = cg.groups[path]
            count, active = gr.count, gr.active
            label = f"{name} × {_text(count)}" + ("" if active == count else f" (active {_text(active)})")
            out.append({"path": path, "type": "repeat", "kind": "repeat", "count": _text(count),
                        "active": _text(active), "parent": parent, "label": label})
        else:
            bl = cg.blocks[path]
            around = (cg.groups[parent].multiplicity if parent in cg.groups else
                      cg.blocks[parent].count if parent in cg.blocks else 1)
            label = f"{name} ({bl.kind})"
            if field_order(_rel(bl.count, around)) != 1:   # only some of the parent's instances: a pattern
                label += f" × {_text(bl.count)}"
            out.append({"path": path, "type": "block", "kind": bl.kind, "count": _text(bl.count),
                        "active": _text(bl.active), "parent": parent, "label": label})
    return out


def _label(d: dict) -> str:
    """A node's picture label: name, kind and output shape, then the non-zero
    per-instance quantities (with values when known), left-justified lines;
    the name and shape lines and each formula cut by :func:`~costgraph.export.dot_layout.clip`
    (the value and unit after a formula are kept)."""
    graphviz = need("graphviz", "graph", "the operator graph")

    lines = [clip(d["name"])]
    if d["type"] == "outside":
        lines = [clip(f"{d['name']} (outside)")]
    elif d["type"] == "storage":
        lines.append(clip("shared storage " + ", ".join(o["shape"] for o in d["outputs"])))
    else:
        shapes = ", ".join(o["shape"] for o in d["outputs"])
        lines.append(clip(f"{d['kind']} → {shapes}" if shapes else d["kind"]))
    for q, short in LABEL_QUANTITIES:
        f = d["quantities"].get(q)
        if not f or f["expr"] == "0":
            continue
        text = f["text"]
        lines.append(f"{short} {clip(text)}" + (f" = {f['value']:,}" if "value" in f and not text.isdigit() else "")
                     + (" B" if q in ("activation_bytes", "kv_cache_bytes") else ""))
    return "".join(graphviz.escape(line) + "\\l" for line in lines)


def _style(d: dict) -> dict:
    if d["type"] == "input":
        return {"shape": "ellipse", "style": "filled", "fillcolor": "#eeeeee"}
    if d["type"] == "outside":
        return {"shape": "box", "style": "dashed", "color": "#999999", "fontcolor": "#666666"}
    if d["type"] == "storage":
        return {"shape": "note", "style": "filled", "fillcolor": "#fff3c4"}
    if d["kv_cache"]:
        return {"shape": "cylinder", "style": "filled", "fillcolor": "#fde0c5"}
    return {"shape": "box", "style": "rounded,filled", "fillcolor": "#dbe9f6" if d["matmul"] else "#ffffff"}


def to_dot(g) -> str:
    """Graphviz DOT text of :func:`operator_graph`'s graph: one cluster per
    repeat group and block (nested as in the model, labelled with counts),
    a node per operator with its output shape and per-instance formulas,
    tensors kept for backward as red edges, KV-cache nodes as cylinders, tied
    weights as dashed edges; the legend as the graph's label."""
    graphviz = need("graphviz", "graph", "the operator graph")

    dot = graphviz.Digraph(name=g.graph["model"], graph_attr={
        "rankdir": "TB", "fontname": "Helvetica", "fontsize": "11", "labelloc": "b", "labeljust": "l",
        "label": graphviz.escape(f"{clip(g.graph['model'])}, scope {clip(g.graph['scope'])} — {LEGEND}"),
        "nodesep": "0.25", "ranksep": "0.3"},
        node_attr={"fontname": "Helvetica", "fontsize": "10", "margin": "0.08,0.04"},
        edge_attr={"fontname": "Helvetica", "fontsize": "9", "arrowsize": "0.6"})
    clusters = g.graph["clusters"]
    children: dict[str, list[dict]] = {}
    for c in clusters:
        children.setdefault(c["parent"] if any(o["path"] == c["parent"] for o in clusters) else "", []).append(c)
    members: dict[str, list[str]] = {}
    for n, d in g.nodes(data=True):
        members.setdefault(d["cluster"], []).append(n)
    index = {c["path"]: i for i, c in enumerate(clusters)}

    def emit(sub, path: str) -> None:
        for n in members.get(path, []):
            d = g.nodes[n]
            sub.node(n, label=_label(d), tooltip=graphviz.escape(clip(n)), **_style(d))
        for c in children.get(path, []):
            with sub.subgraph(name=f"cluster_{index[c['path']]}") as inner:
                repeat = c["type"] == "repeat"
                look = ({"style": "rounded,filled", "fillcolor": "#f4f8fb", "color": "#4a78a8", "penwidth": "1.5"}
                        if repeat else {"style": "rounded", "color": "#9aa5b1"})
                inner.attr(label=graphviz.escape(clip(c["label"])), tooltip=graphviz.escape(clip(c["path"])),
                           labeljust="l", labelloc="t", **look)
                emit(inner, c["path"])

    emit(dot, "")
    for u, v, k, d in g.edges(keys=True, data=True):
        if d["type"] == "tied":
            dot.edge(u, v, style="dashed", color=TIED_COLOR, constraint="false", fontcolor=TIED_COLOR,
                     label=graphviz.escape(clip(f"tied {d['tensor']}")))
        elif d["saved"]:
            dot.edge(u, v, color=SAVED_COLOR, penwidth="1.8",
                     tooltip=graphviz.escape(clip(f"{k} {d['shape']}: kept for backward")))
        else:
            dot.edge(u, v, tooltip=graphviz.escape(clip(f"{k} {d['shape']}")))
    return dot.source


def to_svg(g=None, dot: str | None = None) -> str:
    """SVG text: :func:`to_dot` of ``g`` (or the DOT text ``dot``) laid out by
    Graphviz's ``dot`` program, within the bounds of
    :mod:`costgraph.export.dot_layout` (``g``'s size is checked first; labels
    are cut to :data:`~costgraph.export.dot_layout.MAX_LABEL_CHARS`).

    Raises
    ------
    CostgraphError
        ``dot`` is not installed (the hint says how to install it).
    CostgraphValueError
        ``g`` is too large to lay out, or ``dot`` ran out of time or failed.
    """
    if dot is None:
        check_layout(g)
    return run_dot(dot if dot is not None else to_dot(g))


def has_dot() -> bool:
    """Whether Graphviz's ``dot`` program is on the PATH."""
    import shutil

    return shutil.which("dot") is not None


def _flat(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def to_graphml(g) -> str:
    """GraphML (NetworkX's writer) of :func:`operator_graph`'s graph, every
    attribute a string: per node ``type``, ``kind``, ``name``, ``cluster``,
    ``count``, ``outputs`` (shapes, ``; ``-separated), ``weights``, ``tied``,
    ``saved``, ``kv_cache``, ``matmul`` (``true``/``false``) and one attribute per
    quantity (its ``expr``; ``<quantity>_value`` when known); per edge
    ``type``, ``tensor``, ``shape``, ``role``, ``saved``; graph attributes as
    JSON text where they are structured (``clusters``, ``symbols``, ``values``)."""
    import networkx as nx

    from ..engine.totals import QUANTITIES

    h = nx.MultiDiGraph()
    h.graph.update({k: _flat(v) for k, v in g.graph.items()})
    for n, d in g.nodes(data=True):
        attrs = {"type": d["type"], "kind": d["kind"], "name": d["name"], "cluster": d["cluster"], "count": d["count"],
                 "outputs": "; ".join(o["shape"] for o in d["outputs"]),
                 "weights": "; ".join(f"{w['id']} {w['shape']}" for w in d["weights"]),
                 "tied": "; ".join(d["tied"]), "saved": "; ".join(d["saved"]), "kv_cache": _flat(d["kv_cache"]),
                 "matmul": _flat(d["matmul"])}
        for q in QUANTITIES:
            f = d["quantities"].get(q, {"expr": "0"})
            attrs[q] = f["expr"]
            if "value" in f:
                attrs[f"{q}_value"] = str(f["value"])
        h.add_node(n, **attrs)
    for u, v, k, d in g.edges(keys=True, data=True):
        h.add_edge(u, v, key=k, **{a: _flat(x) for a, x in d.items()})
    return "\n".join(nx.generate_graphml(h, prettyprint=True)) + "\n"


def to_json(g) -> str:
    """NetworkX's node-link JSON of :func:`operator_graph`'s graph (``nodes``,
    ``edges`` with ``source``/``target``/``key``, the graph's attributes
    under ``graph``), formulas as ``{expr, tree[, value]}``; its JSON Schema
    is ``costgraph schema graph``."""
    import networkx as nx

    from ..version import __version__

    try:
        doc = nx.node_link_data(g, edges="edges")
    except TypeError:   # NetworkX before 3.4 names the argument link
        doc = nx.node_link_data(g, link="edges")
    doc["graph"] = {"costgraph": __version__, **doc["graph"]}
    return json.dumps(doc, indent=2, ensure_ascii=False)


def render(model, fmt: str, scope: str = "model", **settings) -> str:
    """:func:`operator_graph` of ``model`` written as ``fmt`` (:data:`FORMATS`).

    Raises
    ------
    CostgraphValueError
        Unknown format; or as :func:`operator_graph`; :func:`to_svg`'s error.
    """
    if fmt not in FORMATS:
        raise CostgraphValueError(f"unknown graph format {fmt!r}", hint=", ".join(FORMATS))
    if fmt == "svg" and not has_dot():   # before the work
        raise CostgraphError("drawing SVG needs Graphviz's 'dot' program, which is not installed", hint=INSTALL_HINT)
    if fmt == "svg":
        _check_scope_size(model, scope)
    g = operator_graph(model, scope, **settings)
    return {"dot": to_dot, "svg": to_svg, "graphml": to_graphml, "json": to_json}[fmt](g)


def _check_scope_size(model, scope: str) -> None:
    """Before building a picture's graph: refuse a scope of more than
    :data:`~costgraph.export.dot_layout.MAX_LAYOUT_NODES` operator nodes
    (a lower bound on the picture's nodes), cheaply."""
    from .. import arguments
    from ..engine.totals import resolve_scope

    arguments.text(scope, "scope", hint="model, layer, or the path of a repeat group, block or node")
    sc = resolve_scope(model.graph, scope)
    check_node_count(sum(1 for p in model.graph.nodes if sc.contains(p)))


def model_html(model, scope: str = "model", picture: bool | None = None) -> str:
    """The Jupyter view of a model: a table of its name, options, symbols and
    model-scope formulas (parameters, active parameters, forward FLOPs,
    activation bytes, KV cache), and the operator graph as inline SVG when
    Graphviz's ``dot`` is installed (``picture``: force on or off)."""
    from html import escape

    from ..numbers.units import LABELS
    from .printing import to_text

    costs = model.costs(scope)
    opts = ", ".join(f"{k}={str(v).lower()}" for k, v in model.graph.options.items()) or "none"
    rows = [("model", model.name), ("options", opts),
            ("profile", f"{model.settings.profile}; dropout {'on' if model.settings.dropout else 'off'}"),
            ("operator nodes", str(len(model.graph.ops()))),
            ("symbols", ", ".join(f"{k}: {v}" for k, v in model.symbols.items()))]
    for q in ("params", "params_active", "flops_forward", "flops_backward", "activation_bytes", "kv_cache_bytes"):
        if q.startswith("kv_cache") and costs[q] == 0:
            continue
        shown = costs.grouped(q) if scope == "model" and model.graph.groups else costs.ordered(q)
        rows.append((LABELS[q].strip(), to_text(shown)))
    cells = "".join(f"<tr><th style=\"text-align:left\">{escape(k)}</th><td style=\"text-align:left\">"
                    f"<code>{escape(v)}</code></td></tr>" for k, v in rows)
    out = (f"<div class=\"costgraph-model\"><table>{cells}</table>"
           f"<p style=\"font-size:smaller\">{escape(costs.convention)} FLOPs (2 per multiply-add), "
           f"bytes at {escape(costs.precision.name)}; costgraph derive {escape(model.name)} for more</p>")
    if picture is None:
        picture = has_dot()
    if picture:
        try:
            _check_scope_size(model, scope)
            svg = to_svg(operator_graph(model, scope))
        except CostgraphValueError as e:   # too large to draw, or dot ran out of time: say so
            out += f"<p style=\"font-size:smaller\">no picture: {escape(e.message)}</p>"
        else:
            out += svg[svg.index("<svg"):]
    return out + "</div>"
