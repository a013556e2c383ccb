"""Recognise attention whose values have a head size of their own (MiMo-V2-Flash; transformers 5.24
modeling_mimo_v2_flash.py ``MiMoV2FlashAttention``) as a block the draft defines itself.

Q and K heads of ``head_dim``, V heads of ``v_head_dim`` (192 and 128 in MiMo-V2-Flash's default config), rotary on
part of each Q and K head (no product), the values times ``attention_value_scale`` (elementwise: no product), eager
attention; the sliding-window layers (``layer_types``) hold twice the config's key/value heads and a learned sink logit
per head (``sinks`` [a], passed to the attention as ``s_aux``: the softmax over the scores and the sink's column,
which is dropped before the product with V, as gpt-oss's); ``o_proj`` from a·v_head_dim back to H, without bias.
The recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call as model-language text, or
None; the block's text is :data:`VALUE_DIM_BLOCKS`.
"""

from __future__ import annotations

from .blocks import K, O, Q, V, _linear, _window, head_sizes
from .facts import Module


def value_dim_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """``value_dim_attention`` for an attention module whose ``v_proj`` has ``v_head_dim`` columns per key/value
    head where ``q_proj`` and ``k_proj`` have ``head_dim`` (``m.attrs``), ``o_proj`` a·v_head_dim → H, no bias on
    ``o_proj``, the same bias (or none) on q, k, v, and at most the parameter ``sinks`` [a] of its own (``sinks =
    true``); else None (an attention of one head size is :func:`costgraph.drafting.blocks.attention_call`'s)."""
    q, k, v, o = (_linear(m.child(*names)) for names in (Q, K, V, O))
    head_dim, v_dim = m.attrs.get("head_dim"), m.attrs.get("v_head_dim")
    if None in (q, k, v, o) or not rotary or not all(isinstance(x, int) and x > 0 for x in (head_dim, v_dim)) \
            or head_dim == v_dim or q[1] % head_dim or k[1] % head_dim or len({q[2], k[2], v[2]}) != 1 or o[2]:
        return None
    heads, kv = q[1] // head_dim, k[1] // head_dim
    if v[1] != kv * v_dim or o[:2] != (heads * v_dim, q[0]) or heads % kv \
            or m.params not in ({}, {"sinks": (heads,)}) \
            or len([c for c in m.children if c.param_count()]) != 4:
        return None
    d.blocks.add("value_dim_attention")
    sizes = head_sizes(d, heads, k[1], head_dim) + [d.size(v_dim, "value head size")]
    opts = (["qkv_bias = true"] if q[2] else []) + _window(m, d) + (["sinks = true"] if m.params else [])
    return f"value_dim_attention({arg}, {', '.join(sizes + opts)}, name = {m.name})"


#: the block a draft defines itself
VALUE_DIM_BLOCKS = {"value_dim_attention": """# Attention whose values have a head size of their own (MiMo-V2-Flash; transformers 5.24
# MiMoV2FlashAttention): Q and K heads of head_dim, V heads of v_head_dim, rotary (no product), the values scaled
# (no product); sinks: a learned sink logit per head, the softmax over the scores and the sink's column, the sink's
# column dropped before scores·V (the sliding-window layers'); o_proj from heads·v_head_dim, no bias.
block value_dim_sink_softmax(logits[B, A, S, K1]) {
  return slice(softmax(logits), K1 - 1)
}

block value_dim_attention(x[B, S, H], heads, kv_heads, head_dim, v_head_dim, qkv_bias = false, window = none,
                          sinks = false) {
  q = rope(split_heads(linear(x, heads * head_dim, bias = qkv_bias, name = q_proj), heads))
  k = rope(split_heads(linear(x, kv_heads * head_dim, bias = qkv_bias, name = k_proj), kv_heads))
  v = split_heads(linear(x, kv_heads * v_head_dim, bias = qkv_bias, name = v_proj), kv_heads)
  k = repeat_kv(cache(k, window = window, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, window = window, name = v_cache), heads / kv_heads)
  logits = scale(matmul(q, transpose(k), window = window, causal = true))
  if sinks {
    param sinks[1, heads, 1, 1]
    p = value_dim_sink_softmax(concat(logits, sinks), name = sinks_softmax)
  } else {
    p = softmax(logits, fp32 = true)
  }
  return linear(merge_heads(matmul(p, v, window = window, causal = true)), H, bias = false, name = o_proj)
}"""}
