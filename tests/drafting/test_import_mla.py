"""``costgraph import`` (issue 28) of multi-head latent attention beyond std ``mla``, exact against PyTorch
(tests/draft_checks.py: at both probes, and at the config against the torch agreement tier).

DeepSeek-V3.2 (transformers 5.24 modeling_deepseek_v32.py ``DeepseekV32Attention``: MLA plus the lightning indexer
``wq_b``, ``wk``, ``k_norm``, ``weights_proj``; std ``dsa.cg``'s ``mla_dsa``, the dense masked square eager attention
computes), and MLA with a full-rank query projection and rotary (``q_lora_rank`` None: DeepSeek-V3's attention as
Sarvam's MLA builds it, modeling_sarvam_mla.py; models/deepseek_v2.cg's ``mla_full_q``, a block the draft defines).
A.X-K2 (modeling_axk2.py ``AXK2Attention``: the query and a sigmoid gate per head from one ``q_gate_proj`` over the query
latent beside its norm, DSA's indexer; ``AXK2GatedRMSNorm``: an RMSNorm gated by a low-rank SiLU MLP of
``gated_norm_rank``): the draft's ``gated_mla_dsa`` and ``gated_rmsnorm``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

_MLA = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=4, kv_lora_rank=16, qk_nope_head_dim=8,
            qk_rope_head_dim=8, v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
            intermediate_size=96, first_k_dense_replace=1, num_hidden_layers=3, n_group=1, topk_group=1,
            vocab_size=128, max_position_embeddings=64, **TOK)
CASES = {
    # the indexer's head (index_head_dim) at least the rotary part it splits off; index_topk 16 below the s = 24
    # compared: eager attention computes the whole masked square all the same (the kept keys chosen by a mask)
    "deepseek_v32": dict(model_type="deepseek_v32", **_MLA, q_lora_rank=32, index_n_heads=2, index_head_dim=16,
                         index_topk=16),
    "sarvam_mla": dict(model_type="sarvam_mla", **_MLA, q_lora_rank=None),
    "axk2": dict(model_type="axk2", **_MLA, q_lora_rank=32, index_n_heads=2, index_head_dim=16, index_topk=16,
                 gated_norm_rank=8),
}
EXPECTED = {
    "deepseek_v32": "x = x + mla_dsa(rmsnorm(x, name = input_layernorm), a, r_q, r_kv, d_n, d_r, d_v, hi, di, t_k, "
                    "name = self_attn)",
    "sarvam_mla": "x = x + mla_full_q(rmsnorm(x, name = input_layernorm), a, r_kv, d_n, d_r, d_v, name = self_attn)",
    "axk2": "x = x + gated_mla_dsa(gated_rmsnorm(x, r_g, name = input_layernorm), a, r_q, r_kv, d_n, d_r, d_v, hi, di, "
            "t_k, name = self_attn)\n    x = x + shared_moe(gated_rmsnorm(x, r_g, name = post_attention_layernorm), E, k, "
            "m, m, correction_bias = true, name = mlp)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)
