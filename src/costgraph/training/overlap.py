"""Communication overlapped with computation the way each framework overlaps it: the exposed
seconds of each collective kind (:mod:`costgraph.parallel.communication`) beside the compute.

A **convention** (``layout.overlap``, :data:`costgraph.choices.OVERLAP`) names, per kind, the rule
its framework runs; :func:`overlaps` returns one :class:`KindOverlap` per kind, each

    exposed = fixed + Σ_j max(0, H_j − w_j · C_j)

with ``fixed`` the part no computation can hide (a first or last chunk, bucket or layer), ``H_j``
seconds that run beside ``w_j`` of the compute ``C_j`` (the forward, the backward or the whole
step of the device's compute), and ``hidden = seconds − exposed``. The kinds' rules are
independent (each runs on its own stream, TP and CP usually on the scale-up link, DP on its own
group): each may hide behind the same compute. EP's all-to-all follows ``layout.ep_overlap``
(:func:`costgraph.parallel.ep_time.ep_exposed`, the same formula; under ``megatron`` three hides per layer pair of
Megatron's combined 1F1B, :func:`costgraph.parallel.ep_time.megatron_hides`, each beside its node's share of the
compute, :func:`ep_node_shares`) under every convention.

Forward and backward compute: under the per-kernel time model (:mod:`costgraph.training.kernel_time`)
``C_f`` is the seconds of the forward kernels and ``C_b = compute − C_f`` the backward kernels' and the
recomputation's (run inside the backward pass), each kernel at its own shape's efficiency. Under a
flat rate, the forward is a third of the model FLOPs (backward = twice the forward for every matrix
product: dX and dW; Narayanan et al. 2021 §5.1), the backward the rest of the hardware FLOPs
(recomputation included): ``C_f = compute · model/(3 · hardware)``, ``C_b = compute − C_f``.

Rules (``megatron`` is what the Megatron-Bridge/NeMo performance recipes run; ``torchtitan`` its
defaults; ``none`` leaves every collective exposed, Megatron-LM without the overlap flags):

``tp`` — ``userbuffers`` (``megatron``; Megatron ``--tp-comm-overlap``, Transformer Engine
    userbuffers). TransformerEngine@d0067d0d:transformer_engine/pytorch/module/base.py::initialize_ub
    splits each collective into chunks overlapped with its GEMM: ``ring_exchange`` (``num_splits = t``)
    for the all-gathers of a column-parallel input (qkv_fprop, fc1_fprop) and of a row-parallel
    output's gradient (proj_dgrad, fc2_dgrad): one of its ``t`` steps exposed; ``pipeline``
    (``num_splits = 4``) for a row-parallel output's reduce-scatter (proj_fprop, fc2_fprop): the
    last of 4 chunks exposed; ``bulk`` for a column-parallel input's gradient reduce-scatter
    (qkv_dgrad, fc1_dgrad, under the weight-gradient GEMM) and the input gathered again for the
    weight gradient (qkv_wgrad, fc1_wgrad, under the input-gradient GEMM): all of it beside the
    GEMM. The rest (forward within ``C_f``, backward within ``C_b``) is hidden when the compute is
    long enough. Megatron-LM@d98e8a64:megatron/training/arguments.py (validate_args) asserts
    sequence parallelism with ``tp_comm_overlap`` (Megatron-Bridge@067f987d:
    src/megatron/bridge/training/comm_overlap.py::_get_model_comm_overlap_cfgs disables it at
    TP < 2 or without SP): without SP every TP collective is exposed, as are the vocabulary-parallel
    embedding's and cross-entropy's and the SP-replicated weights' gradient all-reduce.
    ``exposed`` under ``torchtitan`` (async TP is off by default) and ``none``.
``dp_grads``, ``zero_reduce_scatter`` — ``buckets``: the gradients reduced bucket by bucket as the
    backward produces them (Megatron-LM@d98e8a64:megatron/core/distributed/param_and_grad_buffer.py
    ::register_grad_ready, start_grad_sync; ``overlap_grad_reduce``), during the last micro-batch's
    backward (``is_last_microbatch``): the last bucket exposed, the rest within ``calls/m`` of the
    backward (ZeRO-2 reduces every micro-batch: all of it). Bucket ``B`` parameters:
    Megatron-Bridge@067f987d:comm_overlap.py::_get_optimizer_overlap_cfgs sets
    ``bucket_size = 128·2²⁰`` with DP > 1 (``megatron``); PyTorch DDP's ``bucket_cap_mb = 25``
    (MiB of gradients; torchtitan's ``replicate``) for ``torchtitan``. The last bucket's share:
    ``min(1, B/E)`` of the ``E`` elements reduced.
``zero_all_gather`` — ``param_gather`` (``megatron``; ``overlap_param_gather``,
    Megatron-LM@d98e8a64:megatron/core/distributed/distributed_data_parallel_config.py): the
    distributed optimizer's parameter all-gather bucket by bucket during the next step's first
    forward: the first bucket exposed, the rest within ``1/m`` of the forward. ``exposed``
    otherwise (torchtitan has no ZeRO-1/2).
``fsdp`` — ``prefetch`` (``megatron`` and ``torchtitan``: torchtitan@b5bcd76c:
    torchtitan/distributed/fsdp.py::apply_fsdp_to_decoder wraps each block with FSDP2's
    ``fully_shard``, whose all-gather of the next block is issued while the current one computes;
    Megatron FSDP the same): per micro-batch the first unit's forward gather, the first unit's
    backward gather and the last unit's gradient reduce-scatter are exposed; each other unit's
    gather (forward) or gather + reduce-scatter (backward) runs beside one unit's compute:
    ``Σ max(0, g − c)`` over the ``U − 1`` others, with ``U`` the stage's units
    (:meth:`~costgraph.parallel.placement.StageView.units`) and the bytes and compute averaged over
    them (as :mod:`costgraph.parallel.communication` averages the gathered bytes). HSDP's
    all-reduce across replicas is exposed.
``pp`` — ``p2p_overlap`` (``megatron`` with the interleaved schedule: Megatron-Bridge turns on
    ``overlap_p2p_comm`` when ``v > 1``; Megatron-LM@d98e8a64:megatron/core/pipeline_parallel/
    schedules.py::forward_backward_pipelining_with_interleaving posts the steady phase's sends and
    receives asynchronously beside the next chunk's compute, the warm-up and flush not, unless
    ``overlap_p2p_comm_warmup_flush``): ``w/N`` exposed (``w`` the first stage's warm-up chunks,
    :func:`costgraph.parallel.ep_time.warmup_chunks`, ``N = m·v``), the rest within ``(N − w)/N``
    of the step's compute. ``exposed`` with 1F1B (Megatron sets ``overlap_p2p_comm = False`` outside
    the interleaved schedule: arguments.py) and under ``torchtitan`` and ``none``. ``dualpipe``: hidden
    within the step's compute (DeepSeek-V3 technical report, arXiv 2412.19437 §3.2.1: DualPipe overlaps a
    forward and a backward chunk, "we can ensure that both all-to-all and PP communication can be fully
    hidden during execution"), as ``ep_overlap = "dualpipe"`` hides the EP all-to-all.
``cp`` — ``ring`` (``megatron`` and ``torchtitan``): TransformerEngine@d0067d0d:transformer_engine/
    pytorch/attention/dot_product_attention/context_parallel.py::AttnFuncWithCPAndKVP2P sends each
    K/V block to the next rank while the attention of the current block runs: ``c − 1`` transfers
    each beside one of the ``c`` blocks, ``Σ max(0, transfer − block)`` = ``max(0, T − (c−1)/c ·
    a · C)`` with ``a`` the attention products' share of the model's FLOPs (QKᵀ and scores·V of the
    graph's attention cores); the same for dK/dV in backward. ``exposed`` under ``none``, and under every
    convention with ``cp_comm_type = "all_gather"`` (Megatron-LM @ d98e8a64 transformer_config.py
    ``cp_comm_type``: "The all-gather is not async, and cannot be overlapped").
``tied_embedding`` — exposed (an all-reduce after the backward, in finalize_model_grads).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import sympy

from ..choices import OVERLAP
from ..engine.symbols import as_expr
from ..parallel.collectives import Collective
from ..parallel.communication import comm_time
from ..parallel.ep_time import megatron_hides, warmup_chunks
from .contention import share

Expr = sympy.Expr
ZERO = sympy.Integer(0)
ONE = sympy.Integer(1)
PHASES = ("forward", "backward", "step")


def smax(a, b):
    """``Max(a, b)`` left unevaluated until its arguments are numbers: SymPy 1.14's assumptions
    misjudge signs of such terms (``(5/(x·y) − 1).is_positive`` is True for positive integers
    ``x``, ``y``), which would drop a branch while the sizes are still symbols.

    ``smax(0, X)`` with ``X`` an operation (every overlap rule's ``max(0, H − w·C)``) is built as
    ``Max(0, X, evaluate=False)`` is, without its sort of the arguments (``sympy.core.sorting.ordered``
    counts every node of ``X`` to put the smaller tree first: 0 is always first; it was a fifth of the
    calculator page's step-time CPU): the same object (``tests/training/test_overlap.py``)."""
    a, b = sympy.sympify(a), sympy.sympify(b)
    if a is ZERO and b.args:   # 0 (one node) before any operation (two nodes or more): Max's own order
        obj = sympy.Expr.__new__(sympy.Max, a, b)
        obj._argset = frozenset((a, b))   # what MinMaxBase.__new__ sets beside the arguments
        return obj
    return sympy.Max(a, b, evaluate=False)

#: the rule of each kind under each convention (module docstring); EP follows ``layout.ep_overlap``
RULES = {
    "megatron": {"tp": "userbuffers", "dp_grads": "buckets", "zero_reduce_scatter": "buckets",
                 "zero_all_gather": "param_gather", "fsdp": "prefetch", "pp": "p2p_overlap", "cp": "ring"},
    "torchtitan": {"dp_grads": "buckets", "zero_reduce_scatter": "buckets", "fsdp": "prefetch", "cp": "ring"},
    "none": {},
}
#: gradient bucket of a convention, in parameters (module docstring)
MEGATRON_BUCKET = 128 * 2**20       # Megatron-Bridge comm_overlap.py: bucket_size = 128 * 1024 * 1024
DDP_BUCKET_BYTES = 25 * 2**20       # PyTorch DDP bucket_cap_mb = 25 (MiB)


@dataclass(frozen=True)
class Hide:
    """``seconds`` of a kind that run beside ``weight`` × the compute of ``phase``."""

    seconds: Expr
    weight: Expr
    phase: str


@dataclass(frozen=True)
class KindOverlap:
    """One kind's communication under a convention: ``rule`` (module docstring), ``seconds``
    (all of it), ``fixed`` (never hidden) and ``hides`` (:class:`Hide`)."""

    kind: str
    rule: str
    seconds: Expr
    fixed: Expr
    hides: tuple = ()
    #: seconds of compute lost per hidden second (:func:`costgraph.training.contention.share`; 0: none)
    share: Expr = ZERO

    def exposed(self, forward, backward, maximum=smax) -> Expr:
        """Exposed seconds beside ``forward`` and ``backward`` compute seconds; ``maximum``:
        ``smax`` (exact) or ``numpy.maximum`` (the planner's arrays)."""
        budget = {"forward": forward, "backward": backward, "step": forward + backward}
        out = self.fixed
        for h in self.hides:
            out = out + maximum(0, h.seconds - h.weight * budget[h.phase])
        return out

    def forms(self) -> list:
        """The expressions the value depends on besides the compute: ``[fixed, H, w, ...]``."""
        return [self.fixed] + [x for h in self.hides for x in (h.seconds, h.weight)]

    def rebuilt(self, values) -> "KindOverlap":
        """The same rule over ``values`` (the evaluated :meth:`forms`, in order)."""
        hides = tuple(Hide(values[1 + 2 * i], values[2 + 2 * i], h.phase) for i, h in enumerate(self.hides))
        return KindOverlap(self.kind, self.rule, self.seconds, values[0], hides, self.share)


@dataclass(frozen=True)
class Overlaps:
    """Every kind's :class:`KindOverlap` and the compute they overlap (``forward``, ``backward``
    seconds per device per step) under ``convention``."""

    convention: str
    kinds: dict
    forward: Expr
    backward: Expr

    def exposed(self, maximum=smax) -> dict:
        """Kind → exposed seconds (``maximum``: as :meth:`KindOverlap.exposed`)."""
        return {k: o.exposed(self.forward, self.backward, maximum) for k, o in self.kinds.items()}

    def total_exposed(self, maximum=smax):
        """Σ over the kinds of the exposed seconds (``maximum``: as :meth:`KindOverlap.exposed`). The sum
        starts from the first kind's value, not SymPy's zero: arrays stay NumPy's float arrays (SymPy's
        ``0 + array`` is an array of SymPy numbers, slow in every later operation)."""
        out = None
        for x in self.exposed(maximum).values():
            out = x if out is None else out + x
        return ZERO if out is None else out

    def mapped(self, fn) -> "Overlaps":
        """The same rules with ``fn`` applied to every value they depend on (the compute split,
        each kind's ``seconds``, ``fixed`` and its hides' seconds and weights): the planner maps
        its compiler, then the evaluated arrays; the confirmation a substitution of the sizes."""
        kinds = {k: KindOverlap(o.kind, o.rule, fn(o.seconds), fn(o.fixed),
                                tuple(Hide(fn(h.seconds), fn(h.weight), h.phase) for h in o.hides),
                                o.share if o.share is ZERO else fn(o.share))   # no contention: SymPy's 0 kept, not mapped
                 for k, o in self.kinds.items()}
        return Overlaps(self.convention, kinds, fn(self.forward), fn(self.backward))

    def replaced(self, other: "Overlaps", kinds) -> "Overlaps":
        """These rules with those of ``kinds`` taken from ``other`` (a kind absent there dropped):
        the planner's kinds that depend on the ZeRO stage (:data:`costgraph.training.plan_forms.BY_ZERO`)."""
        keep = {k: o for k, o in self.kinds.items() if k not in kinds}
        keep.update({k: o for k, o in other.kinds.items() if k in kinds})
        return Overlaps(self.convention, keep, self.forward, self.backward)


def phase(part) -> str:
    """``forward``, ``backward`` or ``step``: the parenthesized last word of a transfer's label."""
    tail = part.what.rsplit("(", 1)[-1].rstrip(")")
    return tail if tail in PHASES else "step"


def part_seconds(col: Collective, hardware, layout) -> list:
    """Seconds of each part of ``col`` (:func:`~costgraph.parallel.communication.comm_time` per part),
    each computed once per part and what ``comm_time`` reads of the layout (the planner's step times
    share most parts)."""
    L = layout.filled()
    gpus = L.gpus if L.gpus is not None else as_expr(L.t) * as_expr(L.p) * as_expr(L.c) * as_expr(L.d)
    out = []
    for p in col.parts:
        key = (col.kind, p, gpus, L.domain_ranks, L.route_nodes, L.link_rate, L.ep_dispatcher)   # all comm_time reads
        try:
            out.append(_part_seconds(hardware, key, layout))
        except TypeError:   # a part that cannot be hashed: computed directly
            out.append(comm_time({"x": Collective(col.kind, (p,))}, hardware, layout)["x"])
    return out


_PARTS: dict = {}


def _part_seconds(hardware, key: tuple, layout):
    got = _PARTS.get((hardware, key))
    if got is None:
        if len(_PARTS) >= 8192:
            _PARTS.clear()
        got = _PARTS[(hardware, key)] = comm_time({"x": Collective(key[0], (key[1],))}, hardware, layout)["x"]
    return got


def split_compute(compute, flops: dict, forward=None):
    """``(forward, backward)`` seconds of ``compute`` (module docstring). ``forward``: the forward
    kernels' seconds where the step time has them (the per-kernel model,
    :func:`costgraph.training.kernel_time.kernel_seconds` with ``phase="forward"``): that and the
    rest; None: the FLOP ratio ``compute · model/(3 · hardware)``."""
    if forward is not None:
        return forward, compute - forward
    model, hw = flops["model_per_device"], flops["hardware_per_device"]
    fwd = compute * model / (3 * hw) if hw != 0 else ZERO
    return fwd, compute - fwd


def overlaps(cg, collectives: dict, hardware, layout, placement, *, stage="first", compute, flops: dict,
             factors=None, forward=None, per_kernel: bool = False) -> Overlaps:
    """The :class:`Overlaps` of ``collectives`` on ``hardware`` under ``layout.overlap`` (module
    docstring); ``compute``: the device's compute seconds per step, ``flops``: its
    :func:`~costgraph.training.compute.training_flops`; ``forward``: the forward part of ``compute``
    where the time model has it per kernel (:func:`split_compute`; None: the FLOP ratio);
    ``factors``: a calibration's multipliers
    (:class:`~costgraph.training.calibration_profile.Factors`) of each kind's seconds, applied before
    the overlap rules; ``per_kernel``: the per-kernel time model runs the compute (each kind's contention
    share, :func:`costgraph.training.contention.share`, under ``layout.overlap_contention``).

    Raises
    ------
    CostgraphValueError
        ``ep_overlap = megatron`` where Megatron refuses it (:func:`~costgraph.parallel.ep_time.check_overlap`)."""
    L = layout
    conv = OVERLAP.check(L.overlap)
    fwd, bwd = split_compute(compute, flops, forward)
    ctx = _Ctx(cg, L, hardware, placement, stage)
    out = {}
    for kind, col in collectives.items():
        secs = part_seconds(col, hardware, L)
        if factors is not None:   # calibration: this kind's multiplier (costgraph.training.calibration)
            secs = [x * factors.scale_kinds({kind: 1})[kind] for x in secs]
        rule = "ep_overlap" if kind == "ep" else RULES[conv].get(kind, "exposed")
        if kind == "cp" and L.cp_comm_type == "all_gather":   # not async (module docstring)
            rule = "exposed"
        got = _RULES[rule](ctx, kind, col, secs)
        sigma = share(kind, L, hardware, per_kernel)
        out[kind] = replace(got, share=sigma) if sigma is not ZERO else got
    return Overlaps(conv, out, fwd, bwd)


@dataclass
class _Ctx:
    cg: object
    L: object
    hardware: object
    pl: object
    stage: object

    def m(self):
        return as_expr(self.L.m)


def _exposed(ctx, kind, col, secs) -> KindOverlap:
    total = sympy.Add(*secs)
    return KindOverlap(kind, "exposed", total, total)


def _userbuffers(ctx, kind, col, secs) -> KindOverlap:
    """TP overlap (module docstring): ring exchange 1/t exposed, pipeline 1/4, bulk none."""
    if not ctx.L.sp or as_expr(ctx.L.t) == 1:
        return KindOverlap(kind, "exposed (userbuffers need --sp)", sympy.Add(*secs), sympy.Add(*secs))
    rows = set(ctx.pl.tp.row) if ctx.pl.tp is not None else set()
    t = as_expr(ctx.L.t)
    fixed, hide = ZERO, {"forward": ZERO, "backward": ZERO}
    for p, s in zip(col.parts, secs):
        ph, who = phase(p), p.what.split(": ", 1)[0]
        if p.op == "reduce-scatter" and ph == "forward" and who in rows:
            k = sympy.Integer(4)                       # pipeline: proj_fprop, fc2_fprop
        elif p.op == "all-gather" and (" input of " in p.what or (ph == "backward" and who in rows)):
            k = t if "gathered again" not in p.what else None   # ring_exchange; the wgrad gather is bulk
        elif p.op == "reduce-scatter" and ph == "backward" and "its gradient" in p.what:
            k = None                                   # bulk: qkv_dgrad, fc1_dgrad
        else:
            fixed += s                                 # embedding, cross-entropy, replicated weights' grads
            continue
        if k is None:
            hide[ph] += s
        else:
            fixed += s / k
            hide[ph] += s * (1 - 1 / k)
    hides = tuple(Hide(h, ONE, ph) for ph, h in hide.items() if h != 0)
    return KindOverlap(kind, "userbuffers", sympy.Add(*secs), fixed, hides)


def _bucket(ctx, part) -> Expr:
    """Parameters in one gradient bucket under the convention (module docstring)."""
    if ctx.L.overlap == "torchtitan":
        return sympy.Integer(DDP_BUCKET_BYTES) / as_expr(part.dtype_bytes)
    return sympy.Integer(MEGATRON_BUCKET)


def _buckets(ctx, kind, col, secs, when="backward") -> KindOverlap:
    """Gradient reduce (or parameter gather) by bucket: one bucket exposed (module docstring)."""
    fixed, hides = ZERO, []
    for p, s in zip(col.parts, secs):
        last = _last_share(_bucket(ctx, p), as_expr(p.elements))
        fixed += s * last
        hides.append(Hide(s * (1 - last), as_expr(p.calls) / ctx.m(), when))
    rule = "param_gather" if when == "forward" else "buckets"
    return KindOverlap(kind, rule, sympy.Add(*secs), fixed, tuple(hides))


@functools.lru_cache(maxsize=1024)
def _last_share(bucket: Expr, elements: Expr) -> Expr:
    """``min(1, B/E)``, the last bucket's share of ``E`` elements (module docstring), unevaluated as
    :func:`smax` leaves its maximum; once per ``B`` and ``E`` (every step time of a layout asks again)."""
    return sympy.Min(ONE, bucket / elements, evaluate=False)


def _param_gather(ctx, kind, col, secs) -> KindOverlap:
    return _buckets(ctx, kind, col, secs, when="forward")


def _prefetch(ctx, kind, col, secs) -> KindOverlap:
    """ZeRO-3 / FSDP: the next unit's gather beside this unit's compute (module docstring)."""
    U = ctx.pl.stage(ctx.stage).units()
    fwd, bwd, fixed = ZERO, ZERO, ZERO
    for p, s in zip(col.parts, secs):
        if p.op == "all-reduce":                      # HSDP: across the replicas
            fixed += s
        elif phase(p) == "forward":
            fwd += s
        else:
            bwd += s
    rest = (U - 1) / U
    hides = tuple(Hide(h * rest, rest, ph) for h, ph in ((fwd, "forward"), (bwd, "backward")) if h != 0)
    return KindOverlap(kind, "prefetch", sympy.Add(*secs), fixed + (fwd + bwd) / U, hides)


def _p2p_overlap(ctx, kind, col, secs) -> KindOverlap:
    """PP sends under Megatron's overlap_p2p_comm (interleaved only; module docstring)."""
    total = sympy.Add(*secs)
    if ctx.L.schedule == "dualpipe":   # DeepSeek-V3 report §3.2.1: PP communication fully hidden
        return KindOverlap(kind, "dualpipe", total, ZERO, (Hide(total, ONE, "step"),))
    if ctx.L.schedule != "interleaved":
        return KindOverlap(kind, "exposed (overlap_p2p_comm needs the interleaved schedule)", total, total)
    N = as_expr(ctx.L.m) * as_expr(ctx.L.v)
    w = warmup_chunks(ctx.L)
    return KindOverlap(kind, "p2p_overlap", total, total * w / N, (Hide(total * (N - w) / N, (N - w) / N, "step"),))


def _ring(ctx, kind, col, secs) -> KindOverlap:
    """CP ring: each K/V block's transfer beside the previous block's attention (module docstring)."""
    c = as_expr(ctx.L.c)
    share = attention_share(ctx.cg) * (c - 1) / c
    hide = {"forward": ZERO, "backward": ZERO}
    for p, s in zip(col.parts, secs):
        hide["backward" if phase(p) == "backward" else "forward"] += s
    hides = tuple(Hide(h, share, ph) for ph, h in hide.items() if h != 0)
    return KindOverlap(kind, "ring", sympy.Add(*secs), ZERO, hides)


_SHARES: dict = {}   # id(graph) → (graph, share): the planner asks once per derived layout


def attention_share(cg) -> Expr:
    """The attention products' (QKᵀ and scores·V of each core) share of the model's forward
    matrix-product FLOPs (:func:`costgraph.engine.activations.attention_cores`)."""
    hit = _SHARES.get(id(cg))
    if hit is not None and hit[0] is cg:
        return hit[1]
    share = _attention_share(cg)
    if len(_SHARES) >= 8:   # a few graphs at a time: the cache keeps them alive
        _SHARES.clear()
    _SHARES[id(cg)] = (cg, share)
    return share


def _attention_share(cg) -> Expr:
    from ..engine.activations import attention_cores

    def flops(path):
        d = cg.nodes[path]
        return d["cost"].forward.under("matmul") * d["active"]

    products = set()
    for first, core in attention_cores(cg):
        products.add(first)
        outs = {o for n in core for o in cg.nodes[n]["outputs"]}
        nxt = next((q for q, dd in cg.ops() if dd["kind"] == "matmul" and q != first and dd["inputs"][0] in outs),
                   None)
        if nxt is not None:
            products.add(nxt)
    total = sympy.Add(*[flops(q) for q, _ in cg.ops()])
    return sympy.Add(*[flops(q) for q in products]) / total if total != 0 and products else ZERO


def _ep(ctx, kind, col, secs) -> KindOverlap:
    """EP all-to-all per ``layout.ep_overlap`` (:mod:`costgraph.parallel.ep_time`, "Overlap"): under
    ``megatron`` the nodes of each layer pair of the combined 1F1B (:func:`~costgraph.parallel.ep_time.megatron_hides`)."""
    total, mode = sympy.Add(*secs), ctx.L.ep_overlap
    if mode == "none":
        return KindOverlap(kind, "exposed (--ep-overlap none)", total, total)
    if mode == "dualpipe":
        return KindOverlap(kind, "ep_overlap dualpipe", total, ZERO, (Hide(total, ONE, "step"),))
    node = {"dispatch": [], "combine": [], "backward": []}
    for p, s in zip(col.parts, secs):
        node["backward" if phase(p) == "backward" else
             "combine" if p.what.split(": ", 1)[-1].startswith("combine") else "dispatch"].append(s)
    pre, mlp = ep_node_shares(ctx.cg, ctx.pl)
    fixed, hides = megatron_hides(*(sympy.Add(*node[k]) for k in ("dispatch", "combine", "backward")), pre, mlp,
                                  ctx.L)
    return KindOverlap(kind, "ep_overlap megatron", total, fixed, tuple(Hide(h, w, ph) for h, w, ph in hides))


_NODE_SHARES: dict = {}   # id(graph) → (graph, shares), as _SHARES


def ep_node_shares(cg, pl) -> tuple:
    """``(pre, mlp)``: the shares of the model's forward FLOPs (every operator's, × its active instances) that
    Megatron's ``pre_dispatch_computation`` nodes (the layers' operators outside the routed experts: attention,
    norms, router, shared experts, a dense layer's MLP) and ``mlp`` nodes (the routed experts,
    :meth:`~costgraph.parallel.placement.Placement.in_experts`) run (:mod:`costgraph.parallel.ep_time`,
    "Overlap"); the embedding, output layer and loss (outside the layers) in neither. Symbolic in the sizes."""
    hit = _NODE_SHARES.get(id(cg))
    if hit is not None and hit[0] is cg:
        return hit[1]
    pre, mlp, total = [], [], []
    for path, d in cg.ops():
        f = d["cost"].forward.under("all") * d["active"]
        total.append(f)
        if pl.in_experts(path):
            mlp.append(f)
        elif pl.in_layer(path):
            pre.append(f)
    T = sympy.Add(*total)
    shares = (sympy.Add(*pre) / T, sympy.Add(*mlp) / T) if T != 0 else (ZERO, ZERO)
    if len(_NODE_SHARES) >= 8:
        _NODE_SHARES.clear()
    _NODE_SHARES[id(cg)] = (cg, shares)
    return shares


_RULES = {"exposed": _exposed, "userbuffers": _userbuffers, "buckets": _buckets, "param_gather": _param_gather,
          "prefetch": _prefetch, "p2p_overlap": _p2p_overlap, "ring": _ring, "ep_overlap": _ep}
