"""ViT (issue 19): the bundled ``models/vit.cg``, its ``config.json`` import and
every analysis on google/vit-base-patch16-224 (``examples/hf/vit-base-patch16-224.json``;
provenance in ``examples/hf/SOURCES.md``).

The figures: transformers 5.24 ``ViTForImageClassification`` of that config
counts ``sum(p.numel()) = 86,567,656`` parameters and ``ViTModel`` (with its
pooler) 86,389,248, on the meta device; ``FlopCounterMode`` counts
35,127,656,448 forward FLOPs per 224×224 image for the classifier
(``costgraph verify --hf examples/hf/vit-base-patch16-224.json``, all exact).
The PyTorch tier (``verify``) is at the end, skipped without torch.
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
VIT = HF / "vit-base-patch16-224.json"
CLASSIFIER_PARAMS = 86_567_656
MODEL_PARAMS = 86_389_248
FORWARD_PER_IMAGE = 35_127_656_448


def _config(**changes) -> dict:
    cfg = json.loads(VIT.read_text())
    cfg.update(changes)
    return {k: v for k, v in cfg.items() if v is not None}


def test_import_builds_the_classifier_the_architectures_name():
    hf = costgraph.from_hf_config(_config(), source=str(VIT))
    assert hf.model.graph.options["classifier"] is True
    assert hf.values == dict(image=224, p=16, c=3, h=768, a=12, i=3072, l=12, labels=1000, pool=768, b=1)
    got = hf.costs("model", convention="matmul").evaluate(**hf.values)
    assert (got["params"], got["flops_forward"], got["kv_cache_bytes"]) == (CLASSIFIER_PARAMS, FORWARD_PER_IMAGE, 0)


def test_vit_model_with_its_pooler_and_the_bundled_preset():
    hf = costgraph.from_hf_config(_config(architectures=["ViTModel"]), source="vit-model")
    assert hf.model.graph.options["classifier"] is False
    assert hf.costs().evaluate(**hf.values)["params"] == MODEL_PARAMS
    preset = costgraph.load("vit").costs().evaluate(**costgraph.load("vit").configs["vit-base-patch16-224"])
    assert preset["params"] == MODEL_PARAMS   # the preset's ViTModel (pooler = true) at the released sizes


def test_closed_forms_in_the_fields_terms():
    """n = (image/p)^2 patches, s = n + 1 tokens; the patch embedding c·p²·h (+ h), the class token h,
    the positions (n + 1)·h, per layer 4h² + 2hi + 9h + i, the final norm 2h, the head h·labels + labels."""
    m = costgraph.load("vit", options={"classifier": True})
    image, p, c, h, i, l, labels, b, a = (sympy.Symbol(n, positive=True, integer=True)
                                          for n in ("image", "p", "c", "h", "i", "l", "labels", "b", "a"))
    n = image ** 2 / p ** 2
    costs = m.costs("model", convention="matmul")
    assert sympy.expand(costs.params - (c * p ** 2 * h + h + h + (n + 1) * h + l * (4 * h ** 2 + 2 * h * i + 9 * h + i)
                                        + 2 * h + h * labels + labels)) == 0
    s = n + 1
    # per layer 2·b·s·h·(4h + 2i) for the linears and 4·b·s²·h for QKᵀ and PV; the patches 2·b·n·c·p²·h; the head
    assert sympy.expand(costs.flops_forward - (l * (2 * b * s * h * (4 * h + 2 * i) + 4 * b * s ** 2 * h)
                                               + 2 * b * n * c * p ** 2 * h + 2 * b * h * labels)) == 0
    assert a not in costs.flops_forward.free_symbols   # the head count changes no product's size


@pytest.mark.parametrize("changes, fragment", [
    (dict(hidden_act="relu"), "hidden_act"),
    (dict(pooler_act="gelu"), "pooler_act"),
    (dict(image_size=[224, 224]), "image_size"),
    (dict(patch_size=None), "patch_size"),
])
def test_import_refuses_what_the_model_file_does_not_describe(changes, fragment):
    with pytest.raises(CostgraphError, match=fragment):
        costgraph.from_hf_config(_config(**changes), source="vit")


def test_non_dividing_patch_size_is_refused():
    with pytest.raises(CostgraphError, match="not a positive whole number"):
        costgraph.from_hf_config(_config(patch_size=15), source="vit")


def _cli(capsys, *args):
    code = cli.main([*args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_derive_train_and_infer_on_the_released_config(capsys):
    code, out, err = _cli(capsys, "derive", str(VIT), "--format", "json")
    assert code == 0, err
    got = json.loads(out)["quantities"]
    assert (got["params"]["value"], got["kv_cache_bytes"]["value"]) == (CLASSIFIER_PARAMS, 0)
    code, out, err = _cli(capsys, "train", str(VIT), "--format", "json")
    assert code == 0, err
    flops = json.loads(out)["flops"]
    # forward + backward (verify: 35,127,656,448 + 70,024,101,888; the pixels get no gradient), one image
    assert flops["model_per_device"]["value"] == 105_151_758_336
    assert round(flops["per_token"]["value"] * 197) == 105_151_758_336   # per token: over its s = 197 tokens
    code, out, err = _cli(capsys, "infer", str(VIT), "--prompt", "197", "--generate", "1")
    assert code == 2 and "Traceback" not in err
    # inference/phases.py: a model whose s follows its input's size (the patches) is refused before its cache is read
    assert "reads no token ids" in err and "has no decode phase" in err


# ---------------------------------------------------------------- PyTorch tier


def test_verify_against_transformers_exact():
    """costgraph verify: parameters, forward and backward FLOPs and saved bytes equal what PyTorch measures on
    ViTForImageClassification (pixel_values [b, 3, 224, 224], bf16, meta device, eager attention)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    v = verify(str(VIT), shapes=[(1, 0), (2, 0)])
    assert v.torch_class == "ViTForImageClassificationOutputAsLogits"
    got = {q.name: q for q in v.quantities}
    assert got["parameters"].torch == got["parameters"].costgraph == [CLASSIFIER_PARAMS]
    assert got["forward FLOPs"].torch == got["forward FLOPs"].costgraph == [FORWARD_PER_IMAGE, 2 * FORWARD_PER_IMAGE]
    assert got["forward FLOPs"].shapes == [(1, 197), (2, 197)]
    assert got["backward FLOPs"].exact and got["saved bytes"].exact
    assert got["KV cache bytes"].skipped.startswith("an encoder keeps no KV cache")
    assert v.exact


def test_verify_vit_model_with_pooler_exact(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    path = tmp_path / "vit-model.json"
    path.write_text(json.dumps(_config(architectures=["ViTModel"], id2label=None, label2id=None)))
    v = verify(str(path), shapes=[(1, 0)], kv=False)
    got = {q.name: q for q in v.quantities}
    assert v.torch_class == "ViTModelOutputAsLogits"
    assert got["parameters"].torch == got["parameters"].costgraph == [MODEL_PARAMS]
    assert got["forward FLOPs"].exact and got["backward FLOPs"].exact
