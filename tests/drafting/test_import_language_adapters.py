"""``costgraph import`` (issue 28 item 2) of X-MOD, whose layers end in one adapter per language: exact against
PyTorch at both probes and in parameters at the config (tests/draft_checks.py ``assert_exact``).

transformers 5.24 modeling_xmod.py: ``XmodOutput.lang_adapter`` (with ``adapter_reuse_layer_norm`` and
``ln_before_adapter``, the defaults) normalises the output's residual sum with the output's LayerNorm, keeps it as the
residual and runs each language's ``XmodAdapter`` (``dense1`` H → H / ``adapter_reduction_factor``, GELU, ``dense2``
back, with biases) on the rows ``hidden_states[lang_ids == i]``. The drafter traces every sequence in the config's
first language (``lang_ids`` given on the CPU: a meta tensor cannot answer which rows a language holds); the other
languages' adapters are parameters only. The torch tier (costgraph verify's forward of token ids alone) cannot run
X-MOD on meta for the same reason: the FLOPs are checked by hand here instead.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from costgraph.drafting.api import draft_model  # noqa: E402
from draft_checks import DENSE, TOK, assert_exact  # noqa: E402  (tests/ on sys.path)

#: two languages: the first one's adapter runs, the second one's is counted in the parameters only
CONFIG = dict(model_type="xmod", **DENSE, intermediate_size=96, languages=["en_XX", "de_DE"], **TOK)


@pytest.fixture(scope="module")
def xmod():
    return draft_model(CONFIG)


def test_xmod_draft_is_exact_at_both_probes_and_at_the_config(xmod):
    assert_exact(xmod, "    x = x + dropout(mlp(x, h / 2, dropout = false, name = adapter_en_XX), name = adapter_dropout)"
                       "   # XmodAdapter: the language the sequences are in\n"
                       "    param adapter_de_DE_dense1_weight[h / 2, h]   # another language's adapter (parameters only)")
    assert xmod.config_params[0] == xmod.config_params[1]


def test_xmod_runs_one_adapter_per_layer_and_counts_them_all(xmod):
    """By hand at each probe: each layer's attention (q, k, v, o of h; the scores and weighted values over s²) and
    MLP (two matrices of i) and one adapter (two matrices of h / 2) over b·s tokens, the head's dense (h → h) and
    decoder (h → V); the parameters: the token, token-type (2 rows) and position (s_max rows) tables and their
    LayerNorm, each layer's attention and MLP with biases, two LayerNorms and both languages' adapters
    (2 · (2 · h · h/2 + h/2 + h)), the head's dense and LayerNorm, the decoder's bias (its weight tied)."""
    for c in xmod.checks:
        v = c.values
        b, s, h, i, l, V = (v[k] for k in ("b", "s", "h", "i", "l", "V"))
        layer = 4 * 2 * b * s * h * h + 2 * 2 * b * s * s * h + 2 * 2 * b * s * h * i + 2 * 2 * b * s * h * (h // 2)
        assert c.forward_flops_torch == l * layer + 2 * b * s * h * h + 2 * b * s * h * V
        adapters = 2 * (2 * h * (h // 2) + h // 2 + h)
        layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h + adapters
        assert c.params_torch == (V + 2 + v["s_max"]) * h + 2 * h + l * layer + (h * h + h) + 2 * h + V
