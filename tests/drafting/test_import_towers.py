"""``costgraph import`` (issue 28 item 2) of the ViT-like vision towers beyond ViT: SigLIP's and AIMv2's attention
pooling, CLIP's class embedding and position table, I-JEPA's and Idefics3's patches alone, DINOv2's registers, BEiT's
and Data2VecVision's layer scale, ViT-MAE's random masking (TIPSv2's registers and DPT's ViT with them); exact against
PyTorch at both probes (tests/draft_checks.py ``assert_exact``). The draft: drafting/vision.py (embeddings), drafting/pooling_head.py (the
heads), drafting/encoder.py (Data2VecVision's layer), drafting/writer.py (BEiT's ``lambda_1``, ``lambda_2``).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

#: the base model (AutoModel's class) of each model_type, at its default config
drafted = Drafts({"siglip_vision_model": "SiglipVisionModel", "clip_vision_model": "CLIPVisionModel",
                  "chinese_clip_vision_model": "ChineseCLIPVisionModel", "aimv2_vision_model": "Aimv2VisionModel",
                  "mlcd_vision_model": "MLCDVisionModel", "ijepa": "IJepaModel",
                  "idefics3_vision": "Idefics3VisionTransformer", "smolvlm_vision": "SmolVLMVisionTransformer",
                  "dinov2_with_registers": "Dinov2WithRegistersModel", "beit": "BeitModel",
                  "data2vec-vision": "Data2VecVisionModel", "vit_mae": "ViTMAEModel",
                  "tipsv2_vision_model": "Tipsv2VisionModel", "dpt": "DPTModel"})

CONV = "  x = flatten_patches(conv2d(pixels, h, kernel = p, stride = p, bias = {}, name = {}))"
EXPECTED = {
    # modeling_siglip.py SiglipVisionEmbeddings: position_embedding = nn.Embedding(num_patches, h), no class token;
    # SiglipMultiheadAttentionPoolingHead: probe [1, 1, h], nn.MultiheadAttention(probe, x, x), layernorm + mlp
    "siglip_vision_model": "  dim s = n \"sequence length: the patches and the tokens put in front of them\"\n\n"
                           "  input pixels[b, c, image, image]\n  input probe_rows[b, 1]: index",
    # modeling_clip.py CLIPVisionEmbeddings: class_embedding [h], position_embedding nn.Embedding(n + 1, h)
    "clip_vision_model": "  param class_embedding[1, 1, h]\n  x = concat_seq(class_embedding, x)\n"
                         "  param position_embedding[1, n + 1, h]",
    "chinese_clip_vision_model": "  x = layernorm(x, name = pre_layrnorm)",
    # modeling_aimv2.py Aimv2VisionEmbeddings.forward: rms_norm of the patches before the positions are added
    "aimv2_vision_model": CONV.format("true", "patch_embed") + "   # [b, n, h], n = (image/p)^2 patches\n"
                          "  x = rmsnorm(x, name = rms_norm)\n  param position_embedding[1, n, h]",
    # modeling_mlcd.py MLCDVisionModel.__init__: class_pos_emb [1, h // a // 2]
    "mlcd_vision_model": "  param class_pos_emb[1, h / a / 2]",
    "ijepa": "  param position_embeddings[1, n, h]\n  x = x + position_embeddings\n",
    "idefics3_vision": "  param position_embedding[1, n, h]",
    "smolvlm_vision": "  param position_embedding[1, n, h]",
    # modeling_dinov2_with_registers.py Dinov2WithRegistersEmbeddings: register_tokens [1, num_register_tokens, h]
    "dinov2_with_registers": "  dim s = n + 1 + n_r \"sequence length: the patches and the tokens put in front of them\"",
    # modeling_beit.py BeitLayer: lambda_1 [h] on the attention's output, lambda_2 on the MLP's
    "beit": "    param lambda_1[h]\n    param lambda_2[h]\n",
    "data2vec-vision": "    param lambda_1[h]\n    param lambda_2[h]\n",
    # modeling_vit_mae.py ViTMAEEmbeddings.random_masking: int(n * (1 - 0.75)) patches kept, the class token in front
    "vit_mae": "  dim s = floor(n / 4) + 1 \"sequence length",
    # modeling_tipsv2.py: DINOv2's embeddings with num_register_tokens (1 by default) registers
    "tipsv2_vision_model": "  param register_tokens[1, n_r, h]\n",
    # modeling_dpt.py DPTViTEmbeddings (ViT's), DPTViTPooler: dense on the class token, tanh
    "dpt": "  x = select(x)   # the class token\n  x = linear(x, h, bias = true, name = dense)",
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def test_siglip_counted_by_hand_from_the_transformers_source():
    """By hand at each probe (transformers 5.24 modeling_siglip.py ``SiglipVisionModel.forward`` and
    ``SiglipMultiheadAttentionPoolingHead.forward``; torch/nn/functional.py ``multi_head_attention_forward``): the
    patch Conv2d 2·b·n·(c·p²)·h; every layer's q, k, v, out_proj (4 · 2·b·n·h²), the scores and the weighted values
    (2 · 2·b·n²·h), fc1 and fc2 (2 · 2·b·n·h·i), over the n patches (no class token); the head: the probe's query
    projection (2·b·h², one position), the key-value projection of the n positions (2·b·n·h·2h), its scores and
    weighted values for one query (2 · 2·b·n·h), out_proj (2·b·h²) and the MLP on one position (2 · 2·b·h·i).
    Parameters: the Conv2d (c·p²·h + h), n positions, per layer 4(h² + h) + 2hi + i + h and two LayerNorms (4h),
    post_layernorm (2h), the head's probe (h), in_proj (3h² + 3h), out_proj (h² + h), layernorm (2h), MLP."""
    d = drafted("siglip_vision_model")
    for c in d.checks:
        v = c.values
        b, h, i, l, image, p, ch = (v[k] for k in ("b", "h", "i", "l", "image", "p", "c"))
        n = (image // p) ** 2
        layer = 4 * 2 * b * n * h * h + 2 * 2 * b * n * n * h + 2 * 2 * b * n * h * i
        head = 2 * b * h * h + 2 * b * n * h * 2 * h + 2 * 2 * b * n * h + 2 * b * h * h + 2 * 2 * b * h * i
        assert c.forward_flops_torch == 2 * b * n * (ch * p * p) * h + l * layer + head
        mlp = 2 * h * i + i + h
        params = (ch * p * p * h + h) + n * h + l * (4 * (h * h + h) + mlp + 4 * h) + 2 * h \
            + h + (3 * h * h + 3 * h) + (h * h + h) + 2 * h + mlp
        assert c.params_torch == params


def test_vit_mae_runs_the_kept_patches():
    """ViT-MAE's layers run int(n · (1 - mask_ratio)) + 1 positions (modeling_vit_mae.py ``random_masking``,
    ``len_keep = int(seq_length * (1 - self.config.mask_ratio))``, mask_ratio 0.75 by default; then the class token):
    the layers' FLOPs at the probe are those of ViT's at that length (q, k, v, o, the scores, the MLP)."""
    d = drafted("vit_mae")
    for c in d.checks:
        v = c.values
        b, h, a, i, l, image, p, ch = (v[k] for k in ("b", "h", "a", "i", "l", "image", "p", "c"))
        n = (image // p) ** 2
        s = int(n * (1 - 0.75)) + 1
        layer = 4 * 2 * b * s * h * h + 2 * 2 * b * a * s * s * (h // a) + 2 * 2 * b * s * h * i
        assert c.forward_flops_torch == 2 * b * n * (ch * p * p) * h + l * layer
