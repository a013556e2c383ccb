"""Per-preset kernel tables of the per-kernel step-time model (``training/kernels.toml``).

A :class:`KernelTable` holds, for one hardware preset, the measured kernel-level
points (GEMM FLOP/s per shape; flash-attention FLOP/s per sequence length,
forward and backward) with their sources, and the parameters fitted to them:

* **GEMM** (one call of ``F = 2·M·N·K`` FLOPs, contraction ``K``):
  ``seconds = t0 + F/(P·e)·(1 + k0/K)`` with ``e`` = ``gemm_efficiency``, ``t0`` =
  ``gemm_launch_ns`` (a fixed time per call: launch, fill, drain) and ``k0`` =
  ``gemm_k0`` (each output tile's fixed work, amortized over the contraction), i.e.
  the efficiency :func:`gemm_eta` ``η(M, N, K) = e·F·K / (F·(K + k0) + P·e·t0·K)``
  — a SymPy closed form in the per-device shape, saturating at ``e`` for large
  GEMMs. Fitted by :func:`fit_gemm` (linear least squares on the relative error
  of each point's seconds, which are linear in ``t0``, ``1/e`` and ``k0/e``). An
  FP8 fit (``gemm_fp8_*``, at the FP8 peak) where the table has FP8 points.
* **Attention** (a fused flash kernel, key length ``S`` per call):
  :func:`attention_eta` ``η(S) = e·S/(S + s0)``, forward and backward apart,
  fitted by :func:`fit_attention` (least squares on ``1/η = 1/e + (s0/e)/S``,
  weighted by the measured ``η``). One curve pair per attention kernel the
  table measures (:data:`costgraph.choices.ATTENTION_KERNEL`: cuDNN's fused
  attention, FlashAttention-3, PyTorch's FlashAttention-2): ``attention_kernel``
  names the kernel of ``attention_forward/backward_*``, ``attention_K_*`` hold
  the others (:func:`attention_curves`). ``attention_fp8_forward/backward_*`` (optional): the curves of
  Transformer Engine's FP8 dot-product attention (cuDNN's FP8 fused attention), fitted at the FP8 peak;
  ``--fp8-dot-product-attention`` runs on them where the table has them.
* **Sustained GEMM rate** (optional): ``gemm_sustained_derate`` ``d``, fitted by :func:`fit_gemm_derate` to a
  GEMM benchmark run on random data after long warm-ups at unlocked clocks (``gemm_sustained_points``, compared
  with the ``gemm_sustained_dtype`` fit); :func:`rated` multiplies every GEMM fit's ``e`` by ``d`` under
  ``--gemm-rate sustained`` (:data:`costgraph.choices.GEMM_RATE`, the default).
* **Memory-bound operators**: an achieved HBM bandwidth ``hbm_bandwidth`` (B/s) and, where the
  table measures memory-bound kernels of several sizes (``memory_points``), a fixed time per kernel
  ``memory_launch_ns``: :func:`memory_seconds` ``t_m + bytes/B_hbm``, both fitted by
  :func:`fit_memory` (least squares on the relative error of each point's seconds, linear in
  ``t_m`` and ``1/B_hbm``).

A table without some points takes them from the preset its ``points_from`` names (each
measurement stored once: :mod:`costgraph.training.kernel_points`).

``P`` is the preset's BF16 peak (:class:`costgraph.hardware.Hardware`). The
file format and every number's source: the header of ``kernels.toml`` and
docs/step-time.md. A ``COSTGRAPH_DATA`` folder may add a ``kernels.toml`` of
its own presets (never replacing a bundled one).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import sympy

from .. import datafiles
from ..choices import ATTENTION_KERNEL
from ..datafiles import Field, Kind, Schema
from ..errors import CostgraphValueError
from .kernel_points import KERNELS as ATTENTION_KERNELS, resolve as resolve_points

FILE = "kernels.toml"

#: Why an efficiency is at most 1: a fraction of the preset's peak, a kernel never runs faster than it
#: (fit_gemm, fit_attention fit e in (0, 1]).
_PEAK = "a kernel faster than the peak; a fraction 0 < e ≤ 1 of the preset's peak, kernel_table.fit_gemm, fit_attention"
_FP8_PEAK = "a kernel faster than the FP8 peak; a fraction 0 < e ≤ 1 of the preset's FP8 peak"

KIND = Kind("kernel table", (
    Field("description", "text"),
    Field("gemm_efficiency", "decimal", positive=True, maximum=1, above=_PEAK,
          doc="the fraction of the BF16 peak a large GEMM reaches"),
    Field("gemm_launch_ns", unit="ns", doc="fixed seconds of one GEMM call (launch, fill and drain), in ns"),
    Field("gemm_k0", unit="", doc="each output tile's fixed work, in multiply-adds along K"),
    Field("gemm_points", "list", required=False,
          doc="[M, N, K, measured FLOP/s] the GEMM parameters are fitted to (absent: points_from's)"),
    Field("gemm_source", "text"),
    Field("gemm_fp8_efficiency", "decimal", required=False, positive=True, maximum=1, above=_FP8_PEAK,
          doc="the same at the FP8 peak"),
    Field("gemm_fp8_launch_ns", unit="ns", required=False),
    Field("gemm_fp8_k0", unit="", required=False),
    Field("gemm_fp8_points", "list", required=False),
    Field("gemm_fp8_source", "text", required=False),
    Field("gemm_sustained_derate", "decimal", required=False, positive=True, maximum=1,
          above="a sustained rate faster than the table's; a factor 0 < d ≤ 1 on the saturated efficiency, "
                "kernel_table.fit_gemm_derate",
          doc="the sustained GEMM rate's factor on the saturated efficiency (fitted to gemm_sustained_points)"),
    Field("gemm_sustained_dtype", "text", required=False,
          doc="the GEMM fit (bf16 or fp8) gemm_sustained_points are compared with"),
    Field("gemm_sustained_points", "list", required=False,
          doc="[M, N, K, measured FLOP/s at the benchmark's count M·N·(2K − 1)] of a sustained GEMM benchmark"),
    Field("gemm_sustained_source", "text", required=False),
    Field("attention_forward_efficiency", "decimal", positive=True, maximum=1, above=_PEAK),
    Field("attention_forward_s0", unit="tokens"),
    Field("attention_forward_points", "list", required=False, doc="[key length S, measured FLOP/s]"),
    Field("attention_forward_source", "text"),
    Field("attention_backward_efficiency", "decimal", positive=True, maximum=1, above=_PEAK),
    Field("attention_backward_s0", unit="tokens"),
    Field("attention_backward_points", "list", required=False),
    Field("attention_backward_source", "text"),
    Field("attention_head_dim", unit="", positive=True, doc="the head dim of the attention measurements"),
    Field("attention_kernel", "text", required=False,
          doc="the kernel the attention_forward/backward curves measure (costgraph.choices.ATTENTION_KERNEL; "
              "default cudnn)"),
    *[Field(f"attention_{k}_{d}_{f}", t, unit=u, required=False, positive=(f == "efficiency"),
            maximum=1 if f == "efficiency" else None, above=_PEAK if f == "efficiency" else "",
            doc=f"the {d} curve of kernel {k} (as attention_{d}_{f})" if f == "efficiency" else "")
      for k in ATTENTION_KERNELS for d in ("forward", "backward")
      for f, t, u in (("efficiency", "decimal", ""), ("s0", "int", "tokens"), ("points", "list", ""),
                      ("source", "text", ""))],
    *[Field(f"attention_fp8_{d}_{f}", t, unit=u, required=False, positive=(f == "efficiency"),
            maximum=1 if f == "efficiency" else None, above=_FP8_PEAK if f == "efficiency" else "",
            doc=f"the {d} curve of the FP8 attention kernel, at the FP8 peak (as attention_{d}_{f})"
            if f == "efficiency" else "")
      for d in ("forward", "backward")
      for f, t, u in (("efficiency", "decimal", ""), ("s0", "int", "tokens"), ("points", "list", ""),
                      ("source", "text", ""))],
    Field("hbm_bandwidth", unit="B/s", positive=True, doc="achieved (measured) HBM bandwidth"),
    Field("memory_launch_ns", unit="ns", required=False,
          doc="fixed seconds of one memory-bound kernel, in ns (fitted with hbm_bandwidth to memory_points)"),
    Field("memory_points", "list", required=False, doc="[bytes moved, measured B/s] of memory-bound kernels"),
    Field("memory_source", "text", required=False),
    Field("points_from", "ref", required=False,
          doc="the preset whose measured points this table's parameters are fitted to where it gives none "
              "(costgraph.training.kernel_points)"),
    Field("sm_count", unit="", required=False, positive=True,
          doc="the device's streaming multiprocessors (userbuffers' SM margin, kernel_time.userbuffers_margin)"),
), together=(("memory_launch_ns", "memory_source"), ("gemm_fp8_efficiency", "gemm_fp8_launch_ns", "gemm_fp8_k0", "gemm_fp8_source"),
             ("gemm_sustained_derate", "gemm_sustained_dtype", "gemm_sustained_source"),
             *[tuple(f"attention_{k}_{d}_{f}" for d in ("forward", "backward")
                     for f in ("efficiency", "s0", "source")) for k in (*ATTENTION_KERNELS, "fp8")]))
# (a table's points go with their parameters too: kernel_points.resolve, where points_from may give them)
#: ``kernels.toml``: one table per hardware preset key; a ``COSTGRAPH_DATA`` folder may add tables.
SCHEMA = Schema(FILE, "costgraph.training", entries=KIND, user=True)


@dataclass(frozen=True)
class KernelTable:
    """One preset's kernel table (module docstring); numbers exact (``Fraction`` or ``int``)."""

    preset: str
    description: str
    gemm: dict                 # "bf16" (and "fp8" where measured) → (efficiency, launch ns, k0)
    gemm_points: dict          # "bf16"/"fp8" → ((M, N, K, FLOP/s), ...)
    attention: dict            # "forward"/"backward" → (efficiency, s0)
    attention_points: dict     # "forward"/"backward" → ((S, FLOP/s), ...)
    attention_head_dim: int
    hbm_bandwidth: int
    sources: dict
    #: the kernel of ``attention`` (:data:`costgraph.choices.ATTENTION_KERNEL`)
    attention_kernel: str = ATTENTION_KERNEL.auto
    #: every kernel's curves: kernel → {"forward"/"backward" → (efficiency, s0)} (``attention_kernel``'s included)
    attention_kernels: dict = None
    #: kernel → {"forward"/"backward" → ((S, FLOP/s), ...)}
    attention_kernel_points: dict = None
    #: the device's SMs (None: not given; no userbuffers SM margin then)
    sm_count: int | None = None
    #: the fixed time of one memory-bound kernel in ns (0: not measured; :func:`memory_seconds`)
    memory_launch_ns: int = 0
    #: ((bytes, measured B/s), ...) the memory-bound fit is fitted to (empty: none)
    memory_points: tuple = ()
    #: the FP8 attention kernel's curves at the FP8 peak, "forward"/"backward" → (efficiency, s0) (None: not measured)
    attention_fp8: dict | None = None
    #: "forward"/"backward" → ((S, FLOP/s), ...) of ``attention_fp8``
    attention_fp8_points: dict | None = None
    #: the sustained GEMM rate's factor on each GEMM fit's efficiency (None: not measured; :func:`rated`)
    gemm_sustained: object = None
    #: ``(dtype, ((M, N, K, FLOP/s at M·N·(2K − 1)), ...))`` the factor is fitted to (None: not measured)
    gemm_sustained_points: tuple | None = None

    def to_dict(self) -> dict:
        """The parameters and their sources (the points left out), for JSON."""
        return {"preset": self.preset,
                "gemm": {k: {"efficiency": float(e), "launch_ns": t0, "k0": k0} for k, (e, t0, k0) in self.gemm.items()},
                "attention": {k: {"efficiency": float(e), "s0": s0} for k, (e, s0) in self.attention.items()},
                "attention_kernel": self.attention_kernel,
                "attention_kernels": {name: {k: {"efficiency": float(e), "s0": s0} for k, (e, s0) in c.items()}
                                      for name, c in (self.attention_kernels or {}).items()},
                "attention_head_dim": self.attention_head_dim, "hbm_bandwidth": self.hbm_bandwidth,
                "memory_launch_ns": self.memory_launch_ns,
                "sources": dict(self.sources)}


def _points(held, width):
    """The rows of points ``held`` (the entry that holds them and their key: kernel_points.resolve), checked."""
    entry, key = held
    pts = entry[key]
    if not isinstance(pts, list) or not all(isinstance(p, list) and len(p) == width and
                                            all(isinstance(v, int) and v > 0 for v in p) for p in pts) or not pts:
        raise entry.error(f"{key} is not a list of [{', '.join(['positive integer'] * width)}] rows", key,
                          hint="the measured points the parameters are fitted to, e.g. " + (
                              "[[4096, 4096, 4096, 783328793548203]] ([M, N, K, FLOP/s])" if width == 4
                              else "[[4096, 579000000000000]] ([key length S, FLOP/s])"))
    return tuple(tuple(p) for p in pts)


def _table(entry, held: dict) -> KernelTable:
    """The table of ``entry``, its points where ``held`` says (its own, or a points_from table's)."""
    # (every efficiency is at most 1: KIND's maximum, refused by datafiles at FILE:LINE:COLUMN)
    att = {d: (entry[f"attention_{d}_efficiency"], entry[f"attention_{d}_s0"]) for d in ("forward", "backward")}
    pts = {d: _points(held[f"attention_{d}_points"], 2) for d in ("forward", "backward")}
    sources = {**entry.sources, **{k: entry[k] for k in ("gemm_source", "gemm_fp8_source", "attention_forward_source",
                                                         "attention_backward_source", "memory_source") if k in entry}}
    main = entry["attention_kernel"] if "attention_kernel" in entry else ATTENTION_KERNEL.auto
    if main not in ATTENTION_KERNELS:
        raise entry.error(f"attention_kernel {main!r} is no attention kernel", "attention_kernel",
                          hint=ATTENTION_KERNEL.hint())
    kernels, kpts = {main: att}, {main: pts}
    for k in ATTENTION_KERNELS:
        if f"attention_{k}_forward_efficiency" not in entry:
            continue
        if k == main:
            raise entry.error(f"attention_{k}_* repeat the curves of attention_kernel = {main!r}",
                              f"attention_{k}_forward_efficiency", hint="give a kernel's curves once")
        for d in ("forward", "backward"):
            sources[f"attention_{k}_{d}_source"] = entry[f"attention_{k}_{d}_source"]
        kernels[k] = {d: (entry[f"attention_{k}_{d}_efficiency"], entry[f"attention_{k}_{d}_s0"])
                      for d in ("forward", "backward")}
        kpts[k] = {d: _points(held[f"attention_{k}_{d}_points"], 2) for d in ("forward", "backward")}
    gemm, gpts = {}, {}
    for dtype, pre in (("bf16", "gemm"), ("fp8", "gemm_fp8")):
        if f"{pre}_efficiency" in entry:
            gemm[dtype] = (entry[f"{pre}_efficiency"], entry[f"{pre}_launch_ns"], entry[f"{pre}_k0"])
            gpts[dtype] = _points(held[f"{pre}_points"], 4)
    fp8 = fp8_pts = None
    if "attention_fp8_forward_efficiency" in entry:   # TE's FP8 dot-product attention (cuDNN), at the FP8 peak
        for d in ("forward", "backward"):
            sources[f"attention_fp8_{d}_source"] = entry[f"attention_fp8_{d}_source"]
        fp8 = {d: (entry[f"attention_fp8_{d}_efficiency"], entry[f"attention_fp8_{d}_s0"]) for d in ("forward", "backward")}
        fp8_pts = {d: _points(held[f"attention_fp8_{d}_points"], 2) for d in ("forward", "backward")}
    sustained = sustained_pts = None
    if "gemm_sustained_derate" in entry:   # the sustained GEMM rate (rated; fit_gemm_derate)
        dtype = entry["gemm_sustained_dtype"]
        if dtype not in gemm:
            raise entry.error(f"gemm_sustained_dtype {dtype!r} names no GEMM fit of this table", "gemm_sustained_dtype",
                              hint="bf16 (gemm_*) or fp8 (gemm_fp8_*, where the table has them)")
        sustained, sustained_pts = entry["gemm_sustained_derate"], (dtype, _points(held["gemm_sustained_points"], 4))
        sources["gemm_sustained_source"] = entry["gemm_sustained_source"]
    memory = ("memory_launch_ns" in entry and entry["memory_launch_ns"],
              _points(held["memory_points"], 2) if "memory_points" in held else ())
    return KernelTable(entry.name, entry["description"], gemm, gpts, att, pts, entry["attention_head_dim"],
                       entry["hbm_bandwidth"], sources, main, kernels, kpts,
                       entry["sm_count"] if "sm_count" in entry else None, int(memory[0] or 0), memory[1], fp8, fp8_pts,
                       sustained, sustained_pts)


#: the tables of the last file state read: ``(DataSet, tables)`` (a step time asks once per layout)
_READ: list = []


def tables() -> dict[str, KernelTable]:
    """Every kernel table by preset key (the bundled file and a ``COSTGRAPH_DATA`` one); read again when
    the file state changes (:func:`costgraph.datafiles.load` returns another data set)."""
    data = datafiles.load(SCHEMA)
    if not _READ or _READ[0][0] is not data:
        held = resolve_points(data.entries)
        _READ[:] = [(data, {name: _table(e, held[name]) for name, e in data.entries.items()})]
    return dict(_READ[0][1])


def kernel_table(hardware) -> KernelTable | None:
    """The kernel table of preset ``hardware`` (a :class:`~costgraph.hardware.Hardware` or None);
    None when its key has none (the caller falls back to the flat efficiency, saying so)."""
    if hardware is None:
        return None
    table = tables().get(hardware.key)
    peak = getattr(hardware, "memory_bandwidth", None)
    if table is not None and isinstance(peak, int) and table.hbm_bandwidth > peak:
        raise CostgraphValueError(
            f"kernels.toml [{table.preset}] hbm_bandwidth {table.hbm_bandwidth:,} B/s is above the preset's memory "
            f"bandwidth {peak:,} B/s", hint="an achieved (measured) bandwidth, at most the datasheet's")
    return table


# ---------------------------------------------------------------- the closed forms

def _gemm(table: KernelTable, dtype: str):
    e, t0, k0 = table.gemm[dtype if dtype in table.gemm else "bf16"]
    return sympy.Rational(e), sympy.Rational(t0, 10**9), sympy.Integer(k0)


def gemm_seconds(flops, k, peak, table: KernelTable, dtype: str = "bf16", streams=1) -> sympy.Expr:
    """Seconds of one GEMM call of ``flops`` FLOPs contracting over ``k`` at ``peak`` FLOP/s:
    ``t0 + F/(P·e)·(1 + k0/K)`` with the ``dtype`` fit (``fp8`` without FP8 points: the BF16 fit).
    ``streams``: the GEMMs of one group running concurrently on that many streams, whose fixed
    times ``t0`` overlap (``t0/streams`` a call; the FLOPs share the device: not divided)."""
    e, t0, k0 = _gemm(table, dtype)
    return t0 / streams + flops / (sympy.Integer(peak) * e) * (1 + k0 / k)


def rated(table: KernelTable, rate: str) -> KernelTable:
    """``table`` at GEMM rate ``rate`` (:data:`costgraph.choices.GEMM_RATE`): ``isolated``, as it is;
    ``sustained``, every GEMM fit's saturated efficiency ``e`` times the table's ``gemm_sustained_derate``
    ``d`` (``t0`` and ``k0`` kept: a sustained clock slows the tensor cores' throughput), i.e.
    ``seconds = t0 + F/(P·e·d)·(1 + k0/K)``. A table without a derate is returned as it is (the
    caller says so: :func:`sustained_note`)."""
    from dataclasses import replace

    from ..choices import GEMM_RATE

    if rate not in GEMM_RATE.values:
        raise CostgraphValueError(f"unknown {GEMM_RATE.what} {rate!r}", hint="--gemm-rate " + GEMM_RATE.hint())
    if rate != "sustained" or table.gemm_sustained is None:
        return table
    d = Fraction(table.gemm_sustained)
    return replace(table, gemm={k: (Fraction(e) * d, t0, k0) for k, (e, t0, k0) in table.gemm.items()})


def sustained_note(table: KernelTable, rate: str) -> str | None:
    """What ``--gemm-rate sustained`` did on ``table``: its derate and source, or that the table has none."""
    if rate != "sustained":
        return None
    if table.gemm_sustained is None:
        return (f"kernels.toml [{table.preset}] has no gemm_sustained_derate: its GEMM curves as measured "
                "(isolated)")
    return f"GEMM efficiencies × {float(table.gemm_sustained):.3g} (kernels.toml [{table.preset}] gemm_sustained_derate)"


def fit_gemm_derate(points, fit, peak, compute_bound=Fraction(9, 10)) -> Fraction:
    """The factor ``d`` on a GEMM fit's saturated efficiency fitted to a sustained benchmark's ``points``
    ``(M, N, K, FLOP/s)`` — FLOP/s at the benchmark's count ``M·N·(2K − 1)`` (superbench's cublaslt_gemm,
    ``cublaslt_gemm.cu`` ``run``: ``m·n·(2k − 1)/time``) — an exact rational.

    ``fit`` = ``(e, t0 ns, k0)`` (the table's stored parameters), ``peak`` the dtype's peak FLOP/s. Only the
    points the fit calls compute-bound enter: the fit's η at least ``compute_bound`` of its ``e`` (the factor
    scales the compute term only; the small shapes' fixed times differ from kernel to kernel). The model
    ``s_i(x) = t0 + c_i·x`` (``c_i = F_i/(P·e)·(1 + k0/K_i)``, ``F_i = 2·M·N·K``, ``x = 1/d``) is fitted by least
    squares on the relative error of each point's measured seconds ``s_i``:
    ``x = Σ (c_i/s_i)(1 − t0/s_i) / Σ (c_i/s_i)²``. Raises CostgraphValueError when no point is compute-bound."""
    e, t0, k0 = Fraction(fit[0]), Fraction(fit[1], 10**9), fit[2]
    num = den = Fraction(0)
    for m, n, k, rate in points:
        f = 2 * m * n * k
        c = Fraction(f) / (peak * e) * (1 + Fraction(k0, k))
        if Fraction(f) / (t0 + c) < compute_bound * e * peak:   # the fit's rate below compute_bound·e·P
            continue
        s = Fraction(m * n * (2 * k - 1), rate)
        num += c / s * (1 - t0 / s)
        den += (c / s) ** 2
    if den == 0:
        raise CostgraphValueError("no sustained GEMM point is compute-bound under the table's fit",
                                  hint=f"points where the fit reaches {float(compute_bound):.0%} of its efficiency")
    return den / num


def memory_seconds(moved, table: KernelTable, kernels=1) -> sympy.Expr:
    """Seconds of ``kernels`` memory-bound kernels moving ``moved`` bytes in all:
    ``kernels·t_m + moved/B_hbm`` (``t_m`` = ``memory_launch_ns``, 0 on a table without
    ``memory_points``; ``B_hbm`` = ``hbm_bandwidth``)."""
    return kernels * sympy.Rational(table.memory_launch_ns, 10**9) + moved / sympy.Integer(table.hbm_bandwidth)


def gemm_eta(m, n, k, peak, table: KernelTable, dtype: str = "bf16") -> sympy.Expr:
    """η(M, N, K) of one GEMM (module docstring): ``e·F·K / (F·(K + k0) + P·e·t0·K)``, ``F = 2MNK``."""
    f = 2 * m * n * k
    e, t0, k0 = _gemm(table, dtype)
    return e * f * k / (f * (k + k0) + sympy.Integer(peak) * e * t0 * k)


def attention_curves(table: KernelTable, kernel: str | None = None) -> dict:
    """``{"forward": (e, s0), "backward": (e, s0)}`` of attention kernel ``kernel``
    (:data:`costgraph.choices.ATTENTION_KERNEL`; None: the table's ``attention_kernel``). A kernel the
    table has no curves of is refused (exit status 2), naming the kernels it has."""
    if kernel is None or kernel == table.attention_kernel:
        return table.attention
    curves = (table.attention_kernels or {}).get(kernel)
    if curves is None:
        have = ", ".join(sorted((table.attention_kernels or {table.attention_kernel: None})))
        raise CostgraphValueError(
            f"kernels.toml [{table.preset}] has no curves of the attention kernel {kernel!r} "
            f"({ATTENTION_KERNEL.meaning(kernel)}); it has: {have}",
            hint=f"--attention-kernel {table.attention_kernel} (the preset's measured kernel), or add "
                 f"attention_{kernel}_forward_*/backward_* to a COSTGRAPH_DATA kernels.toml")
    return curves


def attention_eta(s, direction: str, table: KernelTable, kernel: str | None = None) -> sympy.Expr:
    """η(S) of the flash kernel's ``direction`` (``forward`` or ``backward``): ``e·S/(S + s0)``, with the
    curve of attention kernel ``kernel`` (:func:`attention_curves`; None: the table's own)."""
    e, s0 = attention_curves(table, kernel)[direction]
    return sympy.Rational(e) * s / (s + s0)


# ---------------------------------------------------------------- the fits

def fit_gemm(points, peak) -> tuple[float, float, float]:
    """``(e, t0 in ns, k0)`` of ``seconds = t0 + F/(P·e)·(1 + k0/K)`` fitted to ``points``
    ``(M, N, K, FLOP/s)`` by linear least squares on the relative error of each point's seconds."""
    import numpy as np

    a = np.array(points, dtype=np.float64)
    f = 2 * a[:, 0] * a[:, 1] * a[:, 2]
    t = f / a[:, 3]
    cols = np.stack([np.ones_like(t), f / float(peak), f / float(peak) / a[:, 2]], axis=1)
    x = np.linalg.lstsq(cols / t[:, None], np.ones_like(t), rcond=None)[0]
    return float(1 / x[1]), float(x[0] * 1e9), float(x[2] / x[1])


def fit_memory(points) -> tuple[float, float]:
    """``(B_hbm in B/s, t_m in ns)`` of ``seconds = t_m + bytes/B_hbm`` fitted to ``points``
    ``(bytes, measured B/s)`` by linear least squares on the relative error of each point's seconds."""
    import numpy as np

    a = np.array(points, dtype=np.float64)
    t = a[:, 0] / a[:, 1]
    x = np.linalg.lstsq(np.stack([np.ones_like(t), a[:, 0]], axis=1) / t[:, None], np.ones_like(t), rcond=None)[0]
    return float(1 / x[1]), float(x[0] * 1e9)


def fit_attention(points, peak) -> tuple[float, float]:
    """``(e, s0)`` of ``η(S) = e·S/(S + s0)`` fitted to ``points`` ``(S, FLOP/s)``."""
    import numpy as np

    a = np.array(points, dtype=np.float64)
    s, eta = a[:, 0], a[:, 1] / float(peak)
    x = np.linalg.lstsq(np.stack([eta, eta / s], axis=1), np.ones_like(s), rcond=None)[0]
    return float(1 / x[0]), float(x[1] / x[0])
