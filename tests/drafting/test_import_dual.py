"""``costgraph import`` of dual encoders (issue 28 item 2, task k28dual13): the text and vision towers drafted as two
blocks of one file, their sizes named apart (``h_t``, ``h_v``, as models/clip.cg names them), the projections to the
joint size ``e`` (``projection_dim``), the logit scale and the similarity matmul; exact against PyTorch at both probes
(tests/draft_checks.py ``assert_exact``). The draft: drafting/dual.py, drafting/dual_draft.py; the inputs (token ids
and an image in one forward): drafting/inputs_dual.py.
"""

from __future__ import annotations

import json
import pathlib

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

#: openai/clip-vit-base-patch32's config.json (CLIPConfig's default sizes: vision 768 wide, text 512, projection 512)
CLIP_JSON = pathlib.Path(__file__).resolve().parents[2] / "examples" / "hf" / "clip-vit-base-patch32.json"
#: the base model (AutoModel's class, transformers 5.24 modeling_auto.py MODEL_MAPPING_NAMES) of each model_type, at
#: its default config; CLIP's from its released config.json (drafted once: ``costgraph import`` of the same file below
#: is answered from draft_model's cache)
drafted = Drafts({"clip": str(CLIP_JSON), "metaclip_2": "MetaClip2Model", "aimv2": "Aimv2Model",
                  "owlvit": "OwlViTModel", "owlv2": "Owlv2Model", "clipseg": "CLIPSegModel",
                  "siglip": "SiglipModel", "chinese_clip": "ChineseCLIPModel", "altclip": "AltCLIPModel",
                  "vision-text-dual-encoder": "VisionTextDualEncoderModel"})

PROJECTIONS = ("  img = linear(img, e, bias = false, name = visual_projection)   # [b, e]\n"
               "  txt = linear(txt, e, bias = false, name = text_projection)   # [b, e]\n")
EXPECTED = {
    # modeling_clip.py CLIPModel.__init__: visual_projection, text_projection (bias=False), logit_scale (one element);
    # CLIPModel.forward: torch.matmul(text_embeds, image_embeds.t()) * logit_scale.exp()
    "clip": PROJECTIONS + "  img = rmsnorm(img, weight = false, name = image_norm)",
    "metaclip_2": PROJECTIONS,
    # modeling_aimv2.py Aimv2Model.__init__: the two projections without bias, logit_scale
    "aimv2": PROJECTIONS,
    # modeling_owlvit.py OwlViTModel: a tower transformers does not export (OwlViTTextTransformer), drafted as
    # OwlViTTextModel (which holds one as text_model)
    "owlvit": "block owlvit_text(tokens[b, s], positions[s], h, a, i, l, V, s_max) {",
    "owlv2": "block owlv2_vision(pixels[b, c, image, image], h, a, i, l, n, p) {",
    "clipseg": "  param logit_scale[1]\n  y = y * logit_scale",
    # modeling_siglip.py SiglipModel: no projections; SiglipTextModel.forward: head(last_hidden_state[:, -1, :]),
    # projection_size wide, which the similarity matmul needs equal to the image embeddings' width (h_v);
    # SiglipModel.forward: * logit_scale.exp() + logit_bias
    "siglip": "  x = select(x)   # the last token (one token a sequence: [b, h])\n"
              "  return linear(x, e_j, bias = true, name = head)\n}",
    # modeling_chinese_clip.py ChineseCLIPModel.__init__: ChineseCLIPTextModel(text_config, add_pooling_layer=False);
    # get_text_features: last_hidden_state[:, 0, :] (the class token), no pooler's dense
    "chinese_clip": "  x = select(x)   # the class token\n  return x\n}\n\nmodel chinese_clip {",
    # modeling_altclip.py AltCLIPTextModel: transformation = nn.Linear(hidden_size, project_dim); AltCLIPModel:
    # text_projection = nn.Linear(text_config.project_dim, projection_dim, bias=False)
    "altclip": "  return linear(x, e_j, bias = true, name = transformation)\n}",
    # modeling_vision_text_dual_encoder.py VisionTextDualEncoderModel: any vision and text model (CLIP's vision
    # tower and BERT by default) with the two projections and logit_scale
    "vision-text-dual-encoder": PROJECTIONS,
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(family):
    d = drafted(family)
    assert_exact(d, EXPECTED[family])
    # the towers' sizes are apart at both probes: one tower at each probe's primes (drafting/dual_draft.py)
    for c in d.checks:
        assert c.values["h_t"] != c.values["h_v"] and c.values["l_t"] != c.values["l_v"]


def test_siglip_text_head_reads_the_image_width():
    text = drafted("siglip").text
    assert "siglip_text(tokens, positions, h_t, a_t, i_t, l_t, V, s_max, h_v, name = text_model)" in text
    assert "  param logit_bias[1]\n  y = y + logit_bias\n" in text
    assert "e_j" not in drafted("siglip").mapping and "dim e " not in text


def test_the_towers_are_named_apart():
    text = drafted("clip").text
    assert "  img = clip_vision(pixels, h_v, a_v, i_v, l_v, n, p, name = vision_model)" in text
    assert "  txt = clip_text(tokens, positions, h_t, a_t, i_t, l_t, V, s_max, name = text_model)" in text
    assert '  dim h_t   "text tower: hidden size (d_model) (config.json: text_config.hidden_size)"' in text
    assert drafted("clip").mapping["e"] == "projection_dim"


def test_projections_and_logit_scale_counted_by_hand():
    """transformers 5.24 modeling_clip.py ``CLIPModel.__init__``::

        self.visual_projection = nn.Linear(self.vision_embed_dim, self.projection_dim, bias=False)
        self.text_projection = nn.Linear(self.text_embed_dim, self.projection_dim, bias=False)
        self.logit_scale = nn.Parameter(torch.tensor(self.config.logit_scale_init_value))

    At CLIPConfig's defaults (text hidden 512, vision hidden 768, projection_dim 512): 768·512 + 512·512 parameters in
    the projections and one in the 0-dimensional logit scale; ``CLIPModel.forward``'s ``torch.matmul(text_embeds,
    image_embeds.t())`` is [b, e] × [e, b]: 2·b·b·e FLOPs."""
    d = drafted("clip")
    m = costgraph.loads(d.text, path="<clip>", config="imported")
    at = {str(k): int(v) for k, v in m.values("imported", b=2, s=77).items()}
    assert (at["h_v"], at["h_t"], at["e"]) == (768, 512, 512)
    costs = m.costs("model", convention="matmul")
    full = costs.evaluate(None, at)
    wider = costs.evaluate(None, {**at, "e": 513})     # one more joint width: a row of each projection, a product
    per_width = int(wider["params"]) - int(full["params"])
    assert per_width == 768 + 512 and 512 * per_width == 768 * 512 + 512 * 512
    assert int(wider["flops_forward"]) - int(full["flops_forward"]) == 2 * 2 * (768 + 512) + 2 * 2 * 2
    assert "  param logit_scale[1]\n" in d.text
    assert d.config_params[0] == d.config_params[1]     # torch's sum(p.numel()) of CLIPModel at the defaults


def test_a_clip_config_file_drafts_the_dual_model(tmp_path, capsys):
    """``costgraph import CONFIG.json`` of a CLIP config.json (AutoModel's CLIPModel: drafting/model_build.auto_class):
    both towers, not the text tower alone. openai/clip-vit-base-patch32's config.json (examples/hf): 151,277,313
    parameters, as ``sum(p.numel())`` of transformers' CLIPModel counts them (the draft's own check at the config)."""
    from costgraph.cli import main

    path = tmp_path / "config.json"
    path.write_text(json.dumps(json.loads(CLIP_JSON.read_text())))
    out = tmp_path / "clip.cg"
    assert main(["import", str(path), "-o", str(out)]) == 0
    text = out.read_text()
    assert "`CLIPModel`" in text and "block clip_vision(" in text and "block clip_text(" in text
    assert "e = 512, b = 1, s = 77 }" in text
    said = "".join(capsys.readouterr())
    assert "parameters exact" in said and "forward FLOPs exact" in said
    built = costgraph.loads(text, path="<clip>", config="imported")
    at = {str(k): int(v) for k, v in built.values("imported", b=1, s=77).items()}
    assert int(built.costs("model", convention="matmul").evaluate(None, at)["params"]) == 151_277_313
