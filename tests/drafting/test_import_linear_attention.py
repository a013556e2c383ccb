"""``costgraph import`` (issue 28 item 1) of linear-attention families, exact against PyTorch
(tests/draft_checks.py: at both probes, and at the config against the torch agreement tier).

Qwen3-Next (Gated DeltaNet and gated attention, blocks the draft defines, the delta rule's chunks of 64 checked
beyond one chunk), MiniMax (lightning attention in blocks of ``block_size``, every other layer), Kimi Linear (Kimi
Delta Attention, chunks of 64, and NoPE MLA every 4th layer after a dense first layer). RWKV-4:
tests/drafting/test_import_rwkv.py.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from costgraph import torch_measure  # noqa: E402
from draft_checks import DENSE, TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    # Qwen3-Next: Gated DeltaNet (chunks of 64) and gated attention every 4th layer, Qwen2-MoE's experts
    "qwen3_next": dict(model_type="qwen3_next", **{**DENSE, "num_hidden_layers": 4}, num_key_value_heads=2,
                       head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                       linear_value_head_dim=8, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                       moe_intermediate_size=32, shared_expert_intermediate_size=48, intermediate_size=96, **TOK),
    # MiniMax: lightning attention (blocks of 8 below s = 24: the blockwise form FlopCounterMode counts) in every
    # other layer, softmax attention in the rest, Mixtral's experts
    "minimax": dict(model_type="minimax", **{**DENSE, "num_hidden_layers": 4}, num_key_value_heads=2, head_dim=16,
                    intermediate_size=32, num_local_experts=4, num_experts_per_tok=2, block_size=8, **TOK),
    # Kimi Linear: Kimi Delta Attention (chunks of 64) and NoPE MLA every 4th layer after a first dense layer
    # (a prefix, then a period), DeepSeek-V3's experts behind a sigmoid router with its correction bias
    "kimi_linear": dict(model_type="kimi_linear", **{**DENSE, "num_hidden_layers": 5}, num_key_value_heads=4,
                        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, linear_num_heads=2,
                        linear_head_dim=8, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
                        moe_intermediate_size=16, intermediate_size=96, **TOK),
}
#: what each draft must say: the std blocks and structure recognised (the rest is checked by numbers)
EXPECTED = {
    "qwen3_next": "x = x + gated_deltanet(rmsnorm(x, name = input_layernorm), hk, hv, dk, dv, K, chunk = 64, "
                  "name = linear_attn)",
    "minimax": "x = x + lightning(rmsnorm(x, name = input_layernorm_at1), a, d, block = Cl, name = self_attn_at1)",
    "kimi_linear": "    if j in [0] {\n      x = x + kda(rmsnorm(x, name = input_layernorm_first0), hl, dl, K, chunk = 64, "
                   "name = self_attn_first0)\n      x = x + swiglu(rmsnorm(x, name = post_attention_layernorm_first0), i, "
                   "name = mlp_first0)\n    } else {\n      if j % 4 == 0 {\n        x = x + mla_nope(rmsnorm(x, name = "
                   "input_layernorm_at0), a, r_kv, d_n, d_r, d_v, name = self_attn_at0)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_qwen3_next_draft_counts_the_chunks_beyond_one():
    """At s = 70 the gated delta rule's torch path runs two chunks of 64 (the sequence padded to 128): the draft's
    forward FLOPs still equal FlopCounterMode's."""
    d = drafted("qwen3_next")
    cfg = drafted.config("qwen3_next")
    tm = torch_measure.build_meta("qwen3_next", cfg, train=False)
    m = costgraph.loads(d.text, path="<qwen3_next>", config="imported")
    values = {str(k): int(v) for k, v in m.values("imported", b=1, s=70).items()}
    got = m.costs("model", convention="matmul").evaluate(None, values)
    assert int(got["flops_forward"]) == torch_measure.flops(tm, 1, 70)["forward"]
