"""Agreement with PyTorch: costgraph's closed forms against what PyTorch measures.

For every family costgraph maps from a Hugging Face ``config.json``, a *tiny*
model (a real published config from ``examples/hf/`` with its sizes shrunk and
its structural keys kept; Falcon and OPT written by hand in their released
shape) is built by ``transformers`` on the meta device (no weights, no
arithmetic: shapes, dtypes and the autograd graph only) by
``tests/torch_probe.py``, and compared with costgraph's numbers for the same
config.json (``costgraph.from_hf_config``):

(a) parameters: ``sum(p.numel() for p in model.parameters())``;
(b) FLOPs, forward and backward, counted by ``torch.utils.flop_counter.
    FlopCounterMode`` against costgraph's ``matmul`` convention, at two
    (b, s) points;
(c) bytes of the tensors autograd saves for backward (``saved_tensors_hooks``,
    each storage once; eager attention, bf16, train mode, 1-byte dropout masks
    as on a GPU) against ``activation_bytes`` of the ``pytorch`` profile, with
    dropout on where the config has it.

Every comparison is exact: ``torch == costgraph + Σ terms``, where each term is
a named formula in the config's numbers, with the reason it exists. Most
families need none; the README's "Agreement with PyTorch" lists them all.

Pinned: torch 2.13.0, transformers 5.24.0 (the ``torch`` extra of
pyproject.toml). Skipped when either is not installed.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
import torch_probe as probe  # noqa: E402  (tests/ is on sys.path under pytest)

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"

#: (b, s) points; s ≤ every sliding window below, so costgraph's Min(s, w) = s
POINTS = [(1, 16), (2, 32)]

#: config keys holding a dropout probability that the LM's forward applies
DROPOUT_KEYS = ("attn_pdrop", "embd_pdrop", "resid_pdrop", "dropout", "dropout_rate", "attention_dropout",
                "hidden_dropout", "activation_dropout", "residual_dropout", "embedding_dropout",
                "hidden_dropout_prob", "attention_probs_dropout_prob")


# ----------------------------------------------------------------- the cases


@dataclass(frozen=True)
class Term:
    """One explained difference: ``formula(c, b, s)`` bytes/FLOPs/params, ``c`` the config's numbers."""

    name: str
    formula: Callable[[SimpleNamespace, int, int], int]
    why: str


@dataclass(frozen=True)
class Case:
    config: dict                                   # a complete config.json, model_type included
    dims: Callable[[dict], dict]                   # the config's numbers the terms use, by name
    params: tuple[Term, ...] = ()                  # torch params = costgraph + Σ
    flops_forward: tuple[Term, ...] = ()           # stock FlopCounterMode = costgraph + Σ
    flops_backward: tuple[Term, ...] = ()
    bytes: tuple[Term, ...] = ()                   # saved bytes = costgraph + Σ
    seq2seq: bool = False                          # T5: the decoder gets [b, s] ids too (t = s)


def real(file: str, **changes) -> dict:
    """A released config.json of examples/hf/ as transformers builds it here, with ``changes``
    (the tiny sizes). DeepSeek-V3's ``auto_map`` (it names remote code; transformers has the
    model built in) and fp8 ``quantization_config`` (no quantizer on meta; costs are counted in
    bf16) are dropped; nothing else is touched."""
    cfg = json.loads((HF / file).read_text())
    cfg.pop("auto_map", None)
    if "quantization_config" in cfg:
        cfg["quantization_config"] = None
    cfg.update(changes)
    return cfg


# Tiny sizes shared by the cases: hidden 64, 2 layers, 4 heads (2 KV heads for
# GQA), head size 16, vocabulary 128, MLP width 128, experts of width 32,
# context 64. Token ids are set inside the 128-word vocabulary (only to keep
# transformers from warning; they change no cost).
TOKENS = dict(bos_token_id=0, eos_token_id=1, pad_token_id=2)
GPT2_TOKENS = dict(bos_token_id=0, eos_token_id=0)   # GPT-2 has no pad token: none is added (with one,
                                                     # GPT-2 scans the ids for padding, data-dependent)
LLAMA_SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                   vocab_size=128, intermediate_size=128, max_position_embeddings=64, **TOKENS)


def llama_dims(cfg: dict) -> dict:
    a = cfg["num_attention_heads"]
    return dict(h=cfg["hidden_size"], l=cfg["num_hidden_layers"], a=a,
                kv=cfg.get("num_key_value_heads") or a,
                d=cfg.get("head_dim") or cfg["hidden_size"] // a,
                V=cfg["vocab_size"], i=cfg["intermediate_size"])


def moe_dims(experts: str, width: str) -> Callable[[dict], dict]:
    def dims(cfg):
        return dict(llama_dims(cfg), E=cfg[experts], k=cfg["num_experts_per_tok"], i_e=cfg[width])
    return dims


# --- terms shared by several families (c: the config's numbers; T = b·s tokens)

def grouped_mm_flops(layers: Callable, factor: int) -> Term:
    """Routed experts run as aten._grouped_mm, which stock FlopCounterMode does not know (counts 0)."""
    return Term(
        "routed experts' aten._grouped_mm (uncounted by FlopCounterMode)",
        # gate_up [T·k, h]·[h, 2 i_e] + down [T·k, i_e]·[i_e, h] per MoE layer; backward twice that
        lambda c, b, s: -factor * layers(c) * 6 * (b * s) * c.k * c.h * c.i_e,
        "transformers 5 runs the experts as one grouped matmul over the T·k routed rows; "
        "FlopCounterMode has no formula for aten._grouped_mm and counts it as 0 (the probe's "
        "GROUPED_MM_FLOPS adds exactly this amount back, asserted in test_flops)")


def moe_routing_bytes(layers: Callable, weight_bytes: int) -> tuple[Term, ...]:
    """What transformers 5's grouped_mm MoE keeps beyond costgraph's router + k SwiGLU experts."""
    return (
        Term("top-k routing", lambda c, b, s: layers(c) * (8 * b * s * c.k + 4 * b * s * c.k + 4 * b * s),
             # topk indices [T, k] int64 (TopkBackward0); renormalised top-k weights [T, k] and their
             # sum [T, 1] in fp32 (DivBackward0)
             "top-k expert ids (int64) and the fp32 top-k weights with their sum, kept by the renormalisation"),
        Term("dispatch indices", lambda c, b, s: layers(c) * (3 * 8 * b * s * c.k + 4 * c.E),
             # three [T·k] int64 permutations (IndexBackward0: sort by expert, gather, scatter back) and
             # the [E] int32 group offsets of aten._grouped_mm
             "sorting the T·k routed rows by expert: three int64 index vectors and the int32 group offsets"),
        Term("gathered expert inputs", lambda c, b, s: layers(c) * 2 * (b * s) * c.k * c.h,
             # [T·k, h] bf16 copy of the tokens, one row per routed expert (GroupedMmBackward0)
             "each token is copied once per routed expert before the grouped matmul; costgraph's "
             "experts read the layer input itself"),
        Term("weighted expert outputs", lambda c, b, s: layers(c) * (2 * (b * s) * c.k * c.h
                                                                     + weight_bytes * (b * s) * c.k),
             # expert outputs [T·k, h] bf16 and routing weights [T·k, 1] kept by the weighting multiply
             "the routing-weight multiply keeps the expert outputs and the per-row weights "
             f"({weight_bytes}-byte)"),
    )


def fused_qkv_view_at_b1(extra: Callable) -> Term:
    return Term(
        "fused QKV kept whole at b = 1",
        lambda c, b, s: c.l * 2 * b * s * extra(c) if b == 1 else 0,
        "Q, K, V come from one fused projection; V is a view of its output and, with no K/V head "
        "repetition, reaches the scores·V bmm as a view. At b = 1 the bmm's reshape [1, a, s, d] → "
        "[a, s, d] is still a view, so autograd keeps the whole fused [b, s, (a + 2 kv) d] output "
        "instead of V's own storage (costgraph's separate projections). From b = 2 on the reshape "
        "copies V to [b·a, s, d], exactly what costgraph counts")


MQA_VIEW_AT_B1 = Term(
    "multi-query K/V not expanded at b = 1",
    lambda c, b, s: -c.l * 2 * (2 * b * s * (c.a - c.kv) * c.d) if (b == 1 and c.kv == 1) else 0,
    "repeat_kv is expand + reshape: with one K/V head the reshape is a view (stride 0), and at b = 1 "
    "so is the bmm's reshape to [a, s, d], so autograd keeps K and V at one head, [b, 1, s, d], where "
    "costgraph counts the expanded [b, a, s, d] copies. From b = 2 on the bmm's reshape copies them to "
    "full head count, as costgraph counts")


def _falcon_dims(cfg):
    a = cfg["num_attention_heads"]
    new = cfg.get("new_decoder_architecture", False)
    kv = cfg["num_kv_heads"] if new else (1 if cfg.get("multi_query") else a)
    return dict(h=cfg["hidden_size"], l=cfg["num_hidden_layers"], a=a, kv=kv,
                d=cfg["hidden_size"] // a, V=cfg["vocab_size"])


FALCON_INDEX = Term(
    "K/V index tensors", lambda c, b, s: c.l * 2 * 8,
    # FalconAttention._split_heads: key = qkv[..., [-2], :], value = qkv[..., [-1], :]
    "Falcon splits K and V off the fused QKV with list indices ([-2], [-1]): IndexBackward0 keeps two "
    "one-element int64 index tensors per layer")


def _deepseek_dims(cfg):
    return dict(h=cfg["hidden_size"], l=cfg["num_hidden_layers"], a=cfg["num_attention_heads"],
                k_d=cfg["first_k_dense_replace"], E=cfg["n_routed_experts"], k=cfg["num_experts_per_tok"],
                i_e=cfg["moe_intermediate_size"], d_n=cfg["qk_nope_head_dim"], n_group=cfg["n_group"],
                topk_group=cfg["topk_group"])


DEEPSEEK_MOE_LAYERS = lambda c: c.l - c.k_d  # noqa: E731


DEEPSEEK_V2_LITE = dict(model_type="deepseek_v2", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=4, vocab_size=128, rms_norm_eps=1e-6,
                        rope_theta=10000.0, max_position_embeddings=64, tie_word_embeddings=False, q_lora_rank=None,
                        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=16, n_routed_experts=8,
                        num_experts_per_tok=2, n_shared_experts=1, moe_intermediate_size=32, first_k_dense_replace=1,
                        norm_topk_prob=False, routed_scaling_factor=1.0, bos_token_id=0, eos_token_id=1)


def _deepseek_v2_dims(cfg):
    return dict(h=cfg["hidden_size"], l=cfg["num_hidden_layers"], a=cfg["num_attention_heads"],
                k_d=cfg["first_k_dense_replace"], E=cfg["n_routed_experts"], k=cfg["num_experts_per_tok"],
                i_e=cfg["moe_intermediate_size"], d_n=cfg["qk_nope_head_dim"])


DEEPSEEK_V2_FLOPS = ((grouped_mm_flops(lambda c: c.l - c.k_d, 1),), (grouped_mm_flops(lambda c: c.l - c.k_d, 2),))

DEEPSEEK_V2_BYTES = (
    Term("MLA: V copied from the kv_b_proj output (b ≥ 2)",
         lambda c, b, s: -c.l * 2 * b * s * c.a * c.d_n if b >= 2 else 0,
         # as DeepSeek-V3: from b = 2 on the scores·V bmm copies V to [b·a, s, d_v]
         "V is a slice of the kv_b_proj output; from b = 2 on the scores·V bmm copies V to [b·a, s, d_v] "
         "and keeps only that: 2 b s a d_n fewer bytes per layer"),
    Term("router input in fp32", lambda c, b, s: (c.l - c.k_d) * 4 * b * s * c.h,
         # router_logits = F.linear(hidden_states.type(float32), weight.float()): MmBackward0 keeps the copy
         "the router runs in fp32: its [T, h] fp32 input copy is kept"),
    Term("top-k expert ids", lambda c, b, s: (c.l - c.k_d) * 8 * b * s * c.k,
         # torch.topk(scores, k): TopkBackward0 keeps the [T, k] int64 indices; DeepSeek-V2 does not
         # renormalise the top-k weights (norm_topk_prob is not read), so no fp32 sum is kept
         "top-k expert ids (int64) kept by TopkBackward0; no renormalisation of the weights"),
) + moe_routing_bytes(lambda c: c.l - c.k_d, weight_bytes=4)[1:]


def _gpt_oss_dims(cfg):
    return dict(llama_dims(cfg), E=cfg["num_local_experts"], k=cfg["num_experts_per_tok"], i_e=cfg["intermediate_size"])


# gpt-oss (transformers 5.24 modeling_gpt_oss.py): what autograd keeps beyond costgraph's model file. T = b·s.
GPT_OSS_BYTES = (
    Term("rotary tables of half the head size", lambda c, b, s: -2 * 2 * s * (c.d // 2),
         # _apply_rotary_emb: x is chunked into halves, each multiplied by cos/sin of shape [1, s, d/2]
         "gpt-oss rotates the two halves of each head with [1, s, d/2] cos and sin tables (bf16); "
         "costgraph's rope keeps [1, s, d] tables: 2 · 2 · s · d/2 fewer bytes"),
    Term("no fp32 1 + γ in gpt-oss's RMSNorm", lambda c, b, s: -4 * c.h * (2 * c.l + 1),
         # GptOssRMSNorm: (self.weight * x̂_fp32).to(dtype): x̂ fp32 kept (fp32_scale), γ a parameter
         "fp32_scale also keeps an fp32 1 + γ of size h (Gemma's x̂·(1 + γ)); gpt-oss multiplies by γ "
         "itself, a parameter: 4 h bytes fewer per norm (2 per layer and the final one)"),
    Term("dispatch indices", lambda c, b, s: c.l * (4 * 8 * b * s * c.k + 4 * c.E),
         # four [T·k] int64 vectors (IndexBackward0: the sort by expert, the gathers of tokens and routing
         # weights, the index_add back) and the [E] int32 group offsets of aten._grouped_mm
         "the grouped_mm experts sort the T·k routed rows by expert: four int64 index vectors and the "
         "int32 group offsets per layer"),
    Term("gathered expert inputs", lambda c, b, s: c.l * 2 * b * s * c.k * c.h,
         # [T·k, h] bf16 copy of the tokens (GroupedMmBackward0)
         "each token is copied once per routed expert before the grouped matmul; costgraph's experts "
         "read the layer input itself"),
    Term("weighted expert outputs", lambda c, b, s: c.l * (2 * b * s * c.k * c.h + 2 * b * s * c.k),
         # out * routing_weights[..., None]: MulBackward0 keeps the [T·k, h] outputs and the [T·k, 1]
         # bf16 weights (the router softmaxes in the compute dtype)
         "the routing-weight multiply keeps the expert outputs and the per-row weights (bf16); "
         "costgraph's model file does not write that multiply"),
)


def _llama4_dims(cfg):
    step, l = cfg.get("interleave_moe_layer_step", 1), cfg["num_hidden_layers"]
    return dict(llama_dims(cfg), E=cfg["num_local_experts"], k=cfg["num_experts_per_tok"], i_e=cfg["intermediate_size"],
                moe=l // step, nope=l // 4)     # MoE layers j % step == step - 1; NoPE layers j % 4 == 3


def llama4_dense_experts(factor: int) -> Term:
    return Term(
        "every routed expert runs every token",
        # Llama4TextExperts: bmm([E, T, h], gate_up [E, h, 2i]) and bmm([E, T, i], down [E, i, h]) over all E
        lambda c, b, s: factor * c.moe * 6 * (b * s) * (c.E - c.k) * c.h * c.i_e,
        "Llama4TextMoe feeds every token to all E experts (hidden_states.repeat(E, 1), scaled by the router's "
        "sigmoid scores, zero for the experts not chosen) as two plain bmm: E − k experts more than the k "
        "costgraph counts (what an expert-parallel or grouped kernel runs)")


# Llama 4 (transformers 5.24 modeling_llama4.py): what autograd keeps beyond costgraph's model file. T = b·s.
LLAMA4_BYTES = (
    Term("dense experts' tensors", lambda c, b, s: c.moe * (c.E - c.k) * (2 * b * s * c.h + 8 * b * s * c.i_e),
         # per expert beyond the k: the bmm's scaled input [T, h], the gate_up output [T, 2i] (gate and up are
         # chunks of it), the SiLU output [T, i] and the down bmm's input [T, i], all bf16
         "the E − k experts costgraph does not run keep what an expert keeps: its scaled input, the gate_up "
         "output, the SiLU output and the down projection's input"),
    Term("tokens repeated per expert", lambda c, b, s: c.moe * (2 * c.E * b * s * c.h + 2 * c.E * b * s),
         # routed_in = hidden_states.repeat(E, 1) * scores.T.reshape(-1, 1): MulBackward0 keeps the [E·T, h]
         # repeat and the [E·T, 1] score column (bf16)
         "the score multiply keeps the E-fold repeated tokens and the score column; costgraph's routed "
         "expert multiplies the layer input (already kept) by its own score"),
    Term("router scores of every expert in fp32", lambda c, b, s: c.moe * (4 * b * s * c.E - 2 * b * s * c.k),
         # sigmoid(full_like(logits, -inf).scatter_(1, ids, top).float()): SigmoidBackward0 keeps [T, E] fp32
         "the router scatters the top-k logits into a [T, E] row of −∞ and takes its sigmoid in fp32 (kept, "
         "4 T E bytes) where costgraph's sigmoid of the k chosen logits keeps [T, k] in bf16 (2 T k)"),
    Term("temperature-tuning factors", lambda c, b, s: c.nope * 4 * s,
         # (query_states * attn_scales): MulBackward0 keeps attn_scales, an expand of a [1, s, 1, 1] fp32 tensor
         "each NoPE layer's query scaling keeps its [1, s, 1, 1] fp32 factors (costgraph's scale keeps "
         "nothing: a constant)"),
)

# Llama-4-Scout-17B-16E's text_config keys (no released config.json in examples/hf/, see SOURCES.md), tiny
# sizes; 4 layers (one NoPE layer, j = 3); a chunk of 32 ≥ s. attn_temperature_tuning: the release's 4 is
# refused by transformers 5.24's config validation (a bool field): True, what 4 means.
LLAMA4_SCOUT = dict(model_type="llama4_text", attention_bias=False, attention_chunk_size=32, attention_dropout=0.0,
                    attn_scale=0.1, attn_temperature_tuning=True, floor_scale=8192, head_dim=16, hidden_act="silu",
                    hidden_size=64, initializer_range=0.02, interleave_moe_layer_step=1, intermediate_size=32,
                    intermediate_size_mlp=128, max_position_embeddings=64, moe_layers=[0, 1, 2, 3],
                    no_rope_layers=[1, 1, 1, 0], num_attention_heads=4, num_experts_per_tok=1, num_hidden_layers=4,
                    num_key_value_heads=2, num_local_experts=4, output_router_logits=False, rms_norm_eps=1e-05,
                    rope_scaling=dict(factor=8.0, high_freq_factor=4.0, low_freq_factor=1.0,
                                      original_max_position_embeddings=8, rope_type="llama3"),
                    rope_theta=500000.0, router_aux_loss_coef=0.001, router_jitter_noise=0.0,
                    tie_word_embeddings=False, use_qk_norm=True, vocab_size=128, **TOKENS)


def _t5_dims(cfg):
    return dict(h=cfg["d_model"], l=cfg["num_layers"], l_dec=cfg.get("num_decoder_layers") or cfg["num_layers"])


def _cohere_norm_keeps(elements: int, rows: int, weights: int) -> int:
    """Bytes CohereLayerNorm's autograd keeps: it is written as fp32 Python ops (modeling_cohere.py):
    x − mean twice (kept by pow, and by the multiply with 1/σ), x̂ and the fp32 copy of γ (kept by the
    γ multiply), 1/σ per row (kept by rsqrt and the multiply)."""
    return 3 * 4 * elements + 4 * rows + 4 * weights


COHERE_NORM = Term(
    "CohereLayerNorm in fp32 Python ops",
    # per norm (one per layer, and the final one): torch − costgraph's layernorm (bf16 input, fp32 mean, 1/σ)
    lambda c, b, s: (c.l + 1) * (_cohere_norm_keeps(b * s * c.h, b * s, c.h) - (2 * b * s * c.h + 8 * b * s)),
    "CohereLayerNorm upcasts to fp32 and keeps two copies of x − mean, x̂ (12 bytes an element), 1/σ and an "
    "fp32 copy of γ; costgraph's layernorm keeps the bf16 input, mean and 1/σ (native_layer_norm)")

COHERE_QK_NORM = Term(
    "QK-norm: CohereLayerNorm per head in fp32 Python ops",
    # q_norm over [T, a, d] and k_norm over [T, kv, d], γ of [a, d] and [kv, d]: torch − costgraph's norm without
    # γ (bf16 input, mean, 1/σ) and its γ multiply (bf16 x̂ and the γ parameter, counted as a tensor it keeps)
    lambda c, b, s: c.l * sum(_cohere_norm_keeps(b * s * n * c.d, b * s * n, n * c.d)
                              - (2 * b * s * n * c.d + 8 * b * s * n + 2 * b * s * n * c.d + 2 * n * c.d)
                              for n in (c.a, c.kv)),
    "the same fp32 Python LayerNorm on each query and key head, with γ per head; costgraph writes it as a "
    "LayerNorm without γ times a bare [heads, 1, d] parameter")


# Mamba and Jamba (transformers 5.24 modeling_mamba.py / modeling_jamba.py). Without the mamba_ssm and
# causal_conv1d packages (CPU, meta) the mixers run their reference PyTorch path: causal_conv1d_fn, a
# Conv1d padded by K − 1 on both sides and cut to S outputs, and mamba_selective_scan, a Python loop
# over the S positions in fp32. What FlopCounterMode and autograd see of that path, beyond costgraph's
# conv1d and selective_scan, is below; M is the number of Mamba mixers (every layer of Mamba; the
# layers j % attn_layer_period != attn_layer_offset of Jamba), T = b·s, D = e·h the inner width.

def _mamba_dims(cfg: dict) -> dict:
    h = cfg["hidden_size"]
    if cfg["model_type"] == "mamba":
        e, n, k, l = cfg["expand"], cfg["state_size"], cfg["conv_kernel"], cfg["num_hidden_layers"]
        return dict(h=h, D=e * h, N=n, K=k, l=l, M=l)
    l = cfg["num_hidden_layers"]
    # JambaConfig.layers_block_type and layers_num_experts, counted over the layers (no closed form)
    mixers = sum(1 for j in range(l) if j % cfg.get("attn_layer_period", 8) != cfg.get("attn_layer_offset", 4))
    moe = sum(1 for j in range(l) if j % cfg.get("expert_layer_period", 2) == cfg.get("expert_layer_offset", 1))
    return dict(h=h, D=cfg["mamba_expand"] * h, N=cfg["mamba_d_state"], K=cfg["mamba_d_conv"], l=l, M=mixers,
                moe=moe, E=cfg["num_experts"], k=cfg["num_experts_per_tok"],
                i_e=cfg["intermediate_size"])


# The convolution is padded as causal_conv1d_fn runs it (conv1d(padded = true), option conv_padded,
# the default): its S + K − 1 positions forward and in both gradients, and the SiLU keeping the padded
# output, are costgraph's count too. Only FlopCounterMode's own formula differs:
MAMBA_FLOPS_FORWARD = ()
MAMBA_FLOPS_BACKWARD = (
    Term("grouped conv weight gradient counted as dense",
         lambda c, b, s: c.M * 2 * b * (s + c.K - 1) * c.D * c.K * (c.D - 1),
         # conv_backward_flop's weight gradient is conv_flop_count(t(x) [D, b, S], t(grad_out) [D, b, S+K−1],
         # t(grad_w) [1, D, K]): batch D × c_out D × c_in b, no division by groups = D:
         # 2·b·(S+K−1)·K·D² where the depthwise kernel does 2·b·(S+K−1)·K·D
         "FlopCounterMode's formula for a convolution's weight gradient ignores groups: for the depthwise "
         "conv (groups = D) it counts D times the multiply-adds the grouped kernel does"),
)
MAMBA_SCAN_BYTES = (
    Term("reference scan's fp32 discretisation", lambda c, b, s: c.M * (
        8 * b * s * c.D * c.N + 4 * b * s * c.D + 4 * b * s * c.N + 8 * c.D * c.N + 4 * c.D),
         # exp(A·Δ) [b, D, S, N] fp32 (ExpBackward0, and the per-step multiply) and Δ·B [b, D, S, N] fp32
         # (kept by its multiply with u); u.float() [b, D, S, 1] and B.float() [b, 1, S, N]; A_log's exp
         # and A = −exp(A_log.float()) [D, N] fp32; D.float() [D] for the skip
         "mamba_selective_scan materialises exp(ΔA) and ΔB for every position in fp32 with fp32 copies of "
         "u and B, and keeps fp32 A (and exp(A_log)) and D; costgraph's scan (the fused kernel's) keeps "
         "only its bf16 inputs"),
    Term("reference scan's state per step", lambda c, b, s: c.M * (6 * b * s * c.D * c.N - 2 * b * c.D * c.N),
         # per step: the fp32 state [b, D, N] kept by the next step's multiply (S − 1 of them, the first is
         # the bf16 zeros), and its bf16 copy kept by the bmm with C: 4 (S − 1) b D N + 2 b D N + 2 S b D N
         "the Python loop over positions keeps every state h_t: in fp32 for the next step's update and in "
         "bf16 for y_t = C_t·h_t"),
    Term("scan output in fp32", lambda c, b, s: c.M * 2 * b * s * c.D,
         # y + u·D with D in fp32 promotes y to fp32 [b, D, S], kept by the gate multiply y·SiLU(z)
         "the skip u·D multiplies by the fp32 D, so y is fp32 when the gate multiply keeps it (4 T D "
         "bytes, costgraph 2 T D)"),
    Term("x_proj input copied (b ≥ 2)", lambda c, b, s: c.M * 2 * b * s * c.D if b >= 2 else 0,
         # x_proj(u.transpose(1, 2)): reshaping the transposed [b, S, D] to [b·S, D] is a view at b = 1
         # and a copy from b = 2 on; the copy is what MmBackward0 keeps, besides u kept by u·D
         "x_proj reads the conv output transposed; from b = 2 on flattening it copies, and both the copy "
         "and u (for the skip u·D) are kept"),
)
MAMBA_RESIDUAL_FP32 = Term(
    "final norm on the fp32 residual stream", lambda c, b, s: 2 * b * s * c.h,
    # MambaBlock: residual.to(float32) (residual_in_fp32, true in MambaConfig and the releases), so
    # norm_f's input is fp32 and its x̂.to(input_dtype) stays fp32 [b, s, h]
    "with residual_in_fp32 the stream reaching norm_f is fp32, so the normalised x̂ its weight multiply "
    "keeps is fp32 (costgraph's RMSNorm: bf16); each block's norm casts its input to bf16 first")
JAMBA_B_NOT_KEPT = Term(
    "B kept in fp32 only", lambda c, b, s: -c.M * 2 * b * s * c.N,
    # JambaMambaMixer: B = b_layernorm(B) [b, S, N] bf16 reaches the scan only as B.float() (a cast keeps
    # nothing); costgraph's selective_scan keeps B in bf16. (Mamba's B is a view of the kept x_proj output.)
    "Jamba's normalised B enters the reference scan only through its fp32 copy (counted above), so its "
    "bf16 storage is not kept: 2 T N fewer bytes per mixer")

# Jamba-v0.1's config.json keys (quoted in models/jamba.cg; no attributable released copy in examples/hf/,
# see SOURCES.md), tiny sizes: 6 layers (attention on j = 4, experts on j = 1, 3, 5), 4 experts of width
# 64 (Jamba's experts and MLPs share intermediate_size), top-2.
JAMBA_V01_TINY = dict(model_type="jamba", attention_dropout=0.0, attn_layer_offset=4, attn_layer_period=8,
                      expert_layer_offset=1, expert_layer_period=2, hidden_act="silu", hidden_size=64,
                      initializer_range=0.02, intermediate_size=64, mamba_conv_bias=True, mamba_d_conv=4,
                      mamba_d_state=8, mamba_dt_rank=8, mamba_expand=2, mamba_proj_bias=False,
                      max_position_embeddings=64, num_attention_heads=4, num_experts=4, num_experts_per_tok=2,
                      num_hidden_layers=6, num_key_value_heads=2, output_router_logits=False, rms_norm_eps=1e-06,
                      router_aux_loss_coef=0.001, tie_word_embeddings=False, use_cache=True, vocab_size=128,
                      **TOKENS)
JAMBA_MOE = lambda c: c.moe  # noqa: E731


CASES: dict[str, Case] = {
    # Llama 4 Scout's layout: MoE (16 → 4 experts, top-1, a shared expert) on every layer, QK-norm
    "llama4_text": Case(LLAMA4_SCOUT, _llama4_dims,
                        flops_forward=(llama4_dense_experts(1),), flops_backward=(llama4_dense_experts(2),),
                        bytes=LLAMA4_BYTES),
    # Maverick's: MoE on odd layers, dense MLPs of intermediate_size_mlp on even ones, no QK-norm
    "llama4_text-maverick": Case(dict(LLAMA4_SCOUT, interleave_moe_layer_step=2, moe_layers=[1, 3], use_qk_norm=False),
                                 _llama4_dims, flops_forward=(llama4_dense_experts(1),),
                                 flops_backward=(llama4_dense_experts(2),), bytes=LLAMA4_BYTES),

    # gpt-oss-120b's config (attention sinks, Q/K/V/O biases, layers alternating sliding window 32 ≥ s and
    # full attention, 4 experts of width 32 with biases, top-2); the YaRN original context shrunk with the rest
    "gpt_oss": Case(
        real("gpt-oss-120b.json", **dict(LLAMA_SIZES, head_dim=16, intermediate_size=32, num_local_experts=4,
                                         num_experts_per_tok=2, sliding_window=32,
                                         layer_types=["sliding_attention", "full_attention"],
                                         rope_scaling=dict(real("gpt-oss-120b.json")["rope_scaling"],
                                                           original_max_position_embeddings=2))),
        _gpt_oss_dims,
        flops_forward=(grouped_mm_flops(lambda c: c.l, 1),),
        flops_backward=(grouped_mm_flops(lambda c: c.l, 2),),
        bytes=GPT_OSS_BYTES),
    # GPT-2 with gelu_pytorch_tanh (the same GELU as gelu_new, one F.gelu call): exact.
    "gpt2": Case(real("gpt2.json", n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64, n_ctx=64,
                      activation_function="gelu_pytorch_tanh", **GPT2_TOKENS),
                 lambda cfg: dict(h=cfg["n_embd"], l=cfg["n_layer"])),
    # The released GPT-2 config's gelu_new is written as Python elementwise ops.
    "gpt2-gelu_new": Case(
        real("gpt2.json", n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64, n_ctx=64, **GPT2_TOKENS),
        lambda cfg: dict(h=cfg["n_embd"], l=cfg["n_layer"]),
        bytes=(Term("gelu_new's elementwise graph", lambda c, b, s: c.l * 3 * 2 * b * s * 4 * c.h,
                    # 0.5·x·(1 + tanh(√(2/π)(x + 0.044715 x³))): PowBackward0, TanhBackward0 and two
                    # MulBackward0 keep four [b, s, 4h] bf16 tensors where F.gelu keeps its input only
                    "gelu_new keeps three more [b, s, 4h] bf16 tensors per layer than one GELU call"),)),
    "llama": Case(real("llama-3-8b.json", **LLAMA_SIZES), llama_dims),
    # GQA and a sliding window of 32 ≥ s: Min(s, w) = s
    "mistral": Case(real("mistral-7b.json", **dict(LLAMA_SIZES, sliding_window=32)), llama_dims),
    "mixtral": Case(
        real("mixtral-8x7b.json", **dict(LLAMA_SIZES, num_local_experts=4, intermediate_size=32)),
        moe_dims("num_local_experts", "intermediate_size"),
        flops_forward=(grouped_mm_flops(lambda c: c.l, 1),),
        flops_backward=(grouped_mm_flops(lambda c: c.l, 2),),
        bytes=moe_routing_bytes(lambda c: c.l, weight_bytes=4)),      # MixtralExperts: fp32 weights
    "qwen2": Case(real("qwen2-7b.json", **dict(LLAMA_SIZES, max_window_layers=2)), llama_dims),
    "qwen3": Case(real("qwen3-8b.json", **dict(LLAMA_SIZES, head_dim=16, max_window_layers=2)), llama_dims),
    "qwen3_moe": Case(
        real("qwen3-30b-a3b.json", **dict(LLAMA_SIZES, head_dim=16, max_window_layers=2, num_experts=4,
                                          num_experts_per_tok=2, moe_intermediate_size=32)),
        moe_dims("num_experts", "moe_intermediate_size"),
        flops_forward=(grouped_mm_flops(lambda c: c.l, 1),),
        flops_backward=(grouped_mm_flops(lambda c: c.l, 2),),
        bytes=moe_routing_bytes(lambda c: c.l, weight_bytes=2)),      # Qwen3-MoE: bf16 weights
    # Qwen2-57B-A14B's config.json, tiny: 4 experts (top-2) of width 32 and a shared expert of width 48 behind
    # its sigmoid gate (exact: the sigmoid output and the shared expert's output kept by the multiply).
    # norm_topk_prob false as released: the top-k weights are not renormalised, so of (b)'s top-k part only
    # the ids are kept.
    "qwen2_moe": Case(
        real("qwen2-57b-a14b.json", **dict(LLAMA_SIZES, max_window_layers=2, num_experts=4, num_experts_per_tok=2,
                                           moe_intermediate_size=32, shared_expert_intermediate_size=48)),
        moe_dims("num_experts", "moe_intermediate_size"),
        flops_forward=(grouped_mm_flops(lambda c: c.l, 1),),
        flops_backward=(grouped_mm_flops(lambda c: c.l, 2),),
        bytes=(Term("top-k expert ids", lambda c, b, s: c.l * 8 * b * s * c.k,
                    # torch.topk(router_probs, k): TopkBackward0 keeps the [T, k] int64 indices; with
                    # norm_topk_prob false no division follows, so no fp32 weights or sum are kept
                    "top-k expert ids (int64) kept by TopkBackward0; the weights are not renormalised"),)
        + moe_routing_bytes(lambda c: c.l, weight_bytes=2)[1:]),       # routing weights cast to bf16
    # norm_topk_prob true (Qwen2MoeConfig allows it): (b) in full, as Qwen3-MoE
    "qwen2_moe-norm_topk_prob": Case(
        real("qwen2-57b-a14b.json", **dict(LLAMA_SIZES, max_window_layers=2, num_experts=4, num_experts_per_tok=2,
                                           moe_intermediate_size=32, shared_expert_intermediate_size=48,
                                           norm_topk_prob=True)),
        moe_dims("num_experts", "moe_intermediate_size"),
        flops_forward=(grouped_mm_flops(lambda c: c.l, 1),),
        flops_backward=(grouped_mm_flops(lambda c: c.l, 2),),
        bytes=moe_routing_bytes(lambda c: c.l, weight_bytes=2)),
    # Gemma-2B is multi-query (one K/V head): kept.
    "gemma": Case(real("gemma-2b.json", **dict(LLAMA_SIZES, num_key_value_heads=1, head_dim=16)), llama_dims,
                  bytes=(MQA_VIEW_AT_B1,)),
    "gemma2": Case(
        real("gemma-2-9b.json", **dict(LLAMA_SIZES, head_dim=16, query_pre_attn_scalar=16, sliding_window=32,
                                       sliding_window_size=32)),
        llama_dims,
        bytes=(Term("attention-logit soft-capping", lambda c, b, s: c.l * 2 * b * c.a * s * s,
                    # scores = tanh(scores / 50) · 50: TanhBackward0 keeps the [b, a, s, s] bf16 output
                    "Gemma 2 soft-caps the attention logits with tanh (not in costgraph's model): "
                    "the tanh output is kept"),
               Term("final-logit soft-capping", lambda c, b, s: 2 * b * s * c.V,
                    # logits = tanh(logits / 30) · 30: the [b, s, V] bf16 tanh output
                    "Gemma 2 soft-caps the output logits with tanh too: the tanh output is kept"))),
    # Gemma 3 1B's config.json (multi-query, as released) with 7 layers: 5 local, 1 global (j % 6 == 5),
    # 1 local; window 32 ≥ s. The per-head QK-norm, the sandwich norms and one rotary pair per layer kind
    # (rope table = local / global) are what Gemma3ForCausalLM keeps; only Gemma's b = 1 multi-query view.
    "gemma3_text": Case(
        real("gemma-3-1b-it.json", **dict(LLAMA_SIZES, num_hidden_layers=7, num_key_value_heads=1, head_dim=16,
                                          query_pre_attn_scalar=16, sliding_window=32)),
        llama_dims, bytes=(MQA_VIEW_AT_B1,)),
    # final_logit_softcapping (null in Gemma 3) set: the tanh output [b, s, V] is kept, as costgraph's softcap
    "gemma3_text-softcap": Case(
        real("gemma-3-1b-it.json", **dict(LLAMA_SIZES, num_hidden_layers=7, num_key_value_heads=1, head_dim=16,
                                          query_pre_attn_scalar=16, sliding_window=32, final_logit_softcapping=30.0)),
        llama_dims, bytes=(MQA_VIEW_AT_B1,)),
    # Phi-3-mini is MHA (kv = a) with fused qkv_proj and gate_up_proj.
    "phi3": Case(real("phi-3-mini-4k-instruct.json", **dict(LLAMA_SIZES, num_key_value_heads=4, sliding_window=32,
                                                             original_max_position_embeddings=64)),
                 llama_dims,
                 bytes=(fused_qkv_view_at_b1(lambda c: (c.a + 2 * c.kv) * c.d - c.kv * c.d),)),
    "gpt_neox": Case(real("pythia-1b.json", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=256, vocab_size=128, max_position_embeddings=64),
                     lambda cfg: dict(h=cfg["hidden_size"], l=cfg["num_hidden_layers"]),
                     bytes=(fused_qkv_view_at_b1(lambda c: 3 * c.h - c.h),)),
    # StarCoder2-3B: LayerNorm with bias, GQA, biases (use_bias), GELU MLP, dropout 0.1 (embedding, attention
    # probabilities, residual); a window of 32 ≥ s: Min(s, w) = s. Tied head (no tie_word_embeddings key).
    "starcoder2": Case(real("starcoder2-3b.json", **dict(LLAMA_SIZES, sliding_window=32)), llama_dims),
    # Nemotron-4-Mini-Hindi-4B: LayerNorm1P (x̂·(1 + γ) + β), GQA, rotary on half of each head, squared-ReLU
    # MLP without gating, untied head.
    "nemotron": Case(real("nemotron-4-mini-hindi-4b-instruct.json", **LLAMA_SIZES), llama_dims,
                     bytes=(Term("LayerNorm1P's 1 + γ", lambda c, b, s: (2 * c.l + 1) * 2 * c.h,
                                 # F.layer_norm(x, shape, self.weight + 1.0, self.bias): NativeLayerNormBackward0
                                 # keeps its weight argument, here the [h] bf16 sum, not a parameter
                                 "NemotronLayerNorm1P passes weight + 1 to layer_norm: that [h] bf16 tensor is a "
                                 "new activation autograd keeps, one per norm (2 per layer and the final one)"),)),
    # Command R (08-2024): one bias-free LayerNorm per layer feeding attention and MLP in parallel, GQA, SwiGLU,
    # tied head × logit_scale; and with Command R+'s QK-norm (per-head LayerNorms, γ per head).
    "cohere": Case(real("command-r-08-2024.json", **LLAMA_SIZES), llama_dims, bytes=(COHERE_NORM,)),
    "cohere-qk_norm": Case(real("command-r-08-2024.json", **dict(LLAMA_SIZES, use_qk_norm=True)), llama_dims,
                           bytes=(COHERE_NORM, COHERE_QK_NORM)),
    # bert-base-uncased's layout (post-LN encoder, biases, GELU, dropout 0.1), tiny; compared as BertModel with its
    # pooler (AutoModel's class; torch_probe.build_model), backward from the sum of the pooled output.
    "bert": Case(real("bert-base-uncased.json", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=128, vocab_size=128, max_position_embeddings=64),
                 lambda cfg: {},
                 bytes=(Term("position ids are a buffer", lambda c, b, s: -8 * s,
                             # BertEmbeddings: position_ids = self.position_ids[:, :s], a registered buffer
                             "BertModel reads its position ids from a registered buffer ([1, s_max] int64), "
                             "which is no activation; costgraph counts the [s] int64 ids its embedding keeps"),)),
    # OLMo-2-1124-7B's keys (MHA in the release; GQA here), tiny sizes; the released OLMo-2-1124-13B
    # config.json of examples/hf/ is checked at full size (RELEASED). Post-sublayer RMSNorms and QK-norm over the whole q and k projections.
    "olmo2": Case(dict(model_type="olmo2", hidden_act="silu", attention_bias=False, attention_dropout=0.0,
                       rms_norm_eps=1e-6, rope_theta=500000, tie_word_embeddings=False, **LLAMA_SIZES),
                  llama_dims,
                  bytes=(Term("rotary tables in fp32", lambda c, b, s: 2 * 2 * s * c.d,
                              # Olmo2RotaryEmbedding returns cos, sin in fp32 (no cast to the input dtype);
                              # apply_rotary_pos_emb multiplies the bf16 q, k by them and casts back
                              "OLMo 2 keeps the shared [1, 1, s, d] cos and sin tables in fp32, not bf16: "
                              "2 · 2 s d more bytes"),
                         Term("no fp32 1 + γ in OLMo 2's RMSNorm", lambda c, b, s: -4 * (
                             c.l * (c.a * c.d + c.kv * c.d + 2 * c.h) + c.h),
                              # Olmo2RMSNorm: (weight * x̂_fp32).to(dtype): the fp32 x̂ is kept (as
                              # costgraph's fp32_scale), but the weight is the bf16 parameter itself
                              "costgraph's fp32_scale RMSNorm (Gemma's x̂·(1 + γ)) also keeps an fp32 "
                              "1 + γ of the normalised size; OLMo 2 multiplies by γ itself (a parameter, "
                              "not counted): 4 bytes per γ entry fewer (q_norm a·d, k_norm kv·d, two h "
                              "per layer, the final h)"))),
    # No released Falcon or OPT config.json in examples/hf/: the keys of tiiuae/falcon-40b
    # (new decoder architecture: grouped K/V heads, two LayerNorms) and falcon-7b (multi-query,
    # one LayerNorm), and of facebook/opt-125m, with tiny sizes.
    "falcon": Case(dict(model_type="falcon", alibi=False, apply_residual_connection_post_layernorm=False,
                        attention_dropout=0.0, bias=False, hidden_dropout=0.0, hidden_size=64,
                        new_decoder_architecture=True, num_attention_heads=4, num_hidden_layers=2,
                        num_kv_heads=2, parallel_attn=True, vocab_size=128, bos_token_id=0, eos_token_id=1),
                   _falcon_dims, bytes=(FALCON_INDEX,)),
    "falcon-7b": Case(dict(model_type="falcon", alibi=False, apply_residual_connection_post_layernorm=False,
                           attention_dropout=0.0, bias=False, hidden_dropout=0.0, hidden_size=64,
                           multi_query=True, new_decoder_architecture=False, num_attention_heads=4,
                           num_hidden_layers=2, parallel_attn=True, vocab_size=128, bos_token_id=0,
                           eos_token_id=1),
                      _falcon_dims, bytes=(FALCON_INDEX, MQA_VIEW_AT_B1)),
    "opt": Case(dict(model_type="opt", activation_dropout=0.0, activation_function="relu", attention_dropout=0.0,
                     do_layer_norm_before=True, dropout=0.1, enable_bias=True, ffn_dim=128, hidden_size=64,
                     layerdrop=0.0, max_position_embeddings=64, num_attention_heads=4, num_hidden_layers=2,
                     vocab_size=128, word_embed_proj_dim=64, bos_token_id=0, eos_token_id=1, pad_token_id=2),
                lambda cfg: {},
                bytes=(Term("position ids per sequence", lambda c, b, s: 8 * b * s - 8 * s,
                            # OPTLearnedPositionalEmbedding: cumsum of the attention mask → [b, s] int64
                            "OPT derives position ids from the attention mask, one row per sequence "
                            "([b, s] int64, 8 b s bytes); costgraph keeps one shared [s] row (8 s)"),)),
    # DeepSeek-V3 with 8 experts in 4 groups (2 groups chosen per token), 1 dense layer then MoE;
    # its YaRN rotary scaling kept, with the original context shrunk like the rest.
    "deepseek_v3": Case(
        real("deepseek-v3.json", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
             vocab_size=128, intermediate_size=128, moe_intermediate_size=32, n_routed_experts=8,
             num_experts_per_tok=2, n_shared_experts=1, n_group=4, topk_group=2, first_k_dense_replace=1,
             q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
             max_position_embeddings=64, bos_token_id=0, eos_token_id=1,
             rope_scaling=dict(real("deepseek-v3.json")["rope_scaling"], original_max_position_embeddings=16)),
        _deepseek_dims,
        flops_forward=(grouped_mm_flops(DEEPSEEK_MOE_LAYERS, 1),),
        flops_backward=(grouped_mm_flops(DEEPSEEK_MOE_LAYERS, 2),),
        bytes=(
            Term("MLA: V copied from the kv_b_proj output (b ≥ 2)",
                 lambda c, b, s: -c.l * 2 * b * s * c.a * c.d_n if b >= 2 else 0,
                 # value_states = split(kv, [d_n, d_v])[1] is a strided view; from b = 2 on the bmm's
                 # reshape copies it to [b·a, s, d_v], and the [b, s, a (d_n + d_v)] output is not kept
                 "V is a slice of the kv_b_proj output; costgraph keeps that whole output (a view at "
                 "b = 1, as measured), but from b = 2 on the scores·V bmm copies V to [b·a, s, d_v] "
                 "and keeps only that: 2 b s a d_n fewer bytes per layer"),
            Term("router input in fp32", lambda c, b, s: DEEPSEEK_MOE_LAYERS(c) * 4 * b * s * c.h,
                 # router_logits = F.linear(hidden_states.float(), weight.float()): MmBackward0 keeps the copy
                 "the router runs in fp32: its [T, h] fp32 input copy is kept"),
            Term("group-limited routing", lambda c, b, s: DEEPSEEK_MOE_LAYERS(c) * (
                8 * b * s * c.n_group * 2 + 8 * b * s * c.topk_group + b * s * c.E),
                # group scores: top-2 per group [T, n_group, 2] int64; chosen groups [T, topk_group]
                # int64; the [T, E] bool mask of experts in chosen groups
                "DeepSeek-V3 picks topk_group of n_group expert groups first: the top-2 indices per "
                "group, the chosen groups (int64) and the [T, E] bool expert mask are kept"),
        ) + moe_routing_bytes(DEEPSEEK_MOE_LAYERS, weight_bytes=4)),
    # No released DeepSeek-V2 config.json in examples/hf/: DeepSeek-V2-Lite's keys (q_lora_rank null: a full
    # q_proj; softmax routing without renormalisation, no router bias), tiny sizes, 1 dense layer then MoE.
    "deepseek_v2": Case(DEEPSEEK_V2_LITE, _deepseek_v2_dims, flops_forward=DEEPSEEK_V2_FLOPS[0],
                        flops_backward=DEEPSEEK_V2_FLOPS[1], bytes=DEEPSEEK_V2_BYTES),
    # DeepSeek-V2's query compression (q_lora_rank set): q_a_proj, q_a_layernorm, q_b_proj as in V3
    "deepseek_v2-q_lora": Case(dict(DEEPSEEK_V2_LITE, q_lora_rank=32), _deepseek_v2_dims,
                               flops_forward=DEEPSEEK_V2_FLOPS[0], flops_backward=DEEPSEEK_V2_FLOPS[1],
                               bytes=DEEPSEEK_V2_BYTES),
    # T5-small's layout (T5DenseActDense, ReLU); the probe feeds [b, s] decoder ids, so t = s.
    # state-spaces/mamba-2.8b-hf's config.json, tiny (2 blocks, D = 128, N = 8, R = 8, K = 4); tied head,
    # residual_in_fp32 as released
    "mamba": Case(real("mamba-2.8b-hf.json", hidden_size=64, intermediate_size=128, num_hidden_layers=2, n_layer=2,
                       state_size=8, time_step_rank=8, vocab_size=128),
                  _mamba_dims, flops_forward=MAMBA_FLOPS_FORWARD, flops_backward=MAMBA_FLOPS_BACKWARD,
                  bytes=MAMBA_SCAN_BYTES + (MAMBA_RESIDUAL_FP32,)),
    # time_step_rank "auto" (MambaConfig's default): ceil(72 / 16) = 5; the residual stream in bf16
    "mamba-auto": Case(real("mamba-2.8b-hf.json", hidden_size=72, intermediate_size=144, num_hidden_layers=2,
                            n_layer=2, state_size=8, time_step_rank="auto", vocab_size=128, residual_in_fp32=False),
                       _mamba_dims, flops_forward=MAMBA_FLOPS_FORWARD, flops_backward=MAMBA_FLOPS_BACKWARD,
                       bytes=MAMBA_SCAN_BYTES),
    # Jamba: 5 Mamba mixers (with RMSNorms on Δ, B, C) and 1 attention layer; 3 MoE and 3 MLP layers. The
    # experts run as aten._grouped_mm; the router softmaxes in fp32 and casts the unrenormalised top-k weights
    # to bf16, so of the MoE terms the top-k ids are kept, not the fp32 weights and their sum (as Qwen2-MoE).
    "jamba": Case(JAMBA_V01_TINY, _mamba_dims,
                  flops_forward=MAMBA_FLOPS_FORWARD + (grouped_mm_flops(JAMBA_MOE, 1),),
                  flops_backward=MAMBA_FLOPS_BACKWARD + (grouped_mm_flops(JAMBA_MOE, 2),),
                  bytes=MAMBA_SCAN_BYTES + (JAMBA_B_NOT_KEPT,
                         Term("top-k expert ids", lambda c, b, s: c.moe * 8 * b * s * c.k,
                              # torch.topk(routing_weights, k): TopkBackward0 keeps the [T, k] int64 indices
                              "top-k expert ids (int64) kept by TopkBackward0; the weights are not renormalised"))
                  + moe_routing_bytes(JAMBA_MOE, weight_bytes=2)[1:]),
    "t5": Case(real("t5-small.json", d_model=64, d_kv=16, d_ff=128, num_heads=4, num_layers=2,
                    num_decoder_layers=2, vocab_size=128, n_positions=64, relative_attention_num_buckets=8),
               _t5_dims, seq2seq=True,
               bytes=(Term("T5LayerNorm keeps its bf16 input", lambda c, b, s: (
                   (2 * c.l + 1) + (3 * c.l_dec + 1)) * 2 * b * s * c.h,
                   # T5LayerNorm: variance from x.float().pow(2) (fp32 copy kept by PowBackward0), but
                   # x · rsqrt(variance) multiplies the bf16 input, so MulBackward0 keeps it as well
                   "T5LayerNorm multiplies the bf16 input (not its fp32 copy) by 1/rms, so autograd keeps "
                   "the bf16 input besides the fp32 copy: 2 b s h more per norm than LLaMA's RMSNorm "
                   "(2 per encoder layer + final, 3 per decoder layer + final)"),)),
}

# --- issue 19, positions and attention: ALiBi (BLOOM, MPT) and NoPE layers (SmolLM3). Tiny sizes as above;
# the configs of examples/hf/ (built from the config classes' defaults, SOURCES.md) with their sizes shrunk.
# BLOOM adds ALiBi inside alibi.baddbmm(Q, Kᵀ): FlopCounterMode counts aten.baddbmm as its product, what
# costgraph's QKᵀ matmul counts (its alibi add is 0 under `matmul`). SmolLM3: 4 layers, j = 3 NoPE.
CASES.update({
    "bloom": Case(real("bloom-560m.json", hidden_size=64, n_layer=2, n_head=4, vocab_size=128, **TOKENS),
                  lambda cfg: dict(h=cfg["hidden_size"], l=cfg["n_layer"], a=cfg["n_head"])),
    "mpt": Case(real("mpt-7b.json", d_model=64, n_layers=2, n_heads=4, vocab_size=128, max_seq_len=64, **TOKENS),
                lambda cfg: dict(h=cfg["d_model"], l=cfg["n_layers"], a=cfg["n_heads"]),
                bytes=(Term("bool causal mask kept by masked_fill", lambda c, b, s: b * s * s,
                            # MptAttention: scores.masked_fill(attention_mask, min): MaskedFillBackward0 keeps the
                            # [b, 1, s, s] bool mask, one storage shared by every layer
                            "MPT masks the scores with masked_fill, which keeps the bool causal mask (1 byte a "
                            "query-key pair, once for the model); costgraph's causal matmul keeps no mask"),)),
    "smollm3": Case(real("smollm3-3b.json", **dict(LLAMA_SIZES, num_hidden_layers=4)), llama_dims),
})
FAMILIES_ISSUE19_POSITIONS = ("bloom", "mpt", "smollm3")

FAMILIES = ("gpt2", "llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gemma", "gemma2", "phi3",
            "gpt_neox", "falcon", "opt", "deepseek_v3", "deepseek_v2", "t5", "nemotron", "cohere", "bert", "olmo2", "gpt_oss", "llama4_text", "starcoder2", "gemma3_text", "qwen2_moe",
            "mamba", "jamba") + FAMILIES_ISSUE19_POSITIONS
#: families compared in their own file (parameters and FLOPs, tiny and full size): tests/models/test_families_2025_torch.py
FAMILIES_ELSEWHERE = ("olmo3", "seed_oss", "glm4_moe", "ernie4_5_moe", "minimax_m2",
                      # pixel inputs, not [b, s] ids: tests/models/test_vit.py and tests/models/test_dinov2.py (verify exact)
                      "vit", "dinov2",
                      # token ids + pixels: tests/models/test_clip_siglip.py (verify exact)
                      "clip", "siglip",
                      # linear-attention / state-space hybrids: tests/models/test_hybrids_torch.py
                      "qwen3_next", "falcon_h1", "granitemoehybrid",
                      # a spectrogram into an encoder-decoder: tests/models/test_whisper.py; image tokens in a
                      # decoder: tests/models/test_llava.py (verify exact, released parameters on meta)
                      "whisper", "llava",
                      # diffusers' classes (`_class_name`), one denoising step: tests/models/test_dit.py
                      "dit", "sd3",
                      # Conv3d patches, a patch merger and an M-RoPE decoder: tests/models/test_qwen2_vl.py
                      "qwen2_vl", "qwen2_5_vl",
                      # an image cross-attended (mllama) or as tokens (gemma3): tests/models/test_mllama_gemma3mm.py
                      "mllama", "gemma3",
                      # sparse attention (the lightning indexer): tests/models/test_attn_variants.py
                      "deepseek_v32",
                      # KDA linear attention + MLA hybrid: tests/models/test_attn_variants.py
                      "kimi_linear",
                      # lightning attention + softmax attention hybrid: tests/models/test_attn_variants.py
                      "minimax",
                      # per-layer-type KV heads and head sizes, per-layer embeddings: tests/models/test_gemma4.py
                      "gemma4_text")


# ------------------------------------------------------------- measurements


@functools.cache
def torch_model(name: str):
    cfg = dict(CASES[name].config)
    return probe.build_model(cfg.pop("model_type"), cfg)


@functools.cache
def torch_measured(name: str, b: int, s: int) -> tuple[dict, dict]:
    """(FLOPs, saved bytes) of one forward and backward (probe.flops_and_saved_bytes: the dicts of
    probe.flops and probe.saved_bytes with 1-byte dropout masks, from one run instead of two)."""
    return probe.flops_and_saved_bytes(torch_model(name), b, s, cuda_dropout=True)


def torch_flops(name: str, b: int, s: int) -> dict:
    return torch_measured(name, b, s)[0]


def torch_saved(name: str, b: int, s: int) -> dict:
    return torch_measured(name, b, s)[1]


def dropout_in(cfg: dict) -> bool:
    return any(float(cfg.get(k) or 0) > 0 for k in DROPOUT_KEYS)


@functools.cache
def costgraph_model(name: str):
    cfg = CASES[name].config
    return costgraph.from_hf_config(cfg, source=name, profile="pytorch", dropout=dropout_in(cfg))


def costgraph_values(name: str, b: int | None = None, s: int | None = None) -> dict:
    m = costgraph_model(name)
    values = dict(m.values)
    if b is not None:
        values.update(b=b, s=s)
        if CASES[name].seq2seq:
            values["t"] = s            # decoder length = encoder length in the probe
    return m.costs("model", convention="matmul").evaluate(**values)


def explained(terms, name: str, b: int = 0, s: int = 0) -> dict[str, int]:
    c = SimpleNamespace(**CASES[name].dims(CASES[name].config))
    return {t.name: int(t.formula(c, b, s)) for t in terms}


def check(what: str, measured: int, derived: int, terms: dict[str, int]):
    lines = [f"{what}: torch {measured:,} vs costgraph {derived:,} + terms {sum(terms.values()):,}"]
    lines += [f"  {k}: {v:,}" for k, v in terms.items()]
    lines.append(f"  unexplained: {measured - derived - sum(terms.values()):,}")
    assert measured == derived + sum(terms.values()), "\n".join(lines)


#: the mixture-of-experts and state-space families: their cases are compared, by the same tests, in
#: tests/models/test_torch_moe_ssm.py (split off for CPU time: each file under 30 s); every other case here
MOE_SSM_TYPES = frozenset({"mixtral", "qwen3_moe", "qwen2_moe", "deepseek_v3", "deepseek_v2", "gpt_oss", "llama4_text",
                           "mamba", "jamba"})


def case_ids(moe_ssm: bool) -> list[str]:
    """The cases of the MoE and state-space families (``moe_ssm``) or of every other family."""
    return [n for n, c in CASES.items() if (c.config["model_type"] in MOE_SSM_TYPES) == moe_ssm]


def point_cases(names: list[str]) -> list[tuple[str, int, int]]:
    return [(n, b, s) for n in names for (b, s) in POINTS]


def point_ids(cases: list[tuple[str, int, int]]) -> list[str]:
    return [f"{n}-b{b}-s{s}" for n, b, s in cases]


CASE_IDS = case_ids(moe_ssm=False)
POINT_CASES = point_cases(CASE_IDS)
POINT_IDS = point_ids(POINT_CASES)


# ------------------------------------------------------------------- tests


def test_pinned_versions():
    # The numbers and terms below are for these releases (pyproject.toml's `torch` extra).
    assert torch.__version__.split("+")[0] == probe.TORCH_VERSION
    assert transformers.__version__ == probe.TRANSFORMERS_VERSION


def test_every_mapped_family_is_compared():
    from costgraph.language.hf_config import supported_model_types

    assert set(FAMILIES) | set(FAMILIES_ELSEWHERE) == set(supported_model_types())
    assert {c.config["model_type"] for c in CASES.values()} == set(FAMILIES)


@pytest.mark.parametrize("name", CASE_IDS)
def test_tiny_config_keeps_the_family_structure(name):
    keeps_the_family_structure(name)


def keeps_the_family_structure(name: str) -> None:
    # the tiny model is the family's own class, and costgraph maps the same config.json
    m = torch_model(name)
    cfg = CASES[name].config
    # (a text-only `*_text` model_type names the family's CausalLM class: gemma3_text → Gemma3ForCausalLM)
    assert type(m).__name__.lower().startswith(cfg["model_type"].removesuffix("_text").replace("_", ""))
    assert costgraph_model(name).model_type == cfg["model_type"]


@pytest.mark.parametrize("name", CASE_IDS)
def test_param_count(name):
    params_agree(name)


def params_agree(name: str) -> None:
    case = CASES[name]
    check(f"{name} params", probe.param_count(torch_model(name)), costgraph_values(name)["params"],
          explained(case.params, name))


def test_deepseek_router_bias_is_the_buffer_costgraph_lists():
    # DeepseekV3TopkRouter.e_score_correction_bias = nn.Buffer(zeros(E, float32)): not in model.parameters();
    # costgraph: param e_score_correction_bias[E]: buffer(fp32) (models/std/moe.cg), listed apart
    from costgraph.engine.totals import buffers
    m = torch_model("deepseek_v3")
    bias = [x for n, x in m.named_buffers() if n.endswith("e_score_correction_bias")]
    c = SimpleNamespace(**_deepseek_dims(CASES["deepseek_v3"].config))
    assert sum(x.numel() for x in bias) == (c.l - c.k_d) * c.E
    assert not any(n.endswith("e_score_correction_bias") for n, _ in m.named_parameters())
    hf = costgraph_model("deepseek_v3")
    assert [(n.subs(hf.model.values(None, hf.values)), dtype) for n, dtype in buffers(hf.model.graph).values()] == \
        [((c.l - c.k_d) * c.E, "fp32")]


# (and Mamba's depthwise convolution: costgraph's conv1d counts it under `matmul`, as FlopCounterMode does)
MATMUL_OPS = {"aten.mm", "aten.addmm", "aten.bmm", "aten.convolution", "aten.convolution_backward"}
MATMUL_OPS |= {"aten.baddbmm"}   # BLOOM's alibi.baddbmm(Q, Kᵀ): counted as its product (issue 19)


@pytest.mark.parametrize("name,b,s", POINT_CASES, ids=POINT_IDS)
def test_flops(name, b, s):
    flops_agree(name, b, s)


def flops_agree(name: str, b: int, s: int) -> None:
    case = CASES[name]
    f = torch_flops(name, b, s)
    cg = costgraph_values(name, b, s)
    # FlopCounterMode counts matrix products only (mm, addmm as its product, bmm) at 2 per
    # multiply-add, over the full s × s attention square: costgraph's `matmul` convention.
    # Nothing else shows up: norms, softmax, activations, embeddings and the rotary tables are 0
    # (transformers 5.24 builds the rotary angles as an elementwise outer product, not a matmul).
    for direction, terms in (("forward", case.flops_forward), ("backward", case.flops_backward)):
        ops = dict(f[f"{direction}_ops"])
        grouped = ops.pop("aten._grouped_mm", 0)         # the probe's formula (see below)
        assert set(ops) <= MATMUL_OPS, ops
        stock = sum(ops.values())                        # what stock FlopCounterMode reports
        t = explained(terms, name, b, s)
        check(f"{name} {direction} FLOPs (b={b}, s={s})", stock, cg[f"flops_{direction}"], t)
        # the probe's _grouped_mm formula puts back exactly the routed experts costgraph counts
        # (other FLOP terms, e.g. Llama 4's dense experts, are plain bmm that stock FlopCounterMode counts)
        assert grouped == -sum(v for k, v in t.items() if "_grouped_mm" in k)


@pytest.mark.parametrize("name,b,s", POINT_CASES, ids=POINT_IDS)
def test_saved_bytes(name, b, s):
    saved_bytes_agree(name, b, s)


def saved_bytes_agree(name: str, b: int, s: int) -> None:
    case = CASES[name]
    saved = torch_saved(name, b, s)
    cg = costgraph_values(name, b, s)
    check(f"{name} saved bytes (b={b}, s={s})", saved["bytes"], cg["activation_bytes"],
          explained(case.bytes, name, b, s))


def test_every_term_is_needed():
    # a term that is 0 at every point would explain nothing: each one shows up at some point
    for name, case in CASES.items():
        assert all(explained(case.params, name).values()), name
        for terms in (case.flops_forward, case.flops_backward, case.bytes):
            for t in terms:
                assert any(explained((t,), name, b, s)[t.name] for b, s in POINTS), (name, t.name)
