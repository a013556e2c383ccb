"""``costgraph import`` (issue 28 item 2) of RWKV-4 (Peng et al. 2023, arXiv:2305.13048; transformers 5.24
modeling_rwkv.py), exact against PyTorch (tests/draft_checks.py: at both probes, and at the config against the torch
agreement tier): the time mix (``RwkvSelfAttention``: key, value, receptance and output projections; the WKV
recurrence, exponentials and a running maximum per channel, no matrix product) and the channel mix
(``RwkvFeedForward``), blocks the draft defines; the first block's ``pre_ln`` norms the residual stream itself.
A file of its own: transformers' WKV runs a Python loop over the tokens on the CPU path, the slowest meta forward
of the drafting tests.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from draft_checks import TOK, Drafts, family_tests  # noqa: E402  (tests/ on sys.path)

CASES = {
    # attention_hidden_size (the time mix's width) apart from hidden_size: read as w_t
    "rwkv": dict(model_type="rwkv", hidden_size=64, attention_hidden_size=48, intermediate_size=96,
                 num_hidden_layers=2, vocab_size=128, context_length=64, **TOK),
}
EXPECTED = {
    "rwkv": "  x = layernorm(x, name = pre_ln)\n    x = x + rwkv_time_mix(layernorm(x, name = ln1), w_t, name = attention)\n"
            "    x = x + rwkv_channel_mix(layernorm(x, name = ln2), i, name = feed_forward)",
}

drafted = Drafts(CASES)

test_draft_exact_at_both_probes, test_draft_agrees_with_the_torch_tier_at_the_config = family_tests(drafted, EXPECTED)
