"""``costgraph import`` (issue 28 item 2, task k28text13) of text encoders no std block read before: ALBERT (one layer
instance called by every layer, its factorised embedding width), I-BERT (quantisation observers around BERT's layer),
GTE (a gated MLP whose down projection alone has a bias), ESM C (a LayerNorm over the whole Q and K projections), LUKE
(its entity tables and entity-aware queries, parameters only), MarkupLM (its xpath embeddings), UltraBERT, UltraVBERT
and the OpenAI privacy filter (a sliding window of the config's ``sliding_window`` + 1): exact against PyTorch
(``sum(p.numel())``, ``FlopCounterMode``) at both probes and at the config's own sizes.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from costgraph.drafting.api import draft_model  # noqa: E402

#: the transformers class drafted → a line its draft must hold (the form recognised)
CASES = {
    "AlbertModel": "    repeat l - 1 as albert_calls {\n      x = albert_layer(x, a, h / a, i, reuse = albert_layer, "
                   "name = again)\n",
    # transformers 5.24 ibert/quant_modules.py: QuantAct observers (no parameter) left out, IntLayerNorm a LayerNorm
    "IBertModel": "    x = layernorm(x + dropout(mlp(x, i, bias = true, dropout = false, name = mlp), name = output_dropout), "
                  "name = output_LayerNorm)\n",
    "GteModel": "    x = layernorm(x + gated_mlp_down_bias(x, i, name = mlp), name = post_mlp_layernorm)\n",
    "EsmcModel": "ln_proj_norm_attention(",
    # transformers 5.24 modeling_ultrabert.py UltrabertAttention: ``config.sliding_window + 1``
    "UltrabertModel": "window = W + 1, name = self_attn)",
    "UltraVBertModel": "window = W + 1, name = self_attn)",
    # modeling_openai_privacy_filter.py OpenAIPrivacyFilterAttention: ``config.sliding_window + 1``
    "OpenAIPrivacyFilterModel": "window = W + 1, name = self_attn)",
    # LUKE's entity-aware queries (modeling_luke.py LukeSelfAttention), uncalled by a forward of token ids alone
    "LukeModel": "  param attention_self_e2e_query_weight[h, h]\n",
    # MarkupLM's xpath stream (modeling_markuplm.py XPathEmbeddings.forward: 50 depths concatenated, then 4h → h)
    "MarkupLMModel": "  u = concat(u, embedding(xpath_subs_49, 1024, 32, name = xpath_subs_49_table))\n",
}


@pytest.fixture(scope="module")
def drafts():
    """Each class drafted once for the module's tests."""
    return {cls: draft_model(cls) for cls in CASES}


@pytest.mark.parametrize("cls", sorted(CASES))
def test_draft_exact_at_both_probes(drafts, cls):
    d = drafts[cls]
    assert d.todos == [] and d.confirmed, d.warnings
    assert len(d.checks) == 2 and d.checks[0].values != d.checks[1].values
    for c in d.checks:
        assert (c.params_draft, c.forward_flops_draft) == (c.params_torch, c.forward_flops_torch), c
    assert d.config_params[0] == d.config_params[1]
    assert d.exact
    assert CASES[cls] in d.text, d.text


def test_albert_counted_by_hand(drafts):
    """ALBERT's parameters and forward FLOPs counted from the source (transformers 5.24 modeling_albert.py):
    ``AlbertEmbeddings.__init__`` (word [V, E], position [s_max, E], token type [2, E] tables, LayerNorm(E));
    ``AlbertTransformer.__init__`` (``embedding_hidden_mapping_in`` E → h, ``albert_layer_groups``: one
    ``AlbertLayerGroup`` of one ``AlbertLayer`` at num_hidden_groups = inner_group_num = 1) and ``forward``
    (``for i in range(self.config.num_hidden_layers)``: the group called l times: weights once, FLOPs l times);
    ``AlbertLayer.__init__`` (``AlbertAttention``: query, key, value, dense h → h with biases, its LayerNorm; ffn
    h → i, ffn_output i → h, ``full_layer_layer_norm``); ``AlbertModel.__init__``'s pooler h → h on the first token."""
    d = drafts["AlbertModel"]
    cfg = transformers.AlbertConfig()
    h, i, V, E, P = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.embedding_size, \
        cfg.max_position_embeddings
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    params = (V + P + cfg.type_vocab_size) * E + 2 * E + (E * h + h) + layer + (h * h + h)
    assert cfg.num_hidden_groups == cfg.inner_group_num == 1
    assert d.config_params == [params, params]     # PyTorch's at the config, the draft's: the layer counted once
    for c in d.checks:     # forward FLOPs at each probe: 2 per multiply-add, the layer l times
        v = c.values
        b, s, h, i, a, E, l = v["b"], v["s"], v["h"], v["i"], v["a"], v["d_emb"], v["l"]
        assert h % a == 0
        per_call = 2 * b * s * (4 * h * h + 2 * h * i) + 2 * 2 * b * s * s * h      # projections, QK^T and PV
        assert c.forward_flops_torch == 2 * b * s * E * h + l * per_call + 2 * b * h * h


def test_fsmt_forward_runs_with_the_decoder_mask():
    """FSMT's forward asks ``decoder_input_ids`` whether any is padding (transformers 5.24 modeling_fsmt.py
    ``make_padding_mask``: ``if not padding_mask.any()``), which a meta tensor cannot answer; with
    ``decoder_attention_mask`` given (drafting/inputs_text.py) ``invert_mask`` reads it instead and the forward runs."""
    from costgraph.drafting.inputs_text import text_inputs

    cfg = transformers.FSMTConfig(langs=["en", "de"], src_vocab_size=11, tgt_vocab_size=13, d_model=16,
                                  encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                  decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                                  max_position_embeddings=32)
    with torch.device("meta"):
        model = transformers.FSMTModel(cfg)
    inputs = text_inputs(torch, model, 2, 5, 7)
    assert inputs["decoder_attention_mask"].shape == (2, 7) and inputs["decoder_input_ids"].shape == (2, 7)
    with torch.no_grad():
        out = model(**inputs)
    assert out.last_hidden_state.shape == (2, 7, 13)     # FSMTDecoder's output_projection: tgt_vocab_size
    with pytest.raises(RuntimeError, match="meta"):     # the same forward without the mask
        with torch.no_grad():
            model(**{k: v for k, v in inputs.items() if k != "decoder_attention_mask"})
    assert text_inputs(torch, torch.nn.Linear(2, 2), 2, 5, 7) is None     # any other model: another branch's inputs


def test_bidirectional_encoders_cache_nothing(drafts):
    """ESM C's and ALBERT's attention (transformers 5.24 EsmcAttention.is_causal = False, AlbertAttention's): no
    causal mask and no K/V cache in the draft (a cache would give derive KV-cache bytes and infer a decode phase)."""
    for cls in ("EsmcModel", "AlbertModel"):
        text = drafts[cls].text
        assert "cache(" not in text and "causal = false" in text and "causal = true" not in text, cls
