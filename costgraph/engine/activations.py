"""Activation memory of one device in training: recomputation, attention
implementation, tensor and sequence parallelism — an analysis over the graph.

What a device keeps for the backward pass is the graph's saved storages
(:func:`costgraph.engine.totals.breakdown`), less what is recomputed, each divided
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
``c``
    context parallelism (Megatron-LM ``--context-parallel-size``): every
    tensor with a sequence axis is divided by ``c`` (each device holds its
    ``s/c`` queries; the K/V chunks it receives in turn are not kept).

For GPT these give every row of Korthikanti et al. 2022 Table 2 exactly
(tests/test_activations.py).
"""

from __future__ import annotations

import sympy

from .graph import CostGraph
from ..parallel.tensor import sequence_dims, tensor_parallel
from .precision import Precision
from .totals import MODEL_SCOPE, Scope, _rel, breakdown, expand_sum

from ..choices import ATTENTION as _ATTENTION, RECOMPUTE as _RECOMPUTE

RECOMPUTE = _RECOMPUTE.values
ATTENTION = _ATTENTION.values


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


def activation_rows(cg: CostGraph, precision: Precision, *, t=1, sp: bool = False, c=1,
                    recompute: str = "none", attention: str = "eager", tp=None, drop=(), extra=()):
    """The model-scope leaf rows (:func:`costgraph.engine.totals.breakdown`) of what one
    device keeps, and the extras kept beside the graph's storages:
    ``(rows, extras)`` with ``extras`` = [(path, active copies, bytes of one
    instance)]: flash attention's log-sum-exp (path of QKᵀ), and under full
    recomputation each layer's carried input where no operator keeps it
    itself (the ``pytorch`` profile's RMSNorm keeps only its fp32 copy).

    ``c``: context parallelism, every storage with a sequence axis divided by
    ``c``. ``tp``: a :class:`~costgraph.parallel.tensor.TensorParallel` already
    derived for ``t`` and ``sp`` (derived here when omitted). ``drop``:
    storage ids not kept for another reason (a frozen LoRA base's inputs,
    :mod:`costgraph.training.lora`). ``extra``: more ``(path, active, bytes)``
    to keep (LoRA adapters), recomputed like the rest under ``full``.
    """
    if recompute not in RECOMPUTE or attention not in ATTENTION:
        raise ValueError((recompute, attention))
    if tp is None and t != 1:
        tp = tensor_parallel(cg, t, sp)
    seq = sequence_dims(cg) if c != 1 else []
    cores = attention_cores(cg)
    dropped: set[str] = set(drop)
    if recompute == "selective" or attention == "flash":
        dropped |= _produced(cg, [n for _, core in cores for n in core])
    top = [g for p, g in cg.groups.items() if "/" not in p]
    carried = {f"{g.path}/{name}@in" for g in top for name in g.carried}
    if recompute == "full":
        inside = [p for p, _ in cg.ops() if any(p.startswith(g.path + "/") for g in top)]
        for p in inside:
            for tid in cg.nodes[p]["cost"].saved:
                sid = cg.tensors[tid].storage
                if sid not in carried:
                    dropped.add(sid)

    def divisor(tid):
        div = sympy.Integer(1) if tp is None else tp.tensor_divisor(tid)
        if seq and any(any(d == q or sympy.expand(d - q) == 0 for q in seq) for d in cg.tensors[tid].shape):
            div = div * c
        return div

    def share(sid):
        return None if sid in dropped else sympy.Integer(1) / divisor(sid)

    rows = breakdown(cg, MODEL_SCOPE, "matmul", precision, leaves_only=True, share=share)
    extras = []
    if attention == "flash" and recompute != "full":   # fp32 log-sum-exp per row of QKᵀ (recomputed under full)
        for first, _ in cores:
            out = cg.tensors[cg.nodes[first]["outputs"][0]]
            extras.append((first, cg.nodes[first]["active"], 4 * out.numel / out.shape[-1] / divisor(out.id)))
    if recompute == "full":   # each layer keeps its input, whoever else keeps it or not
        kept = {cg.tensors[tid].storage for _, d in cg.ops() for tid in d["cost"].saved}
        for sid in sorted(carried - kept - dropped):
            ten = cg.tensors[sid]
            extras.append((sid, ten.active, ten.numel * precision.bytes(ten.role) / divisor(sid)))
    else:
        extras.extend(extra)
    return rows, extras




def layer_activation_bytes(cg: CostGraph, group, rows, extras) -> sympy.Expr:
    """Bytes of one iteration of repeat ``group`` from :func:`activation_rows`'s output."""
    inside = [(_rel(r["count"], group.multiplicity), r["activation_bytes"]) for r in rows
              if r["path"].startswith(group.path + "/")]
    extra = [(_rel(active, group.active_multiplicity), x) for p, active, x in extras
             if p.startswith(group.path + "/")]
    return expand_sum([n * x for n, x in inside + extra])


def activation_bytes(cg: CostGraph, scope: Scope, precision: Precision, *, t=1, sp: bool = False, c=1,
                     recompute: str = "none", attention: str = "eager") -> sympy.Expr:
    """Bytes of activations one device keeps for backward in ``scope`` (per
    instance of the scope, as :mod:`costgraph.engine.totals`), under the settings of
    the module docstring. ``t`` and ``c`` ints or SymPy symbols.

    Raises
    ------
    ValueError
        Unknown ``recompute`` or ``attention`` (the callers check first).
    """
    rows, extras = activation_rows(cg, precision, t=t, sp=sp, c=c, recompute=recompute, attention=attention)
    inside = [r for r in rows if scope.contains(r["path"])]
    total = expand_sum([_rel(r["count"], scope.per) * r["activation_bytes"] for r in inside]
                       + [_rel(active, scope.per_active) * x for p, active, x in extras if scope.contains(p)])
    top = [g for p, g in cg.groups.items() if "/" not in p]
    if recompute == "full" and scope.prefix == "" and top:
        live_rows, live_extras = activation_rows(cg, precision, t=t, sp=sp, c=c, recompute="none",
                                                 attention=attention)
        lives = [layer_activation_bytes(cg, g, live_rows, live_extras) for g in top]
        total = expand_sum([total, sympy.Max(*lives) if len(lives) > 1 else lives[0]])
    return total
