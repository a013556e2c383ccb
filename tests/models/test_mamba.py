"""Mamba and Jamba, the bundled models/mamba.cg and models/jamba.cg.

Parameter counts are transformers' own: ``sum(p.numel() for p in
model.parameters())`` of MambaForCausalLM / JambaForCausalLM built on the meta
device from the released config.json values (transformers 5.24.0, the pinned
``torch`` extra), written here as integers so the test runs without torch.
"""

from pathlib import Path

import pytest
import sympy

import costgraph
import json
from costgraph.cli import main

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


# ------------------------------------------------ Hugging Face config.json

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"

# state-spaces/mamba-130m-hf's config.json keys (transformers_version 4.39.0.dev0), as quoted in public test
# fixtures of Hugging Face → Megatron conversion code (a `mamba_130m_config_dict`); no attributable plain
# copy was found for examples/hf/ (SOURCES.md). Its d_inner/d_model/n_layer/ssm_cfg keys are mamba_ssm's
# and are not read by MambaConfig.
MAMBA_130M_HF = {
    "architectures": ["MambaForCausalLM"], "bos_token_id": 0, "conv_kernel": 4, "d_inner": 1536, "d_model": 768,
    "eos_token_id": 0, "expand": 2, "fused_add_norm": True, "hidden_act": "silu", "hidden_size": 768,
    "initializer_range": 0.1, "intermediate_size": 1536, "layer_norm_epsilon": 1e-05, "model_type": "mamba",
    "n_layer": 24, "num_hidden_layers": 24, "pad_token_id": 0, "pad_vocab_size_multiple": 8,
    "rescale_prenorm_residual": False, "residual_in_fp32": True, "rms_norm": True, "ssm_cfg": {},
    "state_size": 16, "time_step_floor": 0.0001, "time_step_init_scheme": "random", "time_step_max": 0.1,
    "time_step_min": 0.001, "time_step_rank": 48, "time_step_scale": 1.0, "torch_dtype": "float32",
    "transformers_version": "4.39.0.dev0", "use_bias": False, "use_cache": True, "use_conv_bias": True,
    "vocab_size": 50280,
}

# ai21labs/Jamba-v0.1's config.json keys, the values models/jamba.cg cites (its config jamba-v0.1); the
# copies quoted in public code (one labelled Jamba-v0.1, one labelled AI21-Jamba-1.5-Mini, same sizes) were
# edited, so none is in examples/hf/ (SOURCES.md).
JAMBA_V01_HF = {
    "architectures": ["JambaForCausalLM"], "attention_dropout": 0.0, "attn_layer_offset": 4, "attn_layer_period": 8,
    "bos_token_id": 1, "eos_token_id": 2, "expert_layer_offset": 1, "expert_layer_period": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "mamba_conv_bias": True,
    "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_dt_rank": 256, "mamba_expand": 2, "mamba_proj_bias": False,
    "max_position_embeddings": 262144, "model_type": "jamba", "num_attention_heads": 32, "num_experts": 16,
    "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "output_router_logits": False,
    "pad_token_id": 0, "rms_norm_eps": 1e-06, "router_aux_loss_coef": 0.001, "tie_word_embeddings": False,
    "use_cache": True, "use_mamba_kernels": True, "vocab_size": 65536,
}


def _params(hf):
    return hf.costs().evaluate(**hf.values)["params"]


def test_released_mamba_configs_give_transformers_counts():
    # the released state-spaces/mamba-2.8b-hf config.json of examples/hf/, and mamba-130m-hf's keys
    hf = costgraph.load_hf_config(str(HF / "mamba-2.8b-hf.json"))
    assert hf.model.name == "mamba" and _params(hf) == MAMBA_2_8B
    assert {k: hf.values[k] for k in ("h", "e", "N", "R", "K", "l", "V")} == dict(
        h=2560, e=2, N=16, R=160, K=4, l=64, V=50280)
    hf = costgraph.from_hf_config(MAMBA_130M_HF)
    assert _params(hf) == MAMBA_130M
    # no context length in a Mamba config: Gu & Dao's training context (§4.2)
    assert hf.values["s"] == 2048


def test_released_jamba_keys_give_transformers_count():
    hf = costgraph.from_hf_config(JAMBA_V01_HF)
    assert hf.model.name == "jamba" and _params(hf) == JAMBA_V01
    assert hf.values["d"] == 4096 // 32 and hf.values["s"] == 262144
    assert hf.costs().evaluate(**hf.values)["params_active"] == JAMBA_V01 - 16 * (16 - 2) * 3 * 4096 * 14336


@pytest.mark.parametrize("h, rank", [(768, 48), (2560, 160), (72, 5), (4100, 257)])
def test_auto_rank_is_ceil_of_h_over_16(h, rank):
    # MambaConfig / JambaConfig: time_step_rank (mamba_dt_rank) "auto" → math.ceil(hidden_size / 16);
    # absent means "auto" too (the configs' default). 768 and 2560: the released 48 and 160.
    for cfg in (dict(MAMBA_130M_HF, hidden_size=h, time_step_rank="auto"),
                {k: v for k, v in dict(MAMBA_130M_HF, hidden_size=h).items() if k != "time_step_rank"}):
        assert costgraph.from_hf_config(cfg).values["R"] == rank
    jamba = dict(JAMBA_V01_HF, hidden_size=h, num_attention_heads=h // 4, num_key_value_heads=h // 4, mamba_dt_rank="auto")
    assert costgraph.from_hf_config(jamba).values["R"] == rank
    # at the released sizes, "auto" gives the released ranks and so the transformers counts
    if h == 768:
        assert _params(costgraph.from_hf_config(dict(MAMBA_130M_HF, time_step_rank="auto"))) == MAMBA_130M


def test_auto_rank_other_text_is_refused_by_name():
    with pytest.raises(costgraph.CostgraphValueError, match="key 'time_step_rank' must be a positive whole number"):
        costgraph.from_hf_config(dict(MAMBA_130M_HF, time_step_rank="big"))


@pytest.mark.parametrize("cfg, key", [
    (dict(JAMBA_V01_HF, attn_layer_period=6), "attn_layer_period"),
    (dict(JAMBA_V01_HF, attn_layer_offset=3), "attn_layer_offset"),
    (dict(JAMBA_V01_HF, expert_layer_period=4), "expert_layer_period"),
    (dict(JAMBA_V01_HF, expert_layer_offset=0), "expert_layer_offset"),
    (dict(JAMBA_V01_HF, mamba_proj_bias=True), "mamba_proj_bias"),
    (dict(JAMBA_V01_HF, mamba_conv_bias=False), "mamba_conv_bias"),
    (dict(JAMBA_V01_HF, tie_word_embeddings=True), "tie_word_embeddings"),
    # JambaConfig.layers_num_experts: 1 expert → JambaMLP in every layer (no router), not the file's MoE
    (dict(JAMBA_V01_HF, num_experts=1), "num_experts"),
    (dict(MAMBA_130M_HF, use_bias=True), "use_bias"),
    (dict(MAMBA_130M_HF, use_conv_bias=False), "use_conv_bias"),
    (dict(MAMBA_130M_HF, hidden_act="gelu"), "hidden_act"),
])
def test_variants_the_model_files_do_not_describe_are_refused(cfg, key):
    # e.g. attention every 6th layer: models/jamba.cg writes j % 8 == 4, so the counts would be wrong
    with pytest.raises(costgraph.CostgraphValueError, match=f"{key} = .* is a variant costgraph's"):
        costgraph.from_hf_config(cfg)


def test_kernel_and_residual_switches_change_no_cost():
    # use_mamba_kernels (deprecated: chooses a kernel), use_mambapy and residual_in_fp32 (what autograd keeps
    # in transformers' reference path only) are accepted and change no count
    base = costgraph.from_hf_config(JAMBA_V01_HF)
    other = costgraph.from_hf_config(dict(JAMBA_V01_HF, use_mamba_kernels=False))
    assert base.values == other.values and _params(other) == JAMBA_V01
    m = costgraph.from_hf_config(dict(MAMBA_130M_HF, residual_in_fp32=False, use_mambapy=True))
    assert _params(m) == MAMBA_130M


def test_tied_head_follows_the_config():
    # MambaConfig's default ties the head; an untied head adds V·h parameters (lm_head.weight)
    untied = costgraph.from_hf_config(dict(MAMBA_130M_HF, tie_word_embeddings=False))
    assert _params(untied) == MAMBA_130M + 50280 * 768


# --- tensor parallelism splits the Mamba mixer and its recurrent state per channel (new-user trial) ------------------

# tensor parallelism splits Mamba's mixer per channel (Megatron-LM megatron/core/ssm/mamba_mixer.py,
# GPT-NeoX megatron/model/mamba/mamba.py ParallelMambaBlock): in_proj and dt_proj column-parallel,
# conv1d, A_log, D and the states per channel (d_inner / t), x_proj and out_proj row-parallel
MAMBA_28B = dict(h=2560, e=2, N=16, R=160, K=4, l=64)     # state-spaces/mamba-2.8b-hf config.json


def test_tp_splits_the_mamba_mixer_per_channel():
    import costgraph
    from costgraph.parallel.tensor import tensor_parallel

    tp = tensor_parallel(costgraph.load("mamba").graph, 2)
    assert tp.column == ["layers/mixer/in_proj", "layers/mixer/dt_proj", "lm_head"]
    assert tp.row == ["layers/mixer/x_proj", "layers/mixer/out_proj"]
    assert {w for w, d in tp.weights.items() if d == 2} == {
        "embeddings/weight", "layers/mixer/in_proj/weight", "layers/mixer/conv1d/weight",
        "layers/mixer/conv1d/bias", "layers/mixer/x_proj/weight", "layers/mixer/dt_proj/weight",
        "layers/mixer/dt_proj/bias", "layers/mixer/ssm/A_log", "layers/mixer/ssm/D",
        "layers/mixer/out_proj/weight"}
    # the inference states [b, D, K] and [b, D, N] split along their channels
    assert tp.split["layers/mixer/conv1d/conv_state"] == 1 and tp.split["layers/mixer/ssm/ssm_state"] == 1


@pytest.mark.parametrize("t", [1, 2])
def test_train_mamba_tp_weights_per_layer(capsys, t):
    c = MAMBA_28B
    assert main(["train", "mamba", "--config", "mamba-2.8b", "--gpus", str(t), "--tp", str(t), "--scope", "layer",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # models/mamba.cg: 3eh² + eh(K + 2R + 3N + 3) in the mixer, split by t; the RMSNorm's h whole; bf16
    mixer = 3 * c["e"] * c["h"] ** 2 + c["e"] * c["h"] * (c["K"] + 2 * c["R"] + 3 * c["N"] + 3)
    assert doc["memory"]["weights"]["value"] == 2 * (mixer // t + c["h"])


@pytest.mark.parametrize("model, config, state", [
    # l·b·e·h·(K + N) bf16 values (the convolution's last K inputs and the SSM state per channel)
    ("mamba", "mamba-2.8b", 2 * 64 * 2 * 2560 * (4 + 16)),
    # Jamba-v0.1: 28 of its 32 layers are Mamba (attention at layer 4 of every 8), h 4096, e 2, K 4, N 16
    ("jamba", "jamba-v0.1", 2 * 28 * 2 * 4096 * (4 + 16)),
])
def test_infer_tp_splits_the_recurrent_state(capsys, model, config, state):
    for t in (1, 2):
        assert main(["infer", model, "--config", config, "--hardware", "h100-sxm", "--prompt", "512",
                     "--generate", "128", "--tp", str(t), "--format", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["state_bytes"]["value"] == state // t
