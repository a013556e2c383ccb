"""What one inference step costs, per operator and in all: the records :class:`Step`,
:class:`OpCost`, :class:`AllReduce` and :class:`Collective` that
:class:`costgraph.inference.phases.Inference` builds and the roofline
(:func:`costgraph.inference.roofline.step_seconds`) times."""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.graph import ZERO


@dataclass
class OpCost:
    """One operator node's share of a step (all its instances, per device)."""

    path: str
    kind: str
    flops: sympy.Expr = ZERO
    weight_bytes: sympy.Expr = ZERO
    kv_bytes: sympy.Expr = ZERO
    activation_bytes: sympy.Expr = ZERO


@dataclass
class AllReduce:
    """``calls`` all-reduces over ``t`` devices of ``bytes`` each: a row-parallel or vocabulary-parallel
    output, or a norm split by heads (its fp32 sum of squares per token: ``path`` a norm's)."""

    path: str
    calls: sympy.Expr
    bytes: sympy.Expr


@dataclass
class Collective:
    """``calls`` collectives ``kind`` (``all-reduce``, ``all-gather``,
    ``reduce-scatter``, ``all-to-all``, ``send/recv``) over ``group`` devices
    of ``bytes`` each (the whole buffer), per device and step (parallel serving:
    :mod:`costgraph.inference.parallel`)."""

    kind: str
    path: str
    calls: sympy.Expr
    bytes: sympy.Expr
    group: int
    #: the link's (latency s, bandwidth B/s) when known (parallel/placement.py::link), else the machine's
    link: tuple | None = None
    #: seconds of latency per call when its owner gives them (an all-to-all: NCCL's p2p rounds,
    #: parallel/ep_time.py::alltoall_latency), else the ring's latency steps × the link's latency
    latency: object = None


@dataclass
class Step:
    """One inference step: ``q`` new tokens per sequence against ``n`` cached."""

    q: sympy.Expr
    n: sympy.Expr
    flops: sympy.Expr
    weight_bytes: sympy.Expr
    kv_read: sympy.Expr
    kv_written: sympy.Expr
    activation_bytes: sympy.Expr
    with_activations: bool
    ops: list[OpCost] = field(default_factory=list)
    allreduce: list[AllReduce] = field(default_factory=list)
    #: parallel serving's collectives (each with its group) and the TP overlap (none, full)
    collectives: list[Collective] = field(default_factory=list)
    overlap: str = "none"

    @property
    def bytes(self) -> sympy.Expr:
        """HBM bytes moved: weights + KV read + KV written (+ activations when included)."""
        extra = self.activation_bytes if self.with_activations else ZERO
        return self.weight_bytes + self.kv_read + self.kv_written + extra

    @property
    def intensity(self) -> sympy.Expr:
        """Arithmetic intensity, FLOPs per byte moved."""
        return sympy.cancel(self.flops / self.bytes)
