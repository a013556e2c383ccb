"""Evaluation: exact values by compiled integer arithmetic, the vectorized
evaluator (float64, int64 with an overflow guard, exact), located size
errors, and the text people read (issue 6, items 4, 6 and 7)."""

import numpy as np
import pytest
import sympy

import costgraph
from costgraph.numbers import units
from costgraph.cli import main


@pytest.fixture(scope="module")
def llama():
    return costgraph.load("llama").costs("model")


def test_evaluate_equals_sympy_substitution(llama):
    m = llama.model
    for b, s in [(1, 4096), (3, 1000), (64, 32768)]:
        subs = m.values("llama-2-70b", b=b, s=s)
        fast = llama.evaluate(config="llama-2-70b", b=b, s=s)
        for q, e in llama.quantities.items():
            assert fast[q] == int(e.xreplace(subs)), q
    # Llama-2-70B: 68,976,648,192 parameters (Touvron et al. 2023; HF config params)
    assert llama.evaluate(config="llama-2-70b")["params"] == 68_976_648_192


def test_evaluate_windows_and_rationals():
    # Mistral's window: Min(s, w) in the KV cache; causal 'half' puts 1/2 in FLOPs
    c = costgraph.load("mistral").costs("model", causal="half")
    for s in (1024, 4096, 4097, 32768):
        subs = c.model.values("mistral-7b", s=s)
        got = c.evaluate(config="mistral-7b", s=s)
        for q, e in c.quantities.items():
            assert got[q] == e.xreplace(subs), (q, s)


def test_compiled_float_int_exact_agree_with_evaluate(llama):
    b = np.array([1, 2, 8, 33])[:, None]
    s = np.array([128, 1000, 4096])[None, :]
    f64 = llama.compile("llama-2-70b")(b=b, s=s)
    i64 = llama.compile("llama-2-70b", dtype="int64")(b=b, s=s)
    exact = llama.compile("llama-2-70b", dtype="exact")(b=b, s=s)
    for i, bb in enumerate(b[:, 0]):
        for j, ss in enumerate(s[0]):
            want = llama.evaluate(config="llama-2-70b", b=int(bb), s=int(ss))
            for q, v in want.items():
                assert i64[q][i, j] == v and exact[q][i, j] == v, q
                assert f64[q][i, j] == pytest.approx(v, rel=1e-12)


def test_int64_guard_refuses_instead_of_wrapping(llama):
    # backward FLOPs of Llama-2-70B at b = 4096, s = 131072 pass 2^63: int64 would wrap around
    b, s = np.array([1, 4096]), np.array([4096, 131072])
    exact = llama.compile("llama-2-70b", dtype="exact")(b=b, s=s)["flops_backward"]
    assert exact[1] > 2**63 and isinstance(exact[1], int)
    with pytest.raises(costgraph.CostgraphValueError, match="int64 evaluation refused"):
        llama.compile("llama-2-70b", dtype="int64")(b=b, s=s)
    # each point alone below the range is fine
    assert llama.compile("llama-2-70b", dtype="int64")(b=b[:1], s=s[:1])["flops_backward"][0] == exact[0]


def test_compile_arguments(llama):
    f = llama.compile("llama-2-70b", h=4096)
    assert "h" in f.symbols and f.defaults["h"] == 4096
    with pytest.raises(costgraph.CostgraphValueError, match="no symbol zz"):
        f(zz=1)
    with pytest.raises(costgraph.CostgraphValueError, match="no value for"):
        llama.compile()(b=1)
    with pytest.raises(costgraph.CostgraphValueError, match="unknown dtype"):
        llama.compile(dtype="int32")


def test_size_error_is_located_at_the_call(capsys):
    # h/a = 768/7: the split into heads is at std/attention.cg, line 13, the split_heads call
    assert main(["derive", "gpt", "--config", "gpt2", "--set", "a=7"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("std/attention.cg:13:")
    assert "h/a = 768/7" in err and "split_heads(q, heads)" in err and "^" in err


def test_numbers_people_read():
    assert units.with_unit("params", 528) == "528"
    assert units.with_unit("activation_bytes", 80) == "80 bytes"
    assert units.with_unit("activation_bytes", 1_079_787_520) == "1,079,787,520 bytes (1.08 GB, 1.01 GiB)"
    assert units.with_unit("params", 124_439_808) == "124,439,808 (124.4 M)"


def test_text_header_partial_values_and_warning(capsys):
    assert main(["derive", "gpt", "--set", "h=768", "l=12", "bias=false", "--profile", "pytorch"]) == 0
    out = capsys.readouterr().out
    assert "options: bias=false; dropout on; activation profile 'pytorch'" in out
    assert "precision 'bf16'" in out
    # values for some symbols: formulas with them put in (GPT without biases: 12 h^2 l + ...)
    assert "with h=768, l=12 (no value for V, a, b, s, s_max):" in out
    # 12 h² l + 2 h l + h (LayerNorm weights without biases, nanoGPT bias=False) at h = 768, l = 12
    assert "768 V + 768 s_max + 84953856" in out
    assert main(["derive", "gpt", "--config", "gpt2", "--set", "s=2048"]) == 0
    assert "warning: s = 2,048 is longer than s_max = 1,024" in capsys.readouterr().out


def test_reprs_are_short():
    m = costgraph.load("gpt")
    assert repr(m) == ("<costgraph.Model 'gpt': 30 operator nodes, symbols b s h a l V s_max, "
                       "bias=true, profile=korthikanti>")
    r = repr(m.costs("layer"))
    assert r == "<costgraph.Costs of 'gpt' at scope 'layer' (matmul, bf16, causal=full): params = 12 h^2 + 13 h>"
    # Jupyter shows the CLI's LaTeX rows, active parameters and KV cache included
    tex = m.costs()._repr_latex_()
    assert "active parameters" in tex and "KV cache bytes" in tex and tex.startswith("$\\begin{aligned}")


def test_compiled_refuses_values_that_are_not_numbers(llama):
    f = llama.compile("llama-2-70b")
    for bad in (None, "8", [True, False], [1.5j]):
        with pytest.raises(costgraph.CostgraphValueError, match="whole numbers"):
            f(b=bad)
    with pytest.raises(costgraph.CostgraphValueError, match="whole numbers"):
        llama.compile("llama-2-70b", dtype="int64")(b=np.array([1.5]))


def test_gpt_kv_cache_counts_k_and_v_views_of_one_fused_storage():
    # K and V are views of GPT-2's fused c_attn output: each is cached, 2 × b s h × 2 bytes per layer
    # (a regression: deduplicating cache entries by storage counted only one of them)
    b, s, h = (sympy.Symbol(n, positive=True, integer=True) for n in "bsh")
    assert sympy.expand(costgraph.load("gpt").costs("layer").kv_cache_bytes - 4 * b * s * h) == 0
    assert costgraph.load("gpt").costs().evaluate(config="gpt2")["kv_cache_bytes_per_token"] == 36_864


def test_compiled_refuses_negative_fractional_nan_and_positional(llama):
    f = llama.compile("llama-2-70b")
    for bad in (-1, 1.5, np.nan, np.array([1, 0])):
        with pytest.raises(costgraph.CostgraphValueError):
            f(b=bad)
    with pytest.raises(costgraph.CostgraphValueError, match="by name"):
        f(1)
    # NumPy integers are whole numbers (sweeps)
    assert llama.evaluate(config="llama-2-70b", b=np.int64(2))["params"] == 68_976_648_192


def test_caret_of_a_huge_line_stays_short(tmp_path, capsys):
    # a 5 MB comment line: the message shows a 100-character window and a caret within it
    f = tmp_path / "huge.cg"
    f.write_text("# " + "x" * 200_000 + "\nmodel m { return }\n")
    assert main(["derive", str(f)]) == 2
    assert len(capsys.readouterr().err) < 2000


def test_exact_evaluation_of_a_fraction_inside_min_past_2_53():
    # Min(h/3, w) was lambdified as a float division h/3: wrong digits once h passes 2^53.
    # Written Min(h, 3 w)/3 (costgraph.numbers.integer_form), it is exact: h·⌊h/3⌋ for h divisible by 3.
    from costgraph.numbers.evaluator import ExactEvaluator
    from costgraph.engine.symbols import dim

    h, w = dim("h"), dim("w")
    big = 6 * 10**17 + 6
    assert ExactEvaluator([h * sympy.Min(h / 3, w)], [h, w])([big, 10**30]) == [big * (big // 3)]


def test_floors_of_shared_forms_turned_once_as_per_formula():
    """issue 27 item 6 (speed): the float64 compile turns floor/ceiling into integer divisions in one walk of the
    forms' distinct subexpressions: the very expressions (srepr) the per-formula replace gives, and those without
    a floor left as they are (the same objects)."""
    from costgraph.numbers.evaluator import _integer_floors, _integer_floors_all

    a, b, c = sympy.symbols("x0 x1 x2", positive=True, integer=True)
    shared = sympy.ceiling(a * b / 3) + sympy.floor(sympy.floor(a / 2) * c / 5)
    forms = [shared * c, shared + a, sympy.Max(a * b, c + 1), a / 7 + b, sympy.floor(shared / 4), shared]
    got = _integer_floors_all(forms)
    assert [sympy.srepr(g) for g in got] == [sympy.srepr(_integer_floors(f)) for f in forms]
    assert got[2] is forms[2] and got[3] is forms[3]
    assert not any(g.has(sympy.floor, sympy.ceiling) for g in got)


def test_float64_printer_prints_what_lambdify_prints():
    """issue 27 item 6 (speed): the float64 compile's printer (evaluator._np_printer: lambdify's NumPyPrinter, less
    its pass over re(...) of an UnevaluatedExpr) writes the very source lambdify's own writes, CSE and all; a form
    holding an ``re`` keeps lambdify's own printer (None)."""
    import inspect

    from costgraph.numbers.evaluator import _integer_floors_all, _np_modules, _np_printer

    a, b, c = sympy.symbols("x0 x1 x2", positive=True, integer=True)
    shared = sympy.ceiling(a * b / 3) + sympy.Max(a * c, b + 7, evaluate=False)
    forms = _integer_floors_all([shared * c, shared + a / 5, sympy.Min(a * b, c + 1) ** 2, a / 7 + b, shared])
    ours = sympy.lambdify([a, b, c], forms, modules=_np_modules(), cse=True, use_imps=False,
                          printer=_np_printer(forms))
    theirs = sympy.lambdify([a, b, c], forms, modules=_np_modules(), cse=True, use_imps=False)
    assert inspect.getsource(ours) == inspect.getsource(theirs)
    point = [np.array([3.0, 8.0]), np.array([5.0, 2.0]), np.array([7.0, 11.0])]
    assert all(np.array_equal(x, y) for x, y in zip(ours(*point), theirs(*point)))
    assert _np_printer(forms) is not None and _np_printer([a + sympy.re(sympy.Symbol("z"))]) is None
