"""The calibration profile's types and checks (:mod:`costgraph.training.calibration` fits it;
:mod:`costgraph.training.calibration_file` writes and reads it): the factor names and bounds,
:class:`Factors` (what :func:`costgraph.training.steptime.step_time` applies), :class:`Profile`
and its parts, the checks of measured times and sizes, and what a calibrated result says.
Imports neither the training API nor the fitting (``api``, ``report`` and ``planning`` import it)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping

import sympy

from ..errors import CostgraphValueError
from ..engine.symbols import as_expr
from .result_parts import Calibrated

#: the kernel classes a per-kernel time model reports (``compute_by_class``) → their factor names
CLASSES = {"matmul": "compute-matmul", "attention": "compute-attention", "memory": "compute-memory-bound"}
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
    from .steptime import KERNEL_TIME_MODEL, TIME_MODEL

    if rate.kind == "kernels":
        return f"{KERNEL_TIME_MODEL} (kernels.toml [{rate.table.preset}])"
    return f"{TIME_MODEL} ({rate.kind} {rate.value})"


@dataclass(frozen=True)
class Factors:
    """The multipliers ``step_time`` applies (module docstring): ``values`` factor name →
    multiplier (a SymPy number, or a symbol while fitting); a name not given is 1."""

    values: Mapping[str, object] = field(default_factory=dict)

    def factor(self, name: str, general: str):
        """The multiplier of ``name``, else of ``general``, else 1."""
        return as_expr(self.values.get(name, self.values.get(general, 1)), f"the {name} factor")

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


def calibrated(profile: Profile, reserve: bool) -> Calibrated:
    """What a result calibrated by ``profile`` says (``calibration`` in the JSON of ``train`` and
    ``plan``), a :class:`~costgraph.training.result_parts.Calibrated`: the profile's file, hardware, time
    model, factors, and ``figures``: which figures the factors changed (``reserve``: whether its memory
    reserve is the fit verdict's)."""
    figures = ["step", "communication seconds", "time", "mfu", "hfu"] if profile.factors else []
    held = reserve and profile.reserve is not None
    return Calibrated(profile.source, profile.hardware, profile.time_model,
                      {f.name: float(f.value) for f in profile.factors}, profile.reserve.bytes if held else None,
                      figures + (["fits (reserve)"] if held else []), len(profile.runs), profile.date)


def calibrated_text(summary: Calibrated) -> str:
    """One line of :func:`calibrated`: ``calibrated by profile.toml (1 run on h100-sxm, 2026-12-06):
    compute × 1.436; step, communication seconds, time, mfu, hfu``."""
    parts = [f"{k} × {v:.4g}" for k, v in summary.factors.items()]
    if summary.memory_reserve_bytes is not None:
        parts.append(f"memory reserve {summary.memory_reserve_bytes / 2**30:.2f} GiB")
    runs = f"{summary.runs} run{'s' if summary.runs != 1 else ''}"
    return (f"calibrated by {summary.profile or 'a profile'} ({runs} on {summary.hardware}, {summary.date}): "
            + ", ".join(parts) + "; calibrated figures: " + ", ".join(summary.figures))


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
    if q < 0:
        raise CostgraphValueError(f"{what} {shown} is negative: a time is positive", hint=hint)
    if q == 0:
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
    return parse_size(value, what=what, floor=True)


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
