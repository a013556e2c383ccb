"""Recognise linear-attention mixers of their own form as blocks the draft defines itself: MiniMax's lightning
attention (the bundled models/minimax.cg's ``lightning``).

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call as model-language text, or
None; the blocks' text (:data:`LINEAR_BLOCKS`) follows transformers 5.24's modeling code of each mixer.
"""

from __future__ import annotations

from .blocks import _linear, activation
from .facts import Module

#: the buffers of transformers' MiniMaxLightningAttention (the decays of the blockwise form; not parameters)
LIGHTNING_BUFFERS = "slope_rate,query_decay,key_decay,diagonal_decay"


def lightning_call(m: Module, arg: str, d) -> str | None:
    """MiniMax's lightning attention (transformers 5.24 ``MiniMaxLightningAttention``): ``qkv_proj`` H → 3·a·d and
    SiLU, the blockwise linear attention over blocks of ``block_size`` (the decays are buffers), an RMSNorm over a·d
    times ``sigmoid(output_gate(x))`` (H → a·d), ``out_proj`` a·d → H, no bias; the draft's ``lightning`` (as
    models/minimax.cg's, ``block = C``: the blockwise form's FLOPs, what FlopCounterMode counts), or None."""
    qkv, gate, out = (_linear(m.child(n)) for n in ("qkv_proj", "output_gate", "out_proj"))
    norm = m.child("norm")
    heads, head_dim, block = (m.attrs.get(a) for a in ("num_attention_heads", "head_dim", "block_size"))
    if None in (qkv, gate, out) or norm is None or m.params or m.attrs.get("buffers") != LIGHTNING_BUFFERS \
            or not all(isinstance(v, int) and v > 0 for v in (heads, head_dim, block)):
        return None
    width = heads * head_dim
    if qkv[1] != 3 * width or gate[1] != width or out[:2] != (width, qkv[0]) or gate[0] != qkv[0] \
            or any(x[2] for x in (qkv, gate, out)) or norm.params != {"weight": (width,)} \
            or "rms" not in norm.cls.lower() or activation(m) != "silu":
        return None
    d.blocks.add("lightning")
    sizes = [d.size(heads, "attention heads"), d.size(head_dim, "head size")]
    return f"lightning({arg}, {', '.join(sizes)}, block = {d.size(block, 'block size', count='Cl')}, name = {m.name})"


#: the blocks a draft defines itself when it uses them
LINEAR_BLOCKS = {"lightning": """# MiniMax's lightning attention (MiniMax 2025; transformers' MiniMaxLightningAttention; models/minimax.cg's
# lightning): q, k, v per head from qkv_proj and SiLU, the linear attention in blocks of `block` (its state
# [B, heads, d, d]; the decays are buffers), an RMSNorm over all heads times sigmoid(output_gate(x)), out_proj.
block lightning(x[B, S, H], heads, head_dim, block = none) {
  q, k, v = split(split_heads(silu(linear(x, 3 * heads * head_dim, bias = false, name = qkv_proj)), heads), 3)
  y = lightning_attention(q, k, v, block = block, name = core)
  y = rmsnorm(merge_heads(y), name = norm) * sigmoid(linear(x, heads * head_dim, bias = false, name = output_gate))
  return linear(y, H, bias = false, name = out_proj)
}"""}
