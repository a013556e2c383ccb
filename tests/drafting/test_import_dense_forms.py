"""``costgraph import`` (issue 28) of dense families whose config ties sizes the probes set apart, exact against
PyTorch (tests/draft_checks.py: at both probes, and at the config against the torch agreement tier).

Helium (transformers 5.24 modeling_helium.py ``HeliumAttention``: ``o_proj`` is h → h, so the model runs only where
``head_dim`` is ``hidden_size / num_attention_heads``): the probes that set the head size apart fail, and the draft is
probed again with the head size following h / a (read back as ``h / a``). RoFormer (modeling_roformer.py
``RoFormerSinusoidalPositionalEmbedding``: an ``nn.Embedding`` [s_max, h / a] the attention's rotary reads): a table of
another width than the token embedding's is a ``param``, not added to the embeddings' sum. LFM3 (modeling_lfm3.py):
gated short convolutions (``Lfm3ShortConv``: in_proj H → 3H, a depthwise causal Conv1d of ``conv_L_cache`` taps,
out_proj; a block the draft defines), attention gated per head by ``sigmoid(g_proj(x))`` (read from the forward's
source), an MLP whose activation its forward calls by name (``F.silu``), sandwich norms. Doge (modeling_doge.py
``DogeAttention``: ``dt_proj`` and ``A`` per KV head make a dynamic mask added to the scores; ``DogeDecoderLayer``
scales each residual by a vector of its own, ``input_residual`` and ``post_attention_residual``). Sizes a config derives
(floor, rounding, concatenated tables): tests/drafting/test_import_derived_sizes.py.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from costgraph.drafting.api import draft_model  # noqa: E402
from costgraph.drafting.on_the_fly import _differences  # noqa: E402
from draft_checks import DENSE, TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    "helium": dict(model_type="helium", **DENSE, num_key_value_heads=2, head_dim=16, intermediate_size=96, **TOK),
    # four layers: conv, conv, full attention (layer_types' rule: full where j % 4 == 2), conv
    "lfm3": dict(model_type="lfm3", **{**DENSE, "num_hidden_layers": 4}, num_key_value_heads=2, head_dim=16,
                 intermediate_size=96, conv_L_cache=3, **TOK),
    "roformer": dict(model_type="roformer", **DENSE, intermediate_size=96, is_decoder=True, pad_token_id=0),
    # Doge (modeling_doge.py): dynamic mask attention (dt_proj and A per KV head), each residual scaled by a vector
    "doge": dict(model_type="doge", **DENSE, num_key_value_heads=2, intermediate_size=96, **TOK),
}
EXPECTED = {
    "helium": "x = x + gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, h / a, name = self_attn)",
    "roformer": "param embed_positions_weight[s_max, h / a]",
    "doge": "x = x * input_residual + dynamic_mask_attention(rmsnorm(x, name = input_layernorm), a, kv, h / a, "
            "name = self_attn)",
    "lfm3": "x = x + rmsnorm(head_gated_attention(rmsnorm(x, name = operator_norm_at2), a, kv, d, sigmoid_gate = true, "
            "name = self_attn_at2), name = post_operator_norm_at2)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_a_size_the_probes_read_as_a_number_is_refused_at_the_config():
    """LFM2's MLP width (transformers 5.24 modeling_lfm2.py ``Lfm2MLP``: ``int(2 · intermediate_size / 3)`` times
    ``block_ffn_dim_multiplier``, truncated, rounded up to a multiple of ``block_multiple_of``, 256). A multiplier of
    1.5 (a float times an int, truncated: no closed form the draft writes) leaves the width 256 at both probes
    (intermediate sizes 19 and 31), so the draft writes 256 and matches PyTorch there; at the config's own
    intermediate_size 600 the width is 768 (int(1.5 · 400) = 600 rounded up): the parameters at the config differ,
    and the draft is not exact (never a silent wrong number)."""
    d = draft_model(dict(model_type="lfm2", **DENSE, num_key_value_heads=2, intermediate_size=600,
                         block_ffn_dim_multiplier=1.5, **TOK))
    assert not d.todos and d.confirmed and all(c.exact for c in d.checks)
    hidden, layers = DENSE["hidden_size"], DENSE["num_hidden_layers"]
    torch_params, draft_params = d.config_params
    assert torch_params - draft_params == layers * 3 * hidden * (768 - 256)   # w1, w3, w2 of each layer
    assert not d.exact
    assert any("parameters at the config's own sizes" in w for w in d.warnings)
    assert f"parameters at the config's own sizes: torch {torch_params:,}, draft {draft_params:,}" in \
        _differences(d)
