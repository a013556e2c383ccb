"""``costgraph import`` (issue 28 item 2) of T5's and M2M-100's encoder-decoders, fed decoder inputs, of the text
models of a multimodal RoPE, probed with their sections rescaled, and of DistilBERT and MPNet: exact against PyTorch at both
probes.

T5 (transformers 5.24 modeling_t5.py ``T5Model.forward``): the encoder runs on ``input_ids`` [b, s], the decoder on
``decoder_input_ids`` [b, t] (drafting/inputs_seq2seq.py: t = 911, 919 at the probes), each decoder block's
``EncDecAttention`` reading the encoder's s outputs. The drafts of ``T5Model`` and ``MT5Model`` (their default
configs, drafted by class: a config dict drafts the causal LM) are compared with ``sum(p.numel())`` and
``FlopCounterMode`` at both probes (drafting/api.py ``_draft``: ``Check``).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from costgraph.drafting.api import draft_model  # noqa: E402
from costgraph.drafting.probe import mrope_sections  # noqa: E402

#: the transformers class drafted → what its draft must say (the stacks, the cross-attention, the MLP's form)
CASES = {
    "T5Model": "    x = x + t5_attention(rmsnorm(x, name = cross_layer_norm), enc, a, d, name = EncDecAttention)\n"
               "    x = x + relu_mlp(rmsnorm(x, name = ff_layer_norm), i, bias = false, name = DenseReluDense)\n",
    # MT5's gated-GELU feed-forward (T5DenseGatedActDense: wi_0, wi_1, wo; T5LayerFF names it DenseReluDense)
    "MT5Model": "    x = x + geglu(rmsnorm(x, name = ff_layer_norm), i, name = DenseReluDense)\n",
    # UMT5's table in every block (UMT5Attention: has_relative_attention_bias always), its bias computed per block
    "UMT5Model": "  repeat l as encoder {   # UMT5Block\n    enc_bias = relative_position_bias(s, s, nb, a, ",
    # M2M-100's pre-norm BART-like layers (M2M100EncoderLayer, M2M100DecoderLayer: biases, ReLU), the scaled table
    "M2M100Model": "    x = x + bart_attention(layernorm(x, name = encoder_attn_layer_norm), enc, a, h / a, "
                   "name = encoder_attn)\n",
    # DistilBERT's post-norm encoder layers: attention by q_lin, k_lin, v_lin, out_lin and n_heads (transformers 5.24
    # modeling_distilbert.py DistilBertSelfAttention), its FFN width hidden_dim probed as i
    "DistilBertModel": "    x = layernorm(x + mlp(x, i, bias = true, dropout = true, name = ffn), name = output_layer_norm)\n",
    # MPNet's attention (MPNetAttention: attn's q, k, v, o and a LayerNorm) read in BERT's form, its pooler on the first
    # token alone (MPNetPooler: hidden_states[:, 0])
    "MPNetModel": "  x = select(x)   # the class token\n  x = linear(x, h, bias = true, name = dense)\n",
    # Qwen2-VL's and GLM-4V's text models: mrope_section [16, 24, 24] and [8, 12, 12] rescaled to the probe's head
    "Qwen2VLTextModel": "repeat l as layers {",
    "Glm4vTextModel": "repeat l as layers {",
}

_DRAFTS: dict = {}


def drafted(cls: str):
    if cls not in _DRAFTS:
        _DRAFTS[cls] = draft_model(cls)
    return _DRAFTS[cls]


@pytest.mark.parametrize("cls", sorted(CASES))
def test_draft_exact_at_both_probes(cls):
    d = drafted(cls)
    assert d.todos == [] and d.confirmed, d.warnings
    assert len(d.checks) == 2
    for c in d.checks:
        assert (c.params_draft, c.forward_flops_draft) == (c.params_torch, c.forward_flops_torch), c
    assert CASES[cls] in d.text
    assert d.exact


def test_t5_counts_by_hand_at_both_probes():
    """By hand from transformers 5.24 modeling_t5.py at each probe (b, s, t, h, a, d, i, l, V, nb): ``shared`` [V, h];
    each encoder block a ``T5LayerSelfAttention`` (q, k, v: h → a·d, o back, no bias) and a ``T5LayerFF``
    (``wi`` h → i, ``wo`` back), each after a ``T5LayerNorm`` [h]; each decoder block also a ``T5LayerCrossAttention``
    and its norm; the first block of each stack a ``relative_attention_bias`` [nb, a] (``T5Stack.__init__``:
    ``has_relative_attention_bias=bool(i == 0)``); a final norm per stack. FLOPs (FlopCounterMode: 2mkn a product):
    the encoder's projections over s positions, its scores and weighted values over s² pairs; the decoder's self-
    attention over t positions and t² pairs, its cross-attention's q and o over t, k and v over the encoder's s,
    its products over t·s pairs; no FLOPs of the lookups."""
    d = drafted("T5Model")
    assert "dim t" in d.text and "input decoder_tokens[b, t]: index" in d.text
    assert d.mapping["nb"] == "relative_attention_num_buckets" and d.values["nb"] == 32
    for c in d.checks:
        v = c.values
        b, s, t, h, a, dh, i, l, V, nb = (v[k] for k in ("b", "s", "t", "h", "a", "d", "i", "l", "V", "nb"))
        assert t != s
        enc = l * (4 * h * a * dh + 2 * h * i + 2 * h) + nb * a + h
        dec = l * (8 * h * a * dh + 2 * h * i + 3 * h) + nb * a + h
        assert c.params_torch == V * h + enc + dec
        enc_f = l * (4 * 2 * b * s * h * a * dh + 2 * 2 * b * a * s * s * dh + 2 * 2 * b * s * h * i)
        dec_f = l * (4 * 2 * b * t * h * a * dh + 2 * 2 * b * a * t * t * dh          # self-attention
                     + 2 * 2 * b * t * h * a * dh + 2 * 2 * b * s * h * a * dh       # cross: q, o over t; k, v over s
                     + 2 * 2 * b * a * t * s * dh + 2 * 2 * b * t * h * i)
        assert c.forward_flops_torch == enc_f + dec_f


def test_mrope_sections_keep_the_config_proportions():
    """The probe's sections sum to the rotary half-width (transformers 5.24 modeling_qwen2_vl.py
    ``Qwen2VLRotaryEmbedding.recomposition_frequencies``: ``freq.split(self.mrope_section, dim=-1)`` over inv_freq's
    head_dim / 2 columns): 340 · (16, 24, 24) / 64 = (85, 127.5, 127.5), the one unit left to the first of the equal
    remainders; already whole, or no list: unchanged (None)."""
    assert mrope_sections([16, 24, 24], 340) == [85, 128, 127]
    assert mrope_sections([8, 12, 12], 170) == [42, 64, 64]      # 42.5, 63.75, 63.75: the two largest remainders
    assert mrope_sections([16, 24, 24], 64) is None
    assert mrope_sections(None, 64) is None and mrope_sections([0, 2, 2], 8) is None
