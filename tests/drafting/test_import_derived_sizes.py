"""``costgraph import`` (issue 28 item 2) of families whose config derives a size the probes cannot tell from a product
of fields, exact against PyTorch (tests/draft_checks.py: at both probes, and at the config against the torch agreement
tier, where the config's own sizes differ from the probes' in the way that matters).

GLM-4.5 (transformers 5.24 modeling_glm4_moe.py ``Glm4MoeAttention``: head size ``hidden_size // num_attention_heads``
when the config has no head_dim): a quotient the config's own sizes do not divide is written ``floor(h / a)`` (the
probes' sizes always divide). LFM2 (modeling_lfm2.py ``Lfm2MLP``: the MLP width ``int(2 · intermediate_size / 3)``
rounded up to a multiple of ``block_multiple_of``): 256 at both probes, read from the config's fields. RoCBERT
(modeling_roc_bert.py ``RoCBertEmbeddings`` with ``concat_input``): the shape and pronunciation tables concatenated
with the token embedding, then ``map_inputs_layer`` back to h, before the token-type and position embeddings. Moshi's
text decoder (modeling_moshi.py ``MoshiModel``: ``embed_tokens`` of ``vocab_size + 1`` rows, written ``V + 1`` and not
the product of the probe's primes it happens to equal; ``MoshiGatingMLP``: ``fc1`` of ``ffn_dim`` columns viewed as
gate and value halves, ``fc2`` from ``ffn_dim // 2``, a SwiGLU of width ``i / 2``; every projection a ``MoshiLinear``
around one ``nn.Linear``).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import DENSE, TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    # 64 // 3 = 21: a head size the probes' sizes (h a multiple of a) cannot tell from h / a; a dense first layer
    "glm4_moe": dict(model_type="glm4_moe", **{**DENSE, "num_attention_heads": 3}, num_key_value_heads=1,
                     first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                     intermediate_size=96, n_group=1, topk_group=1, **TOK),
    # block_auto_adjust_ff_dim with a multiplier of 1: int(2 · 600 / 3) = 400 rounded up to 512 at the config
    "lfm2": dict(model_type="lfm2", **DENSE, num_key_value_heads=2, intermediate_size=600, **TOK),
    "roc_bert": dict(model_type="roc_bert", **DENSE, intermediate_size=96, shape_vocab_size=40, shape_embed_dim=24,
                     pronunciation_vocab_size=30, pronunciation_embed_dim=20, is_decoder=True, pad_token_id=0),
    # ffn_dim even (the config's validator): the SwiGLU's width i / 2 = 48
    "moshi": dict(model_type="moshi", **DENSE, num_key_value_heads=2, head_dim=16, ffn_dim=96, **TOK),
}
EXPECTED = {
    "glm4_moe": "x = x + gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, floor(h / a), name = self_attn)",
    "lfm2": "swiglu(rmsnorm(x, name = ffn_norm), 256 * ceil(floor(2 * i / 3) / 256), name = feed_forward)",
    "moshi": "  x = embedding(tokens, V + 1, h, name = embed_tokens)\n  repeat l as layers {\n"
             "    x = x + gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, d, name = self_attn)\n"
             "    x = x + swiglu(rmsnorm(x, name = post_attention_layernorm), i / 2, name = mlp)",
    "roc_bert": "x = linear(concat(concat(embedding(tokens, V, h, name = word_embeddings), embedding(shape_embed_ids, "
                "V_sh, d_sh, name = shape_embed)), embedding(pronunciation_embed_ids, V_pr, d_pr, name = "
                "pronunciation_embed)), h, bias = true, name = map_inputs_layer) + embedding(",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)
