"""`optimal` and `solve` search only the sizes a model can have (issue 18, "Hangs and memory"):
when a size divides by the scaled dimension (``a/kv`` whole: kv divides a), the candidates are
the divisors (:func:`costgraph.symbolic.solve.divisor_candidates`), and the nearest valid size
is looked for among them only. The answers are those of the old integer-by-integer scan
(``candidates=None``, kept), which tried up to 100,000 sizes on each side (31 s for
``optimal llama --config llama-3-8b --scale kv --rule chinchilla``)."""

from __future__ import annotations

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.commands.solve import _candidates, _validity
from costgraph.engine.symbols import dim
from costgraph.symbolic.optimal import optimal
from costgraph.symbolic.solve import divisor_candidates, solve_budget


@pytest.fixture(scope="module")
def llama():
    model = costgraph.load("llama")
    return model, model.values("llama-3-8b"), model.costs()


def _counted(model, values, x):
    valid, _ = _validity(model, values, x, None)
    calls = []

    def counted(n):
        calls.append(n)
        return valid(n)
    return counted, calls


def test_candidates_are_the_divisors():
    # Llama-3-8B: a = 32 query heads, kv = 8 KV heads, h = 4096 (Meta's config.json)
    model = costgraph.load("llama")
    values = model.values("llama-3-8b")
    assert _candidates(model, values, dim("kv")) == [1, 2, 4, 8, 16, 32]        # a/kv whole
    # a must be a multiple of kv (head size d = 128 is its own dimension): no divisor bound, the scan stays
    assert _candidates(model, values, dim("a")) is None
    assert _candidates(model, values, dim("s")) is None                     # nothing divides by s
    gpt = costgraph.load("gpt")
    assert _candidates(gpt, gpt.values("gpt2"), dim("a")) == sympy.divisors(768)   # h/a, h = 768
    h, a, x = dim("h"), dim("a"), dim("kv")
    assert divisor_candidates([h / a, a / x, 2 * x], x, {h: 768, a: 12}) == [1, 2, 3, 4, 6, 12]
    assert divisor_candidates([h / (2 * x), a / x], x, {h: 40, a: 12}) == [1, 2, 4]   # gcd(40, 12)
    assert divisor_candidates([x + 1, h * x], x, {h: 40}) is None


def test_optimal_kv_chinchilla(llama):
    """The loss's minimum is at kv = 254 (not a divisor of a = 32): the old scan tried 222 sizes
    below it and 100,000 above; the candidates: 254, then 32 (none above)."""
    model, values, costs = llama
    kv = dim("kv")
    valid, calls = _counted(model, values, kv)
    opt = optimal(costs, values, kv, 10**23, rule="chinchilla", valid=valid,
                  candidates=_candidates(model, values, kv))
    assert (opt.value, opt.params, opt.tokens, opt.flops) == (32, 8835567616, 1593760346947,
                                                              99999999999989080129536)
    assert opt.flops_per_token == 62744690688
    assert calls == [254, 32]


def test_optimal_kv_chinchilla_command(capsys):
    assert main(["optimal", "llama", "--config", "llama-3-8b", "--scale", "kv", "--rule", "chinchilla",
                 "--flops", "1e23", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["value"], doc["params"], doc["tokens"]) == (32, 8835567616, 1593760346947)


def test_solve_kv(llama, capsys):
    """params ≤ 10^10 binds at kv = 66 (10,009,972,736 parameters at 67): the largest valid kv is 32."""
    model, values, costs = llama
    kv = dim("kv")
    given = {k: v for k, v in values.items() if k != kv}
    valid, calls = _counted(model, values, kv)
    sol = solve_budget(costs["params"], kv, given, 10**10, valid=valid, candidates=_candidates(model, values, kv))
    assert (sol.value, sol.boundary, sol.at, sol.beyond) == (32, 66, 8835567616, 10009972736)
    assert calls == [66, 32]
    assert main(["solve", "llama", "--config", "llama-3-8b", "--for", "kv", "--quantity", "params",
                 "--budget", "1e10", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["value"], doc["boundary"], doc["at_value"], doc["beyond"]) == (32, 66, 8835567616, 10009972736)


@pytest.mark.parametrize("name,config,symbol,quantity,budget,direction", [
    ("llama", "llama-3-8b", "kv", "params", 10**10, "largest"),
    ("llama", "llama-3-8b", "kv", "params", 9 * 10**9, "largest"),
    ("llama", "llama-3-8b", "kv", "kv_cache_bytes", 10**9, "largest"),
    ("llama", "llama-3-8b", "kv", "params", 10**10, "smallest"),
    ("llama", "llama-3-8b", "a", "activation_bytes", 8 * 10**10, "largest"),
    ("gpt", "gpt2", "a", "activation_bytes", 6 * 10**10, "largest"),
])
def test_same_answer_as_the_integer_scan(name, config, symbol, quantity, budget, direction):
    model = costgraph.load(name)
    values = model.values(config)
    costs = model.costs()
    x = dim(symbol)
    given = {k: v for k, v in values.items() if k != x}
    valid, _ = _validity(model, values, x, None)
    old = solve_budget(costs[quantity], x, given, budget, direction=direction, valid=valid)
    new = solve_budget(costs[quantity], x, given, budget, direction=direction, valid=valid,
                       candidates=_candidates(model, values, x))
    assert new == old and new.value is not None


def test_tokens_per_param_rule_same_answer(llama):
    model, values, costs = llama
    kv = dim("kv")
    valid, _ = _validity(model, values, kv, None)
    old = optimal(costs, values, kv, 10**23, valid=valid)
    new = optimal(costs, values, kv, 10**23, valid=valid, candidates=_candidates(model, values, kv))
    assert new == old and new.value == 32
