"""Per-preset kernel tables of the per-kernel step-time model (``training/kernels.toml``).

A :class:`KernelTable` holds, for one hardware preset, the measured kernel-level
points (GEMM FLOP/s per shape; flash-attention FLOP/s per sequence length,
forward and backward) with their sources, and the parameters fitted to them:

* **GEMM** (one call of ``F = 2·M·N·K`` FLOPs): ``seconds = F/(P·e) + t0`` with
  ``e`` = ``gemm_efficiency`` and ``t0`` = ``gemm_launch_ns``, i.e. the
  efficiency :func:`gemm_eta` ``η(M, N, K) = e·2MNK/(2MNK + P·e·t0)`` — a
  SymPy closed form in the per-device shape, saturating at ``e`` for large
  GEMMs. Fitted by :func:`fit_gemm` (linear least squares on the relative error
  of each point's seconds).
* **Attention** (a fused flash kernel, key length ``S`` per call):
  :func:`attention_eta` ``η(S) = e·S/(S + s0)``, forward and backward apart,
  fitted by :func:`fit_attention` (least squares on ``1/η = 1/e + (s0/e)/S``,
  weighted by the measured ``η``).
* **Memory-bound operators**: an achieved HBM bandwidth ``hbm_bandwidth`` (B/s).

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
from ..datafiles import Field, Kind, Schema

FILE = "kernels.toml"

KIND = Kind("kernel table", (
    Field("description", "text"),
    Field("gemm_efficiency", "decimal", positive=True, doc="the fraction of the BF16 peak a large GEMM reaches"),
    Field("gemm_launch_ns", unit="ns", doc="fixed seconds of one GEMM call (launch, fill and drain), in ns"),
    Field("gemm_points", "list", doc="[M, N, K, measured FLOP/s] the GEMM parameters are fitted to"),
    Field("gemm_source", "text"),
    Field("attention_forward_efficiency", "decimal", positive=True),
    Field("attention_forward_s0", unit="tokens"),
    Field("attention_forward_points", "list", doc="[key length S, measured FLOP/s]"),
    Field("attention_forward_source", "text"),
    Field("attention_backward_efficiency", "decimal", positive=True),
    Field("attention_backward_s0", unit="tokens"),
    Field("attention_backward_points", "list"),
    Field("attention_backward_source", "text"),
    Field("attention_head_dim", unit="", positive=True, doc="the head dim of the attention measurements"),
    Field("hbm_bandwidth", unit="B/s", positive=True, doc="achieved (measured) HBM bandwidth"),
))
#: ``kernels.toml``: one table per hardware preset key; a ``COSTGRAPH_DATA`` folder may add tables.
SCHEMA = Schema(FILE, "costgraph.training", entries=KIND, user=True)


@dataclass(frozen=True)
class KernelTable:
    """One preset's kernel table (module docstring); numbers exact (``Fraction`` or ``int``)."""

    preset: str
    description: str
    gemm_efficiency: Fraction
    gemm_launch_ns: int
    gemm_points: tuple
    attention: dict            # "forward"/"backward" → (efficiency, s0)
    attention_points: dict     # "forward"/"backward" → ((S, FLOP/s), ...)
    attention_head_dim: int
    hbm_bandwidth: int
    sources: dict

    def to_dict(self) -> dict:
        """The parameters and their sources (the points left out), for JSON."""
        return {"preset": self.preset, "gemm_efficiency": float(self.gemm_efficiency),
                "gemm_launch_ns": self.gemm_launch_ns,
                "attention": {k: {"efficiency": float(e), "s0": s0} for k, (e, s0) in self.attention.items()},
                "attention_head_dim": self.attention_head_dim, "hbm_bandwidth": self.hbm_bandwidth,
                "sources": dict(self.sources)}


def _points(entry, key, width):
    pts = entry[key]
    if not isinstance(pts, list) or not all(isinstance(p, list) and len(p) == width and
                                            all(isinstance(v, int) and v > 0 for v in p) for p in pts) or not pts:
        raise entry.error(f"{key} is not a list of [{', '.join(['positive integer'] * width)}] rows", key)
    return tuple(tuple(p) for p in pts)


def _table(entry) -> KernelTable:
    att = {d: (entry[f"attention_{d}_efficiency"], entry[f"attention_{d}_s0"]) for d in ("forward", "backward")}
    pts = {d: _points(entry, f"attention_{d}_points", 2) for d in ("forward", "backward")}
    sources = {**entry.sources, **{k: entry[k] for k in ("gemm_source", "attention_forward_source",
                                                         "attention_backward_source")}}
    return KernelTable(entry.name, entry["description"], entry["gemm_efficiency"], entry["gemm_launch_ns"],
                       _points(entry, "gemm_points", 4), att, pts, entry["attention_head_dim"],
                       entry["hbm_bandwidth"], sources)


def tables() -> dict[str, KernelTable]:
    """Every kernel table by preset key (the bundled file and a ``COSTGRAPH_DATA`` one)."""
    return {name: _table(e) for name, e in datafiles.load(SCHEMA).entries.items()}


def kernel_table(hardware) -> KernelTable | None:
    """The kernel table of preset ``hardware`` (a :class:`~costgraph.hardware.Hardware` or None);
    None when its key has none (the caller falls back to the flat efficiency, saying so)."""
    if hardware is None:
        return None
    return tables().get(hardware.key)


# ---------------------------------------------------------------- the closed forms

def gemm_seconds(flops, peak, table: KernelTable) -> sympy.Expr:
    """Seconds of one GEMM call of ``flops`` FLOPs at ``peak`` FLOP/s: ``F/(P·e) + t0``."""
    e = sympy.Rational(table.gemm_efficiency)
    return flops / (sympy.Integer(peak) * e) + sympy.Rational(table.gemm_launch_ns, 10**9)


def gemm_eta(m, n, k, peak, table: KernelTable) -> sympy.Expr:
    """η(M, N, K) of one GEMM (module docstring): ``e·2MNK / (2MNK + P·e·t0)``."""
    f = 2 * m * n * k
    e = sympy.Rational(table.gemm_efficiency)
    return e * f / (f + sympy.Integer(peak) * e * sympy.Rational(table.gemm_launch_ns, 10**9))


def attention_eta(s, direction: str, table: KernelTable) -> sympy.Expr:
    """η(S) of the flash kernel's ``direction`` (``forward`` or ``backward``): ``e·S/(S + s0)``."""
    e, s0 = table.attention[direction]
    return sympy.Rational(e) * s / (s + s0)


# ---------------------------------------------------------------- the fits

def fit_gemm(points, peak) -> tuple[float, float]:
    """``(e, t0 in ns)`` of ``seconds = F/(P·e) + t0`` fitted to ``points`` ``(M, N, K, FLOP/s)``
    by linear least squares on the relative error of each point's seconds."""
    import numpy as np

    a = np.array(points, dtype=np.float64)
    f = 2 * a[:, 0] * a[:, 1] * a[:, 2]
    t = f / a[:, 3]
    x = np.linalg.lstsq(np.stack([np.ones_like(t), f / float(peak)], axis=1) / t[:, None], np.ones_like(t),
                        rcond=None)[0]
    return float(1 / x[1]), float(x[0] * 1e9)


def fit_attention(points, peak) -> tuple[float, float]:
    """``(e, s0)`` of ``η(S) = e·S/(S + s0)`` fitted to ``points`` ``(S, FLOP/s)``."""
    import numpy as np

    a = np.array(points, dtype=np.float64)
    s, eta = a[:, 0], a[:, 1] / float(peak)
    x = np.linalg.lstsq(np.stack([eta, eta / s], axis=1), np.ones_like(s), rcond=None)[0]
    return float(1 / x[0]), float(x[1] / x[0])
