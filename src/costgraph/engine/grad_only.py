"""What a node keeps only for its weights' gradients.

A weight that is not trained (``requires_grad = False``) needs no gradient, and PyTorch's
autograd then keeps no tensor that only that gradient reads (``mm(x, Wᵀ)`` with ``W`` frozen
saves ``Wᵀ`` only): a linear's input ``x`` (``dW = dYᵀ·x``), an embedding's token ids, the
``pytorch`` profile's RMSNorm ``normalized`` ``x̂`` (only ``dγ`` reads it). Read by the builder
(a call with ``frozen = true``) and by LoRA's frozen base (:mod:`costgraph.training.lora`).
"""

from __future__ import annotations


def weight_grad_only(kind: str, path: str, inputs: tuple[str, ...]) -> frozenset[str]:
    """Tensor ids node ``path`` of operator ``kind`` (its input tensor ids ``inputs``) keeps
    only for the gradients of the weights it owns or reads, as the operator declares them (roles
    ``weight_grad_input``: its first input; ``weight_grad_normalized``: its ``normalized``);
    empty for other operators."""
    from ..ops.registry import has_role

    if has_role(kind, "weight_grad_input") and inputs:
        return frozenset({inputs[0]})
    if has_role(kind, "weight_grad_normalized"):
        return frozenset({f"{path}/normalized"})
    return frozenset()
