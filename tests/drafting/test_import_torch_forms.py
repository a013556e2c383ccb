"""``costgraph import`` of dense families whose forms the drafter reads beyond the families of
tests/drafting/test_import_torch.py (moved from there so that file stays under 30 s of CPU in the suite: 32.7 s at
ad36e9d): DiffLlama's differential attention, Gemma 4 unified's ``layer_types`` period, XLM's parallel module
lists, Gemma 4's per-layer inputs. Each test drafts its own config (one draft each, kept by
:func:`draft_model` for the process). Pinned: torch 2.13.0, transformers 5.24.0. Skipped when either is not
installed.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
from costgraph import torch_measure  # noqa: E402
from costgraph.drafting.api import draft_model  # noqa: E402
from draft_checks import DENSE, TOK  # noqa: E402  (tests/ on sys.path)


def test_differential_attention_draft_is_exact_and_counts_the_scores_twice():
    """DiffLlama (transformers 5.24 modeling_diffllama.py ``DiffLlamaAttention.forward``): two eager attention calls
    sharing Q and K over the halves of V, so Q·Kᵀ and P·V are each counted twice (8·a·d·b·s² a layer where GQA has
    4); the four λ vectors [d] are parameters. Its KV heads must be even (``__init__`` refuses odd ones): probed at
    twice the KV heads' prime. Exact at both probes, and at the config's sizes against FlopCounterMode's forward (its
    backward cannot run on meta: the λ scalar's gradient copies a meta tensor out, so the torch tier's
    ``torch_measure.flops`` is not used) and ``sum(p.numel())``."""
    import sympy

    from draft_checks import assert_exact

    cfg = dict(DENSE, num_key_value_heads=2, intermediate_size=96, **TOK)
    d = draft_model(dict(model_type="diffllama", **cfg))
    assert_exact(d, "x = x + diff_attention(rmsnorm(x, name = input_layernorm), a, kv, ")
    m = costgraph.loads(d.text, path="<diffllama>", config="imported")
    flops = m.costs("model", convention="matmul")["flops_forward"]
    a, b, dd, l, s = sympy.symbols("a b d l s", positive=True, integer=True)
    assert sympy.expand(flops).coeff(s, 2) == 8 * a * b * dd * l
    tm = torch_measure.build_meta("diffllama", cfg, train=False)
    values = {str(k): int(v) for k, v in m.values("imported", b=2, s=24).items()}
    got = m.costs("model", convention="matmul").evaluate(None, values)
    counter = torch.utils.flop_counter.FlopCounterMode(display=False)
    with torch.no_grad(), torch_measure.meta_forward(), counter:
        tm(**torch_measure.make_inputs(tm, 2, 24))
    assert (int(got["params"]), int(got["flops_forward"])) == (torch_measure.param_count(tm), counter.get_total_flops())


def test_layer_types_period_folds_gemma4_unified():
    """Gemma 4 unified (transformers 5.24 configuration_gemma4_unified.py ``__post_init__``): a full-attention
    layer every 6th (``sliding_window_pattern = 6``, no config field) and the last layer forced to full attention.
    The period is read from the default config's ``layer_types`` (the last layer aside), so that both probes have
    over twice 6 layers and fold alike: a last layer of its own, then ``j % 6 == 5``; exact at both probes (its
    full layers' head size, ``global_head_dim`` 512, is no config field: a number, with a warning)."""
    from costgraph.drafting.api import _types_period

    config = transformers.AutoConfig.for_model("gemma4_unified_text")
    assert _types_period(config.layer_types) == 6
    assert _types_period(["full_attention"] * 3 + ["sliding_attention"]) == 1    # the last layer aside
    assert _types_period(["a", "b", "c"]) is None                                # shorter than two periods
    # MiMo-V2-Flash (configuration_mimo_v2_flash.py): full attention at layer 0 and every 6th: the first layer aside
    assert _types_period(transformers.AutoConfig.for_model("mimo_v2_flash").layer_types) == 6
    from draft_checks import assert_exact

    d = draft_model("gemma4_unified_text")
    assert_exact(d, "if j in [l - 1] {")
    assert "if j % 6 == 5 {" in d.text and "a, kv, 512, qk_norm = true, name = self_attn_at5)" in d.text


def test_xlm_parallel_lists_draft_is_exact():
    """XLM (transformers 5.24 modeling_xlm.py ``XLMModel``): its layers are parallel ModuleLists (``attentions``,
    ``layer_norm1``, ``ffns``, ``layer_norm2``), post-norm (``tensor = layer_norm1(tensor + attn)``, then
    ``layer_norm2(tensor + ffns(tensor))``); its forward asserts ``lengths.max().item() <= slen``, answered by
    whole lengths given on the CPU. Exact at both probes."""
    from draft_checks import assert_exact

    d = draft_model(dict(model_type="xlm", emb_dim=64, n_heads=4, n_layers=2, vocab_size=128,
                         max_position_embeddings=64))
    assert_exact(d, "x = layernorm(x + gqa_attention(x, a, a, h / a, qkv_bias = true, out_bias = true, rotary = false, "
                    "name = attentions), name = layer_norm1)\n    x = layernorm(x + mlp(x, 4 * h, bias = true")


def test_gemma4_per_layer_inputs_draft_is_exact():
    """Gemma 4's per-layer inputs (transformers 5.24 modeling_gemma4.py ``Gemma4TextModel.get_per_layer_inputs`` and
    ``project_per_layer_inputs``: a token table [V_pl, l·p] and a projection h → l·p normalised over p, summed, made
    once; ``Gemma4TextDecoderLayer``: each layer adds ``post_per_layer_input_norm(per_layer_projection(gelu(
    per_layer_input_gate(x)) · per_layer_input))``): p and V_pl read as config fields, the table's width as ``l * d_pl``.
    13 layers, so that the period of 6 of ``layer_types`` shows twice. Exact at both probes and against the torch tier
    at the config."""
    from draft_checks import assert_exact, assert_torch_tier

    cfg = dict(DENSE, num_hidden_layers=13, num_key_value_heads=2, head_dim=16, global_head_dim=64,
               intermediate_size=96, hidden_size_per_layer_input=8, vocab_size_per_layer_input=96, sliding_window=32,
               **TOK)
    d = draft_model(dict(model_type="gemma4_text", **cfg))
    assert_exact(d, "  pe = scale(embedding(tokens, V_pl, l * d_pl, name = embed_tokens_per_layer), name = "
                    "embed_tokens_per_layer_scale)\n  pp = split_heads(scale(linear(x, l * d_pl, bias = false, name = "
                    "per_layer_model_projection), name = per_layer_model_projection_scale), l)")
    assert "x = x + rmsnorm(linear(gelu(linear(x, d_pl, bias = false, name = per_layer_input_gate)) * slice(pli, " \
           "d_pl), h, bias = false, name = per_layer_projection), name = post_per_layer_input_norm)" in d.text
    assert (d.mapping["d_pl"], d.mapping["V_pl"]) == ("hidden_size_per_layer_input", "vocab_size_per_layer_input")
    assert_torch_tier("gemma4_text", d, cfg)
