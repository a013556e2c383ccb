"""Mamba-2's state-space duality scan (Dao & Gu 2024, "Transformers are SSMs", §6-7):
multi-head selective SSM with a scalar decay per head and B, C shared by groups of
heads, as Falcon-H1, Bamba, Nemotron-H and Granite 4 run it. A fixed-size state per
sequence at inference (a :class:`costgraph.engine.graph.CacheEntry` with
``state = True``).
"""

from __future__ import annotations

import sympy

from ..engine.graph import Flops
from .registry import op


def ssd_chunked_flops(batch, seq, heads, head_dim, state, chunk):
    """What ``FlopCounterMode`` counts in transformers' ``mamba2_chunk_scan`` torch fallback
    (``modeling_falcon_h1.py``; the same function in mamba2/bamba/granitemoehybrid), on the
    sequence padded to ``S' = c·C`` (``c = ⌈S/C⌉`` chunks of ``C``), ``D = heads·head_dim``:
    ``G = C·Bᵀ`` within chunks ``2·b·H·S'·C·N``, ``Y_diag = M·x`` ``2·b·H·S'·C·P``, the chunk
    states ``Bᵀ·x`` and the state read ``C·states`` ``2·b·S'·D·N`` each, and the inter-chunk
    recurrence (an einsum over the ``c + 1`` chunk boundaries, quadratic in ``c``)
    ``2·b·(c + 1)²·D·N``."""
    chunks = sympy.ceiling(seq / chunk)
    padded = chunks * chunk
    d = heads * head_dim
    return (2 * batch * heads * padded * chunk * (state + head_dim) + 4 * batch * padded * d * state
            + 2 * batch * (chunks + 1) ** 2 * d * state)


@op("ssd_scan", "Mamba-2's SSD scan (Dao & Gu 2024): x [B, S, D], dt [B, S, H], bc [B, S, 2·G·N] → [B, S, D]; "
    "owns A_log, D, dt_bias [H]; state [B, H, D/H, N] kept at inference",
    x="tensor", dt="tensor", bc="tensor", heads="dim", groups="dim", state="dim", chunk=("dim", None),
    state_fp32=("bool", False), layout=("per_channel", "x", "dt"))
def ssd_scan(c):
    """Per token and head ``h`` (Dao & Gu 2024, eq. 16; transformers'
    ``mamba2_selective_state_update``): ``Δ = softplus(dt + dt_bias)``, ``a = exp(−Δ·exp(A_log))``,
    ``S_h ← a·S_h + Δ·x_h·B_gᵀ`` (``[P, N]``, ``P = D/H``, ``g`` the head's group),
    ``y_h = S_h·C_g + D_h·x_h``.

    FLOPs under ``matmul``, ``T = B·S``: ``chunk = none`` (textbook, the recurrent form, what a
    decoded token costs and what ``FlopCounterMode`` counts there: one ``bmm`` of the state by
    ``C``) ``2·T·D·N``; ``chunk = C``: :func:`ssd_chunked_flops`. Under `all` also
    ``T·(4·D·N + 2·D + 4·H)`` (the decay, ``Δ·x·Bᵀ``, the state update, the skip, softplus).
    Backward: twice the forward's products for the input gradients; ``3·T·H`` for the three
    per-head parameters.

    Keeps ``x``, ``dt``, ``bc``. At inference the state ``[B, H, P, N]`` in the compute dtype (vLLM's
    ``mamba_ssm_cache_dtype = "auto"``); ``state_fp32 = true``: in fp32, as transformers 5.24 keeps it
    (``mamba2_chunk_scan``'s final state of its fp32 ``states``: ``[b, H, P, N]`` float32 after a prefill)."""
    x, dt, bc = c["x"], c["dt"], c["bc"]
    heads, groups, n = c["heads"], c["groups"], c["state"]
    for name, t in (("x", x), ("dt", dt), ("bc", bc)):
        if len(t.shape) != 3:
            c.fail(f"ssd_scan's {name} must be [B, S, ·], got {t.shape_str()}")
    batch, seq, d = x.shape
    if not c.same(dt.shape[-1], heads) or not c.same(bc.shape[-1], 2 * groups * n):
        c.fail(f"ssd_scan: dt {dt.shape_str()} must end in heads = {heads} and bc {bc.shape_str()} in "
               f"2·groups·state = {2 * groups * n}")
    y = c.output(x.shape, role=c.float_role(x))
    for w in ("A_log", "D", "dt_bias"):
        c.weight(w, (heads,))
    rows = batch * seq
    head_dim = d / heads
    mm = 2 * rows * d * n if c["chunk"] is None else ssd_chunked_flops(batch, seq, heads, head_dim, n, c["chunk"])
    other = rows * (4 * d * n + 2 * d + 4 * heads)
    c.forward(Flops(matmul=mm, other=other))
    c.backward_input(Flops(matmul=2 * mm, other=other))
    c.backward_weight(Flops(other=3 * rows * heads))
    c.save(x, dt, bc)
    role = "fp32" if c["state_fp32"] else c.float_role(x)
    c.cache(c.aux("ssm_state", (batch, heads, head_dim, n), role), None, state=True)
    return y
