"""``costgraph import`` (issue 28 item 2, task k28text2) of FSMT (transformers 5.24 modeling_fsmt.py ``FSMTModel``):
an encoder-decoder of BART's post-norm layers whose two stacks each hold a token table of their own (``V_src`` =
``src_vocab_size``, ``V`` = ``tgt_vocab_size``), sinusoidal position tables of ``max_position_embeddings +
pad_token_id + 1`` rows and the decoder's ``output_projection`` inside the base model: exact against PyTorch
(``sum(p.numel())`` as built, ``FlopCounterMode``) at both probes and at the config's own sizes.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from costgraph.drafting.api import draft_model  # noqa: E402


@pytest.fixture(scope="module")
def fsmt():
    """FSMT's default config drafted once for the module's tests."""
    return draft_model("fsmt")


def test_fsmt_exact_at_both_probes(fsmt):
    d = fsmt
    assert d.todos == [] and d.confirmed, d.warnings
    assert len(d.checks) == 2 and d.checks[0].values != d.checks[1].values
    for c in d.checks:
        assert (c.params_draft, c.forward_flops_draft) == (c.params_torch, c.forward_flops_torch), c
        assert c.values["V_src"] != c.values["V"]     # two vocabularies, two symbols
    assert d.config_params[0] == d.config_params[1]
    assert d.exact
    assert "  x = embedding(tokens, V_src, h, name = encoder_embed_tokens)\n" in d.text
    assert "  x = x + embedding(decoder_positions, s_max + 2, h, name = decoder_embed_positions)\n" in d.text
    assert "  return linear(x, V, bias = false, name = output_projection)" in d.text


def test_fsmt_counted_by_hand(fsmt):
    """FSMT's parameters at its default config and forward FLOPs at each probe, counted from the source (transformers
    5.24 modeling_fsmt.py): ``FSMTEncoder.__init__`` (``embed_tokens = nn.Embedding(config.src_vocab_size,
    config.d_model, ...)``, ``embed_positions = SinusoidalPositionalEmbedding(config.max_position_embeddings +
    self.padding_idx + 1, embed_dim, ...)``, ``encoder_layers`` ``EncoderLayer``: ``Attention`` q, k, v, out h → h with
    biases, ``self_attn_layer_norm``, fc1 h → encoder_ffn_dim, fc2 back, ``final_layer_norm``);
    ``FSMTDecoder.__init__`` (its own ``nn.Embedding(config.tgt_vocab_size, ...)``, its sinusoidal table, ``DecoderLayer``
    adding ``encoder_attn`` and its norm, ``output_projection = nn.Linear(config.d_model, config.tgt_vocab_size,
    bias=False)``, untied at ``tie_word_embeddings`` False) and ``FSMTDecoder.forward`` (``x =
    self.output_projection(x)``: the base model's output is logits)."""
    cfg = transformers.FSMTConfig()
    assert not cfg.tie_word_embeddings and cfg.encoder_layers == cfg.decoder_layers
    h, P = cfg.d_model, cfg.max_position_embeddings + cfg.pad_token_id + 1
    attn, norm = 4 * (h * h + h), 2 * h
    enc = attn + norm + (h * cfg.encoder_ffn_dim + cfg.encoder_ffn_dim) + (cfg.encoder_ffn_dim * h + h) + norm
    dec = 2 * attn + 2 * norm + (h * cfg.decoder_ffn_dim + cfg.decoder_ffn_dim) + (cfg.decoder_ffn_dim * h + h) + norm
    params = (cfg.src_vocab_size + P) * h + cfg.encoder_layers * enc \
        + (cfg.tgt_vocab_size + P) * h + cfg.decoder_layers * dec + h * cfg.tgt_vocab_size
    assert fsmt.config_params == [params, params]
    for c in fsmt.checks:     # 2 FLOPs per multiply-add; eager attention: every (query, key) pair
        b, s, t, h, i, l, V = (c.values[k] for k in ("b", "s", "t", "h", "i", "l", "V"))
        enc = 2 * b * s * 4 * h * h + 2 * 2 * b * s * s * h + 2 * 2 * b * s * h * i
        dec = 2 * b * t * 4 * h * h + 2 * 2 * b * t * t * h \
            + 2 * b * t * 2 * h * h + 2 * b * s * 2 * h * h + 2 * 2 * b * t * s * h + 2 * 2 * b * t * h * i
        assert c.forward_flops_torch == l * (enc + dec) + 2 * b * t * h * V


def test_fsmt_parameters_as_built(fsmt):
    """FSMT's forward remakes a sinusoidal table longer than its rows (modeling_fsmt.py
    ``SinusoidalPositionalEmbedding.forward``: ``if max_pos > self.weight.size(0)``, ``make_weight``): the probe's
    decoder length t is above its s_max, so that counted after the forward the parameters would grow by (t + pad + 1 −
    rows)·h; the drafter counts them as built (drafting/api.py ``_draft_once``)."""
    for c in fsmt.checks:
        assert c.values["t"] > c.values["s_max"]
        h, rows = c.values["h"], c.values["s_max"] + transformers.FSMTConfig().pad_token_id + 1
        tables = (c.values["V_src"] + rows + c.values["V"] + rows) * h + h * c.values["V"]
        assert c.params_torch - tables == c.params_draft - tables > 0     # the layers alike, the tables as built
