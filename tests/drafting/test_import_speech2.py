"""``costgraph import`` (issue 28 item 2, task k28speech2) of Nemotron ASR Streaming's FastConformer encoder
(transformers 5.24 modeling_nemotron_asr_streaming.py ``NemotronAsrStreamingEncoder``), traced from a frames-first
spectrogram ``input_features [b, frames, num_mel_bins]``, exact against PyTorch at both probes (tests/draft_checks.py
``assert_exact``), and counted by hand from the modeling file.

The draft: drafting/probe_frames.py (``max_position_embeddings`` left at the config's value: it bounds the frames, it
sizes no table), drafting/fast_conformer.py (the causal subsampling stem: ``conv2d``'s ``padding_end``; the causal
convolution module with a LayerNorm, ``fc_conv_causal``), drafting/trace.py (a causal Conv subclass's kernel, stride
and groups recorded). Nemotron 3 Diarization's audio encoder (modeling_nemotron3_diarization.py
``Nemotron3DiarizationAudioModel``): drafting/frame_stacking.py (``subsampling_factor`` frames stacked and projected),
drafting/inputs_frames.py (its spectrogram, frames first), its pre-LayerNorm layers of the std blocks.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

drafted = Drafts({"nemotron_asr_streaming_encoder": {"model_type": "nemotron_asr_streaming_encoder"},
                  "nemotron3_diarization_audio": {"model_type": "nemotron3_diarization_audio"}})

#: NemotronAsrStreamingEncoderSubsamplingConv2D.forward: conv_in (a causal Conv2d(1, C, 3, 2), padded (k − 1,
#: stride − 1) = (2, 1) on both axes by NemotronAsrStreamingEncoderCausalConv2D.forward), ReLU; then each
#: NemotronAsrStreamingEncoderSubsamplingLayer: a causal depthwise Conv2d(C, C, 3, 2, groups=C), a pointwise Conv2d(C,
#: C, 1), ReLU; the frames ⌊(n + 2 + 1 − 3)/2⌋ + 1 each (NemotronAsrStreamingEncoderCausalConv2D.output_length)
STEM = ("  dim s = floor((f2) / 2) + 1 \"frames after the stem's strided convolution 3 (PyTorch Conv2d: "
        "floor((n + padding + padding_end - k) / stride) + 1)\"",
        "  x = relu(conv2d(features, C_s, kernel = 3, stride = 2, padding = 2, padding_end = 1, name = conv_in))\n"
        "  x = conv2d(x, C_s, kernel = 3, stride = 2, padding = 2, padding_end = 1, groups = C_s, "
        "name = depthwise_conv)\n  x = relu(conv2d(x, C_s, kernel = 1, name = pointwise_conv))\n")
#: NemotronAsrStreamingEncoderBlock.forward: Parakeet's order; its convolution module's depthwise Conv1d causal
#: (conv_kernel_size 9) and a LayerNorm in place of the BatchNorm
CONV = "    x = x + fc_conv_causal(layernorm(x, name = norm_conv), 9, name = conv)\n"


#: Nemotron3DiarizationFeatureStacking.forward: [b, T, mel] padded to a multiple of 8 frames, reshaped [b, ⌈T/8⌉,
#: 8·mel], projection Linear(8·mel, h, bias=False); Nemotron3DiarizationAudioModel.forward: input_layer_norm, the
#: layers (pre-LayerNorm, rotary attention with o_proj's bias, fc1/fc2 MLP), layer_norm
STACKED = ('  dim s = floor((T + 7) / 8) "frames after stacking 8',
           "  x = linear(features, h, bias = false, name = projection)\n  x = layernorm(x, name = input_layer_norm)\n")


@pytest.fixture(scope="module")
def encoder():
    return drafted("nemotron_asr_streaming_encoder")


@pytest.fixture(scope="module")
def diarization():
    return drafted("nemotron3_diarization_audio")


def test_stacked_frames_exact_at_both_probes(diarization):
    assert STACKED[1] in diarization.text
    assert_exact(diarization, STACKED[0])


def test_stacked_frames_parameters_by_hand_at_the_default_config(diarization):
    """``sum(p.numel())`` of Nemotron3DiarizationAudioModel at Nemotron3DiarizationAudioConfig's defaults
    (configuration_nemotron3_diarization.py: h 512, 8 heads, kv = heads, i 2048, 31 layers, 128 Mel bins,
    subsampling_factor 8), by hand from modeling_nemotron3_diarization.py's ``__init__``s."""
    h, i, l, mel, f = 512, 2048, 31, 128, 8
    front = f * mel * h + 2 * h                      # FeatureStacking.projection (no bias), input_layer_norm
    attn = 3 * h * h + h * h + h                     # q, k, v (no bias), o_proj (bias)
    mlp = h * i + i + i * h + h                      # fc1, fc2
    total = front + l * (attn + mlp + 2 * 2 * h) + 2 * h    # layer_norm1, layer_norm2; the last layer_norm
    assert diarization.config_params == [total, total]


def test_stacked_frames_by_hand_at_the_first_probe(diarization):
    """The frames the layers run at the first probe: ⌈T/8⌉ (FeatureStacking pads ``-T % 8`` rows), and the
    projection's forward FLOPs 2·b·⌈T/8⌉·8·mel·h within FlopCounterMode's total."""
    c = diarization.checks[0]
    v = c.values
    b, h, a, i, l, mel, frames = (v[n] for n in ("b", "h", "a", "i", "l", "mel", "T"))
    s = (frames + (-frames % 8)) // 8
    d = h // a
    layer = 2 * b * s * h * (4 * h) + 2 * 2 * b * a * s * s * d + 2 * 2 * b * s * h * i
    assert 2 * b * s * 8 * mel * h + l * layer == c.forward_flops_torch == c.forward_flops_draft


def test_draft_exact_at_both_probes(encoder):
    assert STEM[1] in encoder.text and CONV in encoder.text
    assert_exact(encoder, STEM[0])


def _frames(n: int) -> int:
    """NemotronAsrStreamingEncoderCausalConv2D.output_length (offline): ⌊(n + (k − 1) + (stride − 1) − k)/stride⌋ + 1
    at kernel 3, stride 2."""
    return (n + 2 + 1 - 3) // 2 + 1


def test_parameters_by_hand_at_the_default_config(encoder):
    """``sum(p.numel())`` of NemotronAsrStreamingEncoder at NemotronAsrStreamingEncoderConfig's defaults
    (configuration_nemotron_asr_streaming.py: h 1024, 8 heads, i 4096, 24 layers, 256 stem channels, 80 Mel bins,
    conv_kernel_size 9, biases on), by hand from modeling_nemotron_asr_streaming.py's ``__init__``s: the stem's Linear
    reads ``subsampling_out_hidden_size`` = C · 11 (80 → 41 → 21 → 11 bins: the causal padding keeps one bin more a
    step than Parakeet's 80 → 40 → 20 → 10); the draft's count at the config's own sizes and PyTorch's equal it."""
    h, a, i, l, ch, mel, k = 1024, 8, 4096, 24, 256, 80, 9
    bins = _frames(_frames(_frames(mel)))
    assert bins == 11
    stem = (ch * 9 + ch) + 2 * (ch * 9 + ch) + 2 * (ch * ch + ch) + (ch * bins * h + h)
    ffn = h * i + i + i * h + h                                   # NemotronAsrStreamingEncoderFeedForward
    attn = 4 * (h * h + h) + h * h + 2 * a * (h // a)             # q, k, v, o; relative_k_proj; bias_u, bias_v
    conv = (h * 2 * h + 2 * h) + (h * k + h) + 2 * h + (h * h + h)   # pointwise_conv1, causal depthwise, LayerNorm, pw2
    norms = 5 * 2 * h                                             # the block's five LayerNorms
    total = stem + l * (2 * ffn + attn + conv + norms)
    assert total == 608_011_264
    assert encoder.config_params == [total, total]


def test_forward_flops_by_hand_at_the_first_probe(encoder):
    """FlopCounterMode's forward FLOPs at the first probe, by hand from modeling_nemotron_asr_streaming.py (2 FLOPs a
    multiply-add; biases and elementwise work not counted): the stem's causal convolutions over the padded frames and
    bins (``_frames`` each), its Linear; per block the feed-forwards, the attention with relative positions (as
    Parakeet's: q, o 2·b·s·h², k, v 2·b·s·h·kv·d, relative_k_proj over 2s − 1 offsets, matrix_bd, scores, product
    with v; the chunked-limited mask only masks scores computed whole), the convolution module (pointwise 2h, causal
    depthwise 9, pointwise h)."""
    c = encoder.checks[0]
    v = c.values
    b, h, a, kv, i, l, mel, ch, frames = (v[n] for n in ("b", "h", "a", "kv", "i", "l", "mel", "C_s", "T"))
    d = h // a
    f1, m1 = _frames(frames), _frames(mel)
    f2, m2 = _frames(f1), _frames(m1)
    s, m3 = _frames(f2), _frames(m2)
    stem = 2 * b * ch * 9 * f1 * m1 + 2 * b * ch * (9 + ch) * f2 * m2 + 2 * b * ch * (9 + ch) * s * m3 \
        + 2 * b * s * ch * m3 * h
    ffn = 2 * (2 * 2 * b * s * h * i)
    attn = 2 * 2 * b * s * h * h + 2 * 2 * b * s * h * kv * d + 2 * b * (2 * s - 1) * h * h \
        + 2 * b * a * s * d * (2 * s - 1) + 2 * 2 * b * a * s * s * d
    conv = 2 * b * s * h * 2 * h + 2 * b * s * h * 9 + 2 * b * s * h * h
    assert stem + l * (ffn + attn + conv) == c.forward_flops_torch == c.forward_flops_draft
