"""What ``costgraph train`` computes, as a function of the Python API
(:meth:`costgraph.Model.train` calls :func:`train`).

For one :class:`~costgraph.parallel.layout.Layout` it puts together, in this
order (the order the checks of the input run in):

1. the hardware preset (peak FLOP/s, device memory) when one is named;
2. the micro-batches per step from a global batch: ``m = B / (b·d)``;
3. the layout's validity for the model's values (:func:`~costgraph.training.validity.check_layout`);
4. memory per device (:func:`~costgraph.training.memory.training_memory`) and the fit verdict
   with a device memory (:func:`training_fits`);
5. at model scope: FLOPs, time and utilization (:func:`~costgraph.training.compute.compute_summary`),
   the communication per device per step in bytes (:func:`~costgraph.parallel.communication.communication`,
   computed once) and, with a hardware preset, its seconds and the step time
   (:func:`~costgraph.training.steptime.step_time`);
6. Megatron-LM's estimate beside costgraph's (``megatron=True``).

Numbers given as text (``"0.45"``, ``"140e12"``) or floats are read exactly
(:func:`costgraph.arguments.rational`): ``mfu=0.45`` is 9/20, as ``--mfu 0.45``.
The messages name the command-line options (``--mfu``), which the keywords mirror.
"""

from __future__ import annotations

import dataclasses

import sympy

from .. import arguments
from ..choices import CAUSAL, CONVENTION, DEFAULT_EFFICIENCY
from ..errors import CostgraphValueError
from .contention import noted
from .fp8 import on_hardware
from .result import TrainingResult
from .validity import check_layout, check_pipeline_stacks, expert_option_warnings
from .result_parts import (CollectiveCost, FitVerdict, StepParts, TrainingCompute, TrainingSettings, TrainingTime,
                           UserbuffersSMs)


def train(model, layout, *, values=None, options=None, **settings) -> TrainingResult:
    """Training costs per device of ``model`` (a :class:`costgraph.Model`) under ``layout``.

    ``values``: dimension values (symbol → int, e.g. ``model.values("llama-2-7b")``), or None
    for formulas only; ``options``: a :class:`~costgraph.train_options.TrainOptions` (None: its
    defaults), ``settings`` its fields replaced by keyword (:func:`costgraph.option_fields.resolve`).
    The options: ``hardware``: a preset name or :class:`~costgraph.hardware.Hardware`
    (its dense BF16 peak and memory are the defaults of ``peak`` and ``memory``);
    ``tokens``: training tokens D; ``mfu``: assumed model FLOPs utilization in (0, 1];
    ``achieved``: achieved FLOP/s per device (instead of ``mfu``); ``peak``: FLOP/s per device;
    ``price``: per GPU-hour; ``global_batch``: sequences per step (sets ``m``; needs ``b`` in
    ``values`` and ``layout.gpus``); ``memory``: device bytes (int) or a size (``"80GB"``);
    ``efficiency``: the fraction of the peak the step-time model's kernels reach (default 1/2;
    needs ``hardware``); ``megatron``: add Megatron-LM's estimate; ``scope``: ``model`` or
    ``layer``; ``convention``, ``causal``: the FLOP conventions; ``router``: count MoE router FLOPs;
    ``reserve``: the memory the fit verdict keeps free, a fraction of the device memory or a size
    (default :data:`costgraph.choices.DEFAULT_RESERVE`, :func:`costgraph.training.fit.reserve_bytes`).
    ``rate_covers``: ``step`` or ``compute``, what ``mfu``/``achieved`` cover (:mod:`costgraph.training.rate`).
    ``efficiency_profile``: a calibration profile (a path or a ``Profile``; :mod:`costgraph.training.calibration`)
    fitted on ``hardware``: its factors multiply the step's parts, its reserve is the default ``reserve``.

    Returns a :class:`~costgraph.training.result.TrainingResult`.

    Raises
    ------
    CostgraphValueError
        As ``costgraph train`` does for the same inputs (an unknown preset, a global batch that
        does not divide, an MFU outside (0, 1], --tokens without a rate, a layout the model does
        not divide into, ...).
    """
    from ..option_fields import check, resolve
    from ..train_options import TrainOptions
    from .fit import floored_note

    o = resolve(TrainOptions, options, settings, "train")[0]
    values = arguments.model_values(model, values)
    check(o)   # each option's check, declared on its field (costgraph.train_options)
    capacity, floored, hw = _device(o.memory, o.hardware, o.memory_convention)
    check_reserve(o.reserve, capacity)
    profile, factors, reserve, held = _calibration(o.efficiency_profile, hw, (o.mfu, o.achieved, o.peak), o.reserve)
    # the layout on the preset: an FP8 recipe its GPU cannot run refused (MXFP8 on Hopper, as TE refuses it),
    # the FP8 weight transpose `auto` resolved as TE decides there (training.fp8.on_hardware)
    layout = on_hardware(layout, hw)
    if o.global_batch is not None:
        if layout.m is not None:
            raise CostgraphValueError("give --global-batch or --micro-batches, not both",
                                      hint="the global batch sets m = B / (b·d)")
        layout = dataclasses.replace(layout, m=micro_batches(model, values, layout, o.global_batch))
    check_pipeline_stacks(model.graph, layout)   # at any sizes: the symbolic result would show empty stages
    if values is not None:
        from ..parallel.tensor import with_kv_replication

        layout = with_kv_replication(model.graph, layout, values)   # K/V heads fewer than t: replicated
        check_layout(model.graph, layout.filled(), values)
    if o.scope not in ("model", "layer"):
        raise CostgraphValueError(f"training memory has scopes 'model' and 'layer', not {o.scope!r}",
                                  hint="--scope model (default) or layer")
    from .memory import training_memory

    mem = training_memory(model.graph, layout, o.scope)
    fits = training_fits(model, mem, values, capacity, o.scope, reserve, hw, o.memory is not None, o.memory_convention)
    compute = None
    if o.scope == "model":
        compute = compute_section(model, layout, hw, peak=o.peak, mfu=o.mfu, achieved=o.achieved, tokens=o.tokens,
                                  price=o.price, efficiency=o.efficiency, convention=o.convention, causal=o.causal,
                                  router=o.router, rate_covers=o.rate_covers, factors=factors, profile=profile)
    _calibrated(profile, held, fits, compute)   # what the profile calibrated, said in the result
    from ..arguments import value_warnings
    notes = (value_warnings(values) + mem.warnings + ([floored_note(o.memory, capacity)] if floored else [])
             + _lora_notes(model, layout, values) + _ep_notes(model, hw, layout, compute))
    notes += list(compute["rate"].notes) if compute is not None and "rate" in compute else []   # the step's assumptions
    beside = None
    if o.megatron:
        from .megatron import megatron_beside

        beside = megatron_beside(model, values, layout)
    off = _offload(mem, values, hw, o.scope, notes)   # CPU/NVMe offload: host and NVMe bytes, host-link time
    return TrainingResult(model.name, model.symbols, o.scope, mem, values, _settings(model, mem.layout, capacity),
                          fits, beside, compute, notes, offload=off)


def _ep_notes(model, hw, layout, compute) -> list[str]:
    """The EP options' warnings, as plan gives them: an option of the EP exchange on a model without routed
    experts (:func:`~costgraph.training.validity.expert_option_warnings`); ``--ep-dispatcher deepep`` on a preset
    ``hw`` without DeepEP's measured figure of a link, where the layout has EP traffic (train's report prints its
    EP dispatch line then; :func:`costgraph.hardware.dispatch_warnings`, in that line's words: NCCL's busbw, else
    the line rate, assumed; nothing without a preset, for ``alltoall`` or ``--link-rate line``)."""
    from ..hardware import dispatch_warnings

    out = expert_option_warnings(model.graph, layout)
    if hw is not None and compute is not None and "ep" in (compute.get("communication") or {}):
        out = out + dispatch_warnings(hw, layout.ep_dispatcher, layout.link_rate)
    return out


def check_reserve(reserve, capacity) -> None:
    """Refuse a given ``reserve`` that no fit verdict would use (no device memory: found by a hostile
    trial, `train --reserve nan` without --hardware ran with exit 0) or that cannot be read, before
    the analysis; ``None`` and ``"runtime"`` (the default) pass.

    Raises
    ------
    CostgraphValueError
        A reserve without ``capacity``, or one :func:`costgraph.training.fit.reserve_bytes` refuses."""
    from ..choices import RUNTIME_RESERVE
    from .fit import reserve_bytes

    if reserve is None or reserve == RUNTIME_RESERVE:
        return
    if capacity is None:
        raise CostgraphValueError(f"--reserve {str(reserve)[:40]} keeps memory free for the fit verdict, which needs "
                                  "the device memory", hint="give --hardware NAME or --memory 80GB, or drop --reserve")
    reserve_bytes(reserve, capacity)


def _device(memory, hardware, convention=None):
    """``(capacity, floored, hw)``: the device bytes of ``memory`` (a size floored to whole bytes:
    ``floored``; it wins, the user's own figure), else of the preset ``hardware`` (``hw``, None without
    one) under the memory ``convention`` (:func:`costgraph.runtime_memory.device_memory`: ``cuda``, the
    default, what CUDA reports, 79.22 GiB on an H100 SXM; ``nominal``: the printed 80 GB); None
    without either. Raises CostgraphValueError for an unknown convention, or ``nominal`` with ``memory``."""
    from ..runtime_memory import device_memory
    from .fit import memory_size

    capacity, floored = memory_size(memory) if memory is not None else (None, False)
    hw = None
    if hardware is not None:
        from ..hardware import preset

        hw = preset(hardware)
    seen = device_memory(hw, convention, capacity)   # checks the convention even where --memory wins
    return None if seen is None else seen.bytes, floored, hw


def layout_argument(layout, settings: dict):
    """The :class:`~costgraph.parallel.layout.Layout` of :meth:`costgraph.Model.train`'s ``layout``
    or its keyword ``settings`` (one or the other).

    Raises
    ------
    CostgraphValueError
        An unknown setting, both, or a ``layout`` that is no Layout."""
    from ..parallel.layout import Layout

    if layout is None:
        fields = set(Layout.__dataclass_fields__)
        unknown = sorted(set(settings) - fields)
        if unknown:
            raise CostgraphValueError(f"train() has no setting {unknown[0]!r}",
                                      hint="settings: " + ", ".join(sorted(fields)))
        return Layout(**settings)
    if not isinstance(layout, Layout):
        raise CostgraphValueError(f"train() takes a Layout or keyword settings, not {arguments.shown(layout)}",
                                  hint="model.train(t=2, gpus=8) or model.train(Layout(t=2, gpus=8))")
    if settings:
        raise CostgraphValueError("give a Layout or keyword settings, not both",
                                  hint="model.train(Layout(t=2, gpus=8)) or model.train(t=2, gpus=8); "
                                       "dataclasses.replace(layout, t=4) changes a Layout")
    return layout


def _calibration(source, hw, rates: tuple, reserve):
    """``(profile, factors, reserve, held)`` of ``efficiency_profile``: None, a bare
    :class:`~costgraph.training.calibration.Factors` (applied unchecked: the fit's trials), or a
    profile (a path or a ``Profile``), checked against the preset ``hw``; its memory reserve when
    ``reserve`` is not given (``held``: whether it is the profile's)."""
    if source is None:
        return None, None, reserve, False
    from .calibration_profile import Factors, check
    from .calibration_file import load_profile

    if isinstance(source, Factors):
        return None, source, reserve, False
    profile = load_profile(source)
    check(profile, None if hw is None else hw.key)
    mfu, achieved, peak = rates
    if mfu is not None or achieved is not None:
        raise CostgraphValueError(f"{'--mfu' if mfu is not None else '--achieved'} sets the whole step's rate; "
                                  "--efficiency-profile calibrates the step time model's parts",
                                  hint="give one of them")
    if peak is not None:   # another peak: another time model than the one the profile was fitted under
        raise CostgraphValueError(f"--peak replaces the peak of {hw.key} that {profile.source or 'the profile'} "
                                  "was fitted on", hint="leave out --peak with --efficiency-profile")
    held = reserve is None and profile.reserve is not None
    if held:
        reserve = f"{profile.reserve.bytes}B" if profile.reserve.bytes else 0
    return profile, profile.multipliers(), reserve, held


def _calibrated(profile, held: bool, fits, compute) -> None:
    """Say in ``fits`` (``reserve_from``) and ``compute`` (``calibration``) what ``profile`` calibrated."""
    if profile is None:
        return
    from .calibration_profile import calibrated

    if fits is not None and held:
        fits.reserve_from = f"calibrated: {profile.source or 'the profile'}"
    if compute is not None:
        compute.calibration = calibrated(profile, reserve=held)


def _lora_notes(model, layout, values) -> list[str]:
    """A LoRA rank above a target's smaller side, warned (:func:`~costgraph.training.lora.rank_warnings`)."""
    if layout.lora_rank is None:
        return []
    from .lora import lora, rank_warnings

    return rank_warnings(lora(model.graph, rank=layout.lora_rank, targets=layout.lora_targets,
                              dropout=layout.lora_dropout), values)


def _offload(mem, values, hw, scope: str, notes: list):
    """:func:`~costgraph.training.offload.offload_section` of ``mem`` at model scope with offload
    on, else None; at layer scope a note that offload is not applied."""
    from .offload import offload_section, offloaded

    if not offloaded(mem.layout):
        return None
    if scope == "layer":
        notes.append("offload is not applied at scope 'layer': one layer's states and activations as on the device")
        return None
    return offload_section(mem, values, hw)


def _settings(model, layout, capacity) -> TrainingSettings:
    """The settings beside the layout that ``plan`` in the JSON names."""
    targets = layout.lora_targets
    return TrainingSettings(profile=model.settings.profile, dropout=model.settings.dropout, memory=capacity,
                            lora=layout.lora_rank,
                            lora_targets=None if layout.lora_rank is None else
                            ([targets] if isinstance(targets, str) else list(targets)),
                            quantization=layout.quantization)


def micro_batches(model, values, layout, global_batch: int) -> int:
    """``m`` from a global batch of ``global_batch`` sequences: B = b·m·d, d = gpus / (t·p·c).

    Raises
    ------
    CostgraphValueError
        No value for ``b``, no ``gpus``, or B not a multiple of b·d."""
    if values is None or "b" not in model.graph.dims or model.graph.dims["b"].symbol not in values:
        raise CostgraphValueError("--global-batch needs the micro-batch b", hint="give --config or --set b=N")
    if layout.gpus is None:
        raise CostgraphValueError("--global-batch needs --gpus (to know the data-parallel degree)",
                                  hint="the devices of the run, e.g. --gpus 8 (gpus=8 in Python), or --micro-batches "
                                       "M instead of a global batch")
    gpus = layout.gpus
    if isinstance(gpus, (str, float)) and not isinstance(gpus, bool):   # text or a whole float, as Layout.filled
        gpus = arguments.token_count(gpus, "--gpus")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus <= 0:   # before d = gpus/(t·p·c)
        raise CostgraphValueError(f"gpus (--gpus) must be a positive whole number, got {layout.gpus!r}",
                                  hint="the devices of the run, e.g. --gpus 8")
    b = int(values[model.graph.dims["b"].symbol])
    # the degrees checked and read as the Layout reads them (t='x' was a TypeError below, t=nan "nan"; t='2' was
    # compared as text: trial 9)
    filled = layout.filled()
    per = filled.t * filled.p * filled.c
    if per <= 0 or gpus % per:
        raise CostgraphValueError(f"{gpus} GPUs do not divide into t·p·c = {per}",
                                  hint="gpus = t × p × c × d for a whole data-parallel degree d")
    d = gpus // per
    if global_batch <= 0 or global_batch % (b * d):
        raise CostgraphValueError(f"the global batch {global_batch} is not a multiple of b·d = {b}·{d}",
                                  hint="B = b × m × d sequences per step")
    return global_batch // (b * d)


def training_fits(model, result, values, capacity, scope: str = "model", reserve=None, hw=None,
                  given: bool = False, convention: str | None = None) -> FitVerdict | None:
    """The fit verdict for a device of ``capacity`` bytes less ``reserve``: ``None`` or
    ``"runtime"`` (:data:`costgraph.choices.RUNTIME_RESERVE`) the named parts of
    :func:`costgraph.runtime_memory.training_reserve` (the CUDA context of ``hw``'s GPU class, the
    cuBLAS/cuBLASLt workspaces, NCCL's buffers of the layout's parallel groups; the capacity CUDA
    reports on ``hw`` unless ``given``: from ``--memory``; the printed one under ``convention`` ``nominal``,
    :func:`costgraph.runtime_memory.preset_capacity`), else a fraction or a size of that capacity
    (:func:`costgraph.training.fit.reserve_bytes`): ``{capacity_bytes, reserve_bytes, reserve_from,
    fits, headroom_bytes, largest_b, largest_s}`` for the most-loaded device of ``result`` (a
    TrainingMemory), headroom and the largest sizes against the capacity less the reserve; with the
    runtime reserve ``reserve_parts`` (``[{name, bytes, source}]``); ``capacity_from`` where the capacity is
    CUDA's; when it
    does not fit, ``changes``: what would make it fit (:func:`costgraph.training.fit.fit_changes`):
    a :class:`~costgraph.training.result_parts.FitVerdict`. None without a capacity or without every value. Shared with ``costgraph report``."""
    import sympy

    from .fit import fit_changes, largest_fitting, reserve_bytes

    if capacity is None or values is None:
        return None
    total = result.most_loaded(values).memory["total"]
    if not total.free_symbols <= set(values):
        return None
    extra = {}
    from ..choices import RUNTIME_RESERVE

    if reserve is None or reserve == RUNTIME_RESERVE:
        from ..runtime_memory import training_reserve

        r = training_reserve(hw, _groups(result.layout, values), capacity, given, convention)
        capacity, held = r.capacity, r.bytes
        if held >= capacity:   # was "does NOT fit" (issue 29): no layout fits a device the runtime alone fills
            raise CostgraphValueError(
                f"the device memory, {capacity:,} bytes, is not more than the runtime reserve of {held:,} bytes "
                f"({r.words()})", hint="--memory is one GPU's whole memory, e.g. 80GB or 79.22GiB (an H100's, as "
                "CUDA reports it); or keep less of it free: --reserve 0 (nothing) or a size below it")
        extra = {"reserve_from": r.words(), "reserve_parts": list(r.parts)}
        if r.capacity_from:
            extra["capacity_from"] = r.capacity_from
    else:
        from ..runtime_memory import preset_capacity

        seen = preset_capacity(hw, given, convention)   # the capacity the runtime reserve takes, named
        capacity = capacity if seen is None else seen.bytes
        held = reserve_bytes(reserve, capacity)
        extra = {"reserve_from": "--reserve"} | ({} if seen is None else {"capacity_from": seen.source})
    usable = capacity - held
    used = int(sympy.ceiling(total.xreplace(values)))
    fits = FitVerdict(capacity_bytes=capacity, reserve_bytes=held, fits=used <= usable, headroom_bytes=usable - used,
                      **extra)
    worst = [st.memory["total"] for st in result.stages]
    for name in ("b", "s"):   # the largest micro-batch, and the longest sequence, that fit
        info = model.graph.dims.get(name)
        if info is not None and info.derived is None and scope == "model":
            best = [largest_fitting(e, info.symbol, values, usable) for e in worst]
            setattr(fits, f"largest_{name}", None if None in best else min(best))
            fits.searched += (name,)
    if not fits.fits and scope == "model":
        fits.changes = fit_changes(model, result.layout, values, usable)
    return fits


def _groups(layout, values) -> dict[str, int]:
    """The layout's parallel groups at ``values`` (:func:`costgraph.runtime_memory.parallel_groups`)."""
    from ..runtime_memory import parallel_groups

    def degree(attr):
        v = getattr(layout, attr, 1)
        return v.xreplace(values) if hasattr(v, "xreplace") else v
    return parallel_groups(*(degree(a) for a in ("t", "p", "c", "d", "e")))


#: the hint of a rate below 1 FLOP/s (issue 30: --peak 0.5 ended in an internal error)
PEAK_HINT = "give FLOP/s per device, e.g. 989.4e12 (an H100 SXM's dense BF16 peak)"


def _peak_shown(v) -> str:
    return f"{float(v):.4g}"


def _rates(hw, peak, mfu, achieved, tokens, price):
    """The rates of the time section, exact, checked as ``costgraph train`` checks them."""
    shown = {"mfu": mfu, "achieved": achieved}
    peak = arguments.rational(peak, "--peak") if peak is not None else (
        hw.peak_flops_bf16 if hw is not None else None)
    mfu = arguments.rational(mfu, "--mfu")
    achieved = arguments.rational(achieved, "--achieved")
    if mfu is not None and achieved is not None:
        raise CostgraphValueError("give --mfu or --achieved, not both",
                                  hint="--mfu is a share of the peak (0.45), --achieved the FLOP/s a device reached "
                                       "(400e12): one of them")
    arguments.share(mfu, "--mfu", shown["mfu"])
    if mfu is not None and peak is None:
        raise CostgraphValueError("--mfu needs a peak: --hardware NAME or --peak FLOPS",
                                  hint="a preset (--hardware h100-sxm; hardware='h100-sxm' in Python) or the peak "
                                       "FLOP/s per device (--peak 989e12)")
    for name, v in (("--achieved", achieved), ("--peak", peak)):
        if v is not None and v <= 0:
            raise CostgraphValueError(f"{name} must be positive", hint=f"FLOP/s per device above 0, e.g. {name} 400e12")
        if v is not None and v < 1:   # a rate under 1 FLOP/s: no device; the kernel model's logarithms go complex
            raise CostgraphValueError(f"{name} {shown.get(name[2:], v) if name == '--achieved' else _peak_shown(v)} "
                                      "FLOP/s is below 1 FLOP/s", hint=PEAK_HINT)
    if achieved is not None and peak is not None and achieved > peak:
        raise CostgraphValueError(f"--achieved {shown['achieved']} FLOP/s is above the peak ({float(peak):.4g} FLOP/s)",
                                  hint="achieved FLOP/s per device cannot pass the dense peak")
    tokens, price = arguments.rational(tokens, "--tokens"), arguments.rational(price, "--price")
    for name, v in (("--tokens", tokens), ("--price", price)):
        if v is not None and v <= 0:
            raise CostgraphValueError(f"{name} must be positive", hint=f"a number above 0, e.g. "
                                      f"{'--tokens 1e12' if name == '--tokens' else '--price 2.5 (per GPU-hour)'}")
    if price is not None and tokens is None:   # the cost is price × GPU-hours of D tokens (trial6: dropped unsaid)
        raise CostgraphValueError("--price needs --tokens: the cost is the price × the GPU-hours of training D tokens",
                                  hint="add --tokens D, e.g. --tokens 1e12")
    if (tokens is not None or price is not None) and mfu is None and achieved is None and peak is None:
        raise CostgraphValueError("--tokens and --price need a rate: --mfu (with a peak), --achieved, "
                                  "or a peak (--hardware or --peak) for --efficiency",
                                  hint="add --hardware h100-sxm (hardware='h100-sxm' in Python), or --mfu 0.4 with "
                                       "--peak FLOPS")
    return peak, mfu, achieved, tokens, price


def compute_section(model, layout, hw, *, peak=None, mfu=None, achieved=None, tokens=None, price=None,
                    efficiency=None, convention: str = CONVENTION.default, causal: str = CAUSAL.default,
                    router: bool = True, rate_covers=None, factors=None, profile=None) -> TrainingCompute:
    """FLOPs (:func:`~costgraph.training.compute.compute_summary`), the ONE step time
    (:func:`~costgraph.training.steptime.step_time` at the rate of ``mfu``, ``achieved`` or
    ``efficiency``, on the peaks of ``hw`` or ``peak``) and the time and utilization derived from
    it (:func:`~costgraph.training.rate.time_from_step`), the communication per device per
    step (a :class:`~costgraph.training.result_parts.CollectiveCost` per kind: bytes, op, group, computed
    once; ``seconds``, ``exposed``, ``hidden`` with a preset ``hw``); the step's parts a
    :class:`~costgraph.training.result_parts.StepParts`.
    ``factors``: a calibration's multipliers of the step's parts; ``profile``: the calibration profile
    they come from (checked against the rate's time model; ``calibration`` in the result).
    Returns a :class:`~costgraph.training.result_parts.TrainingCompute`."""
    from .compute import compute_summary
    from .rate import step_rate, time_from_step

    peak, mfu, achieved, tokens, price = _rates(hw, peak, mfu, achieved, tokens, price)
    filled = layout.filled()
    rate = step_rate(hw, filled.policy, peak=peak, mfu=mfu, achieved=achieved, efficiency=efficiency,
                     covers=rate_covers)
    if rate is not None and rate.kind == "kernels" and filled.lora_rank is not None:   # adapters: the flat model
        from .steptime import Rate

        rate = Rate("efficiency", sympy.Rational(1, 2), rate.peaks, "compute", rate.source, notes=(
            "LoRA adapters are not timed per kernel: the flat --efficiency 0.5 of the peak is assumed",))
    out = compute_summary(model.graph, filled, convention=convention, causal=causal, router=router)
    cols = None
    if layout.lora_rank is None:   # adapters: the frozen base's traffic is not modelled
        from ..parallel.communication import communication

        cols = communication(model.graph, filled)
        if hw is None and cols:
            out["communication"] = {k: CollectiveCost(c.bytes, op=c.op, group=c.group) for k, c in cols.items()}
    if rate is None:
        return TrainingCompute(**out)
    from .steptime import step_time

    if profile is not None:
        from .calibration_profile import check

        check(profile, hw.key, rate)
    st = step_time(model.graph, layout, hw, rate=rate, flops=out["flops"], collectives=cols,
                   convention=convention, causal=causal, factors=factors)
    if hw is not None and cols is not None:   # each kind's seconds, hidden and exposed (training.overlap), contention
        ov, exposed, out["overlap_contention"] = st["overlap"], st["overlap"].exposed(), filled.overlap_contention
        out["communication"] = {k: CollectiveCost(c.bytes, st["by_kind"][k], exposed[k], st["by_kind"][k] - exposed[k],
                                                  ov.kinds[k].rule, c.op, c.group) for k, c in cols.items()}
    out["step"] = StepParts(**{k: v for k, v in st.items() if k not in ("by_kind", "overlap", "compute_by_class")})
    out["overlap"] = filled.overlap
    if filled.loss:   # the loss's kernels timed (costgraph.training.cross_entropy); none under --no-loss
        out["cross_entropy"] = filled.cross_entropy
    if "compute_by_class" in st:   # the per-kernel model: compute seconds by kernel class, at --gemm-rate (kernel_table.rated)
        out["compute_by_class"], out["gemm_rate"] = st["compute_by_class"], filled.gemm_rate
        from ..parallel.placement import expert_groups

        if expert_groups(model.graph):   # the MoE dispatch copies timed (costgraph.training.moe_kernels)
            from .moe_kernels import PERMUTE_CONVENTION

            out["moe_permute"] = PERMUTE_CONVENTION
        if filled.attention == "flash":   # the fused attention kernel whose curves time the flash cores
            out["attention_kernel"] = filled.resolved("attention_kernel")
        from .kernel_time import UB_COMM_SMS, userbuffers_margin

        if userbuffers_margin(filled, rate.table) != 1:   # TP-overlapped GEMMs on the SMs userbuffers leave
            out["userbuffers_sms"] = UserbuffersSMs(rate.table.sm_count - UB_COMM_SMS, rate.table.sm_count)
    out["rate"] = rate = noted(rate, hw, filled.overlap_contention) if cols else rate   # no contention.toml entry: said
    out["efficiency"] = rate.value if rate.kind == "efficiency" else None
    out["hardware"] = None if hw is None else hw.key   # the preset the seconds are on (a file's preset: PATH:NAME)
    derived = time_from_step(out["flops"], filled, st["total"], rate, tokens=tokens, price=price)
    out.update(derived, time=TrainingTime(**derived["time"]))
    return TrainingCompute(**out)
