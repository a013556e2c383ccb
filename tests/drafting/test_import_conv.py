"""``costgraph import`` (issue 28 item 2, task k28conv12) of staged vision backbones: ConvNeXt, ConvNeXt V2, DINOv3
ConvNeXt, ResNet, RegNet, PoolFormer, Swin, Swin V2 and Donut Swin at their default configs (AutoModel's base class),
traced from ``pixel_values``, exact against PyTorch at both probes (tests/draft_checks.py ``assert_exact``), each
stage's width, depth and heads a symbol of its own (``h_i`` = ``hidden_sizes[i - 1]``, ``l_i`` = ``depths[i - 1]``,
``a_i`` = ``num_heads[i - 1]``: drafting/conv_stages.py, drafting/window_stages.py).

transformers 5.24 modeling_convnext.py ``ConvNextEmbeddings`` (Conv2d kernel = stride = patch_size, a channels-first
LayerNorm), ``ConvNextStage`` (``downsampling_layer``: LayerNorm, Conv2d 2×2 stride 2; then ``layers``),
``ConvNextLayer`` (7×7 depthwise Conv2d, LayerNorm, Linear C → 4C, GELU, Linear 4C → C, layer scale, residual),
``ConvNextModel`` (LayerNorm of the spatial mean). modeling_resnet.py ``ResNetEmbeddings`` (7×7/2 Conv2d without
bias, BatchNorm2d, ReLU, MaxPool2d(3, 2, 1)), ``ResNetBottleNeckLayer`` (1×1 to C/4, 3×3 of stride s, 1×1 to C, each
with a BatchNorm2d; a 1×1 strided shortcut with a BatchNorm2d where the shape changes; ReLU of the sum),
``ResNetModel`` (AdaptiveAvgPool2d(1)).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

drafted = Drafts({"convnext": "ConvNextModel", "convnextv2": "ConvNextV2Model",
                  "dinov3_convnext": "DINOv3ConvNextModel", "resnet": "ResNetModel", "regnet": "RegNetModel",
                  "swin": "SwinModel", "donut-swin": "DonutSwinModel", "swinv2": "Swinv2Model",
                  "poolformer": "PoolFormerModel", "segformer": "SegformerModel", "pvt_v2": "PvtV2Model"})

LAYER = ("    y = conv2d(x, h_{i}, kernel = 7, padding = 3, groups = h_{i}, name = {dw})\n"
         "    y = layernorm(channels_last(y), name = {ln})\n"
         "    y = linear(y, 4 * h_{i}, bias = true, name = {fc1})\n    y = gelu(y)\n")
EXPECTED = {
    "convnext": "  input pixels[b, c, image, image]\n\n"
                "  x = conv2d(pixels, h_1, kernel = p, stride = p, name = embeddings_patch_embeddings)\n"
                "  x = channels_first(layernorm(channels_last(x), name = embeddings_layernorm))\n"
                "  repeat l_1 as stage_1 {   # stage 1: depths[0] layers\n"
                + LAYER.format(i=1, dw="dwconv", ln="layernorm", fc1="pwconv1")
                + "    y = linear(y, h_1, bias = true, name = pwconv2)\n"
                  "    y = layer_scale(y)   # layer_scale_parameter [C]\n    x = channels_first(y) + x\n  }\n"
                  "  x = channels_first(layernorm(channels_last(x), name = encoder_stages_1_downsampling_layer_0))\n"
                  "  x = conv2d(x, h_2, kernel = 2, stride = 2, name = encoder_stages_1_downsampling_layer_1)\n",
    # modeling_convnextv2.py ConvNextV2Layer: grn after the activation, no layer scale
    "convnextv2": LAYER.format(i=4, dw="dwconv", ln="layernorm", fc1="pwconv1")
                  + "    y = grn(y, name = grn)\n    y = linear(y, h_4, bias = true, name = pwconv2)\n"
                    "    x = channels_first(y) + x\n  }\n  x = layernorm(spatial_mean(x), name = layernorm)\n",
    # modeling_dinov3_convnext.py DINOv3ConvNextModel.forward: the pooled map in front of the tokens, then layer_norm
    "dinov3_convnext": "  pool = spatial_mean(x, keepdim = true)\n  x = layernorm(concat_seq(flatten_patches(pool), "
                       "flatten_patches(x)), name = layer_norm)\n  return x\n",
    "resnet": "  input pixels[b, c, s, s]\n\n"
              "  x = conv2d(pixels, h_0, kernel = 7, stride = 2, padding = 3, bias = false, "
              "name = embedder_embedder_convolution)\n"
              "  x = batch_norm(x, name = embedder_embedder_normalization)\n  x = relu(x)\n"
              "  x = max_pool2d(x, 3, stride = 2, padding = 1)\n"
              "  # stage 1: its first layer, built otherwise\n"
              "  y = conv2d(x, h_1 / 4, kernel = 1, bias = false, name = stage_1_first_layer_0_convolution)\n",
    # modeling_regnet.py RegNetYLayer: groups = out_channels // groups_width; RegNetSELayer of round(in_channels / 4)
    "regnet": "groups = h_1 / g_w, bias = false, name = stage_1_first_layer_1_convolution)\n"
              "  y = batch_norm(y, name = stage_1_first_layer_1_normalization)\n  y = relu(y)\n"
              "  se = spatial_mean(y, keepdim = true)   # layer_2: squeeze and excitation\n"
              "  se = conv2d(se, h_0 / 4, kernel = 1, name = stage_1_first_layer_2_0)\n",
    # modeling_swin.py SwinLayer: windows of W² tokens, a heads per stage, the relative position table
    "swin": "  repeat l_2 as stage_2 {   # stage 2: depths[1] layers\n"
            "    y_2 = windows(layernorm(x, name = layernorm_before), (image / (2 * p) / W) * (image / (2 * p) / W))"
            "   # [b (R/W)^2, W^2, C], R = image / (2 * p)\n"
            "    y_2 = gqa_attention(y_2, a_2, a_2, (2 * h_e) / a_2, qkv_bias = true, out_bias = true, rotary = false, "
            "name = attention)\n"
            "    param relative_position_bias_table[(2 * W - 1) * (2 * W - 1), a_2]",
    # modeling_swinv2.py Swinv2Layer: post-norm; Swinv2SelfAttention's continuous position bias MLP (2 → 512 → a)
    "swinv2": "    y_1 = gqa_attention(y_1, a_1, a_1, h_e / a_1, qkv_bias = true, k_bias = false, out_bias = true, "
              "rotary = false, name = attention)\n    param logit_scale[a_1]   # [a, 1, 1]: the cosine scores' scale "
              "per head\n    cpb_1 = linear(relu(linear(relative_coords, 512, bias = true, name = cpb_fc1)), a_1, "
              "bias = false, name = cpb_fc2)",
    # modeling_poolformer.py PoolFormerLayer: pool(x) - x as the token mixer, GroupNorm(1, C), per-channel scales
    "poolformer": "    y = group_norm(x, 1, name = before_norm)\n"
                  "    y = avg_pool2d(y, 3, stride = 1, padding = 1) - y   # pooling\n"
                  "    y = channels_first(layer_scale(channels_last(y)))   # layer_scale_1 [C], per channel\n",
    # modeling_segformer.py SegformerAttention: keys and values of the map reduced by sr_ratios[0] = 8; the stage's
    # side after SegformerOverlapPatchEmbeddings' Conv2d(7, stride 4, padding 3): floor((s + 6 - 7)/4) + 1
    "segformer": "  x = flatten_patches(conv2d(pixels, h_1, kernel = 7, stride = 4, padding = 3, "
                 "name = stages_0_patch_embeddings_proj))\n"
                 "  x = layernorm(x, name = stages_0_patch_embeddings_layer_norm)\n"
                 "  repeat l_1 as stage_1 {   # stage 1: depths[0] layers\n"
                 "    y_1 = layernorm(x, name = layernorm_before)\n"
                 "    kv_1 = layernorm(flatten_patches(conv2d(unflatten_patches(y_1, floor((s - 1) / 4) + 1), h_1, "
                 "kernel = 8, stride = 8, bias = true, name = sr)), name = sr_norm)   # (R/8)^2 keys\n",
    # modeling_pvt_v2.py PvtV2BlockLayer: SegFormer's layer under other names
    "pvt_v2": "    x = x + linear(y_4, h_4, bias = true, name = o_proj)\n",
    # modeling_donut_swin.py: the same layer under BERT's names (attention.self.query, intermediate.dense, ...)
    "donut-swin": "  x = layernorm(merge_tokens(x, 4), name = encoder_layers_0_downsample_norm)\n"
                  "  x = linear(x, 2 * h_e, bias = false, name = encoder_layers_0_downsample_reduction)\n",
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def test_stage_symbols_name_the_config_lists():
    d = drafted("resnet")
    assert d.mapping == {"c": "num_channels", "h_0": "embedding_size", **{f"h_{i}": f"hidden_sizes[{i - 1}]"
                                                                         for i in range(1, 5)},
                         **{f"l_{i}": f"depths[{i - 1}]" for i in range(1, 5)}}
    assert d.values == {"c": 3, "h_0": 64, "h_1": 256, "h_2": 512, "h_3": 1024, "h_4": 2048,
                        "l_1": 3, "l_2": 4, "l_3": 6, "l_4": 3, "s": 224}   # s: the image side, no config field
    assert "config imported { c = 3, h_0 = 64, h_1 = 256" in d.text and "s = 224, b = 1 }" in d.text


def test_resnet50_parameters_as_published():
    """ResNet-50 (He et al. 2016): torchvision's ``resnet50`` has 25,557,032 parameters (pytorch/vision
    torchvision/models/resnet.py ``ResNet50_Weights.IMAGENET1K_V1.meta["num_params"]``), of which its classifier
    ``fc`` (2048 → 1000 with a bias) holds 2,049,000; transformers' ResNetModel at its default config (bottleneck
    layers of depths 3, 4, 6, 3, the stride in the 3×3 as torchvision's) is the rest: 23,508,032."""
    d = drafted("resnet")
    assert d.config_params == [25_557_032 - (2048 * 1000 + 1000)] * 2


def _side(n: int, k: int, stride: int, pad: int) -> int:
    """PyTorch's Conv2d/MaxPool2d output side (dilation 1): ⌊(n + 2·pad − k)/stride⌋ + 1."""
    return (n + 2 * pad - k) // stride + 1


def test_convnext_counted_by_hand_from_the_transformers_source():
    """By hand at each probe (modeling_convnext.py, above). Per layer of width C on an n×n map: the depthwise 7×7
    (49C + C parameters, 2·b·n²·C·49 FLOPs), LayerNorm 2C, pwconv1 4C² + 4C and pwconv2 4C² + C (2·b·n²·4C² FLOPs
    each), the layer scale C. Stem: c·p²·h_1 + h_1 and a LayerNorm (2h_1), 2·b·(image/p)²·h_1·c·p² FLOPs; stage i > 1
    downsamples: LayerNorm 2h_{i-1}, Conv2d 2×2/2 (4·h_{i-1}·h_i + h_i; 2·b·n_i²·h_i·4h_{i-1} FLOPs); the final
    LayerNorm 2h_4."""
    d = drafted("convnext")
    for c in d.checks:
        v = c.values
        b, ch, p, image = v["b"], v["c"], v["p"], v["image"]
        widths, depths = [v[f"h_{i}"] for i in range(1, 5)], [v[f"l_{i}"] for i in range(1, 5)]
        n = image // p
        params, flops = ch * p * p * widths[0] + widths[0] + 2 * widths[0], 2 * b * n * n * widths[0] * ch * p * p
        prev = widths[0]
        for i, (w, depth) in enumerate(zip(widths, depths)):
            if i:
                n = _side(n, 2, 2, 0)
                params += 2 * prev + 4 * prev * w + w
                flops += 2 * b * n * n * w * 4 * prev
            params += depth * (8 * w * w + 58 * w)
            flops += depth * 2 * b * n * n * (49 * w + 8 * w * w)
            prev = w
        assert (c.params_torch, c.forward_flops_torch) == (params + 2 * widths[-1], flops)


def test_resnet_side_follows_pytorchs_floors():
    """The draft's spatial sides at an odd image (225, no config field: the input's s): the stem's 7×7/2 with padding
    3, the max pool 3/2 with padding 1, the first 3×3/2 of stages 2-4 (padding 1) and the 1×1/2 shortcut agree, each
    ⌊(n + 2·pad − k)/stride⌋ + 1; the draft's FLOPs at b = 1 equal the conv sums by hand."""
    d = drafted("resnet")
    m = costgraph.loads(d.text, path="<resnet>", config="imported")
    values = {str(k): int(v) for k, v in m.values("imported", b=1, s=225).items()}
    got = int(m.costs("model", convention="matmul").evaluate(None, values)["flops_forward"])
    n = _side(_side(225, 7, 2, 3), 3, 2, 1)
    flops = 2 * _side(225, 7, 2, 3) ** 2 * 64 * 3 * 49
    cin = 64
    for i, (w, depth) in enumerate(zip((256, 512, 1024, 2048), (3, 4, 6, 3))):
        for j in range(depth):
            stride = 2 if i and not j else 1
            out = _side(n, 3, stride, 1)
            flops += 2 * (n * n * (w // 4) * cin + out * out * (w // 4) * (w // 4) * 9 + out * out * w * (w // 4))
            if not j:
                flops += 2 * out * out * w * cin
            n, cin = out, w
    assert got == flops


def test_swin_counted_by_hand_from_the_transformers_source():
    """By hand at each probe (modeling_swin.py): the patch Conv2d (c·p²·C + C; 2·b·N·C·c·p² FLOPs, N = (image/p)²),
    its LayerNorm; per layer of stage i (width C = 2^(i-1)·h_e, N tokens, a heads, windows of W² tokens): q, k, v, o
    (4(C² + C); 4 · 2·b·N·C² FLOPs), the scores and the weighted values of each window (2 · 2·b·N·W²·C), the table
    ((2W − 1)²·a), two LayerNorms (4C), the MLP (8C² + 5C; 2 · 2·b·N·4C² FLOPs); patch merging after stages 1-3
    (LayerNorm 8C, Linear 4C → 2C without bias: 8C², 2·b·(N/4)·8C² FLOPs); the final LayerNorm."""
    d = drafted("swin")
    for c in d.checks:
        v = c.values
        b, ch, p, image, w, e = v["b"], v["c"], v["p"], v["image"], v["W"], v["h_e"]
        n = (image // p) ** 2
        params, flops = ch * p * p * e + e + 2 * e, 2 * b * n * e * ch * p * p
        for i in range(4):
            cw, heads, depth = e * 2 ** i, v[f"a_{i + 1}"], v[f"l_{i + 1}"]
            assert (image // p // 2 ** i) % w == 0     # every stage a whole number of windows
            params += depth * (4 * (cw * cw + cw) + (2 * w - 1) ** 2 * heads + 4 * cw + 8 * cw * cw + 5 * cw)
            flops += depth * (4 * 2 * b * n * cw * cw + 2 * 2 * b * n * w * w * cw + 2 * 2 * b * n * 4 * cw * cw)
            if i < 3:
                params += 8 * cw + 8 * cw * cw
                flops += 2 * b * (n // 4) * 8 * cw * cw
                n //= 4
        assert (c.params_torch, c.forward_flops_torch) == (params + 2 * e * 8, flops)
