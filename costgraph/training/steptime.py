"""Step time of a training iteration — ONE named, simple model, whatever sets the rate.

* **compute** = Σ over precisions of FLOPs_dtype / (peak_dtype × rate), per device.
  The FLOPs per precision: an FP8 policy (:mod:`costgraph.training.fp8`) runs the
  FP8 linears' FLOPs at the preset's FP8 peak, everything else at the BF16 peak;
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
* **bubble** = compute × the schedule's idle fraction
  (:func:`costgraph.parallel.pipeline.bubble`: (p − 1)/(v·m) for 1F1B, interleaved and
  GPipe, Narayanan et al. 2021 §2.2; ZB-H1 and DualPipe their own);
* **communication** (:mod:`costgraph.parallel.communication` on the preset's links;
  none without a preset): tensor, context and expert parallelism and pipeline sends
  are on the critical path (exposed); the data-parallel gradient reduction and
  ZeRO/FSDP traffic overlap the computation but cannot take less than their own time;
* **total** = max(compute + bubble, overlapped communication) + exposed communication
  (``covers = "step"``: total = compute); with CPU/NVMe offload, compute + bubble is at
  least the host-link seconds (:func:`costgraph.training.offload.offload_link_seconds`: the
  transfers run beside the computation), ``offload`` in the result;
* **EP all-to-all**: exposed as :func:`costgraph.parallel.ep_time.ep_exposed` says
  (``ep_overlap``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..parallel.communication import comm_time, communication
from ..parallel.pipeline import bubble as pipeline_bubble
from ..parallel.ep_time import ep_exposed
from ..parallel.placement import Placement, placement as place
from .compute import training_flops
from .offload import offload_link_seconds, offloaded

EXPOSED = ("tp", "cp", "ep", "pp", "tied_embedding")
#: what sets the rate of the compute
RATE_KINDS = ("efficiency", "mfu", "achieved")
#: what a rate covers (a named convention): the compute kernels, or whole steps
COVERS = ("compute", "step")


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

    def describe(self) -> str:
        """One line naming the rate, e.g. ``--efficiency 1/2 of the peak (kernels; bubble and
        communication added)``."""
        v = self.value
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
    ``layout.policy`` is an FP8 policy, then ``fp8`` is the FP8 linears' share
    (:func:`costgraph.training.fp8.fp8_linears`; their recomputed forward included under
    ``recompute = "full"``: selective and flash recompute the attention core, which is BF16)."""
    from .fp8 import policy_recipe

    model, hw = flops["model_per_device"], flops["hardware_per_device"]
    if policy_recipe(layout.policy) is None:
        return {"model": {"bf16": model}, "hardware": {"bf16": hw}}
    from ..choices import CAUSAL, CONVENTION
    from ..engine.precision import precision as get_precision
    from ..engine.symbols import as_expr
    from ..engine.totals import MODEL_SCOPE, breakdown
    from .fp8 import fp8_flops, fp8_linears

    rows = breakdown(cg, MODEL_SCOPE, convention or CONVENTION.default, get_precision("bf16"),
                     causal or CAUSAL.default, leaves_only=True)
    linears = fp8_linears(cg)
    per_mb = fp8_flops(rows, linears)
    extra = sympy.Integer(0)
    if layout.recompute == "full":
        extra = sympy.Add(*[r["count"] * r["flops_forward"] for r in rows if r["path"] in linears])
    n = as_expr(layout.t) * as_expr(layout.p) * as_expr(layout.c) * as_expr(layout.d)
    m8 = sympy.expand(per_mb * as_expr(layout.m) * as_expr(layout.d) / n)
    h8 = sympy.expand((per_mb + extra) * as_expr(layout.m) * as_expr(layout.d) / n)
    return {"model": {"fp8": m8, "bf16": sympy.expand(model - m8)},
            "hardware": {"fp8": h8, "bf16": sympy.expand(hw - h8)}}


def compute_seconds(split: dict, rate: Rate) -> sympy.Expr:
    """Seconds of compute per step for ``split`` (:func:`flops_by_precision`) at ``rate``."""
    if rate.kind == "achieved":
        return sympy.Add(*split["hardware"].values()) / rate.value
    which = split["model"] if rate.kind == "mfu" else split["hardware"]
    return sympy.Add(*[f / (sympy.Integer(rate.peaks[d]) * rate.value) for d, f in which.items() if f != 0])


def step_time(cg, layout, hardware, *, efficiency=sympy.Rational(1, 2), flops: dict | None = None,
              stage: str = "first", placement: Placement | None = None,
              collectives: dict | None = None, with_total: bool = True, rate: Rate | None = None,
              convention: str | None = None, causal: str | None = None) -> dict:
    """Seconds per step (module docstring): ``compute``, ``bubble``, ``communication_exposed``,
    ``communication_overlapped`` (not added), ``total``, and ``by_kind`` (seconds of each
    collective kind). ``layout`` filled; ``hardware`` a :class:`costgraph.hardware.Hardware`, or
    None with ``rate`` (its peaks given): no communication then. ``rate``: a :class:`Rate`; without
    one, ``efficiency`` of the preset's peaks. ``placement``, ``collectives``: the layout's, if the
    caller has them; ``with_total=False``: the parts only (the planner takes the max per layout);
    ``convention``, ``causal``: the FLOP conventions ``flops`` was counted under (the FP8 split
    counts the same way)."""
    L = layout.filled()
    f = flops if flops is not None else training_flops(cg, L)
    if rate is None:
        rate = Rate("efficiency", efficiency, default_peaks(hardware, L.policy))
    compute = compute_seconds(flops_by_precision(cg, L, f, convention, causal), rate)
    p, v, m = (sympy.Integer(x) if isinstance(x, int) else x for x in (L.p, L.v, L.m))
    bubble = compute * pipeline_bubble(L.schedule, p, m, v) if rate.covers == "compute" else sympy.Integer(0)
    kinds = {}
    if hardware is not None and L.lora_rank is None:
        if collectives is None:
            pl = placement if placement is not None else place(cg, L)
            collectives = communication(cg, L, stage=stage, placement=pl)
        kinds = comm_time(collectives, hardware, L)
    # EP: its overlap with computation (layout.ep_overlap; costgraph.parallel.ep_time)
    exposed = sympy.Add(*[ep_exposed(t, compute, L) if k == "ep" else t for k, t in kinds.items() if k in EXPOSED])
    overlapped = sympy.Add(*[t for k, t in kinds.items() if k not in EXPOSED])
    parts = {"compute": compute, "bubble": bubble, "communication_exposed": exposed,
             "communication_overlapped": overlapped, "by_kind": kinds}
    if offloaded(L) and hardware is not None:   # CPU/NVMe offload (costgraph.training.offload): host-link transfers
        from .memory import training_memory

        link = offload_link_seconds(training_memory(cg, L).stages[0 if stage == "first" else -1].memory, hardware)
        if link is not None:
            parts["offload"] = link
    if not with_total:   # the planner combines the parts per layout itself (SymPy's Max of two long sums is slow)
        return parts
    return {**parts, "total": combine(parts, rate.covers)}


def combine(parts: dict, covers: str = "compute", maximum=None):
    """The step's total from :func:`step_time`'s ``parts`` (module docstring): ``covers =
    "step"``: the compute; else max(compute + bubble [, offload], overlapped) + exposed.
    ``maximum``: the max of two values (default SymPy's, skipping a zero term); the planner
    passes NumPy's to combine arrays of evaluated parts (:mod:`costgraph.training.plan_forms`)."""
    if maximum is None:
        def maximum(a, b):
            return a if b == 0 else sympy.Max(a, b)
    if covers == "step":
        return parts["compute"]
    busy = parts["compute"] + parts["bubble"]
    if "offload" in parts:
        busy = maximum(busy, parts["offload"])
    return maximum(busy, parts["communication_overlapped"]) + parts["communication_exposed"]


def default_peaks(hardware, policy) -> dict:
    """``{"bf16": P}`` of a preset, and ``"fp8"`` for an FP8 policy (:meth:`Hardware.peak_flops`
    refuses a preset without an FP8 peak, naming it)."""
    from .fp8 import policy_recipe

    peaks = {"bf16": hardware.peak_flops_bf16}
    if policy_recipe(policy) is not None:
        peaks["fp8"] = hardware.peak_flops("fp8")
    return peaks
