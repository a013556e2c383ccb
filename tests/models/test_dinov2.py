"""DINOv2 (issue 19): ``models/dinov2.cg`` (ViT + LayerScale, SwiGLU option, mask
token), its ``config.json`` import and ``verify`` against transformers 5.24's
``Dinov2Model``.

No released facebook/dinov2-* ``config.json`` could be obtained here (none is
in the stored index), so the test configs are built from ``Dinov2Config``'s
defaults in transformers 5.24 (``models/dinov2/configuration_dinov2.py``:
hidden 768, 12 layers, 12 heads, mlp_ratio 4, image 224, patch 14, qkv_bias,
use_mask_token, layerscale), and a small ViT-g/14-style one with
``use_swiglu_ffn``. The figures: transformers 5.24 counts 85,725,696
parameters for ``Dinov2Model`` of the defaults on the meta device and
``FlopCounterMode`` 46,322,454,528 forward FLOPs per 224×224 image
(``costgraph verify``, all exact).
"""

from __future__ import annotations

import json

import pytest

import costgraph
from costgraph.errors import CostgraphError

DEFAULTS = {"model_type": "dinov2", "architectures": ["Dinov2Model"], "hidden_size": 768, "num_hidden_layers": 12,
            "num_attention_heads": 12, "mlp_ratio": 4, "image_size": 224, "patch_size": 14, "num_channels": 3,
            "qkv_bias": True, "use_swiglu_ffn": False, "hidden_act": "gelu", "drop_path_rate": 0.0,
            "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
SWIGLU = {"model_type": "dinov2", "architectures": ["Dinov2Model"], "hidden_size": 96, "num_hidden_layers": 2,
          "num_attention_heads": 4, "mlp_ratio": 4, "image_size": 56, "patch_size": 14, "use_swiglu_ffn": True,
          "use_mask_token": False}
PARAMS = 85_725_696
FORWARD_PER_IMAGE = 46_322_454_528


def test_import_of_the_defaults():
    hf = costgraph.from_hf_config(DEFAULTS, source="dinov2")
    assert hf.values == dict(image=224, p=14, c=3, h=768, a=12, i=3072, l=12, b=1)
    assert hf.model.graph.options == {"swiglu": False, "mask_token": True, "qkv_bias": True}
    got = hf.costs("model", convention="matmul").evaluate(**hf.values)
    assert (got["params"], got["flops_forward"], got["kv_cache_bytes"]) == (PARAMS, FORWARD_PER_IMAGE, 0)
    # the bundled preset is the same model
    m = costgraph.load("dinov2")
    assert m.costs().evaluate(**m.configs["dinov2-config-defaults"])["params"] == PARAMS
    # facebook/dinov2-base (image_size 518): (37² + 1 − 16² − 1) = 1,113 more position rows of h = 768
    assert m.costs().evaluate(**m.configs["dinov2-base"])["params"] == PARAMS + 1_113 * 768 == 86_580_480


def test_parameters_in_the_fields_terms():
    """Per layer ViT's 4h² + 2hi + 9h + i and LayerScale's 2h; the mask token h; no pooler."""
    import sympy

    h, i, l, c, p, image = (sympy.Symbol(n, positive=True, integer=True) for n in ("h", "i", "l", "c", "p", "image"))
    m = costgraph.load("dinov2")
    n = image ** 2 / p ** 2
    want = c * p ** 2 * h + h + h + (n + 1) * h + h + l * (4 * h ** 2 + 2 * h * i + 11 * h + i) + 2 * h
    assert sympy.expand(m.costs().params - want) == 0


@pytest.mark.parametrize("hidden, ratio, width", [(96, 4, 256), (1536, 4, 4096), (1024, 4, 2736)])
def test_swiglu_width_is_hugging_faces(hidden, ratio, width):
    """Dinov2SwiGLUFFN: hidden_features = (int(int(h·mlp_ratio)·2/3) + 7) // 8 · 8 (ViT-g/14: 4096)."""
    assert (int(int(hidden * ratio) * 2 / 3) + 7) // 8 * 8 == width
    hf = costgraph.from_hf_config({**SWIGLU, "hidden_size": hidden, "mlp_ratio": ratio}, source="dinov2")
    assert hf.values["i"] == width and hf.model.graph.options["swiglu"] is True


@pytest.mark.parametrize("changes, fragment", [
    ({"drop_path_rate": 0.1}, "drop_path_rate"),
    ({"architectures": ["Dinov2ForImageClassification"]}, "architectures"),
    ({"hidden_act": "relu"}, "hidden_act"),
])
def test_import_refuses_what_the_model_file_does_not_describe(changes, fragment):
    with pytest.raises(CostgraphError, match=fragment):
        costgraph.from_hf_config({**DEFAULTS, **changes}, source="dinov2")


# ---------------------------------------------------------------- PyTorch tier


@pytest.mark.parametrize("config, params", [(DEFAULTS, PARAMS), (SWIGLU, None)])
def test_verify_against_transformers_exact(tmp_path, config, params):
    """Parameters, forward and backward FLOPs and saved bytes equal what PyTorch measures on Dinov2Model
    (pixel_values, bf16, meta device, eager attention with its bf16 softmax; backward from pooler_output)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    path = tmp_path / "dinov2.json"
    path.write_text(json.dumps(config))
    v = verify(str(path), shapes=[(1, 0), (2, 0)])
    assert v.torch_class == "Dinov2ModelOutputAsLogits"
    got = {q.name: q for q in v.quantities}
    if params is not None:
        assert got["parameters"].torch == [params]
        assert got["forward FLOPs"].torch == [FORWARD_PER_IMAGE, 2 * FORWARD_PER_IMAGE]
    assert v.exact, [(q.name, q.diffs) for q in v.quantities]
