"""Linear attention with a delta-rule state: the gated DeltaNet (Yang, Kautz &
Hatamizadeh 2024, "Gated Delta Networks: Improving Mamba2 with Delta Rule";
Qwen3-Next's ``linear_attention`` layers). Like :mod:`costgraph.ops.ssm`, it
keeps a fixed-size state per sequence at inference (a
:class:`costgraph.engine.graph.CacheEntry` with ``state = True``): no K/V that
grows with the number of tokens.
"""

from __future__ import annotations

import sympy

from ..engine.graph import Flops
from .registry import op


def _textbook(rows, dk, dv):
    """Matrix-product FLOPs of the recurrent form, ``rows`` = tokens × value heads: per token
    and head the read ``Sᵀk`` (``2·dk·dv``), the rank-one update ``k·δᵀ`` added to ``S``
    (``2·dk·dv``) and the output ``Sᵀq`` (``2·dk·dv``)."""
    return 6 * rows * dk * dv


def _chunked(batch, seq, heads, dk, dv, chunk):
    """What ``FlopCounterMode`` counts in transformers' ``torch_chunk_gated_delta_rule``
    (the torch fallback without flash-linear-attention), per sequence and value head, on
    ``S' = ⌈S/C⌉·C`` padded positions: ``k_β·Kᵀ`` and ``Q·Kᵀ`` inside each chunk
    (``4·S'·C·dk``), the intra-chunk attention times the new values (``2·S'·C·dv``), and per
    chunk the state reads ``k_cumdecay·S`` and ``Q·S`` and the update ``Kᵀ·v_new``
    (``6·S'·dk·dv``). ``linalg.solve_triangular`` (the UT transform) is not counted by
    ``FlopCounterMode``."""
    padded = sympy.ceiling(seq / chunk) * chunk
    return batch * heads * padded * (4 * chunk * dk + 2 * chunk * dv + 6 * dk * dv)


@op("gated_delta_rule", "gated delta rule (Gated DeltaNet, Qwen3-Next): qkv [B, S, 2·hk·dk + hv·dv], "
    "ba [B, S, 2·hv] → [B, hv, S, dv]; owns A_log [hv], dt_bias [hv]; state [B, hv, dk, dv] kept at inference",
    qkv="tensor", ba="tensor", k_heads="dim", v_heads="dim", k_dim="dim", v_dim="dim", chunk=("dim", None),
    layout=("per_channel", "qkv", "ba"))
def gated_delta_rule(c):
    """Per token ``t`` and value head (Yang et al. 2024, eq. 10; transformers 5.24
    ``modeling_qwen3_next.torch_recurrent_gated_delta_rule``): ``q, k`` L2-normalised,
    ``q`` scaled by ``1/√dk``, ``β = σ(b)``, ``g = −exp(A_log)·softplus(a + dt_bias)``,
    ``S ← exp(g)·S``, ``S ← S + k·(β·(v − Sᵀk))ᵀ``, ``o = Sᵀq``; query/key heads ``hk``
    shared by ``hv/hk`` value heads each. Parameters ``A_log`` and ``dt_bias``, ``[hv]``.

    FLOPs under ``matmul``, ``T = B·S``: ``chunk = none`` (textbook, the recurrent form,
    what a decoded token costs) ``6·T·hv·dk·dv``; ``chunk = C``: what ``FlopCounterMode``
    counts in transformers' chunked torch fallback (see :func:`_chunked`), which pads the
    sequence to a multiple of ``C`` (64 in transformers). Under `all` also the gates and
    normalisations, ``T·(hv·(2·dk + 2·dv + 8) + 2·hk·dk·3)`` (an estimate: ``exp``, ``σ``,
    softplus, the decay and the L2 norms). Backward: twice the forward's products for the
    input gradients, ``2·T·hv`` for ``A_log`` and ``dt_bias``.

    Keeps its inputs (the fused kernels recompute the chunk states in backward). At
    inference it keeps the state ``S``, ``[B, hv, dk, dv]`` in the compute dtype, per
    sequence (transformers' ``recurrent_states``; vLLM's ``mamba_ssm_cache_dtype`` "auto")."""
    x, ba = c["qkv"], c["ba"]
    hk, hv, dk, dv = c["k_heads"], c["v_heads"], c["k_dim"], c["v_dim"]
    if len(x.shape) != 3 or len(ba.shape) != 3:
        c.fail(f"gated_delta_rule needs qkv and ba as [B, S, ·], got {x.shape_str()} and {ba.shape_str()}")
    batch, seq, width = x.shape
    if not c.same(width, 2 * hk * dk + hv * dv):
        c.fail(f"gated_delta_rule: qkv's last axis {width} must be 2·k_heads·k_dim + v_heads·v_dim "
               f"= {2 * hk * dk + hv * dv}")
    if not (c.same(ba.shape[-1], 2 * hv) and c.same(ba.shape[0], batch) and c.same(ba.shape[1], seq)):
        c.fail(f"gated_delta_rule: ba {ba.shape_str()} must be [B, S, 2·v_heads] = [{batch}, {seq}, {2 * hv}]")
    y = c.output((batch, hv, seq, dv), role=c.float_role(x))
    c.weight("A_log", (hv,))
    c.weight("dt_bias", (hv,))
    rows = batch * seq
    mm = _textbook(rows * hv, dk, dv) if c["chunk"] is None else _chunked(batch, seq, hv, dk, dv, c["chunk"])
    other = rows * (hv * (2 * dk + 2 * dv + 8) + 6 * hk * dk)
    c.forward(Flops(matmul=mm, other=other))
    c.backward_input(Flops(matmul=2 * mm, other=other))
    c.backward_weight(Flops(other=2 * rows * hv))
    c.save(x, ba)
    c.cache(c.aux("recurrent_state", (batch, hv, dk, dv), c.float_role(x)), None, state=True)
    return y
