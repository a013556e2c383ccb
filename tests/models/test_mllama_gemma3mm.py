"""Issue 19's last two multimodal families: Llama 3.2 Vision (``mllama``: models/mllama.cg, a tiled
vision tower with local and gated global layers, a projector, a Llama decoder whose layers j % 5 == 3
cross-attend to the image) and Gemma 3 multimodal (``gemma3``: models/gemma3.cg, SigLIP without its
head, the pooling projector, the gemma3_text decoder over image + text tokens); their ``config.json``
import (nested configs), the analyses, and the PyTorch tier against transformers 5.24's
``MllamaForConditionalGeneration`` and ``Gemma3ForConditionalGeneration`` on the meta device.

Bundled configs (examples/hf/SOURCES.md): ``mllama-config-defaults.json`` is MllamaConfig()'s
defaults (the sizes of meta-llama/Llama-3.2-11B-Vision; no released copy at hand);
``gemma-3-4b-it.json`` is google/gemma-3-4b-it's config.json as copied in two public repositories
(Gemma3Config()'s own defaults cannot be built: a 224-px SigLIP with 256 image tokens pools with a
kernel of 0). Parameter counts below are ``sum(p.numel())`` of those classes built on meta.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph import cli
from costgraph.errors import CostgraphError
from costgraph.model import load

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
MLLAMA = HF / "mllama-config-defaults.json"
GEMMA3 = HF / "gemma-3-4b-it.json"
MLLAMA_PARAMS = 10_642_941_475     # MllamaForConditionalGeneration(MllamaConfig()) on meta
GEMMA3_PARAMS = 4_300_079_472      # Gemma3ForConditionalGeneration of gemma-3-4b-it on meta (the card: 4.3B)

#: small configs (this file only). Gemma 3: 4×4 patches pooled to 2×2 = 4 image tokens, 7 decoder
#: layers (j = 5 global), window 32 ≥ s. Mllama: 2 tiles of 4×4 patches (+ class token = 17, padded
#: to 24), 3 aspect ratios, 4 local + 2 global layers, intermediate layers [1, 3] (vision_output_dim
#: 3·32), 5 decoder layers with cross-attention at [3].
G3_SMALL = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "mm_tokens_per_image": 4,
            "image_token_index": 299, "boi_token_index": 297, "eoi_token_index": 298,
            "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 96,
                            "num_hidden_layers": 7, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
                            "vocab_size": 300, "sliding_window": 32, "max_position_embeddings": 256},
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 48,
                              "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 32, "patch_size": 8,
                              "vision_use_head": False}}
ML_SMALL = {"model_type": "mllama", "architectures": ["MllamaForConditionalGeneration"], "image_token_index": 299,
            "text_config": {"model_type": "mllama_text_model", "hidden_size": 64, "intermediate_size": 96,
                            "num_hidden_layers": 5, "num_attention_heads": 4, "num_key_value_heads": 2,
                            "vocab_size": 300, "max_position_embeddings": 256, "cross_attention_layers": [3],
                            "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0},
            "vision_config": {"model_type": "mllama_vision_model", "hidden_size": 32, "intermediate_size": 48,
                              "num_hidden_layers": 4, "num_global_layers": 2, "attention_heads": 2, "image_size": 32,
                              "patch_size": 8, "max_num_tiles": 2, "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]],
                              "intermediate_layers_indices": [1, 3], "vision_output_dim": 96}}
G3_SMALL_PARAMS, ML_SMALL_PARAMS = 260_160, 255_433


def _costs(hf, **values):
    return hf.model.costs("model", convention="matmul").evaluate(None, {**hf.values, **values})


def _cli(capsys, *args):
    code = cli.main([*args])
    out = capsys.readouterr()
    return code, out.out, out.err


# ------------------------------------------------------------------ import

def test_mllama_import_reads_the_nested_configs():
    hf = costgraph.from_hf_config(json.loads(MLLAMA.read_text()), source=str(MLLAMA))
    assert hf.values == {"pp": 32, "p": 14, "c": 3, "nt": 4, "nr": 8, "hv": 1280, "av": 16, "iv": 5120, "lv": 32,
                         "lg": 8, "ki": 5, "h": 4096, "a": 32, "kv": 8, "i": 14336, "l": 40, "V": 128256,
                         "s": 131072, "b": 1}
    c = _costs(hf)
    assert int(c["params"]) == MLLAMA_PARAMS
    # KV cache: 32 self-attention layers × s = 131072 and 8 cross-attention layers × the 4·1025 image tokens
    assert int(c["kv_cache_bytes"]) == 4 * 8 * 128 * (32 * 131072 + 8 * 4100) == 17_314_217_984
    assert load("mllama").configs["llama-3.2-11b-vision"] == hf.values
    # a missing vision_config / text_config is MllamaConfig's own defaults
    assert costgraph.from_hf_config({"model_type": "mllama"}, source="m.json").values == hf.values


def test_gemma3_import_reads_the_nested_configs():
    hf = costgraph.from_hf_config(json.loads(GEMMA3.read_text()), source=str(GEMMA3))
    assert hf.values == {"image": 896, "p": 14, "c": 3, "hv": 1152, "av": 16, "iv": 4304, "lv": 27, "ts": 16,
                         "h": 2560, "a": 8, "kv": 4, "d": 256, "i": 10240, "l": 34, "V": 262208, "w": 1024,
                         "s": 131072, "b": 1}
    c = _costs(hf)
    assert int(c["params"]) == GEMMA3_PARAMS
    # KV cache: 5 global layers keep s = 131072 (the 256 image tokens included), 29 local ones the window 1024
    assert int(c["kv_cache_bytes"]) == 4 * 4 * 256 * (5 * 131072 + 29 * 1024) == 2_805_989_376
    assert load("gemma3").configs["gemma-3-4b"] == hf.values


def test_mllama_cross_attention_layers_follow_the_pattern():
    cfg = json.loads(MLLAMA.read_text())
    cfg["text_config"].update(num_hidden_layers=100, cross_attention_layers=list(range(3, 100, 5)))   # 90B's pattern
    hf = costgraph.from_hf_config(cfg, source="m.json")
    kv = _costs(hf, s=1000, b=1)["kv_cache_bytes"]
    # 80 self-attention layers cache s = 1000 positions, 20 cross-attention layers the 4·1025 image tokens
    assert kv == 2 * 2 * 8 * 128 * (80 * 1000 + 20 * 4 * 1025)
    for layers in ([3, 9, 13], None):   # another pattern; the default [3, ..., 38] with 100 layers
        cfg["text_config"]["cross_attention_layers"] = layers
        with pytest.raises(CostgraphError, match="cross_attention_layers"):
            costgraph.from_hf_config(cfg, source="m.json")


@pytest.mark.parametrize("change, fragment", [({"mm_tokens_per_image": 200}, "not a perfect square"),
                                              ({"vision_config": {"vision_use_head": True}}, "vision_use_head"),
                                              ({"text_config": {"layer_types": ["full_attention"] * 34}}, "layer_types"),
                                              ({"vision_config": None}, "vision_config")])
def test_gemma3_variants_are_refused(change, fragment):
    cfg = json.loads(GEMMA3.read_text())
    for key, value in change.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    with pytest.raises(CostgraphError, match=fragment):
        costgraph.from_hf_config(cfg, source="g.json")


POOL = """model pool {
  dim b "batch"
  dim c "channels"
  dim r "side"
  input x[b, c, r, r]
  input t[b, r * r, c]
  y = avg_pool2d(t, 4, side = r)
  return avg_pool2d(x, 2)
}"""


def test_avg_pool2d_operator():
    """[B, C, H, W] → [B, C, ⌊H/k⌋, ⌊W/k⌋]; tokens [B, side², C] → [B, ⌊side/k⌋², C] (torch.nn.AvgPool2d
    with ceil_mode = False rounds down; a numeric k is kept as a floor, issue 28); no parameters, no
    matrix FLOPs; `all`: one add per input element forward and backward; keeps its input."""
    m = costgraph.loads(POOL, input_grads=True)   # the operator alone: an input that needs its gradient
    g = m.graph
    b, c, r = sympy.symbols("b c r", positive=True, integer=True)
    shape = {k: tuple(map(str, g.tensors[g.nodes[k]["outputs"][0]].shape)) for k in ("avg_pool2d", "avg_pool2d_1")}
    assert shape == {"avg_pool2d": tuple(map(str, (b, sympy.floor(r / 4)**2, c))),
                     "avg_pool2d_1": tuple(map(str, (b, c, sympy.floor(r / 2), sympy.floor(r / 2))))}
    v = m.costs(convention="all").evaluate(None, {"b": 2, "c": 3, "r": 8})
    assert (v["params"], v["flops_forward"], v["flops_backward"]) == (0, 2 * 2 * 3 * 64, 2 * 2 * 3 * 64)
    assert v["activation_bytes"] == 2 * 2 * (2 * 3 * 64)        # both inputs kept, bf16
    assert m.costs(convention="matmul").evaluate(None, {"b": 2, "c": 3, "r": 8})["flops_forward"] == 0
    with pytest.raises(CostgraphError, match="side²"):
        costgraph.loads(POOL.replace("side = r)", "side = c)"))


# ------------------------------------------------------------------ analyses

@pytest.fixture(scope="module")
def small_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("vlm")
    (d / "g3.json").write_text(json.dumps(G3_SMALL))
    (d / "ml.json").write_text(json.dumps(ML_SMALL))
    return d


def test_derive_train_and_infer_on_small_configs(capsys, small_files):
    code, out, err = _cli(capsys, "derive", str(small_files / "ml.json"))
    assert code == 0, err
    assert "parameters                   255,433" in out
    # forward + backward FLOPs at b = 2 (the PyTorch tier's 21,647,360 + 42,901,504)
    code, out, err = _cli(capsys, "train", str(small_files / "g3.json"), "--set", "s=20", "--set", "b=2",
                          "--format", "json")
    assert code == 0, err
    assert json.loads(out)["flops"]["model_per_device"]["value"] == 21_647_360 + 42_901_504
    code, out, err = _cli(capsys, "train", str(small_files / "ml.json"), "--set", "s=20", "--set", "b=2",
                          "--format", "json")
    assert code == 0, err
    assert json.loads(out)["flops"]["model_per_device"]["value"] == 28_648_448 + 56_492_032
    # Gemma 3: the prompt P counts the 4 image tokens
    code, out, err = _cli(capsys, "infer", str(small_files / "g3.json"), "--prompt", "20", "--generate", "4")
    assert code == 0, err
    assert "prompt P = 20" in out
    # Mllama: its cross-attention cache over the nt·(pp² + 1) = 2·17 image tokens is computed once per request
    # (costgraph.inference.request.built_from_tokens: an axis derived from other dimensions grows with no
    # token), as transformers' DynamicCache holds it (test_kv_cache_equals_the_dynamic_cache below): 4 self-attention
    # layers × (K, V) × 2 heads × 16 × 2 B a token, and the cross layer's 34 positions whatever P + G
    code, out, err = _cli(capsys, "infer", str(small_files / "ml.json"), "--prompt", "20", "--generate", "4",
                          "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    per_position = 2 * 2 * 16 * 2
    assert doc["kv_cache_bytes_per_token"]["value"] == 4 * per_position == 512
    assert doc["kv_cache_bytes"]["value"] == per_position * (4 * 24 + 34) == 16_640
    # the prefill writes the prompt's K/V and the image's; a decode step at n = P + G - 2 = 22 reads both
    assert doc["prefill"]["kv_written_bytes"]["value"] == per_position * (4 * 20 + 34)
    assert doc["decode"]["kv_read_bytes"]["value"] == per_position * (4 * 22 + 34)
    assert doc["decode"]["kv_written_bytes"]["value"] == 4 * per_position
    # the vision tower, the projector and the cross-attention K/V projections run at the prefill only
    assert doc["decode"]["weight_bytes"]["value"] < doc["prefill"]["weight_bytes"]["value"]


@pytest.mark.slow
def test_plan_on_gemma3(capsys, small_files):
    code, out, err = _cli(capsys, "plan", str(small_files / "g3.json"), "--set", "s=20", "--gpus", "1",
                          "--hardware", "h100-sxm", "--global-batch", "2", "--format", "json")
    assert code == 0, err
    got = json.loads(out)
    assert got["layouts"] and got["gpus"] == 1


# ---------------------------------------------------------------- PyTorch tier

@pytest.fixture(scope="module")
def torch_models():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.torch_vlm import build_vlm

    def build(cfg):
        return build_vlm(torch, cfg["model_type"], {k: v for k, v in cfg.items() if k != "model_type"})

    return {"gemma3": build(G3_SMALL), "mllama": build(ML_SMALL)}


@pytest.mark.parametrize("family, cfg, params, b, s, forward, backward", [
    # s = 20: the 4 image tokens and 16 text tokens
    ("gemma3", G3_SMALL, G3_SMALL_PARAMS, 2, 20, 21_647_360, 42_901_504),
    # s = 20 text tokens; the image's 2·17 tokens are cross-attended. The aspect-ratio mask's bmm
    # ([b, 48, 1]·[b, 1, 48]) is counted forward; no gradient flows into it (both operands are inputs)
    ("mllama", ML_SMALL, ML_SMALL_PARAMS, 2, 20, 28_648_448, 56_492_032),
])
def test_parameters_and_flops_equal_transformers(torch_models, family, cfg, params, b, s, forward, backward):
    """sum(p.numel()) on meta and FlopCounterMode's forward and backward FLOPs (bf16, eager, train mode)
    equal costgraph's (pytorch profile, matmul convention)."""
    from costgraph.torch_measure import flops, param_count

    model = torch_models[family]
    hf = costgraph.from_hf_config(cfg, source="small", profile="pytorch")
    c = _costs(hf, b=b, s=s)
    assert param_count(model) == int(c["params"]) == params
    f = flops(model, b, s)
    assert (f["forward"], f["backward"]) == (int(c["flops_forward"]), int(c["flops_backward"])) == (forward, backward)


@pytest.mark.parametrize("family, cfg, s, want", [
    # 7 layers × (K, V) × 2 kv heads × 16 × 2 bytes × 12 positions (window 32 ≥ s)
    ("gemma3", G3_SMALL, 12, 7 * 2 * 2 * 16 * 2 * 12),
    # 4 self-attention layers × 12 positions + 1 cross-attention layer × 2·17 image tokens
    ("mllama", ML_SMALL, 12, 2 * 2 * 16 * 2 * (4 * 12 + 34)),
])
def test_kv_cache_equals_the_dynamic_cache(torch_models, family, cfg, s, want):
    """The DynamicCache's key/value bytes after a prefill of [1, s] (cross-attention K/V included)."""
    from costgraph.torch_measure import kv_cache_bytes
    from costgraph.torch_vlm import sequence_tokens

    hf = costgraph.from_hf_config(cfg, source="small", profile="pytorch")
    assert kv_cache_bytes(torch_models[family], 1, s) == int(_costs(hf, b=1, s=s)["kv_cache_bytes"]) == want
    assert sequence_tokens(family, cfg) == {"gemma3": 4, "mllama": 0}[family]


@pytest.mark.parametrize("path, params", [(MLLAMA, MLLAMA_PARAMS), (GEMMA3, GEMMA3_PARAMS)])
def test_bundled_configs_parameters_on_meta(path, params):
    """sum(p.numel()) of the transformers class built on meta from the bundled config."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.torch_vlm import build_vlm

    cfg = json.loads(path.read_text())
    model = build_vlm(torch, cfg.pop("model_type"), cfg)
    assert type(model).__name__.endswith("ForConditionalGenerationWithImage")
    assert sum(p.numel() for p in model.parameters()) == params
