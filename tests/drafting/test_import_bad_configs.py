"""``costgraph import`` of a vision config whose image size, patch size or channels are 0 or negative (session 44
trial12): refused at the key, exit status 2.

transformers 5.24 builds such a config (``ViTConfig(image_size=0)`` validates), and the drafter's
``present_fields`` reads a 0 as a part the config leaves out, so the probe kept it: the meta forward then failed in
``nn.Conv2d`` ("Calculated padded input size per channel: (0 x 0). Kernel size: (499 x 499)") and the refusal
blamed the trace, with the hint "costgraph import traces one forward of token ids; write this family's model file by
hand". No default config of transformers 5.24 holds one of these fields at 0 or below (every ``CONFIG_MAPPING``
class read, 2026-12-07), so none of the bench's types is affected. A config its transformers class refuses (a
wav2vec2 config whose conv lists differ in length) keeps transformers' whole reason, and the hint names the class.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from costgraph.cli import main  # noqa: E402
from costgraph.drafting.api import draft_model  # noqa: E402
from costgraph.errors import CostgraphValueError  # noqa: E402

HINT = "write '{f}' as the released config.json does: a JSON number above 0 (ViT-Base: image_size 224, patch_size 16, " \
       "num_channels 3)"


@pytest.mark.parametrize("model_type,field,value", [
    ("vit", "image_size", 0), ("vit", "image_size", -224), ("vit", "patch_size", 0), ("vit", "num_channels", -3),
    ("siglip_vision_model", "image_size", -1), ("swin", "image_size", 0)])
def test_a_non_positive_image_field_is_refused_at_its_key(model_type, field, value):
    with pytest.raises(CostgraphValueError) as e:
        draft_model({"model_type": model_type, field: value})
    assert e.value.message == f"config.json key '{field}' must be a positive whole number, got {value}"
    assert e.value.hint == HINT.format(f=field)


def test_cli_import_exit_2(tmp_path, capsys):
    path = tmp_path / "vit.json"
    path.write_text(json.dumps({"model_type": "vit", "image_size": 0}))
    assert main(["import", str(path), "-o", str(tmp_path / "vit.cg")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: config.json key 'image_size' must be a positive whole number, got 0\nhint: {HINT.format(f='image_size')}\n"
    assert not (tmp_path / "vit.cg").exists()


def test_a_config_its_class_refuses_names_the_class_and_keeps_transformers_reason():
    # transformers 5.24 configuration_wav2vec2.py ``Wav2Vec2Config.validate_architecture``: the three conv lists must
    # be as long; its whole reason is kept (it was cut at 200 characters, before the lengths), and the hint names the
    # class instead of "give a model_type of the installed transformers, or a config.json" (the user gave both)
    with pytest.raises(CostgraphValueError) as e:
        draft_model({"model_type": "wav2vec2", "conv_dim": [512] * 6})
    assert e.value.message == (
        "transformers cannot build a config of model_type 'wav2vec2': StrictDataclassClassValidationError: Class "
        "validation error for validator 'validate_architecture':\n    ValueError: Configuration for convolutional layers "
        "is incorrect. It is required that `len(config.conv_dim)` == `len(config.conv_stride)` == "
        "`len(config.conv_kernel)`, but is `len(config.conv_dim) = 6`, `len(config.conv_stride) = 7`, "
        "`len(config.conv_kernel) = 7`.")
    assert e.value.hint == ("transformers' Wav2Vec2Config refuses a field of the config (named above): write it as the "
                            "released config.json of this model type does")
    with pytest.raises(CostgraphValueError) as e:       # a model_type transformers does not know: the hint as before
        draft_model({"model_type": "no_such_model_type"})
    assert e.value.hint == "give a model_type of the installed transformers, or a config.json"


def test_a_forward_that_fails_on_meta_names_the_inputs_traced(monkeypatch):
    # the hint said "traces one forward of token ids", stale since pixels, audio and decoder ids are traced too
    # (drafting/model_build.py ``_forward``); a forward that fails is simulated here
    import costgraph.drafting.api as api

    def fails(*args, **kwargs):
        raise RuntimeError("simulated")

    monkeypatch.setattr(api, "_forward", fails)
    with pytest.raises(CostgraphValueError) as e:
        draft_model({"model_type": "vit", "num_hidden_layers": 3}, check=False)
    assert e.value.message == ("the forward of ViTModel fails on the meta device at the probe configuration: "
                               "RuntimeError: simulated")
    assert e.value.hint == ("costgraph import traces one forward of the inputs the model takes (token ids, decoder "
                            "ids, pixels, audio or its features) at the probe sizes; write this family's model file "
                            "by hand (docs: a new architecture in ten minutes)")
