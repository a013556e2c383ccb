"""Lightning attention (Qin et al. 2024, "Lightning Attention-2"; MiniMax-01, MiniMax 2025): linear
attention with a fixed exponential decay per head, computed blockwise (an exact intra-block product
with the decay mask, and the running ``KᵀV`` state between blocks). A fixed-size state per
sequence at inference (a :class:`costgraph.engine.graph.CacheEntry` with ``state = True``).
"""

from __future__ import annotations

import sympy

from ..engine.graph import Flops
from .registry import op


def lightning_block_flops(batch, seq, heads, dim, block):
    """What ``FlopCounterMode`` counts in transformers 5.24's ``MiniMaxLightningAttention.forward``
    (``models/minimax/modeling_minimax.py``, the prefill path), per sequence and head: for each block
    of ``c`` positions (``⌊S/C⌋`` blocks of ``C``, a last one of ``S mod C``) ``Q·Kᵀ`` and its
    decayed product with ``V`` (``4·c²·d``), the state read ``(Q·decay)·KV`` and the update
    ``(K·decay)ᵀ·V`` (``4·c·d²``): ``4·d·(⌊S/C⌋·C² + (S mod C)²) + 4·S·d²``."""
    squares = sympy.floor(seq / block) * block ** 2 + sympy.Mod(seq, block) ** 2
    return batch * heads * (4 * dim * squares + 4 * seq * dim * dim)


@op("lightning_attention", "lightning attention (MiniMax-01): q, k, v [B, heads, S, d] → [B, heads, S, d], "
    "a fixed decay per head; state KᵀV [B, heads, d, d] kept at inference",
    q="tensor", k="tensor", v="tensor", block=("dim", None), layout="follow")
def lightning_attention(c):
    """``KV_t = λ_h·KV_{t−1} + k_tᵀ·v_t``, ``o_t = q_t·KV_t`` per head, the decay ``λ_h`` fixed
    (``exp(−slope_h)``, ALiBi's slopes scaled per layer: buffers, no parameters).

    FLOPs under ``matmul``, ``T = B·S``: ``block = none`` (textbook, the recurrent form, what a
    decoded token costs) ``4·T·heads·d²`` (the update and the read); ``block = C``: the blockwise
    form transformers computes (:func:`lightning_block_flops`, ``block_size`` 256). Under `all` also
    the decays, ``3·T·heads·d`` (an estimate). Backward: twice the forward's products. Keeps q, k
    and v. At inference it keeps ``KV``, ``[B, heads, d, d]`` in the compute dtype (transformers'
    ``set_linear_cache``). Errors: shapes that do not line up."""
    q, k, v = c["q"], c["k"], c["v"]
    if len(q.shape) != 4 or tuple(q.shape) != tuple(k.shape) or tuple(q.shape) != tuple(v.shape):
        if not (len(q.shape) == len(k.shape) == len(v.shape) == 4
                and all(c.same(x, y) and c.same(x, z) for x, y, z in zip(q.shape, k.shape, v.shape))):
            c.fail(f"lightning_attention needs q, k and v of one shape [B, heads, S, d], got {q.shape_str()}, "
                   f"{k.shape_str()} and {v.shape_str()}")
    batch, heads, seq, dim = q.shape
    y = c.output((batch, heads, seq, dim), role=c.float_role(q, k, v))
    block = c["block"]
    mm = 4 * batch * seq * heads * dim * dim if block is None else lightning_block_flops(batch, seq, heads, dim, block)
    other = 3 * batch * seq * heads * dim
    c.forward(Flops(matmul=mm, other=other))
    c.backward_input(Flops(matmul=2 * mm, other=other))
    c.save(q, k, v)
    c.cache(c.aux("kv_state", (batch, heads, dim, dim), c.float_role(q, k, v)), None, state=True)
    return y
