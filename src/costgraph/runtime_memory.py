"""Memory a process holds on each GPU besides the model's tensors, from ``runtime_memory.toml``.

Two users, each named in its output:

* **vLLM's non-torch memory** (:func:`vllm_non_torch`): what vLLM's profile subtracts besides the
  weights and the activation peak (``non_torch_memory`` in its log). The newest logged figure of the
  device's preset at TP 1 or at the run's TP degree (vLLM's measurement changed between versions:
  1.79 GiB on an H100 in Dec. 2024, PR #10511; 0.16 GiB in Jan. 2025, PR #12126), plus NCCL's buffers
  of one TP communicator (:func:`nccl_bytes`) when that log ran at TP 1; else :data:`costgraph.choices.NON_TORCH_MEMORY` (the figure logged
  on an RTX 3090, vllm issue #10517) plus those buffers.
* **Training's memory reserve** (:func:`training_parts`, ``--reserve runtime``, the default of
  ``train``/``fit`` on a preset): the CUDA context (per GPU class), PyTorch's cuBLAS and cuBLASLt
  workspaces (one each: one handle on the compute stream) and NCCL's buffers, one communicator per
  parallel group of more than one device (TP, CP, DP, PP, EP: the layout's degrees). Named by the
  preset's vendor: on AMD the HIP context and RCCL's buffers (estimates, named so in the output: no ROCm
  source gives them), hipBLAS/hipBLASLt workspaces (PyTorch's ROCm defaults, ``[rocm]``); another vendor's runtime has no source (a part of 0 bytes says so).
  Not counted: the caching allocator's fragmentation (reserved but unallocated blocks), for which
  no kernel-level source gives a figure; ``--reserve 0.1`` is the flat rule for those who want a margin.

Every number has its source beside it in the TOML; a ``COSTGRAPH_DATA`` folder may add a
``runtime_memory.toml`` with entries of its own (a ``[context.NAME]`` of another GPU class, a
``[vllm.NAME]`` from one's own start-up log). This module imports no SymPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from . import datafiles, result_fields
from .datafiles import Field, Kind, Schema

_TEXT = (Field("description", "text"),)
CONTEXT = Kind("CUDA context", (*_TEXT, Field("compute_capability"), Field("bytes", unit="B", positive=True)))
CUBLAS = Kind("cuBLAS workspace", (*_TEXT, Field("compute_capability"), Field("bytes", unit="B", positive=True)))
CUBLASLT = Kind("cuBLASLt workspace", (*_TEXT, Field("bytes", unit="B", positive=True)))
NCCL = Kind("NCCL buffers", (*_TEXT, Field("simple_bytes", unit="B", positive=True),
                             Field("ll_bytes", unit="B", positive=True), Field("ll128_bytes", unit="B", positive=True),
                             Field("channels", unit="channels", positive=True)))
VLLM = Kind("vLLM non-torch figure", (*_TEXT, Field("hardware", "text"), Field("tp", unit="devices", positive=True),
                                      Field("date", "text"), Field("gib", "decimal", unit="GiB")))
VISIBLE = Kind("device memory CUDA reports", (*_TEXT, Field("hardware", "text"), Field("gib", "decimal", unit="GiB")))
ROCM = Kind("ROCm workspaces", (*_TEXT, Field("hipblas_bytes", unit="B", positive=True),
                                Field("hipblas_gfx94_95_bytes", unit="B", positive=True),
                                Field("hipblaslt_bytes", unit="B", positive=True), Field("gfx94_95", "names"),
                                Field("hip_context_bytes", unit="B", positive=True), Field("rccl", "text")))
SCHEMA = Schema("runtime_memory.toml", "costgraph", groups=(("context", CONTEXT), ("cublas", CUBLAS), ("vllm", VLLM),
                                                            ("visible", VISIBLE)),
                records=(("cublaslt", CUBLASLT), ("nccl", NCCL), ("rocm", ROCM)), user=True)

GIB = 2**30


def table() -> datafiles.DataSet:
    """``runtime_memory.toml`` with a ``COSTGRAPH_DATA`` folder's entries added."""
    return datafiles.load(SCHEMA)


@dataclass(frozen=True)
class Part(result_fields.Part):
    """One named part of the memory outside the model's tensors: ``name``, ``bytes`` and where
    the figure comes from (``source``: the data file's entry and its source); a typed part of a result
    (:class:`costgraph.result_fields.Part`: the fit verdict's ``reserve_parts``), its unit on ``bytes``."""

    name: str = result_fields.quantity(label="part")
    bytes: int = result_fields.quantity("bytes", label="bytes")
    source: str = result_fields.quantity(label="source")


def _by_class(group: str, capability: int | None) -> datafiles.Entry:
    """The entry of ``group`` measured on ``capability`` (major x 10 + minor), else its class-0 entry."""
    entries = table().groups[group]
    hit = [e for e in entries.values() if capability and e["compute_capability"] == capability]
    return hit[-1] if hit else next(e for e in entries.values() if e["compute_capability"] == 0)


def _said(e: datafiles.Entry, key: str) -> str:
    return f"{e.file} {e.where}: {e.sources.get(key, '')}"


def nccl_bytes(ranks: int) -> int:
    """NCCL's buffers on one GPU for one communicator of ``ranks`` devices: none for one device;
    else ``channels × (Simple + LL + LL128)`` bytes (the ring's receive connection of each channel
    holds one buffer of each protocol, allocated on the receiving GPU: NCCL ``src/init.cc``
    ``DEFAULT_BUFFSIZE``, ``DEFAULT_LL_BUFFSIZE``, ``DEFAULT_LL128_BUFFSIZE``); 16 channels × 9,633,792 B
    = 154,140,672 B with the bundled table."""
    if ranks <= 1:
        return 0
    n = table().records["nccl"]
    return n["channels"] * (n["simple_bytes"] + n["ll_bytes"] + n["ll128_bytes"])


def nccl_part(groups: dict[str, int], name: str = "NCCL buffers", said: str = "") -> Part | None:
    """NCCL's buffers for the parallel groups of more than one device (``{"tp": 2, "dp": 4}``), or None;
    ``name``: how the part is called (``RCCL buffers`` on AMD), ``said``: added to its source."""
    many = {k: v for k, v in groups.items() if v > 1}
    if not many:
        return None
    n = table().records["nccl"]
    return Part(name, sum(nccl_bytes(v) for v in many.values()),
                f"{len(many)} communicator(s) ({', '.join(f'{k} {v}' for k, v in many.items())}) x "
                f"{n['channels']} channels x (Simple + LL + LL128) buffers ({n.file} [nccl]){said}")


#: the parallel groups whose NCCL buffers the training reserve counts (one communicator each above 1), in order
GROUPS = ("tp", "pp", "cp", "dp", "ep")


def parallel_groups(tp, pp, cp, dp, ep) -> dict[str, int]:
    """The parallel groups of a training layout that NCCL's buffers are counted from
    (:func:`training_parts`): ``{"tp": t, "pp": p, "cp": c, "dp": d, "ep": e}``, the five degrees in
    devices (an int, or a SymPy integer). A degree that is no number (None, or a symbol a layout
    leaves free) is left out: its communicator's size is unknown. The one definition ``train``
    (:func:`costgraph.training.api.training_fits`) and ``plan`` (each row's reserve,
    :mod:`costgraph.training.planning`) share, so a plan row's reserve is its check command's.

    >>> parallel_groups(2, 1, 1, 4, None)
    {'tp': 2, 'pp': 1, 'cp': 1, 'dp': 4}
    """
    out = {}
    for name, v in zip(GROUPS, (tp, pp, cp, dp, ep)):
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, int) or getattr(v, "is_Integer", False):
            out[name] = int(v)
    return out


def training_parts(capability: int | None, groups: dict[str, int], vendor: str | None = None,
                   gfx_target: str | None = None) -> tuple[Part, ...]:
    """The named parts of training's runtime reserve on a GPU of CUDA ``capability`` (None:
    unknown, the class-0 entries) with the parallel ``groups`` (name → degree): the CUDA context,
    the cuBLAS and cuBLASLt workspaces, NCCL's buffers (module docstring). Each part is named by the
    ``vendor``'s stack (a preset's ``vendor``; None: NVIDIA's): on AMD the HIP context (an estimate,
    named so: no ROCm figure found, ``[rocm] hip_context_bytes`` takes CUDA's), PyTorch's hipBLAS and hipBLASLt
    workspaces on ROCm (``[rocm]``: 128 MiB where the preset's ``gfx_target`` is gfx94x/gfx95x, 32 MiB
    elsewhere; 76 MiB) and
    RCCL's buffers (an estimate, named so: NCCL's defaults, ``[rocm] rccl`` says why); on another vendor (Google's TPUs, Intel's
    Gaudi) one part of 0 bytes that says no source gives the runtime's memory."""
    if vendor not in (None, "NVIDIA", "AMD"):
        return (Part(f"no source for {vendor}'s runtime memory (give --reserve 0.1 or a size)", 0,
                     f"no kernel-level figure of {vendor}'s runtime read (no CUDA context, cuBLAS or NCCL there)"),)
    ctx, cub, lt = _by_class("context", capability), _by_class("cublas", capability), table().records["cublaslt"]
    if vendor == "AMD":
        rocm = table().records["rocm"]
        big = gfx_target is not None and gfx_target.startswith(rocm["gfx94_95"])   # PyTorch's isGPUArch: a prefix
        key = "hipblas_gfx94_95_bytes" if big else "hipblas_bytes"
        parts = [Part("HIP context (estimate)", rocm["hip_context_bytes"], _said(rocm, "hip_context_bytes")),
                 Part("hipBLAS workspace", rocm[key], _said(rocm, key)),
                 Part("hipBLASLt workspace", rocm["hipblaslt_bytes"], _said(rocm, "hipblaslt_bytes"))]
        nccl = nccl_part(groups, "RCCL buffers (estimate)", f"; {rocm['rccl']} ({rocm.file} [rocm])")
    else:
        parts = [Part("CUDA context", ctx["bytes"], _said(ctx, "bytes")),
                 Part("cuBLAS workspace", cub["bytes"], _said(cub, "bytes")),
                 Part("cuBLASLt workspace", lt["bytes"], _said(lt, "bytes"))]
        nccl = nccl_part(groups)
    return tuple(parts + ([nccl] if nccl else []))


def visible_memory(hardware: str | None) -> tuple[int, str] | None:
    """``(bytes, words)``: the device memory CUDA reports on preset ``hardware`` (``[visible.NAME]``,
    floored to whole bytes: H100 SXM 79.22 GiB = 85,061,827,297 B), or None where no entry gives it."""
    hit = [e for e in table().groups["visible"].values() if hardware is not None and e["hardware"] == hardware]
    if not hit:
        return None
    e = hit[-1]
    return _gib_bytes(e["gib"]), f"as CUDA reports it: {e.file} {e.where}"


def visible_figure(hardware: str | None) -> tuple[int, str] | None:
    """``(bytes, source)``: the device memory CUDA reports on preset ``hardware`` (:func:`visible_memory`) with
    its entry and that entry's source (``runtime_memory.toml [visible.h100-sxm]: vllm PR #10511 ...``), what
    ``costgraph hardware NAME`` shows beside the printed ``memory_bytes``; None where no entry gives it."""
    hit = [e for e in table().groups["visible"].values() if hardware is not None and e["hardware"] == hardware]
    return None if not hit else (_gib_bytes(hit[-1]["gib"]), _said(hit[-1], "gib"))


@dataclass(frozen=True)
class DeviceMemory:
    """One device's memory capacity: ``bytes``, the ``convention`` it is read under (``cuda``, ``nominal``:
    :data:`costgraph.choices.MEMORY_CONVENTION`; ``given``: ``--memory``) and ``source`` (words: the data
    file's entry and its source); ``short``: ``source`` without the datasheet's line of a printed figure
    (``memory convention nominal``; None: ``source`` has none), what ``costgraph plan``'s header says."""

    bytes: int
    convention: str
    source: str
    short: str | None = None

    @property
    def brief(self) -> str:
        """:attr:`short`, or :attr:`source` where it has no datasheet's line."""
        return self.source if self.short is None else self.short

    def words(self) -> str:
        """``79.22 GiB, as CUDA reports it (memory convention cuda): runtime_memory.toml [visible.h100-sxm]``."""
        return f"{self.bytes / GIB:,.2f} GiB, {self.source}"

    def to_dict(self) -> dict:
        return {"bytes": self.bytes, "convention": self.convention, "source": self.source}


#: how the ``cuda`` convention's figure is named in the output
_CUDA_WORDS = "as CUDA reports it (memory convention cuda):"


def device_memory(hw, convention: str | None = None, given: int | None = None) -> DeviceMemory | None:
    """The memory of one device of preset ``hw`` (a :class:`~costgraph.hardware.Hardware`, or None) under ``convention`` (:data:`costgraph.choices.MEMORY_CONVENTION`, None: its default ``cuda``), where
    ``infer`` (its capacity line and its runtime's KV cache), ``fit`` (serving and training), ``train`` (its fit
    verdict under every ``--reserve`` form), ``plan``, ``report`` and the calculator page read it:

    * ``cuda``: the total CUDA reports (``torch.cuda.mem_get_info``; vLLM's ``total_gpu_memory``), from
      ``runtime_memory.toml`` ``[visible.NAME]`` (H100 SXM: 79.22 GiB = 85,061,827,297 B, vllm PR #10511),
      else the preset's printed figure, and ``source`` says no entry gives it;
    * ``nominal``: the preset's ``memory_bytes``, the vendor's printed figure (80 GB = 80,000,000,000 B).

    ``given`` (bytes, ``--memory``) wins over both (convention ``given``), and ``convention`` must then be None
    (either one given with ``--memory`` is refused alike: it reads a preset's memory, which ``--memory``
    replaces). None without a preset or a given size.

    Raises
    ------
    CostgraphValueError
        An unknown convention (the hint lists them); a convention (``cuda`` or ``nominal``) with ``given`` or
        without ``hw`` (it would be ignored)."""
    from .choices import MEMORY_CONVENTION
    from .errors import CostgraphValueError

    asked, convention = convention, MEMORY_CONVENTION.default if convention is None else convention
    if convention not in MEMORY_CONVENTION.values:
        raise CostgraphValueError(f"unknown device memory convention {str(convention)[:40]!r}",
                                  hint="--memory-convention " + MEMORY_CONVENTION.help())
    if given is not None:
        if asked is not None:   # cuda and nominal alike: each reads a preset's memory, which --memory replaces
            raise CostgraphValueError(f"--memory-convention {convention} reads a preset's memory, but --memory "
                                      "gives it", hint="drop --memory-convention (--memory is the device memory), "
                                                       "or drop --memory to read the preset's figure under it")
        return DeviceMemory(int(given), "given", "--memory")
    if hw is None:
        if asked is not None:   # it was accepted and read nothing (trial 8)
            raise CostgraphValueError(f"--memory-convention {convention} reads a preset's memory, but no --hardware "
                                      "names one", hint="give --hardware NAME, or drop --memory-convention")
        return None
    printed = f"{hw.key}'s printed figure: {hw.source('memory_bytes')}"
    if convention == "cuda":
        seen = visible_memory(hw.key)
        if seen:
            return DeviceMemory(seen[0], "cuda", seen[1].replace("as CUDA reports it:", _CUDA_WORDS, 1))
        short = f"as printed (memory convention cuda, but no [visible.{hw.key}] entry in runtime_memory.toml)"
        return DeviceMemory(hw.memory_bytes, "cuda", f"{short}: {printed}", short)
    return DeviceMemory(hw.memory_bytes, "nominal", f"memory convention nominal, {printed}", "memory convention nominal")


@dataclass(frozen=True)
class Reserve:
    """Training's runtime reserve (module docstring): ``capacity`` (bytes the verdict takes the device
    to have: CUDA's total on a preset with a ``[visible.NAME]`` entry and no ``--memory``, else the
    capacity given), ``capacity_from`` (words, None: the capacity given) and its named ``parts``."""

    capacity: int
    capacity_from: str | None
    parts: tuple[Part, ...]

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    def words(self) -> str:
        """The reserve's parts in words: ``runtime: CUDA context 400.00 MB + ...``."""
        return "runtime: " + " + ".join(f"{p.name} {p.bytes / 1e6:,.2f} MB" if p.bytes else p.name for p in self.parts)


def preset_capacity(hw, given: bool, convention: str | None = None) -> DeviceMemory | None:
    """The device memory of preset ``hw`` under ``convention`` (:func:`device_memory`; None: its default
    ``cuda``, what CUDA reports where a ``[visible.NAME]`` entry gives it; ``nominal``: the printed figure,
    named so; under ``cuda`` without a ``[visible.NAME]`` entry the printed figure, and its words say that is
    what was assumed, as ``infer`` says it); None where the capacity is ``given`` (``--memory``) or without a
    preset. Train's fit verdict (every ``--reserve`` form), ``fit`` and ``plan`` take the capacity from it and
    name it (``capacity_from``)."""
    return None if given or hw is None else device_memory(hw, convention)


def training_reserve(hw, groups: dict[str, int], capacity: int, given: bool,
                     convention: str | None = None) -> Reserve:
    """The runtime reserve of a training run on preset ``hw`` (a :class:`~costgraph.hardware.Hardware`
    or None) with the parallel ``groups`` (name → degree) and a device of ``capacity`` bytes
    (``given``: from ``--memory``, kept as is; else the preset's memory under ``convention``,
    :func:`preset_capacity`)."""
    seen = preset_capacity(hw, given, convention)
    parts = training_parts(None if hw is None else hw.compute_capability, groups, None if hw is None else hw.vendor,
                           None if hw is None else hw.gfx_target)
    if seen is None:   # given: the capacity asked, no words
        return Reserve(capacity, None, parts)
    return Reserve(seen.bytes, seen.source, parts)


def _gib_bytes(gib: Fraction) -> int:
    return int(gib * GIB)   # floored, as vLLM's printed sizes are read (costgraph.inference.capacity.parse_bytes)


def vllm_non_torch(hardware: str | None, tp: int, fallback: int) -> tuple[int, str]:
    """``(bytes, words)``: vLLM's non-torch memory on preset ``hardware`` (None: none) at TP ``tp``
    (module docstring); ``fallback``: the bytes used where no figure of the preset is logged. The
    words name the figure's source."""
    rows = [e for e in table().groups["vllm"].values()
            if hardware is not None and e["hardware"] == hardware and e["tp"] in (1, tp)]
    if rows:   # the newest log (vLLM's measurement changes between versions); at the run's TP when that log has it
        e = max(rows, key=lambda e: (e["date"], e["tp"] == tp))
        base, words = _gib_bytes(e["gib"]), f"vLLM's log on {hardware} at TP {e['tp']}, {float(e['gib']):g} GiB ({e.file} {e.where})"
        if e["tp"] == tp:
            return base, words
    else:
        base, words = fallback, "the default --non-torch-memory (no vLLM log of this device in runtime_memory.toml)"
    extra = nccl_bytes(tp)
    return base + extra, words + (f" + NCCL buffers of one TP {tp} communicator ({extra:,} bytes)" if extra else "")
