"""LLaVA (issue 19): the bundled ``models/llava.cg`` (CLIP vision tower, 2-layer GELU projector,
Llama decoder over the image tokens then the text tokens), its ``config.json`` import (nested
``text_config`` / ``vision_config`` through dotted keys) and the analyses on
llava-hf/llava-1.5-7b-hf (``examples/hf/llava-1.5-7b-hf.json``; provenance in
``examples/hf/SOURCES.md``).

Figures: transformers 5.24 ``LlavaForConditionalGeneration`` of that config counts
``sum(p.numel()) = 7,063,427,072`` parameters on meta — the vision tower's last layer and its
``post_layernorm`` included, though vision_feature_layer = −2 reads the features before them.
transformers also *runs* that last layer (``FlopCounterMode`` counts the same forward FLOPs with
vision_feature_layer −1 and −2), so the forward FLOPs equal costgraph's ``full_tower = true``
(the default); autograd sends no gradient into the unused layer, so PyTorch's backward FLOPs
equal costgraph's ``full_tower = false`` (the last layer neither built nor run).
The PyTorch tier is at the end, skipped without torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import costgraph
from costgraph import cli
from costgraph.errors import CostgraphError
from costgraph.language.hf_config import nested_get
from costgraph.model import load
from costgraph.cli import main

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
LLAVA = HF / "llava-1.5-7b-hf.json"
PARAMS = 7_063_427_072
#: one CLIP layer (4 hv² + 2 hv iv + 9 hv + iv) and post_layernorm (2 hv) at hv = 1024, iv = 4096
LAST_LAYER_AND_POST_LN = 4 * 1024**2 + 2 * 1024 * 4096 + 9 * 1024 + 4096 + 2 * 1024
#: a small config (tests/models/test_llava.py only): 4×4 = 16 patches, 3 CLIP layers, 2 Llama layers
SMALL = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "image_token_index": 100,
         "projector_hidden_act": "gelu", "vision_feature_layer": -2, "vision_feature_select_strategy": "default",
         "text_config": {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128,
                         "max_position_embeddings": 256},
         "vision_config": {"model_type": "clip_vision_model", "hidden_size": 32, "intermediate_size": 48,
                           "num_hidden_layers": 3, "num_attention_heads": 2, "image_size": 32, "patch_size": 8,
                           "projection_dim": 16}}


def _costs(model, values):
    return model.costs("model", convention="matmul").evaluate(None, values)


def test_import_reads_the_nested_configs_and_llamas_defaults():
    hf = costgraph.from_hf_config(json.loads(LLAVA.read_text()), source=str(LLAVA))
    assert hf.values == {"image": 336, "p": 14, "c": 3, "hv": 1024, "av": 16, "iv": 4096, "lv": 24,
                         "h": 4096, "a": 32, "kv": 32, "d": 128, "i": 11008, "l": 32, "V": 32064,
                         "s": 4096, "b": 1}
    assert int(_costs(hf.model, hf.values)["params"]) == PARAMS
    assert load("llava").configs["llava-1.5-7b"] == hf.values     # the bundled preset is the released config


def test_nested_get_dotted_keys():
    cfg = {"text_config": {"hidden_size": 8}, "a.b": 1, "vision_config": 3}
    assert nested_get(cfg, "text_config.hidden_size") == 8
    assert nested_get(cfg, "a.b") == 1                      # a key with a dot is itself first
    assert nested_get(cfg, "vision_config.hidden_size") is None
    assert nested_get(cfg, "text_config.missing") is None


def test_full_tower_convention_counts_the_unused_last_layer():
    values = json.loads(LLAVA.read_text())
    hf = costgraph.from_hf_config(values, source=str(LLAVA))
    truncated = load("llava", options={"full_tower": False})
    assert int(_costs(truncated, hf.values)["params"]) == PARAMS - LAST_LAYER_AND_POST_LN == 7_050_828_800


@pytest.mark.parametrize("key, value", [("vision_feature_layer", -1),
                                        ("vision_feature_select_strategy", "full"),
                                        ("projector_hidden_act", "relu")])
def test_variants_not_described_are_refused(key, value):
    cfg = json.loads(LLAVA.read_text())
    cfg[key] = value
    with pytest.raises(CostgraphError, match=key):
        costgraph.from_hf_config(cfg, source="llava.json")


def test_nested_variant_refused():
    cfg = json.loads(LLAVA.read_text())
    cfg["text_config"]["model_type"] = "mistral"
    with pytest.raises(CostgraphError, match="text_config.model_type"):
        costgraph.from_hf_config(cfg, source="llava.json")


def _cli(capsys, *args):
    code = cli.main([*args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_derive_train_and_infer_on_the_released_config(capsys):
    code, out, err = _cli(capsys, "derive", str(LLAVA), "--format", "json")
    assert code == 0, err
    got = json.loads(out)["quantities"]
    assert got["params"]["value"] == PARAMS
    assert got["kv_cache_bytes"]["value"] == 4 * 32 * 4096 * 128 * 32     # 4 l b s d kv, s = 4096 with the image
    code, out, err = _cli(capsys, "train", str(LLAVA), "--format", "json")
    assert code == 0, err
    # forward 63,329,495,777,280 + backward 126,658,297,921,536 (full_tower: the last CLIP layer's backward counted)
    assert json.loads(out)["flops"]["model_per_device"]["value"] == 189_987_793_698_816
    # infer's prompt P counts the 576 image tokens (s = image tokens + text tokens): 1000 = 576 + 424 text
    code, out, err = _cli(capsys, "infer", str(LLAVA), "--prompt", "1000", "--generate", "10")
    assert code == 0, err
    assert "prompt P = 1000" in out


def test_sequence_must_exceed_the_image_tokens(capsys):
    code, out, err = _cli(capsys, "derive", "llava", "--config", "llava-1.5-7b", "--set", "s=576")
    assert code == 2 and "Traceback" not in err


# ---------------------------------------------------------------- PyTorch tier

SMALL_SHAPES = [(1, 32), (2, 48), (3, 24)]     # s = 16 image tokens + 16, 32, 8 text tokens


def test_verify_small_config_against_transformers(tmp_path):
    """costgraph verify on LlavaForConditionalGeneration (input_ids with 16 image tokens + pixel_values
    [b, 3, 32, 32], bf16, meta, eager): parameters and forward FLOPs exact (FlopCounterMode); backward
    FLOPs equal full_tower = false's (no gradient reaches the unused last CLIP layer); KV cache exact."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    path = tmp_path / "config.json"
    path.write_text(json.dumps(SMALL))
    v = verify(str(path), shapes=[(1, 16), (2, 32), (3, 8)])
    got = {q.name: q for q in v.quantities}
    assert v.torch_class == "LlavaForConditionalGenerationWithImage"
    assert got["parameters"].torch == got["parameters"].costgraph == [113_776]
    assert got["forward FLOPs"].shapes == SMALL_SHAPES
    assert got["forward FLOPs"].torch == got["forward FLOPs"].costgraph == [6_216_064, 18_199_296, 14_617_728]
    assert got["KV cache bytes"].exact
    hf = costgraph.from_hf_config(SMALL, source="small", profile="pytorch")
    truncated = load("llava", options={"full_tower": False}, profile="pytorch")
    want = [int(_costs(truncated, {**hf.values, "b": b, "s": s})["flops_backward"]) for b, s in SMALL_SHAPES]
    assert got["backward FLOPs"].torch == want == [11_674_112, 34_882_560, 26_961_408]


def test_released_config_parameters_on_meta():
    """sum(p.numel()) of LlavaForConditionalGeneration built on meta from the released config."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.torch_vision import build_llava

    cfg = {k: v for k, v in json.loads(LLAVA.read_text()).items() if k != "model_type"}
    model = build_llava(torch, cfg)
    assert sum(p.numel() for p in model.parameters()) == PARAMS


def test_frozen_tower_backward_equals_llavas_no_grad_tower():
    """frozen_tower = true against LLaVA's training code (haotian-liu/LLaVA @ 380436b,
    llava/model/multimodal_encoder/clip_encoder.py::CLIPVisionTower: requires_grad_(False), forward
    under @torch.no_grad()) on the small config: backward FLOPs exact (FlopCounterMode) — nothing in
    the tower, the projector's weight gradients only; the forward unchanged."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph import torch_measure as tm
    from costgraph.torch_vision import build_llava

    model = build_llava(torch, {k: v for k, v in SMALL.items() if k not in ("model_type", "architectures")})
    tower = model.model.model.vision_tower
    tower.requires_grad_(False)
    tower.forward = torch.no_grad()(tower.forward)
    hf = costgraph.from_hf_config(SMALL, source="small", profile="pytorch")
    frozen = load("llava", options={"frozen_tower": True}, profile="pytorch")
    trained = load("llava", profile="pytorch")
    for b, s in SMALL_SHAPES[:2]:
        measured = tm.flops(model, b, s)
        got = _costs(frozen, {**hf.values, "b": b, "s": s})
        assert measured["forward"] == got["flops_forward"] == _costs(trained, {**hf.values, "b": b, "s": s})["flops_forward"]
        assert measured["backward"] == got["flops_backward"]


def test_a_prompt_shorter_than_the_image_tokens_is_said_so(capsys):
    """fit of a VLM whose prompt is shorter than its 576 image tokens said "a dimension of tensor
    'tokens' is -image**2/p**2 + s" (issue 30 item 3): now in the model's names, t = s − ni (text
    tokens), and that s must hold the ni = 576 image tokens ((336/14)² patches, LLaVA-1.5's CLIP ViT-L/14-336)."""
    from costgraph.cli import main

    assert main(["fit", "llava", "--config", "llava-1.5-7b", "--serve", "--prompt", "100", "--generate", "10",
                 "--hardware", "h100-sxm"]) == 2
    err = capsys.readouterr().err
    assert "is t = s − ni (text tokens) = -476 for these values" in err, err
    assert "hint: the prompt s (--prompt 100; prompt= in Python) must be more than ni = 576 (image tokens" in err
    assert "image**2" not in err


# --- a prompt shorter than the image tokens refused (issue 19 trial) -------------------------------------------------

def run(argv, capsys):
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


def test_llava_prompt_shorter_than_its_image_tokens_is_refused(capsys):
    # llava-1.5-7b: 576 image tokens; derive --set s=100 refused it, infer --prompt 100 answered
    status, out, err = run(["infer", "llava", "--config", "llava-1.5-7b", "--hardware", "h100-sxm",
                            "--prompt", "100", "--generate", "10"], capsys)
    assert status == 2 and out == ""
    assert "llava.cg:" in err and "= -476" in err
    status, out, err = run(["infer", "llava", "--config", "llava-1.5-7b", "--hardware", "h100-sxm",
                            "--prompt", "1000", "--generate", "10", "--format", "json"], capsys)
    assert status == 0, err
    assert json.loads(out)["settings"]["prompt"] == 1000
