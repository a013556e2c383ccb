"""Mamba and Jamba, the bundled models/mamba.cg and models/jamba.cg.

Parameter counts are transformers' own: ``sum(p.numel() for p in
model.parameters())`` of MambaForCausalLM / JambaForCausalLM built on the meta
device from the released config.json values (transformers 5.24.0, the pinned
``torch`` extra), written here as integers so the test runs without torch.
"""

import pytest
import sympy

import costgraph

# transformers 5.24.0, MambaForCausalLM(MambaConfig(hidden_size=768, expand=2, state_size=16,
# time_step_rank=48, conv_kernel=4, num_hidden_layers=24, vocab_size=50280)) on the meta device
# (state-spaces/mamba-130m-hf config.json): Gu & Dao 2023's Mamba-130M
MAMBA_130M = 129_135_360
# idem with hidden_size=2560, time_step_rank=160, num_hidden_layers=64 (state-spaces/mamba-2.8b-hf)
MAMBA_2_8B = 2_768_345_600
# transformers 5.24.0, JambaForCausalLM(JambaConfig(hidden_size=4096, num_attention_heads=32,
# num_key_value_heads=8, intermediate_size=14336, num_experts=16, num_experts_per_tok=2,
# mamba_expand=2, mamba_d_state=16, mamba_dt_rank=256, mamba_d_conv=4, num_hidden_layers=32,
# vocab_size=65536, tie_word_embeddings=False)) on the meta device (ai21labs/Jamba-v0.1);
# Lieber et al. 2024, Table 1: 52B available parameters, 12B active
JAMBA_V01 = 51_570_323_328


@pytest.fixture(scope="module")
def mamba():
    return costgraph.load("mamba")


@pytest.fixture(scope="module")
def jamba():
    return costgraph.load("jamba")


@pytest.mark.parametrize("config, want", [("mamba-130m", MAMBA_130M), ("mamba-2.8b", MAMBA_2_8B)])
def test_mamba_params_equal_transformers(mamba, config, want):
    assert mamba.costs().evaluate(config=config)["params"] == want


def test_mamba_params_formula(mamba):
    # per block (MambaMixer + its RMSNorm), D = e·h: in_proj 2Dh, conv1d DK + D, x_proj D(R + 2N),
    # dt_proj RD + D, A_log DN, D D, out_proj Dh, norm h; embedding Vh (tied head), norm_f h
    g = mamba.graph.dims
    h, e, N, R, K, l, V = (g[x].symbol for x in ("h", "e", "N", "R", "K", "l", "V"))
    D = e * h
    block = 2 * D * h + D * K + D + D * (R + 2 * N) + R * D + D + D * N + D + D * h + h
    assert sympy.expand(mamba.costs().params - (l * block + V * h + h)) == 0


def test_jamba_params_equal_transformers(jamba):
    assert jamba.costs().evaluate(config="jamba-v0.1")["params"] == JAMBA_V01


def test_jamba_active_params(jamba):
    # per MoE layer, the E − k idle experts of 3·h·i each drop out: 16 MoE layers of Jamba-v0.1
    idle = 16 * (16 - 2) * 3 * 4096 * 14336
    assert jamba.costs().evaluate(config="jamba-v0.1")["params_active"] == JAMBA_V01 - idle


def test_jamba_pattern_is_not_unrolled(jamba):
    # one node per operator per kind of layer: one attention, one Mamba mixer, one MoE and one
    # MLP branch, whatever l is
    ops = [p for p, _ in jamba.graph.ops() if p.startswith("layers/")]
    assert sum(p.endswith("/q_proj") for p in ops) == 1
    assert sum(p.endswith("/in_proj") for p in ops) == 1
    assert sum(p.endswith("/down_proj") for p in ops) == 2      # one MLP, one expert
    counts = {p: d["count"] for p, d in jamba.graph.ops()}
    l = jamba.graph.dims["l"].symbol
    # i % 8 == 4 holds for floor((l + 3)/8) of 0 … l − 1; i % 2 == 1 for floor(l/2)
    attn = next(c for p, c in counts.items() if p.endswith("self_attn/q_proj"))
    mixer = next(c for p, c in counts.items() if p.endswith("mamba/in_proj"))
    assert sympy.simplify(attn - sympy.floor((l + 3) / 8)) == 0
    assert sympy.simplify(attn + mixer - l) == 0
    assert [attn.subs(l, 32), mixer.subs(l, 32)] == [4, 28]


def test_jamba_layer_kinds_for_every_depth(jamba):
    # the closed form equals the count over the unrolled list JambaConfig.layers_block_type builds
    counts = {p: d["count"] for p, d in jamba.graph.ops()}
    l = jamba.graph.dims["l"].symbol
    attn = next(c for p, c in counts.items() if p.endswith("self_attn/q_proj"))
    moe = next(c for p, c in counts.items() if p.endswith("moe/gate"))
    for n in range(1, 40):
        assert attn.subs(l, n) == sum(1 for j in range(n) if j % 8 == 4)
        assert moe.subs(l, n) == sum(1 for j in range(n) if j % 2 == 1)


def test_mamba_state_is_fixed_size(mamba):
    # per block: conv state [b, D, K] and SSM state [b, D, N] in bf16, whatever s is
    c = mamba.costs()
    g = mamba.graph.dims
    b, h, e, N, K, l = (g[x].symbol for x in ("b", "h", "e", "N", "K", "l"))
    assert sympy.expand(c.kv_cache_bytes - l * 2 * b * e * h * (K + N)) == 0
    assert c.kv_cache_bytes_per_token == 0
    # mamba-130m, b = 1: 24 · 2 · 1536 · (4 + 16) = 1,474,560 bytes
    assert c.evaluate(config="mamba-130m")["kv_cache_bytes"] == 24 * 2 * 1536 * 20 == 1_474_560
