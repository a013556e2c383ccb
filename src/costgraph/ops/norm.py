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

``weight = false``: no γ (nor β) — OLMo's non-parametric LayerNorm, a norm
without scale: no parameters, no γ multiply, no weight gradient; the
``pytorch`` profile's RMSNorm then keeps no ``x̂``. The norm is over the last
axis of a tensor of any rank: on ``[B, heads, S, d]`` it is a per-head norm
(Qwen3's and OLMo-2's QK-norm) with γ of size ``d``, shared by the heads.

``keep = input | output | fp32 | nothing`` chooses the main tensor kept for
backward where frameworks differ (default: the profile's — ``korthikanti``
the input; ``pytorch`` the input for LayerNorm, the fp32 copy for RMSNorm):
``output`` keeps the result instead (a memory-efficient norm whose backward
reads ``y``), ``fp32`` an fp32 copy of the input, ``nothing`` nothing (a
frozen or recomputed part). The
``pytorch`` profile's small fp32 statistics (mean, 1/σ or 1/rms) and RMSNorm's
``x̂`` are kept with any choice but ``nothing``.
"""

from __future__ import annotations

from ..engine.graph import Flops
from .elementwise import PER_ELEMENT, _keep
from .registry import op


def _norm(c, kind: str, affine_bias: bool):
    x = c["x"]
    if not x.shape:
        c.fail(f"{kind} needs a tensor with at least one dimension")
    scaled = c["weight"]
    affine_bias = affine_bias and scaled
    y = c.output(x.shape, role=c.float_role(x))
    if scaled:
        c.weight("weight", (x.shape[-1],))
    if affine_bias:
        c.weight("bias", (x.shape[-1],))
    n = x.numel
    per = PER_ELEMENT[kind] + (PER_ELEMENT["scale"] if scaled else 0) + (PER_ELEMENT["add"] if affine_bias else 0)
    c.forward(Flops(other=per * n))
    c.backward_input(Flops(other=per * n))
    # dγ = Σ dy·x̂ (multiply and accumulate), dβ = Σ dy (accumulate)
    if scaled:
        c.backward_weight(Flops(other=(2 + (1 if affine_bias else 0)) * n))
    if c.settings.profile != "pytorch":
        _keep(c, x, y, "input")
        return y
    stats = (*x.shape[:-1], 1)
    if kind == "layernorm":
        if _keep(c, x, y, "input") != "nothing":
            c.save(c.aux("mean", stats, "fp32"), c.aux("rstd", stats, "fp32"))
    else:
        fp32 = c["fp32_scale"]
        if c["keep"] is None:   # x.float(): x itself when it is fp32 already
            c.save(x if x.role == "fp32" else c.aux("x_fp32", x.shape, "fp32"))
        elif _keep(c, x, y, "fp32") == "nothing":
            return y
        c.save(c.aux("rstd", stats, "fp32"))
        if scaled:
            c.save(c.aux("normalized", x.shape, "fp32" if fp32 else c.float_role(x)))
        if fp32 and scaled:
            c.save(c.aux("one_plus_weight", (x.shape[-1],), "fp32"))
    return y


@op("layernorm", "LayerNorm over the last dimension (γ, and β if bias; none if weight = false)",
    x="tensor", bias=("bool", True), weight=("bool", True), keep=("ident", None), layout="norm_last")
def layernorm(c):
    return _norm(c, "layernorm", c["bias"])


@op("rmsnorm", "RMSNorm over the last dimension (γ only; none if weight = false)",
    x="tensor", fp32_scale=("bool", False), weight=("bool", True), keep=("ident", None), layout="norm_last",
    roles="weight_grad_normalized")
def rmsnorm(c):
    return _norm(c, "rmsnorm", False)
