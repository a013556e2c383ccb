"""``costgraph import`` (issue 28 items 2 and 3) of speech encoders from raw audio (``input_values``, the wav2vec2
family): traced from ``[b, samples]``, exact against PyTorch at both probes (tests/draft_checks.py ``assert_exact``),
the frames after the feature encoder a nested floor of the samples.

transformers 5.24 modeling_wav2vec2.py: ``Wav2Vec2FeatureEncoder`` (seven ``Conv1d`` of ``conv_dim`` channels,
``conv_kernel`` (10, 3, 3, 3, 3, 2, 2), ``conv_stride`` (5, 2, 2, 2, 2, 2, 2), no bias; a ``GroupNorm(512, 512)`` after
the first; GELU), ``Wav2Vec2FeatureProjection`` (LayerNorm(512), Linear(512, h)), ``Wav2Vec2PositionalConvEmbedding``
(``Conv1d(h, h, 128, padding=64, groups=16)`` under weight norm: ``original0 [1, 1, 128]``, ``original1
[h, h/16, 128]``, the bias; ``Wav2Vec2SamePadLayer`` drops the last frame), ``Wav2Vec2Encoder`` (LayerNorm, post-norm
layers: attention h → h ×4 with biases, ``Wav2Vec2FeedForward`` h → i → h), ``Wav2Vec2Model.masked_spec_embed [h]``.
The draft: drafting/audio.py (front end), drafting/inputs_audio.py (the ``input_values`` forward), drafting/probe.py
(``G_c``, ``K_c``, the samples ``16·L``), drafting/speech_attention.py (WavLM's attention).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from costgraph.drafting.probe import Probe  # noqa: E402
from costgraph.engine.symbols import dim  # noqa: E402
from draft_checks import Drafts, assert_exact  # noqa: E402  (tests/ on sys.path)

#: transformers' class names: the base model (AutoModel's) of each type, at its default config
drafted = Drafts({"wav2vec2": "Wav2Vec2Model", "data2vec-audio": "Data2VecAudioModel", "wavlm": "WavLMModel",
                  "hubert": "HubertModel", "sew": "SEWModel", "wav2vec2-conformer": "Wav2Vec2ConformerModel",
                  "audio-spectrogram-transformer": "ASTModel"})

FRONT = ("  dim s = floor((f6 - 2) / 2) + 1 \"frames after the feature encoder's convolution 7 (PyTorch Conv1d: "
         "floor((n - k) / stride) + 1)\"\n\n"
         "  input audio[b, 1, L]   # input_values [b, L] as the feature encoder reads it (input_values[:, None])\n\n")
WEIGHT_NORM = ("  p = dense_conv1d(transpose(x), h, kernel = K_c, padding = floor(K_c / 2), groups = G_c, bias = true, "
               "name = pos_conv)   # [b, h, s + 1] where K_c is even\n"
               "  param pos_conv_weight_g[1, 1, K_c]")
EXPECTED = {
    "wav2vec2": FRONT + "  x = gelu(group_norm(dense_conv1d(audio, 512, kernel = 10, stride = 5, bias = false, "
                        "name = feature_conv0), groups = 512, name = feature_norm0))\n",
    "hubert": WEIGHT_NORM,
    # modeling_data2vec_audio.py Data2VecAudioPositionalConvLayer: no weight norm, a LayerNorm without weights, five
    # layers (num_conv_pos_embeddings) of width conv_pos_kernel_size; Data2VecAudioConvLayer: a LayerNorm per conv
    "data2vec-audio": "  repeat 5 as pos_conv_layers {   # num_conv_pos_embeddings layers (the config's number)\n"
                      "    p = dense_conv1d(p, h, kernel = K_c, padding = floor(K_c / 2), groups = G_c, bias = true, "
                      "name = conv)\n",
    # modeling_sew.py SEWEncoder.forward: pos_conv_embed (stride squeeze_factor 2) and pool (AvgPool1d(2, 2)) of the
    # frames, both cut to min_length (the pooled count); 13 convolutions (conv_layers never taken for the layers)
    "sew": "  dim s = floor(f13 / 2) \"frames the layers run: pooled by squeeze_factor 2 (AvgPool1d; the positional "
           "conv of stride 2 makes at least as many)\"\n",
    # modeling_wav2vec2_conformer.py Wav2Vec2ConformerEncoderLayer.forward: ffn1 * 0.5 + residual, attention with
    # relative positions (linear_pos on the [1, 2s - 1, h] table), the convolution module, ffn2 * 0.5, final_layer_norm;
    # Wav2Vec2ConformerEncoder builds pos_conv_embed and never calls it (position_embeddings_type "relative")
    "wav2vec2-conformer": "  param pos_conv_weight_v[h, h / G_c, K_c]\n  param pos_conv_bias[h]\n"
                          "  param masked_spec_embed[h]   # read only with mask_time_indices or in training (parameters "
                          "only)\n  repeat l as layers {\n"
                          "    x = x + scale(mlp(layernorm(x, name = ffn1_layer_norm), i, bias = true, dropout = true, "
                          "name = ffn1))   # x 0.5: a half step\n"
                          "    x = x + rel_pos_attention(layernorm(x, name = self_attn_layer_norm), pe, a, "
                          "name = self_attn)\n    x = x + conformer_conv(x, 31, 15, name = conv_module)\n",
    # modeling_audio_spectrogram_transformer.py ASTEmbeddings.get_shape: (128 - 16) // 10 + 1 = 12 frequency by
    # (1024 - 16) // 10 + 1 = 101 time patches, the position table n + 2 rows; ASTPatchEmbeddings' Conv2d(1, h, 16,
    # stride=(10, 10))
    "audio-spectrogram-transformer":
        "  dim n = (floor((128 - 16) / 10) + 1) * (floor((1024 - 16) / 10) + 1) \"patches: frequency by time "
        "(num_mel_bins 128, max_length 1024, patch 16, stride 10: the config's)\"\n"
        "  dim s = n + 2 \"sequence length: the patches, the class and distillation tokens\"\n\n"
        "  input spectrogram[b, 1, 128, 1024]",
    # modeling_wavlm.py WavLMEncoder: has_relative_position_bias=(i == 0): the bias table in the first layer alone
    "wavlm": "  repeat 1 as layers_0 {   # layers 0..0\n"
             "    x = layernorm(x + wavlm_attention(x, a, nb, table = true, name = attention), name = layer_norm)\n",
}


@pytest.mark.parametrize("family", sorted(EXPECTED))
def test_draft_exact_at_both_probes(family):
    assert_exact(drafted(family), EXPECTED[family])


def test_probe_groups_divide_the_hidden_size():
    """The positional convolution groups h (``Conv1d(h, h, groups=G_c)``: 'in_channels must be divisible by groups'
    before): h holds G_c's prime at both probes, G_c and K_c differ between the probes."""
    present = ["hidden_size", "num_attention_heads", "num_conv_pos_embedding_groups", "num_conv_pos_embeddings"]
    probes = [Probe.make(present, i) for i in (0, 1)]
    values = [p.symbol_values() for p in probes]
    for v in values:
        assert v["h"] % v["G_c"] == 0 and (v["h"] // v["G_c"]) % v["a"] == 0
    assert values[0]["G_c"] != values[1]["G_c"] and values[0]["K_c"] != values[1]["K_c"]
    assert [p.s for p in probes] == [16 * 733, 16 * 739]      # samples of raw audio, not tokens


def _base_params(h=768, a=12, i=3072, l=12, groups=16, width=128) -> int:
    """wav2vec2-base's parameters by hand from modeling_wav2vec2.py (above): the feature encoder (conv0 512·1·10, its
    GroupNorm 2·512, four convs 512·512·3, two 512·512·2), the projection (LayerNorm 2·512, Linear 512·h + h), the
    positional conv (weight_v h·(h/groups)·width, weight_g width, bias h), masked_spec_embed h, the encoder's
    LayerNorm 2h, and per layer four h → h projections with biases, two LayerNorms and the feed-forward h → i → h."""
    features = 512 * 10 + 2 * 512 + 4 * 512 * 512 * 3 + 2 * 512 * 512 * 2
    projection = 2 * 512 + 512 * h + h
    positional = h * (h // groups) * width + width + h
    layer = 4 * (h * h + h) + 2 * 2 * h + (h * i + i) + (i * h + h)
    return features + projection + positional + h + 2 * h + l * layer


def test_conformer_flops_by_hand():
    """wav2vec2-conformer's layers by hand at each probe (modeling_wav2vec2_conformer.py, above): per layer two
    feed-forwards (2 · 2·b·s·h·i each), q, k, v, out (4 · 2·b·s·h²), linear_pos on the 2s − 1 relative positions of
    one table (2·(2s − 1)·h², batch 1), the scores a + c (2·b·a·s²·(h/a)), b + d (2·b·a·s·(2s − 1)·(h/a)), the weighted
    values (2·b·a·s²·(h/a)), the convolution module (pointwise h → 2h: 2·b·s·2h·h; depthwise: 2·b·s·h·31; pointwise
    h → h: 2·b·s·h²); the front end (feature encoder, projection) as wav2vec2's: the difference of the two drafts'
    counts is the layers' alone (wav2vec2 at the same probe: its post-norm layers and its positional convolution)."""
    conf, base = drafted("wav2vec2-conformer"), drafted("wav2vec2")
    for c, w in zip(conf.checks, base.checks):
        v = c.values
        b, h, a, i, l, groups, width = (v[k] for k in ("b", "h", "a", "i", "l", "G_c", "K_c"))
        assert w.values == v
        s = (v["L"] - 400) // 320 + 1        # wav2vec2's receptive field 400 samples, hop 320: 36, 37 frames
        conformer = 2 * 2 * 2 * b * s * h * i + 4 * 2 * b * s * h * h + 2 * (2 * s - 1) * h * h \
            + 2 * 2 * b * s * s * h + 2 * b * s * (2 * s - 1) * h + 2 * b * s * 2 * h * h + 2 * b * s * h * 31 \
            + 2 * b * s * h * h
        post_norm = 2 * 2 * b * s * h * i + 4 * 2 * b * s * h * h + 2 * 2 * b * s * s * h
        positional = 2 * b * (s + 1 - width % 2) * h * (h // groups) * width     # s + 1 frames where the width is even
        assert c.forward_flops_torch - w.forward_flops_torch == l * (conformer - post_norm) - positional


def test_ast_patches_counted_by_hand():
    """AST's patch convolution at each probe: 12 · 101 = 1212 overlapping patches of 16 × 16 (one channel), 2·b·n·256·h
    FLOPs; the layers ViT's over s = 1214 positions (4 · 2·b·s·h², 2 · 2·b·a·s²·(h/a), 2 · 2·b·s·h·i); no pooler."""
    for c in drafted("audio-spectrogram-transformer").checks:
        b, h, a, i, l = (c.values[k] for k in ("b", "h", "a", "i", "l"))
        n, s = 12 * 101, 12 * 101 + 2
        layer = 4 * 2 * b * s * h * h + 2 * 2 * b * a * s * s * (h // a) + 2 * 2 * b * s * h * i
        assert c.forward_flops_torch == 2 * b * n * 256 * h + l * layer


def test_wav2vec2_base_counted_by_hand():
    d = drafted("wav2vec2")
    assert _base_params() == 94_371_712     # facebook/wav2vec2-base: 94.4 M parameters
    assert d.config_params == [94_371_712, 94_371_712]


@pytest.mark.parametrize("samples", [16000, 12345])
def test_frames_and_flops_at_the_config_against_pytorch(samples):
    """At wav2vec2-base's own sizes and a sample count L: the frames are the nested floor of L (16000 samples: 49
    frames, 20 ms apart; 12345: 38), and the draft's forward FLOPs equal FlopCounterMode's of the model built from the
    default config on the meta device."""
    from costgraph.torch_measure import flop_counter, meta_forward

    d = drafted("wav2vec2")
    m = costgraph.loads(d.text, path="<wav2vec2>", config="imported")
    values = {str(k): int(v) for k, v in m.values("imported", b=2, L=samples).items()}
    frames = samples
    for k, stride in zip((10, 3, 3, 3, 3, 2, 2), (5, 2, 2, 2, 2, 2, 2)):
        frames = (frames - k) // stride + 1
    assert frames == {16000: 49, 12345: 38}[samples]
    out = m.graph.tensors[m.graph.nodes["feature_conv6"]["outputs"][0]].shape[-1]     # [b, 512, s]
    assert int(out.subs(dim("L"), samples)) == frames
    got = m.costs("model", convention="matmul").evaluate(None, values)
    with torch.device("meta"):
        model = transformers.Wav2Vec2Model._from_config(transformers.Wav2Vec2Config(), attn_implementation="eager",
                                                        dtype=torch.bfloat16).eval()
    counter = flop_counter()
    with torch.no_grad(), meta_forward(), counter:
        model(input_values=torch.zeros((2, samples), dtype=torch.bfloat16, device="meta"))
    assert int(got["flops_forward"]) == int(counter.get_total_flops())


def test_wav2vec2_large_lv60_form_exact():
    """wav2vec2-large-lv60's form (its config.json: ``feat_extract_norm`` "layer", ``conv_bias`` true,
    ``do_stable_layer_norm`` true): a LayerNorm over the channels after every convolution
    (modeling_wav2vec2.py ``Wav2Vec2LayerNormConvLayer``), pre-norm layers (``Wav2Vec2EncoderLayerStableLayerNorm``)
    and the encoder's LayerNorm after them (``Wav2Vec2EncoderStableLayerNorm``); exact at both probes and at its own
    sizes (315,438,720 parameters: h 1024, 16 heads, i 4096, 24 layers). Through ``_draft``: a config dict drafts the
    causal mapping's class, this one the base model's."""
    from costgraph.drafting import api

    cfg = {"model_type": "wav2vec2", "do_stable_layer_norm": True, "feat_extract_norm": "layer", "conv_bias": True,
           "hidden_size": 1024, "num_attention_heads": 16, "intermediate_size": 4096, "num_hidden_layers": 24}
    d = api._draft(api._require(), cfg, "Wav2Vec2Model", None, True)
    assert_exact(d, "  x = gelu(transpose(layernorm(transpose(dense_conv1d(audio, 512, kernel = 10, stride = 5, "
                    "bias = true, name = feature_conv0)), name = feature_norm0)))\n")
    assert "  }\n  x = layernorm(x, name = layer_norm)\n  return x\n" in d.text
    assert d.config_params == [315_438_720, 315_438_720]
