"""``costgraph import`` (issue 28 item 2, task k28speech13) of FastConformer speech encoders: Parakeet's, traced from a
frames-first spectrogram ``input_features [b, frames, num_mel_bins]``, exact against PyTorch at both probes
(tests/draft_checks.py ``assert_exact``), and counted by hand from transformers 5.24's modeling_parakeet.py.

The draft: drafting/inputs_frames.py (the spectrogram, frames first), drafting/fast_conformer.py (the Conv2d
subsampling stem, the relative-position attention, the convolution module, the half-step feed-forwards, the CTC head),
drafting/probe.py (``subsampling_conv_channels`` probed as ``C_s``; the Mel bins 16 times the ``mel`` prime, so that the
stem's stride-2 convolutions leave ``num_mel_bins // 8`` bins, as its Linear is sized).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

#: transformers' class names: AutoModel's of each type, at its default config
drafted = Drafts({"parakeet_encoder": "ParakeetEncoder", "parakeet_ctc": "ParakeetForCTC", "lasr_encoder": "LasrEncoder",
                  "wav2vec2-bert": "Wav2Vec2BertModel"})

#: ParakeetEncoderSubsamplingConv2D (modeling_parakeet.py): Conv2d(1, C, 3, 2, 1), ReLU, then twice a depthwise
#: Conv2d(C, C, 3, 2, 1, groups=C), a pointwise Conv2d(C, C, 1), ReLU (subsampling_factor 8: log2(8) = 3 convolutions
#: of stride 2); its Linear(C · mel/8, h); the input scaled by √h (scale_input)
STEM = ("  x = relu(x)\n"
        "  x = conv2d(x, C_s, kernel = 3, stride = 2, padding = 1, groups = C_s, name = {p}subsampling_layers_2)\n"
        "  x = conv2d(x, C_s, kernel = 1, name = {p}subsampling_layers_3)\n")
#: ParakeetEncoderBlock.forward: the half-step feed-forwards, the attention with relative positions, the convolution
#: module (depthwise width conv_kernel_size 9, padding 4), norm_out
LAYER = """  repeat l as layers {
    x = x + scale(fc_feed_forward(layernorm(x, name = norm_feed_forward1), i, name = feed_forward1))   # x 0.5: a half step
    x = x + fc_rel_attention(layernorm(x, name = norm_self_att), pe, a, kv, name = self_attn)
    x = x + fc_conv(layernorm(x, name = norm_conv), 9, 4, name = conv)
    x = layernorm(x + scale(fc_feed_forward(layernorm(x, name = norm_feed_forward2), i, name = feed_forward2)), name = norm_out)   # x 0.5: a half step
  }
"""
FRAMES = ('  dim s = floor((f2 - 1) / 2) + 1 "frames after the stem\'s strided convolution 3 (PyTorch Conv2d: '
          'floor((n + 2 padding - k) / stride) + 1)"\n\n'
          "  input features[b, 1, T, mel]   # input_features [b, T, mel] as the stem reads it (unsqueeze(1))\n"
          "  input pe[b, 2 * s - 1, h]")

EXPECTED = {
    "parakeet_encoder": [FRAMES, STEM.format(p=""), "  x = scale(x)   # x input_scale, sqrt(h) (scale_input)\n" + LAYER
                         + "  return x\n}"],
    # ParakeetForCTC: the encoder, then ctc_head = ParakeetEncoderCTCHead(h, vocab_size, kernel_size=1), a Conv1d
    "parakeet_ctc": [FRAMES, STEM.format(p="encoder_"), LAYER + "  return transpose(dense_conv1d(transpose(x), 1025, "
                     "kernel = 1, name = ctc_head))\n}"],
    # modeling_lasr.py LasrEncoderSubsampling.forward: relu(dense_0), two Conv1d (kernel 5, stride 2, no padding) with
    # ReLU, dense_1; LasrEncoderBlock.forward: rotary attention (std gqa_attention), the residual sums weighted
    # (feed_forward_residual_weights (1.5, 0.5), conv_residual_weights (2.0, 1.0)), the depthwise convolution of
    # padding "same" (conv_kernel_size 32), LayerNorms without biases; out_norm after the layers
    "lasr_encoder": ['  dim s = floor((f1 - 5) / 2) + 1 "frames after the stem\'s convolution 2 (PyTorch Conv1d: '
                     'floor((n - k) / stride) + 1)"\n\n  input features[b, T, mel]',
                     "  x = relu(linear(features, h, bias = true, name = dense_0))\n  x = transpose(x)   # [b, h, T]\n"
                     "  x = relu(dense_conv1d(x, h, kernel = 5, stride = 2, name = conv_0))\n"
                     "  x = relu(dense_conv1d(x, C_s, kernel = 5, stride = 2, name = conv_1))\n"
                     "  x = linear(transpose(x), h, bias = true, name = dense_1)\n",
                     "    x = x + gqa_attention(layernorm(x, bias = false, name = norm_self_att), a, kv, h / a, "
                     "causal = false, name = self_attn)\n    x = scale(x) + scale(fc_conv_same(layernorm(x, bias = false, name = "
                     "norm_conv), 32, bias = false, name = conv))   # residual x 2.0, output x 1.0 (conv_residual_weights)\n"],
    # modeling_wav2vec2_bert.py Wav2Vec2BertModel: input_features [b, s, 160] (feature_projection_input_dim), the
    # feature projection (LayerNorm, Linear); Wav2Vec2BertEncoderLayer: wav2vec2-conformer's order, the attention with
    # relative_key positions (a distance table of 64 + 8 + 1 rows), the causal depthwise convolution (width 31)
    "wav2vec2-bert": ["  input features[b, s, 160]   # input_features: stacked Mel frames\n\n  x = features\n",
                      "    x = x + relative_key_attention(layernorm(x, name = self_attn_layer_norm), a, 73, "
                      "name = self_attn)\n    x = x + causal_conformer_conv(x, 31, name = conv_module)\n"],
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(family):
    d = drafted(family)
    for part in EXPECTED[family][1:]:
        assert part in d.text
    assert_exact(d, EXPECTED[family][0])


def _frames(n: int) -> int:
    """PyTorch's Conv2d output length of kernel 3, stride 2, padding 1: ⌊(n + 2 − 3)/2⌋ + 1."""
    return (n - 1) // 2 + 1


def test_forward_flops_by_hand_at_the_first_probe():
    """FlopCounterMode's forward FLOPs of ParakeetEncoder at the first probe, counted by hand from transformers 5.24
    modeling_parakeet.py (2 FLOPs per multiply-add; biases and elementwise work not counted, as FlopCounterMode):
    ``ParakeetEncoderSubsamplingConv2D.forward`` (each convolution 2·b·out·(in/groups)·k²·frames·bins, the Linear
    2·b·s·(C·bins)·h); per ``ParakeetEncoderBlock``: ``ParakeetEncoderFeedForward`` twice (linear1, linear2:
    2·2·b·s·h·i each); ``ParakeetEncoderAttention.forward`` (q_proj, o_proj 2·b·s·h², k_proj, v_proj 2·b·s·h·kv·d,
    ``relative_k_proj(position_embeddings)`` over the 2s − 1 offsets 2·b·(2s − 1)·h², ``matrix_bd`` 2·b·a·s·d·(2s −
    1), the scores and their product with v 2·b·a·s²·d each); ``ParakeetEncoderConvolutionModule.forward``
    (pointwise_conv1 2·b·s·h·2h, depthwise_conv 2·b·s·h·9, pointwise_conv2 2·b·s·h²)."""
    c = drafted("parakeet_encoder").checks[0]
    v = c.values
    b, h, a, kv, i, l, mel, ch, frames = (v[k] for k in ("b", "h", "a", "kv", "i", "l", "mel", "C_s", "T"))
    d = h // a
    f1, m1 = _frames(frames), _frames(mel)
    f2, m2 = _frames(f1), _frames(m1)
    s, m3 = _frames(f2), _frames(m2)
    assert m3 == mel // 8      # the probe's bins divide by 8: the stem's Linear reads C · mel // 8 features
    stem = 2 * b * ch * 9 * f1 * m1 + 2 * b * ch * (9 + ch) * f2 * m2 + 2 * b * ch * (9 + ch) * s * m3 \
        + 2 * b * s * ch * m3 * h
    ffn = 2 * (2 * 2 * b * s * h * i)
    attn = 2 * 2 * b * s * h * h + 2 * 2 * b * s * h * kv * d + 2 * b * (2 * s - 1) * h * h \
        + 2 * b * a * s * d * (2 * s - 1) + 2 * 2 * b * a * s * s * d
    conv = 2 * b * s * h * 2 * h + 2 * b * s * h * 9 + 2 * b * s * h * h
    assert stem + l * (ffn + attn + conv) == c.forward_flops_torch == c.forward_flops_draft


def test_parameters_by_hand_at_the_default_config():
    """``sum(p.numel())`` of ParakeetEncoder at ParakeetEncoderConfig's defaults (configuration_parakeet.py: h 1024,
    8 heads, i 4096, 24 layers, 256 stem channels, 80 Mel bins, conv_kernel_size 9, biases on), by hand from
    modeling_parakeet.py's ``__init__``s: the draft's count at the config's own sizes and PyTorch's equal it."""
    h, a, i, l, ch, mel, k = 1024, 8, 4096, 24, 256, 80, 9
    stem = (ch * 9 + ch) + 2 * (ch * 9 + ch) + 2 * (ch * ch + ch) + (ch * (mel // 8) * h + h)
    ffn = h * i + i + i * h + h                                   # ParakeetEncoderFeedForward: linear1, linear2
    attn = 4 * (h * h + h) + h * h + 2 * a * (h // a)             # q, k, v, o; relative_k_proj; bias_u, bias_v
    conv = (h * 2 * h + 2 * h) + (h * k + h) + 2 * h + (h * h + h)   # pointwise_conv1, depthwise, BatchNorm1d γ β, pw2
    norms = 5 * 2 * h                                             # the block's five LayerNorms
    total = stem + l * (2 * ffn + attn + conv + norms)
    assert drafted("parakeet_encoder").config_params == [total, total]
