"""Recognise a sequence mixer that keeps a fixed-size state (Griffin's recurrent block, Mamba's and Mamba-2's
mixers, Gated DeltaNet) as a block the draft defines itself, and pick the recogniser of a layer's module.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call as model-language text,
or None; the blocks' text (:data:`RECURRENT_BLOCKS`) follows transformers 5.24's modeling code of each mixer and
the bundled files that describe them (models/mamba.cg, models/falcon_h1.cg, models/qwen3_next.cg).
"""

from __future__ import annotations

from . import blocks
from .blocks import FUSED_QKV, GATED, K, O, PLAIN, Q, QK_NORMS, ROUTERS, V, _linear, _only, activation, is_norm
from .blocks import attention_call, mla_call, mlp_call, moe_call
from .attention_variants import ATTENTION_BLOCKS, diff_attention_call, dynamic_mask_call, head_gated_call, \
    output_gated_call, subnorm_call
from .experts import EXPERT_BLOCKS, expert_call
from .linear_mixers import LINEAR_BLOCKS, kda_call, lightning_call, short_conv_call
from .rwkv import RWKV_BLOCKS, rwkv_call
from .value_dim_attention import VALUE_DIM_BLOCKS, value_dim_call
from .mla_forms import MLA_BLOCKS, dsa_call, gated_dsa_call, mla_full_q_call
from .gated_norms import GATED_NORM_BLOCKS
from .segment_bias import SEGMENT_BIAS_BLOCKS
from .ngram_attention import NGRAM_BLOCKS, ngram_attention_call
from .zaya import ZAYA_BLOCKS
from .parallel_experts import PARALLEL_EXPERT_BLOCKS, moa_attention_call, parallel_moe_call
from .bert_conformer import BERT_CONFORMER_BLOCKS, attention_call as relative_key_call, conv_call as causal_conv_call, \
    feed_forward_call as w2vb_ffn_call
from .fast_conformer import FAST_CONFORMER_BLOCKS
from .speech_attention import SPEECH_ATTENTION_BLOCKS, conformer_attention_call, conformer_conv_call, wavlm_call
from .text_encoders import text_encoder_call     # k28text13: GTE's MLP, ESM C's attention
from .facts import Module

DELTANET_OWN = {"A_log", "dt_bias"}
#: transformers 5.24 ``torch_chunk_gated_delta_rule``'s ``chunk_size = 64`` (modeling_qwen3_next.py): no config field
DELTA_CHUNK = 64


def deltanet_call(m: Module, arg: str, d) -> str | None:
    """Gated DeltaNet (Yang et al. 2024; transformers' ``Qwen3NextGatedDeltaNet``): ``in_proj_qkvz`` H → 2·hk·dk +
    2·hv·dv, ``in_proj_ba`` H → 2·hv, a depthwise ``Conv1d`` over q, k, v padded by K − 1 without bias, the gated
    delta rule owning ``A_log`` and ``dt_bias`` [hv], a gated RMSNorm of weight [dv], ``out_proj``; as the draft's
    ``gated_deltanet`` (FLOPs of the chunked torch path, chunks of 64), or None."""
    qkvz, ba, out = (_linear(m.child(n)) for n in ("in_proj_qkvz", "in_proj_ba", "out_proj"))
    split = qkvz is None and ba is None     # Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a: as one of each
    separate = split and m.child("q_proj") is not None     # OLMo-Hybrid's q, k, v, g, b, a and o projections
    z_name = "g_proj" if separate else "in_proj_z"
    if separate:
        out = _linear(m.child("o_proj"))
        parts = [_linear(m.child(n)) for n in ("q_proj", "k_proj", "v_proj", "g_proj", "b_proj", "a_proj")]
        if None in parts or parts[0] != parts[1]:
            return None
        parts = [(parts[0][0], parts[0][1] + parts[1][1] + parts[2][1], parts[0][2]), *parts[3:]]
    elif split:
        parts = [_linear(m.child(n)) for n in ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")]
    if split:
        if None in parts or any(p[0] != parts[0][0] or p[2] for p in parts) or parts[2] != parts[3]:
            return None
        qkvz, ba = (parts[0][0], parts[0][1] + parts[1][1], False), (parts[0][0], 2 * parts[2][1], False)
    conv, norm = m.child("conv1d"), m.child("o_norm" if separate else "norm")
    hk, dk = m.attrs.get("num_k_heads"), m.attrs.get("head_k_dim")
    if None in (qkvz, ba, out) or conv is None or norm is None or set(m.params) != DELTANET_OWN \
            or not all(isinstance(v, int) and v > 0 for v in (hk, dk)) or len(set(m.params.values())) != 1:
        return None
    (hv,), dv = m.params["A_log"], norm.params.get("weight", (0,))[0]
    kernel, channels = conv.params.get("weight", (0, 0, 0))[2], 2 * hk * dk + hv * dv
    if split and m.child(z_name).params["weight"][0] != hv * dv:
        return None
    if qkvz != (out[1], 2 * hk * dk + 2 * hv * dv, False) or ba != (out[1], 2 * hv, False) or out[0] != hv * dv \
            or out[2] or set(norm.params) != {"weight"} or "bias" in conv.params or hv % hk \
            or tuple(conv.params.get("weight", ())) != (channels, 1, kernel) or conv.attrs.get("groups") != channels \
            or conv.attrs.get("padding") != kernel - 1:
        return None
    d.blocks.add("gated_deltanet")
    sizes = [d.size(hk, "key heads"), d.size(hv, "value heads"), d.size(dk, "key head size"),
             d.size(dv, "value head size"), d.size(kernel, "convolution width")]
    form = ", separate = true" if separate else ", split = true" if split else ""
    return f"gated_deltanet({arg}, {', '.join(sizes)}, chunk = {DELTA_CHUNK}{form}, name = {m.name})"


RG_LRU = {"recurrent_param", "input_gate_weight", "input_gate_bias", "recurrent_gate_weight", "recurrent_gate_bias"}


def recurrent_call(m: Module, arg: str, d) -> str | None:
    """Griffin's recurrent block (transformers' ``RecurrentGemmaRecurrentBlock``: ``linear_y`` then GeLU,
    ``linear_x`` then a depthwise ``Conv1d`` padded by K − 1 and the RG-LRU ``rg_lru``, their product
    through ``linear_out``, every linear with a bias) as the draft's ``griffin_recurrent``, or None."""
    y, xs, out = (_linear(m.child(n)) for n in ("linear_y", "linear_x", "linear_out"))
    conv, lru = m.child("conv_1d"), m.child("rg_lru")
    if None in (y, xs, out) or conv is None or lru is None or m.params or lru.children or set(lru.params) != RG_LRU:
        return None
    width, (heads, block, _), kernel = y[1], lru.params["input_gate_weight"], conv.params.get("weight", (0, 0, 0))
    if not (y[2] and xs[2] and out[2]) or xs[1] != width or heads * block != width or activation(m) != "gelu" \
            or tuple(conv.params.get("weight", ())) != (width, 1, kernel[2]) or "bias" not in conv.params \
            or conv.attrs.get("groups") != width or conv.attrs.get("padding") != kernel[2] - 1:
        return None
    d.blocks.add("griffin_recurrent")
    sizes = [d.size(width, "recurrent width"), d.size(heads, "recurrent heads"), d.size(kernel[2], "convolution width")]
    return f"griffin_recurrent({arg}, {', '.join(sizes)}, name = {m.name})"


def mamba_call(m: Module, arg: str, d) -> str | None:
    """Mamba's mixer (transformers' ``MambaMixer``: ``in_proj`` H → 2D, a depthwise ``Conv1d`` padded by
    K − 1, ``x_proj`` D → R + 2N, ``dt_proj``'s weight applied by hand, the selective scan owning ``A_log``
    [D, N] and ``D`` [D], ``out_proj``) as the draft's ``mamba_mixer``, or None."""
    inp, xp, dt, out = (_linear(m.child(n)) for n in ("in_proj", "x_proj", "dt_proj", "out_proj"))
    conv = m.child("conv1d")
    if None in (inp, xp, dt, out) or conv is None or set(m.params) != {"A_log", "D"}:
        return None
    inner, state = m.params["A_log"]
    kernel = conv.params.get("weight", (0, 0, 0))[2]
    if inp[1] != 2 * inner or xp[:2] != (inner, dt[0] + 2 * state) or dt[1] != inner or not dt[2] or xp[2] \
            or out[0] != inner or inp[2] != out[2] or activation(m) != "silu" or conv.attrs.get("groups") != inner \
            or conv.attrs.get("padding") != kernel - 1 or tuple(conv.params["weight"]) != (inner, 1, kernel):
        return None
    norms = [m.child(n) for n in ("dt_layernorm", "b_layernorm", "c_layernorm")]
    weights = {"weight" in n.params for n in norms if n is not None}
    if any(n is not None and not is_norm(n) for n in norms) or (any(norms) and (None in norms or len(weights) > 1)):
        return None
    d.blocks.add("mamba_mixer")
    sizes = [d.size(inner, "inner width"), d.size(state, "state size"), d.size(dt[0], "Δ rank"),
             d.size(kernel, "convolution width")]
    opts = ("" if "bias" in conv.params else ", conv_bias = false") + (", proj_bias = true" if inp[2] else "")
    if weights:      # RMSNorm on Δ, B and C: Jamba's (with weights), FalconMamba's (weightless)
        opts += ", inner_norms = true" + ("" if True in weights else ", norm_weight = false")
    return f"mamba_mixer({arg}, {', '.join(sizes)}{opts}, name = {m.name})"


MAMBA2_OWN = {"A_log", "D", "dt_bias"}


def mamba2_call(m: Module, arg: str, d) -> str | None:
    """A Mamba-2 mixer (Dao & Gu 2024; transformers 5.24's ``Mamba2Mixer`` and its copies ``BambaMixer``,
    ``FalconH1Mixer``, ``GraniteMoeHybridMambaLayer``, ``NemotronHMamba2Mixer``, ``Zamba2MambaMixer``):
    ``in_proj`` H → 2·D + 2·G·N + Hm (the gate z, x, B, C and dt), a depthwise ``Conv1d`` over x, B and C padded
    by K − 1, the SSD scan owning ``A_log``, ``D``, ``dt_bias`` [Hm], a gated RMSNorm of weight [D] (or none:
    Falcon-H1's ``nn.Identity`` without ``mamba_rms_norm``), ``out_proj`` D → H; as the draft's ``mamba2_mixer``,
    or None. G and N are the module's ``n_groups`` and ``ssm_state_size``; the chunk its ``chunk_size``
    (transformers' ``mamba2_chunk_scan`` torch path, what ``FlopCounterMode`` counts)."""
    inp, out = _linear(m.child("in_proj")), _linear(m.child("out_proj"))
    conv, norm = m.child("conv1d"), m.child("norm")
    groups, state, chunk = (m.attrs.get(a) for a in ("n_groups", "ssm_state_size", "chunk_size"))
    if None in (inp, out) or conv is None or set(m.params) != MAMBA2_OWN or len(set(m.params.values())) != 1 \
            or not all(isinstance(v, int) and v > 0 for v in (groups, state, chunk)):
        return None
    (heads,), inner, kernel = m.params["A_log"], out[0], conv.params.get("weight", (0, 0, 0))[2]
    channels = inner + 2 * groups * state
    if inp[1] != inner + channels + heads or inner % heads or activation(m) != "silu" \
            or tuple(conv.params.get("weight", ())) != (channels, 1, kernel) or conv.attrs.get("groups") != channels \
            or conv.attrs.get("padding") != kernel - 1:
        return None
    gated = norm is not None and bool(norm.params)
    if norm is not None and norm.params and (set(norm.params) != {"weight"} or norm.params["weight"] != (inner,)):
        return None
    if norm is not None and not norm.params and norm.cls != "Identity":
        return None
    d.blocks.add("mamba2_mixer")
    sizes = [d.size(inner, "Mamba-2 inner width"), d.size(heads, "Mamba-2 heads"), d.size(groups, "Mamba-2 groups"),
             d.size(state, "state size"), d.size(kernel, "convolution width")]
    opts = [f"chunk = {d.size(chunk, 'chunk size', count='C')}"]
    opts += [] if gated else ["norm = false"]
    opts += [] if "bias" in conv.params else ["conv_bias = false"]
    opts += ["in_bias = true"] if inp[2] else []
    opts += ["out_bias = true"] if out[2] else []
    return f"mamba2_mixer({arg}, {', '.join(sizes)}, {', '.join(opts)}, name = {m.name})"


def mixer_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """The first recogniser that reads ``m``: Griffin's recurrent block, attention, MoE, MLP; else None.
    A module with a parameter the block does not hold (a bias of its own, a sink per head) is not
    recognised. A module of one child and no parameter of its own (GPT-Neo's ``GPTNeoAttention`` around its
    ``GPTNeoSelfAttention``) is read as that child."""
    recurrent = recurrent_call(m, arg, d) or mamba_call(m, arg, d) or mamba2_call(m, arg, d) or dsa_call(m, arg, d) \
        or mla_call(m, arg, d, rotary) or mla_full_q_call(m, arg, d, rotary) or gated_dsa_call(m, arg, d, rotary) \
        or deltanet_call(m, arg, d) \
        or expert_call(m, arg, d) or lightning_call(m, arg, d) \
        or kda_call(m, arg, d) or diff_attention_call(m, arg, d) or subnorm_call(m, arg, d) \
        or head_gated_call(m, arg, d) or output_gated_call(m, arg, d) or short_conv_call(m, arg, d) \
        or dynamic_mask_call(m, arg, d) or rwkv_call(m, arg, d) or value_dim_call(m, arg, d, rotary) \
        or moa_attention_call(m, arg, d, rotary) or parallel_moe_call(m, arg, d) or ngram_attention_call(m, arg, d) \
        or wavlm_call(m, arg, d) or conformer_attention_call(m, arg, d) or conformer_conv_call(m, arg, d) \
        or relative_key_call(m, arg, d) or causal_conv_call(m, arg, d) or w2vb_ffn_call(m, arg, d) \
        or text_encoder_call(m, arg, d, rotary)
    if recurrent is not None:
        return recurrent
    known = {*Q, *K, *V, *O, *FUSED_QKV, *QK_NORMS, *(n for g in GATED for n in g), *(n for p in PLAIN for n in p),
             *ROUTERS, "experts", "gate_up_proj", "input_linear", "output_linear", "Wi", "shared_experts", "shared_expert", "shared_expert_gate", "shared_mlp",
             *(c.name for c in m.children if c.cls == "XIELUActivation")}     # Apertus's activation: two scalars
    if not _only(m, known):
        return _unwrapped(m, arg, d, rotary)
    return attention_call(m, arg, d, rotary) or moe_call(m, arg, d) or mlp_call(m, arg, d) \
        or _unwrapped(m, arg, d, rotary)


def _unwrapped(m: Module, arg: str, d, rotary: bool) -> str | None:
    """A module no recogniser reads, of one child and no parameter of its own, read as that child."""
    if not m.params and len(m.children) == 1 and m.children[0].param_count():
        return mixer_call(m.children[0], arg, d, rotary)
    return None


#: the blocks a draft defines itself (attention ones from :mod:`costgraph.drafting.blocks`)
RECURRENT_BLOCKS = {"griffin_recurrent": """# Griffin's recurrent block (De et al. 2024 §2.4; transformers' RecurrentGemmaRecurrentBlock): a GeLU branch, and a
# branch through a depthwise causal Conv1d (padding K - 1, cut to S) and the RG-LRU; their product projected back.
block griffin_recurrent(x[B, S, H], width, heads, kernel) {
  y = gelu(linear(x, width, name = linear_y))
  u = conv1d(linear(x, width, name = linear_x), kernel, padded = true, name = conv_1d)
  return linear(rg_lru(u, heads, name = rg_lru) * y, H, name = linear_out)
}""", "mamba_mixer": """# Mamba's mixer (Gu & Dao 2023 §3.4; transformers' MambaMixer; models/mamba.cg's mamba_mixer): the input u and the
# gate z, a depthwise causal Conv1d (padding K - 1, cut to S) and SiLU, Δ, B and C from x_proj, Δ through dt_proj
# and softplus, the selective scan (A_log [D, N], D [D]; state [b, D, N] at inference), y · SiLU(z) projected back.
# inner_norms: RMSNorm on Δ, B and C (Jamba's; FalconMamba's weightless: norm_weight = false). The scan's state is
# kept in fp32 at inference, as transformers keeps it (mamba_ssm and vLLM keep the model dtype: state_fp32 = false).
block mamba_mixer(x[B, S, H], inner, state, rank, kernel, conv_bias = true, proj_bias = false, inner_norms = false,
                  norm_weight = true) {
  u, z = split(linear(x, 2 * inner, bias = proj_bias, name = in_proj), 2)
  u = silu(conv1d(u, kernel, bias = conv_bias, padded = true, name = conv1d))
  dbc = linear(u, rank + 2 * state, bias = false, name = x_proj)
  dt = slice(dbc, rank)
  bm = slice(dbc, state)
  cm = slice(dbc, state)
  if inner_norms {
    dt = rmsnorm(dt, weight = norm_weight, name = dt_layernorm)
    bm = rmsnorm(bm, weight = norm_weight, name = b_layernorm)
    cm = rmsnorm(cm, weight = norm_weight, name = c_layernorm)
  }
  dt = softplus(linear(dt, inner, bias = true, name = dt_proj))
  y = selective_scan(u, dt, bm, cm, state_fp32 = true, name = ssm)
  return linear(y * silu(z), H, bias = proj_bias, name = out_proj)
}""", "gated_deltanet": """# Gated DeltaNet (Yang et al. 2024; transformers' Qwen3NextGatedDeltaNet; models/qwen3_next.cg's): q, k, v and the
# gate z from in_proj_qkvz, beta and the decay's a from in_proj_ba, a depthwise causal Conv1d over q, k, v (padding
# K - 1, cut to S, no bias) and SiLU, the gated delta rule (A_log, dt_bias per value head; chunk: the chunked torch
# path's FLOPs, chunks of 64 in transformers), a gated RMSNorm per value head, out_proj back. split: Qwen3.5's four
# projections (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a), the same products; separate: OLMo-Hybrid's seven
# (q_proj, k_proj, v_proj, g_proj, b_proj, a_proj, o_proj; the norm o_norm).
block gated_deltanet(x[B, S, H], k_heads, v_heads, k_dim, v_dim, kernel, chunk = none, split = false,
                     separate = false) {
  if separate {
    q = linear(x, k_heads * k_dim, bias = false, name = q_proj)
    k = linear(x, k_heads * k_dim, bias = false, name = k_proj)
    qkv = concat(concat(q, k), linear(x, v_heads * v_dim, bias = false, name = v_proj))
    z = linear(x, v_heads * v_dim, bias = false, name = g_proj)
    ba = concat(linear(x, v_heads, bias = false, name = b_proj), linear(x, v_heads, bias = false, name = a_proj))
    qkv = silu(conv1d(qkv, kernel, bias = false, padded = true, name = conv1d))
    y = gated_delta_rule(qkv, ba, k_heads, v_heads, k_dim, v_dim, chunk = chunk, name = core)
    y = rmsnorm(y, name = o_norm) * silu(split_heads(z, v_heads))
    return linear(merge_heads(y), H, bias = false, name = o_proj)
  }
  if split {
    qkv = linear(x, 2 * k_heads * k_dim + v_heads * v_dim, bias = false, name = in_proj_qkv)
    z = linear(x, v_heads * v_dim, bias = false, name = in_proj_z)
    ba = concat(linear(x, v_heads, bias = false, name = in_proj_b), linear(x, v_heads, bias = false, name = in_proj_a))
  } else {
    qkvz = linear(x, 2 * k_heads * k_dim + 2 * v_heads * v_dim, bias = false, name = in_proj_qkvz)
    ba = linear(x, 2 * v_heads, bias = false, name = in_proj_ba)
    qkv = slice(qkvz, 2 * k_heads * k_dim + v_heads * v_dim)
    z = slice(qkvz, v_heads * v_dim)
  }
  qkv = silu(conv1d(qkv, kernel, bias = false, padded = true, name = conv1d))
  y = gated_delta_rule(qkv, ba, k_heads, v_heads, k_dim, v_dim, chunk = chunk, name = core)
  y = rmsnorm(y, name = norm) * silu(split_heads(z, v_heads))
  return linear(merge_heads(y), H, bias = false, name = out_proj)
}""", "mamba2_mixer": """# A Mamba-2 mixer (Dao & Gu 2024 §7; transformers' Mamba2Mixer, as Bamba, Falcon-H1, Granite 4, Nemotron-H and
# Zamba2 copy it): in_proj to the gate z, x, B, C (groups x state each) and dt (one per head); a depthwise causal
# Conv1d over x, B and C (padding K - 1, cut to S) and SiLU; the SSD scan (ssd_scan: A_log, D, dt_bias per head;
# chunk: the chunked torch path's FLOPs); y gated by SiLU(z) and normalised (norm_before_gate = False: a gated,
# grouped RMSNorm, weight [inner]); out_proj back. The scan's state in fp32 at inference, as transformers keeps it.
block mamba2_mixer(x[B, S, H], inner, heads, groups, state, kernel, chunk = none, norm = true, conv_bias = true,
                   in_bias = false, out_bias = false) {
  zxbcdt = linear(x, 2 * inner + 2 * groups * state + heads, bias = in_bias, name = in_proj)
  z = slice(zxbcdt, inner)
  xbc = slice(zxbcdt, inner + 2 * groups * state)
  dt = slice(zxbcdt, heads)
  xbc = silu(conv1d(xbc, kernel, bias = conv_bias, padded = true, name = conv1d))
  u = slice(xbc, inner)
  bc = slice(xbc, 2 * groups * state)
  y = ssd_scan(u, dt, bc, heads, groups, state, chunk = chunk, state_fp32 = true, name = ssm) * silu(z)
  if norm {
    y = rmsnorm(y, name = norm)
  }
  return linear(y, H, bias = out_bias, name = out_proj)
}"""}
LOCAL_BLOCKS = {**blocks.LOCAL_BLOCKS, **RECURRENT_BLOCKS, **EXPERT_BLOCKS, **LINEAR_BLOCKS, **ATTENTION_BLOCKS,
                **RWKV_BLOCKS,
                **MLA_BLOCKS, **VALUE_DIM_BLOCKS, **PARALLEL_EXPERT_BLOCKS, **GATED_NORM_BLOCKS, **SEGMENT_BIAS_BLOCKS,
                **NGRAM_BLOCKS, **ZAYA_BLOCKS, **SPEECH_ATTENTION_BLOCKS, **FAST_CONFORMER_BLOCKS,
                **BERT_CONFORMER_BLOCKS}
