"""Recognise attention of its own form as a block the draft defines itself: differential attention
(DiffLlama; Ye et al. 2024, "Differential Transformer", arXiv:2410.05258); BitNet's attention and MLP with an
RMSNorm before their output projection (Ma et al. 2024, "The Era of 1-bit LLMs", arXiv:2402.17764); Laguna's
attention with a softplus gate per head; Doge's dynamic mask attention.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call as model-language text,
or None; the blocks' text (:data:`ATTENTION_BLOCKS`) follows transformers 5.24's modeling code of each mixer.
"""

from __future__ import annotations

from .blocks import K, O, Q, V, _linear, _window, head_sizes, squared_relu
from .facts import Module

#: DiffLlamaAttention's own parameters (transformers 5.24 modeling_diffllama.py ``DiffLlamaAttention.__init__``):
#: λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init, each vector [head_dim]
DIFF_LAMBDAS = ("lambda_q1", "lambda_k1", "lambda_q2", "lambda_k2")


def diff_attention_call(m: Module, arg: str, d) -> str | None:
    """Differential attention (transformers 5.24 modeling_diffllama.py ``DiffLlamaAttention.forward``):
    ``q_proj`` H → a·d, ``k_proj`` and ``v_proj`` H → kv·d, rotary on q and k; V split into the halves of its KV
    heads, each repeated back to kv heads; two eager attention calls sharing Q and K (``softmax(QKᵀ/√d)·V₁`` and
    ``·V₂``, each Q·Kᵀ computed again), concatenated, chunked along the heads and combined as ``y₁ − λ·y₂``; an
    RMSNorm over 2·d without a weight (``groupnorm``) times ``1 − λ_init``; ``o_proj`` a·d → H. The four λ vectors
    [d] are parameters; ``attention_bias`` (every projection's bias) is not read (None). The draft's
    ``diff_attention``."""
    if set(m.params) != set(DIFF_LAMBDAS):
        return None
    q, k, v, o = (_linear(m.child(*names)) for names in (Q, K, V, O))
    norm = m.child("groupnorm")
    head_dim = m.attrs.get("head_dim")
    if None in (q, k, v, o) or norm is None or not isinstance(head_dim, int) or head_dim < 1 \
            or any(x[2] for x in (q, k, v, o)) or any(m.params[n] != (head_dim,) for n in DIFF_LAMBDAS) \
            or norm.params or norm.children or "rms" not in norm.cls.lower() or k[1] != v[1] \
            or q[1] % head_dim or k[1] % (2 * head_dim) or o[:2] != (q[1], q[0]) \
            or len([c for c in m.children if c.param_count()]) != 4:
        return None
    d.blocks.add("diff_attention")
    sizes = head_sizes(d, q[1] // head_dim, k[1], head_dim)
    return f"diff_attention({arg}, {', '.join(sizes)}, name = {m.name})"


def _rms(m: Module | None, width: int) -> bool:
    """``m`` is an RMSNorm with a weight of ``width`` and nothing else."""
    return m is not None and "rms" in m.cls.lower() and m.params == {"weight": (width,)} and not m.children


def subnorm_call(m: Module, arg: str, d) -> str | None:
    """BitNet's blocks (transformers 5.24 modeling_bitnet.py): ``BitNetAttention`` (q, k, v, rotary, eager attention,
    then ``attn_sub_norm``, an RMSNorm over a·d, before ``o_proj``; no bias) as the draft's ``subnorm_attention``;
    ``BitNetMLP`` (``down_proj(ffn_sub_norm(relu²(gate_proj(x)) · up_proj(x)))``, no bias) as ``subnorm_glu``;
    else None."""
    if m.params:
        return None
    sub = m.child("attn_sub_norm")
    q, k, v, o = (_linear(m.child(*names)) for names in (Q, K, V, O))
    head_dim = m.attrs.get("head_dim")
    if sub is not None and None not in (q, k, v, o) and isinstance(head_dim, int) and head_dim > 0 \
            and not any(x[2] for x in (q, k, v, o)) and _rms(sub, q[1]) and k[1] == v[1] and o[:2] == (q[1], q[0]) \
            and not q[1] % head_dim and not k[1] % head_dim and len(m.children) == 5:
        d.blocks.add("subnorm_attention")
        sizes = head_sizes(d, q[1] // head_dim, k[1], head_dim)
        return f"subnorm_attention({arg}, {', '.join(sizes)}, name = {m.name})"
    gate, up, down, sub = (_linear(m.child("gate_proj")), _linear(m.child("up_proj")), _linear(m.child("down_proj")),
                           m.child("ffn_sub_norm"))
    if None in (gate, up, down) or sub is None or any(x[2] for x in (gate, up, down)) or gate != up \
            or down[:2] != (up[1], up[0]) or not _rms(sub, up[1]) or not squared_relu(m) \
            or len([c for c in m.children if c.param_count()]) != 4:
        return None
    d.blocks.add("subnorm_glu")
    return f"subnorm_glu({arg}, {d.size(up[1], 'MLP width')}, name = {m.name})"


def head_gated_call(m: Module, arg: str, d) -> str | None:
    """Laguna's attention (transformers 5.24 modeling_laguna.py ``LagunaAttention``, ``gating`` per head): q, k, v
    without bias, RMSNorm on each head's q and k, rotary, eager attention; each head's output times
    ``softplus(g_proj(x))``, one gate per head (``g_proj`` H → a); ``o_proj``. The draft's ``head_gated_attention``,
    or None (a gate per channel, ``g_proj`` H → a·d, is not read). LFM3's attention (modeling_lfm3.py
    ``Lfm3Attention``) gates each head by ``sigmoid(g_proj(x))`` instead (``sigmoid_gate = true``); the function is
    read from the forward's source (:func:`costgraph.drafting.trace._gate_fn`)."""
    q, k, v, o, g = (_linear(m.child(*names)) for names in (Q, K, V, O, ("g_proj",)))
    norms = [m.child(n) for n in ("q_norm", "k_norm")]
    head_dim, heads = m.attrs.get("head_dim"), m.attrs.get("num_heads")
    if not isinstance(heads, int) and isinstance(head_dim, int) and head_dim > 0 and q is not None \
            and q[1] % head_dim == 0:
        heads = q[1] // head_dim
    if m.attrs.get("gate_fn") not in ("sigmoid", "softplus") \
            or m.params or None in (q, k, v, o, g) or not all(isinstance(x, int) and x > 0 for x in (head_dim, heads)) \
            or any(x[2] for x in (q, k, v, o, g)) or not all(_rms(n, head_dim) for n in norms) \
            or q[1] != heads * head_dim or g[1] != heads or k[1] != v[1] or k[1] % head_dim \
            or o[:2] != (q[1], q[0]) or len(m.children) != 7:
        return None
    d.blocks.add("head_gated_attention")
    sizes = head_sizes(d, heads, k[1], head_dim)
    opts = _window(m, d) + (["sigmoid_gate = true"] if m.attrs["gate_fn"] == "sigmoid" else [])
    return f"head_gated_attention({arg}, {', '.join(sizes + opts)}, name = {m.name})"


def output_gated_call(m: Module, arg: str, d) -> str | None:
    """AFMoE's attention (transformers 5.24 modeling_afmoe.py ``AfmoeAttention``): q, k, v without bias, RMSNorm on each
    head's q and k, rotary (on the sliding layers only: no product either way), eager attention; the output times
    ``sigmoid(gate_proj(x))``, a gate per channel (``gate_proj`` H → a·d); ``o_proj``. Beam's attention
    (transformers 5.24 modeling_beam.py ``BeamAttention``) adds ``gate_bias`` [a], one bias per head broadcast over
    the head's channels, to the gate before the sigmoid (``gate_bias = true``: a parameters, an addition, no
    product). HRM's attention (transformers 5.24 modeling_hrm_text.py ``HrmTextAttention``: ``gate_proj`` the same, no
    norm on q and k) is read with ``qk_norm = false``. The draft's ``output_gated_attention``, or None."""
    q, k, v, o, g = (_linear(m.child(*names)) for names in (Q, K, V, O, ("gate_proj",)))
    norms = [m.child(n) for n in ("q_norm", "k_norm")]
    qk_norm = norms != [None, None]
    head_dim = m.attrs.get("head_dim")
    if None in (q, k, v, o, g) or not isinstance(head_dim, int) or head_dim < 1 \
            or any(x[2] for x in (q, k, v, o, g)) or (qk_norm and not all(_rms(n, head_dim) for n in norms)) \
            or g != q or k[1] != v[1] or q[1] % head_dim or k[1] % head_dim or o[:2] != (q[1], q[0]) \
            or len([c for c in m.children if c.param_count()]) != (7 if qk_norm else 5) \
            or m.params not in ({}, {"gate_bias": (q[1] // head_dim,)}):
        return None
    d.blocks.add("output_gated_attention")
    sizes = head_sizes(d, q[1] // head_dim, k[1], head_dim)
    bias = ["gate_bias = true"] if m.params else []
    plain = [] if qk_norm else ["qk_norm = false"]
    return f"output_gated_attention({arg}, {', '.join(sizes + _window(m, d) + bias + plain)}, name = {m.name})"


def dynamic_mask_call(m: Module, arg: str, d) -> str | None:
    """Doge's attention (transformers 5.24 modeling_doge.py ``DogeAttention``, dynamic mask attention): q, k, v, RMSNorm
    on each head's q and k, rotary; ``dt_proj`` (kv·d → kv) on V's heads and ``A`` [kv] make the dynamic mask
    ``exp(A · softplus(dt_proj(v)))`` added to the scores (a top-k of ``keep_window_size`` keys per query only beyond
    that many: selection, no product); eager attention; ``o_proj``. ``attention_bias`` is every projection's bias
    (dt_proj's too). The draft's ``dynamic_mask_attention``, or None."""
    q, k, v, o, dt = (_linear(m.child(*names)) for names in (Q, K, V, O, ("dt_proj",)))
    norms = [m.child(n) for n in ("q_norm", "k_norm")]
    head_dim = m.attrs.get("head_dim")
    if None in (q, k, v, o, dt) or not isinstance(head_dim, int) or head_dim < 1 or k[1] % head_dim \
            or q[1] % head_dim or not all(_rms(n, head_dim) for n in norms) or k[1] != v[1] \
            or o[:2] != (q[1], q[0]) or dt[:2] != (v[1], v[1] // head_dim) \
            or len({x[2] for x in (q, k, v, o, dt)}) != 1 or m.params != {"A": (v[1] // head_dim,)} \
            or len([c for c in m.children if c.param_count()]) != 7:
        return None
    d.blocks.add("dynamic_mask_attention")
    sizes = head_sizes(d, q[1] // head_dim, k[1], head_dim)
    return f"dynamic_mask_attention({arg}, {', '.join(sizes)}{', bias = true' if q[2] else ''}, name = {m.name})"


#: the attention blocks a draft defines itself
ATTENTION_BLOCKS = {"dynamic_mask_attention": """# Dynamic mask attention (Doge; transformers 5.24 DogeAttention): RMSNorm on
# each head's q and k, rotary (no product); dt_proj (kv heads of V -> one value per KV head) and A [kv_heads] make a
# mask exp(A * softplus(dt)) added to the scores (an addition: no product; a top-k only beyond keep_window_size keys).
block dynamic_mask_attention(x[B, S, H], heads, kv_heads, head_dim, bias = false) {
  q = rope(rmsnorm(split_heads(linear(x, heads * head_dim, bias = bias, name = q_proj), heads), name = q_norm))
  k = rope(rmsnorm(split_heads(linear(x, kv_heads * head_dim, bias = bias, name = k_proj), kv_heads), name = k_norm))
  vf = linear(x, kv_heads * head_dim, bias = bias, name = v_proj)
  param A[kv_heads]
  dt = linear(vf, kv_heads, bias = bias, name = dt_proj)
  v = split_heads(vf, kv_heads)
  k = repeat_kv(cache(k, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true)
  y = merge_heads(matmul(p, v, causal = true))
  return linear(y, H, bias = bias, name = o_proj)
}""", "output_gated_attention": """# Attention whose output is gated per channel by sigmoid(gate_proj(x)) before o_proj (AFMoE; transformers 5.24
# AfmoeAttention): RMSNorm on each head's q and k; rotary costs no product. gate_bias: one bias per head added to
# the gate before the sigmoid, broadcast over the head's channels (Beam; transformers 5.24 BeamAttention's gate_bias).
# qk_norm = false: no norm on q and k (HRM; transformers 5.24 HrmTextAttention).
block output_gated_attention(x[B, S, H], heads, kv_heads, head_dim, window = none, gate_bias = false, qk_norm = true) {
  q = split_heads(linear(x, heads * head_dim, bias = false, name = q_proj), heads)
  k = split_heads(linear(x, kv_heads * head_dim, bias = false, name = k_proj), kv_heads)
  if qk_norm {
    q = rmsnorm(q, name = q_norm)
    k = rmsnorm(k, name = k_norm)
  }
  q = rope(q)
  k = rope(k)
  v = split_heads(linear(x, kv_heads * head_dim, bias = false, name = v_proj), kv_heads)
  g = linear(x, heads * head_dim, bias = false, name = gate_proj)
  if gate_bias {
    param gate_bias[1, heads, 1, 1]
    g = merge_heads(split_heads(g, heads) + gate_bias)
  }
  gate = sigmoid(g)
  k = repeat_kv(cache(k, window = window, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, window = window, name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), window = window, causal = true)), fp32 = true)
  y = merge_heads(matmul(p, v, window = window, causal = true))
  return linear(y * gate, H, bias = false, name = o_proj)
}""", "diff_attention": """# Differential attention (DiffLlama; Ye et al. 2024, arXiv:2410.05258;
# transformers 5.24 DiffLlamaAttention): two
# attention calls sharing Q and K (each computes Q·Kᵀ again), over the two halves of V's KV heads repeated back
# to kv heads (P·V costs as with the whole V); y1 − λ·y2, the four λ vectors [d] parameters; an RMSNorm without a
# weight over each pair of heads; o_proj back. Rotary costs no product.
block diff_attention(x[B, S, H], heads, kv_heads, head_dim) {
  q = rope(split_heads(linear(x, heads * head_dim, bias = false, name = q_proj), heads))
  k = rope(split_heads(linear(x, kv_heads * head_dim, bias = false, name = k_proj), kv_heads))
  v = split_heads(linear(x, kv_heads * head_dim, bias = false, name = v_proj), kv_heads)
  k = repeat_kv(cache(k, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, name = v_cache), heads / kv_heads)
  param lambda_q1[head_dim]
  param lambda_k1[head_dim]
  param lambda_q2[head_dim]
  param lambda_k2[head_dim]
  p1 = softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true)
  p2 = softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true)
  y = matmul(p1, v, causal = true) - matmul(p2, v, causal = true)
  y = rmsnorm(y, weight = false, name = groupnorm)
  return linear(merge_heads(y), H, bias = false, name = o_proj)
}""", "subnorm_attention": """# Attention with an RMSNorm over its output before o_proj (BitNet b1.58;
# transformers 5.24 BitNetAttention's attn_sub_norm); rotary costs no product.
block subnorm_attention(x[B, S, H], heads, kv_heads, head_dim) {
  q = rope(split_heads(linear(x, heads * head_dim, bias = false, name = q_proj), heads))
  k = rope(split_heads(linear(x, kv_heads * head_dim, bias = false, name = k_proj), kv_heads))
  v = split_heads(linear(x, kv_heads * head_dim, bias = false, name = v_proj), kv_heads)
  k = repeat_kv(cache(k, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true)
  y = rmsnorm(merge_heads(matmul(p, v, causal = true)), name = attn_sub_norm)
  return linear(y, H, bias = false, name = o_proj)
}""", "head_gated_attention": """# Attention with a softplus gate per head (Laguna; transformers 5.24
# LagunaAttention): RMSNorm on each head's q and k, rotary (no product), each head's output times
# softplus(g_proj(x)), g_proj H -> heads; sigmoid_gate: sigmoid(g_proj(x)) instead (LFM3's Lfm3Attention).
block head_gated_attention(x[B, S, H], heads, kv_heads, head_dim, window = none, sigmoid_gate = false) {
  q = rope(rmsnorm(split_heads(linear(x, heads * head_dim, bias = false, name = q_proj), heads), name = q_norm))
  k = rope(rmsnorm(split_heads(linear(x, kv_heads * head_dim, bias = false, name = k_proj), kv_heads), name = k_norm))
  v = split_heads(linear(x, kv_heads * head_dim, bias = false, name = v_proj), kv_heads)
  k = repeat_kv(cache(k, window = window, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, window = window, name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), window = window, causal = true)), fp32 = true)
  g = split_heads(linear(x, heads, bias = false, name = g_proj), heads)
  if sigmoid_gate { g = sigmoid(g) } else { g = softplus(g) }
  y = merge_heads(matmul(p, v, window = window, causal = true) * g)
  return linear(y, H, bias = false, name = o_proj)
}""", "subnorm_glu": """# A gated MLP with squared ReLU and an RMSNorm before down_proj (BitNet b1.58;
# transformers 5.24 BitNetMLP: down_proj(ffn_sub_norm(relu2(gate_proj(x)) * up_proj(x)))).
block subnorm_glu(x[B, S, H], width) {
  y = relu2(linear(x, width, bias = false, name = gate_proj)) * linear(x, width, bias = false, name = up_proj)
  return linear(rmsnorm(y, name = ffn_sub_norm), H, bias = false, name = down_proj)
}"""}
