"""The rate of the one step time (:mod:`costgraph.training.steptime`) from the options of
``costgraph train``, and the time section derived from the step.

Exactly one of ``--mfu``, ``--achieved`` and ``--efficiency`` sets a flat rate; when
none is given, the per-kernel time model (:mod:`costgraph.training.kernel_time`) on a
preset with a kernel table (``training/kernels.toml``), else ``--efficiency 0.5`` when a
peak is known (with a warning naming the preset without a table); ``--peak``
replaces the preset's BF16 peak, or gives one without a preset; an FP8 policy
takes the preset's FP8 peak for its FP8 linears. ``--rate-covers`` names what
the rate covers (``compute``: the kernels, bubble and communication added;
``step``: whole steps, the default of ``--mfu`` and ``--achieved``).

The time section: ``step_seconds`` (the step's total), and with ``tokens``
``steps``, ``train_seconds``, ``train_days``, ``gpu_hours``, ``pf_days`` (model
FLOPs, 10¹⁵ FLOP/s × 1 day), ``cost`` with a price; ``mfu`` and ``hfu`` (PaLM
App. B) of that step against the BF16 peak.
"""

from __future__ import annotations

import sympy

from .. import arguments
from ..choices import DEFAULT_EFFICIENCY
from ..errors import CostgraphValueError
from .steptime import COVERS, Rate, kernel_rate

SECONDS_PER_DAY = 86400
PF_DAY = 10**15 * SECONDS_PER_DAY


def step_rate(hw, policy, *, peak=None, mfu=None, achieved=None, efficiency=None, covers=None) -> Rate | None:
    """The :class:`~costgraph.training.steptime.Rate` of the step, or None when nothing sets one
    (no rate given and no peak). ``peak``: the BF16 peak (``--peak``, else the preset's);
    ``mfu``, ``achieved`` exact (checked by the caller); ``efficiency`` as given (None: the
    default); ``covers``: ``compute``, ``step`` or None (the rate's default).

    Raises
    ------
    CostgraphValueError
        Two rates; ``--efficiency`` outside (0, 1] or without a peak; an FP8 policy without a
        preset's FP8 peak; ``--rate-covers`` unknown or ``step`` with ``--efficiency``."""
    from .fp8 import policy_recipe

    given = [n for n, v in (("--mfu", mfu), ("--achieved", achieved), ("--efficiency", efficiency)) if v is not None]
    if len(given) > 1:
        raise CostgraphValueError(f"give one rate, not {' and '.join(given)}",
                                  hint="--mfu (model FLOPs), --achieved (hardware FLOP/s) or --efficiency "
                                       "(fraction of the peak the kernels reach)")
    if covers is not None and covers not in COVERS:
        raise CostgraphValueError(f"unknown --rate-covers {covers!r}", hint="compute or step")
    if efficiency is not None and peak is None:
        raise CostgraphValueError("--efficiency is for the step-time model on a peak: add --hardware NAME or --peak FLOPS")
    if mfu is None and achieved is None and peak is None:
        return None
    peaks = {} if peak is None else {"bf16": peak}
    if policy_recipe(policy) is not None and achieved is None:
        if hw is None:
            raise CostgraphValueError(f"the FP8 policy '{policy}' runs its linears at an FP8 peak: add --hardware NAME",
                                      hint="a preset with an FP8 peak (h100-sxm, h200, b200, ...)")
        peaks["fp8"] = hw.peak_flops("fp8")
    source = "" if hw is None else hw.key + ("" if peak == hw.peak_flops_bf16 else ", BF16 from --peak")
    if mfu is not None or achieved is not None:
        kind, value = ("mfu", mfu) if mfu is not None else ("achieved", achieved)
        return Rate(kind, value, peaks, covers or "step", source)
    if efficiency is None and covers != "step" and hw is not None and peak == hw.peak_flops_bf16:
        got = kernel_rate(hw, peaks, source)
        if got is not None:
            return got
    if covers == "step":
        raise CostgraphValueError("--efficiency is the fraction of the peak the kernels reach: it covers the compute",
                                  hint="--rate-covers step is for --mfu or --achieved measured over whole steps")
    eff = arguments.rational(DEFAULT_EFFICIENCY if efficiency is None else efficiency, "--efficiency")
    arguments.share(eff, "--efficiency", efficiency)
    notes = () if efficiency is not None or hw is None else (
        f"no kernel table for {hw.key} (training/kernels.toml): the flat --efficiency {DEFAULT_EFFICIENCY} "
        "of the peak is assumed for every kernel (--gemm-rate, a setting of the per-kernel model, does not apply)",)
    return Rate("efficiency", eff, peaks, "compute", source, notes=notes)


def time_from_step(flops: dict, layout, step, rate: Rate, *, tokens=None, price=None) -> dict:
    """``{"time": {...}, "mfu": ..., "hfu": ...}`` (module docstring) for a step of ``step``
    seconds; ``flops`` the ``flops`` section (``model_per_iteration``, ``hardware_per_iteration``,
    ``per_token``); ``layout`` filled. MFU and HFU need a BF16 peak in ``rate.peaks``."""
    from ..engine.symbols import as_expr

    n = as_expr(layout.t) * as_expr(layout.p) * as_expr(layout.c) * as_expr(layout.d)
    model, hw = flops["model_per_iteration"], flops["hardware_per_iteration"]
    time = {"step_seconds": step}
    if tokens is not None:
        steps = as_expr(tokens) / sympy.cancel(model / flops["per_token"])
        secs = steps * step
        time.update(steps=steps, train_seconds=secs, train_days=secs / SECONDS_PER_DAY, gpu_hours=n * secs / 3600,
                    pf_days=steps * model / PF_DAY)
        if price is not None:
            time["cost"] = time["gpu_hours"] * price
    out = {"time": time}
    if "bf16" in rate.peaks:
        denom = n * as_expr(rate.peaks["bf16"]) * step
        tidy = sympy.cancel if not step.has(sympy.Max) else (lambda x: x)
        out["mfu"], out["hfu"] = tidy(model / denom), tidy(hw / denom)
    return out
