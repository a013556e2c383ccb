"""Recognise a norm with a gate of its own (A.X-K2's ``AXK2GatedRMSNorm``, transformers 5.24 modeling_axk2.py: an
RMSNorm ``norm`` [H], then ``y · sigmoid(mlp(y))`` in fp32, ``mlp`` an ``AXK2GateMLP``: ``fc1`` H → r, SiLU, ``fc2``
r → H, no biases; Megatron-LM's ``GatedNormWrapper``) as the draft's ``gated_rmsnorm`` (:data:`GATED_NORM_BLOCKS`).

A layer reads such a module where it reads a norm (its input norm, its MLP's): :func:`as_norm` gives the writer a
norm-like :class:`~costgraph.drafting.facts.Module` whose call text is the block's (``attrs["norm_text"]``, which
:func:`costgraph.drafting.blocks.norm_call` writes with the norm's argument), or None.
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import _linear, activation, is_norm
from .facts import Module


def as_norm(m: Module, d) -> Module | None:
    """``m`` as a norm of the draft's ``gated_rmsnorm`` (sized by ``d``), or None where it is not A.X-K2's gated
    RMSNorm."""
    norm, mlp = m.child("norm"), m.child("mlp")
    if norm is None or mlp is None or m.params or len(m.children) != 2 or not is_norm(norm) \
            or "rms" not in norm.cls.lower() or set(norm.params) != {"weight"} or mlp.params \
            or activation(mlp) != "silu" or {c.name for c in mlp.children if c.param_count()} != {"fc1", "fc2"}:
        return None
    (hidden,) = norm.params["weight"]
    fc1, fc2 = _linear(mlp.child("fc1")), _linear(mlp.child("fc2"))
    if fc1 is None or fc2 is None or fc1[0] != hidden or fc1[2] or fc2 != (fc1[1], hidden, False):
        return None
    d.blocks.add("gated_rmsnorm")
    text = f"gated_rmsnorm({{arg}}, {d.size(fc1[1], 'gate rank')}, name = {m.name})"
    return replace(m, cls="GatedRMSNorm", params={}, children=[], attrs={**m.attrs, "norm_text": text})


#: the blocks a draft defines itself when it uses them
GATED_NORM_BLOCKS = {"gated_rmsnorm": """# A.X-K2's gated RMSNorm (transformers 5.24 modeling_axk2.py AXK2GatedRMSNorm; Megatron-LM's GatedNormWrapper):
# y = RMSNorm(x), then y * sigmoid(fc2(silu(fc1(y)))) in fp32, a gate MLP of rank `rank` without biases.
block gated_rmsnorm(x[B, S, H], rank) {
  y = rmsnorm(x, name = norm)
  return y * sigmoid(linear(silu(linear(y, rank, bias = false, name = fc1)), H, bias = false, name = fc2))
}"""}
