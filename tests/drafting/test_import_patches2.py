"""``costgraph import`` (issue 28 item 2) of the VLM vision towers of square list sizes (task k28patch2):
InternVL's and Qianfan-OCR's towers, whose configs hold ``image_size`` and ``patch_size`` as ``[side, side]`` lists
(transformers 5.24 configuration_internvl.py ``InternVLVisionConfig``: ``image_size=[448, 448]``, ``patch_size=[14,
14]``), probed as ``[image, image]`` and ``[p, p]`` (drafting/probe_lists.py) and traced on an image ``[b, c, image,
image]``; VideoLLaMA3's tower on flattened patches, ``grid_thw`` and ``merge_sizes`` (drafting/inputs_merge_sizes.py);
drafted exact against PyTorch at both probes (tests/draft_checks.py ``assert_exact``).

transformers 5.24 modeling_internvl.py: ``InternVLVisionEmbeddings`` (``patch_embeddings.projection``, a Conv2d of
kernel = stride = p with a bias; ``cls_token`` [1, 1, h]; ``position_embeddings`` [1, n + 1, h]),
``InternVLVisionLayer`` (``layernorm_before``, ``attention``: ``q_proj``, ``k_proj``, ``v_proj`` of no bias
(``attention_bias`` False), ``q_norm`` / ``k_norm`` ``nn.Identity`` (``use_qk_norm`` False), ``projection_layer`` h → h
with a bias; ``lambda_1`` scaling it; ``layernorm_after``, ``mlp``: ``fc1`` h → i, ``fc2`` i → h with biases;
``lambda_2``), ``InternVLVisionModel.layernorm`` an ``nn.Identity`` under ``use_mean_pooling`` (the default).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

from costgraph.drafting.probe_lists import SQUARE_LISTS, list_values, square_lists  # noqa: E402
from costgraph.drafting.primes import PRIMES  # noqa: E402
from costgraph.drafting.probe import Probe  # noqa: E402

#: the towers claimed exact (bench/bench_import_reach.py --mapping base --kinds vision prints EXACT for each):
#: model_type → its default config (drafted by model_type: AutoModel's class)
TYPES = ("internvl_vision", "qianfan_ocr_vision", "video_llama_3_vision")
drafted = Drafts({t: t for t in TYPES})

LAYER = ("    x = x + gqa_attention(layernorm(x, name = layernorm_before), a, a, h / a, out_bias = true, "
         "causal = false, rotary = false, name = attention) * lambda_1\n"
         "    x = x + mlp(layernorm(x, name = layernorm_after), i, bias = true, dropout = false, name = mlp) * lambda_2")
EXPECTED = {
    "internvl_vision": LAYER,
    "qianfan_ocr_vision": "  input pixels[b, c, image, image]",
    # modeling_video_llama_3.py VideoLlama3VisionModel.forward(pixel_values, grid_thw, merge_sizes): flattened
    # patches [n, c·p·p] (drafting/inputs_merge_sizes.py: m = 2, m²·s patches an image), the Conv2d patch embedding
    # as a linear map, post_layernorm; pixel_unshuffle's bilinear interpolate adds no matrix product
    "video_llama_3_vision": "  input patches[b, 4 * s, c * p * p]",
}


@pytest.mark.parametrize("family", TYPES)
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def test_list_sizes_read_back_as_their_first_entry():
    """The draft names the list fields it reads (probe_lists.py: ``image_size[0]``, ``patch_size[0]``) and writes the
    default config's own sizes back (448, 14)."""
    text = drafted("internvl_vision").text
    assert "image = image_size[0], p = patch_size[0]" in text
    assert "image = 448, p = 14" in text


def test_square_lists_probe_values():
    """Both probes set ``[p·q, p·q]`` and ``[p, p]`` from primes.PRIMES (p, q) and trace q² + 1 tokens; a config of
    unequal entries (a non-square image) is not marked."""
    config = transformers.AutoConfig.for_model("internvl_vision")
    assert square_lists(config)
    for i in (0, 1):
        p, q = PRIMES[i]["p"], PRIMES[i]["q"]
        probe = list_values(Probe.make(("hidden_size",), i), (SQUARE_LISTS,), PRIMES[i])
        assert probe.fields["image_size"] == [p * q, p * q] and probe.fields["patch_size"] == [p, p]
        assert probe.symbols["image"] == (p * q, "image_size[0]") and probe.s == q * q + 1
    config.image_size = [448, 224]
    assert not square_lists(config)


def test_internvl_tower_counted_by_hand():
    """Parameters and forward FLOPs by hand at each probe (modeling_internvl.py, module docstring;
    ``InternVLVisionEmbeddings.__init__``, ``InternVLVisionAttention.__init__``, ``InternVLVisionLayer.__init__``,
    ``InternVLVisionMLP.__init__``): n = (image/p)² patches, s = n + 1 tokens; parameters c·p²·h + h (the patch
    Conv2d), h (cls_token), (n + 1)·h (positions), per layer 4h² + h (q, k, v; projection_layer with its bias), 4h
    (two LayerNorms), 2h (lambda_1, lambda_2), 2h·i + i + h (fc1, fc2); FLOPs 2·b·n·c·p²·h, per layer 2·b·s·4h²,
    2 · 2·b·s²·h (scores, weighted values), 2 · 2·b·s·h·i."""
    d = drafted("internvl_vision")
    for c in d.checks:
        v = c.values
        b, h, i, l, ch, image, p = (v[k] for k in ("b", "h", "i", "l", "c", "image", "p"))
        n = (image // p) ** 2
        s = n + 1
        layer = 4 * h * h + h + 4 * h + 2 * h + 2 * h * i + i + h
        assert c.params_torch == ch * p * p * h + h + h + s * h + l * layer
        block = 2 * b * s * 4 * h * h + 2 * 2 * b * s * s * h + 2 * 2 * b * s * h * i
        assert c.forward_flops_torch == 2 * b * n * ch * p * p * h + l * block
