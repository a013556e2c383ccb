"""Qwen2-VL and Qwen2.5-VL (issue 19): the bundled ``models/qwen2_vl.cg`` / ``models/qwen2_5_vl.cg``
(Conv3d patches, vision blocks, patch merger, Qwen2 decoder with M-RoPE), their ``config.json``
import (flat text keys as released, or a nested ``text_config``; a nested ``vision_config``) and the
analyses. Figures are transformers 5.24's ``Qwen2VLForConditionalGeneration`` /
``Qwen2_5_VLForConditionalGeneration`` (models/qwen2_vl/modeling_qwen2_vl.py,
models/qwen2_5_vl/modeling_qwen2_5_vl.py): ``sum(p.numel())`` on meta, ``FlopCounterMode`` over one
training forward and backward (eager attention, per image; Qwen2.5-VL's windowed blocks per window),
the ``DynamicCache`` after a prefill. The PyTorch tier is at the end, skipped without torch.
"""

from __future__ import annotations

import json

import pytest

import costgraph
from costgraph import cli
from costgraph.errors import CostgraphError
from costgraph.model import load

#: small configs (this file only), flat text keys as the released config.json files write them
Q2 = {"model_type": "qwen2_vl", "architectures": ["Qwen2VLForConditionalGeneration"],
      "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 1024,
      "vision_config": {"depth": 2, "embed_dim": 32, "hidden_size": 64, "num_heads": 2, "mlp_ratio": 2,
                        "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2},
      "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}
#: 8 vision blocks: block 7 attends over the image, the others in windows of 16 pixels (W = 2 merge units)
Q25 = {"model_type": "qwen2_5_vl", "architectures": ["Qwen2_5_VLForConditionalGeneration"],
       "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
       "num_key_value_heads": 2, "vocab_size": 128, "max_position_embeddings": 1024,
       "vision_config": {"depth": 8, "hidden_size": 32, "out_hidden_size": 64, "intermediate_size": 48,
                         "num_heads": 2, "patch_size": 4, "spatial_merge_size": 2, "temporal_patch_size": 2,
                         "window_size": 16, "fullatt_block_indexes": [7]},
       "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}
SMALL_VALUES = {"p": 4, "tp": 2, "m": 2, "c": 3, "av": 2, "lv": 2, "h": 64, "a": 4, "kv": 2, "d": 16,
                "i": 96, "l": 2, "V": 128, "s": 1024, "b": 1, "g": 16}


def _costs(model, values):
    return model.costs("model", convention="matmul").evaluate(None, values)


def test_import_reads_flat_text_keys_and_the_vision_config():
    hf = costgraph.from_hf_config(Q2, source="q2")
    assert hf.values == {**SMALL_VALUES, "hv": 32, "iv": 64}
    hf = costgraph.from_hf_config(Q25, source="q25")
    assert hf.values == {**SMALL_VALUES, "lv": 8, "hv": 32, "iv": 48, "W": 2}


def test_nested_text_config_reads_the_same_values():
    text = {k: Q2[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                               "num_key_value_heads", "vocab_size", "max_position_embeddings")}
    nested = {"model_type": "qwen2_vl", "text_config": text, "vision_config": Q2["vision_config"]}
    assert costgraph.from_hf_config(nested, source="n").values == costgraph.from_hf_config(Q2, source="f").values


@pytest.mark.parametrize("cfg, key, value", [
    (Q25, "fullatt_block_indexes", [0]),        # not every 8th block
    (Q25, "hidden_act", "gelu"),
    (Q2, "hidden_act", "relu")])
def test_vision_variants_not_described_are_refused(cfg, key, value):
    bad = json.loads(json.dumps(cfg))
    bad["vision_config"][key] = value
    with pytest.raises(CostgraphError, match=key):
        costgraph.from_hf_config(bad, source="x.json")


def test_sliding_window_decoder_refused():
    with pytest.raises(CostgraphError, match="use_sliding_window"):
        costgraph.from_hf_config({**Q2, "use_sliding_window": True}, source="x.json")


def test_windowed_blocks_cost_less_than_full_ones():
    """At g = 16, W = 4 (448 pixels, window_size 112) a windowed block's patch meets the 64 patches of
    its window (4 × 4 windows of 8 × 8 patches): 4·b·np·64·hv score FLOPs forward against
    4·b·np²·hv for a full block; W = g (one window, the whole image) is all-full attention."""
    m = load("qwen2_5_vl")
    values = dict(m.configs["qwen2.5-vl-7b"])
    n = (16 * 2) ** 2
    full = 4 * n * n * 1280              # one block's QKᵀ and PV, b = 1
    windowed = 4 * n * 64 * 1280
    assert int(_costs(m, values)["flops_forward"]) - int(_costs(m, {**values, "W": 16})["flops_forward"]) \
        == 28 * (windowed - full)        # 28 windowed blocks of 32


def test_image_not_a_multiple_of_the_window_is_refused(capsys):
    code, out, err = _cli(capsys, "derive", "qwen2_5_vl", "--config", "qwen2.5-vl-7b", "--set", "g=14")
    assert code == 2 and "split_seq" in err and "Traceback" not in err


#: forward + backward FLOPs of one step of the bundled configs (b = 1, s = 4096), as `derive` gives them
TRAIN_FLOPS = {"qwen2_vl": 66_140_478_898_176 + 132_277_874_982_912,
               "qwen2_5_vl": 66_001_228_005_376 + 131_999_373_197_312}


def _cli(capsys, *args):
    code = cli.main([*args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("name, config", [("qwen2_vl", "qwen2-vl-7b"), ("qwen2_5_vl", "qwen2.5-vl-7b")])
def test_analyses_run_on_the_bundled_configs(capsys, name, config):
    code, out, err = _cli(capsys, "derive", name, "--config", config, "--format", "json")
    assert code == 0, err
    got = json.loads(out)["quantities"]
    assert got["kv_cache_bytes"]["value"] == 4 * 28 * 4096 * 128 * 4     # 4 l b s d kv: s = 4096 with the image
    code, out, err = _cli(capsys, "train", name, "--config", config, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["flops"]["model_per_device"]["value"] == TRAIN_FLOPS[name]


def test_infer_counts_the_image_tokens_in_the_prompt(capsys):
    # infer's prompt P counts the 256 image tokens: 1000 = 256 + 744 text tokens
    code, out, err = _cli(capsys, "infer", "qwen2_5_vl", "--config", "qwen2.5-vl-7b", "--prompt", "1000",
                          "--generate", "10")
    assert code == 0, err
    assert "prompt P = 1000" in out


def test_plan_runs(capsys):
    code, out, err = _cli(capsys, "plan", "qwen2_vl", "--config", "qwen2-vl-7b", "--gpus", "1",
                          "--hardware", "h100-sxm", "--global-batch", "1")
    assert code == 0, err


def test_sequence_must_exceed_the_image_tokens(capsys):
    code, out, err = _cli(capsys, "derive", "qwen2_vl", "--config", "qwen2-vl-7b", "--set", "s=256")
    assert code == 2 and "Traceback" not in err


# ---------------------------------------------------------------- PyTorch tier

#: parameters of the bundled configs' sizes (the released 7B models: 8.29 B each)
RELEASED = {"qwen2_vl": 8_291_375_616, "qwen2_5_vl": 8_292_166_656}


@pytest.mark.parametrize("name, config", [("qwen2_vl", "qwen2-vl-7b"), ("qwen2_5_vl", "qwen2.5-vl-7b")])
def test_bundled_sizes_parameters_on_meta(name, config):
    """sum(p.numel()) of the transformers class built on meta from a flat config of the bundled sizes."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.torch_measure import param_count
    from costgraph.torch_vision import build_qwen_vl

    v = load(name).configs[config]
    vision = {"depth": v["lv"], "num_heads": v["av"], "patch_size": v["p"], "spatial_merge_size": v["m"],
              "temporal_patch_size": v["tp"]}
    if name == "qwen2_vl":
        vision |= {"embed_dim": v["hv"], "mlp_ratio": v["iv"] // v["hv"], "hidden_size": v["h"]}
    else:
        vision |= {"hidden_size": v["hv"], "intermediate_size": v["iv"], "out_hidden_size": v["h"],
                   "window_size": v["W"] * v["p"] * v["m"], "fullatt_block_indexes": [7, 15, 23, 31]}
    cfg = {"hidden_size": v["h"], "num_attention_heads": v["a"], "num_key_value_heads": v["kv"],
           "intermediate_size": v["i"], "num_hidden_layers": v["l"], "vocab_size": v["V"], "vision_config": vision}
    tm = build_qwen_vl(torch, name, cfg)
    assert param_count(tm) == int(_costs(load(name), v)["params"]) == RELEASED[name]


@pytest.fixture(scope="module")
def small_models():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.torch_vision import build_qwen_vl

    return {name: build_qwen_vl(torch, cfg["model_type"], {k: x for k, x in cfg.items() if k != "model_type"}, g=4)
            for name, cfg in (("qwen2_vl", Q2), ("qwen2_5_vl", Q25))}


#: (b, s) with s = 16 image tokens (g = 4: 8 × 8 patches) + 16 and 8 text tokens
SHAPES = [(1, 32), (2, 24)]


@pytest.mark.parametrize("name, cfg, want", [
    ("qwen2_vl", Q2, {"params": 123_392, "fwd": [9_306_112, 15_925_248], "bwd": [18_219_008, 31_064_064]}),
    ("qwen2_5_vl", Q25, {"params": 178_464, "fwd": [16_515_072, 30_343_168], "bwd": [32_636_928, 59_899_904]})])
def test_small_configs_agree_with_transformers(small_models, name, cfg, want):
    """Parameters, forward and backward FLOPs (FlopCounterMode) and KV cache bytes (DynamicCache)
    exact, at one image of g = 4 merge units a side (Qwen2.5-VL: 2 × 2 windows of 16 patches in the
    7 windowed blocks, block 7 over all 64 patches)."""
    from costgraph.torch_measure import flops, kv_cache_bytes, param_count

    tm = small_models[name]
    hf = costgraph.from_hf_config(cfg, source=name, profile="pytorch")
    cg = [_costs(hf.model, {**hf.values, "g": 4, "b": b, "s": s}) for b, s in SHAPES]
    assert param_count(tm) == int(cg[0]["params"]) == want["params"]
    measured = [flops(tm, b, s) for b, s in SHAPES]
    assert [f["forward"] for f in measured] == [int(c["flops_forward"]) for c in cg] == want["fwd"]
    assert [f["backward"] for f in measured] == [int(c["flops_backward"]) for c in cg] == want["bwd"]
    assert [kv_cache_bytes(tm, b, s) for b, s in SHAPES] == [int(c["kv_cache_bytes"]) for c in cg] \
        == [4 * 2 * b * s * 16 * 2 for b, s in SHAPES]


def test_verify_builds_the_right_class(tmp_path):
    """costgraph verify maps qwen2_vl to Qwen2VLForConditionalGeneration (the image of the mapping's
    g = 16: 256 image tokens before the text) and agrees exactly."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    path = tmp_path / "config.json"
    path.write_text(json.dumps(Q2))
    v = verify(str(path), shapes=[(1, 16)])
    got = {q.name: q for q in v.quantities}
    assert v.torch_class == "Qwen2VLForConditionalGenerationWithImage"
    assert got["forward FLOPs"].shapes == [(1, 272)]
    for q in ("parameters", "forward FLOPs", "backward FLOPs", "KV cache bytes"):
        assert got[q].exact, q
    assert got["forward FLOPs"].torch == [396_623_872]


def test_tied_embeddings_qwen2_vl_2b_sizes_on_meta():
    """tie_word_embeddings (Qwen2-VL-2B's sizes, flat as released): the head shares the embedding;
    2,208,985,600 parameters, Qwen2-VL-2B-Instruct's published 2.21 B."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.torch_measure import param_count
    from costgraph.torch_vision import build_qwen_vl

    cfg = {"model_type": "qwen2_vl", "hidden_size": 1536, "intermediate_size": 8960, "num_attention_heads": 12,
           "num_hidden_layers": 28, "num_key_value_heads": 2, "vocab_size": 151936, "tie_word_embeddings": True,
           "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "hidden_size": 1536,
                             "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2}}
    hf = costgraph.from_hf_config(cfg, source="2b")
    assert hf.model.graph.options["tied"] is True
    tm = build_qwen_vl(torch, "qwen2_vl", {k: v for k, v in cfg.items() if k != "model_type"})
    assert param_count(tm) == int(_costs(hf.model, hf.values)["params"]) == 2_208_985_600
