"""Named counting conventions.

FLOP conventions (every count uses 2 FLOPs per multiply-add):

``matmul`` (default)
    Only matrix products: linear layers, attention's QKᵀ and scores·V, the
    output head. The convention of Megatron-LM (Narayanan et al. 2021 §5.1),
    PaLM (Chowdhery et al. 2022, App. B) and PyTorch's ``FlopCounterMode``;
    it gives GPT's ``24bsh² + 4bs²h`` per layer.
``all``
    Also norms, softmax, activations, dropout, bias adds and elementwise ops,
    at the per-element counts of :data:`costgraph.ops.elementwise.PER_ELEMENT`.

Attention is counted over the full ``s × s`` square (no causal halving), as
PaLM, Megatron-LM and ``FlopCounterMode`` do.
"""

from __future__ import annotations

from ..errors import CostgraphValueError

FLOP_CONVENTIONS: dict[str, str] = {
    "matmul": "matrix products only, 2 FLOPs per multiply-add (Megatron-LM, PaLM, FlopCounterMode)",
    "all": "matrix products plus norms, softmax, activations and elementwise ops (per-element table)",
}


def check_convention(name: str) -> str:
    """Return ``name`` if it is a FLOP convention, else raise CostgraphValueError."""
    if name not in FLOP_CONVENTIONS:
        raise CostgraphValueError(f"unknown FLOP convention {name!r}",
                                  hint="choose one of: " + ", ".join(FLOP_CONVENTIONS))
    return name
