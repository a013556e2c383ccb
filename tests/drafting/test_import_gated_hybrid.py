"""``costgraph import`` (issue 28 item 2) of Bailing's hybrid (``bailing_hybrid``), exact against PyTorch
(tests/draft_checks.py: at both probes, and at the config against the torch agreement tier).

transformers 5.24 modeling_bailing_hybrid.py: ``BailingHybridDeltaAttention`` is Kimi Delta Attention with full-rank
gates (``BailingHybridForgetGate.f_proj`` and ``g_proj``, each H → hl·dl, where Kimi Linear has a rank-dl pair), the
draft's ``kda(..., low_rank = false)``; every ``layer_group_size``-th layer is ``BailingHybridAttention``, MLA with a
full-rank query and one sigmoid gate per head (``g_proj`` H → a), the draft's ``mla_full_q(..., head_gate = true)``;
the first ``first_k_dense_replace`` layers have a dense MLP, the rest DeepSeek-V3's experts with a shared one. Its
config's ``__post_init__`` sets the KDA head size ``linear_head_dim`` from ``head_dim`` and then ``head_dim`` to the
rotary size; ``to_dict`` keeps ``linear_head_dim``, which the probes set and the draft reads as ``dl``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import DENSE, TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    # 6 layers: a dense first layer, then MLA at every 3rd layer (j % 3 == 2), KDA elsewhere; KDA heads of 8
    "bailing_hybrid": dict(model_type="bailing_hybrid", **{**DENSE, "num_hidden_layers": 6}, num_key_value_heads=4,
                           head_dim=8, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
                           layer_group_size=3, first_k_dense_replace=1, short_conv_kernel_size=4, num_experts=4,
                           num_experts_per_tok=2, n_group=1, topk_group=1, moe_intermediate_size=16,
                           intermediate_size=96, **TOK),
}
#: what each draft must say: both mixers with their gates recognised, in the layers' pattern
EXPECTED = {
    "bailing_hybrid": "x = x + mla_full_q(rmsnorm(x, name = input_layernorm_at2), a, r_kv, d_n, d_r, d_v, "
                      "head_gate = true, name = self_attn_at2)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_bailing_kda_head_size_is_the_config_json_head_dim():
    """The KDA layers read ``dl`` (``linear_head_dim``, 8 from ``head_dim`` = 8), the MLA layers ``d_r`` (the rotary
    size ``qk_rope_head_dim``, which ``head_dim`` becomes), each at its own value in the draft's config block."""
    d = drafted("bailing_hybrid")
    assert "x = x + kda(rmsnorm(x, name = input_layernorm), hl, dl, K, chunk = 64, low_rank = false, " \
           "name = self_attn)" in d.text
    assert d.values["dl"] == 8 and d.values["d_r"] == 8 and d.values["hl"] == 4 and d.mapping["dl"] == "linear_head_dim"
