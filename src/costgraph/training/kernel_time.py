"""Compute seconds per step by kernel — the per-operator time model of the step time.

An analysis over the graph and the layout's :class:`~costgraph.parallel.placement.Placement`:
every operator is timed as the kernel it runs on one device, with its per-device shape
after the TP/CP/EP/SP splits, and the seconds summed per device per step. Each
operator falls in one class (``compute_by_class`` of the step):

``matmul`` — GEMMs: ``linear`` (and a tied head), ``conv2d``/``conv3d``/``dense_conv1d``
    lowered to GEMM, and ``matmul`` of two activations outside a flash attention core.
    Per device the weight ``[N, K·…]`` is its shard (a column-parallel linear divides
    ``N`` by ``t``, a row-parallel one ``K``, as Megatron's ColumnParallelLinear and
    RowParallelLinear do; expert TP likewise), and ``M`` is the output's rows divided by
    CP (and by TP when SP splits the rows of a linear TP does not split). Each GEMM call
    of ``F = 2MNK`` FLOPs takes ``F/(P·η(M, N, K))`` seconds,
    :func:`costgraph.training.kernel_table.gemm_eta` (``t0 + F/(P·e)·(1 + k0/K)``). The
    input gradient (``M × K``, contraction ``N``) and the weight gradient (``N × K``,
    contraction ``M``) are GEMMs of their own shapes. Routed experts: one GEMM per local
    expert (``E/e`` per device) of ``M·k·e/E`` rows (perfect balance), launched as Transformer
    Engine's grouped GEMM does, on ``min(4, E/e)`` concurrent streams whose fixed times ``t0``
    overlap (:data:`TE_GEMM_STREAMS`): each call ``t0/min(4, E/e) + F/(P·e)·(1 + k0/K)``. An FP8 linear
    (:func:`costgraph.training.fp8.fp8_linears`) runs its three GEMMs at the FP8 peak with
    the table's FP8 fit (the BF16 fit where it has none: the rate's notes say so); with
    ``fp8_wgrad`` False (``--no-fp8-wgrad``) its weight gradient runs at the BF16 peak with
    the BF16 fit, as ``override_linear_precision`` makes TE run it.
``attention`` — a flash core (``--attention flash``, the default: QKᵀ, the mask, softmax,
    dropout and probs·V of :func:`costgraph.engine.recompute.attention_regions`) is one
    fused kernel: forward ``F_fwd/(P·η_fwd(S))``, backward ``(F_bwd + F_QKᵀ)/(P·η_bwd(S))``
    (the kernel recomputes QKᵀ: 2.5 × the forward's FLOPs, as FlashAttention's benchmarks
    count), ``S`` the keys of one kernel call (``s/c`` under CP: a ring step; ``Min(s/c, w)`` under a sliding
    window ``w``, the keys each query meets: cudnn-frontend's gpt-oss rows, window 128 and 1024, sit on the
    curves at ``S = w``, docs/step-time.md), with the curves of the
    layout's ``attention_kernel`` (:data:`costgraph.choices.ATTENTION_KERNEL`: cuDNN's fused attention by
    default, as Transformer Engine runs it; FlashAttention-3; PyTorch's FlashAttention-2;
    :func:`costgraph.training.kernel_table.attention_curves`). Under a
    causal mask the kernel skips the masked blocks: its FLOPs are the kept pairs'
    (:func:`costgraph.engine.totals.causal_share` as an area, whatever ``--causal`` counts).
    With ``fp8_attention`` (``--fp8-dot-product-attention``) under an FP8 policy the kernel's
    products run at the FP8 peak, on the table's FP8 attention curves (``attention_fp8_*``: cuDNN's FP8
    fused attention, which Transformer Engine's FP8 dot-product attention runs) where it has them, else
    with the BF16 kernel's η.
    The softmax and the other operators inside the core cost nothing apart. With eager
    attention the products are GEMMs and the rest memory-bound.
``memory`` — every other operator without matrix FLOPs (norms, softmax, activations,
    dropout, rotary, casts, residual adds, embedding lookups): ``t_m + bytes / hbm_bandwidth``
    per kernel, one kernel forward and one backward (``t_m`` the table's ``memory_launch_ns``,
    fitted with the bandwidth to measured kernels of several sizes; 0 on a table without them:
    :func:`costgraph.training.kernel_table.memory_seconds`).
    **Bytes**: the elements of each input and of each output that is not a view, at the
    bytes of its role under the layout's precision, each divided by the devices sharing it
    (TP/SP and CP, :meth:`Placement.tensor_divisor` and ``sequence_divisor``); the backward
    moves twice the forward's bytes (reads the output gradient and the saved inputs,
    writes the input gradients) when the operator has a backward. An operator whose
    outputs are all views (split, transpose, ...) runs no kernel.
``memory`` also holds **the loss**, which no operator of a model file is: the fp32
    cross-entropy over the logits as the layout's ``cross_entropy`` implementation runs it (its bytes per
    logit element the device holds, forward and backward: :mod:`costgraph.training.cross_entropy`),
    one row ``(loss: fp32 cross-entropy)``
    (:func:`costgraph.training.step_kernels.loss_seconds`; with ``layout.loss`` False, none),
    and under an FP8 policy Transformer Engine's **quantize kernels** of each FP8 linear's input
    and output gradient, one row ``PATH (fp8 quantize)`` per linear
    (:func:`costgraph.training.step_kernels.quantize_rows`).
``other`` — operators with matrix FLOPs that are no GEMM (selective scans, linear
    attention, depthwise convolutions): a roofline ``Max(F/(P·e), bytes/bandwidth)``.

**Recomputation** re-runs each operator's forward kernel (``rerun`` share of
:func:`costgraph.engine.recompute.recompute_plan`) at its own class rule. **Per device
per step**: the ``m`` micro-batches, the model's instances over ``p`` stages evenly
(the layers and the ops outside them alike, as the flat FLOP count divides them).
"""

from __future__ import annotations


import sympy

from ..engine.graph import numel
from ..engine.symbols import as_expr
from ..engine.totals import causal_share
from ..numbers.minmax import smax
from .kernel_table import KernelTable, attention_curves, gemm_seconds, rated
from .moe_kernels import permute_rows
from .step_kernels import loss_seconds, quantize_rows

ZERO = sympy.Integer(0)
ONE = sympy.Integer(1)
#: the classes of :func:`kernel_seconds`, in display order
CLASSES = ("matmul", "attention", "memory", "other")
#: operators timed as GEMMs (their weight ``[N, ...]`` gives N and K)
GEMM_KINDS = ("linear", "conv2d", "conv3d", "dense_conv1d")
#: the row of the loss (the fp32 cross-entropy over the logits, :mod:`costgraph.training.step_kernels`)
LOSS_PATH = "(loss: fp32 cross-entropy)"


def kernel_ops(cg, layout, table: KernelTable, peaks: dict) -> list[dict]:
    """One row per operator (program order): ``path``, ``kind``, ``class`` (:data:`CLASSES`),
    ``active`` (its active instances in the model), ``forward`` and ``backward`` (seconds of one
    active instance on one device, a flash core's recompute inside its backward) and ``rerun``
    (the share of its forward the recompute policy runs again). ``layout``: a
    :class:`~costgraph.parallel.layout.Layout` (filled here); ``peaks``: ``{"bf16": P}`` and, for
    an FP8 policy, ``"fp8"`` (module docstring)."""
    return _kernel_ops(cg, layout.filled(), table, peaks)[0]


def _kernel_ops(cg, L, table: KernelTable, peaks: dict) -> tuple[list[dict], tuple]:
    """:func:`kernel_ops`' rows of the filled layout ``L`` and the key of their times in the graph's cache
    (what they read besides the recompute policy's re-run shares)."""
    from ..engine.recompute import recompute_plan
    from ..parallel.placement import KEY_FIELDS

    plan = recompute_plan(cg, L, L.attention)
    table = rated(table, L.gemm_rate)   # --gemm-rate: the GEMM fits' efficiencies, sustained or isolated
    key = (table.preset, tuple(sorted(table.gemm.items())), tuple(sorted(table.attention.items())),
           table.hbm_bandwidth, table.memory_launch_ns, tuple(sorted(peaks.items())), L.precision, L.policy,
           L.attention,
           getattr(L, "fp8_attention", False), getattr(L, "fp8_wgrad", True), L.loss, L.fp8_transpose, L.cross_entropy,
           L.resolved("attention_kernel"), tuple(sorted(attention_curves(table, L.resolved("attention_kernel")).items()))
           if L.attention == "flash" else None, L.overlap, table.sm_count,
           tuple(sorted((table.attention_fp8 or {}).items()))) + \
        tuple(getattr(L, f) for f in KEY_FIELDS)
    times = _cached(cg, key, lambda: _times(cg, L, table, peaks))   # the same for every recompute policy
    return [{**row, "rerun": plan.rerun.get(closing, 0)} for row, closing in times], key


def _cached(cg, key, make):
    """``make()`` once per graph object and ``key``, in the graph's own cache (``CostGraph.memo``): the
    planner derives the step for every recompute policy and ZeRO stage of one split."""
    store = cg.memo("kernel_times")
    if key not in store:
        store[key] = make()
    return store[key]


def _times(cg, L, table, peaks) -> list:
    """``(row without rerun, the path whose re-run share applies)`` per operator (:func:`kernel_ops`)."""
    from ..engine.precision import precision as get_precision
    from ..engine.recompute import attention_regions
    from ..parallel.placement import placement
    from .fp8 import fp8_linears, policy_recipe

    ctx = _Ctx(cg, placement(cg, L), table, get_precision(L.precision), peaks)
    fp8 = fp8_linears(cg) if policy_recipe(L.policy) is not None else set()
    ctx.attention_dtype = "fp8" if fp8 and getattr(L, "fp8_attention", False) and "fp8" in peaks else "bf16"
    ctx.wgrad_fp8 = getattr(L, "fp8_wgrad", True)
    ctx.curves = attention_curves(table, L.resolved("attention_kernel")) if L.attention == "flash" else None
    if ctx.curves is not None and ctx.attention_dtype == "fp8" and table.attention_fp8:   # cuDNN's FP8 attention
        ctx.curves = table.attention_fp8
    ctx.ub = userbuffers_margin(L, table)
    cores = {}
    if L.attention == "flash":
        for core, closing in attention_regions(cg):
            cores.update({p: (core[0], closing) for p in [*core, closing]})
    rows = []
    for path, d in cg.ops():
        if path in cores:   # inside a flash kernel: its products carry the kernel's seconds
            first, closing = cores[path]
            fwd, back = ctx.flash(path, d, first) if d["kind"] == "matmul" else (ZERO, ZERO)
            cls = "attention"
        else:
            (cls, fwd, back), closing = ctx.op(path, d, "fp8" if path in fp8 else "bf16"), path
        rows.append(({"path": path, "kind": d["kind"], "class": cls, "active": d["active"], "forward": fwd,
                      "backward": back}, closing))
    if fp8:   # TE's quantize kernels of the FP8 linears' inputs and output gradients (step_kernels)
        rows += quantize_rows(cg, fp8, ctx.split, ctx.precision.bytes("act"), policy_recipe(L.policy),
                              L.fp8_transpose, table.hbm_bandwidth, ctx.tm)
    if ctx.pl.experts:   # the MoE token dispatch's permute/unpermute copies (costgraph.training.moe_kernels)
        rows += permute_rows(cg, ctx.pl, ctx.precision, table.hbm_bandwidth, GEMM_KINDS, ctx.tm)
    if L.loss and cg.outputs:   # the fp32 cross-entropy: no operator of the graph (costgraph.training.step_kernels)
        fwd, back = loss_seconds(cg, ctx.pl, table.hbm_bandwidth, L.cross_entropy, ctx.tm)
        rows.append(({"path": LOSS_PATH, "kind": "cross_entropy", "class": "memory", "active": ONE, "forward": fwd,
                      "backward": back}, LOSS_PATH))
    return rows


#: the SMs a userbuffers overlap of Transformer Engine's default configuration takes from the GEMM beside
#: it: TransformerEngine @ d0067d0d transformer_engine/pytorch/module/base.py::initialize_ub,
#: ``get_default_config``: ``num_sm = 1 if method == "ring_exchange" else 16``, ``set_sm_margin = not method ==
#: "ring_exchange"``; common/comm_gemm_overlap/comm_gemm_overlap.cpp: ``_math_sms = (set_sm_margin) ?
#: sm_count - num_comm_sm : sm_count``, the SMs the overlapped GEMM is launched on
UB_COMM_SMS = 16
#: the streams Transformer Engine's grouped GEMM of the local experts (``GroupedLinear`` →
#: ``general_grouped_gemm`` → ``nvte_multi_tensor_gemm``, whose default on every GPU is
#: ``multi_stream_cublas_gemm``: ``NVTE_USE_CUTLASS_GROUPED_GEMM`` off) launches the experts' GEMMs on,
#: ``i % num_streams``: TransformerEngine @ d0067d0d transformer_engine/common/util/multi_stream.cpp
#: (``static constexpr int num_compute_streams = 4``), common/gemm/cublaslt_gemm.cu (``multi_stream_cublas_gemm``).
#: The fixed time ``t0`` of each expert GEMM overlaps with those of the other streams: ``t0/min(4, E/e)``
TE_GEMM_STREAMS = 4


def userbuffers_margin(L, table: KernelTable) -> sympy.Expr:
    """The factor ``N/(N − 16)`` on the seconds of the GEMMs a userbuffers overlap runs beside (``N``
    the device's SMs, ``kernels.toml`` ``sm_count``; 16 :data:`UB_COMM_SMS`): under the ``megatron``
    overlap with SP and TP ≥ 2 (Megatron's ``--tp-comm-overlap``), TE's default ``pipeline`` method
    (``proj_fprop``, ``fc2_fprop``: a row-parallel linear's forward) and ``bulk`` method
    (``qkv_dgrad``, ``qkv_wgrad``, ``fc1_dgrad``, ``fc1_wgrad``: a column-parallel linear's input and
    weight gradients) launch their GEMM on the SMs the communication kernel leaves; ``ring_exchange``
    (copy engines) leaves them all. Inside the layers only (the output layer is no TE module), never
    for routed experts. 1 elsewhere, and on a table without ``sm_count``."""
    if L.overlap != "megatron" or not L.sp or as_expr(L.t) == 1 or table.sm_count is None:
        return ONE
    return sympy.Rational(table.sm_count, table.sm_count - UB_COMM_SMS)


def kernel_seconds(cg, layout, table: KernelTable, peaks: dict, phase: str = "step", expand: bool = True) -> dict:
    """Seconds per device per step of each class of :data:`CLASSES` (module docstring): for each
    operator of :func:`kernel_ops`, ``active × (forward × (1 + rerun) + backward)``, times the
    ``m`` micro-batches over the ``p`` stages. ``phase``: ``step`` (all of it), ``forward`` (the
    forward kernels, ``active × forward``) or ``backward`` (the rest: the backward kernels and the
    recomputation, which Megatron and torchtitan run inside the backward pass); the forward and
    backward of a class sum to its step. The overlap model (:mod:`costgraph.training.overlap`)
    hides communication behind the forward and backward seconds. ``expand=False``: each class's sum
    times ``m / p`` as it is, not expanded (the same value at numbers, without SymPy's expand of the
    long sums: the planner's confirmation, which evaluates it at the layout's numbers,
    :mod:`costgraph.training.plan_confirm`)."""
    L = layout.filled()
    share = {"step": lambda r: r["forward"] * (1 + r["rerun"]) + r["backward"],
             "forward": lambda r: r["forward"],
             "backward": lambda r: r["forward"] * r["rerun"] + r["backward"]}[phase]
    rows, key = _kernel_ops(cg, L, table, peaks)
    # the sums once per operator times, re-run shares, phase, m and p (the calculator page and the planner ask
    # again for every ZeRO stage and optimizer): the graph's own cache
    # (the forward reads no re-run share: one sum for every recompute policy)
    key = (key, tuple(r["rerun"] for r in rows) if phase != "forward" else None, phase, L.m, L.p, expand)
    store = cg.memo("kernel_seconds")
    if key in store:
        return dict(store[key])
    if phase == "step" and expand:
        # the step's expansion is the forward's (asked for too: the overlap hides communication behind it) plus
        # the backward's: SymPy's expand of a sum is the sum of its terms' expansions, the same canonical Add
        # while the coefficients are exact (a Float's rounding depends on the order of its terms: then whole)
        fw, bw = (kernel_seconds(cg, L, table, peaks, phase=x) for x in ("forward", "backward"))
        if not any(x.has(sympy.Float) for x in (*fw.values(), *bw.values())):
            store[key] = {k: fw[k] + bw[k] for k in CLASSES}
            return dict(store[key])
    out = {k: [] for k in CLASSES}
    for r in rows:
        out[r["class"]].append(r["active"] * share(r))
    per = as_expr(L.m) / as_expr(L.p)
    tidy = sympy.expand if expand else (lambda e: e)
    store[key] = {k: tidy(per * sympy.Add(*v)) for k, v in out.items()}
    return dict(store[key])


class _Ctx:
    """What the per-operator rules read: the graph, the placement, the table, bytes per role, the peaks."""

    def __init__(self, cg, pl, table, precision, peaks):
        self.cg, self.pl, self.table, self.precision, self.peaks = cg, pl, table, precision, peaks
        self.bw = sympy.Integer(table.hbm_bandwidth)
        self.tm = sympy.Rational(table.memory_launch_ns, 10**9)   # a memory-bound kernel's fixed seconds
        self.c = pl.degree("c")
        self.attention_dtype, self.wgrad_fp8 = "bf16", True   # --fp8-dot-product-attention, --no-fp8-wgrad
        self.ub = ONE   # userbuffers' SM margin of the TP-overlapped GEMMs (userbuffers_margin)

    def split(self, tid):
        return self.pl.tensor_divisor(tid) * self.pl.sequence_divisor(tid)

    def bytes_of(self, d) -> sympy.Expr:
        """Bytes one device reads and writes in the operator's forward (module docstring)."""
        total = ZERO
        outs = [t for t in d["outputs"] if self.cg.tensors[t].storage == t]
        for tid in [*d["inputs"], *outs]:
            t = self.cg.tensors[tid]
            total += t.numel * self.precision.bytes(t.role) / self.split(tid)
        return total

    def op(self, path, d, dtype):
        """``(class, forward seconds, backward seconds)`` of one instance of an operator."""
        c = d["cost"]
        if d["kind"] in GEMM_KINDS and (c.weights or c.tied):
            return ("matmul", *self.gemm(path, d, dtype))
        if d["kind"] == "matmul":   # [.., m, k]·[.., k, n]: dX contracts over n, dY over m
            div = self.split(d["outputs"][0])
            f, p = c.forward.matmul / div, self.peaks["bf16"]
            m, k = self.cg.tensors[d["inputs"][0]].shape[-2:]
            n = self.cg.tensors[d["outputs"][0]].shape[-1]
            back = gemm_seconds(f, n, p, self.table) + gemm_seconds(f, m, p, self.table) \
                if c.backward_input.matmul != 0 else ZERO
            return "matmul", gemm_seconds(f, k, p, self.table), back
        if not any(self.cg.tensors[t].storage == t for t in d["outputs"]):
            return "memory", ZERO, ZERO   # views only: no kernel
        moved = self.bytes_of(d) / self.bw
        has_back = bool(c.saved) or c.backward_input.under("all") != 0 or c.backward_weight.under("all") != 0
        back = 2 * moved if has_back else ZERO
        if c.forward.matmul == 0:   # one kernel each way, each with the table's fixed time
            return "memory", moved + self.tm, (back + self.tm if has_back else ZERO)
        div = self.split(d["outputs"][0])
        peak = sympy.Integer(self.peaks["bf16"]) * sympy.Rational(self.table.gemm["bf16"][0])
        fb = (c.backward_input.matmul + c.backward_weight.matmul) / div / peak
        # SymPy's Max (numbers.minmax.smax: the same object; compute- or memory-bound as the sizes go, unproved)
        return "other", smax(c.forward.matmul / div / peak, moved), \
            (smax(fb, back) if has_back else ZERO)

    def gemm(self, path, d, dtype):
        """Forward and backward seconds of one active instance of a weighted GEMM operator."""
        fwd, dgrad, wgrad = self._gemm(path, d, dtype)
        if self.ub != 1 and d["group"] is not None and self.pl.tp is not None and not self.pl.in_experts(path):
            if path in self.pl.tp.row:   # pipeline: proj_fprop, fc2_fprop beside their reduce-scatter
                fwd = fwd * self.ub
            elif path in self.pl.tp.column:   # bulk: qkv/fc1 dgrad and wgrad beside a gather or reduce-scatter
                dgrad, wgrad = dgrad * self.ub, wgrad * self.ub
        return fwd, dgrad + wgrad

    def _gemm(self, path, d, dtype):
        """Forward, input-gradient and weight-gradient seconds of one active instance of a weighted GEMM."""
        c, pl = d["cost"], self.pl
        wid = (c.weights or c.tied)[0]
        w = self.cg.weights[wid]
        shard = pl.weight_shard(wid)
        n_full, k_full = w.shape[0], numel(tuple(w.shape[1:]))
        n, k = n_full / shard.axes[0], k_full / sympy.Mul(*shard.axes[1:])
        y = d["outputs"][0]
        rows = numel(self.cg.tensors[y].shape) / n_full / pl.sequence_divisor(y)
        if all(a == 1 for a in shard.axes):   # a linear TP leaves whole reads SP's split rows
            rows = rows / pl.tensor_divisor(y)
        calls, streams = ONE, ONE
        if pl.in_experts(path):   # E/e local experts per device, each a GEMM of M·k·e/E rows
            g = next(g for p, g in pl.experts.items() if path.startswith(p + "/"))
            calls = g.count / (pl.degree("e") * g.active)
            streams = sympy.Min(TE_GEMM_STREAMS, g.count / pl.degree("e"))   # TE's grouped GEMM: one stream each
        f, m = 2 * rows * n * k / calls, rows / calls   # per call; calls per active instance

        def seconds(contraction, kind=dtype):
            return gemm_seconds(f, contraction, self.peaks[kind], self.table, kind, streams) * calls

        w_kind = dtype if self.wgrad_fp8 else "bf16"   # --no-fp8-wgrad: TE's override_linear_precision
        dgrad = seconds(n) if c.backward_input.matmul != 0 else ZERO    # dX [M, K] = dY [M, N] · W [N, K]
        wgrad = seconds(m, w_kind) if c.backward_weight.matmul != 0 else ZERO   # dW [N, K] = dYᵀ [N, M] · X [M, K]
        return seconds(k), dgrad, wgrad

    def flash(self, path, d, first_path):
        """``(forward, backward)`` seconds of one active instance of a product inside a flash core
        (the backward with QKᵀ's recompute inside the kernel)."""
        c, first = d["cost"], self.cg.nodes[first_path]
        div = self.split(d["outputs"][0])
        share = causal_share(first["attrs"], "half")
        f = c.forward.matmul * share / div
        keys = first["attrs"].get("keys") or self.cg.tensors[first["outputs"][0]].shape[-1]
        s = keys / self.c
        window = first["attrs"].get("window")
        if window is not None:   # a banded (sliding-window) core: each query meets Min(keys, w) keys
            s = sympy.Min(s, window)
        p = sympy.Integer(self.peaks[self.attention_dtype])
        (fe, fs0), (be, bs0) = self.curves["forward"], self.curves["backward"]   # --attention-kernel's curves
        fwd = f / (p * sympy.Rational(fe) * s / (s + fs0))
        back_flops = c.backward_input.matmul * share / div + (f if path == first_path else ZERO)
        return fwd, back_flops / (p * sympy.Rational(be) * s / (s + bs0))
