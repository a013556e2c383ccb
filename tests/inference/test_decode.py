"""Decode totals and means in closed form (costgraph/inference/decode.py, issue 17 item 3):
exactly the sum of every decode step's exact roofline time (the loop costgraph ran before,
kept here as the oracle), in time independent of G; --generate 1 has no decode step."""

import subprocess
from fractions import Fraction
import sys
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.inference.decode import (N_STEP, ExactPow, bounded_subs, decode_totals, floor, materialize,
                                        sign)
from costgraph.inference.phases import G, P, Inference
from costgraph.inference.roofline import decode_closed_form, machine, step_seconds


def _value(e, n, at):
    """``e`` at ``n = at`` with Python Fractions (no SymPy evaluation): Add, Mul, Max, Min,
    integer powers, Rationals."""
    if e == n:
        return Fraction(at)
    if e.is_Rational:
        return Fraction(int(e.p), int(e.q))
    args = [_value(a, n, at) for a in e.args]
    if e.is_Add:
        return sum(args)
    if e.is_Mul:
        out = Fraction(1)
        for a in args:
            out *= a
        return out
    if isinstance(e, sympy.Max):
        return max(args)
    if isinstance(e, sympy.Min):
        return min(args)
    if e.is_Pow and e.exp.is_Integer:
        return args[0] ** int(e.exp)
    raise TypeError(e)


def _loop_total(inf, m, t, subs, prompt, generate):
    """The oracle: the sum the closed form replaces, one exact evaluation of the step time per
    decode step n = P, ..., P + G - 2 (as roofline.mean_decode_seconds @ 01e389e looped; here
    in exact Fractions throughout, where it evaluated floats and recovered them with nsimplify)."""
    n = sympy.Symbol("n_step", integer=True, nonnegative=True)
    f = materialize(bounded_subs(step_seconds(inf.step(1, n), m, t), subs))
    total = sum((_value(f, n, prompt + i) for i in range(generate - 1)), Fraction(0))
    return sympy.Rational(total.numerator, total.denominator)


_MODELS = {}


def _setting(name, config, batch):
    if name not in _MODELS:
        model = costgraph.load(name)
        _MODELS[name] = (model, Inference(model._inference_model()))
    model, inf = _MODELS[name]
    subs = {k: v for k, v in model.values(config).items() if k not in (inf.b, inf.s)}
    subs[inf.b] = sympy.Integer(batch)
    return inf, subs


CASES = [("llama", "llama-3-8b"), ("mistral", "mistral-7b"), ("gemma2", "gemma-2-9b"),
         ("mixtral", "mixtral-8x7b"), ("qwen2_moe", "qwen2-57b-a14b"), ("jamba", "jamba-v0.1"),
         ("mamba", "mamba-130m"), ("deepseek_v3", "deepseek-v3"), ("gpt_oss", "gpt-oss-20b")]


@pytest.mark.parametrize("name,config", CASES)
@pytest.mark.parametrize("batch", [1, 512])
def test_closed_form_equals_the_loop(name, config, batch):
    inf, subs = _setting(name, config, batch)
    m = machine("h100-sxm", "bf16")
    st = step_seconds(inf.step(1, N_STEP), m, 1)
    # prompts on both sides of the windows (4096 mistral/gemma2, 128 gpt-oss) and of the crossings
    for prompt, generate in ((1, 2), (100, 3), (4090, 17), (4000, 1000), (120, 1000)):
        dt = decode_totals(st, N_STEP, subs, P, G, prompt, generate)
        want = _loop_total(inf, m, 1, subs, prompt, generate)
        assert materialize(dt.total) == want
        assert materialize(dt.mean) == want / (generate - 1)
        # the expression in P, G and the dimensions gives the same number
        assert materialize(bounded_subs(dt.total_expr, {**subs, P: prompt, G: generate})) == want


@pytest.mark.parametrize("causal,activations", [("exact", False), ("half", True)])
def test_windowed_quadratic_steps_equal_the_loop(causal, activations):
    # causal half/exact count q·Min(n + q, w) - Min(·)^2/2-style pairs: a step time quadratic in n
    # below the window (Max/Min of quadratics: roots located to within 1, cut around them)
    model = costgraph.load("mistral")
    inf = Inference(model._inference_model(), causal=causal, activations=activations)
    m = machine("h100-sxm", "bf16")
    st = step_seconds(inf.step(1, N_STEP), m, 1)
    for batch in (1, 512):
        subs = {k: v for k, v in model.values("mistral-7b").items() if k not in (inf.b, inf.s)}
        subs[inf.b] = sympy.Integer(batch)
        for prompt, generate in ((1, 2), (4091, 17), (3900, 1000)):
            dt = decode_totals(st, N_STEP, subs, P, G, prompt, generate)
            want = _loop_total(inf, m, 1, subs, prompt, generate)
            assert dt.total == want
            assert bounded_subs(dt.total_expr, {**subs, P: prompt, G: generate}) == want


def test_windowed_crossings_are_split():
    # mistral at b = 512: each layer's attention turns from memory- to compute-bound before the
    # window fills, so the step time has several linear pieces, not one
    inf, subs = _setting("mistral", "mistral-7b", 512)
    st = step_seconds(inf.step(1, N_STEP), machine("h100-sxm", "bf16"), 1)
    dt = decode_totals(st, N_STEP, subs, P, G, 1, 10**12)
    assert len(dt.pieces) >= 2
    assert {p.lo for p in dt.pieces} >= {0, 4096}


def test_generate_1e12_is_the_closed_form():
    # not timed: the value at G = 10^12 equals Faulhaber's sum written out independently
    model = costgraph.load("llama")
    rep = model.infer(hardware="h100-sxm", prompt=512, generate=10**12, batch=1, values=model.values("llama-3-8b"))
    inf, subs = _setting("llama", "llama-3-8b", 1)
    m = machine("h100-sxm", "bf16")
    step = step_seconds(inf.step(1, N_STEP), m, 1).xreplace(subs)
    c0, c1 = step.xreplace({N_STEP: 0}), sympy.diff(step, N_STEP)   # memory-bound throughout: linear
    first, last, count = 512, 512 + 10**12 - 2, 10**12 - 1
    want = c0 * count + c1 * sympy.Rational((first + last) * count, 2)
    assert rep.values["decode_total_seconds"] == want
    assert rep.values["time_per_output_token_mean"] == want / count
    assert rep.values["tokens_per_second"] == count / want


def test_generate_1_has_no_decode_step():
    model = costgraph.load("llama")
    rep = model.infer(hardware="h100-sxm", prompt=512, generate=1, batch=1, values=model.values("llama-3-8b"))
    v = rep.values
    assert v["decode_total_seconds"] == 0
    for k in ("time_per_output_token", "time_per_output_token_mean", "tokens_per_second", "decode.seconds",
              "decode.kv_read_bytes", "compute_bound_batch"):
        assert v.get(k) is None, k
    doc = rep.to_dict()
    assert doc["time_per_output_token"]["value"] is None and doc["decode"]["seconds"]["value"] is None
    assert doc["decode_total_seconds"]["value"] == 0
    text = rep.to_text()
    assert "no decode step" in text
    assert "n = P + G - 2 cached: the last step" not in text


def test_mixture_at_long_prompts_stays_exact():
    # Qwen2-57B-A14B at P = 131072, b = 64: the prefill reads E(1 - (7/8)^(64·131072)) experts'
    # weights per layer; kept as an exact unevaluated power, printed as a float
    model = costgraph.load("qwen2_moe")
    rep = model.infer(hardware="h100-sxm", prompt=131072, generate=2, batch=64,
                      values=model.values("qwen2-57b-a14b"))
    w = rep.values["prefill.weight_bytes"]
    assert w.atoms(ExactPow) == {ExactPow(sympy.Rational(7, 8), 64 * 131072)}
    # every expert read: the whole weights, less (7/8)^8388608 of the experts (~10^-486478)
    assert sign(w - rep.values["weight_bytes"]) == -1
    assert floor(w) == rep.values["weight_bytes"] - 1
    doc = rep.to_dict()
    assert doc["prefill"]["weight_bytes"]["value"] == float(rep.values["weight_bytes"])


def test_exact_pow_evaluates_small_powers_and_signs_are_exact():
    assert ExactPow(sympy.Rational(3, 4), 10) == sympy.Rational(3, 4) ** 10
    big = ExactPow(sympy.Rational(15, 16), 10**7)
    assert isinstance(big, ExactPow) and str(big.evalf(5)) == "5.8076e-280288"
    assert sign(big) == 1 and sign(1 - big) == 1 and floor(5 - big) == 4
    # a difference no 32768-bit interval can tell from 0 is decided exactly
    tiny = ExactPow(sympy.Rational(1, 2), 70000)
    assert sign(tiny) == 1 and sign(-tiny) == -1
    assert floor(3 + tiny) == 3 and floor(3 - tiny) == 2


@pytest.mark.parametrize("name,config,prompt,batch", [("llama4_text", "llama-4-scout-17b-16e", 10**7, 1),
                                                     ("qwen2_moe", "qwen2-57b-a14b", 131072, 64)])
def test_moe_long_prompts_answer(name, config, prompt, batch):
    model = costgraph.load(name)
    rep = model.infer(hardware="h100-sxm", prompt=prompt, generate=1000, batch=batch, values=model.values(config))
    inf, subs = _setting(name, config, batch)
    m = machine("h100-sxm", "bf16")
    st = step_seconds(inf.step(1, N_STEP), m, 1)
    dt = decode_totals(st, N_STEP, subs, P, G, prompt, 1000)
    assert rep.values["time_per_output_token_mean"] == dt.mean
    # the first and last steps bound the mean (the step time grows with n)
    first = bounded_subs(st, {**subs, N_STEP: prompt})
    last = bounded_subs(st, {**subs, N_STEP: prompt + 998})
    assert sign(dt.mean - first) >= 0 and sign(last - dt.mean) >= 0
    assert rep.to_dict()["time_per_output_token_mean"]["value"] > 0


def test_cli_generate_accepts_powers_and_refuses_huge():
    def run(*a):
        return subprocess.run([str(Path(sys.executable).parent / "costgraph"), "infer", "llama", "--config", "llama-3-8b",
                               "--hardware", "h100-sxm", "--prompt", "512", *a], capture_output=True, text=True)

    ok = run("--generate", "10**12", "--format", "json")
    assert ok.returncode == 0, ok.stderr
    assert '"generate": 1000000000000' in ok.stdout
    assert run("--generate", "1e12").returncode == 0
    bad = run("--generate", "10**16")
    assert bad.returncode == 2 and "between 1 and 10**15" in bad.stderr
    assert run("--generate", "1.5").returncode == 2
