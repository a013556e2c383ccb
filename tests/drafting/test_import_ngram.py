"""``costgraph import`` (issue 28 item 2) of ProphetNet's causal LM (Qi et al. 2020, arXiv:2001.04063 §2.2;
transformers 5.24 modeling_prophetnet.py ``ProphetNetForCausalLM``: the decoder alone), exact against PyTorch
(tests/draft_checks.py: at both probes, and at the config against the torch agreement tier): the decoder runs
``ngram`` predicting streams after the main stream (``ProphetNetDecoder.forward``: ``ngram_embeddings.weight[j]`` plus
the position table at ``position_ids + 1``, concatenated along the sequence), its n-gram self-attention
(``ProphetNetNgramSelfAttention``: the main stream attends to itself, each predicting stream to the main stream's
keys and its own; relative position logits H -> num_buckets·heads) a block the draft defines, its feed-forward
(``ProphetNetFeedForward``: ``intermediate``, ``output``) std ``mlp``, and the head reads the predicting streams
alone (``ProphetNetForCausalLM.forward``: ``self.lm_head(outputs[1])``). ``ngram`` and ``num_buckets`` are probed
(n_g, nb).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    "prophetnet": dict(model_type="prophetnet", hidden_size=64, num_encoder_attention_heads=4,
                       num_decoder_attention_heads=4, num_encoder_layers=2, num_decoder_layers=2, encoder_ffn_dim=96,
                       decoder_ffn_dim=96, vocab_size=128, max_position_embeddings=64, ngram=3, num_buckets=8, **TOK),
}
EXPECTED = {
    "prophetnet": "  x = concat_seq(x, merge_seq(xp))\n  x = layernorm(x, name = embeddings_layer_norm)\n"
                  "  repeat l as layers {\n"
                  "    x = layernorm(x + ngram_attention(x, a, n_g, nb, s, name = self_attn), "
                  "name = self_attn_layer_norm)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_the_head_reads_the_predicting_streams_alone():
    """lm_head's FLOPs at the config: 2·b·(ngram·s)·h·V (ProphetNetForCausalLM.forward:
    ``self.lm_head(outputs[1])``, the ngram predicting streams of s tokens each, not the main stream)."""
    import costgraph

    m = costgraph.loads(drafted("prophetnet").text, path="<prophetnet>", config="imported")
    values = {str(k): int(v) for k, v in m.values("imported", b=2, s=24).items()}
    head = m.costs("lm_head", convention="matmul").evaluate(None, values)
    assert int(head["flops_forward"]) == 2 * 2 * (3 * 24) * 64 * 128
