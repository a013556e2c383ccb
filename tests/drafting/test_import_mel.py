"""``costgraph import`` (issue 28 item 2) of Whisper-like speech encoders over a log-Mel spectrogram: traced from
``input_features [b, num_mel_bins, frames]``, exact against PyTorch at both probes (tests/draft_checks.py
``assert_exact``).

transformers 5.24 modeling_qwen2_audio.py ``Qwen2AudioEncoder``: ``conv1 = nn.Conv1d(num_mel_bins, d_model,
kernel_size=3, padding=1)``, ``conv2 = nn.Conv1d(d_model, d_model, kernel_size=3, stride=2, padding=1)``; ``forward``
checks ``input_features.shape[-1] == max_source_positions · 2``, runs ``gelu(conv1)``, ``gelu(conv2)``,
``permute(0, 2, 1)``, adds ``embed_positions.weight`` (``nn.Embedding(max_source_positions, d_model)``,
``requires_grad_(False)``) whole, the ``encoder_layers`` pre-LayerNorm layers (``Qwen2AudioAttention``: q, v, out
projections with biases, k without; ``fc1``/``fc2`` with biases), ``avg_pooler = nn.AvgPool1d(2, stride=2)`` over the
positions, the final ``layer_norm``. Voxtral's (modeling_voxtral.py ``VoxtralEncoder``) is the same without the
pool; AudioFlamingo 3's (modeling_audioflamingo3.py) with it and a frames mask; GLM-ASR's (modeling_glmasr.py
``GlmAsrEncoder``) has no table (rotary positions) and takes any number of frames: its layers run ``⌊(s − 1)/2⌋ + 1``
positions of ``s`` frames (PyTorch's Conv1d output length). The draft: drafting/inputs_mel.py (the spectrogram),
drafting/mel_front.py (the stem, the table, the pool), drafting/probe.py (num_mel_bins, max_source_positions).
"""

from __future__ import annotations

import pytest
import sympy

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

#: transformers' class names: the base model (AutoModel's) of each type, at its default config
drafted = Drafts({"qwen2_audio_encoder": "Qwen2AudioEncoder", "voxtral_encoder": "VoxtralEncoder",
                  "audioflamingo3_encoder": "AudioFlamingo3Encoder", "glmasr_encoder": "GlmAsrEncoder",
                  "moss_transcribe_diarize_audio": "MossTranscribeDiarizeAudioModel"})

STEM = ("  x = gelu(dense_conv1d(features, h, kernel = 3, padding = 1, name = conv1))\n"
        "  x = gelu(dense_conv1d(x, h, kernel = 3, stride = 2, padding = 1, name = conv2))\n"
        "  x = transpose(x)   # [b, positions, h]\n")
TABLE = ("  param embed_positions[se, h]: frozen   # read whole: the frames are 2 per row\n"
         "  x = x + embed_positions\n")
FRAMES = '  dim s = 2 * se "spectrogram frames: the stem\'s output adds the position table whole"\n\n' \
         "  input features[b, mel, s]\n\n"
POOL = "  x = transpose(avg_pool1d(transpose(x), kernel = 2))   # [b, positions / 2, h]\n  x = layernorm(x, name = layer_norm)"

EXPECTED = {
    "qwen2_audio_encoder": FRAMES + STEM + TABLE + "  repeat l as layers {",
    "voxtral_encoder": FRAMES + STEM + TABLE,
    "audioflamingo3_encoder": FRAMES + STEM + TABLE,
    # modeling_moss_transcribe_diarize.py MossTranscribeDiarizeAudioModel: a Whisper encoder (stem, table, pre-LN layers)
    "moss_transcribe_diarize_audio": FRAMES + STEM + TABLE,
    # modeling_glmasr.py GlmAsrEncoder.forward: no table; the frames are the input's length s
    "glmasr_encoder": "  input features[b, mel, s]\n\n" + STEM + "  repeat l as layers {",
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def test_the_pool_is_drafted_where_the_forward_runs_it():
    """Qwen2-Audio's and AudioFlamingo 3's forwards pool the layers' output (``self.avg_pooler``); Voxtral's builds
    the same ``avg_pooler`` and never calls it (modeling_voxtral.py ``VoxtralEncoder.forward``)."""
    assert POOL in drafted("qwen2_audio_encoder").text
    assert POOL in drafted("audioflamingo3_encoder").text
    assert "avg_pool1d" not in drafted("voxtral_encoder").text


def test_qwen2_audio_counted_by_hand_from_the_transformers_source():
    """By hand at each probe (modeling_qwen2_audio.py, above), F = 2·se frames: conv1 2·b·h·(mel·3)·F FLOPs (padding 1
    keeps F), conv2 2·b·h·(h·3)·se (stride 2: ⌊(F + 2 − 3)/2⌋ + 1 = se); per layer q, k, v, out (4 · 2·b·se·h²), the
    scores and the weighted values (2 · 2·b·a·se²·(h/a)), fc1 and fc2 (2 · 2·b·se·h·i); the pool and the norms no
    matrix FLOPs. Parameters: conv1 mel·3·h + h, conv2 3h² + h, the table se·h; per layer q, v, out with biases and k
    without (4h² + 3h), fc1 and fc2 (2hi + i + h), two LayerNorms (4h); the final LayerNorm (2h)."""
    d = drafted("qwen2_audio_encoder")
    for c in d.checks:
        b, h, a, i, l, mel, se = (c.values[k] for k in ("b", "h", "a", "i", "l", "mel", "se"))
        f = 2 * se
        stem = 2 * b * h * (mel * 3) * f + 2 * b * h * (h * 3) * se
        layer = 4 * 2 * b * se * h * h + 2 * 2 * b * a * se * se * (h // a) + 2 * 2 * b * se * h * i
        assert c.forward_flops_torch == stem + l * layer
        params = (mel * 3 * h + h) + (3 * h * h + h) + se * h + l * (4 * h * h + 3 * h + 2 * h * i + i + h + 4 * h) \
            + 2 * h
        assert c.params_torch == params


def test_glmasr_runs_the_floor_of_half_the_frames():
    """GLM-ASR's probes run an odd number of frames (809, 863: k28feat12's primes): conv2 (kernel 3, stride 2, padding
    1) gives PyTorch's ⌊(s + 2 − 3)/2⌋ + 1 = (s + 1)/2 positions, which the draft derives the same way; conv1 keeps s."""
    d = drafted("glmasr_encoder")
    assert [c.values["s"] for c in d.checks] == [809, 863]
    for c in d.checks:
        b, h, mel, s = (c.values[k] for k in ("b", "h", "mel", "s"))
        n = (s + 2 - 3) // 2 + 1
        assert n == (s + 1) // 2
        m = costgraph.loads(d.text, path="<glmasr>")
        got = m.costs("model", convention="matmul").evaluate(None, {**c.values})
        assert int(got["flops_forward"]) == c.forward_flops_torch
        conv2 = m.graph.tensors[m.graph.nodes["conv2"]["outputs"][0]].shape[-1]
        subs = {sympy.Symbol("s", positive=True, integer=True): s}
        assert int(sympy.sympify(conv2).xreplace(subs)) == n


@pytest.mark.parametrize("length", [810, 811])
def test_avg_pool1d_length_and_flops_as_pytorch(length):
    """``avg_pool1d`` against ``nn.AvgPool1d(2, stride=2)`` on meta (torch.nn.AvgPool1d docs: L_out = ⌊(L − k)/s⌋ + 1,
    an odd L drops its last position): the same output length, and no matrix FLOPs (FlopCounterMode counts none)."""
    from torch.utils.flop_counter import FlopCounterMode

    x = torch.zeros((2, 5, length), device="meta")
    counter = FlopCounterMode(display=False)
    with counter:
        y = torch.nn.AvgPool1d(2, stride=2)(x)
    text = "model m {\n  dim b\n  dim c\n  dim L\n  input x[b, c, L]\n  return avg_pool1d(x, kernel = 2)\n}\n"
    m = costgraph.loads(text, path="m.cg")
    out = m.graph.tensors[m.graph.outputs[0]].shape[-1]
    subs = {sympy.Symbol("L", positive=True, integer=True): length}
    assert int(sympy.sympify(out).xreplace(subs)) == y.shape[-1] == (length - 2) // 2 + 1
    got = m.costs("model", convention="matmul").evaluate(None, {"b": 2, "c": 5, "L": length})
    assert int(got["flops_forward"]) == counter.get_total_flops() == 0


@pytest.mark.parametrize("family", ["qwen2_audio_encoder", "glmasr_encoder"])
def test_parameters_at_the_config_own_sizes(family):
    """The draft at the default config's own values (``config imported``: Qwen2-Audio's d_model 1280, 32 layers, 128 Mel
    bins, 1500 positions; s derived as 2·se, or given) against ``sum(p.numel())`` of the model transformers builds
    from that config on meta (api._check_at_config): Qwen2-Audio's encoder holds 636,968,960 (measured: transformers
    5.24 ``Qwen2AudioEncoder._from_config(AutoConfig.for_model("qwen2_audio_encoder"))`` on meta)."""
    d = drafted(family)
    torch_count, draft_count = d.config_params
    assert torch_count == draft_count
    if family == "qwen2_audio_encoder":
        assert draft_count == 636_968_960
