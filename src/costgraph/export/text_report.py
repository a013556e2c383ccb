"""A :class:`~costgraph.model.Costs` rendered as text, LaTeX or JSON.

The JSON document is a stable contract for other programs (see README,
"JSON output"):

.. code-block:: text

    {
      "costgraph": "0.1.0",                      # version that wrote it
      "model": "gpt", "scope": "layer",
      "convention": "matmul",                    # FLOP convention
      "precision": {"name": "bf16", "bytes": {"act": 2, "mask": 1, "index": 8, "fp32": 4}},
      "dropout": true, "options": {"bias": true},
      "symbols": {"b": "micro-batch size (sequences)", ...},
      "values": {"h": 768, ...},                 # only the dims given a value
      "quantities": {
        "params": {"expr": "12*h**2 + 13*h", "latex": "12 h^{2} + 13 h",
                   "unit": "parameters", "value": 7087872},   # value: all symbols set
        "flops_forward": {...}, "flops_backward": {...},
        "flops_backward_input": {...}, "flops_backward_weight": {...},
        "activation_bytes": {...}
      },
      "breakdown": {"layers/attn/c_attn": {"kind": "linear", "count": "1",
                                           "quantities": {...}}, ...}
    }

``expr`` is infix SymPy/Python syntax, expanded, terms in the field's order;
``value`` is an exact integer. Breakdown quantities are per instance; a row
counts ``count`` times in its scope (``l`` for a layer at model scope).

Every ``costs`` argument here is a :class:`costgraph.model.Costs`; this module
does not import :mod:`costgraph.model` (the model imports it to show itself in
Jupyter), so the parameters are not annotated with the class.
"""

from __future__ import annotations

import json

import sympy

from ..numbers import units
from ..engine.precision import ROLES
from .printing import field_order, to_latex, to_python, to_text
from .tables import table
from ..engine.totals import QUANTITIES
from ..numbers.units import LABELS
from ..version import __version__
from ..arguments import value_warnings

MAIN = ("params", "flops_forward", "flops_backward", "activation_bytes")


def _quantity(q: str, expr: sympy.Expr, subs) -> dict:
    from .exprtree import to_tree   # the JSON's only (a text derive does without it)

    ordered = field_order(expr)
    out = {"expr": to_python(ordered), "tree": to_tree(ordered), "latex": to_latex(ordered), "unit": units.UNITS[q]}
    if subs is not None and expr.free_symbols <= set(subs):
        v = expr.subs(subs)
        if v.is_integer:
            out["value"] = int(v)
        else:   # a breakdown row's share of a storage made outside it (e.g. T5's encoder output)
            out["value_rational"] = str(v)
    return out


def to_json(costs, values: dict | None = None, breakdown: bool = True) -> str:
    """The JSON contract above; ``values`` maps dimension symbols to integers."""
    from .exprtree import to_tree

    m = costs.model
    doc = {
        "costgraph": __version__,
        "model": m.name,
        "scope": costs.scope,
        "convention": costs.convention,
        "causal": costs.causal,
        "precision": {"name": costs.precision.name,
                      "bytes": {r: costs.precision.bytes(r) for r in ROLES}},
        "dropout": m.settings.dropout,
        "profile": m.settings.profile,
        "options": dict(m.graph.options),
        "symbols": m.symbols,
        "values": {str(k): int(v) for k, v in (values or {}).items()},
        "quantities": {q: _quantity(q, costs[q], values) for q in QUANTITIES},
        "warnings": warnings(costs, values),
    }
    if breakdown:
        doc["breakdown"] = {
            r["path"]: {"type": _row_type(r),
                        "kind": r["block"] if r["kind"] == "block" else r["kind"],
                        "count": to_python(field_order(r["count"])),
                        "count_tree": to_tree(field_order(r["count"])),
                        "quantities": {q: _quantity(q, r[q], values) for q in QUANTITIES}}
            for r in costs.rows}
    return json.dumps(doc, indent=2, ensure_ascii=False)


def _row_type(r: dict) -> str:
    """``op`` (an operator node), ``storage`` (a saved storage shared by several
    instances of its keepers, see :func:`costgraph.engine.totals.breakdown`), ``block``
    (a block call) or ``repeat`` (a group)."""
    if r["kind"] == "storage":
        return "storage"
    if r["kind"] != "block":
        return "op"
    return "repeat" if r["block"] == "repeat" else "block"


def to_latex_doc(costs) -> str:
    """An ``aligned`` environment with the main quantities, in field order: parameters
    (total and active), forward and backward FLOPs, activation bytes, and the KV
    cache where the model has one."""
    shown = [q for q in _shown(costs) if q in MAIN or q in ("params_active", "kv_cache_bytes")]
    lines = [f"  \\text{{{LABELS[q].strip()}}} &= {to_latex(_display(costs, q))} \\\\" for q in shown]
    lines[-1] = lines[-1][:-3]
    return "\\begin{aligned}\n" + "\n".join(lines) + "\n\\end{aligned}"


def _display(costs, q: str):
    return costs.grouped(q) if costs.scope == "model" and costs.model.graph.groups else costs.ordered(q)


def _shown(costs) -> list[str]:
    """Quantities worth a line: the KV cache only where the model has one."""
    q = costs.quantities
    out = []
    for name in QUANTITIES:
        if name.startswith("kv_cache") and q[name] == 0:
            continue
        out.append(name)
    return out


def warnings(costs, values: dict | None) -> list[str]:
    """Values that are legal but probably not meant: :func:`costgraph.arguments.value_warnings` (a sequence
    longer than a learned position table), and a scope with no instance at the values (a branch ``if j >= 100``
    at ``l = 4``: the figures are one instance's, which the model does not run)."""
    out = []
    sc = getattr(costs, "_scope", None)
    if sc is not None and values and sc.per.free_symbols and sc.per.free_symbols <= set(values) \
            and sc.per.xreplace(values) == 0:
        out.append(f"scope '{sc.name}' has no instance at these values (it occurs {to_text(field_order(sc.per))} times): "
                   "the figures are one instance's, which the model does not run")
    return out + value_warnings(values)


def sweep_warnings(values: dict | None, over: dict) -> list[str]:
    """:func:`warnings` for a sweep: ``values`` the fixed dimensions, ``over`` maps swept
    dimension names to their values; the longest ``s`` against the smallest ``s_max`` (that row
    is in the product grid)."""
    v = {str(k): int(x) for k, x in (values or {}).items()}
    if "s" in over:
        v["s"] = max(over["s"])
    if "s_max" in over:
        v["s_max"] = min(over["s_max"])
    return warnings(None, v)


def _dropout(model) -> str:
    """``dropout on``/``off``, or that the model has none (LLaMA-style files: the setting changes nothing)."""
    if not model.settings.dropout:
        return "dropout off"
    if not any(d["kind"] == "dropout" for _, d in model.graph.ops()):
        return "no dropout in the model"
    return "dropout on"


def _header(costs) -> list[str]:
    """What the numbers depend on: scope, options, dropout, profile, FLOP and byte conventions."""
    m = costs.model
    p = costs.precision
    scope = costs.scope
    if scope == "layer":
        scope = "one layer (one iteration of its repeat group)"
    opts = ", ".join(f"{k}={str(v).lower()}" for k, v in m.graph.options.items())
    return [f"{m.name}: {scope}",
            (f"options: {opts}; " if opts else "") + _dropout(m) + "; "
            f"activation profile '{m.settings.profile}'",
            f"FLOPs: '{costs.convention}' convention, 2 FLOPs per multiply-add"
            + {"full": "", "half": ", causal attention products halved",
               "exact": ", causal attention products over the kept pairs (exact)"}[costs.causal]
            + f"; bytes: precision '{p.name}' (activations {p.activation} B, dropout masks {p.mask} B, "
              f"token ids {p.index} B per element)"]


def to_text_doc(costs, values: dict | None = None, breakdown: bool = False,
                note: str | None = None) -> str:
    """Readable text: formulas, then numbers with units when every symbol has
    a value, or the formulas with the given values put in when only some have."""
    m = costs.model
    head = _header(costs)
    if note:
        head.append(note)
    shown = _shown(costs)
    label_width = max(len(LABELS[q]) for q in QUANTITIES)   # one width for formulas and numbers

    def rows_of(cells):
        return table([[LABELS[q].ljust(label_width), v] for q, v in cells])

    out = head + [""] + rows_of((q, to_text(_display(costs, q))) for q in shown)
    if values is not None and all(e.free_symbols <= set(values) for e in costs.quantities.values()):
        given = ", ".join(f"{k}={v}" for k, v in values.items())
        out += ["", f"with {given}:"]
        numbers = costs.evaluate(None, {str(k): int(v) for k, v in values.items()})
        out += rows_of((q, units.with_unit(q, n)) for q, n in numbers.items() if q in shown)
    elif values is not None:
        missing = sorted({str(s) for e in costs.quantities.values() for s in e.free_symbols} - {str(k) for k in values})
        given = ", ".join(f"{k}={v}" for k, v in values.items())
        out += ["", f"with {given} (no value for {', '.join(missing)}):"]
        out += rows_of((q, to_text(field_order(costs[q].xreplace(values)))) for q in shown)
    out += [f"warning: {w}" for w in warnings(costs, values)]
    used = {str(x) for e in costs.quantities.values() for x in e.free_symbols}
    out += ["", "symbols:"] + table([(k, v) for k, v in m.symbols.items() if k in used], gap=1)
    if breakdown:
        out += ["", "breakdown (per instance; count = instances in this scope):"]
        out += table([[r["path"], r["block"] if r["kind"] == "block" else r["kind"],
                       to_text(field_order(r["count"])), to_text(field_order(r["params"])),
                       to_text(field_order(r["flops_forward"])), to_text(field_order(r["activation_bytes"]))]
                      for r in costs.rows],
                     ["path", "kind", "count", "params", "forward FLOPs", "activation bytes"])
    return "\n".join(out)
