"""``costgraph import`` (issue 28 item 2) of CPM-Ant, whose forward prepends prompt tokens: exact against PyTorch
(tests/draft_checks.py: at both probes, and at the config against the torch agreement tier).

transformers 5.24 modeling_cpmant.py ``CpmAntModel.forward`` prepends ``prompt_length`` prompt ids to the tokens, runs
its layers over ``s + P`` positions and keeps the last ``s`` for ``lm_head`` (``hidden_states[:, self.prompt_length:,
:]``); ``CpmAntSegmentPositionEmbedding`` is one table of ``segment_types² + position_bias_num_buckets`` rows by the
heads, added to every layer's scores; the token table has ``vocab_size + prompt_types · prompt_length`` rows; each
layer is a pre-norm attention (``project_q/k/v`` H → a·d, ``attention_out``) and a GELU-gated MLP (``w_0``, ``w_1``
H → dim_ff, ``w_out``), its norms RMSNorms with a weight (``CpmAntLayerNorm``). The draft: drafting/segment_bias.py.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    "cpmant": dict(model_type="cpmant", hidden_size=64, num_attention_heads=4, dim_head=16, dim_ff=96,
                   num_hidden_layers=2, vocab_size=128, prompt_length=5, prompt_types=3, segment_types=4,
                   position_bias_num_buckets=16, position_bias_max_distance=64),
}
#: what each draft must say: the inputs over the prompt too, the shared bias, the layer, the head's s positions
EXPECTED = {
    "cpmant": "  input tokens[b, s + P]: index\n  input segment_embedding_ids[b, s + P]: index\n\n"
              "  x = embedding(tokens, V + P * T_p, h, name = input_embedding) + embedding(segment_embedding_ids, G, h, "
              "name = segment_embedding)\n"
              "  pos_bias = relative_position_bias(s + P, s + P, G * G + n_b, a, name = position_bias)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)


def test_cpmant_layers_run_the_prompt_tokens_and_the_head_the_sequence():
    """By hand at each probe: every layer over b·(s + P) positions (q, k, v, o of a·d; the scores and the weighted
    values over (s + P)² pairs; the gated MLP's three matrices of i), ``lm_head`` over b·s; the parameters of the
    token table (V + T_p·P rows), the segment table (G rows), the bias table ((G² + n_b)·a), the layers (two RMSNorm
    weights each), the final norm and the head."""
    d = drafted("cpmant")
    assert "x = rmsnorm(x, name = output_layernorm)\n  x = slice_seq(x, s)" in d.text
    assert "x = x + geglu(rmsnorm(x, name = layernorm_before_ffn), i, name = ffn)" in d.text
    for c in d.checks:
        v = c.values
        b, s, h, a, dh, i, l, V = (v[k] for k in ("b", "s", "h", "a", "d", "i", "l", "V"))
        P, T, G, nb = v["P"], v["T_p"], v["G"], v["n_b"]
        n = s + P
        layer = 4 * 2 * b * n * h * a * dh + 2 * 2 * b * a * n * n * dh + 3 * 2 * b * n * h * i
        assert c.forward_flops_torch == l * layer + 2 * b * s * h * V
        params = (V + T * P) * h + G * h + (G * G + nb) * a + l * (4 * h * a * dh + 3 * h * i + 2 * h) + h + V * h
        assert c.params_torch == params
