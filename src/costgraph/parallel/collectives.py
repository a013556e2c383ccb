"""The collectives of parallel training: what one call sends, and how many.

:class:`Transfer` is one kind of call (an operation over a group of devices
on a buffer), :class:`Collective` the calls of one kind of parallelism;
:func:`ring_factor` and :func:`latency_steps` are the ring algorithms'
bytes and latency terms (Patarasuk & Yuan 2009; NCCL): with ``S`` the bytes
of the whole buffer of one call and ``n`` devices in the group, all-reduce
sends ``2(n−1)/n · S`` in ``2(n−1)`` steps, all-gather, reduce-scatter and
all-to-all ``(n−1)/n · S`` in ``n−1``, send/recv ``S`` in one. See
:mod:`costgraph.parallel.communication` for which collectives a layout has.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.symbols import as_expr

Expr = sympy.Expr
ONE = sympy.Integer(1)

OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send/recv")


def ring_factor(op: str, n) -> Expr:
    """Bytes a device sends per byte of the call's whole buffer (module docstring)."""
    n = as_expr(n)
    if op == "all-reduce":
        return 2 * (n - 1) / n
    if op in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    if op == "send/recv":
        return ONE
    raise ValueError(op)


def latency_steps(op: str, n) -> Expr:
    """Latency terms per call of a ring algorithm over ``n`` devices."""
    n = as_expr(n)
    if op == "all-reduce":
        return 2 * (n - 1)
    if op in ("all-gather", "reduce-scatter", "all-to-all"):
        return n - 1
    if op == "send/recv":
        return ONE
    raise ValueError(op)


@dataclass(frozen=True)
class Transfer:
    """One kind of call: ``calls`` per step of ``op`` over ``group`` devices
    spaced ``stride`` ranks apart (placement), each on a whole buffer of
    ``elements`` × ``dtype_bytes`` bytes; ``what`` says which tensor and when
    (``forward``, ``backward``, ``step``). ``factors``: the group's
    ``(size, stride)`` factors when its ranks are not one arithmetic
    progression (:mod:`costgraph.parallel.ranks`); ``copies``: of an
    expert-parallel dispatch or combine, the copies ``k`` of each token in
    the buffer (device-limited routing bounds the ones that leave a domain)."""

    what: str
    op: str
    group: Expr
    stride: Expr
    elements: Expr
    dtype_bytes: Expr
    calls: Expr
    factors: tuple = field(default=(), compare=False)
    copies: Expr | None = None

    @property
    def size(self) -> Expr:
        """Bytes of the whole buffer of one call (``S``)."""
        return self.elements * self.dtype_bytes

    @property
    def bytes(self) -> Expr:
        """Bytes one device sends per step: calls × ring factor × S."""
        return self.calls * ring_factor(self.op, self.group) * self.size


@dataclass(frozen=True)
class Collective:
    """The communication of one kind per device per step: its ``parts``
    (:class:`Transfer`), with ``bytes`` (sent, summed), ``calls`` (summed),
    ``op`` (the operation, or several joined by ``+``) and ``group`` (the
    first part's group size)."""

    kind: str
    parts: tuple[Transfer, ...]

    @property
    def bytes(self) -> Expr:
        return sympy.Add(*[p.bytes for p in self.parts])

    @property
    def calls(self) -> Expr:
        return sympy.Add(*[p.calls for p in self.parts])

    @property
    def op(self) -> str:
        seen = []
        for p in self.parts:
            if p.op not in seen:
                seen.append(p.op)
        return " + ".join(seen)

    @property
    def group(self) -> Expr:
        return self.parts[0].group if self.parts else ONE

    def elements(self) -> Expr:
        """Elements sent per step (bytes without the dtype): the ZeRO paper's unit."""
        return sympy.Add(*[p.calls * ring_factor(p.op, p.group) * p.elements for p in self.parts])
