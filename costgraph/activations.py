"""Activation memory of one device in training: recomputation, attention
implementation, tensor and sequence parallelism — an analysis over the graph.

What a device keeps for the backward pass is the graph's saved storages
(:func:`costgraph.totals.breakdown`), less what is recomputed, each divided
by the devices that share it:

``recompute``
    ``none`` — everything the profile keeps. ``selective`` (Korthikanti et
    al. 2022 §5.2): the *attention core* is recomputed: the product of two
    activations that starts an attention (QKᵀ) and every operator on the way
    from it to the next such product (scores·V: scale, softmax, its dropout)
    keep nothing; Q, K and V themselves are still kept. ``full`` (Chen et al.
    2016; Megatron's ``--recompute-granularity full``): a layer — one
    iteration of a top-level repeat group — keeps only its input (the
    carried tensor), and at model scope one layer's activations are live
    again while it is recomputed (the largest layer's, ``recompute none``).
``attention``
    ``eager`` — the operators as written. ``flash`` (Dao et al. 2022): no
    s × s tensor is kept — the attention core is recomputed as under
    ``selective`` — and the kernel keeps a log-sum-exp per query row and head
    in fp32 (4 bytes × the rows of QKᵀ); its output is the scores·V product,
    already counted where the next operator keeps it.
``t``, ``sp``
    tensor parallelism of degree ``t`` and sequence parallelism, derived from
    the graph by :func:`costgraph.parallel.tensor.tensor_parallel`.

For GPT these give every row of Korthikanti et al. 2022 Table 2 exactly
(tests/test_activations.py).
"""

from __future__ import annotations

import sympy

from .graph import CostGraph
from .parallel.tensor import tensor_parallel
from .precision import Precision
from .totals import Scope, _rel, breakdown, expand_sum

RECOMPUTE = ("none", "selective", "full")
ATTENTION = ("eager", "flash")


def attention_cores(cg: CostGraph) -> list[tuple[str, list[str]]]:
    """Each attention core of the graph: ``(first product, [nodes])`` — a
    ``matmul`` of two activations (QKᵀ) and the operators on every path from
    it to the next ``matmul`` (scale, softmax, dropout), that one excluded."""
    consumers: dict[str, list[str]] = {}
    for producer, consumer, _, _ in cg.edges:
        consumers.setdefault(producer, []).append(consumer)
    cores, seen = [], set()
    for path, d in cg.ops():
        if d["kind"] != "matmul" or path in seen:
            continue
        core, stack, found = [path], list(consumers.get(path, ())), False
        visited = {path}
        while stack:
            n = stack.pop()
            if n in visited:
                continue
            visited.add(n)
            if cg.nodes[n]["kind"] == "matmul":
                seen.add(n)
                found = True
                continue
            core.append(n)
            stack.extend(consumers.get(n, ()))
        if found:
            cores.append((path, core))
    return cores


def _produced(cg: CostGraph, nodes) -> set[str]:
    nodes = set(nodes)
    return {tid for tid, ten in cg.tensors.items() if ten.producer in nodes and tid not in cg.nodes}


def activation_bytes(cg: CostGraph, scope: Scope, precision: Precision, *, t=1, sp: bool = False,
                     recompute: str = "none", attention: str = "eager") -> sympy.Expr:
    """Bytes of activations one device keeps for backward in ``scope`` (per
    instance of the scope, as :mod:`costgraph.totals`), under the settings of
    the module docstring. ``t`` an int or a SymPy symbol.

    Raises
    ------
    ValueError
        Unknown ``recompute`` or ``attention`` (the callers check first).
    """
    if recompute not in RECOMPUTE or attention not in ATTENTION:
        raise ValueError((recompute, attention))
    tp = tensor_parallel(cg, t, sp) if t != 1 else None
    cores = attention_cores(cg)
    dropped: set[str] = set()
    if recompute == "selective" or attention == "flash":
        dropped |= _produced(cg, [n for _, core in cores for n in core])
    top = [g for p, g in cg.groups.items() if "/" not in p]
    if recompute == "full":
        carried = {f"{g.path}/{name}@in" for g in top for name in g.carried}
        inside = [p for p, _ in cg.ops() if any(p.startswith(g.path + "/") for g in top)]
        for p in inside:
            for tid in cg.nodes[p]["cost"].saved:
                sid = cg.tensors[tid].storage
                if sid not in carried:
                    dropped.add(sid)

    def share(sid):
        if sid in dropped:
            return None
        return 1 if tp is None else 1 / tp.tensor_divisor(sid)

    rows = breakdown(cg, scope, "matmul", precision, leaves_only=True, share=share)
    total = expand_sum([r["count"] * r["activation_bytes"] for r in rows])
    if attention == "flash":   # fp32 log-sum-exp per row of QKᵀ
        extra = []
        for first, _ in cores:
            if not scope.contains(first):
                continue
            d = cg.nodes[first]
            out = cg.tensors[d["outputs"][0]]
            div = 1 if tp is None else tp.tensor_divisor(out.id)
            extra.append(_rel(d["active"], scope.per_active) * 4 * out.numel / out.shape[-1] / div)
        total = expand_sum([total, *extra])
    if recompute == "full" and scope.prefix == "":
        live = [activation_bytes(cg, Scope(g.path, g.path, g.multiplicity, g.active_multiplicity), precision,
                                 t=t, sp=sp, recompute="none", attention=attention) for g in top]
        if live:
            total = expand_sum([total, sympy.Max(*live) if len(live) > 1 else live[0]])
    return total
