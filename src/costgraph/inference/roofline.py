"""Roofline latency of inference steps on a hardware preset, throughput,
the batch where decode turns compute-bound, and capacity.

Assumptions (each named in the output):

* **per-op roofline**: each operator node (all its instances in the model: the
  ``l`` copies of a layer's ``q_proj`` are one op, a mixture's experts one
  grouped op) takes ``max(FLOPs / peak, bytes / HBM bandwidth)``; ops are
  summed, **no overlap** between ops; an op with no FLOPs and no bytes takes
  no time;
* **peaks**: the preset's dense peak of the weight dtype's compute dtype
  (bf16 for weight-only int8/int4, fp8 for FP8 W8A8), the preset's HBM
  bandwidth, each times an efficiency factor (default 1: the ideal roofline);
* **tensor parallelism**: per device; one all-reduce of every row-parallel
  linear's output (and of a vocabulary-parallel lookup's) per step, ring
  algorithm ``2(t−1)·α + 2(t−1)/t · bytes/β`` on the scale-up link
  (:mod:`costgraph.parallel.communication`), added after the ops (not
  overlapped);
* **time to first token** = the prefill of the whole batch's prompts; **time
  per output token** = one decode step at the last position, and its mean over
  the ``G − 1`` decode steps (vLLM's TPOT: (end-to-end − TTFT)/(G − 1)), a closed form
  (:mod:`costgraph.inference.decode`: no loop over the steps); none when ``G = 1``;
* **tokens/s** = ``b`` sequences / mean TPOT (the decode phase), in total and
  per device (÷ t);
* **compute-bound batch**: the smallest ``b`` where a decode step's FLOPs /
  peak reaches its bytes / bandwidth (whole-step ridge point), solved exactly;
  ``None`` when the KV cache grows as fast as the compute (never);
* **capacity**: weights + KV cache (paged, blocks of ``k``) ≤ (1 − reserve) ×
  the device memory; activations and workspace of the forward are in the
  reserve (vLLM's ``gpu_memory_utilization = 0.9``: reserve 0.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import sympy

from ..choices import (CAUSAL, CONVENTION, DEFAULT_KV, DEFAULT_WEIGHTS, LLAMACPP_DEFAULT_KV,
                       RUNTIME, SGLANG_FRACTION, VLLM_ENGINE)
from ..engine.symbols import as_expr

from ..errors import CostgraphValueError, no_value
from ..result_fields import key
from ..results import Document
from ..parallel.communication import latency_steps, ring_factor
from .exact import exact_value as _exact
from .decode import ExactPow, bounded_subs, sign
from .phases import G, P, Inference, Step
from .quantities import InferenceParts
from .report_parts import InferenceSettings, ServingFigures
from .request import report_notes
from .inputs import RESERVE_HINT, _check_inputs, _utilization, serving_reserve   # noqa: F401  (kept importable here)
from .serving import serve


@dataclass(frozen=True)
class Machine:
    """Peak FLOP/s, HBM bandwidth and the TP link of one device (exact rationals).

    A figure nobody gave is None (``name`` None: no preset); ``missing`` maps each answer
    left out ("seconds", "capacity") to the reason (:mod:`costgraph.inference.device`)."""

    name: str | None
    peak: sympy.Expr | None
    bandwidth: sympy.Expr | None
    memory: int | None
    alpha: sympy.Expr | None
    beta: sympy.Expr | None
    compute_dtype: str
    missing: dict = field(default_factory=dict, compare=False, hash=False)
    figures: object = field(default=None, compare=False, hash=False, repr=False)

    @property
    def timed(self) -> bool:
        """Whether seconds can be given (a peak, a bandwidth, and a link under TP)."""
        return "seconds" not in self.missing


def machine(hardware=None, compute_dtype: str = "bf16", t: int = 1, compute_efficiency=1, bandwidth_efficiency=1,
            *, peak=None, bandwidth=None, memory=None, link_bandwidth=None, memory_convention=None) -> Machine:
    """The device of one inference run: a preset's figures (``hardware``: a name, a
    ``my.toml[:NAME]`` file, or None), each replaced by ``peak`` (dense FLOP/s of
    ``compute_dtype``), ``bandwidth`` (HBM B/s), ``memory`` (bytes, or ``"80GB"``),
    ``link_bandwidth`` (B/s per direction) where given; peak and bandwidth times their
    efficiencies; the preset's memory under ``memory_convention`` (``cuda``, the default: what CUDA
    reports; ``nominal``: :func:`costgraph.runtime_memory.device_memory`). Absent figures are None
    (:func:`costgraph.inference.device.figures`).

    Raises
    ------
    CostgraphValueError
        An unknown preset, a figure that is not a positive number, a preset without a peak
        for ``compute_dtype`` (and no ``peak``)."""
    from .device import figures

    f = figures(hardware, compute_dtype, t, peak=peak, bandwidth=bandwidth, memory=memory,
                link_bandwidth=link_bandwidth, memory_convention=memory_convention)
    pk = None if f.peak is None else f.peak * sympy.nsimplify(compute_efficiency)
    bw = None if f.bandwidth is None else f.bandwidth * sympy.nsimplify(bandwidth_efficiency)
    return Machine(f.name, pk, bw, f.memory, f.alpha, f.beta, compute_dtype, dict(f.missing), f)


def step_seconds(step: Step, m: Machine, t: int = 1) -> sympy.Expr:
    """Σ over ops of max(FLOPs/peak, bytes/bandwidth) + TP all-reduces and the
    step's other collectives (module docstring); with ``step.overlap == "full"``
    the collectives hide under the ops: max(Σ ops, Σ collectives)."""
    parts = []
    for op in step.ops:
        moved = op.weight_bytes + op.kv_bytes + (op.activation_bytes if step.with_activations else 0)
        parts.append(sympy.Max(op.flops / m.peak, moved / m.bandwidth))
    comm = comm_seconds(step, m, t)
    if step.overlap == "full":
        return sympy.Max(sympy.Add(*parts), comm)
    return sympy.Add(*parts, comm)


def comm_seconds(step: Step, m: Machine, t: int) -> sympy.Expr:
    """Seconds of a step's collectives: ring algorithms (``latency_steps·α +
    ring_factor·bytes/β``); the TP all-reduces over ``t`` on the machine's link, a
    serving collective on its own link when it names one; an all-to-all's latency NCCL's
    p2p rounds where its link is known (``Collective.latency``:
    :func:`costgraph.parallel.ep_time.alltoall_latency`, training's rule)."""
    parts = [ar.calls * (latency_steps("all-reduce", t) * m.alpha
                         + ring_factor("all-reduce", t) * ar.bytes / m.beta) for ar in step.allreduce]
    for c in step.collectives:
        if c.group > 1:
            alpha, beta = c.link or (m.alpha, m.beta)
            lat = latency_steps(c.kind, c.group) * alpha if c.latency is None else c.latency
            parts.append(c.calls * (lat + ring_factor(c.kind, c.group) * c.bytes / beta))
    return sympy.Add(*parts)


def compute_bound_batch(step: Step, m: Machine, b: sympy.Symbol, values: dict, limit: int = 2**24):
    """``(root, smallest whole b)`` where a step's FLOPs/peak reaches its
    bytes/bandwidth. ``root`` is the exact symbolic solution when the gap is
    linear in ``b`` (dense models: ``W·peak / (F₁·BW − K₁·peak)`` with ``W``
    the weight bytes, ``F₁`` and ``K₁`` the FLOPs and KV bytes per sequence),
    else None (a mixture: the distinct experts read grow with b; the whole
    number is then found by exact bisection). ``(root, None)`` when it never
    becomes compute-bound."""
    gap_sym = sympy.expand(step.flops / m.peak - step.bytes / m.bandwidth)
    rest = {k: v for k, v in values.items() if k != b}
    gap = gap_sym.xreplace(rest)
    if gap.free_symbols - {b}:
        raise no_value(gap.free_symbols - {b})
    root = None
    if gap_sym.is_polynomial(b) and sympy.degree(gap_sym, b) == 1:
        c1, c0 = gap_sym.coeff(b, 1), gap_sym.coeff(b, 0)
        root = sympy.cancel(-c0 / c1)
        r = root.xreplace(rest)
        if not (c1.xreplace(rest) > 0):
            return root, None
        return root, max(int(sympy.ceiling(r)), 1)

    def ok(v):   # exact; (1 - k/E)^v kept unevaluated when huge (inference/decode.py)
        return sign(bounded_subs(gap, {b: sympy.Integer(v)})) >= 0

    if ok(1):
        return None, 1
    # the distinct experts read, E(1 − (1 − k/E)^(b q)), only grow with b: with them at their
    # largest, the gap's slope in b is c1; if c1 ≤ 0, gap(b) ≤ c1 + gap's other part at b = 1 < 0
    # for every b ≥ 1 (never compute-bound), without evaluating (1 − k/E)^b exactly for huge b
    lin = sympy.expand(gap.replace(lambda e: e.is_Pow and b in e.exp.free_symbols, lambda e: sympy.Integer(0)))
    if lin.is_polynomial(b) and sympy.degree(lin, b) <= 1 and not (lin.coeff(b, 1) > 0):
        return None, None
    lo, hi = 1, 2
    while hi <= limit and not ok(hi):
        lo, hi = hi, hi * 2
    if hi > limit:
        return None, None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return None, hi


@dataclass
class InferenceReport(Document, InferenceParts):
    """Everything ``costgraph infer`` prints: ``quantities`` name → SymPy
    expression (bytes, FLOPs, seconds, tokens/s), ``values`` the numbers
    where every symbol has one; settings and assumptions; ``symbols`` the
    model's dimension meanings. The typed result of :meth:`costgraph.Model.infer`: ``to_dict()``,
    ``to_json()``, ``to_text()`` and its table drawn by :mod:`costgraph.export.present` (JSON and text:
    :mod:`costgraph.export.inference_report`)."""

    #: the JSON document (``costgraph infer --format json``, schema ``costgraph schema infer``): each key's
    #: source field, unit and label, and the kind of value the renderer writes
    #: (:func:`costgraph.export.inference_report.to_dict`); the quantities spread into it declare theirs in
    #: the fields of :mod:`costgraph.inference.quantities` (``figures``, ``prefill``, ``decode``, ``answers``)
    DOCUMENT: ClassVar[tuple] = (
        key("costgraph", source=None, write="version", label="costgraph version"), key("model"), key("settings"),
        key("symbols", write="symbols"), key("values", source="subs", write="values", label="dimension values"),
        key("quantities", source=None, write="top", spread=True, label="KV cache, weights, memory, latency"),
        key("prefill", source=None, write="prefill", label="the prefill step"),
        key("decode", source=None, write="decode", label="one decode step"),
        key("compute_bound_batch", "sequences", source=None, write="compute_bound_batch"),
        key("capacity", source=None, write="capacity", spread=True, label="what fits"),
        key("serving", write="serving", label="vLLM's KV cache, prefix caching, chunked prefill, speculative"),
        key("runtime_weights", "bytes", write="to_dict", label="weights as the runtime loads them"),
        key("parallel", source=None, write="parallel", label="parallel serving"),
        key("decode_total_seconds", "s", source=None, write="decode_total", label="the G - 1 decode steps"),
        key("assumptions", source="notes"), key("warnings"), key("absent", label="left out, and why"))

    model: str
    settings: InferenceSettings   #: what was asked and the device figures (inference/report_parts.py)
    quantities: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    subs: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    symbols: dict = field(default_factory=dict)
    #: answers left out for want of a device figure ("seconds", "capacity") → the reason
    absent: dict = field(default_factory=dict)
    #: vLLM's KV cache, prefix caching, chunked prefill, speculative (inference/report_parts.py)
    serving: ServingFigures = field(default_factory=ServingFigures)
    runtime_weights: object = None   #: a RuntimeWeights (inference/runtime_weights.py) or None


def decode_closed_form(inf: Inference, m: Machine, t: int, subs: dict):
    """The ``G − 1`` decode steps' total and mean seconds in closed form
    (:func:`costgraph.inference.decode.decode_totals`: no loop over the steps), at the values
    ``subs`` (every dimension, ``b``, ``P`` and ``G``); None when a dimension has no value.
    Raises :class:`costgraph.inference.decode.Unsupported` for a step time that is not
    piecewise linear in the cached positions."""
    from .decode import N_STEP, decode_totals

    if P not in subs or G not in subs:
        return None
    key = (m, t, tuple(sorted((str(k), int(v)) for k, v in subs.items())))
    cache = inf.__dict__.setdefault("_closed_forms", {})   # the formulas and values of one infer() share it
    if key not in cache:
        st = step_seconds(inf.step(1, N_STEP), m, t)
        try:
            cache[key] = decode_totals(st, N_STEP, subs, P, G, int(subs[P]), int(subs[G]))
        except CostgraphValueError as e:
            if not e.message.startswith("no value for"):
                raise
            cache[key] = None
    return cache[key]


def mean_decode_seconds(inf: Inference, m: Machine, t: int, subs: dict, prompt: int, generate: int):
    """Exact mean over the G − 1 decode steps (n = P, ..., P + G − 2) of the step time, from
    the closed form (:func:`decode_closed_form`); None when ``generate < 2``."""
    if generate < 2:
        return None
    dt = decode_closed_form(inf, m, t, {**subs, P: sympy.Integer(prompt), G: sympy.Integer(generate)})
    return None if dt is None else dt.mean


def infer(model, *, hardware: str | None = None, prompt: int, generate: int, batch: int, values: dict | None = None,
          t: int = 1, weights: str = DEFAULT_WEIGHTS, kv: str | None = None, page: int = 16, reserve=None,
          compute: str | None = None, convention: str = CONVENTION.default, causal: str = CAUSAL.default,
          activations: bool = False, compute_efficiency=1, bandwidth_efficiency=1, peak=None, bandwidth=None,
          memory=None, link_bandwidth=None, quantized: str = "linear", keep: tuple = (),
          gpu_memory_utilization=None, kv_memory=None, max_num_batched_tokens=None, max_num_seqs=None,
          non_torch_memory=None, max_model_len=None, shared_prefix=None, chunk=None, speculative_tokens=None,
          acceptance=None, draft=None, draft_values=None, draft_mtp: bool = False, ep: int = 1,
          dp_attention: int = 1, pp: int = 1, tp_overlap: str = "none", runtime: str = RUNTIME.default,
          sglang_fraction: str = SGLANG_FRACTION.default, vllm_engine: str = VLLM_ENGINE.default,
          memory_convention: str | None = None) -> InferenceReport:
    """The whole analysis for one setting (``model`` built by :func:`costgraph.inference.load`).

    ``values``: the model's dimension values (symbol → int), ``b`` replaced by ``batch``. Returns an
    :class:`InferenceReport` (``symbols``: the model's). ``hardware``: a preset (name or ``my.toml[:NAME]``)
    or None; ``peak`` (dense FLOP/s of the compute dtype), ``bandwidth`` (HBM B/s), ``memory`` (bytes or
    ``"80GB"``) and ``link_bandwidth`` (B/s per direction, the TP all-reduce's link) replace its figures or
    stand alone (numbers or exact text such as ``"989.4e12"``); ``memory_convention``: the preset's memory as
    CUDA reports it (``cuda``, what None reads) or printed (``nominal``), :func:`costgraph.runtime_memory.device_memory`.
    Without a peak and a bandwidth (and a link when ``t > 1``) the seconds, tokens/s and compute-bound batch
    are None; without memory the fit, largest batch and context are None; ``rep.absent`` says why.

    Raises
    ------
    CostgraphValueError
        A count that is not a positive whole number, ``reserve`` outside [0, 1), an efficiency
        outside (0, 1], an unknown dtype or preset, a TP degree the model does not divide into,
        an unknown ``quantized`` scope, a serving layout :func:`costgraph.inference.parallel.check_serving`
        refuses.

    ``quantized``/``keep``: which weights a quantized ``weights`` dtype applies to
    (:mod:`costgraph.inference.quantized`: ``linear``, ``linear+head``, ``all``, ``experts``; module
    names kept in 16 bits, as ``modules_to_not_convert``). Serving options (:mod:`costgraph.inference.capacity`, :mod:`costgraph.inference.prefill_modes`,
    :mod:`costgraph.inference.speculative`): ``gpu_memory_utilization`` (= 1 − ``reserve``, give
    either), ``kv_memory`` (vLLM's ``kv_cache_memory_bytes``: bytes or a size such as ``"6.51GiB"``),
    ``max_num_batched_tokens``, ``max_num_seqs``, ``non_torch_memory`` (a size), ``max_model_len``
    (default ``P + G``): vLLM's KV cache size and maximum concurrency; ``shared_prefix`` (tokens
    shared by all sequences: prefix caching), ``chunk`` (chunked prefill); ``speculative_tokens``
    ``k`` with ``acceptance`` ``α`` and ``draft`` (a model loaded by
    :func:`costgraph.inference.load`, ``draft_values`` its dimensions; ``draft_mtp``: it is the
    target built with ``option mtp`` and its MTP heads draft). ``ep``, ``dp_attention``, ``pp``, ``tp_overlap``: the parallel serving layout
    (:mod:`costgraph.inference.parallel`; the defaults leave every figure as plain TP). ``runtime``, ``sglang_fraction``: :mod:`.runtimes`; ``vllm_engine``: :mod:`.runtime_weights`."""
    reserve = _utilization(_check_inputs(prompt, generate, batch, page, reserve, compute_efficiency, bandwidth_efficiency,
                                         vllm_engine), gpu_memory_utilization, given=reserve is not None)   # 1 - utilization
    kv = kv if kv is not None else LLAMACPP_DEFAULT_KV if runtime == "llamacpp" else DEFAULT_KV   # llama.cpp: f16
    settings = dict(weights=weights, kv=kv, convention=convention, causal=causal, activations=activations,
                    quantized=quantized, keep=keep)
    inf, layout = _inference(model, values, batch, t, hardware, settings, (ep, dp_attention, pp, tp_overlap))
    m = _layout_machine(layout, hardware, compute or inf.weights.compute, t, compute_efficiency, bandwidth_efficiency,
                        peak=peak, bandwidth=bandwidth, memory=memory, link_bandwidth=link_bandwidth,
                        memory_convention=memory_convention)
    subs = {k: v for k, v in (values or {}).items() if k not in (inf.b, inf.s)}
    subs.update({inf.b: sympy.Integer(batch), P: sympy.Integer(prompt), G: sympy.Integer(generate)})
    rep = InferenceReport(inf.cg.name, InferenceSettings(hardware=m.name, prompt=prompt, generate=generate, batch=batch,
                                            tp=t, weights=inf.weights.name, kv=inf.kv.name, page_size=page,
                                            reserve=str(reserve), compute=m.compute_dtype, convention=convention,
                                            causal=causal, activations=activations,
                                            compute_efficiency=str(compute_efficiency),
                                            bandwidth_efficiency=str(bandwidth_efficiency)), subs=subs,
                          symbols=dict(model.symbols))
    rep.warnings += inf.tp.warnings if inf.tp is not None else []   # an operator without a TP layout
    from . import device   # no preset: the figures given, the answers absent (item 1 of issue 17)

    rep.settings.set(**device.settings(m.figures))
    rep.absent = dict(m.missing)
    dec = _quantities(rep, inf, m, t, page)
    if m.timed:
        _values(rep, inf, dec, m, t, prompt, generate, batch)
    else:
        device.untimed_values(rep, dec)
    if m.memory is None:
        device.no_capacity(rep, inf, page, batch)
    serve(rep, inf, m, lambda st: step_seconds(st, m, t), t, page, reserve, prompt, generate, batch,
          dict(kv_memory=kv_memory, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
               non_torch_memory=non_torch_memory, max_model_len=max_model_len, shared_prefix=shared_prefix,
               chunk=chunk, speculative_tokens=speculative_tokens, acceptance=acceptance, draft=draft,
               draft_values=draft_values, draft_mtp=draft_mtp, max_position=(values or {}).get(inf.s),
               runtime=(runtime, sglang_fraction, pp), fraction=gpu_memory_utilization, vllm_engine=vllm_engine))
    _finish(rep, inf, m, t, layout, quantized, keep, compute_efficiency, bandwidth_efficiency)
    return rep


def _inference(model, values, batch: int, t: int, hardware, settings: dict, parallel: tuple):
    """``(inference analysis, serving layout)``: :class:`Inference` at TP ``t`` (K/V heads
    fewer than ``t`` replicated, one per device, as Megatron and vLLM), or the parallel serving
    analysis of :mod:`costgraph.inference.parallel` when ``parallel`` = ``(ep, dp_attention,
    pp, tp_overlap)`` is not trivial; the TP layouts ``costgraph train`` refuses are refused."""
    from ..parallel.layout import MAX_DEVICES
    from ..parallel.tensor import kv_replication
    from .parallel import Serving, check_serving, serving_inference

    if isinstance(t, int) and t > MAX_DEVICES:   # was "gpus is over 1,000,000", a flag infer has not
        raise CostgraphValueError(f"--tp {t:,}: at most {MAX_DEVICES:,} devices", hint="a TP degree that divides "
                                  "the heads (8 GPUs a node is the usual largest)")
    replicated = kv_replication(getattr(model, "graph", model), t, values) if isinstance(t, int) and values else ()
    inf = Inference(model, t=t, replicate=replicated, **settings)
    layout = Serving(t, *parallel)
    check_serving(inf.cg, layout, values, batch)
    if not layout.trivial:
        inf = serving_inference(model, layout, values, hardware=hardware, **settings)
    if t > 1 and values:
        # the layouts `costgraph train` refuses (t must divide the heads, K/V heads and widths it splits)
        from ..parallel.layout import Layout
        from ..training.validity import check_layout

        check_layout(inf.cg, Layout(t=t, gpus=t, tp_replicated=replicated).filled(),
                     {k: v for k, v in values.items() if k not in (inf.b, inf.s)})
    return inf, layout


def _finish(rep: InferenceReport, inf, m: Machine, t: int, layout, quantized: str, keep, compute_efficiency,
            bandwidth_efficiency) -> None:
    """The assumptions of ``rep`` (the roofline's, the device figures', the quantized weights')
    and the parallel serving layout's settings, figures and notes."""
    from . import device
    from .quantized import quantization_note

    rep.notes = report_notes(inf, t, compute_efficiency, bandwidth_efficiency)   # inference/request.py
    rep.notes += device.notes(m.figures, t)
    rep.settings.quantized = quantized
    rep.notes += quantization_note(getattr(inf, "attn", inf), quantized, keep)   # a serving layout: one side's
    if not layout.trivial:   # parallel serving's settings, figures and notes
        from .serving_report import report_serving

        report_serving(rep, inf, m, t, step_seconds=step_seconds, comm_seconds=comm_seconds, exact=_exact)


def _layout_machine(layout, *args, **figures) -> Machine:
    """:func:`machine` for a serving layout: a pipeline's sends need a link even at ``--tp 1``."""
    m = machine(*args, **figures)
    if layout.pp > 1 and m.beta is None and m.timed:
        from .parallel import NEED_PP_LINK

        m.missing["seconds"] = NEED_PP_LINK
    return m


def _quantities(rep: InferenceReport, inf: Inference, m: Machine, t: int, page: int) -> Step:
    """The formulas of ``rep.quantities``: KV cache, weights, the prefill and decode steps,
    latency and throughput. Returns the decode step."""
    qd = rep.quantities
    total_pos = P + G
    qd["kv_cache_bytes"] = inf.kv_cache_bytes(total_pos)
    qd["kv_cache_bytes_paged"] = inf.kv_cache_bytes(total_pos, page=page)
    qd["kv_cache_bytes_per_token"] = inf.kv_cache_bytes_per_token()
    if inf.states:
        qd["state_bytes"] = inf.state_bytes()     # inside kv_cache_bytes: b fixed-size recurrent states
    qd["weight_bytes"] = inf.weight_memory()
    dec = inf.decode()
    for name, st in (("prefill", inf.prefill()), ("decode", dec)):
        qd[f"{name}.flops"] = st.flops
        qd[f"{name}.weight_bytes"] = st.weight_bytes
        qd[f"{name}.kv_read_bytes"] = st.kv_read
        qd[f"{name}.kv_written_bytes"] = st.kv_written
        qd[f"{name}.activation_bytes"] = st.activation_bytes
        qd[f"{name}.bytes"] = st.bytes
        qd[f"{name}.intensity"] = st.intensity
        if not m.timed:   # no peak, bandwidth or link: no seconds (rep.absent says why), a lower bound
            from .device import lower_bound

            lower_bound(qd, name, st, m)
            continue
        qd[f"{name}.seconds"] = step_seconds(st, m, t)
        if t > 1:
            qd[f"{name}.communication_seconds"] = comm_seconds(st, m, t)
    if not m.timed:
        return dec
    qd["time_to_first_token"] = qd["prefill.seconds"]
    qd["time_per_output_token"] = qd["decode.seconds"]
    n_i = sympy.Symbol("t_gen", integer=True, nonnegative=True)   # the generated token; not a model dim
    closed = decode_closed_form(inf, m, t, rep.subs)   # inference/decode.py; a Sum only without values
    steps = sympy.Sum(step_seconds(inf.step(1, P + n_i), m, t), (n_i, 0, G - 2)) if closed is None else None
    qd["time_per_output_token_mean"] = closed.mean_expr if closed is not None else steps / (G - 1)
    qd["decode_total_seconds"] = closed.total_expr if closed is not None else steps
    qd["tokens_per_second"] = inf.b / qd["time_per_output_token_mean"]
    qd["tokens_per_second_per_device"] = qd["tokens_per_second"] / t
    return dec


def _values(rep: InferenceReport, inf: Inference, dec: Step, m: Machine, t: int, prompt: int, generate: int,
            batch: int) -> None:
    """The numbers of ``rep.values`` where every symbol has one (exact; a mixture's
    ``(1 − k/E)^(b·q)`` kept as an unevaluated exact power when huge,
    :func:`costgraph.inference.decode.bounded_subs`); the exact total and mean decode time
    from their closed forms; the compute-bound batch. ``G = 1``: no decode step, so the decode
    step's values, the TPOT and throughput are None (the decode total is 0)."""
    qd, vals, subs = rep.quantities, rep.values, rep.subs
    for k, e in qd.items():
        if k.startswith(("time_per_output_token_mean", "tokens_per", "decode_total")):
            continue
        if generate < 2 and (k.startswith("decode.") or k == "time_per_output_token"):
            continue   # no decode step: the formulas at n = P + G - 2 would be a step at P - 1 positions
        v = bounded_subs(e, subs)
        if not v.free_symbols:
            vals[k] = v if v.is_Rational or v.has(ExactPow) else sympy.simplify(v)
    closed = decode_closed_form(inf, m, t, subs)
    if closed is not None:
        vals["decode_total_seconds"] = closed.total
    if closed is not None and closed.mean is not None:
        vals["time_per_output_token_mean"] = closed.mean
        vals["tokens_per_second"] = batch / closed.mean
        vals["tokens_per_second_per_device"] = batch / closed.mean / t
    if generate < 2:
        vals["compute_bound_batch"] = None   # no decode step
        return
    root, whole = compute_bound_batch(dec, m, inf.b, subs)
    if root is not None:
        qd["compute_bound_batch"] = root
    vals["compute_bound_batch"] = whole   # None: decode never becomes compute-bound
