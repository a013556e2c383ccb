"""Kimi Delta Attention (Moonshot AI 2025, "Kimi Linear: An Expressive, Efficient Attention
Architecture"; Kimi-Linear's ``linear_attention`` layers): the gated delta rule of
:mod:`costgraph.ops.linear_attention` with a decay per key channel instead of one per head. A
fixed-size state per sequence at inference (a :class:`costgraph.engine.graph.CacheEntry` with
``state = True``), kept in fp32 as transformers' cache keeps it.
"""

from __future__ import annotations

import sympy

from ..engine.graph import Flops
from .registry import op


def kda_chunked_flops(batch, seq, heads, dim, chunk):
    """What ``FlopCounterMode`` counts in transformers 5.24's ``chunk_kimi_delta_attention`` (the
    torch fallback without flash-linear-attention, ``models/kimi_linear/modeling_kimi_linear.py``), on
    ``S' = ⌈S/C⌉·C`` padded positions per sequence and head (``d`` = key = value head size): the
    intra-chunk ``attn @ v_β``, ``attn @ (k_β·e^g)`` and, per chunk, ``attn_intra @ v_new``
    (``2·S'·C·d`` each), the state reads ``(q·e^g)·S`` and ``k_cumdecay·S`` and the update
    ``kᵀ·v_new`` (``2·S'·d²`` each). The per-channel decayed ``q·kᵀ`` and ``k_β·kᵀ`` inside a
    chunk are elementwise products summed (not matrix products), uncounted by ``FlopCounterMode``."""
    padded = sympy.ceiling(seq / chunk) * chunk
    return batch * heads * padded * (6 * chunk * dim + 6 * dim * dim)


@op("kimi_delta_rule", "Kimi Delta Attention (Kimi Linear): qkv [B, S, 3·H·d], per-channel gate g "
    "[B, S, H·d], beta [B, S, H] → [B, H, S, d]; owns A_log [H], dt_bias [H·d]; fp32 state [B, H, d, d] "
    "kept at inference", qkv="tensor", g="tensor", beta="tensor", heads="dim", head_dim="dim",
    chunk=("dim", None), layout=("per_channel", "qkv", "g", "beta"))
def kimi_delta_rule(c):
    """Per token ``t`` and head (transformers 5.24 ``recurrent_kimi_delta_attention``): ``q, k``
    L2-normalised, ``q`` scaled by ``1/√d``, ``β = σ(beta)``, per-channel decay
    ``g = −exp(A_log)·softplus(g + dt_bias)`` ([d] per head), ``S ← diag(e^g)·S``,
    ``S ← S + k·(β·(v − Sᵀk))ᵀ``, ``o = Sᵀq``. Parameters ``A_log`` ``[H]`` and ``dt_bias``
    ``[H·d]``.

    FLOPs under ``matmul``, ``T = B·S``: ``chunk = none`` (textbook, the recurrent form, what a
    decoded token costs) ``6·T·H·d²``; ``chunk = C``: :func:`kda_chunked_flops`. Under `all` also
    the gates, decay and normalisations, ``T·H·(4·d² + 8·d + 4)`` (an estimate: the per-channel decay
    of the state, ``exp``, softplus, σ, the L2 norms). Backward: twice the forward's products,
    ``2·T·H·(d + 1)`` for ``A_log`` and ``dt_bias``. Keeps its inputs. At inference it keeps the
    state ``[B, H, d, d]`` in fp32 (``cache.update_recurrent_state(state.to(torch.float32))``).
    Errors: shapes that do not line up."""
    x, g, beta = c["qkv"], c["g"], c["beta"]
    heads, dim = c["heads"], c["head_dim"]
    if len(x.shape) != 3 or len(g.shape) != 3 or len(beta.shape) != 3:
        c.fail(f"kimi_delta_rule needs qkv, g and beta as [B, S, ·], got {x.shape_str()}, {g.shape_str()} "
               f"and {beta.shape_str()}")
    batch, seq, width = x.shape
    if not c.same(width, 3 * heads * dim):
        c.fail(f"kimi_delta_rule: qkv's last axis {width} must be 3·heads·head_dim = {3 * heads * dim}")
    for name, t, last in (("g", g, heads * dim), ("beta", beta, heads)):
        if not (c.same(t.shape[-1], last) and c.same(t.shape[0], batch) and c.same(t.shape[1], seq)):
            c.fail(f"kimi_delta_rule: {name} {t.shape_str()} must be [B, S, {last}] = [{batch}, {seq}, {last}]")
    y = c.output((batch, heads, seq, dim), role=c.float_role(x))
    c.weight("A_log", (heads,))
    c.weight("dt_bias", (heads * dim,))
    rows = batch * seq
    mm = 6 * rows * heads * dim * dim if c["chunk"] is None else kda_chunked_flops(batch, seq, heads, dim, c["chunk"])
    other = rows * heads * (4 * dim * dim + 8 * dim + 4)
    c.forward(Flops(matmul=mm, other=other))
    c.backward_input(Flops(matmul=2 * mm, other=other))
    c.backward_weight(Flops(other=2 * rows * heads * (dim + 1)))
    c.save(x, g, beta)
    c.cache(c.aux("recurrent_state", (batch, heads, dim, dim), "fp32"), None, state=True)
    return y
