"""Griffin's Real-Gated Linear Recurrent Unit, ``rg_lru`` (De et al. 2024, "Griffin: Mixing Gated
Linear Recurrences with Local Attention for Efficient Language Models", §2.4; transformers 5.24
``models/recurrent_gemma/modeling_recurrent_gemma.py``, ``RecurrentGemmaRglru``): a diagonal linear
recurrence with input and recurrence gates computed per head by block-diagonal weights, and a
fixed-size state per sequence at inference (a :class:`costgraph.engine.graph.CacheEntry` with
``state = True``, as Mamba's).
"""

from __future__ import annotations

from ..engine.graph import Flops
from .registry import op

# FLOPs per (token, channel) under the `all` convention, outside the two gate products
# (costgraph.ops.elementwise counts one per arithmetic operation or transcendental), as
# RecurrentGemmaRglru.forward and _rnn_scan compute them: the two gate biases (2), two sigmoids
# (2·3), log a = −8·r·softplus(Λ) (2), a = exp(log a) (1), a² = exp(2·log a) (2), x·i (1), 1 − a² (1),
# √ (1), the reset blend reset + ~reset·m (2), ·m (1), a·~reset (1), h = a·h + x (2).
RG_LRU_PER_ELEMENT = 22


@op("rg_lru", "Griffin's RG-LRU (RecurrentGemma): x [B, S, W] → [B, S, W]; owns per-head block-diagonal "
    "input and recurrence gates [heads, W/heads, W/heads] (+ biases) and Λ [W]; state [B, W] (fp32) "
    "kept at inference", x="tensor", heads="dim", layout=("per_channel", "x"))
def rg_lru(c):
    """Per token ``t`` and channel (De et al. 2024, Eq. 1–4; ``RecurrentGemmaRglru``):
    ``i = σ(x·W_x + b_x)``, ``r = σ(x·W_a + b_a)`` with ``W_x``, ``W_a`` block-diagonal (``heads``
    blocks of ``W/heads`` square: ``torch.baddbmm`` over the heads, the weight broadcast over the
    ``B·S`` tokens), ``a = exp(−8·r·softplus(Λ))``, ``h ← a·h + √(1 − a²)·(i·x)`` (the reset at
    position 0 not counted apart), ``y = h``.

    Parameters: ``Λ`` (``recurrent_param``, ``[W]``), ``input_gate_weight`` and
    ``recurrent_gate_weight`` ``[heads, W/heads, W/heads]``, ``input_gate_bias`` and
    ``recurrent_gate_bias`` ``[heads, W/heads]``: ``2·W²/heads + 3·W``. ``W`` must be a multiple
    of ``heads`` (transformers: ``block_width = lru_width // num_attention_heads``).

    FLOPs, ``T = B·S``: under ``matmul`` the two gate products, ``4·T·W²/heads`` (``FlopCounterMode``
    counts ``baddbmm`` as its ``bmm``, the bias add left out); under `all` also
    :data:`RG_LRU_PER_ELEMENT` per token and channel (the scan's ``a·h + x`` included). Backward:
    the input gradients ``4·T·W²/heads`` (``dX`` of each gate product) and the `all` part again;
    the weight gradients ``4·T·W²/heads`` and ``3·T·W`` (the bias sums and ``Λ``'s).

    Keeps ``x`` and, each ``[B, S, W]``, the two gates and the states ``h`` (what the gradients
    of the gates and of ``a`` read; PyTorch's eager path keeps more: not followed). At inference
    it keeps the state ``h``, ``[B, W]`` in fp32 (transformers' ``recurrent_states``,
    ``_setup_cache``), per sequence whatever the number of tokens. Errors: ``x`` not ``[B, S, W]``."""
    x, heads = c["x"], c["heads"]
    if len(x.shape) != 3:
        c.fail(f"rg_lru needs x [B, S, W], got {x.shape_str()}")
    batch, seq, width = x.shape
    block = width / heads
    role = c.float_role(x)
    y = c.output(x.shape, role=role)
    c.weight("recurrent_param", (width,))
    for gate in ("input_gate", "recurrent_gate"):
        c.weight(f"{gate}_weight", (heads, block, block))
        c.weight(f"{gate}_bias", (heads, block))
    tokens = batch * seq
    mm = 4 * tokens * width * block
    other = RG_LRU_PER_ELEMENT * tokens * width + 3 * width   # softplus(Λ) once per channel
    c.forward(Flops(matmul=mm, other=other))
    c.backward_input(Flops(matmul=mm, other=other))
    c.backward_weight(Flops(matmul=mm, other=3 * tokens * width))
    c.save(x, *(c.aux(name, x.shape, role) for name in ("input_gate", "recurrent_gate", "states")))
    c.cache(c.aux("recurrent_state", (batch, width), "fp32"), None, state=True)
    return y
