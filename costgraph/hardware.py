"""Hardware presets: accelerators' dense peaks, memory and links, with sources.

The numbers live in ``hardware.toml`` beside this module, one table per
preset, each number an exact TOML integer in base units (FLOP/s, bytes, B/s,
ns, W) with a ``# source: ...`` comment beside it. The file is parsed with
:mod:`tomllib`; the source comments, which TOML drops, are read from the same
lines here, so :func:`preset` returns every number together with where it comes
from and a number without a source is refused.

Conventions (the traps of public preset files, each avoided in the data):

* peaks are **dense**: a vendor's "with sparsity" (2:4) figure is halved, and
  the source says so (H100 SXM BF16 989.4 TFLOP/s, not 1979);
* link bandwidths are **per direction per device**: a bidirectional NVLink or
  ICI figure is halved (H100 NVLink 900 GB/s → 450), a rack's or node's total is
  divided by its devices (GB200 NVL72's 576 TB/s of HBM is 72 GPUs' worth);
* ``memory_bytes`` is the vendor's printed capacity at its printed unit
  ("80 GB" = 80·10⁹ B; Google's "32 GiB" = 32·2³⁰ B), never rounded up;
* 0 means "none" (no FP8 on an A100) or "not published" (no TPU FP32 peak);
  :meth:`Hardware.peak_flops` refuses it with a message.

This module imports no SymPy (``costgraph hardware`` stays light); the values
are Python ``int``, exact.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from types import MappingProxyType
from typing import Mapping

from .errors import CostgraphValueError

FILE = "hardware.toml"

#: The integer fields every preset must give, in display order.
NUMBERS = ("peak_flops_bf16", "peak_flops_fp16", "peak_flops_fp8", "peak_flops_tf32", "peak_flops_fp32",
           "memory_bytes", "memory_bandwidth", "scale_up_bandwidth", "scale_up_domain",
           "scale_out_bandwidth", "devices_per_node", "latency_scale_up_ns", "latency_scale_out_ns")
#: Integer fields a preset may leave out.
OPTIONAL_NUMBERS = ("tdp_watts",)
_TEXTS = ("name", "vendor")
_OPTIONAL_TEXTS = ("note",)
KEYS = (*_TEXTS, *_OPTIONAL_TEXTS, *NUMBERS, *OPTIONAL_NUMBERS)
#: Fields that must be positive (a device has some memory, a domain has at least itself).
_POSITIVE = ("peak_flops_bf16", "memory_bytes", "memory_bandwidth", "scale_up_domain", "devices_per_node")

#: Units of each number, for display.
UNITS = {
    "peak_flops_bf16": "FLOP/s", "peak_flops_fp16": "FLOP/s", "peak_flops_fp8": "FLOP/s",
    "peak_flops_tf32": "FLOP/s", "peak_flops_fp32": "FLOP/s",
    "memory_bytes": "B", "memory_bandwidth": "B/s", "scale_up_bandwidth": "B/s per direction",
    "scale_up_domain": "devices", "scale_out_bandwidth": "B/s per direction", "devices_per_node": "devices",
    "latency_scale_up_ns": "ns", "latency_scale_out_ns": "ns", "tdp_watts": "W",
}

#: dtype names accepted by :meth:`Hardware.peak_flops`.
DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")

_HEADER = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(#.*)?$")
_NUMBER_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*[-+]?[0-9][0-9_]*\s*(#.*)?$")
_SOURCE = re.compile(r"#\s*source:\s*(.*\S)\s*$")


@dataclass(frozen=True)
class Hardware:
    """One accelerator preset (see ``hardware.toml`` for the units and sources).

    ``key`` is the preset's name on the command line (``h100-sxm``); ``name``
    the product's. Peaks are dense FLOP/s, bandwidths B/s per direction per
    device, ``memory_bytes`` the vendor's printed capacity. ``sources`` maps
    each number's field to its source text.
    """

    key: str
    name: str
    vendor: str
    peak_flops_bf16: int
    peak_flops_fp16: int
    peak_flops_fp8: int
    peak_flops_tf32: int
    peak_flops_fp32: int
    memory_bytes: int
    memory_bandwidth: int
    scale_up_bandwidth: int
    scale_up_domain: int
    scale_out_bandwidth: int
    devices_per_node: int
    latency_scale_up_ns: int
    latency_scale_out_ns: int
    tdp_watts: int | None = None
    note: str = ""
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def peak_flops(self, dtype: str = "bf16") -> int:
        """Dense peak FLOP/s for ``dtype`` (bf16, fp16, fp8, tf32, fp32); a
        :class:`CostgraphValueError` when the device has none or none is published."""
        if dtype not in DTYPES:
            raise CostgraphValueError(f"unknown dtype {dtype!r} for a peak", hint="one of " + ", ".join(DTYPES))
        value = getattr(self, f"peak_flops_{dtype}")
        if not value:
            have = [d for d in DTYPES if getattr(self, f"peak_flops_{d}")]
            raise CostgraphValueError(f"{self.key} has no {dtype} peak ({self.source(f'peak_flops_{dtype}')})",
                                      hint="its peaks: " + ", ".join(have))
        return value

    def source(self, key: str) -> str:
        """The source of the number ``key`` ('' for a field without one)."""
        return self.sources.get(key, "")

    def numbers(self) -> dict[str, int]:
        """The numeric fields present, in display order."""
        out = {k: getattr(self, k) for k in NUMBERS}
        if self.tdp_watts is not None:
            out["tdp_watts"] = self.tdp_watts
        return out


def _sources(text: str, file: str) -> dict[str, dict[str, str]]:
    """``{preset: {key: source}}`` from the ``# source:`` comments of the
    integer lines (tomllib drops comments). A line may be continued by comment
    lines directly below it that start with ``#   `` (a hash and 3 spaces)."""
    out: dict[str, dict[str, str]] = {}
    table = None
    last: tuple[str, str] | None = None
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            table = m.group(1).strip().strip('"')
            out.setdefault(table, {})
            last = None
            continue
        m = _NUMBER_LINE.match(line)
        if m and table is not None:
            src = _SOURCE.search(m.group(2) or "")
            if src:
                out[table][m.group(1)] = src.group(1)
                last = (table, m.group(1))
            else:
                last = None
            continue
        if last and line.startswith("#   ") and line[4:].strip():
            t, k = last
            out[t][k] += " " + line[4:].strip()
            continue
        last = None
    return out


def parse(text: str, file: str = FILE) -> dict[str, Hardware]:
    """Validate the text of a presets file and return its presets, in file
    order. Every mistake is a :class:`CostgraphValueError` naming the file, the
    preset and the key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise CostgraphValueError(f"{file}: not valid TOML: {e}") from None
    sources = _sources(text, file)
    out: dict[str, Hardware] = {}
    for key, table in data.items():
        where = f"{file}: [{key}]"
        if not isinstance(table, dict):
            raise CostgraphValueError(f"{file}: '{key}' is not a table", hint="write each preset as [name] with its keys")
        unknown = sorted(set(table) - set(KEYS))
        if unknown:
            close = difflib.get_close_matches(unknown[0], KEYS, n=1)
            raise CostgraphValueError(f"{where} has unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}",
                                      hint=(f"did you mean '{close[0]}'? " if close else "") + "known keys: " + ", ".join(KEYS))
        missing = [k for k in (*_TEXTS, *NUMBERS) if k not in table]
        if missing:
            raise CostgraphValueError(f"{where} is missing {', '.join(missing)}")
        for k in (*_TEXTS, *_OPTIONAL_TEXTS):
            if k in table and (not isinstance(table[k], str) or (k in _TEXTS and not table[k].strip())):
                raise CostgraphValueError(f"{where} {k} = {table[k]!r} is not a non-empty string")
        got = sources.get(key, {})
        for k in (*NUMBERS, *OPTIONAL_NUMBERS):
            if k not in table:
                continue
            v = table[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise CostgraphValueError(f"{where} {k} = {v!r} is not a non-negative integer",
                                          hint=f"write an exact integer in {UNITS[k]} (underscores allowed: 312_000_000_000_000)")
            if k in _POSITIVE and v == 0:
                raise CostgraphValueError(f"{where} {k} = 0 must be positive")
            if k not in got:
                raise CostgraphValueError(f"{where} {k} has no '# source: ...' comment on its line",
                                          hint="every number names where it comes from (datasheet and table, or 'assumption: ...')")
        kept = {k: got[k] for k in (*NUMBERS, *OPTIONAL_NUMBERS) if k in table}
        out[key] = Hardware(key=key, name=table["name"], vendor=table["vendor"],
                            note=table.get("note", ""), tdp_watts=table.get("tdp_watts"),
                            sources=MappingProxyType(kept),
                            **{k: table[k] for k in NUMBERS})
    if not out:
        raise CostgraphValueError(f"{file}: no presets")
    return out


@cache
def presets() -> dict[str, Hardware]:
    """The bundled presets of ``hardware.toml``, by key, in file order (a copy
    is not made: do not modify the dict)."""
    return parse((files("costgraph") / FILE).read_text(encoding="utf-8"), FILE)


def _normal(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def preset(name: str | Hardware) -> Hardware:
    """The preset called ``name`` (case, spaces and underscores forgiven:
    ``H100_SXM`` is ``h100-sxm``); an unknown name is a
    :class:`CostgraphValueError` with a "did you mean" and the list."""
    if isinstance(name, Hardware):
        return name
    table = presets()
    if not isinstance(name, str):
        raise CostgraphValueError(f"a hardware preset name must be a string, not {type(name).__name__}")
    key = _normal(name)
    if key in table:
        return table[key]
    compact = {k.replace("-", ""): k for k in table}   # h100sxm, tpuv5e
    if key.replace("-", "") in compact:
        return table[compact[key.replace("-", "")]]
    close = [k for k in table if k.startswith(key)] or difflib.get_close_matches(key, list(table), n=1, cutoff=0.5)
    hint = (f"did you mean {' or '.join(repr(c) for c in close)}? " if close else "") + "presets: " + ", ".join(table)
    raise CostgraphValueError(f"unknown hardware '{name}'", hint=hint)




# ---------------------------------------------------------------- display

def _dec(value: int, unit: int, places: int = 3) -> str:
    """``value / unit`` as a short decimal, exact when it has at most
    ``places`` decimals (989_400_000_000_000 / 10**12 → '989.4'), rounded half
    up otherwise; thousands separated."""
    scaled = (value * 10**places * 2 + unit) // (2 * unit)      # rounded, in units of 10^-places
    whole, frac = divmod(scaled, 10**places)
    text = f"{whole:,}"
    frac_text = f"{frac:0{places}d}".rstrip("0")
    return text + ("." + frac_text if frac_text else "")


def _peak(v: int) -> str:
    return _dec(v, 10**12) if v else "—"


_COLUMNS = (("preset", None), ("BF16", "peak_flops_bf16"), ("FP16", "peak_flops_fp16"), ("FP8", "peak_flops_fp8"),
            ("TF32", "peak_flops_tf32"), ("FP32", "peak_flops_fp32"), ("HBM GB", "memory_bytes"),
            ("GiB", None), ("HBM GB/s", "memory_bandwidth"), ("up GB/s", "scale_up_bandwidth"),
            ("domain", "scale_up_domain"), ("out GB/s", "scale_out_bandwidth"), ("/node", "devices_per_node"))


def _row(hw: Hardware) -> list[str]:
    return [hw.key, *(_peak(getattr(hw, f"peak_flops_{d}")) for d in DTYPES),
            _dec(hw.memory_bytes, 10**9), _dec(hw.memory_bytes, 2**30, 1),
            _dec(hw.memory_bandwidth, 10**9), _dec(hw.scale_up_bandwidth, 10**9), str(hw.scale_up_domain),
            _dec(hw.scale_out_bandwidth, 10**9), str(hw.devices_per_node)]


def format_table(items: Mapping[str, Hardware] | None = None) -> str:
    """The text table of ``costgraph hardware``: peaks in dense TFLOP/s, HBM in
    GB (10⁹ B) and GiB (2³⁰ B), bandwidths in GB/s per direction per device,
    then each preset's BF16 source."""
    items = presets() if items is None else items
    from .tables import table

    heads = [c for c, _ in _COLUMNS]
    lines = ["Dense peaks in TFLOP/s (never the 2:4 sparse figure; — none or not published); HBM in GB = 10^9 B",
             "and GiB = 2^30 B; bandwidths in GB/s per direction per device (up: NVLink / Infinity Fabric / ICI,",
             "domain: devices in one scale-up domain; out: network per device); /node: devices per node.", ""]
    lines += table([_row(hw) for hw in items.values()], heads, align=["left"] + ["right"] * (len(heads) - 1),
                   indent=0)
    lines += ["", "BF16 peak sources (`costgraph hardware NAME` gives one for every number):"]
    for hw in items.values():
        lines.append(f"  {hw.key}: {hw.source('peak_flops_bf16')}")
    return "\n".join(lines)


def _human(key: str, v: int) -> str:
    unit = UNITS[key]
    if unit == "FLOP/s":
        return f"{_peak(v)} TFLOP/s dense" if v else "none (0)"
    if key == "memory_bytes":
        return f"{_dec(v, 10**9)} GB = {_dec(v, 2**30, 2)} GiB"
    if unit.startswith("B/s"):
        return f"{_dec(v, 10**9)} GB/s" + unit[3:]
    if unit == "ns":
        return f"{_dec(v, 1000)} us"
    return f"{v:,} {unit}"


def format_one(hw: Hardware) -> str:
    """Every field of one preset, each number with its unit and its source."""
    lines = [f"{hw.key}: {hw.name} ({hw.vendor})"]
    if hw.note:
        lines.append(f"note: {hw.note}")
    width = max(len(k) for k in hw.numbers())
    for k, v in hw.numbers().items():
        lines.append(f"  {k.ljust(width)}  {v:>25,}  {_human(k, v)}")
        lines.append(f"  {'':{width}}  source: {hw.source(k)}")
    return "\n".join(lines)


def to_json(hw: Hardware) -> dict:
    """One preset as JSON-ready data: integers exact, units and sources beside them."""
    return {"key": hw.key, "name": hw.name, "vendor": hw.vendor, "note": hw.note,
            **hw.numbers(), "units": {k: UNITS[k] for k in hw.numbers()}, "sources": dict(hw.sources)}


__all__ = ["Hardware", "preset", "presets", "parse", "format_table", "format_one", "to_json",
           "NUMBERS", "OPTIONAL_NUMBERS", "UNITS", "DTYPES"]
