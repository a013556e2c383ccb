"""Step time of a training iteration — ONE named, simple model, whatever sets the rate.

* **compute** = Σ over precisions of FLOPs_dtype / (peak_dtype × rate), per device.
  The FLOPs per precision: an FP8 policy (:mod:`costgraph.training.fp8`) runs the
  FP8 linears' FLOPs (and, with FP8 attention, the attention products'; without FP8
  weight gradients, less the linears' weight gradients: :mod:`costgraph.training.fp8_options`)
  at the preset's FP8 peak, everything else at the BF16 peak;
  other policies run all at the BF16 peak. Exactly one **rate** (:class:`Rate`):

  - ``efficiency e`` (default 1/2): the fraction of each peak the kernels reach,
    over the **hardware** FLOPs (:func:`costgraph.training.compute.training_flops`,
    recomputation included);
  - ``mfu u``: the model FLOPs utilization (PaLM App. B: model FLOPs per second
    over the peak, as the seeds define MFU): **model** FLOPs / (peak × u);
  - ``achieved X``: achieved hardware FLOP/s per device (Narayanan et al. 2021
    §5.1): **hardware** FLOPs / X, one rate for every precision.

  ``peaks`` is ``{"bf16": P, "fp8": P8}`` (``--peak`` replaces the preset's BF16 peak
  or gives one without a preset).
* **what the rate covers** (``covers``, a named convention): ``compute`` — the kernels
  only; the bubble and the communication are added (always so for ``efficiency``);
  ``step`` — a rate measured over whole steps (MFU and achieved FLOP/s as PaLM and
  Narayanan report them: the bubble and the communication are inside it), the step
  is the compute (default for ``mfu`` and ``achieved``: it keeps Narayanan's 34 days
  for GPT-3 175B, the seeds' ``8TP/(nX)``).
  With an explicit pipeline layout or MTP depths (one stage holds more) and a rate that
  covers the kernels, the compute is the busiest stage's: ×
  :func:`costgraph.parallel.pipeline.layout_pace`.
* **bubble** = compute × the schedule's idle fraction
  (:func:`costgraph.parallel.pipeline.bubble`: (p − 1)/(v·m) for 1F1B, interleaved and
  GPipe, Narayanan et al. 2021 §2.2; ZB-H1 and DualPipe their own);
* **communication** (:mod:`costgraph.parallel.communication` on the preset's links;
  none without a preset): each kind's seconds, split into the part hidden behind the
  computation and the part exposed by :mod:`costgraph.training.overlap` under the layout's
  overlap convention (``layout.overlap``, :data:`costgraph.choices.OVERLAP`: Megatron's
  TP overlap, gradient buckets, ZeRO-3 prefetch, PP sends, CP ring; EP all-to-all per
  ``ep_overlap``, :func:`costgraph.parallel.ep_time.ep_exposed`);
* **optimizer** (the per-kernel model only, :mod:`costgraph.training.step_kernels`): the
  optimizer step's memory-bound kernels, once per step after the last backward (no
  communication hides behind it, no bubble scales it), at the kernel table's HBM bandwidth;
* **contention** (:mod:`costgraph.training.contention`, ``layout.overlap_contention``): the compute the
  hidden part of each kind slows, ``Σ σ_k · hidden_k`` (``σ``: the SMs its kernels hold of the device's, or a
  measured slowdown);
* **total** = compute + bubble + optimizer + Σ exposed communication + contention (``communication_overlapped``: the
  hidden part, not added; ``covers = "step"``: total = compute); with CPU/NVMe offload,
  compute + bubble is at least the host-link seconds of the transfers that run beside the
  computation (``offload``), and the CPU optimizer step with the updated partition back runs after
  it in series (``offload_serial``): :func:`costgraph.training.offload.offload_step_seconds`, DeepSpeed's
  schedule :data:`costgraph.training.offload.SCHEDULE`.
* **calibration** (``factors``, :class:`costgraph.training.calibration_profile.Factors`, from a profile
  that ``costgraph calibrate`` fitted to measured runs): named multipliers of the parts, applied
  where each part is made — the compute kernels' seconds (each kernel class's, under the per-kernel
  model; the bubble, a share of them, follows) and each collective kind's seconds — before the
  overlap rules combine them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.symbols import as_expr
from ..parallel.communication import communication
from ..parallel.pipeline import bubble as pipeline_bubble, layout_pace
from ..parallel.placement import Placement, placement as place
from .compute import training_flops
from .offload import devices_sharing, offload_step_seconds, offloaded
from .contention import slowed
from .overlap import Overlaps, overlaps, smax
from .result_parts import ComputeByClass

#: what sets the rate of the compute (``kernels``: the per-kernel model of :mod:`costgraph.training.kernel_time`)
RATE_KINDS = ("efficiency", "mfu", "achieved", "kernels")
#: what a rate covers (a named convention): the compute kernels, or whole steps
COVERS = ("compute", "step")
#: the name of this time model: a calibration profile is fitted under it and refused under another
#: (costgraph.training.calibration); change it when the model of the parts changes
TIME_MODEL = "flat-efficiency"
#: the name of the per-kernel time model (costgraph.training.kernel_time), as a profile records it
KERNEL_TIME_MODEL = "per-kernel"


@dataclass(frozen=True)
class Rate:
    """What sets the compute rate (module docstring): ``kind`` one of :data:`RATE_KINDS`,
    ``value`` (a fraction for ``efficiency`` and ``mfu``, FLOP/s per device for ``achieved``),
    ``peaks`` (dtype → FLOP/s per device: ``bf16`` and, for an FP8 policy, ``fp8``),
    ``covers`` one of :data:`COVERS`, ``source``: where the peaks come from (for the text)."""

    kind: str = "efficiency"
    value: object = sympy.Rational(1, 2)
    peaks: dict = field(default_factory=dict)
    covers: str = "compute"
    source: str = ""
    #: ``kernels``: the preset's :class:`~costgraph.training.kernel_table.KernelTable`
    table: object = None
    #: what was assumed (a preset without a kernel table, FP8 GEMMs without FP8 points), for the warnings
    notes: tuple = ()

    @property
    def model(self) -> str:
        """The time model's name: ``kernels`` (per-kernel) or ``flat`` (one rate for every kernel)."""
        return "kernels" if self.kind == "kernels" else "flat"

    def describe(self) -> str:
        """One line naming the rate, e.g. ``--efficiency 1/2 of the peak (kernels; bubble and
        communication added)``."""
        v = self.value
        if self.kind == "kernels":
            what = f"per-kernel time model, kernels.toml [{self.table.preset}]"
        else:
            what = {"efficiency": f"--efficiency {float(v):.4g} of each peak", "mfu": f"--mfu {float(v):.4g}",
                    "achieved": f"--achieved {float(v):.4g} FLOP/s"}[self.kind]
        peaks = ", ".join(f"{k.upper()} {float(p) / 1e12:g} TFLOP/s" for k, p in self.peaks.items())
        cover = ("over whole steps: bubble and communication inside" if self.covers == "step"
                 else "kernels only: bubble and communication added")
        return f"{what}" + (f" (peaks {peaks}{', ' + self.source if self.source else ''})" if peaks else "") \
            + f"; {cover}"


def flops_by_precision(cg, layout, flops: dict, convention: str | None = None,
                       causal: str | None = None) -> dict[str, dict[str, sympy.Expr]]:
    """Per device: ``{"model": {dtype: FLOPs}, "hardware": {dtype: FLOPs}}``; ``bf16`` only unless
    ``layout.policy`` is an FP8 policy, then ``fp8`` is the share of the FP8 linears
    (:func:`costgraph.training.fp8.fp8_linears`) and, with ``fp8_attention``, of the attention
    products; less the linears' weight gradients with ``fp8_wgrad`` False
    (:func:`costgraph.training.fp8_options.precision_flops`). Hardware adds what recomputation
    re-runs of them, as the hardware FLOPs count it
    (:func:`costgraph.training.recompute_count.recompute_flops`)."""
    from .fp8 import policy_recipe

    model, hw = flops["model_per_device"], flops["hardware_per_device"]
    if policy_recipe(layout.policy) is None:
        return {"model": {"bf16": model}, "hardware": {"bf16": hw}}
    from ..choices import CAUSAL, CONVENTION
    from ..engine.precision import precision as get_precision
    from ..engine.recompute import recompute_plan
    from ..engine.symbols import as_expr
    from ..engine.totals import MODEL_SCOPE, breakdown
    from .fp8_options import precision_flops
    from .recompute_count import recompute_flops

    key = (convention or CONVENTION.default, causal or CAUSAL.default)
    store = cg.memo("fp8_split_rows")   # the model's rows read no layout: once per graph and convention
    if key not in store:
        store[key] = breakdown(cg, MODEL_SCOPE, key[0], get_precision("bf16"), key[1], leaves_only=True)
    rows = store[key]
    rerun = recompute_flops(cg, layout, rows, recompute_plan(cg, layout, layout.attention))
    per_mb, per_mb_hw = precision_flops(cg, layout, rows, rerun)
    n = as_expr(layout.t) * as_expr(layout.p) * as_expr(layout.c) * as_expr(layout.d)
    m8 = sympy.expand(per_mb * as_expr(layout.m) * as_expr(layout.d) / n)
    h8 = sympy.expand(per_mb_hw * as_expr(layout.m) * as_expr(layout.d) / n)
    return {"model": {"fp8": m8, "bf16": sympy.expand(model - m8)},
            "hardware": {"fp8": h8, "bf16": sympy.expand(hw - h8)}}


def compute_seconds(split: dict, rate: Rate) -> sympy.Expr:
    """Seconds of compute per step for ``split`` (:func:`flops_by_precision`) at ``rate``."""
    if rate.kind == "achieved":
        return sympy.Add(*split["hardware"].values()) / rate.value
    which = split["model"] if rate.kind == "mfu" else split["hardware"]
    return sympy.Add(*[f / (as_expr(rate.peaks[d]) * rate.value) for d, f in which.items() if f != 0])


def step_time(cg, layout, hardware, *, efficiency=None, flops: dict | None = None,
              stage: str = "first", placement: Placement | None = None,
              collectives: dict | None = None, with_total: bool = True, rate: Rate | None = None,
              convention: str | None = None, causal: str | None = None, factors=None,
              with_optimizer: bool = True, expand: bool = True) -> dict:
    """Seconds per step (module docstring): ``compute``, ``bubble``, ``communication_exposed``,
    ``communication_overlapped`` (the hidden part, not added), ``total``, ``by_kind`` (seconds of
    each collective kind) and ``overlap`` (:class:`~costgraph.training.overlap.Overlaps`: each
    kind's rule, exposed and hidden seconds). ``layout`` filled; ``hardware`` a :class:`costgraph.hardware.Hardware`, or
    None with ``rate`` (its peaks given): no communication then. ``rate``: a :class:`Rate`; without
    one, a flat ``efficiency`` of the preset's peaks, or (``efficiency`` None) the per-kernel model
    of the preset's kernel table (:func:`kernel_rate`), else 1/2 of the peaks. ``placement``, ``collectives``: the layout's, if the
    caller has them; ``with_total=False``: the parts only (the planner takes the max per layout);
    ``convention``, ``causal``: the FLOP conventions ``flops`` was counted under (the FP8 split
    counts the same way); ``factors``: a calibration's multipliers of the parts
    (:class:`costgraph.training.calibration_profile.Factors`; None: none); ``with_optimizer=False``: no optimizer
    step (the calculator page adds its own: :mod:`costgraph.export.web_steps`); ``expand``: kernel_seconds'."""
    L = layout.filled()
    f = flops if flops is not None else training_flops(cg, L)
    if rate is None and efficiency is None and hardware is not None:
        rate = kernel_rate(hardware, default_peaks(hardware, L.policy))
    if rate is None:
        rate = Rate("efficiency", sympy.Rational(1, 2) if efficiency is None else efficiency, default_peaks(hardware, L.policy))
    by_class = forward = None
    if rate.kind == "kernels" and L.lora_rank is None:   # per-kernel seconds (costgraph.training.kernel_time)
        from .kernel_time import CLASSES, kernel_seconds

        ks = kernel_seconds(cg, L, rate.table, rate.peaks, expand=expand)
        fw = kernel_seconds(cg, L, rate.table, rate.peaks, phase="forward", expand=expand)   # the overlap's
        by_class, fw = {k: ks[k] for k in CLASSES}, {k: fw[k] for k in CLASSES}
        if factors is not None:   # calibration (costgraph.training.calibration): each class's multiplier
            by_class, fw = factors.scale_compute(None, by_class), factors.scale_compute(None, fw)
        compute, forward = sympy.Add(*by_class.values()), sympy.Add(*fw.values())
    else:
        if rate.kind == "kernels":   # adapters: the flat default (step_rate names it in the rate's notes)
            rate = Rate("efficiency", sympy.Rational(1, 2), rate.peaks, "compute", rate.source)
        compute = compute_seconds(flops_by_precision(cg, L, f, convention, causal), rate)
        if factors is not None:   # calibration (costgraph.training.calibration): the compute kernels' multiplier
            compute = factors.scale_compute(compute)
    pace = sympy.Integer(1)
    if rate.covers == "compute":   # an explicit layout or MTP: the busiest stage's pace (a whole-step rate has it)
        pace = layout_pace(cg, L, (placement if placement is not None else place(cg, L)).stages, convention, causal)
        compute = compute * pace
        if by_class is not None and pace != 1:
            by_class = _paced(by_class, pace)
            forward = forward * pace
    p, v, m = (sympy.Integer(x) if isinstance(x, int) else x for x in (L.p, L.v, L.m))
    bubble = compute * pipeline_bubble(L.schedule, p, m, v) if rate.covers == "compute" else sympy.Integer(0)
    kinds, ov = {}, Overlaps(L.overlap, {}, compute, sympy.Integer(0))
    if hardware is not None and L.lora_rank is None:
        pl = placement if placement is not None else place(cg, L)
        if collectives is None:
            collectives = communication(cg, L, stage=stage, placement=pl)
        ov = overlaps(cg, collectives, hardware, L, pl, stage=stage, compute=compute, flops=f, factors=factors,
                      forward=forward, per_kernel=by_class is not None)
        kinds = {k: o.seconds for k, o in ov.kinds.items()}
    # the planner combines the rules' forms itself (SymPy's Max of long sums is slow): no sums here then
    exposed, slow = (ov.total_exposed(), slowed(ov, smax) if rate.covers == "compute" else sympy.S.Zero) \
        if with_total else (None, None)   # the compute the hidden parts slow (training.contention): a step rate has it
    hidden = sympy.Add(*kinds.values()) - exposed if with_total else None
    parts = {"compute": compute, "bubble": bubble, "communication_exposed": exposed,
             "communication_overlapped": hidden, "by_kind": kinds, "overlap": ov, "contention": slow}
    if by_class is not None:
        parts["compute_by_class"] = ComputeByClass(**by_class)   # seconds by kernel class (result_parts)
        if rate.covers == "compute" and with_optimizer:   # the optimizer step: once per step, after the gradients
            from .step_kernels import optimizer_seconds

            opt = optimizer_seconds(cg, L, rate.table.hbm_bandwidth)
            parts["optimizer"] = factors.scale_compute(None, {"memory": opt})["memory"] if factors is not None \
                else opt
    if offloaded(L) and hardware is not None:   # CPU/NVMe offload (costgraph.training.offload): link, CPU step
        from .memory import training_memory

        top = training_memory(cg, L).stages[0 if stage == "first" else -1].memory
        off = offload_step_seconds(top, hardware, devices_sharing(L, hardware))
        if off is not None:
            parts.update(off)
    if not with_total:   # the planner combines the parts per layout itself (parts["overlap"]: the rules' forms)
        return parts
    return {**parts, "total": combine(parts, rate.covers, exposed=exposed)}


def _paced(by_class: dict, pace: sympy.Expr) -> dict:
    """Each kernel class's seconds × the busiest stage's ``pace``; a class without kernels stays 0 (SymPy's
    ``0·pace`` asks whether the pace, a Max of the stages' FLOP ratios over the model's sizes, is finite:
    0.1-0.5 s per class of DeepSeek-V3's uneven splits, for the same 0)."""
    return {k: x * pace if x != 0 else x for k, x in by_class.items()}


def combine(parts: dict, covers: str = "compute", maximum=None, exposed=None):
    """The step's total from :func:`step_time`'s ``parts`` (module docstring), the one place it
    is formed (``train``, the planner's screen and its confirmation): ``covers = "step"``: the
    compute; else busy + Σ over the collective kinds of the exposed seconds
    (:meth:`costgraph.training.overlap.Overlaps.total_exposed` of ``parts["overlap"]``) + the compute their
    hidden parts slow (:func:`costgraph.training.contention.slowed`), with
    busy = compute + bubble + the optimizer step (``parts["optimizer"]``, the per-kernel model's), at least
    the host-link seconds ``parts["offload"]`` when offloaded, and ``parts["offload_serial"]`` (the CPU
    optimizer step and the partition back, after the backward: :data:`costgraph.training.offload.SCHEDULE`)
    added.
    ``maximum``: the max of two values; None: SymPy's (the overlap rules' left unevaluated,
    :func:`costgraph.training.overlap.smax`); the planner passes NumPy's to combine arrays of
    evaluated parts (:mod:`costgraph.training.plan_forms`), its confirmation Python's ``max`` of
    the parts' exact values (the number SymPy's Max gives once the sizes are substituted). ``exposed``: the
    Σ exposed seconds of ``parts["overlap"]`` under SymPy's Max when the caller has it (:func:`step_time`)."""
    if covers == "step":
        return parts["compute"]
    busy = parts["compute"] + parts["bubble"] + parts.get("optimizer", 0)
    if "offload" in parts:
        busy = sympy.Max(busy, parts["offload"]) if maximum is None else maximum(busy, parts["offload"])
    busy = busy + parts.get("offload_serial", 0)
    ov = parts.get("overlap")
    if ov is None:
        return busy
    if maximum is None:
        slow = parts.get("contention")
        return busy + (exposed if exposed is not None else ov.total_exposed()) \
            + (slow if slow is not None else slowed(ov, smax))
    return busy + ov.total_exposed(maximum) + slowed(ov, maximum)


def default_peaks(hardware, policy) -> dict:
    """``{"bf16": P}`` of a preset, and ``"fp8"`` for an FP8 policy (:meth:`Hardware.peak_flops`
    refuses a preset without an FP8 peak, naming it)."""
    from .fp8 import policy_recipe

    peaks = {"bf16": hardware.peak_flops_bf16}
    if policy_recipe(policy) is not None:
        peaks["fp8"] = hardware.peak_flops("fp8")
    return peaks



def kernel_rate(hw, peaks: dict, source: str = "") -> Rate | None:
    """The per-kernel :class:`Rate` of preset ``hw`` on ``peaks`` (None without a kernel table);
    its notes say what is assumed (FP8 GEMMs at the BF16 fit)."""
    from .kernel_table import kernel_table

    table = kernel_table(hw)
    if table is None:
        return None
    notes = (f"FP8 GEMMs at the FP8 peak with the BF16 GEMM fit of kernels.toml [{table.preset}] "
             "(no FP8 GEMM measurements in it)",) if "fp8" in peaks and "fp8" not in table.gemm else ()
    return Rate("kernels", sympy.Integer(1), peaks, "compute", source or hw.key, table, notes)

