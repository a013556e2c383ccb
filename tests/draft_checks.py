"""Shared checks of ``costgraph import`` drafts (issue 28 item 1) for the tests/drafting/test_import_*.py files.

Each file drafts its own families once (a module-level cache: one draft, one built model per family and module) and
checks, for each:

(a) at both probes the draft's parameters equal ``sum(p.numel())`` of the transformers model and its forward FLOPs
    (``matmul`` convention) equal ``torch.utils.flop_counter.FlopCounterMode``'s, the second probe drafts the same
    text, and the draft says what the file expects of it (the std blocks and structure recognised):
    :func:`assert_exact`;
(b) at the config's own sizes (the file's ``config imported``) the draft's parameters and forward FLOPs equal the
    PyTorch agreement tier's (:mod:`costgraph.torch_measure`: ``param_count``, ``flops(...)["forward"]``, experts by
    ``grouped_mm``, as ``costgraph verify`` measures): :func:`assert_torch_tier`.

Pinned: torch 2.13.0, transformers 5.24.0; the files skip when either is not installed.
"""

from __future__ import annotations

import pytest

import costgraph
from costgraph import torch_measure
from costgraph.drafting.api import draft_model

TOK = dict(bos_token_id=0, eos_token_id=1, pad_token_id=2)
DENSE = dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=2, vocab_size=128, max_position_embeddings=64)
#: the (b, s) of the torch-tier comparison at the config (the probes compare at two more)
POINTS = [(2, 24)]


class Drafts:
    """The drafts of one test file's ``cases`` (family → config dict), each drafted once, when first asked."""

    def __init__(self, cases: dict):
        self.cases = cases
        self._done: dict = {}

    def __call__(self, family: str):
        if family not in self._done:
            self._done[family] = draft_model(self.cases[family])
        return self._done[family]

    def config(self, family: str) -> dict:
        """The case's config fields without its model_type (what torch_measure.build_meta takes)."""
        return {k: v for k, v in self.cases[family].items() if k != "model_type"}


def assert_exact(d, expected: str) -> None:
    """(a): exact at both probes, the second probe the same file, ``expected`` in the text."""
    assert d.todos == [] and d.confirmed, d.warnings
    assert len(d.checks) == 2
    for c in d.checks:
        assert (c.params_draft, c.forward_flops_draft) == (c.params_torch, c.forward_flops_torch), c
    assert expected in d.text
    assert d.exact


def assert_torch_tier(family: str, d, cfg: dict) -> None:
    """(b): the draft at the config's sizes against the torch agreement tier, at :data:`POINTS`."""
    tm = torch_measure.build_meta(family, cfg, train=False)
    m = costgraph.loads(d.text, path=f"<{family}>", config="imported")
    for b, s in POINTS:
        values = {str(k): int(v) for k, v in m.values("imported", b=b, s=s).items()}
        got = m.costs("model", convention="matmul").evaluate(None, values)
        assert int(got["params"]) == torch_measure.param_count(tm)
        assert int(got["flops_forward"]) == torch_measure.flops(tm, b, s)["forward"]


def family_tests(drafted: Drafts, expected: dict):
    """The two tests every test_import_*.py file runs over its families (``drafted.cases``): (a) and (b) above,
    parametrized by family; a file binds them to its own names (pytest collects them there)."""
    families = sorted(drafted.cases)

    @pytest.mark.parametrize("family", families)
    def exact_at_both_probes(family):
        assert_exact(drafted(family), expected[family])

    @pytest.mark.parametrize("family", families)
    def agrees_with_the_torch_tier_at_the_config(family):
        assert_torch_tier(family, drafted(family), drafted.config(family))

    return exact_at_both_probes, agrees_with_the_torch_tier_at_the_config
