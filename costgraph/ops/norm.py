"""Normalisations: ``layernorm`` (Ba et al. 2016) and ``rmsnorm`` (Zhang &
Sennrich 2019), over the last dimension.

Parameters: LayerNorm has a scale γ and, with ``bias=true``, a shift β, each
of the normalised size (GPT-2: ``2h`` per norm); RMSNorm has γ only.
Saved for backward: the input (Korthikanti et al. 2022 §4.1 count the
LayerNorm input, ``2sbh`` bytes). FLOPs are ``other`` (no matrix product);
per-element counts in :data:`costgraph.ops.elementwise.PER_ELEMENT`.
"""

from __future__ import annotations

from ..graph import Flops
from .elementwise import PER_ELEMENT
from .registry import op


def _norm(c, kind: str, affine_bias: bool):
    x = c["x"]
    if not x.shape:
        c.fail(f"{kind} needs a tensor with at least one dimension")
    y = c.output(x.shape)
    c.weight("weight", (x.shape[-1],))
    if affine_bias:
        c.weight("bias", (x.shape[-1],))
    n = x.numel
    per = PER_ELEMENT[kind] + PER_ELEMENT["scale"] + (PER_ELEMENT["add"] if affine_bias else 0)
    c.forward(Flops(other=per * n))
    c.backward_input(Flops(other=per * n))
    # dγ = Σ dy·x̂ (multiply and accumulate), dβ = Σ dy (accumulate)
    c.backward_weight(Flops(other=(2 + (1 if affine_bias else 0)) * n))
    c.save(x)
    return y


@op("layernorm", "LayerNorm over the last dimension (γ, and β if bias)", x="tensor", bias=("bool", True))
def layernorm(c):
    return _norm(c, "layernorm", c["bias"])


@op("rmsnorm", "RMSNorm over the last dimension (γ only)", x="tensor")
def rmsnorm(c):
    return _norm(c, "rmsnorm", False)
