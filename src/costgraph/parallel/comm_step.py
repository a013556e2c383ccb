"""What every collective kind of :func:`costgraph.parallel.communication.communication` reads.

:class:`_Step`: the graph, the filled layout, its placement, the device's stage, the precision policy's
gradient and weight bytes, the activations' precision and the options, with the counts each kind asks
of them (bytes per element of an activation, calls of a node per step on the stage, elements a device
holds of some activations). The conventions (per device per step, ``m`` micro-batches, the forward run
twice inside the layers under full recomputation) are the module docstring of
:mod:`costgraph.parallel.communication`.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..engine.graph import CostGraph
from ..engine.precision import Precision
from ..engine.symbols import as_expr
from .layout import Layout
from .placement import Placement, StageView

Expr = sympy.Expr
ONE = sympy.Integer(1)
ZERO = sympy.Integer(0)


def _trivial(x) -> bool:
    """A degree known to be 1 (no communication along it)."""
    return as_expr(x) == 1


@dataclass
class _Step:
    """What every kind reads: the graph, the filled layout, its placement,
    the device's stage, the policy's gradient and weight bytes, the
    activations' precision and the options."""

    cg: CostGraph
    L: Layout
    pl: Placement
    stage: StageView
    grad_bytes: Expr
    weight_bytes: Expr
    prec: Precision
    sp_backward_gather: bool

    def act_bytes(self, tid: str) -> Expr:
        """Bytes per element of activation ``tid``."""
        return sympy.Integer(self.prec.bytes(self.cg.tensors[tid].role))

    def node_calls(self, path: str, forward: bool, op: str | None = None, kind: str = "tp") -> Expr:
        """Calls per step of node ``path`` on this stage (``m`` micro-batches); a forward collective ``op`` of
        parallelism ``kind`` inside the layers once more for the share the recompute policy replays
        (:func:`~costgraph.engine.recompute.collective_rerun`: all of it under full recomputation)."""
        f = self.stage.node_factor(path)
        if f == 0:
            return ZERO
        calls = self.cg.nodes[path]["active"] * f * self.pl.degree("m")
        if forward:
            calls *= 1 + self.rerun(path, op, kind)
        return calls

    def rerun(self, path: str, op: str | None, kind: str) -> Expr:
        """The share of the forward collective ``op`` of ``kind`` at ``path`` run again in the backward (0
        outside the layers)."""
        if self.L.recompute in ("none", "selective", "selective-korthikanti") or not self.stage.in_layer(path):
            return ZERO
        from ..engine.recompute import collective_rerun

        return collective_rerun(self.cg, self.L, kind, op or "all-gather")

    def elements(self, tids) -> Expr:
        """Elements a device holds of the activations ``tids`` (TP/SP and CP splits)."""
        return sympy.Add(*[self.cg.tensors[x].numel / self.pl.tensor_divisor(x) / self.pl.sequence_divisor(x)
                           for x in tids])
