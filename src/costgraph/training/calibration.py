"""Calibration from the user's own runs (``costgraph calibrate``; issue 27 item 5).

The step time (:func:`costgraph.training.steptime.step_time`) is made of parts: the compute
kernels' seconds (and the pipeline bubble, a share of them), and each collective kind's seconds,
combined by one rule (overlapped traffic hidden behind the compute, the rest exposed). A
**profile** is a few named, bounded **factors**, each a multiplier of one part, fitted so that the
time model reproduces measured steps, and a **memory reserve** (bytes the run holds beyond the
predicted peak: CUDA context, allocator fragmentation, communication buffers):

* ``compute`` multiplies the compute kernels' seconds; ``compute-matmul``, ``compute-attention``,
  ``compute-memory-bound`` the kernels of one class where the time model has classes (a step dict
  with ``compute_by_class``), each replacing ``compute`` for its class;
* ``communication`` multiplies every collective's seconds; ``communication-tp``, ``-cp``, ``-ep``,
  ``-pp``, ``-dp`` one kind's (``dp``: the data-parallel gradient reduction and ZeRO/FSDP traffic;
  ``pp``: the point-to-point sends and the tied-embedding reduction), each replacing
  ``communication`` for its kind;
* the factors apply where each part is made, before the parts are combined
  (:meth:`Factors.scale_compute`, :meth:`Factors.scale_kinds`, called by ``step_time``), so the
  combination rule, the EP overlap and the bubble see the calibrated parts.

**Fitting** (:func:`calibrate`). One run: one factor (``compute``) is solved exactly: the rational
``k`` with ``step(k) = measured`` (:func:`costgraph.training.calibration_fit.solve_increasing`; the
step is piecewise linear in ``k``). Several runs: the factors minimize the sum of squared relative
errors ``(predicted_i − measured_i) / measured_i`` inside their bounds
(:func:`costgraph.training.calibration_fit.bounded_least_squares`, over ``log k``); the residual of
each run is reported. The memory reserve: the ``1/measured²``-weighted mean of ``measured −
predicted`` over the runs with a measured peak (the same relative least squares; one run: the
difference itself), at least 0.

**Bounds**: each factor in [1/4, 4] (:data:`BOUNDS`); ``compute`` and its classes also at least the
ratio of the time at 100% of the peak to the modelled time (a factor below it would run a kernel
faster than the peak). A measured step below that roofline (every kernel at 100% of the peak, no
bubble, every collective hidden) is refused, as are zero, negative, NaN and infinite times.

**Use**: a profile is fitted under one hardware preset and one time model (:func:`time_model`);
:func:`check` refuses it under another. ``costgraph train``, ``plan`` and ``fit`` take it as
``--efficiency-profile FILE`` (the API: ``efficiency_profile=``); the file is a user data table
(:mod:`costgraph.training.calibration_file`: ``to_toml``, ``load_profile``). The types and checks are in
:mod:`costgraph.training.calibration_profile` (re-exported here).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from ..parallel.layout import Layout
from .calibration_fit import bounded_least_squares, separable, solve_increasing
from .calibration_profile import (BOUNDS, BOUNDS_SOURCE, CLASSES, FACTORS, GROUPS, Factor, Factors, Profile,  # noqa: F401
                                  Reserve, Run, calibrated, check, memory_bytes, seconds, time_model)


@dataclass(frozen=True)
class Measured:
    """One run to calibrate against: ``layout`` (a :class:`~costgraph.parallel.layout.Layout`),
    ``measured_step`` (seconds per step: an int, float, Fraction or decimal text), ``values``
    (dimension values; b the micro-batch), ``measured_memory`` (bytes, the most-loaded device's
    peak), ``global_batch`` (sequences per step, sets m), ``config`` and ``flags`` (how the run is
    named in the profile; default: the layout's fields)."""

    layout: object
    measured_step: object
    values: Mapping | None = None
    measured_memory: object = None
    global_batch: int | None = None
    config: str | None = None
    flags: str | None = None


# ---------------------------------------------------------------- fitting

@dataclass
class _Prepared:
    """One run evaluated once with symbolic factors: its total step (an expression in the factor
    symbols), the roofline, the compute at factor 1, the predicted memory, and its record fields."""

    total: sympy.Expr
    roofline: sympy.Rational
    compute: sympy.Rational
    memory: int
    measured: sympy.Rational
    measured_memory: int | None
    record: dict


def _prepare(model, run: Measured, name: str, hardware, symbols: dict, convention, causal, date) -> _Prepared:
    """Evaluate ``run`` once (:func:`costgraph.training.api.train` with the factors as symbols)."""
    from .api import train
    from .steptime import Rate, compute_seconds, flops_by_precision

    what = f"run {name}"
    measured = seconds(run.measured_step, f"{what}: the measured step")
    mem = None if run.measured_memory is None else memory_bytes(run.measured_memory, f"{what}: the measured memory")
    layout = run.layout
    if getattr(layout, "gpus", 0) is None:   # no --gpus: one data-parallel replica (as report and plot take it)
        import dataclasses

        layout = dataclasses.replace(layout, gpus=layout.t * layout.p * layout.c)
    r = train(model, layout, values=run.values, hardware=hardware, global_batch=run.global_batch,
              convention=convention, causal=causal, efficiency_profile=Factors(symbols))
    values = r.values or {}
    if r.step is None:
        raise CostgraphValueError(f"{what}: no step time to calibrate", hint="a hardware preset gives it")
    total = as_expr(r.step["total"]).xreplace(values)
    unknown = total.free_symbols - set(symbols.values())
    if unknown:
        raise CostgraphValueError(f"{what}: no value for {', '.join(sorted(map(str, unknown)))}",
                                  hint="give the run's sizes: --config NAME or --set b=... s=...")
    ones = {s: 1 for s in symbols.values()}
    rate = r.compute["rate"]
    split = flops_by_precision(model.graph, r.layout, r.compute["flops"], convention, causal)
    roofline = sympy.nsimplify(compute_seconds(split, Rate("efficiency", 1, rate.peaks)).xreplace(values))
    compute = as_expr(r.step["compute"]).xreplace(values).xreplace(ones)
    if measured < roofline:
        raise CostgraphValueError(
            f"{what}: the measured step {float(measured):.6g} s is faster than the roofline allows: "
            f"{float(roofline):.6g} s with every kernel at 100% of the peak, no bubble and every collective hidden",
            hint="check that the time is seconds per step (every micro-batch), the global batch or micro-batches, "
                 "the sizes (--set b=... s=...) and --hardware")
    capacity = r.settings.get("memory")
    if mem is not None and isinstance(capacity, int) and mem > capacity:
        raise CostgraphValueError(
            f"{what}: the measured memory {mem:,} bytes is more than the device holds ({capacity:,} bytes on "
            f"{r.compute['hardware']})", hint="the peak of the most-loaded device, in bytes or a size such as 71.3GiB; "
                                             "and the --hardware the run used")
    peak = int(sympy.ceiling(r.most_loaded().memory["total"].xreplace(values)))
    L = r.layout
    record = {"name": name, "model": model.name, "config": run.config,
              "flags": run.flags if run.flags is not None else _flags(L, run.global_batch),
              "hardware": r.compute["hardware"], "measured_step": Fraction(int(measured.p), int(measured.q)),
              "measured_memory": mem, "date": date}
    return _Prepared(total, roofline, compute, peak, measured, mem, {**record, "_rate": rate,
                                                                      "_capacity": r.settings.get("memory")})


def _flags(L, global_batch) -> str:
    """The layout as ``costgraph train`` options (the API's runs, without the command's words)."""
    words = [f"--gpus {L.gpus}", f"--tp {L.t}", f"--pp {L.p}", f"--cp {L.c}", f"--ep {L.e}", f"--zero {L.zero}",
             f"--recompute {L.recompute}", f"--precision {L.policy}", f"--schedule {L.schedule}"]
    words += [f"--global-batch {global_batch}"] if global_batch is not None else [f"--micro-batches {L.m}"]
    return " ".join(words) + (" --sp" if L.sp else "")


def _runs(runs) -> list[Measured]:
    """``runs`` (a :class:`Measured`, a mapping of its fields, or a list of them) as a list."""
    if isinstance(runs, (Measured, Mapping)):
        runs = [runs]
    out = []
    for i, r in enumerate(runs if isinstance(runs, (list, tuple)) else [None], 1):
        if isinstance(r, Mapping):
            unknown = sorted(set(r) - set(Measured.__dataclass_fields__))
            if unknown:
                raise CostgraphValueError(f"run {i}: unknown field {unknown[0]!r}",
                                          hint="fields: " + ", ".join(Measured.__dataclass_fields__))
            r = Measured(**r)
        if not isinstance(r, Measured):
            raise CostgraphValueError("calibrate() takes a Measured run, a mapping of its fields, or a list of them",
                                      hint="Measured(layout, measured_step, values=..., measured_memory=...)")
        if not isinstance(r.layout, Layout):
            raise CostgraphValueError(f"run {i}: the layout is a {type(r.layout).__name__}, not a Layout",
                                      hint="Measured(Layout(t=2, gpus=8), measured_step, ...) "
                                           "(costgraph.parallel.layout.Layout)")
        out.append(r)
    if not out:
        raise CostgraphValueError("no run to calibrate against", hint="give at least one measured run")
    return out


def calibrate(model, runs, hardware, *, fit=None, convention: str | None = None, causal: str | None = None,
              date: str | None = None) -> Profile:
    """Fit a :class:`Profile` (module docstring) to ``runs`` of ``model`` on ``hardware`` (a preset
    name). ``runs``: :class:`Measured` runs (or mappings of its fields); ``fit``: the factor names
    to fit (default ``compute`` for one run, ``compute`` and ``communication`` for several);
    ``convention``, ``causal``: the FLOP conventions (defaults: ``costgraph train``'s); ``date``:
    the date recorded (default today, UTC, or the day of ``SOURCE_DATE_EPOCH`` where set:
    :func:`today`).

    Raises
    ------
    CostgraphValueError
        A bad time or size, a measured step below the roofline, an unknown factor or one no run
        exercises, more factors than runs, one run that no compute factor in its bounds reproduces."""
    from ..choices import CAUSAL, CONVENTION
    from ..hardware import preset
    from ..version import __version__

    measured = _runs(runs)
    hw = preset(hardware)
    date = date or today()
    names = ([fit] if isinstance(fit, str) else list(fit)) if fit is not None else (["compute"] if len(measured) == 1 else ["compute", "communication"])
    bad = [n for n in names if n not in FACTORS]
    if bad or len(set(names)) != len(names) or not names:
        raise CostgraphValueError(f"unknown factor {bad[0]!r}" if bad else "name each factor once",
                                  hint="factors: " + ", ".join(FACTORS))
    symbols = {n: sympy.Symbol(f"k_{n.replace('-', '_')}", positive=True) for n in names}
    prepared = []
    for i, r in enumerate(measured, 1):
        try:
            prepared.append(_prepare(model, r, str(i), hw, symbols, convention or CONVENTION.default,
                                     causal or CAUSAL.default, date))
        except CostgraphValueError as e:   # which run (a CSV row: run N is its N-th row)
            if e.loc is not None or f"run {i}" in e.message:
                raise
            raise CostgraphValueError(f"run {i}: {e.message}", hint=e.hint or "the run's layout options, as its "
                                      "command line or CSV row (run N: the N-th row) gives them") from None
    _check_repeats(prepared)
    notes = []
    used = [n for n in names if any(p.total.has(symbols[n]) for p in prepared)]
    for n in names:
        if n not in used:
            if fit is not None:
                raise CostgraphValueError(f"no run has a part that {n} multiplies ({FACTORS[n]})",
                                          hint="leave it out of the factors to fit")
            notes.append(f"{n} not fitted: no run has a part it multiplies ({FACTORS[n]})")
    if len(used) > len(prepared):
        raise CostgraphValueError(f"{len(used)} factors ({', '.join(used)}) need at least {len(used)} runs, "
                                  f"not {len(prepared)}", hint="give more runs (--runs FILE) or fewer factors (--fit)")
    lower = {n: _lower(n, prepared) for n in used}
    values = _fit(prepared, used, symbols, lower, notes)
    reserve, reserve_bytes = _reserve(prepared, hw.memory_bytes)
    notes += _above_measured(prepared)
    factors = tuple(Factor(n, values[n], lower[n][0], BOUNDS[1], tuple(p.record["name"] for p in prepared
                                                                         if p.total.has(symbols[n])), lower[n][1])
                    for n in used)
    at = {symbols[n]: sympy.Rational(values[n].numerator, values[n].denominator) for n in used}
    run_list = []
    for p in prepared:
        step = p.total.xreplace(at)
        rec = {k: v for k, v in p.record.items() if not k.startswith("_")}
        run_list.append(Run(**rec, predicted_step=Fraction(int(step.p), int(step.q)),
                            predicted_memory=None if reserve is None else p.memory + reserve_bytes))
    return Profile(hw.key, time_model(prepared[0].record["_rate"]), factors, reserve, tuple(run_list), date,
                   __version__, tuple(notes))


# assumption: repeated measurements of one run agree within 10% (run-to-run noise of a training step
# is a few percent); runs further apart are more likely two different setups under one row's options
REPEAT_SPREAD = Fraction(1, 10)


def today() -> str:
    """The date a profile records, ISO 8601 (``2026-12-06``): today in UTC, or the UTC day of the
    environment variable ``SOURCE_DATE_EPOCH`` (seconds since 1970) where it is set, the
    reproducible-builds convention (https://reproducible-builds.org/specs/source-date-epoch/), so a
    profile written twice is the same file.

    Raises
    ------
    CostgraphValueError
        ``SOURCE_DATE_EPOCH`` set to something other than a whole number of seconds in range
        (the specification: a malformed value is an error, not ignored)."""
    import datetime
    import os

    text = os.environ.get("SOURCE_DATE_EPOCH")
    if text is None:
        return datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    try:
        if not text.isascii() or not text.strip().isdigit() or len(text.strip()) > 12:
            raise ValueError
        return datetime.datetime.fromtimestamp(int(text), datetime.timezone.utc).date().isoformat()
    except (ValueError, OverflowError, OSError):
        raise CostgraphValueError(f"SOURCE_DATE_EPOCH must be a whole number of seconds since 1970, not "
                                  f"{text[:20]!r}", hint="unset it, or give the seconds (date +%s)") from None


def _check_repeats(prepared: list[_Prepared]) -> None:
    """Refuse two runs the time model cannot tell apart (the same step as a function of the factors)
    whose measured steps differ by more than :data:`REPEAT_SPREAD`: no factor fits both."""
    seen: dict = {}
    for p in prepared:
        first = seen.setdefault(p.total, p)
        lo, hi = sorted((first.measured, p.measured))
        if hi > lo * (1 + sympy.Rational(REPEAT_SPREAD.numerator, REPEAT_SPREAD.denominator)):
            raise CostgraphValueError(
                f"runs {first.record['name']} and {p.record['name']} are the same run to the time model "
                f"({p.record['flags']}) but measured {float(first.measured):.6g} s and {float(p.measured):.6g} s "
                f"(more than {float(REPEAT_SPREAD):.0%} apart)",
                hint="check each row's layout options (a column the run changed but the CSV left out), or keep "
                     "one of the two measurements")


def _lower(name: str, prepared: list[_Prepared]) -> tuple[Fraction, str]:
    """The lower bound of factor ``name`` and its source: 1/4, and for the compute factors at least
    the largest ratio of the roofline to the modelled compute over the runs."""
    low, source = BOUNDS[0], BOUNDS_SOURCE
    if name.startswith("compute"):
        ratio = max(sympy.Rational(p.roofline) / p.compute for p in prepared if p.compute != 0)
        if ratio > low:
            low = Fraction(int(ratio.p), int(ratio.q))
            source = "the time at 100% of the peak over the modelled compute (no kernel runs faster than the peak)"
    return low, source


def _fit(prepared: list[_Prepared], names: list[str], symbols: dict, lower: dict, notes: list) -> dict[str, Fraction]:
    """The fitted value of each factor in ``names`` (module docstring: exact for one factor and one
    run, else bounded least squares on the relative errors); a note in ``notes`` when the runs do
    not tell the factors apart."""
    if len(names) == 1 and len(prepared) == 1:
        p, n = prepared[0], names[0]
        s = symbols[n]
        lo, hi = sympy.Rational(lower[n][0]), sympy.Rational(BOUNDS[1])
        k = solve_increasing(lambda x: p.total.xreplace({s: x}), p.measured, lo, hi)
        if k is None:
            slow = p.total.xreplace({s: lo}) > p.measured
            edge = p.total.xreplace({s: lo if slow else hi})
            raise CostgraphValueError(
                f"run 1: no {n} factor in [{float(lo):.4g}, {float(hi):.4g}] reproduces the measured step "
                f"{float(p.measured):.6g} s: the time model gives {float(edge):.6g} s at {n} × "
                f"{float(lo if slow else hi):.4g}",
                hint=("its communication may be modelled slower than the run's: fit communication too, with "
                      "several runs (--runs FILE)" if slow else
                      "check the layout options (as the run used them), the micro-batches or global batch, the sizes "
                      "and that the time is seconds per step"))
        return {n: Fraction(int(k.p), int(k.q))}
    import numpy as np

    syms = [symbols[n] for n in names]
    ones = {s: 1 for s in symbols.values() if s not in syms}
    fns = [sympy.lambdify(syms, p.total.xreplace(ones), "math") for p in prepared]
    targets = [float(p.measured) for p in prepared]

    def residuals(x):
        k = np.exp(x)
        return np.array([f(*k) / m - 1 for f, m in zip(fns, targets)])

    lo = np.log([float(lower[n][0]) for n in names])
    hi = np.log([float(BOUNDS[1])] * len(names))
    x = bounded_least_squares(residuals, np.zeros(len(names)), lo, hi)
    if len(names) > 1 and not separable(residuals, x, lo, hi):
        notes.append(f"these runs do not tell {', '.join(names)} apart (the same mix of parts in each): the "
                     "factors are one of many fits; add runs that differ in TP, PP, CP or ZeRO")
    out = {}
    for n, v, low in zip(names, np.exp(x), (lower[n][0] for n in names)):
        q = Fraction(f"{float(v):.15g}")
        out[n] = min(max(q, low), BOUNDS[1])
    return out


def _above_measured(prepared: list[_Prepared]) -> list[str]:
    """A note for each run whose predicted peak is above its measured one: the reserve stops at 0,
    so the profile's memory stays above what ran (trial6: 157.73 GiB predicted for a measured 55.88 GiB
    was only a +182% in the runs' table)."""
    return [f"run {p.record['name']}: the predicted peak {p.memory / 2**30:,.2f} GiB is above the measured "
            f"{p.measured_memory / 2**30:,.2f} GiB; a reserve stops at 0 and cannot close it: check that the layout, "
            "sizes and precision are the run's" for p in prepared
            if p.measured_memory is not None and p.memory > p.measured_memory]


def _reserve(prepared: list[_Prepared], capacity: int) -> tuple[Reserve | None, int]:
    """The memory reserve (module docstring) from the runs with a measured peak, or None."""
    have = [p for p in prepared if p.measured_memory is not None]
    if not have:
        return None, 0
    weights = [Fraction(1, p.measured_memory ** 2) for p in have]
    mean = sum(w * (p.measured_memory - p.memory) for w, p in zip(weights, have)) / sum(weights)
    fitted = min(max(math.ceil(mean), 0), capacity - 1)
    return Reserve(fitted, 0, capacity, tuple(p.record["name"] for p in have)), fitted
