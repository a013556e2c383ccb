"""Normalisations: ``layernorm`` (Ba et al. 2016) and ``rmsnorm`` (Zhang &
Sennrich 2019), over the last dimension.

Parameters: LayerNorm has a scale γ and, with ``bias=true``, a shift β, each
of the normalised size (GPT-2: ``2h`` per norm); RMSNorm has γ only.
Saved for backward, profile ``korthikanti``: the input (Korthikanti et al.
2022 §4.1 count the LayerNorm input, ``2sbh`` bytes). Profile ``pytorch``
(what autograd keeps in Hugging Face's bf16 code): LayerNorm keeps its input
and the per-row mean and 1/σ in fp32; LLaMA's RMSNorm upcasts (``x.float()``,
kept by ``pow`` and ``mul``: 4 bytes an element), keeps the fp32 1/rms and the
normalised ``x̂`` that multiplies γ (bf16; fp32 with ``fp32_scale = true``, as
Gemma computes ``x̂ · (1 + γ)`` in fp32, also keeping the fp32 ``1 + γ``).
FLOPs are ``other`` (no matrix product); per-element counts in
:data:`costgraph.ops.elementwise.PER_ELEMENT`.
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
    if c.settings.profile != "pytorch":
        c.save(x)
        return y
    stats = (*x.shape[:-1], 1)
    if kind == "layernorm":
        c.save(x, c.aux("mean", stats, "fp32"), c.aux("rstd", stats, "fp32"))
    else:
        fp32 = c["fp32_scale"]
        c.save(c.aux("x_fp32", x.shape, "fp32"), c.aux("rstd", stats, "fp32"),
               c.aux("normalized", x.shape, "fp32" if fp32 else "act"))
        if fp32:
            c.save(c.aux("one_plus_weight", (x.shape[-1],), "fp32"))
    return y


@op("layernorm", "LayerNorm over the last dimension (γ, and β if bias)", x="tensor", bias=("bool", True))
def layernorm(c):
    return _norm(c, "layernorm", c["bias"])


@op("rmsnorm", "RMSNorm over the last dimension (γ only)", x="tensor", fp32_scale=("bool", False))
def rmsnorm(c):
    return _norm(c, "rmsnorm", False)
