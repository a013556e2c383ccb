"""``costgraph import``'s drafting without PyTorch (issue 28 item 1): sizes read back from probe primes,
and layers written from their traced dataflow (hand-built :class:`costgraph.drafting.facts.Module`
facts, shaped as transformers' modules are: names, classes, parameter shapes, where each call's input
came from). Each drafted layer is built by costgraph and its parameters compared with the facts'
own count (the sum of the parameter shapes, as ``sum(p.numel())`` counts them).
"""

from __future__ import annotations

import sympy

import costgraph
from costgraph.drafting.facts import Module
from costgraph.drafting.probe import Probe
from costgraph.drafting.writer import Sizer, layer_lines

LLAMA = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
         "num_hidden_layers", "vocab_size", "max_position_embeddings")


def probe() -> Probe:
    return Probe.make(LLAMA, 0)


def test_cover_names_products_of_fields():
    p = probe()
    v = p.symbol_values()
    assert p.cover(v["a"] * v["d"]) == "a * d"
    assert p.cover(v["kv"] * v["d"]) == "kv * d"
    assert p.cover(3 * v["h"]) == "3 * h"
    assert p.cover(2 * v["i"]) == "2 * i"
    assert p.cover(v["V"] * v["h"]) == "V * h"
    assert p.cover(45) is None                     # a bare number names no field
    assert p.cover(v["h"] // v["a"]) is None       # h/a is no product: Sizer divides


def test_sizer_divides_and_offsets():
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    assert sz.size(v["h"] // v["a"]) == "h / a"
    assert sz.size(v["s_max"] + 2) == "s_max + 2"   # OPT's learned positions
    assert sz.size(1) == "1"
    assert sz.warnings == []
    assert sz.size(60, "width") == "60" and "width 60" in sz.warnings[0]


def _linear(name, n_in, n_out, bias=False, **kw):
    params = {"weight": (n_out, n_in)}
    if bias:
        params["bias"] = (n_out,)
    return Module(f"l.{name}", name, "Linear", params=params, **kw)


def _norm(name, h, src, cls="LlamaRMSNorm", order=0):
    return Module(f"l.{name}", name, cls, params={"weight": (h,)}, src=src, order=order)


def _attention(v, src, order):
    h, a, kv, d = v["h"], v["a"], v["kv"], v["d"]
    kids = [_linear("q_proj", h, a * d), _linear("k_proj", h, kv * d), _linear("v_proj", h, kv * d),
            _linear("o_proj", a * d, h)]
    return Module("l.self_attn", "self_attn", "Attention", attrs={"head_dim": d}, children=kids, src=src, order=order)


def _mlp(v, src, order):
    h, i = v["h"], v["i"]
    kids = [_linear("gate_proj", h, i), _linear("up_proj", h, i), _linear("down_proj", i, h)]
    return Module("l.mlp", "mlp", "MLP", attrs={"act": "SiLUActivation"}, children=kids, src=src, order=order)


def _layer(kids) -> Module:
    return Module("l", "0", "DecoderLayer", children=kids)


def _draft(layer: Module, sz: Sizer) -> str:
    dims = "\n".join(f"  dim {s}" for s in ("b", "s", "h", "a", "kv", "d", "i"))
    body = "\n".join("    " + x for x in layer_lines(layer, sz, rotary=True))
    return (f'import "std/attention.cg"\nimport "std/mlp.cg"\nmodel t {{\n{dims}\n  input x[b, s, h]\n'
            f"  repeat 1 as layers {{\n{body}\n  }}\n  return x\n}}\n")


def _params(text: str, v: dict) -> int:
    m = costgraph.loads(text, path="<draft>")
    return int(m.costs("model").evaluate(None, {k: v[k] for k in ("h", "a", "kv", "d", "i")} | {"b": 1, "s": 1})
               ["params"])


def test_pre_norm_layer():
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    layer = _layer([_norm("input_layernorm", v["h"], "input", order=0), _attention(v, "input_layernorm", 1),
                    _norm("post_attention_layernorm", v["h"], "?", order=2), _mlp(v, "post_attention_layernorm", 3)])
    assert layer_lines(layer, sz, rotary=True) == [
        "x = x + gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, d, name = self_attn)",
        "x = x + swiglu(rmsnorm(x, name = post_attention_layernorm), i, name = mlp)"]
    assert _params(_draft(layer, Sizer(probe())), v) == layer.param_count()


def test_parallel_layer_binds_the_shared_norm_once():
    """Phi / GPT-J: attention and MLP read one LayerNorm's output; the norm is computed once."""
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    ln = Module("l.ln", "input_layernorm", "LayerNorm", params={"weight": (v["h"],), "bias": (v["h"],)},
                src="input", order=0)
    layer = _layer([ln, _attention(v, "input_layernorm", 1), _mlp(v, "input_layernorm", 2)])
    lines = layer_lines(layer, sz, rotary=True)
    assert lines[0] == "y1 = layernorm(x, name = input_layernorm)"
    assert lines[1].startswith("x = x + gqa_attention(y1, ") and " + swiglu(y1, i, name = mlp)" in lines[1]
    assert _params(_draft(layer, Sizer(probe())), v) == layer.param_count()


def test_sandwich_norms_wrap_the_block_output():
    """Gemma 2: a norm on the attention's output, read by no block, is added to x after the block."""
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    layer = _layer([_norm("input_layernorm", v["h"], "input", order=0), _attention(v, "input_layernorm", 1),
                    _norm("post_attention_layernorm", v["h"], "self_attn", order=2)])
    assert layer_lines(layer, sz, rotary=True) == [
        "x = x + rmsnorm(gqa_attention(rmsnorm(x, name = input_layernorm), a, kv, d, name = self_attn), "
        "name = post_attention_layernorm)"]


def test_post_norm_layer():
    """OPT-350m / original Transformer: the block reads x, the norm follows the residual sum."""
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    layer = _layer([_attention(v, "input", 0), _norm("ln", v["h"], "?", cls="LayerNorm", order=1)])
    assert layer_lines(layer, sz, rotary=False) == [
        "x = layernorm(x + gqa_attention(x, a, kv, d, rotary = false, name = self_attn), bias = false, name = ln)"]


def test_xielu_mlp_is_written_out_with_its_two_scalars():
    """Apertus (transformers 5.24 modeling_apertus.py ``ApertusMLP``): ``down_proj(act_fn(up_proj(x)))`` without a
    gate, ``act_fn`` an ``XIELUActivation`` holding ``alpha_p`` and ``alpha_n`` of shape [1] (activations.py): the
    ``xielu`` operator, its two parameters counted (the operator against transformers' module:
    tests/ops/test_new_ops_torch.py)."""
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    act = Module("l.mlp.act_fn", "act_fn", "XIELUActivation", params={"alpha_p": (1,), "alpha_n": (1,)})
    mlp = Module("l.mlp", "mlp", "ApertusMLP", children=[_linear("up_proj", v["h"], v["i"]), act,
                                                         _linear("down_proj", v["i"], v["h"])],
                 src="feedforward_layernorm", order=1)
    layer = _layer([_norm("feedforward_layernorm", v["h"], "input", order=0), mlp])
    assert layer_lines(layer, sz, rotary=True) == [
        "x = x + linear(xielu(linear(rmsnorm(x, name = feedforward_layernorm), i, bias = false, name = up_proj), "
        "name = act_fn), h, bias = false, name = down_proj)"]
    assert _params(_draft(layer, Sizer(probe())), v) == layer.param_count()
    act.params["alpha_p"] = (2,)      # a shape the operator does not hold: no guess
    sz = Sizer(probe())
    assert layer_lines(layer, sz, rotary=True)[0].startswith("# TODO mlp: ApertusMLP") and sz.todos == ["l.mlp"]


def test_unknown_module_is_a_todo_never_a_guess():
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    odd = Module("l.mixer", "mixer", "MambaMixer", params={"A_log": (v["h"], 16)}, src="input", order=0)
    lines = layer_lines(_layer([odd]), sz, rotary=False)
    assert lines[0].startswith("# TODO mixer: MambaMixer (no std block recognised")
    assert sz.todos == ["l.mixer"]
    assert "left as a TODO" in sz.warnings[0]


def test_import_without_torch_says_which_extra(monkeypatch, capsys):
    from costgraph import torch_measure
    from costgraph.cli import main

    def missing():
        raise torch_measure.TorchMissing("costgraph verify needs PyTorch and Hugging Face transformers "
                                         "(torch is not installed)", hint="install the torch extra")

    monkeypatch.setattr(torch_measure, "require", missing)
    assert main(["import", "llama"]) == 2
    err = capsys.readouterr().err
    assert "costgraph import needs PyTorch" in err and "install the torch extra" in err
    assert "Traceback" not in err
    # once each: the message re-raised for import is the bare message, not the printed error
    assert err.count("error:") == 1 and err.count("hint:") == 1, err


def test_gqa_parameters_match_the_facts_symbolically():
    """The drafted layer's parameters, as a closed form, are the facts' shapes written in symbols."""
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    layer = _layer([_norm("input_layernorm", v["h"], "input", order=0), _attention(v, "input_layernorm", 1)])
    m = costgraph.loads(_draft(layer, Sizer(probe())), path="<draft>")
    h, a, kv, d = sympy.symbols("h a kv d", positive=True, integer=True)
    got = m.costs("model")["params"]
    want = h + 2 * h * a * d + 2 * h * kv * d
    assert sympy.expand(got.subs({s: sympy.Symbol(str(s), positive=True, integer=True) for s in got.free_symbols})
                        - want) == 0


def test_unmapped_model_type_without_torch_names_the_extra(monkeypatch, tmp_path):
    """Issue 28 item 2: without the torch extra an unmapped model_type is refused, the hint naming the extra."""
    import pytest

    from costgraph import torch_measure

    def missing():
        raise torch_measure.TorchMissing("costgraph verify needs PyTorch", hint="install the torch extra")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(torch_measure, "require", missing)
    with pytest.raises(costgraph.CostgraphValueError) as e:
        costgraph.from_hf_config({"model_type": "roberta"}, source="cfg.json")
    assert "cfg.json: unsupported model_type 'roberta'" in str(e.value)
    assert "with the torch extra (pip install -e '.[torch]') costgraph drafts one" in str(e.value)
    assert "llama" in str(e.value)     # the bundled types are listed


# ---------------------------------------------------------------- Griffin, layer patterns, half a field
GRIFFIN = LLAMA + ("lru_width", "conv1d_width")


def _griffin_block(v, src="temporal_pre_norm", order=1) -> Module:
    """transformers 5.24's RecurrentGemmaRecurrentBlock as the trace records it (modeling_recurrent_gemma.py:
    linear_y/linear_x/linear_out with biases, Conv1d(w, w, K, groups = w, padding = K − 1), RecurrentGemmaRglru
    with recurrent_param [w] and two gates [a, w/a, w/a] + biases [a, w/a])."""
    h, a, w, k = v["h"], v["a"], v["w"], v["K"]
    conv = Module("l.t.conv_1d", "conv_1d", "Conv1d", params={"weight": (w, 1, k), "bias": (w,)},
                  attrs={"kernel_size": k, "padding": k - 1, "groups": w})
    lru = Module("l.t.rg_lru", "rg_lru", "RecurrentGemmaRglru", params={
        "recurrent_param": (w,), "input_gate_weight": (a, w // a, w // a), "input_gate_bias": (a, w // a),
        "recurrent_gate_weight": (a, w // a, w // a), "recurrent_gate_bias": (a, w // a)})
    kids = [_linear("linear_y", h, w, bias=True), _linear("linear_x", h, w, bias=True), conv, lru,
            _linear("linear_out", w, h, bias=True)]
    return Module("l.temporal_block", "temporal_block", "RecurrentGemmaRecurrentBlock",
                  attrs={"act": "GELUTanh"}, children=kids, src=src, order=order)


def test_griffin_recurrent_block_is_recognised_and_counts_its_parameters():
    sz = Sizer(Probe.make(GRIFFIN, 0))
    v = sz.probe.symbol_values()
    layer = _layer([_norm("temporal_pre_norm", v["h"], "input", order=0), _griffin_block(v)])
    assert layer_lines(layer, sz, rotary=False) == [
        "x = x + griffin_recurrent(rmsnorm(x, name = temporal_pre_norm), w, a, K, name = temporal_block)"]
    assert sz.blocks == {"griffin_recurrent"}
    from costgraph.drafting.recurrent import LOCAL_BLOCKS
    text = _draft(layer, Sizer(Probe.make(GRIFFIN, 0))).replace(
        "model t {", LOCAL_BLOCKS["griffin_recurrent"] + "\nmodel t {\n  dim w\n  dim K")
    m = costgraph.loads(text, path="<draft>")
    got = m.costs("model").evaluate(None, {k: v[k] for k in ("h", "a", "w", "K")} | {"b": 1, "s": 1})
    assert int(got["params"]) == layer.param_count()


def test_griffin_block_without_its_padding_is_not_recognised():
    sz = Sizer(Probe.make(GRIFFIN, 0))
    v = sz.probe.symbol_values()
    block = _griffin_block(v)
    block.children[2].attrs["padding"] = 0     # not the padded causal convolution transformers runs
    assert layer_lines(_layer([block]), sz, rotary=False)[0].startswith("# TODO temporal_block")


def test_half_a_field_rounded_down():
    """RecurrentGemmaMlp: intermediate_size // 2 (19 // 2 = 9 at probe 1, 31 // 2 = 15 at probe 2)."""
    for index in (0, 1):
        sz = Sizer(Probe.make(GRIFFIN, index))
        v = sz.probe.symbol_values()
        assert sz.size(v["i"] // 2) == "floor(i / 2)"
        assert sz.size(v["h"] // 2) == "h / 2"
        assert sz.warnings == []


def test_layer_pattern_of_a_period_folds_into_conditions():
    from costgraph.drafting.model_file import _period, _periodic
    r, att = ["x = x + r(x, name = t)"], ["x = x + at(x, name = t)"]
    texts = [r, r, att] * 3 + [r, r]                   # RecurrentGemma's block_types at 11 layers
    assert _period(texts) == 3
    assert _period([r, att, att, r]) is None           # no period: the runs are written apart
    assert _periodic(texts, 3, "layers") == [
        "repeat l as layers[j] {   # layer j drafted as layer j % 3: a pattern of period 3",
        "  if j % 3 == 2 {", "    x = x + at(x, name = t_at2)", "  } else {", "    x = x + r(x, name = t)", "  }",
        "}"]
    three = _periodic([r, att, ["m"], r, att, ["m"]], 3, "layers")
    assert three[1] == "  if j % 3 == 2 {" and "    if j % 3 == 1 {" in three and "      x = x + r(x, name = t)" \
        in three


def test_a_pattern_draft_counts_each_kind_per_layer():
    """The folded repeat built by costgraph: 11 layers of period 3 are 3 of one kind and 8 of the other."""
    from costgraph.drafting.model_file import _periodic
    lines = _periodic([["x = x + linear(x, h, name = r)"]] * 2 + [["x = x + linear(x, h, bias = false, name = a)"]],
                      3, "layers")
    text = "model t {\n  dim b\n  dim s\n  dim h\n  dim l\n  input x[b, s, h]\n" + \
        "\n".join("  " + x for x in lines) + "\n  return x\n}\n"
    got = costgraph.loads(text, path="<draft>").costs("model").evaluate(None, {"b": 1, "s": 1, "h": 10, "l": 11})
    assert int(got["params"]) == 8 * (100 + 10) + 3 * 100


def test_k_projection_without_bias_and_uncalled_modules():
    """Whisper's decoder layer (transformers 5.24 modeling_whisper.py WhisperDecoderLayer under
    WhisperForCausalLM): q_proj, v_proj and out_proj with biases, k_proj without; encoder_attn built
    but never called (no encoder): its parameters drafted as param statements."""
    sz = Sizer(probe())
    v = sz.probe.symbol_values()
    h, a = v["h"], v["a"]
    kids = [_linear("q_proj", h, h, bias=True), _linear("k_proj", h, h), _linear("v_proj", h, h, bias=True),
            _linear("out_proj", h, h, bias=True)]
    attn = Module("l.self_attn", "self_attn", "WhisperAttention", attrs={"num_heads": a}, children=kids,
                  src="ln", order=1)
    cross = Module("l.encoder_attn", "encoder_attn", "WhisperAttention", children=[
        _linear("encoder_attn.k_proj", h, h), _linear("encoder_attn.q_proj", h, h, bias=True)])
    ln = Module("l.ln", "ln", "LayerNorm", params={"weight": (h,), "bias": (h,)}, src="input", order=0)
    layer = _layer([ln, attn, cross])
    lines = layer_lines(layer, sz, rotary=False)
    assert lines[0] == ("x = x + gqa_attention(layernorm(x, name = ln), a, a, h / a, qkv_bias = true, k_bias = false, "
                        "out_bias = true, rotary = false, name = self_attn)")
    assert lines[1:] == ["# built but never called by the forward (parameters only): encoder_attn",
                         "param encoder_attn_k_proj_weight[h, h]", "param encoder_attn_q_proj_weight[h, h]",
                         "param encoder_attn_q_proj_bias[h]"]
    text = _draft(layer, Sizer(probe()))
    assert _params(text, v) == layer.param_count()


def _fold_params(lines: list[str], l_value: int) -> int:
    text = "model t {\n  dim b\n  dim s\n  dim h\n  dim l\n  input x[b, s, h]\n" + \
        "\n".join("  " + x for x in lines) + "\n  return x\n}\n"
    got = costgraph.loads(text, path="<draft>").costs("model").evaluate(None, {"b": 1, "s": 1, "h": 10, "l": l_value})
    return int(got["params"])


def test_first_layers_of_their_own_then_a_period_fold():
    """Kimi Linear's default layers (transformers 5.24 KimiLinearConfig: a dense first layer, first_k_dense_replace 1;
    full attention where i and i % 4 == 0): layer 0 of its own, then layer j as layer j % 4. Counted by costgraph:
    at 11 layers, 1 dense, 2 full (4, 8), 8 linear; at 13 layers 3 full (4, 8, 12)."""
    from costgraph.drafting.model_file import _period, _periodic, _prefixed_period
    dense, full, lin = (["x = x + linear(x, h, name = d)"], ["x = x + linear(x, h, bias = false, name = f)"],
                        ["x = x + linear(linear(x, h, bias = false, name = l1), h, bias = false, name = l2)"])
    for n, full_count in ((11, 2), (13, 3)):
        texts = [dense] + [full if j % 4 == 0 else lin for j in range(1, n)]
        assert _period(texts) is None and _prefixed_period(texts) == (1, 4, False)
        lines = _periodic(texts, 4, "layers", prefix=1)
        assert lines[:3] == ["repeat l as layers[j] {   # the first 1 layer(s) of their own, then layer j as layer j % 4",
                             "  if j in [0] {", "    x = x + linear(x, h, name = d_first0)"]
        assert "    if j % 4 == 0 {" in lines
        assert _fold_params(lines, n) == 110 + full_count * 100 + (n - 1 - full_count) * 200
    assert _prefixed_period([dense, lin, full, lin]) is None     # a period seen once is no evidence


def test_first_and_last_layers_of_their_own_around_a_period():
    """Flint's default layers (transformers 5.24 FlintConfig: full attention where i < 2 or i % 4 == 1 or i is the
    last layer, the first two MLP-only): layers 0 and 1, and layer l - 1, of their own, the rest of period 4.
    Counted by costgraph at 11 and 13 layers."""
    from costgraph.drafting.model_file import _periodic, _prefixed_period
    dense, full, slide = (["x = x + linear(x, h, name = d)"], ["x = x + linear(x, h, bias = false, name = f)"],
                          ["x = x + linear(linear(x, h, bias = false, name = s1), h, bias = false, name = s2)"])
    for n in (11, 13):
        texts = [dense, dense] + [full if j % 4 == 1 or j == n - 1 else slide for j in range(2, n)]
        assert _prefixed_period(texts) == (2, 4, True)
        lines = _periodic(texts, 4, "layers", prefix=2, last=True)
        assert lines[1:3] == ["  if j in [l - 1] {", "    x = x + linear(x, h, bias = false, name = f_last)"]
        assert "    if j in [0, 1] {" in lines
        full_count = sum(1 for j in range(2, n) if j % 4 == 1 or j == n - 1)
        assert _fold_params(lines, n) == 2 * 110 + full_count * 100 + (n - 2 - full_count) * 200


def test_a_fixed_list_of_layers_folds_into_index_lists():
    """Nemotron-H's layers_block_type (transformers 5.24 NemotronHConfig: the layer count is the list's, whatever
    num_hidden_layers): ``repeat n as layers[j]`` with ``j in [...]``; counted by costgraph per listed layer."""
    from costgraph.drafting.model_file import _periodic
    m, e, a = (["x = x + linear(x, h, name = m)"], ["x = x + linear(x, h, bias = false, name = e)"],
               ["x = x + linear(linear(x, h, name = a1), h, name = a2)"])
    lines = _periodic([m, e, m, a, e, m], 6, "layers", listed=True)
    assert lines[:2] == ["repeat 6 as layers[j] {   # the config's list of 6 layers", "  if j in [3] {"]
    assert "    if j in [1, 4] {" in lines
    assert _fold_params(lines, 99) == 3 * 110 + 2 * 100 + 220


def test_gpt_neo_attention_types_are_cycled_to_the_probe_layers():
    """GPT-Neo's config requires one attention kind per layer (configuration_gpt_neo.py ``validate_architecture``:
    ``len(attention_layers) == num_layers``; default ``[[["global", "local"], 12]]``): a probe of 11 layers repeats the
    shortest period of the config's list and starts one more."""
    from costgraph.drafting.api import _cycled

    assert _cycled(["global", "local"] * 12, 11) == [[["global", "local"], 5], [["global"], 1]]
    assert _cycled(["global", "local"] * 12, 13) == [[["global", "local"], 6], [["global"], 1]]
    assert _cycled(["global"] * 24, 11) == [[["global"], 11]]
    assert _cycled(["local", "local", "global"] * 4, 17) == [[["local", "local", "global"], 5], [["local", "local"], 1]]


def test_module_names_are_names_of_the_language():
    """A module outside the layers named by a ModuleList index (XLM's ``transformer.layer_norm2.10``) is written as a
    name of its path (``name = 10`` does not load: the language's names start with a letter); a name taken twice
    (BERT's two LayerNorms) too."""
    from costgraph.drafting.model_file import _Names

    names = _Names()
    assert names(Module("transformer.layer_norm2.10", "10", "LayerNorm")) == "transformer_layer_norm2_10"
    assert names(Module("10", "10", "LayerNorm")) == "m_10"
    assert names(Module("a.LayerNorm", "LayerNorm", "LayerNorm")) == "LayerNorm"
    assert names(Module("b.LayerNorm", "LayerNorm", "LayerNorm")) == "b_LayerNorm"


def test_even_kv_probe_doubles_the_kv_heads_prime():
    """Differential attention splits V's KV heads into two halves (transformers 5.24 modeling_diffllama.py
    ``DiffLlamaAttention.__init__`` refuses odd ``num_key_value_heads``): its probes hold twice the KV heads' prime,
    still read back as ``kv``, ``a`` and ``a * d``."""
    fields = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim")
    for index in (0, 1):
        plain, even = Probe.make(fields, index), Probe.make(fields, index, even_kv=True)
        v = even.symbol_values()
        assert v["kv"] == 2 * plain.symbol_values()["kv"] and v["kv"] % 2 == 0
        assert (even.cover(v["kv"]), even.cover(v["a"] * v["d"]), even.cover(v["kv"] * v["d"])) == ("kv", "a * d",
                                                                                                    "kv * d")


def test_parallel_lists_fold_into_layers_post_norm_only():
    """XLM's layers as parallel ModuleLists (transformers 5.24 modeling_xlm.py ``XLMModel``: ``attentions[i]``,
    ``layer_norm1[i]``, ``ffns[i]``, ``layer_norm2[i]``) fold into one list of layers, each module named after its
    list, the first reading the layer's input; lists whose layer starts with a norm (pre-norm: which module reads
    the norm is not traced) are left alone."""
    from costgraph.drafting.parallel_lists import fold_parallel_lists

    def lists(first_norm: bool) -> Module:
        kinds = [("layer_norm1", "LayerNorm"), ("attentions", "MultiHeadAttention")] if first_norm else \
            [("attentions", "MultiHeadAttention"), ("layer_norm1", "LayerNorm")]
        listed = [Module(f"t.{n}", n, "ModuleList", children=[
            Module(f"t.{n}.{i}", str(i), cls, params={"weight": (8,)} if cls == "LayerNorm" else {},
                   children=[] if cls == "LayerNorm" else [Module(f"t.{n}.{i}.q_lin", "q_lin", "Linear", order=10 * i + j)],
                   order=10 * i + j) for i in range(2)]) for j, (n, cls) in enumerate(kinds)]
        return Module("", "", "M", children=[Module("t", "t", "XLMModel", children=listed, order=0)], order=0)

    root = fold_parallel_lists(lists(False), 2)
    layers = root.children[0].children[0]
    assert (layers.path, [c.path for c in layers.children]) == ("t.layers", ["t.layers.0", "t.layers.1"])
    assert [(c.name, c.path, c.src) for c in layers.children[1].children] == [
        ("attentions", "t.layers.1.attentions", "input"), ("layer_norm1", "t.layers.1.layer_norm1", "?")]
    assert layers.children[1].children[0].children[0].path == "t.layers.1.attentions.q_lin"
    pre = lists(True)
    assert fold_parallel_lists(pre, 2) is pre
    assert fold_parallel_lists(lists(False), 3).children[0].children[0].name == "attentions"   # no list of 3
