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
}""", "rel_pos_attention": """# Attention with relative positions (Transformer-XL's, as wav2vec2-conformer's Wav2Vec2ConformerSelfAttention with
# position_embeddings_type "relative", transformers 5.24): pe [1, 2S - 1, H], the table of relative positions the
# encoder slices from its buffer, projected by linear_pos (no bias) and multiplied with q + pos_bias_v (matrix b + d,
# [B, heads, S, 2S - 1], then skewed to [B, heads, S, S]: views and a pad); q + pos_bias_u against k (matrix a + c).
block rel_pos_attention(x[B, S, H], pe[O, P, H], heads) {
  q = split_heads(linear(x, H, bias = true, name = linear_q), heads)
  k = split_heads(linear(x, H, bias = true, name = linear_k), heads)
  v = split_heads(linear(x, H, bias = true, name = linear_v), heads)
  param pos_bias_u[heads, H / heads]
  param pos_bias_v[heads, H / heads]
  r = split_heads(linear(pe, H, bias = false, name = linear_pos), heads)
  bd = matmul(q, transpose(r))
  p = softmax(scale(matmul(q, transpose(k))), fp32 = true)
  return linear(merge_heads(matmul(p, v)), H, bias = true, name = linear_out)
}""", "conformer_conv": """# The Conformer's convolution module (Gulati et al. 2020 §2.2; transformers 5.24 modeling_wav2vec2_conformer.py
# Wav2Vec2ConformerConvolutionModule): LayerNorm, a pointwise Conv1d H -> 2H, GLU over the channels, a depthwise
# Conv1d of width kernel (padding (kernel - 1) / 2), BatchNorm1d (eval: its running statistics; gamma, beta [H]), the
# activation, a pointwise Conv1d H -> H; no biases. Channels first between the convolutions.
block conformer_conv(x[B, S, H], kernel, padding) {
  t = transpose(dense_conv1d(transpose(layernorm(x, name = layer_norm)), 2 * H, kernel = 1, bias = false, name = pointwise_conv1))
  y = transpose(slice(t, H) * sigmoid(slice(t, H)))
  y = dense_conv1d(y, H, kernel = kernel, padding = padding, groups = H, bias = false, name = depthwise_conv)
  param batch_norm_weight[H]
  param batch_norm_bias[H]
  return transpose(dense_conv1d(gelu(y), H, kernel = 1, bias = false, name = pointwise_conv2))
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


def conformer_attention_call(m: Module, arg: str, d) -> str | None:
    """``rel_pos_attention(arg, pe, heads)`` of a ``Wav2Vec2ConformerSelfAttention`` with relative positions
    (``linear_q/k/v/out`` h → h with biases, ``linear_pos`` h → h without, ``pos_bias_u``/``pos_bias_v`` [a, h/a]);
    else None. ``pe``: the model's relative position table (:mod:`costgraph.drafting.audio`)."""
    u, v = m.params.get("pos_bias_u"), m.params.get("pos_bias_v")
    projs = [_linear(m.child(n)) for n in ("linear_q", "linear_k", "linear_v", "linear_out")]
    pos = _linear(m.child("linear_pos"))
    if u is None or u != v or set(m.params) != {"pos_bias_u", "pos_bias_v"} or None in projs or pos is None:
        return None
    h, heads = projs[0][0], u[0]
    if any(p[:2] != (h, h) or not p[2] for p in projs) or pos != (h, h, False) or u[1] * heads != h:
        return None
    d.blocks.add("rel_pos_attention")
    return f"rel_pos_attention({arg}, pe, {d.size(heads, 'attention heads')}, name = {m.name})"


def conformer_conv_call(m: Module, arg: str, d) -> str | None:
    """``conformer_conv(arg, kernel, padding)`` of a ``Wav2Vec2ConformerConvolutionModule`` (the block above: its
    depthwise width the config's ``conv_depthwise_kernel_size``, a number), else None."""
    parts = {c.name: c for c in m.children}
    need = ("layer_norm", "pointwise_conv1", "depthwise_conv", "batch_norm", "pointwise_conv2")
    if m.params or any(n not in parts for n in need) or parts["batch_norm"].cls != "BatchNorm1d":
        return None
    w1, dw, w2 = (parts[n].params.get("weight") for n in ("pointwise_conv1", "depthwise_conv", "pointwise_conv2"))
    if w2 is None or w1 != (2 * w2[0], w2[0], 1) or w2 != (w2[0], w2[0], 1) or dw is None or dw[:2] != (w2[0], 1) \
            or any("bias" in parts[n].params for n in ("pointwise_conv1", "depthwise_conv", "pointwise_conv2")) \
            or "gelu" not in str(m.attrs.get("act", "")).lower():
        return None
    d.blocks.add("conformer_conv")
    pad = int(parts["depthwise_conv"].attrs.get("padding", 0))
    return f"conformer_conv({arg}, {dw[2]}, {pad}, name = {m.name})"

