"""Wav2Vec2-BERT's Conformer blocks, drafted from their traced modules (issue 28 item 2, task k28speech13):
transformers 5.24 modeling_wav2vec2_bert.py, whose ``Wav2Vec2BertEncoderLayer`` has wav2vec2-conformer's order
(:mod:`costgraph.drafting.conformer`) and blocks of its own:

- ``Wav2Vec2BertFeedForward``: ``intermediate_dense`` (h → i, bias), the activation (``hidden_act`` "swish": SiLU),
  ``output_dense`` (i → h, bias);
- ``Wav2Vec2BertSelfAttention`` with ``position_embeddings_type`` "relative_key": ``linear_q/k/v/out`` (h → h, biases),
  ``distance_embedding`` (``nn.Embedding(left + right + 1, h/a)``, ``left_max_position_embeddings`` 64,
  ``right_max_position_embeddings`` 8: the config's numbers), looked up at the clamped distances ``[s, s, d]`` and
  multiplied with q (``_apply_relative_key_position_encoding``: ``einsum("bhld,lrd->bhlr")``, 2·b·a·s²·d FLOPs, as
  many as q·kᵀ: written so), added to the scores as their bias;
- ``Wav2Vec2BertConvolutionModule``: LayerNorm, ``pointwise_conv1`` (h → 2h, no bias), GLU, the depthwise
  ``Conv1d(h, h, conv_depthwise_kernel_size, groups=h, bias=False)`` on the input padded k − 1 on the left (causal:
  ``conv1d``, s outputs), ``depthwise_layer_norm``, the activation, ``pointwise_conv2`` (h → h, no bias).

Torch-free: module facts and integers only.
"""

from __future__ import annotations

from .blocks import _linear
from .facts import Module

#: the blocks this module's recognisers write
BERT_CONFORMER_BLOCKS = {"w2vb_feed_forward": """# Wav2Vec2-BERT's feed-forward (transformers 5.24 modeling_wav2vec2_bert.py Wav2Vec2BertFeedForward):
# intermediate_dense H -> width, SiLU (hidden_act "swish"), output_dense width -> H, biases.
block w2vb_feed_forward(x[B, S, H], width) {
  return linear(silu(linear(x, width, bias = true, name = intermediate_dense)), H, bias = true, name = output_dense)
}""", "relative_key_attention": """# Wav2Vec2-BERT's attention with relative_key positions (transformers 5.24 modeling_wav2vec2_bert.py
# Wav2Vec2BertSelfAttention, _apply_relative_key_position_encoding): q, k, v, out projections with biases; the
# distance table [rows, H / heads] looked up at the clamped distances [S, S, H / heads] (no FLOPs) and multiplied with
# q (einsum bhld,lrd->bhlr: as many products as q k^T, written so), scaled, added to the scores.
block relative_key_attention(x[B, S, H], heads, rows) {
  q = split_heads(linear(x, H, bias = true, name = linear_q), heads)
  k = split_heads(linear(x, H, bias = true, name = linear_k), heads)
  v = split_heads(linear(x, H, bias = true, name = linear_v), heads)
  param distance_embedding[rows, H / heads]
  bias = scale(matmul(q, transpose(k)))   # the einsum with the distances' rows: its products
  p = softmax(scale(matmul(q, transpose(k))) + bias, fp32 = true)
  return linear(merge_heads(matmul(p, v)), H, bias = true, name = linear_out)
}""", "causal_conformer_conv": """# Wav2Vec2-BERT's convolution module (transformers 5.24 modeling_wav2vec2_bert.py Wav2Vec2BertConvolutionModule):
# LayerNorm, a pointwise Conv1d H -> 2H, GLU, a depthwise Conv1d of width kernel on the input padded kernel - 1 on the
# left (causal: S outputs, conv1d), depthwise_layer_norm, SiLU, a pointwise Conv1d H -> H; no biases.
block causal_conformer_conv(x[B, S, H], kernel) {
  t = transpose(dense_conv1d(transpose(layernorm(x, name = layer_norm)), 2 * H, kernel = 1, bias = false, name = pointwise_conv1))
  y = conv1d(slice(t, H) * sigmoid(slice(t, H)), kernel, bias = false, state = false, name = depthwise_conv)
  y = silu(layernorm(y, name = depthwise_layer_norm))
  return transpose(dense_conv1d(transpose(y), H, kernel = 1, bias = false, name = pointwise_conv2))
}"""}


def _silu(m: Module, name: str) -> bool:
    act = m.child(name)
    return act is not None and "silu" in act.cls.lower()


def feed_forward_call(m: Module, arg: str, d) -> str | None:
    """``w2vb_feed_forward(arg, i)`` of a ``Wav2Vec2BertFeedForward`` (intermediate_dense h → i, SiLU, output_dense
    i → h, biases), else None."""
    up, down = _linear(m.child("intermediate_dense")), _linear(m.child("output_dense"))
    if up is None or down is None or m.params or not (up[2] and down[2]) or (up[0], up[1]) != (down[1], down[0]) \
            or not _silu(m, "intermediate_act_fn"):
        return None
    d.blocks.add("w2vb_feed_forward")
    return f"w2vb_feed_forward({arg}, {d.size(up[1], 'MLP intermediate size')}, name = {m.name})"


def attention_call(m: Module, arg: str, d) -> str | None:
    """``relative_key_attention(arg, a, rows)`` of a ``Wav2Vec2BertSelfAttention`` with a ``distance_embedding``
    (linear_q/k/v/out h → h with biases), else None."""
    projs = [_linear(m.child(n)) for n in ("linear_q", "linear_k", "linear_v", "linear_out")]
    table = m.child("distance_embedding")
    rows = table.params.get("weight") if table is not None else None
    if None in projs or rows is None or m.params or any(p[:2] != (projs[0][0],) * 2 or not p[2] for p in projs) \
            or projs[0][0] % rows[1]:
        return None
    d.blocks.add("relative_key_attention")
    heads = projs[0][0] // rows[1]
    return f"relative_key_attention({arg}, {d.size(heads, 'attention heads')}, {rows[0]}, name = {m.name})"


def conv_call(m: Module, arg: str, d) -> str | None:
    """``causal_conformer_conv(arg, kernel)`` of a ``Wav2Vec2BertConvolutionModule`` (the block above; its depthwise
    width the config's ``conv_depthwise_kernel_size``, a number), else None."""
    parts = {c.name: c for c in m.children}
    need = ("layer_norm", "pointwise_conv1", "depthwise_conv", "depthwise_layer_norm", "pointwise_conv2")
    if m.params or any(n not in parts for n in need) or not _silu(m, "activation"):
        return None
    w1, dw, w2 = (parts[n].params.get("weight") for n in ("pointwise_conv1", "depthwise_conv", "pointwise_conv2"))
    if w2 is None or w1 != (2 * w2[0], w2[0], 1) or w2 != (w2[0], w2[0], 1) or dw is None or dw[:2] != (w2[0], 1) \
            or any("bias" in parts[n].params for n in ("pointwise_conv1", "depthwise_conv", "pointwise_conv2")) \
            or parts["depthwise_conv"].attrs.get("padding", 0) != 0:
        return None
    d.blocks.add("causal_conformer_conv")
    return f"causal_conformer_conv({arg}, {dw[2]}, name = {m.name})"


def stacked_front(root: Module, pre: list[Module], sz) -> tuple[list[str], list[str], list[Module]] | None:
    """(input declarations, statements, modules drafted) of Wav2Vec2-BERT's input (modeling_wav2vec2_bert.py
    ``Wav2Vec2BertModel.forward``: ``input_features [b, s, feature_projection_input_dim]``, stacked Mel frames, read by
    ``Wav2Vec2BertFeatureProjection``: its LayerNorm and Linear, written by the caller as any module before the layers);
    the root's ``masked_spec_embed [h]`` as parameters (read only with ``mask_time_indices`` or in training); else None.
    The input's width is the config's number (160: no probed field)."""
    proj = root.child("feature_projection")
    norm, linear = (proj.child("layer_norm"), _linear(proj.child("projection"))) if proj is not None else (None, None)
    if norm is None or linear is None or not pre or pre[0] is not norm or norm.params.get("weight") != (linear[0],):
        return None
    lines = ["x = features"]
    for pname, shape in root.params.items():
        dims = ", ".join(sz.size(n, "masked embedding") for n in shape)
        lines.append(f"param {pname}[{dims}]   # read only with mask_time_indices or in training (parameters only)")
    return [f"input features[b, s, {linear[0]}]   # input_features: stacked Mel frames"], lines, []
