"""Overlap contention: the compute a hidden collective slows (issue 27 item 4).

:mod:`costgraph.training.overlap` splits each collective kind's seconds into an exposed part, added to the step,
and a hidden part that runs beside the computation. A hidden collective is not free: its kernels hold SMs (NCCL
launches one thread block per channel; DeepEP and Transformer Engine's userbuffers a set number of SMs) and HBM
bandwidth while they run, so the compute beside them runs slower (a GEMM sized to one wave of the device's SMs is
pushed into a second: NVIDIA developer forum 337991, an H100 GEMM beside a 24-block ncclAllGather took nearly
twice as long). The convention ``layout.overlap_contention`` (:data:`costgraph.choices.OVERLAP_CONTENTION`)
names how much; each kind's **share** ``σ`` is the seconds of compute lost per hidden second:

* ``sm-share`` (default): ``σ = n/N``, the collective's kernels holding ``n`` of the device's ``N`` SMs while
  they run, the compute running on the other ``N − n`` (``n`` and ``N`` per preset in ``training/contention.toml``:
  NCCL's thread blocks for every kind NCCL runs, DeepEP's SMs for the EP all-to-all under ``--ep-dispatcher
  deepep``, userbuffers' SMs for TP);
* ``measured``: ``σ = s/(1 + s)``, the compute beside a collective taking ``s`` longer than alone
  (``measured_slowdown``: arXiv 2507.03114's average over its kernels) — ``H`` hidden seconds hold ``H/(1 + s)``
  seconds of the compute's own work, the rest, ``H·s/(1 + s)``, is done later;
* ``none``: ``σ = 0`` (a hidden collective costs nothing: the step before this convention).

The step adds ``contention = Σ_kinds σ_k · hidden_k`` (:func:`slowed`),
``hidden_k = seconds_k − exposed_k`` of the overlap rules. TP under the per-kernel time model takes ``σ = 0``:
that model already runs the TP-overlapped GEMMs on ``N − 16`` SMs
(:func:`costgraph.training.kernel_time.userbuffers_margin`). First order: the slower compute does not widen the
window the rules hide the collective in, and kinds hidden behind the same compute add their shares (each runs
on its own stream, as the overlap rules take them).

A preset without an entry counts no contention, said, never a silent 0 (:func:`contention_warnings`: train's
warnings and JSON, plan's warnings; train's step lines too, :func:`costgraph.export.training_report._contention_line`);
``measured`` reads the entry's slowdown too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sympy

from .. import datafiles
from ..choices import OVERLAP_CONTENTION
from ..data_schema import Field, Kind, Schema
from ..errors import CostgraphValueError

FILE = "contention.toml"
KIND = Kind("contention entry", (
    Field("description", "text"),
    Field("sm_count", unit="", positive=True, doc="the device's streaming multiprocessors N"),
    Field("nccl_sms", unit="", positive=True, doc="thread blocks an NCCL collective holds while it runs"),
    Field("deepep_sms", unit="", positive=True, doc="SMs DeepEP's dispatch and combine kernels hold"),
    Field("userbuffers_sms", unit="", positive=True, doc="SMs Transformer Engine's userbuffers TP overlap holds"),
    Field("measured_slowdown", "decimal", doc="the compute's slowdown beside a collective, measured (s)"),
))
#: ``contention.toml``: one entry per hardware preset key; a ``COSTGRAPH_DATA`` folder may add entries.
SCHEMA = Schema(FILE, "costgraph.training", entries=KIND, user=True)

@dataclass(frozen=True)
class Contention:
    """One preset's entry of ``contention.toml``: ``preset`` (its key), ``sm_count`` (N), ``nccl_sms``,
    ``deepep_sms``, ``userbuffers_sms`` (n of each kernel family), ``measured_slowdown`` (s, a Fraction)."""

    preset: str
    sm_count: int
    nccl_sms: int
    deepep_sms: int
    userbuffers_sms: int
    measured_slowdown: object

    def sms(self, kind: str, layout) -> int:
        """The SMs kind ``kind``'s kernels hold under ``layout`` (module docstring)."""
        if kind == "tp":
            return self.userbuffers_sms
        if kind == "ep" and layout.ep_dispatcher == "deepep":
            return self.deepep_sms
        return self.nccl_sms


def entries() -> dict:
    """Every preset's :class:`Contention` by key (the bundled file and a ``COSTGRAPH_DATA`` one)."""
    data = datafiles.load(SCHEMA)
    out = {}
    for name, e in data.entries.items():
        for k in ("nccl_sms", "deepep_sms", "userbuffers_sms"):
            if e[k] >= e["sm_count"]:
                raise e.error(f"{k} is not below sm_count", k, hint="the SMs a collective holds, fewer than the device's")
        out[name] = Contention(name, e["sm_count"], e["nccl_sms"], e["deepep_sms"], e["userbuffers_sms"],
                               sympy.Rational(e["measured_slowdown"]))
    return out


def slowed(ov, maximum) -> sympy.Expr:
    """``Σ σ_k · (seconds_k − exposed_k)`` over the kinds of ``ov`` (a :class:`costgraph.training.overlap.Overlaps`):
    the compute seconds the hidden collectives slow (module docstring); ``maximum`` as its ``exposed`` takes it
    (``smax``, ``numpy.maximum`` over the planner's arrays, Python's ``max``). A kind without contention (its share
    SymPy's 0) adds nothing."""
    out = None
    for o in ov.kinds.values():
        if o.share is not sympy.S.Zero:
            x = o.share * (o.seconds - o.exposed(ov.forward, ov.backward, maximum))
            out = x if out is None else out + x
    return sympy.S.Zero if out is None else out


def contention_of(hardware) -> Contention | None:
    """The entry of preset ``hardware`` (a :class:`~costgraph.hardware.Hardware` or None); None without one."""
    return None if hardware is None else entries().get(hardware.key)


def contention_warnings(hardware, convention: str) -> list[str]:
    """What ``--overlap-contention`` ``convention`` assumes on preset ``hardware`` (a
    :class:`~costgraph.hardware.Hardware` or None) without an entry in :data:`FILE`: nothing counted, said in one
    warning (train's and plan's ``warnings``, its JSON and the API's); ``[]`` with an entry, without a preset, or
    under ``none``."""
    if hardware is None or convention == "none" or contention_of(hardware) is not None:
        return []
    return [f"--overlap-contention {convention}: no {FILE} entry for {hardware.key}: none counted (a hidden "
            f"collective slows no compute); a COSTGRAPH_DATA {FILE} may add one"]


def noted(rate, hardware, convention: str):
    """``rate`` (a :class:`costgraph.training.steptime.Rate`) with :func:`contention_warnings` added to its
    ``notes`` (what the step time assumed: train's warnings, which fit, printing no time, leaves out) where it times
    the compute (``covers = "compute"``: a step rate has no contention); ``rate`` itself where there is nothing to
    say."""
    said = contention_warnings(hardware, convention) if rate.covers == "compute" else []
    return replace(rate, notes=tuple(rate.notes) + tuple(said)) if said else rate


def share(kind: str, layout, hardware, per_kernel: bool) -> sympy.Expr:
    """``σ``, the seconds of compute lost per hidden second of kind ``kind`` (module docstring) under
    ``layout.overlap_contention``; ``per_kernel``: the per-kernel time model (TP's userbuffers SMs already counted
    there: 0). 0 without an entry for the preset.

    Raises
    ------
    CostgraphValueError
        An unknown convention (naming ``--overlap-contention``)."""
    conv = layout.overlap_contention
    if conv not in OVERLAP_CONTENTION.values:
        raise CostgraphValueError(f"unknown {OVERLAP_CONTENTION.what} {conv!r}",
                                  hint="--overlap-contention " + OVERLAP_CONTENTION.hint())
    entry = contention_of(hardware)
    if conv == "none" or entry is None or (kind == "tp" and per_kernel):
        return sympy.Integer(0)
    if conv == "measured":
        s = entry.measured_slowdown
        return s / (1 + s)
    return sympy.Rational(entry.sms(kind, layout), entry.sm_count)
