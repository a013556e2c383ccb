"""``costgraph import`` (issue 28 item 2) of ZAYA (Zyphra; transformers 5.24 modeling_zaya.py ``ZayaForCausalLM``),
exact against PyTorch (tests/draft_checks.py: at both probes, and at the config against the torch agreement tier):
its compressed convolutional attention (``ZayaCCAProjection``: q and k mixed by a depthwise and a grouped causal
convolution, values half from a delayed projection, which runs once more on a zero token per sequence), its residual
scalings (``ZayaResidualScaling``: four vectors [H] each), its router (``ZayaRouter``: ``down_proj`` to
``router_hidden_size``, probed as hr, plus the previous layer's router state from the second layer on; a router MLP
to E + 1 classes, the last a skip expert) and SwiGLU experts, and the embeddings' scale and bias before the layers
(``ZayaModel.input_hidden_states_scale``/``_bias``). The first layer, whose router reads no state, is a layer of its
own. ``num_experts_per_tok`` must be 1 (ZayaConfig's validator): probed at the config's value, written as 1.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    "zaya": dict(model_type="zaya", hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 num_hidden_layers=3, vocab_size=128, num_experts=4, num_experts_per_tok=1, moe_intermediate_size=32,
                 router_hidden_size=24, **TOK),
}
EXPECTED = {
    "zaya": "  repeat l - 1 as layers {   # layers 1..l - 1\n"
            "    x = residual_scaling(cca_attention(rmsnorm(x, name = input_layernorm), a, kv, d, 2, 2, 1, "
            "name = self_attn), x, name = post_attention_residual_scale)\n"
            "    y = rmsnorm(x, name = post_attention_layernorm)\n"
            "    param router_states_scale[hr]\n"
            "    r = linear(y, hr, bias = true, name = gate_down_proj) + r * router_states_scale\n"
            "    p = zaya_router_mlp(r, E + 1, name = gate_router_mlp)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_the_delayed_value_projection_runs_once_more_per_sequence():
    """The self-attention's FLOPs at the config hold 2·b·H·(kv·d/2) for ``v_proj_delayed`` on one zero token per
    sequence (ZayaCCAProjection.forward: ``self.v_proj_delayed(hidden_states.new_zeros(b, 1, H))``) beside the
    b·s tokens' projections: the attention of one layer at b = 2, s = 24, counted by hand from the source."""
    import costgraph

    m = costgraph.loads(drafted("zaya").text, path="<zaya>", config="imported")
    values = {str(k): int(v) for k, v in m.values("imported", b=2, s=24).items()}
    got = int(m.costs("layers/self_attn", convention="matmul").evaluate(None, values)["flops_forward"])
    b, s, h, a, kv, d = 2, 24, 64, 4, 2, 16
    c = (a + kv) * d
    projections = 2 * b * s * h * (a * d + kv * d + kv * d) + 2 * b * 1 * h * (kv * d // 2) + 2 * b * s * a * d * h
    convolutions = 2 * b * c * 1 * 2 * (s + 1) + 2 * b * c * d * 2 * s     # depthwise over s + t1 - 1, then grouped
    attention = 2 * (2 * b * a * s * s * d)
    assert got == projections + convolutions + attention
