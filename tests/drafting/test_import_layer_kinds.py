"""``costgraph import`` (issue 28 item 2) of families whose layers differ by a pattern with first layers, or a last
layer, of their own kind, exact against PyTorch (tests/draft_checks.py: at both probes, and at the config against the
torch agreement tier).

Beam (transformers 5.24 modeling_beam.py ``BeamAttention``: AFMoE's output-gated attention plus ``gate_bias`` [a], one
bias per head on the gate; configuration_beam.py ``__post_init__``: full attention every 6th layer and the last,
sliding-window attention elsewhere, three dense MLP layers before the routed experts): the layer pattern written with
the first layers and the last of their own (``j in [l - 1]``, ``j in [0, 1, 2]``, ``j % 6 == 5``), its counts short
closed forms (tests/language/test_patterns.py). MiMo-V2-Flash (modeling_mimo_v2_flash.py ``MiMoV2FlashAttention``:
values of a head size of their own, ``v_head_dim``; the sliding-window layers with twice the key/value heads and a
sink logit per head; configuration_mimo_v2_flash.py: full attention at layer 0 and every 6th, a dense first layer):
the draft's ``value_dim_attention`` (drafting/value_dim_attention.py).

The configs' sliding windows (32) are above the torch tier's sequence (24): transformers' eager attention computes
every score and masks the ones beyond the window, where the draft counts the window's only.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import DENSE, TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    # 14 layers: the period of 6 shown twice after the first 3 and before the last
    "beam": dict(model_type="beam", **{**DENSE, "num_hidden_layers": 14}, num_key_value_heads=2, head_dim=16,
                 intermediate_size=96, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2,
                 n_group=1, topk_group=1, sliding_window=32, **TOK),
    # 14 layers: the period of 6 shown twice after the first; 1 key/value head (2 in the sliding-window layers)
    "mimo_v2_flash": dict(model_type="mimo_v2_flash", **{**DENSE, "num_hidden_layers": 14}, num_key_value_heads=1,
                          head_dim=16, v_head_dim=8, intermediate_size=96, moe_intermediate_size=32,
                          n_routed_experts=4, num_experts_per_tok=2, sliding_window=32, **TOK),
}
#: what each draft must say: the blocks and the layer pattern recognised (the rest is checked by numbers)
EXPECTED = {
    "beam": "    if j in [l - 1] {\n      x = x + rmsnorm(output_gated_attention(rmsnorm(x, name = input_layernorm_last), "
            "a, kv, d, gate_bias = true, name = self_attn_last)",
    "mimo_v2_flash": "x = x + value_dim_attention(rmsnorm(x, name = input_layernorm), a, 2 * kv, d, d_v, window = W, "
                     "sinks = true, name = self_attn)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)
