"""``costgraph import`` (issue 28 item 1) of mixture-of-experts families, exact against PyTorch
(tests/draft_checks.py: at both probes, and at the config against the torch agreement tier).

Mixtral and Qwen3-MoE (std ``moe``; Qwen3's QK-norm), DeepSeek-V3 (std ``mla``, a dense first layer, ``shared_moe``
with the router's ``e_score_correction_bias`` buffer), Qwen2-MoE (a shared expert scaled by
``sigmoid(shared_expert_gate(x))``: a block the draft defines), Phi-MoE (transformers 5.24's ``sparsemixer`` routes
every token to two experts whatever ``num_experts_per_tok``), Laguna (a softplus gate per attention head: a block the
draft defines), HunYuan-MoE (its router inside the gate, ``shared_mlp``), Aria (experts stored [E, H, 2w], its shared
experts as one wider MLP), gpt-oss (clamped SwiGLU experts with biases: std ``clamped_moe``, which models/gpt_oss.cg
calls too), AFMoE (attention gated per channel by ``sigmoid(gate_proj(x))``: a block the draft defines; the routing
bias ``expert_bias`` a parameter held by the MoE block), A.X-K1 (DeepSeek-V3's MoE normalising its own output with
``post_mlp_layernorm``).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import DENSE, TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    "mixtral": dict(model_type="mixtral", **DENSE, num_key_value_heads=2, intermediate_size=96,
                    num_local_experts=4, num_experts_per_tok=2, **TOK),
    "qwen3_moe": dict(model_type="qwen3_moe", **DENSE, num_key_value_heads=2, head_dim=16, intermediate_size=96,
                      moe_intermediate_size=32, num_experts=8, num_experts_per_tok=2, **TOK),
    # multi-head latent attention, one dense layer then shared + routed experts (e_score_correction_bias a buffer)
    "deepseek_v3": dict(model_type="deepseek_v3", hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                        q_lora_rank=32, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
                        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=16, intermediate_size=96,
                        first_k_dense_replace=1, num_hidden_layers=3, n_group=1, topk_group=1, vocab_size=128,
                        max_position_embeddings=64, **TOK),
    # routed experts and a shared expert scaled by sigmoid(shared_expert_gate(x))
    "qwen2_moe": dict(model_type="qwen2_moe", **DENSE, num_key_value_heads=2, intermediate_size=96,
                      moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts=4,
                      num_experts_per_tok=2, **TOK),
    # Phi-MoE: sparsemixer routes every token to two experts whatever num_experts_per_tok (3 here: torch runs 2)
    "phimoe": dict(model_type="phimoe", **DENSE, num_key_value_heads=2, intermediate_size=32, num_local_experts=4,
                   num_experts_per_tok=3, **TOK),
    # Laguna (transformers 5.24 modeling_laguna.py): attention with a softplus gate per head (g_proj H → a) and QK-norm,
    # a dense first layer, then routed experts with a shared expert
    "laguna": dict(model_type="laguna", **DENSE, num_key_value_heads=2, head_dim=16, intermediate_size=96,
                   moe_intermediate_size=32, shared_expert_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                   **TOK),
    # HunYuan-MoE (modeling_hunyuan_v1_moe.py): the router's weight in its gate's child wg, the shared expert shared_mlp
    "hunyuan_v1_moe": dict(model_type="hunyuan_v1_moe", **DENSE, num_key_value_heads=2, head_dim=16,
                           intermediate_size=32, num_experts=4, moe_topk=2, **TOK),
    # Aria's text model (modeling_aria.py): experts [E, H, 2w] and [E, w, H], moe_topk, and moe_num_shared_experts
    # shared experts as one MLP that many times as wide
    "aria_text": dict(model_type="aria_text", **DENSE, num_key_value_heads=2, intermediate_size=32, moe_num_experts=4,
                      moe_topk=2, moe_num_shared_experts=2, **TOK),
    # gpt-oss (modeling_gpt_oss.py GptOssMLP): a router with bias, experts of fused gate_up_proj [E, H, 2i] and
    # down_proj [E, i, H] with biases, the clamped SwiGLU ((up + 1) · gate · σ(α · gate), both clamped): std
    # clamped_moe; attention with sinks, sliding and full layers in turn
    "gpt_oss": dict(model_type="gpt_oss", **DENSE, num_key_value_heads=2, head_dim=16, intermediate_size=32,
                    num_local_experts=4, num_experts_per_tok=2, sliding_window=32, **TOK),
    # AFMoE (transformers 5.24 modeling_afmoe.py): output-gated attention with QK-norm, a dense first layer, then
    # routed experts behind a sigmoid router whose bias expert_bias [E] (an nn.Parameter) the MoE block holds
    "afmoe": dict(model_type="afmoe", **DENSE, num_key_value_heads=2, head_dim=16, intermediate_size=96,
                  moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, num_shared_experts=1,
                  num_dense_layers=1, **TOK),
    # A.X-K1 (modeling_axk1.py AXK1MoE): DeepSeek-V3's MLA and MoE, the MoE's output through post_mlp_layernorm
    "axk1": dict(model_type="axk1", hidden_size=64, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32,
                 kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, n_routed_experts=4,
                 num_experts_per_tok=2, moe_intermediate_size=16, intermediate_size=96, first_k_dense_replace=1,
                 num_hidden_layers=3, n_group=1, topk_group=1, vocab_size=128, max_position_embeddings=64, **TOK),
}
#: what each draft must say: the std blocks and structure recognised (the rest is checked by numbers)
EXPECTED = {
    "gpt_oss": "x = x + clamped_moe(rmsnorm(x, name = post_attention_layernorm), E, k, i, name = mlp)",
    "mixtral": "x = x + moe(rmsnorm(x, name = post_attention_layernorm), E, k, i, name = mlp)",
    "qwen3_moe": "x = x + moe(rmsnorm(x, name = post_attention_layernorm), E, k, m, name = mlp)",
    "deepseek_v3": "x = x + mla(rmsnorm(x, name = input_layernorm), a, r_q, r_kv, d_n, d_r, d_v, name = self_attn)",
    "qwen2_moe": "x = x + gated_shared_moe(rmsnorm(x, name = post_attention_layernorm), E, k, m, i_s, name = mlp)",
    "phimoe": "x = x + moe(layernorm(x, name = post_attention_layernorm), E, 2, i, name = mlp)",
    "laguna": "x = x + head_gated_attention(rmsnorm(x, name = input_layernorm), a, kv, d, name = self_attn)",
    "hunyuan_v1_moe": "shared_moe(rmsnorm(x, name = post_attention_layernorm), E, k, i, i, correction_bias = false, "
                      "name = mlp)",
    "aria_text": "shared_moe(rmsnorm(x, name = post_attention_layernorm), E, k, i, i * n_s, correction_bias = false, "
                 "name = mlp)",
    "afmoe": "x = x + rmsnorm(output_gated_attention(rmsnorm(x, name = input_layernorm), a, kv, d,",
    "axk1": "x = x + rmsnorm(shared_moe(rmsnorm(x, name = post_attention_layernorm), E, k, m, m, correction_bias = true, "
            "name = mlp), name = post_mlp_layernorm)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_minimax_m3_clamped_shared_moe_draft_is_exact():
    """MiniMax-M3's text model (transformers 5.24 modeling_minimax_m3_vl.py ``MiniMaxM3VLSparseMoeBlock``): a sigmoid
    router with the ``e_score_correction_bias`` buffer, experts of gpt-oss's clamped SwiGLU without biases
    (``MiniMaxM3VLExperts._apply_gate``: "same as GPT OSS, but the weights are not interleaved") and a clamped shared
    expert (``MiniMaxM3VLDenseMLP``): std ``clamped_shared_moe``. Its default config (the layers' MLP kinds and the
    sparse attention's blocks are no small config's), exact at both probes."""
    from costgraph.drafting.api import draft_model
    from draft_checks import assert_exact

    d = draft_model("minimax_m3_vl_text")
    assert_exact(d, "clamped_shared_moe(rmsnorm(x, name = post_attention_layernorm), E, k, i, i_s, name = mlp)")
