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
(:mod:`costgraph.training.calibration_file`: ``to_toml``, ``load_profile``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping

import sympy

from ..errors import CostgraphValueError
from .calibration_fit import bounded_least_squares, solve_increasing

#: the kernel classes a per-kernel time model reports (``compute_by_class``) → their factor names
CLASSES = {"matmul": "compute-matmul", "attention": "compute-attention", "memory_bound": "compute-memory-bound"}
#: the groups of collective kinds (costgraph.parallel.communication.KINDS) that a factor names
GROUPS = {"tp": "tp", "cp": "cp", "ep": "ep", "pp": "pp", "tied_embedding": "pp", "dp_grads": "dp",
          "zero_reduce_scatter": "dp", "zero_all_gather": "dp", "fsdp": "dp"}
#: every factor's name, and what it multiplies
FACTORS = {"compute": "the compute kernels' seconds (the pipeline bubble, a share of them, follows)",
           **{name: f"the seconds of the {cls.replace('_', '-')} kernels (instead of compute)"
              for cls, name in CLASSES.items()},
           "communication": "every collective's seconds",
           **{f"communication-{g}": f"the seconds of the {g.upper()} collectives (instead of communication)"
              for g in ("tp", "cp", "ep", "pp", "dp")}}
#: the bounds of every factor: a factor of 4 either way (an assumption: beyond it the layout, the
#: hardware or the measured time is more likely wrong than the time model)
BOUNDS = (Fraction(1, 4), Fraction(4))
BOUNDS_SOURCE = "costgraph.training.calibration.BOUNDS (assumption: a factor of 4 either way)"


def time_model(rate) -> str:
    """The name of the time model a profile is fitted under: :data:`~costgraph.training.steptime.TIME_MODEL`
    and the rate it runs at (``flat-efficiency (efficiency 1/2)``)."""
    from .steptime import TIME_MODEL

    return f"{TIME_MODEL} ({rate.kind} {rate.value})"


@dataclass(frozen=True)
class Factors:
    """The multipliers ``step_time`` applies (module docstring): ``values`` factor name →
    multiplier (a SymPy number, or a symbol while fitting); a name not given is 1."""

    values: Mapping[str, object] = field(default_factory=dict)

    def factor(self, name: str, general: str):
        """The multiplier of ``name``, else of ``general``, else 1."""
        return sympy.sympify(self.values.get(name, self.values.get(general, 1)))

    def scale_compute(self, seconds, by_class: Mapping | None = None):
        """``seconds`` of compute times the ``compute`` factor; with ``by_class`` (class → seconds,
        :data:`CLASSES`) the dict of each class's seconds times its factor instead."""
        if by_class is not None:
            return {c: s * self.factor(CLASSES.get(c, "compute"), "compute") for c, s in by_class.items()}
        return seconds * self.factor("compute", "compute")

    def scale_kinds(self, kinds: Mapping) -> dict:
        """Each collective kind's seconds times its factor (``communication-GROUP``, else ``communication``)."""
        return {k: t * self.factor(f"communication-{GROUPS.get(k, k)}", "communication") for k, t in kinds.items()}


@dataclass(frozen=True)
class Factor:
    """A fitted factor: ``name`` (:data:`FACTORS`), ``value`` (exact), ``lower``, ``upper`` (its
    bounds), ``runs`` (the names of the runs it was fitted to), ``lower_source`` (why the lower
    bound is what it is)."""

    name: str
    value: Fraction
    lower: Fraction
    upper: Fraction
    runs: tuple[str, ...]
    lower_source: str = BOUNDS_SOURCE

    @property
    def at_bound(self) -> bool:
        """Whether the fit stopped at a bound (the runs asked for more)."""
        return self.value in (self.lower, self.upper)


@dataclass(frozen=True)
class Reserve:
    """The fitted memory reserve: ``bytes`` (at least ``lower`` = 0, below ``upper``, the device
    memory), ``runs`` it was fitted to."""

    bytes: int
    lower: int
    upper: int
    runs: tuple[str, ...]


@dataclass(frozen=True)
class Run:
    """A measured run as the profile records it: ``name`` (1, 2, ...), ``model``, ``config``,
    ``flags`` (the layout as ``costgraph train`` options), ``hardware``, ``measured_step``
    (seconds), ``measured_memory`` (bytes or None), ``date``, and what the fitted profile predicts:
    ``predicted_step``, ``predicted_memory`` (the most-loaded device's peak plus the reserve)."""

    name: str
    model: str
    config: str | None
    flags: str
    hardware: str
    measured_step: Fraction
    measured_memory: int | None
    date: str
    predicted_step: Fraction
    predicted_memory: int | None = None

    @property
    def step_residual(self) -> float:
        """``predicted / measured − 1`` of the step."""
        return float(self.predicted_step / self.measured_step) - 1

    @property
    def memory_residual(self) -> float | None:
        """``predicted / measured − 1`` of the peak memory, or None without a measured peak."""
        if self.measured_memory is None or self.predicted_memory is None:
            return None
        return self.predicted_memory / self.measured_memory - 1


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


@dataclass(frozen=True)
class Profile:
    """A calibration profile (module docstring): ``hardware`` (the preset's key), ``time_model``
    (:func:`time_model`), ``factors`` (:class:`Factor` s), ``reserve`` (:class:`Reserve` or None),
    ``runs`` (:class:`Run` s), ``date``, ``version`` (costgraph's), ``notes``, ``source`` (the file
    it was read from, or None)."""

    hardware: str
    time_model: str
    factors: tuple[Factor, ...]
    reserve: Reserve | None
    runs: tuple[Run, ...]
    date: str
    version: str
    notes: tuple[str, ...] = ()
    source: str | None = None

    def multipliers(self) -> Factors:
        """The :class:`Factors` ``step_time`` applies."""
        return Factors({f.name: sympy.Rational(f.value.numerator, f.value.denominator) for f in self.factors})

    def describe(self) -> str:
        """One line: ``compute × 0.8734, communication × 1.05 (profile.toml: 2 runs on h100-sxm, 2026-12-06)``."""
        parts = [f"{f.name} × {float(f.value):.4g}" for f in self.factors]
        if self.reserve is not None:
            parts.append(f"memory reserve {self.reserve.bytes:,} B")
        runs = f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''}"
        return ", ".join(parts) + f" ({self.source or 'profile'}: {runs} on {self.hardware}, {self.date})"

    def to_dict(self) -> dict:
        """JSON values: the factors with bounds and runs, the reserve, each run with its residuals."""
        return {"hardware": self.hardware, "time_model": self.time_model, "date": self.date,
                "costgraph": self.version, "source": self.source,
                "factors": {f.name: {"value": float(f.value), "exact": str(f.value), "lower": float(f.lower),
                                     "upper": float(f.upper), "at_bound": f.at_bound, "runs": list(f.runs),
                                     "multiplies": FACTORS[f.name]} for f in self.factors},
                "memory_reserve": None if self.reserve is None else
                {"bytes": self.reserve.bytes, "lower": self.reserve.lower, "upper": self.reserve.upper,
                 "runs": list(self.reserve.runs)},
                "runs": [{"name": r.name, "model": r.model, "config": r.config, "flags": r.flags,
                          "hardware": r.hardware, "date": r.date, "measured_step": float(r.measured_step),
                          "predicted_step": float(r.predicted_step), "step_residual": r.step_residual,
                          "measured_memory": r.measured_memory, "predicted_memory": r.predicted_memory,
                          "memory_residual": r.memory_residual} for r in self.runs],
                "notes": list(self.notes)}

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text (``costgraph calibrate --format json``)."""
        import json

        return json.dumps(self.to_dict(), indent=2)

    def to_text(self) -> str:
        """What ``costgraph calibrate`` prints: the factors, the reserve, each run's residuals."""
        out = [f"calibration on {self.hardware} under the time model {self.time_model}, "
               f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''}:"]
        for f in self.factors:
            out.append(f"  {f.name} × {float(f.value):.6g} (bounds {float(f.lower):.4g} .. {float(f.upper):.4g}"
                       + ("; at a bound" if f.at_bound else "") + f"): multiplies {FACTORS[f.name]}")
        if self.reserve is not None:
            out.append(f"  memory reserve {self.reserve.bytes:,} bytes ({self.reserve.bytes / 2**30:.2f} GiB): "
                       "measured peak − predicted")
        out.append("runs (predicted with the factors / measured):")
        for r in self.runs:
            line = (f"  {r.name}: {r.flags or '(defaults)'}: step {float(r.predicted_step):.6g} s / "
                    f"{float(r.measured_step):.6g} s ({r.step_residual:+.2%})")
            if r.memory_residual is not None:
                line += (f"; memory {r.predicted_memory / 2**30:.2f} / {r.measured_memory / 2**30:.2f} GiB "
                         f"({r.memory_residual:+.2%})")
            out.append(line)
        return "\n".join(out + [f"note: {n}" for n in self.notes])


def calibrated(profile: Profile, reserve: bool) -> dict:
    """What a result calibrated by ``profile`` says (``calibration`` in the JSON of ``train`` and
    ``plan``): the profile's file, hardware, time model, factors, and ``figures``: which figures the
    factors changed (``reserve``: whether its memory reserve is the fit verdict's)."""
    figures = ["step", "communication seconds", "time", "mfu", "hfu"] if profile.factors else []
    return {"profile": profile.source, "hardware": profile.hardware, "time_model": profile.time_model,
            "factors": {f.name: float(f.value) for f in profile.factors},
            "memory_reserve_bytes": profile.reserve.bytes if reserve and profile.reserve is not None else None,
            "figures": figures + (["fits (reserve)"] if reserve and profile.reserve is not None else []),
            "runs": len(profile.runs), "date": profile.date}


def calibrated_text(summary: dict) -> str:
    """One line of :func:`calibrated`: ``calibrated by profile.toml (1 run on h100-sxm, 2026-12-06):
    compute × 1.436; step, communication seconds, time, mfu, hfu``."""
    parts = [f"{k} × {v:.4g}" for k, v in summary["factors"].items()]
    if summary["memory_reserve_bytes"] is not None:
        parts.append(f"memory reserve {summary['memory_reserve_bytes'] / 2**30:.2f} GiB")
    runs = f"{summary['runs']} run{'s' if summary['runs'] != 1 else ''}"
    return (f"calibrated by {summary['profile'] or 'a profile'} ({runs} on {summary['hardware']}, {summary['date']}): "
            + ", ".join(parts) + "; calibrated figures: " + ", ".join(summary["figures"]))


# ---------------------------------------------------------------- checks

def seconds(value, what: str) -> sympy.Rational:
    """A measured time as an exact positive rational: an int, float, Fraction or decimal text.

    Raises
    ------
    CostgraphValueError
        Zero, negative, NaN, infinite, or not a number."""
    from .. import arguments

    shown = value if isinstance(value, str) else repr(value)
    hint = "the seconds of one training step (every micro-batch, the optimizer step), e.g. 1.25"
    text = value.strip().lower() if isinstance(value, str) else None
    if (isinstance(value, float) and not math.isfinite(value)) or text in ("nan", "+nan", "-nan", "inf", "+inf",
                                                                            "-inf", "infinity", "-infinity"):
        raise CostgraphValueError(f"{what} {shown} is not a finite time", hint=hint)
    if (text or "").startswith("-") or (isinstance(value, (int, float, Fraction)) and value < 0):
        raise CostgraphValueError(f"{what} {shown} is negative: a time is positive", hint=hint)
    q = arguments.rational(value, what)
    if q <= 0:
        raise CostgraphValueError(f"{what} {shown} is zero: a step takes time", hint=hint)
    return q


def memory_bytes(value, what: str) -> int:
    """A measured peak in bytes: a positive int, or a size (``"71.3GiB"``, ``"76e9"``).

    Raises
    ------
    CostgraphValueError
        Zero, negative, NaN, infinite, or not a size."""
    from .fit import parse_size

    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise CostgraphValueError(f"{what} {value} is not a positive number of bytes",
                                      hint="the peak bytes of the most-loaded device, e.g. 71.3GiB")
        return value
    if not isinstance(value, str):
        raise CostgraphValueError(f"{what} must be bytes or a size, not {type(value).__name__}")
    if value.strip().startswith("-") or value.strip().lower().lstrip("+") in ("nan", "inf", "infinity"):
        raise CostgraphValueError(f"{what} {value.strip()[:20]} is not a positive size",
                                  hint="the peak bytes of the most-loaded device, e.g. 71.3GiB or 76e9")
    return parse_size(value, what=what)


def check(profile: Profile, hardware_key: str | None, rate=None) -> None:
    """Refuse ``profile`` under another hardware preset than ``hardware_key`` (None: no preset) or,
    given the ``rate`` of the step, another time model than the profile's.

    Raises
    ------
    CostgraphValueError
        Naming both, with a hint."""
    where = profile.source or "the profile"
    if hardware_key is None:
        raise CostgraphValueError(f"{where} calibrates the step time on {profile.hardware}: add --hardware "
                                  f"{profile.hardware}", hint="a profile holds factors for one hardware preset")
    if hardware_key != profile.hardware:
        raise CostgraphValueError(f"{where} was fitted on {profile.hardware}, not {hardware_key}",
                                  hint=f"calibrate on {hardware_key} (costgraph calibrate ... --hardware "
                                       f"{hardware_key}), or give --hardware {profile.hardware}")
    if rate is not None and time_model(rate) != profile.time_model:
        raise CostgraphValueError(f"{where} was fitted under the time model {profile.time_model}, not "
                                  f"{time_model(rate)}", hint="leave out --efficiency, --mfu and --achieved "
                                  "(the profile sets the rate), or calibrate again under this time model")


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
    r = train(model, run.layout, values=run.values, hardware=hardware, global_batch=run.global_batch,
              convention=convention, causal=causal, efficiency_profile=Factors(symbols))
    values = r.values or {}
    if r.step is None:
        raise CostgraphValueError(f"{what}: no step time to calibrate", hint="a hardware preset gives it")
    total = sympy.sympify(r.step["total"]).xreplace(values)
    unknown = total.free_symbols - set(symbols.values())
    if unknown:
        raise CostgraphValueError(f"{what}: no value for {', '.join(sorted(map(str, unknown)))}",
                                  hint="give the run's sizes: --config NAME or --set b=... s=...")
    ones = {s: 1 for s in symbols.values()}
    rate = r.compute["rate"]
    split = flops_by_precision(model.graph, r.layout, r.compute["flops"], convention, causal)
    roofline = sympy.nsimplify(compute_seconds(split, Rate("efficiency", 1, rate.peaks)).xreplace(values))
    compute = sympy.sympify(r.step["compute"]).xreplace(values).xreplace(ones)
    if measured < roofline:
        raise CostgraphValueError(
            f"{what}: the measured step {float(measured):.6g} s is faster than the roofline allows: "
            f"{float(roofline):.6g} s with every kernel at 100% of the peak, no bubble and every collective hidden",
            hint="check that the time is seconds per step (every micro-batch), the global batch or micro-batches, "
                 "the sizes (--set b=... s=...) and --hardware")
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
    the date recorded (default today, UTC).

    Raises
    ------
    CostgraphValueError
        A bad time or size, a measured step below the roofline, an unknown factor or one no run
        exercises, more factors than runs, one run that no compute factor in its bounds reproduces."""
    import datetime

    from ..choices import CAUSAL, CONVENTION
    from ..hardware import preset
    from ..version import __version__

    measured = _runs(runs)
    hw = preset(hardware)
    date = date or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    names = list(fit) if fit is not None else (["compute"] if len(measured) == 1 else ["compute", "communication"])
    bad = [n for n in names if n not in FACTORS]
    if bad or len(set(names)) != len(names) or not names:
        raise CostgraphValueError(f"unknown factor {bad[0]!r}" if bad else "name each factor once",
                                  hint="factors: " + ", ".join(FACTORS))
    symbols = {n: sympy.Symbol(f"k_{n.replace('-', '_')}", positive=True) for n in names}
    prepared = [_prepare(model, r, str(i), hw, symbols, convention or CONVENTION.default, causal or CAUSAL.default,
                         date) for i, r in enumerate(measured, 1)]
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
    values = _fit(prepared, used, symbols, lower)
    reserve, reserve_bytes = _reserve(prepared, hw.memory_bytes)
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


def _fit(prepared: list[_Prepared], names: list[str], symbols: dict, lower: dict) -> dict[str, Fraction]:
    """The fitted value of each factor in ``names`` (module docstring: exact for one factor and one
    run, else bounded least squares on the relative errors)."""
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
    out = {}
    for n, v, low in zip(names, np.exp(x), (lower[n][0] for n in names)):
        q = Fraction(f"{float(v):.15g}")
        out[n] = min(max(q, low), BOUNDS[1])
    return out


def _reserve(prepared: list[_Prepared], capacity: int) -> tuple[Reserve | None, int]:
    """The memory reserve (module docstring) from the runs with a measured peak, or None."""
    have = [p for p in prepared if p.measured_memory is not None]
    if not have:
        return None, 0
    weights = [Fraction(1, p.measured_memory ** 2) for p in have]
    mean = sum(w * (p.measured_memory - p.memory) for w, p in zip(weights, have)) / sum(weights)
    fitted = min(max(math.ceil(mean), 0), capacity - 1)
    return Reserve(fitted, 0, capacity, tuple(p.record["name"] for p in have)), fitted
