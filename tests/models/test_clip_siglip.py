"""CLIP and SigLIP (issue 19): the bundled ``models/clip.cg`` / ``models/siglip.cg``, their nested
``text_config`` / ``vision_config`` import and every analysis on the released configs
(``examples/hf/clip-vit-base-patch32.json``, ``examples/hf/siglip-base-patch16-224.json``; provenance in
``examples/hf/SOURCES.md``).

The figures: transformers 5.24 ``CLIPModel`` of openai/clip-vit-base-patch32 counts
``sum(p.numel()) = 151,277,313`` parameters on the meta device (the figure OpenAI's ViT-B/32 is known
by); ``FlopCounterMode`` counts 14,777,164,800 forward FLOPs for one image-text pair (77 tokens, one
224×224 image; 29,554,331,648 for two: the [b, b] logits are quadratic in b) and 29,323,118,592
backward (``costgraph verify --hf examples/hf/clip-vit-base-patch32.json``). The PyTorch tier is at
the end, skipped without torch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph import cli
from costgraph.errors import CostgraphError

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
CLIP = HF / "clip-vit-base-patch32.json"
CLIP_PARAMS = 151_277_313
CLIP_FORWARD = {1: 14_777_164_800, 2: 29_554_331_648}
CLIP_BACKWARD = {1: 29_323_118_592, 2: 58_646_241_280}
CLIP_VALUES = dict(e=512, V=49408, s_max=77, h_t=512, a_t=8, i_t=2048, l_t=12, image=224, p=32, c=3,
                   h_v=768, a_v=12, i_v=3072, l_v=12, s=77, b=1)


def _clip_config(**changes) -> dict:
    cfg = json.loads(CLIP.read_text())
    for key, v in changes.items():
        table, _, name = key.rpartition("__")
        (cfg[table] if table else cfg)[name] = v
    return cfg


def _sym(*names):
    return [sympy.Symbol(n, positive=True, integer=True) for n in names]


# ---------------------------------------------------------------- CLIP


def test_clip_import_reads_the_nested_tables():
    hf = costgraph.from_hf_config(_clip_config(), source=str(CLIP))
    assert hf.model.name == "clip"
    assert hf.values == CLIP_VALUES
    got = hf.costs("model", convention="matmul").evaluate(**hf.values)
    assert (got["params"], got["flops_forward"], got["kv_cache_bytes"]) == (CLIP_PARAMS, CLIP_FORWARD[1], 0)


def test_clip_missing_nested_keys_take_transformers_defaults():
    """CLIPTextConfig / CLIPVisionConfig defaults are ViT-B/32's sizes: a config of only its model_type
    builds the same model (transformers 5.24: CLIPModel(CLIPConfig()) has 151,277,313 parameters)."""
    hf = costgraph.from_hf_config({"model_type": "clip"}, source="defaults")
    assert hf.values == CLIP_VALUES
    assert hf.costs().evaluate(**hf.values)["params"] == CLIP_PARAMS


def test_clip_preset_is_the_released_config():
    m = costgraph.load("clip")
    assert m.configs["clip-vit-base-patch32"] == CLIP_VALUES
    assert m.costs().evaluate(**CLIP_VALUES)["params"] == CLIP_PARAMS


def test_clip_nested_values_change_the_count():
    hf = costgraph.from_hf_config(_clip_config(text_config__num_hidden_layers=6), source="clip")
    per_text_layer = 4 * 512 ** 2 + 2 * 512 * 2048 + 9 * 512 + 2048
    assert hf.values["l_t"] == 6
    assert hf.costs().evaluate(**hf.values)["params"] == CLIP_PARAMS - 6 * per_text_layer


def test_clip_closed_forms_in_the_fields_terms():
    """Parameters: the patch convolution c·p²·h_v (no bias), the class embedding h_v, positions (n + 1)·h_v,
    pre_layrnorm and post_layernorm 2h_v each, per vision layer 4h_v² + 2h_v·i_v + 9h_v + i_v, the
    projection h_v·e; the text tables (V + s_max)·h_t, per text layer 4h_t² + 2h_t·i_t + 9h_t + i_t, the
    final norm 2h_t, the projection h_t·e; logit_scale 1. Forward FLOPs: the products only."""
    m = costgraph.load("clip")
    image, p, c, hv, iv, lv, ht, it, lt, e, V, smax, b, s = _sym(
        "image", "p", "c", "h_v", "i_v", "l_v", "h_t", "i_t", "l_t", "e", "V", "s_max", "b", "s")
    n = image ** 2 / p ** 2
    costs = m.costs("model", convention="matmul")
    assert sympy.expand(costs.params - (c * p ** 2 * hv + hv + (n + 1) * hv + 4 * hv
                                        + lv * (4 * hv ** 2 + 2 * hv * iv + 9 * hv + iv) + hv * e
                                        + (V + smax) * ht + lt * (4 * ht ** 2 + 2 * ht * it + 9 * ht + it)
                                        + 2 * ht + ht * e + 1)) == 0
    sv = n + 1
    assert sympy.expand(costs.flops_forward - (2 * b * n * c * p ** 2 * hv
                                               + lv * (2 * b * sv * hv * (4 * hv + 2 * iv) + 4 * b * sv ** 2 * hv)
                                               + lt * (2 * b * s * ht * (4 * ht + 2 * it) + 4 * b * s ** 2 * ht)
                                               + 2 * b * hv * e + 2 * b * ht * e + 2 * b ** 2 * e)) == 0


@pytest.mark.parametrize("changes, fragment", [
    (dict(text_config__hidden_act="gelu"), "text_config.hidden_act"),
    (dict(vision_config__hidden_act="relu"), "vision_config.hidden_act"),
    (dict(vision_config__patch_size=30), "not a positive whole number"),
    (dict(text_config__hidden_size=0), "text_config.hidden_size"),
])
def test_clip_import_refuses_what_the_model_file_does_not_describe(changes, fragment):
    with pytest.raises(CostgraphError, match=fragment):
        costgraph.from_hf_config(_clip_config(**changes), source="clip")


def test_clip_nested_table_that_is_not_a_table_is_refused():
    # transformers refuses a text_config that is not a dict; null reads as CLIPTextConfig() (nested_defaults)
    cfg = _clip_config()
    cfg["text_config"] = 7
    with pytest.raises(costgraph.CostgraphValueError, match=r"key 'text_config' must be an object"):
        costgraph.from_hf_config(cfg, source="clip")
    cfg["text_config"] = None
    assert costgraph.from_hf_config(cfg, source="clip").values == CLIP_VALUES


def _cli(capsys, *args):
    code = cli.main([*args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_clip_derive_and_train_on_the_released_config(capsys):
    code, out, err = _cli(capsys, "derive", str(CLIP), "--format", "json")
    assert code == 0, err
    got = json.loads(out)["quantities"]
    assert (got["params"]["value"], got["kv_cache_bytes"]["value"]) == (CLIP_PARAMS, 0)
    code, out, err = _cli(capsys, "train", str(CLIP), "--format", "json")
    assert code == 0, err
    # forward + backward, one pair (verify: 14,777,164,800 + 29,323,118,592)
    assert json.loads(out)["flops"]["model_per_device"]["value"] == CLIP_FORWARD[1] + CLIP_BACKWARD[1]


# ---------------------------------------------------------------- PyTorch tier


def test_clip_verify_against_transformers_exact():
    """costgraph verify: parameters and forward and backward FLOPs equal what PyTorch measures on CLIPModel
    (input_ids [b, 77], pixel_values [b, 3, 224, 224], bf16, meta device, eager attention)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    v = verify(str(CLIP), shapes=[(1, 77), (2, 77)])
    assert v.torch_class == "CLIPModelOutputAsLogits"
    got = {q.name: q for q in v.quantities}
    assert got["parameters"].torch == got["parameters"].costgraph == [CLIP_PARAMS]
    assert got["forward FLOPs"].torch == got["forward FLOPs"].costgraph == [CLIP_FORWARD[1], CLIP_FORWARD[2]]
    assert got["backward FLOPs"].torch == got["backward FLOPs"].costgraph == [CLIP_BACKWARD[1], CLIP_BACKWARD[2]]
    assert got["KV cache bytes"].skipped.startswith("an encoder keeps no KV cache")
    # saved bytes are not exact: the L2 normalisation is written as a weightless RMSNorm (see models/clip.cg)
    assert got["saved bytes"].torch == [43_496_836, 86_993_674]


# ---------------------------------------------------------------- SigLIP
#
# transformers 5.24 SiglipModel of google/siglip-base-patch16-224 counts sum(p.numel()) = 203,155,970 on
# meta; FlopCounterMode counts 46,440,396,288 forward FLOPs for one pair (64 tokens, one 224×224 image;
# 92,880,795,648 for two) and 92,649,581,568 backward (costgraph verify --hf
# examples/hf/siglip-base-patch16-224.json).

SIGLIP = HF / "siglip-base-patch16-224.json"
SIGLIP_PARAMS = 203_155_970
SIGLIP_FORWARD = {1: 46_440_396_288, 2: 92_880_795_648}
SIGLIP_BACKWARD = {1: 92_649_581_568, 2: 185_299_169_280}
SIGLIP_VALUES = dict(V=32000, s_max=64, h_t=768, a_t=12, i_t=3072, l_t=12, image=224, p=16, c=3, h_v=768,
                     a_v=12, i_v=3072, l_v=12, s=64, b=1)


def _siglip_config(**changes) -> dict:
    cfg = json.loads(SIGLIP.read_text())
    for key, v in changes.items():
        table, _, name = key.rpartition("__")
        (cfg[table] if table else cfg)[name] = v
    return cfg


def test_siglip_import_reads_the_nested_tables_and_their_defaults():
    """The released config.json names few keys (patch_size 16, the text sizes); the rest are
    SiglipTextConfig / SiglipVisionConfig defaults (image 224, 12 layers, 64 positions)."""
    hf = costgraph.from_hf_config(_siglip_config(), source=str(SIGLIP))
    assert hf.model.name == "siglip"
    assert hf.values == SIGLIP_VALUES
    got = hf.costs("model", convention="matmul").evaluate(**hf.values)
    assert (got["params"], got["flops_forward"], got["kv_cache_bytes"]) == (SIGLIP_PARAMS, SIGLIP_FORWARD[1], 0)
    preset = costgraph.load("siglip")
    assert preset.configs["siglip-base-patch16-224"] == SIGLIP_VALUES


def test_siglip_closed_forms_in_the_fields_terms():
    """Parameters: the patch convolution c·p²·h_v + h_v, positions n·h_v, per vision layer
    4h_v² + 2h_v·i_v + 9h_v + i_v, post_layernorm 2h_v; the MAP head: probe h_v, in_proj 3h_v² + 3h_v,
    out_proj h_v² + h_v, its LayerNorm 2h_v, its MLP 2h_v·i_v + i_v + h_v; the text tables
    (V + s_max)·h_t, per text layer 4h_t² + 2h_t·i_t + 9h_t + i_t, final norm 2h_t, head h_t·h_v + h_v;
    logit_scale and logit_bias 1 each. Forward FLOPs: the products only; the head's one query costs
    2b·h_v² (q) + 4b·n·h_v² (k, v) + 4b·n·h_v (QKᵀ, PV) + 2b·h_v² (out) + 4b·h_v·i_v (MLP)."""
    m = costgraph.load("siglip")
    image, p, c, hv, iv, lv, ht, it, lt, V, smax, b, s = _sym(
        "image", "p", "c", "h_v", "i_v", "l_v", "h_t", "i_t", "l_t", "V", "s_max", "b", "s")
    n = image ** 2 / p ** 2
    costs = m.costs("model", convention="matmul")
    head = hv + 3 * hv ** 2 + 3 * hv + hv ** 2 + hv + 2 * hv + 2 * hv * iv + iv + hv
    assert sympy.expand(costs.params - (c * p ** 2 * hv + hv + n * hv
                                        + lv * (4 * hv ** 2 + 2 * hv * iv + 9 * hv + iv) + 2 * hv + head
                                        + (V + smax) * ht + lt * (4 * ht ** 2 + 2 * ht * it + 9 * ht + it)
                                        + 2 * ht + ht * hv + hv + 2)) == 0
    head_flops = 2 * b * hv ** 2 + 4 * b * n * hv ** 2 + 4 * b * n * hv + 2 * b * hv ** 2 + 4 * b * hv * iv
    assert sympy.expand(costs.flops_forward - (2 * b * n * c * p ** 2 * hv
                                               + lv * (2 * b * n * hv * (4 * hv + 2 * iv) + 4 * b * n ** 2 * hv)
                                               + head_flops
                                               + lt * (2 * b * s * ht * (4 * ht + 2 * it) + 4 * b * s ** 2 * ht)
                                               + 2 * b * ht * hv + 2 * b ** 2 * hv)) == 0


@pytest.mark.parametrize("changes, fragment", [
    (dict(text_config__hidden_act="quick_gelu"), "text_config.hidden_act"),
    (dict(vision_config__vision_use_head=False), "vision_config.vision_use_head"),
    (dict(vision_config__patch_size=15), "not a positive whole number"),
])
def test_siglip_import_refuses_what_the_model_file_does_not_describe(changes, fragment):
    with pytest.raises(CostgraphError, match=fragment):
        costgraph.from_hf_config(_siglip_config(**changes), source="siglip")


def test_siglip_derive_and_train_on_the_released_config(capsys):
    code, out, err = _cli(capsys, "derive", str(SIGLIP), "--format", "json")
    assert code == 0, err
    got = json.loads(out)["quantities"]
    assert (got["params"]["value"], got["kv_cache_bytes"]["value"]) == (SIGLIP_PARAMS, 0)
    code, out, err = _cli(capsys, "train", str(SIGLIP), "--format", "json")
    assert code == 0, err
    assert json.loads(out)["flops"]["model_per_device"]["value"] == SIGLIP_FORWARD[1] + SIGLIP_BACKWARD[1]


def test_siglip_verify_against_transformers_exact():
    """costgraph verify: parameters and forward and backward FLOPs equal what PyTorch measures on SiglipModel
    (input_ids [b, 64], pixel_values [b, 3, 224, 224], bf16, meta device, eager attention)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    v = verify(str(SIGLIP), shapes=[(1, 64), (2, 64)])
    assert v.torch_class == "SiglipModelOutputAsLogits"
    got = {q.name: q for q in v.quantities}
    assert got["parameters"].torch == got["parameters"].costgraph == [SIGLIP_PARAMS]
    assert got["forward FLOPs"].torch == got["forward FLOPs"].costgraph == [SIGLIP_FORWARD[1], SIGLIP_FORWARD[2]]
    assert got["backward FLOPs"].torch == got["backward FLOPs"].costgraph == [SIGLIP_BACKWARD[1],
                                                                              SIGLIP_BACKWARD[2]]
    assert got["KV cache bytes"].skipped.startswith("an encoder keeps no KV cache")
    # saved bytes are not exact (the L2 normalisation, the probe's repeat as a gather): see models/siglip.cg
    assert got["saved bytes"].torch == [115_192_720, 230_385_442]
