"""Issue 29 item 4: the MTP/draft model's memory in the serving capacity
(:func:`costgraph.inference.speculative.draft_memory`, :func:`~costgraph.inference.speculative.with_draft`),
as vLLM holds it: the drafter's weights loaded beside the target's (an MTP drafter's embedding and
head shared with the target: vllm/v1/spec_decode/eagle.py ``EagleProposer._maybe_share_embeddings``
"Detected MTP model. Sharing target model embedding weights with the draft model" and
``_maybe_share_lm_head``), and its attention layers in the KV cache beside the target's
(``EagleProposer.load_model``: the draft's layers are every ``AttentionLayerBase`` less the
target's; ``get_kv_cache_spec`` takes them all)."""

from __future__ import annotations

import pytest

from costgraph.inference import infer, load

# DeepSeek-V3 config.json (deepseek-ai/DeepSeek-V3): hidden_size 7168, q_lora_rank 1536,
# num_attention_heads 128, qk_nope_head_dim 128, qk_rope_head_dim 64, kv_lora_rank 512,
# v_head_dim 128, n_routed_experts 256, moe_intermediate_size 2048, n_shared_experts 1,
# num_nextn_predict_layers 1
H, RQ, A, DN, DR, RKV, DV, E, IE, IS = 7168, 1536, 128, 128, 64, 512, 128, 256, 2048, 2048


def mtp_layer_params() -> int:
    """The tensors of model.layers.61 (the MTP layer) besides its embed_tokens and shared_head.head
    (shared with the target by vLLM), as vLLM's DeepSeekMultiTokenPredictorLayer and
    DeepseekV2DecoderLayer create them."""
    mla = (H * RQ + RQ + RQ * A * (DN + DR)         # q_a_proj, q_a_layernorm, q_b_proj
           + H * (RKV + DR) + RKV                   # kv_a_proj_with_mqa, kv_a_layernorm
           + RKV * A * (DN + DV) + A * DV * H)      # kv_b_proj, o_proj
    moe = E * H + E * 3 * H * IE + 3 * H * IS       # gate, routed experts, shared expert (the fp32 bias apart)
    return mla + moe + 2 * H * H + 5 * H            # eh_proj; enorm, hnorm, 2 layer norms, shared_head.norm


@pytest.fixture(scope="module")
def deepseek():
    plain, mtp = load("deepseek_v3"), load("deepseek_v3", options={"mtp": True})
    rep = infer(plain, hardware="h200", prompt=1024, generate=256, batch=1, values=plain.values("deepseek-v3"),
                speculative_tokens=1, acceptance="0.8", draft=mtp, draft_values=mtp.values("deepseek-v3"),
                draft_mtp=True)
    return rep


def test_mtp_draft_weights_are_its_own_layer(deepseek):
    sp = deepseek.serving["speculative"]
    q = {k: v for k, (_, v) in sp["quantities"].items()}
    # bf16, TP 1: 2 bytes a parameter, and the gate's e_score_correction_bias in fp32 (vLLM
    # deepseek_v2.py: nn.Parameter(torch.empty(n_routed_experts, dtype=torch.float32))): 256 x 4
    assert mtp_layer_params() == 11_610_067_968
    assert q["draft_weight_bytes"] == 2 * mtp_layer_params() + 4 * E == 23_220_136_960


def test_mtp_draft_kv_cache_is_one_more_mla_layer(deepseek):
    """vLLM's MLA spec (vllm/v1/kv_cache_interface.py::MLAAttentionSpec, page = block · head_size ·
    dtype bytes, head_size = kv_lora_rank + qk_rope_head_dim = 576): the MTP layer adds 576 bf16
    values a cached token, for P + G = 1,280 positions (80 blocks of 16)."""
    sp = deepseek.serving["speculative"]
    q = {k: v for k, (_, v) in sp["quantities"].items()}
    assert q["draft_kv_cache_bytes"] == 1_280 * (RKV + DR) * 2 == 1_474_560
    assert deepseek.values["kv_cache_bytes_per_token"] == 61 * (RKV + DR) * 2   # the target's 61 layers
    assert q["memory_bytes_with_draft"] == deepseek.values["memory_bytes"] + q["draft_weight_bytes"] + \
        q["draft_kv_cache_bytes"]
    # 671B in bf16 does not fit one H200 with or without its draft
    assert (sp["fits_with_draft"], sp["max_batch_with_draft"]) == (False, None)


def test_separate_draft_counts_all_its_weights_and_layers():
    llama = load("llama")
    v, d = llama.values("llama-3-70b"), llama.values("llama-3-8b")
    rep = infer(llama, hardware="h200", prompt=512, generate=128, batch=4, values=v, t=8, speculative_tokens=4,
                acceptance="0.8", draft=llama, draft_values=d)
    sp = rep.serving["speculative"]
    q = {k: val for k, (_, val) in sp["quantities"].items()}
    # Llama-3-8B under TP 8, bf16: 8,030,261,248 parameters (meta-llama/Meta-Llama-3-8B), the
    # vocabulary-parallel embedding and head and every linear split 8 ways, the norms replicated
    # (2 x 32 x 4096 + 4096 per rank); KV: 32 layers x 1 K/V head a rank x 128 x 2 (K, V) x 2 bytes
    norms = (2 * 32 + 1) * 4096
    assert q["draft_weight_bytes"] == 2 * ((8_030_261_248 - norms) // 8 + norms)
    assert q["draft_kv_cache_bytes"] == 4 * 640 * 32 * 1 * 128 * 2 * 2
    assert sp["fits_with_draft"] is True
    assert sp["max_batch_with_draft"] < rep.values["max_batch"]
