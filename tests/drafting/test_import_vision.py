"""``costgraph import`` (issue 28 item 2) of a ViT-family vision encoder: traced from ``pixel_values``, exact against
PyTorch at both probes (tests/draft_checks.py ``assert_exact``).

transformers 5.24 modeling_vit.py: ``ViTPatchEmbeddings.forward`` is ``projection(pixel_values).flatten(2)
.transpose(1, 2)``, ``projection`` an ``nn.Conv2d(num_channels, hidden_size, kernel_size=patch_size,
stride=patch_size)`` (n = (image/p)² patches); ``ViTEmbeddings.forward`` concatenates ``cls_token [1, 1, h]`` in
front and adds ``position_embeddings [1, n + 1, h]``; each ``ViTLayer`` is a pre-LayerNorm attention (``query``,
``key``, ``value``, ``output.dense``, biases) and MLP (``intermediate.dense`` h → i, ``output.dense`` i → h);
``ViTModel`` ends with ``layernorm`` and ``ViTPooler`` (``dense`` on ``hidden_states[:, 0]``, then tanh). The draft:
drafting/vision.py (embeddings), drafting/probe.py (image_size, patch_size, num_channels), drafting/api.py (the
``pixel_values`` forward).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

#: transformers' class names: the base model (AutoModel's) of each type, at its default config
drafted = Drafts({"vit": "ViTModel", "deit": "DeiTModel", "dinov2": "Dinov2Model"})

EXPECTED = {
    "vit": "  dim n = (image / p) * (image / p) \"number of patches, (image/p)^2\"\n"
           "  dim s = n + 1 \"sequence length: the patches and the tokens put in front of them\"\n\n"
           "  input pixels[b, c, image, image]\n\n"
           "  x = flatten_patches(conv2d(pixels, h, kernel = p, stride = p, bias = true, name = projection))",
    # modeling_deit.py DeiTEmbeddings.forward: torch.cat((cls_tokens, distillation_tokens, embeddings), dim=1)
    "deit": "  dim s = n + 2 \"sequence length: the patches and the tokens put in front of them\"\n\n"
            "  input pixels[b, c, image, image]\n\n"
            "  x = flatten_patches(conv2d(pixels, h, kernel = p, stride = p, bias = true, name = projection))"
            "   # [b, n, h], n = (image/p)^2 patches\n"
            "  param cls_token[1, 1, h]\n  param distillation_token[1, 1, h]\n"
            "  x = concat_seq(distillation_token, x)\n  x = concat_seq(cls_token, x)\n"
            "  param position_embeddings[1, n + 2, h]\n",
    # modeling_dinov2.py Dinov2Layer.forward: layer_scale1(attention(norm1(x))) + x; Dinov2LayerScale: x * lambda1;
    # Dinov2Embeddings.mask_token [1, h], read only with bool_masked_pos; Dinov2Model has no pooler
    "dinov2": "  param mask_token[1, h]   # read only with bool_masked_pos (parameters only)\n"
              "  repeat l as layer {\n    param layer_scale1_lambda1[h]\n"
              "    x = x + gqa_attention(layernorm(x, name = norm1), a, a, h / a, qkv_bias = true, out_bias = true, "
              "causal = false, rotary = false, name = attention) * layer_scale1_lambda1\n",
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def test_vit_counted_by_hand_from_the_transformers_source():
    """By hand at each probe (modeling_vit.py, above): the patch embedding's Conv2d, 2·b·n·(c·p²)·h FLOPs (each of
    the b·n patches a dot product of c·p² pixels per output channel); every layer's q, k, v, o (4 · 2·b·s·h²), the
    scores and the weighted values (2 · 2·b·a·s²·(h/a)), the MLP (2 · 2·b·s·h·i); the pooler's dense on the class
    token alone (2·b·h²). s = n + 1, n = (image/p)². Parameters: the Conv2d (c·p²·h + h), the class token and
    n + 1 positions, per layer 4(h² + h) + 2hi + i + h and two LayerNorms (4h), the final LayerNorm and the pooler."""
    d = drafted("vit")
    assert "x = select(x)   # the class token\n  x = linear(x, h, bias = true, name = dense)" in d.text
    for c in d.checks:
        v = c.values
        b, h, a, i, l, image, p, ch = (v[k] for k in ("b", "h", "a", "i", "l", "image", "p", "c"))
        n = (image // p) ** 2
        assert n * p * p == image * image        # the probe's image holds a whole number of patches
        s = n + 1
        patch = 2 * b * n * (ch * p * p) * h
        layer = 4 * 2 * b * s * h * h + 2 * 2 * b * a * s * s * (h // a) + 2 * 2 * b * s * h * i
        assert c.forward_flops_torch == patch + l * layer + 2 * b * h * h
        params = (ch * p * p * h + h) + h + s * h + l * (4 * (h * h + h) + 2 * h * i + i + h + 4 * h) + 2 * h \
            + (h * h + h)
        assert c.params_torch == params
