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
(tests/engine/test_activations.py).
"""

from __future__ import annotations

import sympy

from .graph import CostGraph
from ..parallel.tensor import sequence_dims, tensor_parallel
from .precision import Precision
from .recompute import attention_regions, recompute_plan
from .totals import MODEL_SCOPE, Scope, _rel, breakdown, expand_sum

from ..choices import ATTENTION as _ATTENTION, RECOMPUTE as _RECOMPUTE

RECOMPUTE = _RECOMPUTE.values
ATTENTION = _ATTENTION.values


def attention_cores(cg: CostGraph) -> list[tuple[str, list[str]]]:
    """Each attention core of the graph: ``(first product, [nodes])`` — a
    ``matmul`` of two activations (QKᵀ) and the operators on every path from
    it to the next ``matmul`` (scale, softmax, dropout), that one excluded
    (:func:`costgraph.engine.recompute.attention_regions` gives it too)."""
    return [(core[0], core) for core, _ in attention_regions(cg)]


def activation_rows(cg: CostGraph, precision: Precision, *, t=1, sp: bool = False, c=1,
                    recompute: str = "none", attention: str = "eager", tp=None, drop=(), extra=(), plan=None):
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
    to keep (LoRA adapters), recomputed like the rest in checkpointed layers.
    ``plan``: the :class:`~costgraph.engine.recompute.RecomputePlan` of the
    policy (Megatron modules, layer counts, torchtitan SAC; derived from the
    name ``recompute`` when omitted).
    """
    if recompute not in RECOMPUTE or attention not in ATTENTION:
        raise ValueError((recompute, attention))
    if tp is None and t != 1:
        tp = tensor_parallel(cg, t, sp)
    if plan is None:
        plan = recompute_plan(cg, recompute, attention)
    seq = sequence_dims(cg) if c != 1 else []
    cores = attention_cores(cg)
    dropped: set[str] = set(drop)

    def divisor(tid):
        div = sympy.Integer(1) if tp is None else tp.tensor_divisor(tid)
        if seq and any(any(d == q or sympy.expand(d - q) == 0 for q in seq) for d in cg.tensors[tid].shape):
            div = div * c
        return div

    grouped = _kv_grouped(cg) if attention == "flash" else {}

    def share(sid):
        kept = None if sid in dropped else plan.share(sid)
        if kept is None or sid not in grouped:
            return None if kept is None else kept / divisor(sid)
        # the grouped input's part on this device: one head when TP replicates the K/V heads (t > kv)
        src = cg.tensors[grouped[sid]]
        return kept * src.numel / divisor(src.id) / cg.tensors[sid].numel

    rows = breakdown(cg, MODEL_SCOPE, "matmul", precision, leaves_only=True, share=share)
    extras = []
    # a flash kernel's fp32 log-sum-exp per row of QKᵀ, in the layers not checkpointed (torchtitan's op SAC
    # caches it with the SDPA output)
    lse = sympy.Integer(1) if plan.policy == "torchtitan-op" else sympy.Integer(1) - plan.layer_share
    if attention == "flash" and lse != 0:
        for first, _ in cores:
            out = cg.tensors[cg.nodes[first]["outputs"][0]]
            extras.append((first, cg.nodes[first]["active"], lse * 4 * out.numel / out.shape[-1] / divisor(out.id)))
    for sid, kept in plan.extras:   # a checkpoint's input (or cached output) that no operator keeps
        if sid in dropped:
            continue
        ten = cg.tensors[sid]
        extras.append((sid, ten.active, kept * ten.numel * precision.bytes(ten.role) / divisor(sid)))
    rest = sympy.Integer(1) - plan.layer_share
    extras.extend((p, a, rest * x) for p, a, x in extra if rest != 0)
    return rows, extras




def _kv_grouped(cg: CostGraph) -> dict[str, str]:
    """Storage id → the tensor a fused attention kernel keeps instead: the outputs of the
    ``kv_expand`` operators (``repeat_kv``), which FlashAttention 2+ and cuDNN/TE fused
    attention never materialize (they read K and V with their grouped heads: FlashAttention's
    ``flash_attn_func`` takes ``k``/``v`` of ``nheads_k`` heads, Dao 2023 §3; TE's
    ``DotProductAttention(num_gqa_groups=...)``); what is kept is the input, ``kv/a`` of it
    (per device: the input's own TP divisor, ``kv`` when TP replicates the K/V heads)."""
    from ..ops.registry import has_role

    out = {}
    for path, d in cg.ops():
        if has_role(d["kind"], "kv_expand") and d["inputs"] and d["outputs"]:
            src, dst = cg.tensors[d["inputs"][0]], cg.tensors[d["outputs"][0]]
            if dst.storage == dst.id and dst.numel != 0:
                out[dst.id] = src.id
    return out


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
    plan = recompute_plan(cg, recompute, attention)
    rows, extras = activation_rows(cg, precision, t=t, sp=sp, c=c, recompute=recompute, attention=attention,
                                   plan=plan)
    inside = [r for r in rows if scope.contains(r["path"])]
    total = expand_sum([_rel(r["count"], scope.per) * r["activation_bytes"] for r in inside]
                       + [_rel(active, scope.per_active) * x for p, active, x in extras if scope.contains(p)])
    top = [g for p, g in cg.groups.items() if "/" not in p]
    if plan.live != 0 and scope.prefix == "" and top:
        live_rows, live_extras = activation_rows(cg, precision, t=t, sp=sp, c=c, recompute="none",
                                                 attention=attention)
        lives = [layer_activation_bytes(cg, g, live_rows, live_extras) for g in top]
        total = expand_sum([total, plan.live * (sympy.Max(*lives) if len(lives) > 1 else lives[0])])
    return total
