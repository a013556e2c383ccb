"""What the operator tests read of a tiny model (tests/ops/test_vision_ops.py, tests/ops/test_conv_stage_ops.py):
its costs at concrete sizes, the shape of its output, and a row of expected costs."""

from __future__ import annotations

import sympy

#: the quantities an operator test compares, in this order
QUANTITIES = ("params", "flops_forward", "flops_backward_input", "flops_backward_weight", "activation_bytes")


def costs_of(m, convention: str, sizes: dict) -> dict:
    """``m``'s whole-model :data:`QUANTITIES` under ``convention`` at ``sizes`` (dim name → int)."""
    got = m.costs("model", convention=convention).evaluate(**sizes)
    return {q: got[q] for q in QUANTITIES}


def out_shape_of(m, sizes: dict) -> tuple:
    """The shape of ``m``'s first output at ``sizes``, as ints."""
    out = m.graph.tensors[m.graph.outputs[0]]
    subs = {sympy.Symbol(k, positive=True, integer=True): v for k, v in sizes.items()}
    return tuple(int(sympy.sympify(d).xreplace(subs)) for d in out.shape)


def row(params=0, fwd=0, bi=0, bw=0, act=0) -> dict:
    """Expected :data:`QUANTITIES` (0 where not given)."""
    return dict(zip(QUANTITIES, (params, fwd, bi, bw, act)))
