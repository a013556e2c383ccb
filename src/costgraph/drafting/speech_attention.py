"""WavLM's gated relative-position attention, drafted from its traced modules (issue 28 item 2).

transformers 5.24 modeling_wavlm.py ``WavLMAttention``: q, k, v and out projections ``Linear(h, h)`` with biases, run
by ``F.multi_head_attention_forward`` (the scores ``baddbmm(bias, q, kᵀ)``: FlopCounterMode counts the product alone,
as a plain ``matmul``); before it, a gate per head and position from ``gru_rel_pos_linear`` (``Linear(h/a, 8)`` on each
head's slice of the input, ``[b, a, s, h/a] → [b, a, s, 8]``: 2·b·s·h·8 FLOPs) and ``gru_rel_pos_const [1, a, 1, 1]``,
which scale the relative position bias (additions and products of elements: no matmul FLOPs). The first layer alone
holds the bias table ``rel_attn_embed`` (``Embedding(num_buckets, a)``, ``has_relative_position_bias=(i == 0)`` in
``WavLMEncoder``): read by a lookup (no FLOPs), its bias passed on to every later layer.
"""

from __future__ import annotations

from .blocks import _linear
from .facts import Module

#: the blocks this module's recogniser writes
SPEECH_ATTENTION_BLOCKS = {"wavlm_attention": """# WavLM's attention (transformers 5.24 WavLMAttention): projections with biases, a gate per head from
# gru_rel_pos_linear (h/a -> 8 per head) and gru_rel_pos_const [1, heads, 1, 1] scaling the relative position bias
# (elementwise); table: the bias table rel_attn_embed [buckets, heads] the first layer holds (a lookup: no FLOPs).
block wavlm_attention(x[B, S, H], heads, buckets, table = false) {
  q = split_heads(linear(x, H, bias = true, name = q_proj), heads)
  k = split_heads(linear(x, H, bias = true, name = k_proj), heads)
  v = split_heads(linear(x, H, bias = true, name = v_proj), heads)
  if table {
    param rel_attn_embed[buckets, heads]
  }
  param gru_rel_pos_const[1, heads, 1, 1]
  g = sigmoid(linear(split_heads(x, heads), 8, bias = true, name = gru_rel_pos_linear))
  p = softmax(scale(matmul(q, transpose(k))), fp32 = true)
  return linear(merge_heads(matmul(p, v)), H, bias = true, name = out_proj)
}"""}


def wavlm_call(m: Module, arg: str, d) -> str | None:
    """``wavlm_attention(...)`` of a ``WavLMAttention``-shaped module (q/k/v/out projections h → h with biases,
    ``gru_rel_pos_const``, ``gru_rel_pos_linear`` h/a → 8, perhaps ``rel_attn_embed``), else None."""
    const, gate = m.params.get("gru_rel_pos_const"), _linear(m.child("gru_rel_pos_linear"))
    projs = [_linear(m.child(n)) for n in ("q_proj", "k_proj", "v_proj", "out_proj")]
    if const is None or len(const) != 4 or gate is None or None in projs or set(m.params) != {"gru_rel_pos_const"}:
        return None
    h, heads = projs[0][0], const[1]
    if any(p[:2] != (h, h) or not p[2] for p in projs) or gate[:2] != (h // heads, 8) or not gate[2]:
        return None
    table = m.child("rel_attn_embed")
    rows = table.params.get("weight") if table is not None else None
    if table is not None and (rows is None or rows[1] != heads):
        return None
    known = {"q_proj", "k_proj", "v_proj", "out_proj", "gru_rel_pos_linear", "rel_attn_embed"}
    if any(c.name not in known and c.param_count() for c in m.children):
        return None
    d.blocks.add("wavlm_attention")
    buckets = d.size(rows[0], "relative position buckets") if rows is not None else "1"
    opts = ", table = true" if rows is not None else ""
    return f"wavlm_attention({arg}, {d.size(heads, 'attention heads')}, {buckets}{opts}, name = {m.name})"
