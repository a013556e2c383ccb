"""Recognise CPM-Ant's layers (issue 28 item 2): attention with a segment position bias, over the sequence and the
prompt tokens its forward prepends.

transformers 5.24 modeling_cpmant.py ``CpmAntModel.forward`` prepends ``prompt_length`` prompt tokens to the ids
(``torch.cat((torch.arange(...), input_ids), dim=1)``), runs every layer over the ``s + P`` positions, and keeps the
last ``s`` for the head (``hidden_states[:, self.prompt_length:, :]``). Its ``CpmAntSegmentPositionEmbedding`` is a
table of ``segment_types² + position_bias_num_buckets`` rows and a column per head (the segment pair's bucket, or
the bucketed distance within a segment), looked up once and added to every layer's scores
(``CpmAntAttention.forward``: ``score = score + position_bias``). Each ``CpmAntTransformerBlock`` is a pre-norm
``self_att`` (``layernorm_before_attention``, an RMSNorm with a weight, then ``CpmAntAttention``: ``project_q``,
``project_k``, ``project_v`` H → a·d, ``attention_out`` a·d → H, no bias) and a pre-norm ``ffn``
(``layernorm_before_ffn``, then ``w_in``'s GELU-gated ``w_0`` and ``w_1`` H → i, and ``w_out`` i → H), each adding
the residual itself.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns statements, or None.
"""

from __future__ import annotations

from .blocks import _linear, is_norm, norm_call
from .facts import Module

#: the name the layers' attention reads the position bias by
BIAS = "pos_bias"


def seq_text(n: int | None, sz) -> str | None:
    """The positions ``n`` a module runs in the probe's symbols: ``s``, or ``s + P`` where ``n`` is the probe's
    ``s`` plus one size field (CPM-Ant's prompt tokens); None for anything else."""
    s = sz.probe.s
    if n is None or n == s:
        return "s" if n == s else None
    extra = sz.probe.cover(n - s) if n > s else None
    if extra is None or " " in extra:
        return None
    sz.used.add(extra)
    return f"s + {extra}"


def _rms(m: Module | None, width: int) -> bool:
    """A norm of one weight [width] and no bias (``CpmAntLayerNorm``: ``x · rsqrt(mean(x²) + eps) · weight``, read as
    an RMSNorm by :func:`costgraph.drafting.trace._rms_source`)."""
    return m is not None and is_norm(m) and m.params == {"weight": (width,)}


def bias_line(m: Module, sz, name: str, seq: str) -> str | None:
    """``pos_bias = relative_position_bias(...)`` for a module holding only ``relative_attention_bias``
    [G·G + n_b, a], whose ``num_segments`` (G) and ``num_buckets`` (n_b) say its rows
    (``CpmAntSegmentPositionEmbedding``), looked up over ``seq`` queries and keys; else None."""
    table = m.params.get("relative_attention_bias")
    segments, buckets, heads = (m.attrs.get(a) for a in ("num_segments", "num_buckets", "num_heads"))
    if m.children or list(m.params) != ["relative_attention_bias"] or len(table) != 2 \
            or not all(isinstance(v, int) and v > 0 for v in (segments, buckets, heads)) \
            or table != (segments * segments + buckets, heads):
        return None
    g, nb = sz.size(segments, "segment types"), sz.size(buckets, "position buckets")
    a = sz.size(heads, "attention heads")
    return f"{BIAS} = relative_position_bias({seq}, {seq}, {g} * {g} + {nb}, {a}, name = {name})   # {m.cls}: " \
           "one table for every layer"


def layer_lines(layer: Module, sz) -> list[str] | None:
    """The statements of a CPM-Ant layer (``CpmAntTransformerBlock``): a pre-norm attention block reading
    :data:`BIAS` and a pre-norm GELU-gated MLP block, each adding its residual; else None."""
    kids = [c for c in layer.children if c.order is not None]
    if len(kids) != 2 or layer.params:
        return None
    att, ffn = kids
    attn_norm, attn = (att.child(n) for n in ("layernorm_before_attention", "self_attention"))
    ffn_norm, mlp = (ffn.child(n) for n in ("layernorm_before_ffn", "ffn"))
    if None in (attn_norm, attn, ffn_norm, mlp) or att.params or ffn.params:
        return None
    q, k, v, o = (_linear(attn.child(n)) for n in ("project_q", "project_k", "project_v", "attention_out"))
    gate_up, out = mlp.child("w_in"), _linear(mlp.child("w_out"))
    w0, w1 = (_linear(gate_up.child(n)) if gate_up is not None else None for n in ("w_0", "w_1"))
    heads, head_dim = attn.attrs.get("num_heads"), attn.attrs.get("dim_head")
    if None in (q, k, v, o, w0, w1, out) or attn.params or mlp.params or gate_up.params:
        return None
    hidden, width = q[0], w0[1]
    if not isinstance(heads, int) or heads < 1 or q[1] % heads:
        return None
    head_dim = q[1] // heads if head_dim is None else head_dim
    if any(x != (hidden, heads * head_dim, False) for x in (q, k, v)) or o != (heads * head_dim, hidden, False) \
            or w1 != w0 or w0 != (hidden, width, False) or out != (width, hidden, False) \
            or gate_up.attrs.get("act") not in ("GELU", "gelu") \
            or not (_rms(attn_norm, hidden) and _rms(ffn_norm, hidden)):
        return None
    sz.blocks.add("segment_bias_attention")
    a, d, i = sz.size(heads, "attention heads"), sz.size(head_dim, "attention head size"), sz.size(width, "MLP width")
    return [f"x = x + segment_bias_attention({norm_call(attn_norm, 'x')}, {a}, {d}, {BIAS}, name = {attn.name})",
            f"x = x + geglu({norm_call(ffn_norm, 'x')}, {i}, name = {mlp.name})"]


#: the block a CPM-Ant draft defines itself
SEGMENT_BIAS_BLOCKS = {"segment_bias_attention": """# CPM-Ant's attention (OpenBMB; transformers' CpmAntAttention): q, k, v of
# `heads` heads of `head_dim`, no bias, scores / sqrt(head_dim) plus the position bias [1, heads, S, S] every layer
# shares (segment pairs and bucketed distances), masked softmax, attention_out back to H.
block segment_bias_attention(x[B, S, H], heads, head_dim, bias) {
  q = split_heads(linear(x, heads * head_dim, bias = false, name = project_q), heads)
  k = split_heads(linear(x, heads * head_dim, bias = false, name = project_k), heads)
  v = split_heads(linear(x, heads * head_dim, bias = false, name = project_v), heads)
  k = cache(k, name = k_cache)
  v = cache(v, name = v_cache)
  p = softmax(matmul(q, transpose(k)) + bias)
  return linear(merge_heads(matmul(p, v)), H, bias = false, name = attention_out)
}"""}
