"""``costgraph import CONFIG.json`` of a type transformers maps to no causal language model drafts its base model
(issue 28 item 2: the reach over "decoder, encoder, encoder-decoder, vision and speech types"; before, a ViT
config.json was refused: "Unrecognized configuration class ... for this kind of AutoModel: AutoModelForCausalLM").
transformers 5.24 modeling_auto.py: ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` has no ``vit`` (ViT is an image encoder),
``MODEL_MAPPING_NAMES["vit"] == "ViTModel"``; ``llama`` is in both (its causal LM is drafted, as before)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def test_the_auto_class_of_a_type():
    from transformers import AutoModel, AutoModelForCausalLM

    from costgraph.drafting.api import auto_class

    assert auto_class("llama") is AutoModelForCausalLM
    assert auto_class("bert") is AutoModelForCausalLM        # BertLMHeadModel: the causal mapping has it
    assert auto_class("vit") is AutoModel and auto_class("wav2vec2") is AutoModel and auto_class("t5") is AutoModel
    assert auto_class("no-such-type") is AutoModelForCausalLM   # transformers' own refusal then names the type


def test_a_vit_config_file_drafts_vit_model(tmp_path, capsys):
    from costgraph.cli import main

    cfg = transformers.ViTConfig(hidden_size=192, num_hidden_layers=2, num_attention_heads=3, intermediate_size=384,
                                 image_size=64, patch_size=16).to_dict()
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    out = tmp_path / "vit.cg"
    assert main(["import", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert "from transformers " in text and "`ViTModel`" in text
    assert "input pixels[b, c, image, image]" in text
    said = "".join(capsys.readouterr())
    assert "parameters exact" in said and "forward FLOPs exact" in said


def test_a_refusal_says_which_model_is_drafted(tmp_path, capsys):
    from costgraph.cli import main

    path = tmp_path / "config.json"
    # InformerConfig builds no model without a prediction_length (transformers 5.24 modeling_informer.py)
    path.write_text(json.dumps({"model_type": "informer"}))
    assert main(["import", str(path), "-o", str(tmp_path / "x.cg")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "else its base model (AutoModel" in err
