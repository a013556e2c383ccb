"""Real architectures: published parameter counts and KV caches, and one
regression test per mistake public calculators make (DOMAIN.md §8).

Sources of the known values: the issue's table (from each checkpoint's
config.json and model card) and DOMAIN.md §8.
"""

import pytest
import sympy

import costgraph
from costgraph.numbers import units
from costgraph.engine.symbols import dim


def eq(a, b):
    return sympy.expand(a - b) == 0


def params(model, config):
    return costgraph.load(model).costs().evaluate(config=config)


@pytest.mark.parametrize("model,config,expected", [
    ("gpt", "gpt2", 124_439_808),                # GPT-2 small
    ("llama", "llama-2-7b", 6_738_415_616),      # Llama-2-7B
    ("llama", "llama-2-70b", 68_976_648_192),    # Llama-2-70B
    ("llama", "llama-3-8b", 8_030_261_248),      # Llama-3-8B
    ("mixtral", "mixtral-8x7b", 46_702_792_704),  # Mixtral-8x7B total
    ("qwen2", "qwen1.5-72b", 72_287_920_128),    # Qwen1.5-72B (MHA, QKV bias, untied)
    # model cards / safetensors totals of the released checkpoints:
    ("mistral", "mistral-7b", 7_241_732_096),
    ("qwen2", "qwen2-7b", 7_615_616_512),
    ("qwen3", "qwen3-8b", 8_190_735_360),
    ("qwen3_moe", "qwen3-30b-a3b", 30_532_122_624),
    ("gemma", "gemma-2b", 2_506_172_416),
    ("gemma", "gemma-7b", 8_537_680_896),
    ("gemma2", "gemma-2-9b", 9_241_705_984),
    ("phi3", "phi-3-mini-4k", 3_821_079_552),
    ("gpt_neox", "pythia-160m", 162_322_944),
    ("gpt_neox", "pythia-6.9b", 6_857_302_016),
    ("falcon", "falcon-7b", 6_921_720_704),
    ("opt", "opt-125m", 125_239_296),
    ("deepseek_v3", "deepseek-v3", 671_026_404_352),   # 671B, without the MTP module; transformers' count
    # (the routers' 58·256 e_score_correction_bias are buffers: + 14,848 = the checkpoint's 671,026,419,200)
    ("t5", "t5-small", 60_506_624),
    ("t5", "t5-base", 222_903_552),
])
def test_published_parameter_counts(model, config, expected):
    assert params(model, config)["params"] == expected


@pytest.mark.parametrize("model,config,expected", [
    ("mixtral", "mixtral-8x7b", 12_879_925_248),       # issue 3 table
    ("qwen3_moe", "qwen3-30b-a3b", 3_353_032_704),     # "A3B": 3.3 B activated
    ("deepseek_v3", "deepseek-v3", 37_552_282_624),    # "37B activated" (the router buffers apart)
])
def test_active_parameters(model, config, expected):
    assert params(model, config)["params_active"] == expected


@pytest.mark.parametrize("config,per_token", [
    ("llama-2-7b", 524_288),   # MHA: 2 · 32 layers · 32 heads · 128 · 2 bytes
    ("llama-2-70b", 327_680),  # GQA: 2 · 80 · 8 · 128 · 2
    ("llama-3-8b", 131_072),   # GQA: 2 · 32 · 8 · 128 · 2
])
def test_kv_cache_per_token_bf16(config, per_token):
    assert params("llama", config)["kv_cache_bytes_per_token"] == per_token


def test_gqa_kv_cache_not_all_query_heads():
    # DOMAIN.md §8: Llama-2-70B, 4,096 tokens, bf16: 1,280 MiB, not 20,480 MiB
    v = costgraph.load("llama").costs().evaluate(config="llama-2-70b", s=4096, b=1)
    assert v["kv_cache_bytes"] == 1280 * 2**20
    assert units.nbytes(v["kv_cache_bytes"]).endswith(", 1.25 GiB")
    # ... and its parameters are 69.0 B, not 78 B (which K/V at 64 heads would give)
    assert v["params"] == 68_976_648_192


def test_gated_mlp_has_three_matrices():
    # SwiGLU: gate, up, down = 3·h·i per layer (Qwen1.5-72B: 72.3 B, not 56 B)
    m = costgraph.load("llama")
    h, i = dim("h"), dim("i")
    assert eq(m.costs("layers/layer/mlp").params, 3 * h * i)


def test_moe_flops_use_top_k_experts_once():
    # Per MoE layer: router 2bshE + k experts · 6bshi (not (1 + k) experts, not E)
    m = costgraph.load("mixtral")
    b, s, h, i, E, k = (dim(n) for n in ("b", "s", "h", "i", "E", "k"))
    assert eq(m.costs("layers/layer/mlp").flops_forward, 2 * b * s * h * E + 6 * b * s * h * i * k)
    # memory needs all experts, compute the active ones
    assert eq(m.costs("layers/layer/mlp").params, 3 * h * i * E + h * E)
    assert eq(m.costs("layers/layer/mlp").params_active, 3 * h * i * k + h * E)


def test_tied_embeddings_counted_once_and_lookup_costs_nothing():
    b, s, h, V = dim("b"), dim("s"), dim("h"), dim("V")
    tied = costgraph.load("gemma")
    untied = costgraph.load("llama")
    rows = {r["path"]: r for r in tied.costs().rows}
    assert eq(rows["embed_tokens"]["params"], V * h) and rows["lm_head"]["params"] == 0
    assert rows["embed_tokens"]["flops_forward"] == 0                          # lookup: 0 FLOPs
    assert eq(rows["lm_head"]["flops_forward"], 2 * b * s * h * V)             # head: 2bshV, once
    u = {r["path"]: r for r in untied.costs().rows}
    assert eq(u["lm_head"]["params"], V * h)                                   # untied adds Vh


def test_head_dim_is_not_h_over_a():
    # Gemma-7B: h 3072, 16 heads of 256 (4096 ≠ 3072): q_proj is 3072 × 4096
    m = costgraph.load("gemma")
    rows = {r["path"]: r for r in m.costs().rows}
    subs = m.values("gemma-7b")
    assert rows["layers/layer/self_attn/q_proj"]["params"].subs(subs) == 3072 * 4096
    assert params("gemma", "gemma-7b")["params"] == 8_537_680_896


def test_mla_caches_the_latent_only():
    # DeepSeek-V3: kv_lora_rank + qk_rope_head_dim = 512 + 64 values per token per layer
    m = costgraph.load("deepseek_v3")
    d_r, r_kv = dim("d_r"), dim("r_kv")
    assert eq(m.costs("moe_layers").kv_cache_bytes_per_token, 2 * (r_kv + d_r))   # bf16: 2 bytes
    v = m.costs().evaluate(config="deepseek-v3")
    assert v["kv_cache_bytes_per_token"] == 61 * (512 + 64) * 2


def test_sliding_window_limits_attention_and_cache():
    m = costgraph.load("mistral")
    b, s, d, kv, a, w, l = (dim(n) for n in ("b", "s", "d", "kv", "a", "w", "l"))
    c = m.costs("layer")
    assert eq(c.kv_cache_bytes, 4 * b * d * kv * sympy.Min(s, w))
    # QKᵀ and scores·V over Min(s, w) keys per query
    assert eq(c.flops_forward - c.flops_forward.subs(sympy.Min(s, w), 0),
              4 * b * s * a * d * sympy.Min(s, w))
    v = m.costs().evaluate(config="mistral-7b", s=32768)
    assert v["kv_cache_bytes"] == 32 * 4 * 4096 * 128 * 8          # capped at w = 4096 positions


def test_local_global_stack_windows_only_half_the_layers():
    m = costgraph.load("gemma2")
    b, s, d, kv, w, l = (dim(n) for n in ("b", "s", "d", "kv", "w", "l"))
    assert eq(m.costs().kv_cache_bytes, l / 2 * 4 * b * d * kv * (sympy.Min(s, w) + s))


def test_attention_products_counted_and_causal_convention():
    m = costgraph.load("gpt")
    b, s, h = dim("b"), dim("s"), dim("h")
    full = m.costs("layer").flops_forward
    half = m.costs("layer", causal="half").flops_forward
    assert eq(full - half, 2 * b * s**2 * h)      # QKᵀ and scores·V halved: 4bs²h → 2bs²h


def test_units_decimal_for_counts_and_labelled_bytes():
    # OPT-175B-sized count: decimal prefix, never binary ("162.58 G" is 174,566,277,120 / 2³⁰)
    assert units.count(174_566_277_120) == "174.6 G"
    assert units.nbytes(1280 * 2**20) == "1.34 GB, 1.25 GiB"
