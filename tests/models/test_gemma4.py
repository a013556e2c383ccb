"""Gemma 4's text decoder (models/gemma4_text.cg): per-layer-type KV heads and head sizes.

Sources: transformers 5.24 ``models/gemma4/modeling_gemma4.py`` (Gemma4TextAttention: head_dim and
num_key_value_heads from ``config.per_layer_config[layer_idx]``, no v_proj when attention_k_eq_v on
full layers, v_norm without weight; Gemma4TextDecoderLayer: per-layer input gate/projection/norm;
Gemma4TextModel: embed_tokens_per_layer, per_layer_model_projection, per_layer_projection_norm) and
``configuration_gemma4.py`` (Gemma4TextConfig.__post_init__: global_head_dim 512 and
num_global_key_value_heads on the full_attention layers). The KV cache is compared with
``DynamicCache(config=...)`` after a prefill (transformers cache_utils: one layer per decoder layer,
DynamicSlidingWindowLayer on sliding layers keeping the last sliding_window − 1 positions).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from costgraph.cli import main
from costgraph.language.hf_config import from_hf_config

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"

#: 6 layers: 5 sliding (heads of 16, 2 kv heads) and layer 5 full (heads of 32; 1 kv head with k_eq_v)
SMALL = dict(model_type="gemma4_text", vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=6,
             num_attention_heads=4, num_key_value_heads=2, head_dim=16, global_head_dim=32, sliding_window=8,
             hidden_size_per_layer_input=8, vocab_size_per_layer_input=96, max_position_embeddings=256,
             pad_token_id=0, bos_token_id=2, eos_token_id=1)
K_EQ_V = dict(SMALL, attention_k_eq_v=True, num_global_key_value_heads=1)
#: 12 layers, the last 4 reusing keys and values (layers 8–10 those of sliding layer 7, layer 11 those of
#: full layer 5: kv_sharing_modes), their MLPs 2·i wide (use_double_wide_mlp)
SHARED = dict(SMALL, num_hidden_layers=12, num_kv_shared_layers=4, use_double_wide_mlp=True)
#: enable_moe_block: 4 experts of 24, 2 per token, beside the MLP of every layer
MOE = dict(SMALL, enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=24)
E, k, i_e = 4, 2, 24
V, h, i, l, a, kv, d, dg, p, Vp, w = 128, 64, 96, 6, 4, 2, 16, 32, 8, 96, 8
#: layers per kind: (sliding, full, sliding sharing, full sharing)
KINDS = {"small": (5, 1, 0, 0), "shared": (7, 1, 3, 1)}
SLIDING = 5


def _kvg(k_eq_v: bool) -> int:
    return 1 if k_eq_v else kv


def _params(k_eq_v: bool = False, kind: str = "small") -> int:
    """Gemma4ForCausalLM's parameters module by module (tied head)."""
    n_s, n_f, n_ss, n_fs = KINDS[kind]
    layers = n_s + n_f + n_ss + n_fs

    def attn(heads_d, kv_heads, no_v=False):
        return h * a * heads_d + (1 if no_v else 2) * h * kv_heads * heads_d + a * heads_d * h + 2 * heads_d

    def shared(heads_d):                                   # q_proj, q_norm, o_proj only
        return 2 * h * a * heads_d + heads_d
    layer = 3 * h * i + 5 * h + 2 * h * p                 # MLP, 5 norms, per_layer_input_gate / projection
    wide = 3 * h * (2 * i) + 5 * h + 2 * h * p
    return (n_s * (layer + attn(d, kv)) + n_f * (layer + attn(dg, _kvg(k_eq_v), no_v=k_eq_v))
            + n_ss * (wide + shared(d)) + n_fs * (wide + shared(dg))
            + V * h + Vp * layers * p + h * layers * p + p + h)


def _forward(b: int, s: int, k_eq_v: bool = False, kind: str = "small") -> int:
    """Forward FLOPs ('matmul') at [b, s ≤ w]: FlopCounterMode's count of eager attention."""
    n_s, n_f, n_ss, n_fs = KINDS[kind]
    layers = n_s + n_f + n_ss + n_fs
    t = b * s

    def attn(heads_d, kv_heads, no_v=False):
        return 2 * t * (2 * h * a * heads_d + (1 if no_v else 2) * h * kv_heads * heads_d) + 4 * b * s * s * a * heads_d

    def shared(heads_d):
        return 2 * t * 2 * h * a * heads_d + 4 * b * s * s * a * heads_d
    layer, wide = 6 * t * h * i + 4 * t * h * p, 6 * t * h * 2 * i + 4 * t * h * p
    return (n_s * (layer + attn(d, kv)) + n_f * (layer + attn(dg, _kvg(k_eq_v), no_v=k_eq_v))
            + n_ss * (wide + shared(d)) + n_fs * (wide + shared(dg)) + 2 * t * h * layers * p + 2 * t * h * V)


def _kv_bytes(b: int, s: int, k_eq_v: bool = False, keep: int = w, kind: str = "small") -> int:
    """K and V in bf16: kv·d per sliding layer over min(s, keep) positions, kvg·dg per full layer over s;
    nothing for the layers that reuse another's."""
    n_s, n_f, _, _ = KINDS[kind]
    return 2 * 2 * b * (n_s * kv * d * min(s, keep) + n_f * _kvg(k_eq_v) * dg * s)


def _values(cfg: dict, b: int, s: int) -> dict:
    m = from_hf_config(dict(cfg))
    return m.costs().evaluate(**{**m.values, "b": b, "s": s})


def test_mapping_reads_the_per_layer_type_shapes():
    assert from_hf_config(dict(SMALL)).values == dict(h=h, a=a, kv=kv, d=d, dg=dg, kvg=kv, i=i, l=l, V=V, w=w,
                                                     p=p, Vp=Vp, s=256, b=1)
    assert from_hf_config(dict(K_EQ_V)).values["kvg"] == 1
    # a config saved by transformers carries them as per_layer_config (layer "05": the first full layer)
    Gemma4TextConfig = pytest.importorskip("transformers").Gemma4TextConfig   # the torch tier
    saved = Gemma4TextConfig(**{k: v for k, v in K_EQ_V.items() if k != "model_type"}).to_dict()
    assert "global_head_dim" not in saved and "num_global_key_value_heads" not in saved
    assert {k: from_hf_config(saved).values[k] for k in ("dg", "kvg")} == {"dg": dg, "kvg": 1}


@pytest.mark.parametrize("k_eq_v", [False, True])
def test_written_out(k_eq_v):
    cfg = K_EQ_V if k_eq_v else SMALL
    values = _values(cfg, 2, 8)
    assert values["params"] == _params(k_eq_v)
    assert values["flops_forward"] == _forward(2, 8, k_eq_v)
    assert values["kv_cache_bytes"] == _kv_bytes(2, 8, k_eq_v)
    assert (_params(False), _params(True)) == (220_840, 214_696)


def test_kv_sharing_written_out():
    m = from_hf_config(dict(SHARED))
    assert m.values["ns"] == 4 and "ns" not in from_hf_config(dict(SMALL)).values   # option kv_shared
    values = _values(SHARED, 2, 8)
    assert values["params"] == _params(kind="shared") == 486_584
    assert values["flops_forward"] == _forward(2, 8, kind="shared")
    assert values["kv_cache_bytes"] == _kv_bytes(2, 8, kind="shared")


def test_kv_sharing_decode_reads_the_source_cache(tmp_path):
    """A KV-sharing layer reads its source layer's cache at every step; the cache is stored once, there
    (transformers 5.24 modeling_gemma4.py Gemma4TextAttention: a layer with is_kv_shared_layer takes
    key_states/value_states from past_key_values at kv_shared_layer_index, after that layer has stored
    this step's K/V, and stores nothing; DynamicCache holds no layer for it). SHARED: 7 sliding layers of
    2 heads of 16 (window 8) and 1 full layer of 2 heads of 32 cache; 3 sliding and 1 full layer share."""
    import json

    from costgraph.commands._analysis import inference_model
    from costgraph.inference import infer

    f = tmp_path / "g4.json"
    f.write_text(json.dumps(SHARED))
    model, values = inference_model(str(f), None, {}, {})
    doc = infer(model, prompt=20, generate=4, batch=1, values=values).to_dict()
    slide, full = 2 * kv * d * 2, 2 * kv * dg * 2              # K and V, bf16, a position of one layer
    assert doc["kv_cache_bytes_per_token"]["value"] == 7 * slide + full == 1152
    assert doc["kv_cache_bytes"]["value"] == 7 * slide * min(24, w) + full * 24 == 13_312
    # prefill (n = 0, q = 20): the sharing layers read the 20 positions (8 in a window) the sources wrote
    assert doc["prefill"]["kv_read_bytes"]["value"] == 3 * slide * min(20, w) + full * 20 == 8192
    assert doc["prefill"]["kv_written_bytes"]["value"] == 20 * (7 * slide + full)
    # the last decode step (n = P + G - 2 = 22, q = 1): each source reads its n positions, each sharing layer
    # the n + 1 its source holds; only the sources write
    n = 22
    sources = 7 * slide * min(n, w) + full * n
    sharing = 3 * slide * min(n + 1, w) + full * (n + 1)
    assert doc["decode"]["kv_read_bytes"]["value"] == sources + sharing == 21_760
    assert doc["decode"]["kv_written_bytes"]["value"] == 7 * slide + full


def _moe_extra_params() -> int:
    """Per layer: router (scale [h], proj h → E, per_expert_scale [E]), experts (gate_up [E, 2 i_e, h],
    down [E, h, i_e]), post_feedforward_layernorm_1 / _2, pre_feedforward_layernorm_2."""
    return l * (h + h * E + E + 3 * E * h * i_e + 3 * h)


def _moe_extra_forward(b: int, s: int) -> int:
    """Per layer: the router's proj and k experts per token (grouped_mm, as FlopCounterMode counts it)."""
    return l * (2 * b * s * h * E + k * 6 * b * s * h * i_e)


def test_moe_written_out():
    values = _values(MOE, 2, 8)
    assert values["params"] == _params() + _moe_extra_params() == 334_528
    assert values["params_active"] == _params() + _moe_extra_params() - l * (E - k) * 3 * h * i_e
    assert values["flops_forward"] == _forward(2, 8) + _moe_extra_forward(2, 8)


def test_unsupported_variants_are_refused():
    from costgraph.errors import CostgraphValueError
    for extra in ({"use_bidirectional_attention": "all"}, {"hidden_size_per_layer_input": 0},
                  {"hidden_activation": "silu"}):
        with pytest.raises(CostgraphValueError):
            from_hf_config(dict(SMALL, **extra))


def test_example_config_every_analysis_runs(capsys):
    path = str(HF / "gemma4-text-defaults.json")
    assert main(["derive", path]) == 0
    assert main(["train", path]) == 0
    assert main(["infer", path, "--prompt", "1024", "--generate", "256"]) == 0
    assert "parameters" in capsys.readouterr().out


# ------------------------------------------------------------------ PyTorch tier


@pytest.fixture(scope="module")
def tm():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph import torch_measure
    return torch_measure


@pytest.fixture(scope="module")
def small_models(tm):
    return {k_eq_v: tm.build_meta("gemma4_text", {k: v for k, v in (K_EQ_V if k_eq_v else SMALL).items()
                                                   if k != "model_type"})
            for k_eq_v in (False, True)}


@pytest.fixture(scope="module")
def shared_model(tm):
    return tm.build_meta("gemma4_text", {k: v for k, v in SHARED.items() if k != "model_type"})


def test_moe_equals_transformers(tm):
    model = tm.build_meta("gemma4_text", {k: v for k, v in MOE.items() if k != "model_type"})
    assert tm.param_count(model) == _params() + _moe_extra_params()
    assert tm.flops(model, 2, 8)["forward"] == _forward(2, 8) + _moe_extra_forward(2, 8)


def test_kv_sharing_equals_transformers(shared_model, tm):
    # parameters on meta (no k/v projections or norms on the sharing layers), FlopCounterMode (their
    # products over the reused keys), and DynamicCache (their cache layers are "dummy": nothing kept)
    assert shared_model.config.kv_sharing_modes == [None] * 5 + ["store", None, "store"] + ["reuse"] * 4
    assert tm.param_count(shared_model) == _params(kind="shared")
    assert tm.flops(shared_model, 2, 8)["forward"] == _forward(2, 8, kind="shared")
    assert tm.kv_cache_bytes(shared_model, 2, 5) == _kv_bytes(2, 5, kind="shared") == _values(SHARED, 2, 5)["kv_cache_bytes"]


@pytest.mark.parametrize("k_eq_v", [False, True])
def test_parameters_equal_transformers_on_meta(small_models, tm, k_eq_v):
    model = small_models[k_eq_v]
    assert type(model).__name__ == "Gemma4ForCausalLM"
    assert tm.param_count(model) == _params(k_eq_v) == _values(K_EQ_V if k_eq_v else SMALL, 1, 8)["params"]


def test_example_config_parameters_equal_transformers_on_meta(tm):
    # Gemma4TextConfig's defaults (examples/hf/gemma4-text-defaults.json), 30 layers on meta
    import json
    cfg = json.loads((HF / "gemma4-text-defaults.json").read_text())
    model = tm.build_meta("gemma4_text", {k: v for k, v in cfg.items() if k not in ("model_type", "architectures")})
    m = from_hf_config(cfg)
    assert tm.param_count(model) == m.costs().evaluate(**m.values)["params"] == 5_077_177_856


@pytest.mark.parametrize("k_eq_v", [False, True])
def test_forward_flops_equal_flopcountermode(small_models, tm, k_eq_v):
    measured = tm.flops(small_models[k_eq_v], 2, 8)
    assert measured["forward"] == _values(K_EQ_V if k_eq_v else SMALL, 2, 8)["flops_forward"] == _forward(2, 8, k_eq_v)


@pytest.mark.parametrize("k_eq_v", [False, True])
def test_kv_cache_equals_the_dynamic_cache(small_models, tm, k_eq_v):
    cfg, model = (K_EQ_V if k_eq_v else SMALL), small_models[k_eq_v]
    # within the window (s < w): every layer its own heads and head size, exactly
    got = tm.kv_cache_bytes(model, 2, 5)
    assert got == _values(cfg, 2, 5)["kv_cache_bytes"] == _kv_bytes(2, 5, k_eq_v)
    # past it, DynamicSlidingWindowLayer keeps w − 1 positions; costgraph counts w (one more per sliding layer)
    got = tm.kv_cache_bytes(model, 2, 12)
    assert got == _kv_bytes(2, 12, k_eq_v, keep=w - 1)
    assert _values(cfg, 2, 12)["kv_cache_bytes"] - got == 2 * 2 * 2 * SLIDING * kv * d
