"""``costgraph import`` (issue 28 item 1) of state-space and recurrent families, exact against PyTorch
(tests/draft_checks.py: at both probes, and at the config against the torch agreement tier).

Mamba and FalconMamba (the mixer as models/mamba.cg's, FalconMamba's weightless norms on Δ, B and C); RecurrentGemma
(Griffin's recurrent block with the RG-LRU; block_types folded into ``repeat l as layers[j]`` with ``j % 3``
conditions; the MLP of intermediate_size // 2); Mamba-2, Falcon-H1 and Granite 4 hybrid (the Mamba-2 mixer with the
SSD scan's chunked torch path; Falcon-H1's parallel Mamba and attention on one norm; Granite's shared MLP of
``input_linear``); Jamba (attention and experts every 2nd layer: a period fold); Nemotron-H (the config's fixed list
of layer kinds folded with index lists; squared-ReLU experts without gate); Zamba2 (its fixed list of layer kinds;
one shared transformer block called by every hybrid layer, ``reuse =``, with each call's own adapters). The decode state is checked against
transformers' ``DynamicCache`` after a prefill.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from costgraph import torch_measure  # noqa: E402
from draft_checks import DENSE, TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    # Mamba's mixer; FalconMamba's with weightless RMSNorms on Δ, B and C
    "mamba": dict(model_type="mamba", hidden_size=64, state_size=8, num_hidden_layers=2, vocab_size=128, expand=2,
                  conv_kernel=4, time_step_rank=8, **TOK),
    "falcon_mamba": dict(model_type="falcon_mamba", hidden_size=64, state_size=8, num_hidden_layers=2, vocab_size=128,
                         expand=2, conv_kernel=4, time_step_rank=8, **TOK),
    # 5 layers of block_types (recurrent, recurrent, attention) repeated: 4 recurrent blocks, 1 attention
    "recurrent_gemma": dict(model_type="recurrent_gemma", hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                            head_dim=16, lru_width=48, conv1d_width=4, num_hidden_layers=5, intermediate_size=96,
                            vocab_size=128, **TOK),
    # Mamba-2 mixers (transformers' Mamba2Mixer and the hybrids' copies): the SSD scan's chunked torch path is what
    # FlopCounterMode counts, chunk 8 below s = 24 (three chunks); groups of B and C dividing the heads
    "mamba2": dict(model_type="mamba2", hidden_size=64, num_heads=8, head_dim=16, expand=2, n_groups=2, state_size=8,
                   conv_kernel=4, chunk_size=8, num_hidden_layers=2, vocab_size=128, **TOK),
    # Falcon-H1: Mamba-2 (d_ssm of its own, no norm) and attention in parallel on one norm, µP multipliers
    "falcon_h1": dict(model_type="falcon_h1", **DENSE, num_key_value_heads=2, intermediate_size=96, mamba_d_ssm=64,
                      mamba_n_heads=8, mamba_d_head=8, mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4,
                      mamba_chunk_size=8, **TOK),
    # Granite 4 hybrid: Mamba-2 layers and attention by layer_types, experts plus a shared MLP (input_linear of 2·i_s)
    "granitemoehybrid": dict(model_type="granitemoehybrid", **DENSE, num_key_value_heads=2, intermediate_size=32,
                             shared_intermediate_size=48, num_local_experts=4, num_experts_per_tok=2, mamba_n_heads=8,
                             mamba_n_groups=1, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=8,
                             layer_types=["mamba", "mamba"], **TOK),
    # Jamba: attention every 2nd layer from 1 and experts every 2nd from 0 of 4 (a period the probe's 17 layers fold)
    "jamba": dict(model_type="jamba", **DENSE, num_key_value_heads=2, intermediate_size=96, num_experts=4,
                  num_experts_per_tok=2, attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2,
                  expert_layer_offset=0, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=8,
                  use_mamba_kernels=False, **TOK),
    # Nemotron-H: the config's fixed list of layer kinds (hybrid_override_pattern: Mamba-2, MoE, attention, MLP,
    # MoE) folded with index lists; squared-ReLU experts without gate behind a sigmoid router plus a shared expert
    "nemotron_h": dict(model_type="nemotron_h", hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                       head_dim=16, intermediate_size=96, n_routed_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, moe_shared_expert_intermediate_size=48, mamba_num_heads=8,
                       mamba_head_dim=16, n_groups=2, ssm_state_size=8, conv_kernel=4, chunk_size=8,
                       hybrid_override_pattern="ME*-E", vocab_size=128, max_position_embeddings=64, **TOK),
}
# Zamba2 (transformers 5.24 modeling_zamba2.py): Mamba-2 layers and, at the hybrid layers of its fixed list, one
# shared transformer block (num_mem_blocks 1: the later calls' weights tied to the first's) over [x, embeddings],
# each call with LoRA adapters of its own on Q, K, V and gate_up_proj, then a linear of its own into the Mamba-2 layer
CASES["zamba2"] = dict(model_type="zamba2", hidden_size=64, num_attention_heads=4, num_hidden_layers=6,
                       layers_block_type=["mamba", "hybrid", "mamba", "hybrid", "mamba", "hybrid"], mamba_d_state=16,
                       n_mamba_heads=8, chunk_size=16, use_shared_attention_adapter=True, adapter_rank=8,
                       use_mem_rope=True, intermediate_size=96, vocab_size=128, max_position_embeddings=64, **TOK)
#: what each draft must say: the std blocks and structure recognised (the rest is checked by numbers)
EXPECTED = {
    "zamba2": "  emb = x     # the embeddings' output, which every shared transformer call reads again\n  repeat 6 as "
              "layers[j] {   # the config's list of 6 layers\n    if j in [1] {\n      t = linear(zamba2_shared(x, emb, "
              "a, a, i, r_a, attn_adapters = true, rotary = true, name = shared_transformer_at1), h, bias = false, name = "
              "linear_at1)\n      x = x + mamba2_mixer(rmsnorm(x + t, name = input_layernorm_at1), h * e, hm, ng, N, K, "
              "chunk = C, name = mamba_at1)\n    } else {\n      if j in [3, 5] {\n        t = linear(zamba2_shared(x, "
              "emb, a, a, i, r_a, attn_adapters = true, rotary = true, reuse = shared_transformer_at1, name = "
              "shared_transformer_at3)",
    "mamba": "x = x + mamba_mixer(rmsnorm(x, name = norm), i, N, R, K, name = mixer)",
    "falcon_mamba": "x = x + mamba_mixer(rmsnorm(x, name = norm), i, N, R, K, inner_norms = true, norm_weight = false, "
                    "name = mixer)",
    "recurrent_gemma": "  if j % 3 == 2 {\n      x = x + gqa_attention(rmsnorm(x, name = temporal_pre_norm_at2), a, kv, d, "
                       "out_bias = true, window = W, name = temporal_block_at2)\n      x = x + geglu(rmsnorm(x, name = "
                       "channel_pre_norm_at2), floor(i / 2), bias = true, name = mlp_block_at2)\n    } else {\n"
                       "      x = x + griffin_recurrent(rmsnorm(x, name = temporal_pre_norm), w, a, K, name = temporal_block)",
    "mamba2": "x = x + mamba2_mixer(rmsnorm(x, name = norm), h * e, hm, ng, N, K, chunk = C, name = mixer)",
    "falcon_h1": "y1 = rmsnorm(x, name = input_layernorm)\n    x = x\n        + mamba2_mixer(y1, di, hm, ng, N, K, chunk = C, "
                 "norm = false, name = mamba)\n        + gqa_attention(y1, a, kv, h / a, name = self_attn)",
    "granitemoehybrid": "x = x + moe(y1, E, k, i, name = block_sparse_moe) + swiglu(y1, i_s, name = shared_mlp)",
    "jamba": "repeat l as layers[j] {   # layer j drafted as layer j % 2: a pattern of period 2\n    if j % 2 == 1 {\n"
             "      x = x + gqa_attention(rmsnorm(x, name = input_layernorm_at1), a, kv, h / a, rotary = false, "
             "name = self_attn_at1)",
    "nemotron_h": "repeat 5 as layers[j] {   # the config's list of 5 layers\n    if j in [3] {\n      x = x + "
                  "relu2_mlp(rmsnorm(x, name = norm_at3), i, name = mixer_at3)\n    } else {\n      if j in [2] {\n"
                  "        x = x + gqa_attention(rmsnorm(x, name = norm_at2), a, kv, d, rotary = false, name = mixer_at2)"
                  "\n      } else {\n        if j in [0] {\n          x = x + mamba2_mixer(rmsnorm(x, name = norm_at0), "
                  "hm * dm, hm, ng, N, K, chunk = C, name = mixer_at0)\n        } else {\n          x = x + relu2_moe("
                  "rmsnorm(x, name = norm), E, k, m, i_s, name = mixer)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_recurrent_gemma_draft_keeps_the_recurrent_state_per_sequence():
    """transformers 5.24 ``RecurrentGemmaRecurrentBlock._setup_cache``: the RG-LRU's ``recurrent_states``
    ``[b, lru_width]`` in fp32 per recurrent block (with the convolution's state), whatever s; the
    attention blocks' K and V per token (MQA: kv = 1)."""
    d = drafted("recurrent_gemma")
    m = costgraph.loads(d.text, path="<recurrent_gemma>", config="imported")
    c = m.costs("model")
    one, long = (c.evaluate("imported", b=2, s=s) for s in (16, 1024))
    recurrent, attention = 4, 1                      # of 5 layers, j % 3 == 2 (layer 2) is attention
    state = long["kv_cache_bytes"] - long["kv_cache_bytes_per_token"] * 2 * 1024
    assert state == one["kv_cache_bytes"] - one["kv_cache_bytes_per_token"] * 2 * 16
    assert state == recurrent * 2 * (48 * 4 + 48 * 4 * 2)      # fp32 [b, w] and the conv's [b, w, K] in bf16
    assert long["kv_cache_bytes_per_token"] == attention * 2 * 16 * 1 * 2


def _state_bytes(model, b: int, s: int) -> int:
    """Bytes of the recurrent layers' ``conv_states`` and ``recurrent_states`` of transformers' ``DynamicCache``
    after a ``[b, s]`` prefill on meta (cache_utils.py ``LinearAttentionLayer``)."""
    from transformers import DynamicCache

    model.train(False)
    cache = DynamicCache(config=model.config)
    with torch.no_grad(), torch_measure.meta_forward():
        model(input_ids=torch.zeros((b, s), dtype=torch.long, device="meta"), cache=cache, use_cache=True)
    return sum(t.numel() * t.element_size() for layer in cache.layers
               for states in (getattr(layer, "conv_states", {}), getattr(layer, "recurrent_states", {}))
               for t in (states or {}).values() if t is not None)


@pytest.mark.parametrize("family", ["mamba", "mamba2"])
def test_draft_recurrent_state_is_what_transformers_keeps(family):
    """Mamba's and Mamba-2's decode state as transformers 5.24 keeps it, per layer: the convolution's last
    ``conv_kernel`` inputs per channel, ``[b, C, K]`` bf16 (``update_conv_state`` keeps "the last
    ``conv_kernel_size`` tokens": K, not K − 1), and the scan's state in fp32 (``[b, D, N]``; Mamba-2
    ``[b, H, P, N]``): the draft's cache bytes, whatever s."""
    d = drafted(family)
    cfg = drafted.config(family)
    tm = torch_measure.build_meta(family, cfg, train=False)
    m = costgraph.loads(d.text, path=f"<{family}>", config="imported")
    for s in (5, 24):
        got = m.costs("model").evaluate("imported", b=2, s=s)
        assert got["kv_cache_bytes_per_token"] == 0
        assert int(got["kv_cache_bytes"]) == _state_bytes(tm, 2, s)
