"""Hardware presets: accelerators' dense peaks, memory and links, with sources.

The numbers live in ``hardware.toml`` beside this module, one table per
preset, each number an exact TOML integer in base units (FLOP/s, bytes, B/s,
ns, W) with a ``# source: ...`` comment beside it. The file is read and
validated by :mod:`costgraph.datafiles` against :data:`KIND` (the fields, their
units, which must be positive), so :func:`preset` returns every number together
with where it comes from and a number without a source is refused.

Presets of one's own, without editing the package: a TOML file written as
``hardware.toml`` (one table per preset; a ``source = "..."`` string in the
table may stand for the numbers without their own comment), either

* in the folder named by ``$COSTGRAPH_DATA`` (as ``hardware.toml``): its presets
  are added to the bundled ones, usable by name everywhere; a name already
  bundled is refused, never overridden; or
* given by path: ``preset("my-gpu.toml")`` (``--hardware my-gpu.toml``) when
  the file holds one preset, ``preset("my.toml:NAME")`` to choose one.

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

import re
from dataclasses import dataclass, field, replace
from functools import cache
from types import MappingProxyType
from typing import Mapping

from . import datafiles
from .choices import EP_DISPATCHER, LINK_RATE, PEAK_DTYPE
from .datafiles import Field, Kind, Schema
from .errors import CostgraphValueError
from .hints import did_you_mean, listing

FILE = "hardware.toml"

_F = "FLOP/s"
# The bounds of a preset's figures (a Field's maximum; its reason, `above`, is what a refusal says): each two orders of
# magnitude or more above every device built, so that a typo's extra digits or a wrong unit (memory_bytes = 10**36)
# is refused at its FILE:LINE:COLUMN, never priced; the largest bundled figure or device known is named in each.
_PEAK = (10**18, "no single device reaches 1 EFLOP/s: the largest bundled dense peak is the MI355X's FP8 5.0 PFLOP/s")
_MEMORY = (10**15, "no device holds 1 PB of memory: the largest bundled holds 512 GB (M3 Ultra)")
_MEMORY_BW = (10**17, "no device's memory moves 100 PB/s: B200's HBM3e is 8 TB/s, a wafer's SRAM (WSE-3) 21 PB/s")
_LINK = (10**14, "no link carries 100 TB/s per direction per device: NVLink 5 is 900 GB/s, a B300's NIC 100 GB/s")
_DOMAIN = (10**6, "no scale-up domain joins a million devices: the largest bundled is a TPU v7 pod's 9,216 chips")
_NODE = (1024, "no host holds more than 1,024 devices: the bundled nodes hold at most 16 (Trainium2)")
_LATENCY = (10**9, "a ring step of a second is slower than any network: the bundled steps take at most 14 µs")
_WATTS = (10**5, "no device draws 100 kW: the largest bundled draws 1,400 W (GB300), a wafer-scale system ~23 kW")
_HOST = (10**15, "no node's host memory holds 1 PB: the largest bundled holds 2.2 TB (Trainium2)")
_HOST_BW = (10**15, "no node's host memory moves 1 PB/s: the largest bundled moves 1 TB/s (GB200)")
_CC = (999, "a compute capability is major × 10 + minor (90: sm_90); the newest bundled is 120")


def _bounded(bound: tuple[int, str]) -> dict:
    """``maximum`` and ``above`` (the reason, as the refusal says) of a :class:`Field` from a bound above."""
    return {"maximum": bound[0], "above": bound[1]}


#: The fields of a preset, as the loader validates them (units in base units; a
#: number's source is its line's ``# source:`` comment, else the preset's ``source``).
KIND = Kind("hardware preset", (
    Field("name", "text", doc="the product's name"),
    Field("vendor", "text"),
    Field("note", "text", required=False),
    Field("source", "text", required=False, doc="source of every number without its own comment"),
    Field("peak_flops_bf16", unit=_F, positive=True, doc="dense BF16 matrix peak", **_bounded(_PEAK)),
    Field("peak_flops_fp16", unit=_F, **_bounded(_PEAK)), Field("peak_flops_fp8", unit=_F, **_bounded(_PEAK)),
    Field("peak_flops_tf32", unit=_F, **_bounded(_PEAK)), Field("peak_flops_fp32", unit=_F, **_bounded(_PEAK)),
    Field("memory_bytes", unit="B", positive=True, doc="the vendor's printed capacity at its printed unit",
          **_bounded(_MEMORY)),
    Field("memory_bandwidth", unit="B/s", positive=True, **_bounded(_MEMORY_BW)),
    Field("scale_up_bandwidth", unit="B/s per direction", **_bounded(_LINK)),
    Field("scale_up_domain", unit="devices", positive=True, **_bounded(_DOMAIN)),
    Field("scale_out_bandwidth", unit="B/s per direction", **_bounded(_LINK)),
    Field("devices_per_node", unit="devices", positive=True, **_bounded(_NODE)),
    Field("latency_scale_up_ns", unit="ns", **_bounded(_LATENCY)),
    Field("latency_scale_out_ns", unit="ns", **_bounded(_LATENCY)),
    # a board's power limit is above 0 (the smallest bundled is the L4's 72 W)
    Field("tdp_watts", unit="W", required=False, positive=True, **_bounded(_WATTS)),
    Field("host_link_bandwidth", unit="B/s per direction", required=False, positive=True, **_bounded(_LINK),
          doc="device to host memory (PCIe, NVLink-C2C), per direction per device; for offload"),
    Field("host_memory_bytes", unit="B", required=False, positive=True, **_bounded(_HOST),
          doc="host (CPU) memory of one node of devices_per_node devices (the vendor's reference node); for offload"),
    Field("host_memory_bandwidth", unit="B/s", required=False, positive=True, **_bounded(_HOST_BW),
          doc="host (CPU) memory bandwidth of one node (the reference node's sockets); the CPU optimizer step"),
    Field("compute_capability", unit="major x 10 + minor", required=False, positive=True, **_bounded(_CC),
          doc="NVIDIA's CUDA compute capability (90: sm_90); what Transformer Engine's FP8 kernels key on"),
    Field("scale_up_busbw", unit="B/s per direction", required=False, positive=True, **_bounded(_LINK),
          doc="what NCCL's ring collectives reach over the scale-up link (nccl-tests busbw); --link-rate nccl"),
    Field("scale_out_busbw", unit="B/s per direction", required=False, positive=True, **_bounded(_LINK),
          doc="what NCCL's ring collectives reach over the NICs (nccl-tests busbw); --link-rate nccl"),
    Field("deepep_scale_up_bw", unit="B/s per direction", required=False, positive=True, **_bounded(_LINK),
          doc="what DeepEP's dispatch and combine kernels reach over the scale-up link (the lower of the two, "
              "deepseek-ai/DeepEP's measurements); --ep-dispatcher deepep"),
    Field("deepep_scale_out_bw", unit="B/s per direction", required=False, positive=True, **_bounded(_LINK),
          doc="what DeepEP's kernels reach over RDMA per NIC (the lowest of its measurements); --ep-dispatcher deepep"),
    Field("gfx_target", "text", required=False,
          doc="AMD's LLVM target of the GPU (gfx942: MI300X); what PyTorch's ROCm workspace sizes key on"),
))
#: ``hardware.toml``: one table per preset; a ``COSTGRAPH_DATA`` folder may add presets.
SCHEMA = Schema(FILE, "costgraph", entries=KIND, user=True)

#: The integer fields every preset must give, in display order.
NUMBERS = tuple(f.name for f in KIND.fields if f.type == "int" and f.required)
#: Integer fields a preset may leave out.
OPTIONAL_NUMBERS = tuple(f.name for f in KIND.fields if f.type == "int" and not f.required)
KEYS = KIND.keys
#: Units of each number, for display.
UNITS = {f.name: f.unit for f in KIND.fields if f.type == "int"}

#: dtype names accepted by :meth:`Hardware.peak_flops`.
DTYPES = PEAK_DTYPE.values


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
    #: B/s per direction between the device and host memory (PCIe, NVLink-C2C); None: not published
    host_link_bandwidth: int | None = None
    #: bytes of host (CPU) memory of one node (the vendor's reference node: DGX, a cloud instance); None: not published
    host_memory_bytes: int | None = None
    #: B/s of host (CPU) memory of one node (the reference node's sockets); None: not published
    host_memory_bandwidth: int | None = None
    #: NVIDIA's CUDA compute capability as major·10 + minor (90: sm_90, Hopper); None: not an NVIDIA GPU
    compute_capability: int | None = None
    #: AMD's LLVM target of the GPU (gfx942: MI300X, MI325X); None: not an AMD GPU (runtime_memory.training_parts)
    gfx_target: str | None = None
    #: B/s per direction NCCL's ring collectives reach over the scale-up link (nccl-tests busbw); None: line rate
    scale_up_busbw: int | None = None
    #: B/s per direction NCCL's ring collectives reach over the NICs (nccl-tests busbw); None: line rate
    scale_out_busbw: int | None = None
    #: B/s per direction DeepEP's dispatch/combine reach over the scale-up link (measured); None: none measured
    deepep_scale_up_bw: int | None = None
    #: B/s per direction DeepEP's kernels reach over RDMA per NIC (measured); None: none measured
    deepep_scale_out_bw: int | None = None

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
        for k in OPTIONAL_NUMBERS:
            if k != "tdp_watts" and getattr(self, k) is not None:
                out[k] = getattr(self, k)
        return out


def _preset(entry: datafiles.Entry) -> Hardware:
    v = entry.values
    return Hardware(key=entry.name, name=v["name"], vendor=v["vendor"], note=v.get("note", ""),
                    tdp_watts=v.get("tdp_watts"), sources=entry.sources, **{k: v[k] for k in NUMBERS},
                    host_link_bandwidth=v.get("host_link_bandwidth"), host_memory_bytes=v.get("host_memory_bytes"),
                    host_memory_bandwidth=v.get("host_memory_bandwidth"),
                    compute_capability=v.get("compute_capability"), gfx_target=v.get("gfx_target"),
                    scale_up_busbw=v.get("scale_up_busbw"), scale_out_busbw=v.get("scale_out_busbw"),
                    deepep_scale_up_bw=v.get("deepep_scale_up_bw"), deepep_scale_out_bw=v.get("deepep_scale_out_bw"))


@cache
def _presets(data: datafiles.DataSet) -> dict[str, Hardware]:
    out = {}
    for key, entry in data.entries.items():
        if not entry.bundled and (_normal(key) != key or key.replace("-", "") in
                                  {k.replace("-", "") for k, e in data.entries.items() if e.bundled}):
            raise entry.error("is not a preset name: write it in lower case with '-' (h100-sxm), "
                              "unlike any bundled preset's", hint="user presets add to the bundled ones")
        out[key] = _preset(entry)
    return out


def parse(text: str, file: str = FILE) -> dict[str, Hardware]:
    """Validate the text of a presets file and return its presets, in file
    order. Every mistake is a :class:`CostgraphValueError` naming the file, the
    preset and the key (see :mod:`costgraph.datafiles`)."""
    return _presets(datafiles.parse(text, file, SCHEMA))


def presets() -> dict[str, Hardware]:
    """The presets of ``hardware.toml``, with those of ``$COSTGRAPH_DATA/hardware.toml``
    added, by key, in file order (cached: do not modify the dict)."""
    return _presets(datafiles.load(SCHEMA))


def bundled_presets() -> dict[str, Hardware]:
    """The presets bundled with costgraph only (``hardware.toml``), whatever ``COSTGRAPH_DATA`` says."""
    return _presets(datafiles.bundled(SCHEMA))


#: ``--hardware PATH.toml`` or ``--hardware PATH.toml:NAME``: presets of a user's file.
_FILE_SPEC = re.compile(r"(?P<path>.+\.toml)(?::(?P<name>[^:/\\]+))?", re.IGNORECASE)


def from_file(path: str, name: str | None = None) -> Hardware:
    """The preset ``name`` of the user's TOML file at ``path`` (written as
    ``hardware.toml``'s presets, validated by the same loader, read under the
    limits of a config.json); ``name`` may be left out when the file holds one
    preset. Its ``key`` is ``PATH:NAME``, which :func:`preset` takes back (a
    command suggested with ``--hardware KEY`` names the same file). A
    :class:`CostgraphValueError` names the file, preset and key."""
    table = _presets(datafiles.load_file(path, SCHEMA))
    if name is None:
        if len(table) > 1:
            raise CostgraphValueError(f"{path} holds {len(table)} presets: {', '.join(table)}",
                                      hint=f"choose one: --hardware {path}:{next(iter(table))}")
        name = next(iter(table))
    if name not in table:
        raise CostgraphValueError(f"{path} has no preset '{name}'", hint="its presets: " + ", ".join(table))
    return replace(table[name], key=f"{path}:{name}")    # its name on the command line


def _normal(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def preset(name: str | Hardware) -> Hardware:
    """The preset called ``name`` (case, spaces and underscores forgiven:
    ``H100_SXM`` is ``h100-sxm``); an unknown name is a
    :class:`CostgraphValueError` with a "did you mean" and the list."""
    if isinstance(name, Hardware):
        return name
    if not isinstance(name, str):
        raise CostgraphValueError(f"a hardware preset name must be a string, not {type(name).__name__}")
    spec = _FILE_SPEC.fullmatch(name)
    if spec:
        return from_file(spec["path"], spec["name"])
    table = presets()
    key = _normal(name)
    if not key:   # every name starts with '': no "did you mean" for all of them
        raise CostgraphValueError("a hardware name is needed, got an empty one",
                                  hint="presets: " + ", ".join(table) + "; or a TOML file: --hardware my-gpu.toml[:NAME]")
    if key in table:
        return table[key]
    compact = {k.replace("-", ""): k for k in table}   # h100sxm, tpuv5e
    if key.replace("-", "") in compact:
        return table[compact[key.replace("-", "")]]
    close = did_you_mean(key, table, cutoff=0.5, prefix=True)
    hint = ((close + " " if close else "") + "presets: " + listing(table)
            + "; or a TOML file of your own: --hardware my-gpu.toml[:NAME]")
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


def link_rates_text(hw: Hardware, rate: str = "nccl") -> str:
    """How the links of ``hw`` are timed under ``rate`` (:func:`costgraph.parallel.ranks.link_bandwidths`), as the
    training report names it: ``links (--link-rate nccl, default): scale-up 450 GB/s at nccl-tests'
    370.8 GB/s busbw; scale-out 50 GB/s at 48 GB/s busbw (per direction per device)``."""
    flag = f"--link-rate {rate}" + (", default" if rate == "nccl" else "")
    parts = []
    for side, line, bus in (("scale-up", hw.scale_up_bandwidth, hw.scale_up_busbw),
                            ("scale-out", hw.scale_out_bandwidth, hw.scale_out_busbw)):
        text = f"{side} {_dec(line, 10**9)} GB/s"
        if rate != "line":
            text += f" at nccl-tests' {_dec(bus, 10**9)} GB/s busbw" if bus is not None else " (line rate: no busbw)"
        parts.append(text)
    return f"links ({flag}): " + "; ".join(parts) + " (per direction per device)"


def dispatch_text(hw: Hardware, dispatcher: str, rate: str = LINK_RATE.default) -> str:
    """How the EP all-to-all of ``hw`` is timed under ``--ep-dispatcher`` ``dispatcher`` and ``--link-rate`` ``rate``
    (:func:`costgraph.parallel.ep_time.dispatch_bandwidths`), as the training report names it: ``EP dispatch
    (--ep-dispatcher deepep): scale-up: DeepEP's measured 153 GB/s; scale-out per NIC: DeepEP's measured 43 GB/s``,
    or what is assumed where the preset has no DeepEP measurement."""
    flag = f"--ep-dispatcher {dispatcher}" + (", default" if dispatcher == EP_DISPATCHER.default else "")
    if rate == "line":
        return f"EP dispatch ({flag}): at the line rates above (--link-rate line), one NIC per device"
    if dispatcher == "alltoall":
        return f"EP dispatch ({flag}): NCCL's all-to-all at the links above, one NIC per device"
    missing = dict(_dispatch_missing(hw, " above"))
    parts = [missing[side] if side in missing else f"{side}: DeepEP's measured {_dec(v, 10**9)} GB/s"
             for side, v, _ in _dispatch_sides(hw)]
    return f"EP dispatch ({flag}): " + "; ".join(parts)


def dispatch_warnings(hw: Hardware, dispatcher: str, rate: str = LINK_RATE.default) -> list[str]:
    """``--ep-dispatcher deepep`` on a preset without DeepEP's measured figure of a link (``deepep_scale_up_bw``,
    ``deepep_scale_out_bw``): one warning naming each such link and what is assumed there (NCCL's busbw, else the
    line rate; :func:`costgraph.parallel.ep_time.dispatch_bandwidths`), in the words of train's EP dispatch line
    (:func:`dispatch_text`), as ``costgraph plan`` warns it; ``[]`` for ``alltoall``, ``--link-rate line``, or a
    preset with both figures."""
    if dispatcher != "deepep" or rate == "line":
        return []
    missing = [text for _, text in _dispatch_missing(hw, "")]
    return ["--ep-dispatcher deepep: " + "; ".join(missing)] if missing else []


def _dispatch_sides(hw: Hardware) -> tuple:
    """``(side, DeepEP's figure or None, NCCL's busbw or None)`` of the two links."""
    return (("scale-up", hw.deepep_scale_up_bw, hw.scale_up_busbw),
            ("scale-out per NIC", hw.deepep_scale_out_bw, hw.scale_out_busbw))


def _dispatch_missing(hw: Hardware, above: str) -> list[tuple[str, str]]:
    """``(side, what is assumed)`` of each link of ``hw`` without DeepEP's figure; ``above``: ``" above"`` where a
    links line precedes it (train's report)."""
    # the figure is NCCL's busbw where the preset gives it, else the line rate (trial 9: mi300x's said NCCL's)
    return [(side, f"{side}: no DeepEP measurement for {hw.key} in hardware.toml, "
             + (f"NCCL's figure{above} assumed" if busbw else f"the line rate{above} assumed (no busbw)"))
            for side, v, busbw in _dispatch_sides(hw) if v is None]


def links_lines(key: str | None, rate: str = "nccl", dispatcher: str | None = None) -> list[str]:
    """``["  links (--link-rate nccl, default): …"]`` (:func:`link_rates_text`) for the preset named
    ``key``, as the training report prints it under its communication, and with ``dispatcher`` (a layout
    with EP traffic) the EP dispatch's line (:func:`dispatch_text`); none without a preset, or for
    one not found again by its key (a file's)."""
    try:
        hw = preset(key) if key else None
        return [f"  {link_rates_text(hw, rate)}"] + ([f"  {dispatch_text(hw, dispatcher, rate)}"] if dispatcher else []) \
            if hw is not None else []
    except CostgraphValueError:
        return []


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
    from .results import renderer

    table = renderer().text_table   # costgraph.export.tables.table, through the renderers' door

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
    if key in ("memory_bytes", "host_memory_bytes"):
        return f"{_dec(v, 10**9)} GB = {_dec(v, 2**30, 2)} GiB"
    if unit.startswith("B/s"):
        return f"{_dec(v, 10**9)} GB/s" + unit[3:]
    if unit == "ns":
        return f"{_dec(v, 1000)} us"
    return f"{v:,} {unit}"


#: the name of the CUDA-visible memory beside a preset's fields (``costgraph hardware NAME``): not a field of the
#: preset but an entry of runtime_memory.toml ([visible.NAME]), the memory convention cuda's figure
VISIBLE = "memory_cuda_visible"


def format_one(hw: Hardware, visible: tuple[int, str] | None = None) -> str:
    """Every field of one preset, each number with its unit and its source; ``visible``: ``(bytes, source)`` of
    the memory CUDA reports on it (:func:`costgraph.runtime_memory.visible_figure`), shown after
    ``memory_bytes`` (what ``--memory-convention cuda``, the default, reads), or a line saying none is known
    (the printed figure is read)."""
    lines = [f"{hw.key}: {hw.name} ({hw.vendor})"]
    if hw.note:
        lines.append(f"note: {hw.note}")
    width = max(len(k) for k in (*hw.numbers(), VISIBLE))
    for k, v in hw.numbers().items():
        lines.append(f"  {k.ljust(width)}  {v:>25,}  {_human(k, v)}")
        lines.append(f"  {'':{width}}  source: {hw.source(k)}")
        if k == "memory_bytes" and visible is not None:
            lines.append(f"  {VISIBLE.ljust(width)}  {visible[0]:>25,}  {visible[0] / 2**30:,.2f} GiB, as CUDA "
                         f"reports it (--memory-convention cuda, the default, reads it)")
            lines.append(f"  {'':{width}}  source: {visible[1]}")
        elif k == "memory_bytes":
            lines.append(f"  {VISIBLE.ljust(width)}  {'none known':>25}  (no [visible.{hw.key}] entry in "
                         f"runtime_memory.toml: --memory-convention cuda reads the printed memory_bytes)")
    return "\n".join(lines)


def to_json(hw: Hardware, visible: tuple[int, str] | None = None) -> dict:
    """One preset as JSON-ready data: integers exact, units and sources beside them; ``visible`` (as
    :func:`format_one`): ``memory_cuda_visible`` with its unit and source, where given."""
    out = {"key": hw.key, "name": hw.name, "vendor": hw.vendor, "note": hw.note,
           **hw.numbers(), "units": {k: UNITS[k] for k in hw.numbers()}, "sources": dict(hw.sources)}
    if visible is not None:
        out[VISIBLE] = visible[0]
        out["units"][VISIBLE], out["sources"][VISIBLE] = "bytes", visible[1]
    return out


@dataclass(frozen=True)
class PresetList:
    """Every preset (``costgraph hardware`` / ``costgraph hardware list``): the bundled ones, then a
    user table's (``COSTGRAPH_DATA``). ``str()`` is the text table (peaks in dense TFLOP/s, HBM, links,
    each preset's BF16 source: :func:`format_table`); ``to_dict()`` the JSON (:func:`to_json` per preset:
    exact integers, units and a source per number)."""

    presets: Mapping[str, Hardware]

    def to_dict(self) -> dict:
        return {"presets": [to_json(h) for h in self.presets.values()]}

    def __str__(self) -> str:
        return format_table(self.presets)


def preset_list() -> PresetList:
    """Every preset, as :class:`PresetList` (the table of ``costgraph hardware list``)."""
    return PresetList(MappingProxyType(presets()))


__all__ = ["Hardware", "PresetList", "preset_list", "preset", "presets", "bundled_presets", "from_file", "parse", "KIND", "SCHEMA", "format_table", "format_one", "to_json",
           "NUMBERS", "OPTIONAL_NUMBERS", "UNITS", "DTYPES", "link_rates_text", "links_lines", "dispatch_text"]
