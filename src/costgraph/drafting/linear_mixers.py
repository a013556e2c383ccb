"""Recognise linear-attention mixers of their own form as blocks the draft defines itself: MiniMax's lightning
attention (the bundled models/minimax.cg's ``lightning``), Kimi Delta Attention (models/kimi_linear.cg's ``kda``),
LFM's gated short convolution.

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


#: transformers 5.24 ``chunk_kda``'s torch fallback (modeling_kimi_linear.py ``torch_chunk_kda``): ``chunk_size=64``
KDA_CHUNK = 64


def kda_call(m: Module, arg: str, d) -> str | None:
    """Kimi Delta Attention (transformers 5.24 ``KimiLinearDeltaAttention``): ``q_proj``, ``k_proj``, ``v_proj``
    H → hl·dl, a depthwise ``Conv1d`` over the three padded by K − 1 without bias, the ``forget_gate``
    (``f_a_proj`` H → dl, ``f_b_proj`` dl → hl·dl, owning ``dt_bias`` [hl·dl] and ``A_log`` [1, 1, hl, 1]),
    ``b_proj`` H → hl, the output gate ``g_a_proj`` H → dl, ``g_b_proj`` dl → hl·dl, a gated RMSNorm of weight [dl]
    ``o_norm``, ``o_proj`` hl·dl → H, no bias; the draft's ``kda`` (as models/kimi_linear.cg's, chunks of 64: the
    FLOPs of transformers' chunked torch path, what FlopCounterMode counts), or None."""
    names = ("q_proj", "k_proj", "v_proj", "b_proj", "o_proj")
    q, k, v, b, o = (_linear(m.child(n)) for n in names)
    conv, gate, norm = m.child("conv1d"), m.child("forget_gate"), m.child("o_norm")
    heads, head_dim = m.attrs.get("num_heads"), m.attrs.get("head_dim")
    if None in (q, k, v, b, o, conv, gate, norm) or m.params \
            or not all(isinstance(x, int) and x > 0 for x in (heads, head_dim)):
        return None
    width, hidden = heads * head_dim, q[0]
    full = _full_rank_gates(m, gate, hidden, width)
    if full is None and not _low_rank_gates(m, gate, hidden, head_dim, width):
        return None
    kernel = conv.params.get("weight", (0, 0, 0))[2]
    if gate.params not in ({"dt_bias": (width,), "A_log": (1, 1, heads, 1)}, {"A_log": (heads,), "dt_bias": (width,)}) \
            or any(x != (hidden, width, False) for x in (q, k, v)) or b != (hidden, heads, False) \
            or o != (width, hidden, False) or norm.params != {"weight": (head_dim,)} or "bias" in conv.params \
            or tuple(conv.params.get("weight", ())) != (3 * width, 1, kernel) or conv.attrs.get("groups") != 3 * width \
            or conv.attrs.get("padding") != kernel - 1:
        return None
    d.blocks.add("kda")
    sizes = [d.size(heads, "KDA heads"), d.size(head_dim, "KDA head size"), d.size(kernel, "convolution width")]
    rank = ", low_rank = false" if full else ""
    return f"kda({arg}, {', '.join(sizes)}, chunk = {KDA_CHUNK}{rank}, name = {m.name})"


def _low_rank_gates(m: Module, gate: Module, hidden: int, head_dim: int, width: int) -> bool:
    """Kimi Linear's gates: the forget gate's ``f_a_proj`` H → dl, ``f_b_proj`` dl → hl·dl, the output gate's
    ``g_a_proj`` and ``g_b_proj`` alike (ten children)."""
    fa, fb = _linear(gate.child("f_a_proj")), _linear(gate.child("f_b_proj"))
    ga, gb = _linear(m.child("g_a_proj")), _linear(m.child("g_b_proj"))
    return len(m.children) == 10 and len(gate.children) == 2 and fa is not None and fa == ga \
        and fa == (hidden, head_dim, False) and fb == gb and fb == (head_dim, width, False)


def _full_rank_gates(m: Module, gate: Module, hidden: int, width: int) -> bool | None:
    """Bailing's gates (transformers 5.24 modeling_bailing_hybrid.py ``BailingHybridForgetGate``'s ``f_proj`` and
    ``BailingHybridDeltaAttention``'s ``g_proj``, each H → hl·dl, nine children): True, else None."""
    f, g = _linear(gate.child("f_proj")), _linear(m.child("g_proj"))
    ok = len(m.children) == 9 and len(gate.children) == 1 and f == g and f == (hidden, width, False)
    return True if ok else None


#: the blocks a draft defines itself when it uses them
def short_conv_call(m: Module, arg: str, d) -> str | None:
    """LFM's gated short convolution (transformers 5.24 modeling_lfm3.py ``Lfm3ShortConv``, modeling_lfm2.py's alike):
    ``in_proj`` H → 3·H split into B, C and x; ``B · x`` through a depthwise causal ``Conv1d`` of ``conv_L_cache`` taps
    padded by K − 1 (``causal_conv1d_fn``'s torch path: ``F.conv1d`` over S + K − 1 positions, cut to S), times C;
    ``out_proj`` H → H; the biases all ``conv_bias``. The draft's ``short_conv``, or None."""
    inp, out, conv = _linear(m.child("in_proj")), _linear(m.child("out_proj")), m.child("conv")
    if None in (inp, out) or conv is None or m.params or conv.cls != "Conv1d" \
            or len([c for c in m.children if c.param_count()]) != 3:
        return None
    hidden, (channels, _, kernel) = inp[0], conv.params.get("weight", (0, 0, 0))
    bias = inp[2]
    if inp[1] != 3 * hidden or out != (hidden, hidden, bias) or channels != hidden \
            or tuple(conv.params["weight"]) != (hidden, 1, kernel) or conv.attrs.get("groups") != hidden \
            or conv.attrs.get("padding") != kernel - 1 or ("bias" in conv.params) != bias:
        return None
    d.blocks.add("short_conv")
    opts = ", bias = true" if bias else ""
    return f"short_conv({arg}, {d.size(kernel, 'convolution width')}{opts}, name = {m.name})"


LINEAR_BLOCKS = {"short_conv": """# LFM's gated short convolution (Liquid AI; transformers 5.24 Lfm3ShortConv): in_proj H -> 3H split into B, C, x;
# B * x through a depthwise causal Conv1d (padding K - 1, cut to S), times C; out_proj H -> H.
block short_conv(x[B, S, H], kernel, bias = false) {
  b, c, u = split(linear(x, 3 * H, bias = bias, name = in_proj), 3)
  return linear(c * conv1d(b * u, kernel, bias = bias, padded = true, name = conv), H, bias = bias, name = out_proj)
}""", "lightning": """# MiniMax's lightning attention (MiniMax 2025; transformers' MiniMaxLightningAttention; models/minimax.cg's
# lightning): q, k, v per head from qkv_proj and SiLU, the linear attention in blocks of `block` (its state
# [B, heads, d, d]; the decays are buffers), an RMSNorm over all heads times sigmoid(output_gate(x)), out_proj.
block lightning(x[B, S, H], heads, head_dim, block = none) {
  q, k, v = split(split_heads(silu(linear(x, 3 * heads * head_dim, bias = false, name = qkv_proj)), heads), 3)
  y = lightning_attention(q, k, v, block = block, name = core)
  y = rmsnorm(merge_heads(y), name = norm) * sigmoid(linear(x, heads * head_dim, bias = false, name = output_gate))
  return linear(y, H, bias = false, name = out_proj)
}""", "kda": """# Kimi Delta Attention (Moonshot AI 2025; transformers' KimiLinearDeltaAttention; models/kimi_linear.cg's kda):
# q, k, v through a depthwise causal Conv1d (padding K - 1, cut to S, no bias) and SiLU, a per-channel forget gate
# (f_a_proj, f_b_proj: low rank head_dim), beta from b_proj, the delta rule with per-channel decay (A_log [heads],
# dt_bias [heads head_dim]; chunk: the chunked torch path's FLOPs, chunks of 64), a gated RMSNorm per head times
# sigmoid(g_b_proj(g_a_proj(x))), o_proj back. low_rank = false: both gates one full-rank projection H -> heads
# head_dim, f_proj and g_proj (Bailing's BailingHybridDeltaAttention).
block kda(x[B, S, H], heads, head_dim, kernel, chunk = none, low_rank = true) {
  q = linear(x, heads * head_dim, bias = false, name = q_proj)
  k = linear(x, heads * head_dim, bias = false, name = k_proj)
  v = linear(x, heads * head_dim, bias = false, name = v_proj)
  qkv = silu(conv1d(concat(concat(q, k), v), kernel, bias = false, padded = true, name = conv1d))
  if low_rank {
    g = linear(linear(x, head_dim, bias = false, name = f_a_proj), heads * head_dim, bias = false, name = f_b_proj)
  } else {
    g = linear(x, heads * head_dim, bias = false, name = f_proj)
  }
  beta = linear(x, heads, bias = false, name = b_proj)
  y = kimi_delta_rule(qkv, g, beta, heads, head_dim, chunk = chunk, name = core)
  if low_rank {
    gate = linear(linear(x, head_dim, bias = false, name = g_a_proj), heads * head_dim, bias = false, name = g_b_proj)
  } else {
    gate = linear(x, heads * head_dim, bias = false, name = g_proj)
  }
  y = rmsnorm(y, name = o_norm) * sigmoid(split_heads(gate, heads))
  return linear(merge_heads(y), H, bias = false, name = o_proj)
}"""}
