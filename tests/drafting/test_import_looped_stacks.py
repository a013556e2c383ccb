"""``costgraph import`` (issue 28 item 2) of HRM, whose forward loops two stacks of layers: exact against PyTorch
(tests/draft_checks.py: at both probes, and at the config against the torch agreement tier).

transformers 5.24 modeling_hrm_text.py ``HrmTextModel.forward``: ``H_cycles`` high cycles, each ``L_cycles`` calls of
``L_module`` (``num_layers_per_stack`` layers and a final norm) on ``z_L + x``, then one call of ``H_module`` on
``x + z_L``; ``z_L_init`` [h] is the low state's first value. The layers: weightless RMSNorms, ``HrmTextAttention``
(q, k, v, o and ``gate_proj`` H → a·d, the output times its sigmoid; no q/k norm), a SwiGLU MLP. The draft
(drafting/looped_stacks.py) calls each stack's block once by name and again with ``reuse =``: weights once, FLOPs per
call.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import DENSE, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    # 2 layers per stack, 2 high cycles of 2 low cycles: the low stack runs 4 times, the high stack twice
    "hrm_text": dict(model_type="hrm_text", **DENSE, head_dim=16, intermediate_size=96, H_cycles=2, L_cycles=2),
}
#: what each draft must say: the stack's block and its calls
EXPECTED = {
    "hrm_text": "  x = hrm_text_stack(x + zl, l, a, d, i, name = H_module)\n"
                "  repeat c_H - 1 as high_cycles {\n"
                "    repeat c_L as low_cycles_again {\n"
                "      zl = hrm_text_stack(zl + x, l, a, d, i, reuse = L_module, name = L_module_again)\n",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_hrm_stacks_count_their_weights_once_and_their_flops_per_call():
    """By hand at each probe: each stack's l layers (q, k, v, o and the gate of a·d; the scores and the weighted
    values over s² pairs; the SwiGLU MLP's three matrices of i) run c_H·(c_L + 1) times in all, the head once; the
    parameters of the two stacks once each, the token table, ``z_L_init`` [h] and the untied head."""
    d = drafted("hrm_text")
    assert "x = x + output_gated_attention(rmsnorm(x, weight = false, name = input_layernorm), a, a, d, " \
           "qk_norm = false, name = self_attn)" in d.text
    assert d.mapping["l"] == "num_layers_per_stack" and d.values["l"] == 2 and d.values["c_H"] == 2
    for c in d.checks:
        v = c.values
        b, s, h, a, dh, i, l, V = (v[k] for k in ("b", "s", "h", "a", "d", "i", "l", "V"))
        layer = 5 * 2 * b * s * h * a * dh + 2 * 2 * b * a * s * s * dh + 3 * 2 * b * s * h * i
        assert c.forward_flops_torch == v["c_H"] * (v["c_L"] + 1) * l * layer + 2 * b * s * h * V
        assert c.params_torch == 2 * l * (5 * h * a * dh + 3 * h * i) + 2 * V * h + h
