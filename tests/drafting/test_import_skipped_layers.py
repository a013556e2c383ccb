"""``costgraph import`` (issue 28 item 2) of a model whose text forward skips some of its layers: mllama (Llama 3.2
Vision; transformers 5.24 modeling_mllama.py ``MllamaTextModel``: a ``MllamaCrossAttentionDecoderLayer`` at each index
of ``cross_attention_layers``, which ``forward`` skips (``continue``) when no ``cross_attention_states`` are given,
and a token table of ``vocab_size + 8`` rows). The layers are read in index order, so the skipped ones fold into
the layers' pattern (every 5th from layer 3 in the default config's list), written as parameters only.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from costgraph.drafting.api import draft_model  # noqa: E402
from draft_checks import assert_exact  # noqa: E402  (tests/ on sys.path)


@pytest.fixture(scope="module")
def mllama():
    return draft_model("mllama")


def test_mllama_draft_is_exact_at_both_probes_and_at_the_config(mllama):
    assert_exact(mllama, "x = embedding(tokens, V + 8, h, name = embed_tokens)\n"
                         "  repeat l as layers[j] {   # layer j drafted as layer j % 5: a pattern of period 5\n"
                         "    if j % 5 == 3 {\n"
                         "      # built but never called by the forward (parameters only): cross_attn, "
                         "input_layernorm, mlp, post_attention_layernorm (the whole layer)\n"
                         "      param cross_attn_attn_gate[1]")
    assert mllama.config_params[0] == mllama.config_params[1]
    assert mllama.values["l"] == 40 and "text_config.num_hidden_layers" in mllama.mapping.values()


def test_mllama_forward_counts_only_the_self_attention_layers(mllama):
    """By hand at each probe (layers j < l with j % 5 != 3 run; the default config's cross_attention_layers are
    3, 8, 13, ...): q and o of a·d, k and v of kv·d (d = h / a), the scores and the weighted values, the SwiGLU MLP,
    the head; the skipped layers count parameters only."""
    for c in mllama.checks:
        v = c.values
        t, d = v["b"] * v["s"], v["h"] // v["a"]
        run = sum(1 for j in range(v["l"]) if j not in range(3, 40, 5))
        attention = 2 * t * v["h"] * (2 * v["a"] * d + 2 * v["kv"] * d) + 2 * 2 * v["b"] * v["a"] * v["s"] ** 2 * d
        mlp = 2 * t * 3 * v["h"] * v["i"]
        assert c.forward_flops_torch == c.forward_flops_draft == run * (attention + mlp) + 2 * t * v["h"] * v["V"]


def test_mllama_at_the_config_equals_flopcountermode(mllama):
    """At the default config's own sizes (40 layers, cross-attention at 3, 8, ..., 38), one meta forward of ``[1, 8]``
    tokens: the draft's forward FLOPs and parameters equal FlopCounterMode's and ``sum(p.numel())``."""
    import costgraph
    from costgraph.drafting.api import _build, _forward
    from costgraph.drafting.configs import _config

    model = _build(torch, _config("mllama")[0], None)
    m = costgraph.loads(mllama.text, path="<mllama>", config="imported")
    v = {str(k): int(x) for k, x in m.values("imported", b=1, s=8).items()}
    got = m.costs("model", convention="matmul").evaluate(None, v)
    _, routed, counted = _forward(torch, model, 1, 8)
    assert int(got["flops_forward"]) == routed == counted
    assert int(got["params"]) == sum(p.numel() for p in model.parameters())
