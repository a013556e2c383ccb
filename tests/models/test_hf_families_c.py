"""gpt-oss and Llama 4 (text): released config.json → transformers' parameter count.

For each family, the released config.json of ``examples/hf/`` (or the sizes of
the model file's named configurations) mapped by ``costgraph.load_hf_config``
gives exactly the parameter count transformers 5.24.0 builds
(``sum(p.numel() for p in model.parameters())`` on the meta device, counted
once with the full config; the integers are written below with how they were
measured, so these tests run without torch). The torch-dependent checks
re-measure them where torch is installed. The PyTorch tier
(``tests/models/test_torch_agreement.py``) compares FLOPs and saved bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphError

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"

# ---------------------------------------------------------------- gpt-oss

# Measured: transformers 5.24.0, GptOssForCausalLM built on meta from examples/hf/gpt-oss-120b.json
# (quantization_config dropped: no quantizer on meta; parameters are counted, not their bytes).
GPT_OSS_120B_PARAMS = 116_829_156_672
# The same with gpt-oss-20b's sizes (num_hidden_layers 24, num_local_experts 32, layer_types cut to 24;
# openai/gpt-oss-20b config.json otherwise equals 120b's): the model card's "20.91B".
GPT_OSS_20B_PARAMS = 20_914_757_184


def gpt_oss_20b_config() -> dict:
    """gpt-oss-20b's config.json: 120b's with the two sizes that differ (openai/gpt-oss-20b)."""
    cfg = json.loads((HF / "gpt-oss-120b.json").read_text())
    cfg.update(num_hidden_layers=24, num_local_experts=32, layer_types=cfg["layer_types"][:24])
    return cfg


def params(m) -> dict:
    return m.costs().evaluate(**m.values)


def test_gpt_oss_120b_config_json_gives_transformers_count():
    m = costgraph.load_hf_config(str(HF / "gpt-oss-120b.json"))
    assert m.model_type == "gpt_oss"
    assert params(m)["params"] == GPT_OSS_120B_PARAMS
    # active: every parameter but the E − k idle experts of each layer (an expert: gate_up_proj h·2i + 2i,
    # down_proj i·h + h)
    h, i, E, k, l = 2880, 2880, 128, 4, 36
    assert params(m)["params_active"] == GPT_OSS_120B_PARAMS - l * (E - k) * (h * 2 * i + 2 * i + i * h + h)


def test_gpt_oss_named_configs_give_transformers_counts():
    for name, want in (("gpt-oss-20b", GPT_OSS_20B_PARAMS), ("gpt-oss-120b", GPT_OSS_120B_PARAMS)):
        assert costgraph.load("gpt_oss").costs().evaluate(config=name)["params"] == want, name
    assert params(costgraph.from_hf_config(gpt_oss_20b_config()))["params"] == GPT_OSS_20B_PARAMS


def test_gpt_oss_layer_pattern_is_not_unrolled():
    # one node per op per layer kind (sliding, full), counted floor((l + 1)/2) and floor(l/2) times
    m = costgraph.load("gpt_oss")
    names = sorted(n for n in m.graph.nodes if n.endswith("q_proj"))
    assert names == ["layers/full/self_attn/q_proj", "layers/sliding/self_attn/q_proj"]
    # the window applies to the sliding layers only: ceil(l/2) of them (j = 0, 2, ...)
    l = sympy.Symbol("l", positive=True, integer=True)
    kv = m.costs().kv_cache_bytes
    sizes = dict(b=1, d=64, kv=8, w=128, s=4096)
    for layers in (24, 25):
        sliding = (layers + 1) // 2
        want = 2 * 2 * 8 * 64 * (sliding * 128 + (layers - sliding) * 4096)
        assert m.costs().evaluate(config="gpt-oss-20b", l=layers)["kv_cache_bytes"] == want
    assert l in kv.free_symbols


def test_gpt_oss_refuses_other_layer_patterns():
    cfg = gpt_oss_20b_config()
    cfg["layer_types"] = ["full_attention"] * 24
    with pytest.raises(CostgraphError, match="layer_types"):
        costgraph.from_hf_config(cfg)
    cfg = gpt_oss_20b_config()
    cfg["attention_bias"] = False
    with pytest.raises(CostgraphError, match="attention_bias"):
        costgraph.from_hf_config(cfg)


def test_gpt_oss_counts_by_hand():
    # per layer (transformers' parameter shapes): q/k/v/o with biases, sinks [a], router [E, h] + [E],
    # E experts (gate_up [h, 2i] + [2i], down [i, h] + [h]), two RMSNorms; embeddings, final norm, lm_head
    h, a, kv, d, i, E, l, V = 2880, 64, 8, 64, 2880, 32, 24, 201088
    layer = (h * a * d + a * d + 2 * (h * kv * d + kv * d) + a * d * h + h + a + E * h + E
             + E * (h * 2 * i + 2 * i + i * h + h) + 2 * h)
    assert l * layer + 2 * V * h + h == GPT_OSS_20B_PARAMS


# -------------------------------------------------------- max(keepdim = true)

def test_max_keepdim_broadcasts_against_its_input():
    src = """
model t {
  dim b
  dim s
  dim n
  input x[b, s, n]
  return x - max(x, keepdim = true)
}
"""
    m = costgraph.loads(src, profile="pytorch", input_grads=True)   # x as a layer receives it (requires_grad)
    b, s, n = 2, 3, 5
    got = m.costs("model", convention="all").evaluate(b=b, s=s, n=n)
    # x.max(dim=-1, keepdim=True): [b, s, 1], keeps the int64 argmax (8 bytes each), 1 comparison an element;
    # the subtraction 1 FLOP an element, nothing kept
    assert got["activation_bytes"] == 8 * b * s
    assert got["flops_forward"] == 2 * b * s * n


# --------------------------------------------------- measured where torch is


def _torch_count(cfg: dict) -> int:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.torch_measure import build_meta, param_count

    cfg = dict(cfg)
    cfg["quantization_config"] = None
    return param_count(build_meta(cfg.pop("model_type"), cfg))


def test_gpt_oss_counts_are_transformers():
    assert _torch_count(json.loads((HF / "gpt-oss-120b.json").read_text())) == GPT_OSS_120B_PARAMS
    assert _torch_count(gpt_oss_20b_config()) == GPT_OSS_20B_PARAMS


# ---------------------------------------------------------------- Llama 4 (text)

# Measured: transformers 5.24.0, Llama4ForCausalLM built on meta from LLAMA4_SCOUT_TEXT below (and with
# Maverick's changes), attn_temperature_tuning True (the released 4 fails transformers 5.24's bool check).
LLAMA4_SCOUT_PARAMS = 107_769_861_120       # the text model of "Llama 4 Scout, 109B total" (the rest: vision)
LLAMA4_MAVERICK_PARAMS = 400_711_848_960    # "Llama 4 Maverick, 400B total"

# The text_config of meta-llama/Llama-4-Scout-17B-16E as printed by transformers (no unaltered config.json was
# found: examples/hf/SOURCES.md); moe_layers and no_rope_layers are what the release lists.
LLAMA4_SCOUT_TEXT = dict(
    model_type="llama4_text", attention_bias=False, attention_chunk_size=8192, attention_dropout=0.0, attn_scale=0.1,
    attn_temperature_tuning=4, floor_scale=8192, head_dim=128, hidden_act="silu", hidden_size=5120,
    interleave_moe_layer_step=1, intermediate_size=8192, intermediate_size_mlp=16384, max_position_embeddings=262144,
    moe_layers=list(range(48)), no_rope_layers=[1, 1, 1, 0] * 12, num_attention_heads=40, num_experts_per_tok=1,
    num_hidden_layers=48, num_key_value_heads=8, num_local_experts=16, use_qk_norm=True, vocab_size=202048)
# Maverick's differences (meta-llama/Llama-4-Maverick-17B-128E): 128 experts on odd layers, no QK-norm
LLAMA4_MAVERICK_TEXT = dict(LLAMA4_SCOUT_TEXT, interleave_moe_layer_step=2, moe_layers=list(range(1, 48, 2)),
                            num_local_experts=128, use_qk_norm=False)


def test_llama4_text_configs_give_transformers_counts():
    for cfg, name, want in ((LLAMA4_SCOUT_TEXT, "llama-4-scout-17b-16e", LLAMA4_SCOUT_PARAMS),
                            (LLAMA4_MAVERICK_TEXT, "llama-4-maverick-17b-128e", LLAMA4_MAVERICK_PARAMS)):
        m = costgraph.from_hf_config(cfg)
        assert m.model_type == "llama4_text"
        assert params(m)["params"] == want, name
        assert costgraph.load("llama4_text", config=name).costs().evaluate(config=name)["params"] == want, name


def test_llama4_counts_by_hand():
    # Scout: every layer MoE. Per layer: q/k/v/o, router [E, h], E experts (gate_up [h, 2i], down [i, h]),
    # shared expert (3 h i), two RMSNorms; embeddings, final norm, untied lm_head. QK-norm has no weight.
    h, a, kv, d, i, E, l, V = 5120, 40, 8, 128, 8192, 16, 48, 202048
    attn = 2 * h * a * d + 2 * h * kv * d
    assert l * (attn + E * h + E * 3 * h * i + 3 * h * i + 2 * h) + 2 * V * h + h == LLAMA4_SCOUT_PARAMS
    # Maverick: 24 MoE layers of 128 experts, 24 dense layers of width 16384
    E, f = 128, 16384
    moe, dense = E * h + E * 3 * h * i + 3 * h * i, 3 * h * f
    assert 24 * (attn + moe + 2 * h) + 24 * (attn + dense + 2 * h) + 2 * V * h + h == LLAMA4_MAVERICK_PARAMS
    # active (k = 1): Scout's "17B active"
    m = costgraph.from_hf_config(LLAMA4_SCOUT_TEXT)
    assert params(m)["params_active"] == LLAMA4_SCOUT_PARAMS - l * (16 - 1) * 3 * h * i


def test_llama4_layer_patterns_are_not_unrolled():
    m = costgraph.load("llama4_text", config="llama-4-maverick-17b-128e")
    # one node per op per layer kind: two attention kinds, two MLP kinds
    assert sorted(n for n in m.graph.nodes if n.endswith("q_proj")) == [
        "layers/nope_attn/q_proj", "layers/rope_attn/q_proj"]
    assert sorted(n for n in m.graph.nodes if n.endswith("/router") or n.endswith("dense_mlp/gate_proj")) == [
        "layers/dense_mlp/gate_proj", "layers/moe/router"]
    # the KV cache: floor(l/4) full layers keep s positions, the others a chunk's Min(s, C)
    for l in (48, 50):
        got = m.costs().evaluate(config="llama-4-maverick-17b-128e", l=l, s=16384)["kv_cache_bytes"]
        assert got == 2 * 2 * 8 * 128 * ((l // 4) * 16384 + (l - l // 4) * 8192)
    # MoE on odd layers: floor(l/2) routers, ceil(l/2) dense MLPs
    per_expert = 3 * 5120 * 8192
    p49 = m.costs().evaluate(config="llama-4-maverick-17b-128e", l=49)["params"]
    p48 = m.costs().evaluate(config="llama-4-maverick-17b-128e", l=48)["params"]
    attn = 2 * 5120 * 40 * 128 + 2 * 5120 * 8 * 128
    assert p49 - p48 == attn + 3 * 5120 * 16384 + 2 * 5120     # layer 48 (even): dense
    p50 = m.costs().evaluate(config="llama-4-maverick-17b-128e", l=50)["params"]
    assert p50 - p49 == attn + 128 * (5120 + per_expert) + per_expert + 2 * 5120   # layer 49 (odd): MoE


def test_llama4_refuses_what_its_model_file_does_not_describe():
    for change, key in ((dict(moe_layers=[0, 2]), "moe_layers"), (dict(no_rope_layers=[1] * 48), "no_rope_layers"),
                        (dict(interleave_moe_layer_step=4), "interleave_moe_layer_step"),
                        (dict(attn_temperature_tuning=False), "attn_temperature_tuning"),
                        (dict(attention_chunk_size=None), "attention_chunk_size")):
        with pytest.raises(CostgraphError, match=key):
            costgraph.from_hf_config(dict(LLAMA4_SCOUT_TEXT, **change))
    # absent lists are transformers' defaults: the same model
    bare = {k: v for k, v in LLAMA4_SCOUT_TEXT.items() if k not in ("moe_layers", "no_rope_layers")}
    assert params(costgraph.from_hf_config(bare))["params"] == LLAMA4_SCOUT_PARAMS


def test_mapping_equals_and_layer_indices_specs():
    from costgraph.language.hf_config import _Reader, _check_layer_indices

    r = _Reader({"step": 2, "moe_layers": [1, 3, 5]}, "<t>")
    assert r.spec({"key": "step", "equals": 2}, "x") is True
    assert r.spec({"key": "missing", "default": 1, "equals": 2}, "x") is False
    _check_layer_indices(r, {"key": "moe_layers", "every": "step", "length": {"value": 6}}, "m")   # 1, 3, 5
    with pytest.raises(CostgraphError, match=r"j % 2 == 1, \[1, 3, 5, 7\]"):
        _check_layer_indices(r, {"key": "moe_layers", "every": "step", "length": {"value": 8}}, "m")


def test_llama4_counts_are_transformers():
    for cfg, want in ((LLAMA4_SCOUT_TEXT, LLAMA4_SCOUT_PARAMS), (LLAMA4_MAVERICK_TEXT, LLAMA4_MAVERICK_PARAMS)):
        assert _torch_count(dict(cfg, attn_temperature_tuning=True, tie_word_embeddings=False)) == want
