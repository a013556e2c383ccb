"""A calibration profile as a user data table (TOML), read by :mod:`costgraph.datafiles`.

The file ``costgraph calibrate -o FILE`` writes, and ``--efficiency-profile FILE`` reads::

    [profile]                 # the hardware preset and time model it was fitted under
    hardware = "h100-sxm"
    time_model = "flat-efficiency (efficiency 1/2)"
    costgraph = "0.1.0"
    date = "2026-12-06"

    [factor.compute]          # one table per fitted factor (costgraph.training.calibration.FACTORS)
    value = "0.87"            # source: fitted by costgraph calibrate to run 1 (solved exactly)
    lower = "0.5"             # source: ...
    upper = "4"               # source: ...
    runs = ["1"]

    [memory.reserve]          # with a measured peak: bytes beyond the predicted peak
    bytes = 1234              # source: ...
    lower = 0                 # source: ...
    upper = 80000000000       # source: ...
    runs = ["1"]

    [run.1]                   # each run it came from
    model = "gpt"
    flags = "--gpus 8 --tp 2 --global-batch 64"
    hardware = "h100-sxm"
    date = "2026-12-06"
    measured_step = "0.0187"  # source: measured by the user (--measured-step)
    predicted_step = "0.0187" # source: ...

Numbers are exact: decimals in strings (rounded at the 30th decimal place, the most
:mod:`costgraph.datafiles` reads) and integers, each with its ``# source:``. A file is read under
the limits of a user's data file (:func:`costgraph.datafiles.read_text`); each mistake names the
file, the table and the key (exit status 2 from the command line).
"""

from __future__ import annotations

from fractions import Fraction

from ..datafiles import Field, Kind, Schema, parse, read_text
from ..errors import CostgraphValueError
from .calibration_profile import BOUNDS, BOUNDS_SOURCE, FACTORS, Factor, Profile, Reserve, Run

#: decimal places written (the most costgraph.datafiles reads after the point)
PLACES = 30

PROFILE = Kind("calibration profile", (
    Field("hardware", "text", doc="the hardware preset the factors were fitted on"),
    Field("time_model", "text", doc="the time model they multiply (costgraph.training.calibration.time_model)"),
    Field("costgraph", "text", doc="the costgraph version that wrote the file"),
    Field("date", "text", doc="when it was written (UTC)"),
    Field("notes", "names", required=False)))
FACTOR = Kind("factor", (
    Field("value", "decimal", positive=True, doc="the multiplier"),
    Field("lower", "decimal", positive=True), Field("upper", "decimal", positive=True),
    Field("runs", "names", doc="the runs it was fitted to"),
    Field("multiplies", "text", required=False)))
RESERVE = Kind("memory reserve", (
    Field("bytes", unit="B", doc="bytes beyond the predicted peak"), Field("lower", unit="B"),
    Field("upper", unit="B", positive=True), Field("runs", "names")))
RUN = Kind("run", (
    Field("model", "text"), Field("config", "text", required=False), Field("flags", "text", required=False),
    Field("hardware", "text"), Field("date", "text"),
    Field("measured_step", "decimal", unit="s", positive=True), Field("predicted_step", "decimal", unit="s"),
    Field("measured_memory", unit="B", required=False, positive=True),
    Field("predicted_memory", unit="B", required=False)))
SCHEMA = Schema("profile.toml", "costgraph.training", entries=PROFILE,
                groups=(("factor", FACTOR), ("memory", RESERVE), ("run", RUN)))


def decimal(q: Fraction) -> str:
    """``q`` (≥ 0) as decimal text rounded to :data:`PLACES` places, trailing zeros dropped."""
    scaled = round(Fraction(q) * 10 ** PLACES)
    whole, frac = divmod(scaled, 10 ** PLACES)
    digits = f"{frac:0{PLACES}d}".rstrip("0")
    return f"{whole}.{digits}" if digits else str(whole)


def _quote(text: str) -> str:
    """A TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _names(names) -> str:
    return "[" + ", ".join(_quote(n) for n in names) + "]"


def to_toml(p: Profile) -> str:
    """The file of module docstring for profile ``p``."""
    how = "solved exactly" if len(p.runs) == 1 and len(p.factors) == 1 else \
        "bounded least squares on the relative error"
    out = ["# costgraph efficiency profile: factors of the step-time model fitted to measured runs.",
           f"# Written by `costgraph calibrate` (costgraph {p.version}); read by costgraph train, plan and fit",
           "# --efficiency-profile FILE. Each factor multiplies one part of the step time (docs: step-time.md,",
           "# Calibration); the runs it came from are listed at the end.", "",
           "[profile]", f"hardware = {_quote(p.hardware)}", f"time_model = {_quote(p.time_model)}",
           f"costgraph = {_quote(p.version)}", f"date = {_quote(p.date)}"]
    if p.notes:
        out.append(f"notes = {_names(p.notes)}")
    for f in p.factors:
        out += ["", f"[factor.{f.name}]",
                f"value = {_quote(decimal(f.value))}  # source: fitted by costgraph calibrate to run"
                f"{'s' if len(f.runs) > 1 else ''} {', '.join(f.runs)} ({how})",
                f"lower = {_quote(decimal(f.lower))}  # source: {f.lower_source}",
                f"upper = {_quote(decimal(f.upper))}  # source: {BOUNDS_SOURCE}",
                f"runs = {_names(f.runs)}", f"multiplies = {_quote(FACTORS[f.name])}"]
    if p.reserve is not None:
        r = p.reserve
        out += ["", "[memory.reserve]",
                f"bytes = {r.bytes}  # source: fitted by costgraph calibrate: measured peak − predicted (run"
                f"{'s' if len(r.runs) > 1 else ''} {', '.join(r.runs)}), at least 0",
                f"lower = {r.lower}  # source: a reserve is not negative", f"upper = {r.upper}  # source: the "
                f"device memory of {p.hardware}", f"runs = {_names(r.runs)}"]
    for r in p.runs:
        out += ["", f"[run.{r.name}]", f"model = {_quote(r.model)}"]
        out += [f"config = {_quote(r.config)}"] if r.config else []
        out += [f"flags = {_quote(r.flags)}"] if r.flags else []
        out += [f"hardware = {_quote(r.hardware)}", f"date = {_quote(r.date)}",
                f"measured_step = {_quote(decimal(r.measured_step))}  # source: measured by the user (--measured-step)",
                f"predicted_step = {_quote(decimal(r.predicted_step))}  # source: costgraph's time model with the "
                "fitted factors"]
        if r.measured_memory is not None:
            out.append(f"measured_memory = {r.measured_memory}  # source: measured by the user (--measured-memory)")
        if r.predicted_memory is not None:
            out.append(f"predicted_memory = {r.predicted_memory}  # source: costgraph's peak of the most-loaded "
                       "device plus the fitted reserve")
    return "\n".join(out) + "\n"


def load_profile(source) -> Profile:
    """``source`` a :class:`~costgraph.training.calibration.Profile` (as is) or the path of a
    profile file (:func:`read_profile`)."""
    if isinstance(source, Profile):
        return source
    from .. import arguments

    return read_profile(arguments.path_like(source, "--efficiency-profile"))


def read_profile(path) -> Profile:
    """The :class:`~costgraph.training.calibration.Profile` in the file at ``path``.

    Raises
    ------
    CostgraphValueError
        Unreadable, not TOML, not a profile (no ``[profile]`` table, another table, an unknown
        factor), a value out of its bounds, a key missing or of the wrong type: located (file,
        table, key, line), with a hint."""
    hint = "write a profile with costgraph calibrate MODEL ... --measured-step SECONDS -o FILE"
    try:
        text = read_text(path, "calibration profile (costgraph calibrate -o FILE)")
    except CostgraphValueError as e:
        raise CostgraphValueError(f"--efficiency-profile: {e.message}", hint=e.hint or hint) from None
    try:
        data = parse(text, str(path), SCHEMA, show=False, bundled=False)
    except CostgraphValueError as e:
        raise CostgraphValueError(e.message, hint=f"{e.hint}; {hint}" if e.hint else hint) from None
    if set(data.entries) != {"profile"}:
        other = sorted(set(data.entries) - {"profile"})
        raise CostgraphValueError(f"{path}: " + (f"[{other[0]}] is no table of a calibration profile" if other
                                                else "no [profile] table: not a calibration profile"),
                                  hint="its tables: [profile], [factor.NAME], [memory.reserve], [run.NAME]; " + hint)
    top = data.entries["profile"]
    factors = []
    for name, e in data.groups["factor"].items():
        if name not in FACTORS:
            raise e.error("is no factor", hint="factors: " + ", ".join(FACTORS))
        f = Factor(name, e["value"], e["lower"], e["upper"], e["runs"], e.sources.get("lower", ""))
        if not f.lower <= f.value <= f.upper:
            raise e.error("value is outside its bounds [lower, upper]", "value", hint=hint)
        if not (BOUNDS[0] <= f.lower and f.upper <= BOUNDS[1]):   # a hand-edited bound cannot widen BOUNDS
            raise e.error(f"bounds [{float(f.lower):.6g}, {float(f.upper):.6g}] reach outside [{BOUNDS[0]}, "
                          f"{BOUNDS[1]}] (costgraph.training.calibration.BOUNDS)",
                          "lower" if f.lower < BOUNDS[0] else "upper",
                          hint="a factor beyond 4 either way: the layout, the hardware or the time is more likely "
                               "wrong than the model; " + hint)
        factors.append(f)
    reserve = None
    for name, e in data.groups["memory"].items():
        if name != "reserve":
            raise e.error("is no memory table", hint="a profile has [memory.reserve]")
        if not e["lower"] <= e["bytes"] <= e["upper"]:
            raise e.error("bytes is outside its bounds [lower, upper]", "bytes", hint=hint)
        reserve = Reserve(e["bytes"], e["lower"], e["upper"], e["runs"])
    runs = tuple(Run(name, e["model"], e.get("config"), e.get("flags", ""), e["hardware"], e["measured_step"],
                     e.get("measured_memory"), e["date"], e["predicted_step"], e.get("predicted_memory"))
                 for name, e in data.groups["run"].items())
    if not factors and reserve is None:
        raise CostgraphValueError(f"{path}: no [factor.NAME] and no [memory.reserve]: the profile changes nothing",
                                  hint=hint)
    return Profile(top["hardware"], top["time_model"], tuple(factors), reserve, runs, top["date"],
                   top["costgraph"], tuple(top.get("notes", ())), source=str(path))
