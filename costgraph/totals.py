"""Sums over the graph: per node, per block, per layer (one iteration of a
repeat group) and per model.

Quantities (all exact SymPy expressions in the model's dimension symbols):

``params``
    Parameters: the elements of every distinct weight, each counted once
    (a tied head adds nothing), times its count.
``params_active``
    Parameters a token passes through: inside ``repeat E as experts active k``
    only ``k`` of the ``E`` copies (Mixtral-8x7B: 12.9 B of 46.7 B).
``flops_forward``, ``flops_backward_input``, ``flops_backward_weight``, ``flops_backward``
    FLOPs under a named convention (:mod:`costgraph.conventions`).
``activation_bytes``
    Bytes of the tensors kept for the backward pass: every storage saved by
    a node in scope is counted once, however many nodes keep it or views of
    it, at the bytes per element of its role (:mod:`costgraph.precision`).
``kv_cache_bytes``
    Bytes of the tensors marked ``cache(...)`` (keys and values, or MLA's
    latent) for ``b`` sequences holding ``s`` tokens each (for a prompt of
    ``s`` and ``n`` generated tokens, evaluate at ``s + n``); a sliding
    window keeps ``Min(s, w)`` positions.
``kv_cache_bytes_per_token``
    The same for one token of one sequence, windows not applied.

A node inside ``repeat l`` counts ``l`` times at model scope and once at
layer scope. FLOPs and activations of a mixture's experts count the active
copies (every token through ``k`` experts: perfect balance); parameters count
all. Totals are returned expanded (canonical form).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .errors import CostgraphValueError
from .graph import ZERO, CostGraph
from .precision import Precision

QUANTITIES = ("params", "params_active", "flops_forward", "flops_backward", "flops_backward_input",
              "flops_backward_weight", "activation_bytes", "kv_cache_bytes", "kv_cache_bytes_per_token")
CAUSAL = ("full", "half")


@dataclass(frozen=True)
class Scope:
    """A part of the graph: node ``prefix`` ('' for the whole model) and the
    multiplicity that one instance of it has (divided out of counts)."""

    name: str
    prefix: str
    per: sympy.Expr
    per_active: sympy.Expr

    def contains(self, path: str) -> bool:
        return not self.prefix or path == self.prefix or path.startswith(self.prefix + "/")


def resolve_scope(cg: CostGraph, scope: str) -> Scope:
    """``model``; ``layer`` (the model's one repeat group, per iteration); or the
    path of a repeat group, block or node (per instance).

    Raises
    ------
    CostgraphValueError
        For ``layer`` in a model with no or several top-level repeat groups,
        or an unknown path; the message lists the choices.
    """
    if scope == "model":
        return Scope("model", "", sympy.Integer(1), sympy.Integer(1))
    if scope == "layer":
        top = [g for g in cg.groups.values() if "/" not in g.path] or list(cg.groups.values())
        if len(top) != 1:
            raise CostgraphValueError(
                f"model '{cg.name}' has {len(top)} repeat groups; 'layer' needs exactly one",
                hint="name one as the scope: " + ", ".join(g.path for g in top) if top else None)
        return Scope("layer", top[0].path, top[0].multiplicity, top[0].active_multiplicity)
    if scope in cg.groups:
        g = cg.groups[scope]
        return Scope(scope, scope, g.multiplicity, g.active_multiplicity)
    if scope in cg.blocks:
        return Scope(scope, scope, cg.blocks[scope].count, cg.blocks[scope].active)
    if scope in cg.nodes:
        n = cg.nodes[scope]
        return Scope(scope, scope, n["count"], n["active"])
    raise CostgraphValueError(
        f"no scope '{scope}' in model '{cg.name}'",
        hint="use model, layer, or a path: " + ", ".join(sorted([*cg.groups, *cg.blocks])[:12]))


def _rel(count, per):
    """``count / per`` with common factors cancelled (``E l - E k_d`` over ``l - k_d`` is ``E``)."""
    return sympy.cancel(count / per)


def totals(cg: CostGraph, scope: Scope, convention: str, precision: Precision,
           causal: str = "full") -> dict[str, sympy.Expr]:
    """Every quantity of :data:`QUANTITIES` summed over ``scope``, expanded."""
    rows = breakdown(cg, scope, convention, precision, causal)
    out = {}
    for q in QUANTITIES:
        out[q] = sympy.expand(sympy.Add(*[r["count"] * r[q] for r in rows if r["kind"] != "block"]))
    return out


def breakdown(cg: CostGraph, scope: Scope, convention: str, precision: Precision,
              causal: str = "full") -> list[dict]:
    """One row per operator node in ``scope`` (program order), then one per
    block and repeat group, each with ``path``, ``kind``, ``count`` (relative
    to the scope) and the quantities of *one* instance.

    A saved storage is charged to the first node that keeps it, so node rows
    add up to the scope's totals. Every count-dependent quantity is stored
    already multiplied into "per one instance of the row" terms: FLOPs and
    activations use the active copies, ``params`` all copies.

    ``causal="half"`` halves the FLOPs of products marked ``causal = true``
    (QKᵀ and scores·V under a causal mask); ``"full"`` (default) counts the
    whole square, as PaLM, Megatron-LM and FlopCounterMode do.
    """
    caches: dict[str, list] = {}
    for entry in cg.caches:
        caches.setdefault(entry.path, []).append(entry)
    seen_storage: set[str] = set()
    seen_weight: set[str] = set()
    rows = []
    for path, d in cg.ops():
        if not scope.contains(path):
            continue
        c = d["cost"]
        count = _rel(d["count"], scope.per)
        # compute-side quantities are scaled from the active copies to per-row
        active = _rel(_rel(d["active"], scope.per_active), count)
        params = params_active = ZERO
        for wid in c.weights:
            if wid not in seen_weight:
                seen_weight.add(wid)
                params += cg.weights[wid].numel
                params_active += cg.weights[wid].numel * active
        act = ZERO
        for tid in c.saved:
            t = cg.tensors[tid]
            store = cg.tensors[t.storage]
            if store.id in seen_storage:
                continue
            seen_storage.add(store.id)
            # a storage made outside the scope (e.g. an encoder output kept by
            # every decoder layer) is charged once, not per instance
            rel = _rel(store.active, d["active"])
            act += store.numel * precision.bytes(store.role) * rel * active
        half = sympy.Rational(1, 2) if causal == "half" and d["attrs"].get("causal") else 1
        fwd = c.forward.under(convention) * active * half
        bi = c.backward_input.under(convention) * active * half
        bw = c.backward_weight.under(convention) * active * half
        kv = kv_tok = ZERO
        for entry in caches.get(path, ()):
            t = cg.tensors[entry.tensor]
            seq = t.shape[-2]
            per_pos = t.numel / seq * precision.bytes(t.role)
            kv += per_pos * (seq if entry.window is None else sympy.Min(seq, entry.window))
            kv_tok += per_pos / t.shape[0]
        rows.append({"path": path, "kind": d["kind"], "count": count,
                     "params": params, "params_active": params_active, "flops_forward": fwd,
                     "flops_backward_input": bi, "flops_backward_weight": bw,
                     "flops_backward": bi + bw, "activation_bytes": act,
                     "kv_cache_bytes": kv, "kv_cache_bytes_per_token": kv_tok})
    rows.extend(_aggregate(cg, scope, rows))
    return rows


def _aggregate(cg: CostGraph, scope: Scope, rows: list[dict]) -> list[dict]:
    parents = {}
    for path, g in cg.groups.items():
        parents[path] = ("repeat", g.multiplicity)
    for path, b in cg.blocks.items():
        parents[path] = (b.kind, b.count)
    out = []
    for path in sorted(parents, key=lambda p: (p.count("/"), p)):
        if not scope.contains(path) or path == scope.prefix:
            continue
        kind, mult = parents[path]
        count = _rel(mult, scope.per)
        inside = [r for r in rows if r["path"].startswith(path + "/")]
        ratios = {}   # one cancellation per distinct count, not per row and quantity
        for r in inside:
            if r["count"] not in ratios:
                ratios[r["count"]] = _rel(r["count"], count)
        row = {"path": path, "kind": "block", "block": kind, "count": count}
        for q in QUANTITIES:
            row[q] = sympy.expand(sympy.Add(*[ratios[r["count"]] * r[q] for r in inside]))
        out.append(row)
    return out
