"""Symbolic analysis: solve, sensitivity, leading terms, diff, compute-optimal
(costgraph.symbolic and the solve/sensitivity/leading/diff/optimal commands)."""

import json
from fractions import Fraction

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.symbolic.diff import diff_costs
from costgraph.symbolic.leading import leading
from costgraph.symbolic.optimal import chinchilla_closed_form, optimal
from costgraph.symbolic.sensitivity import sensitivity
from costgraph.symbolic.solve import BUDGET, solve_budget
from costgraph.engine.symbols import dim

b, s, h, a, l = (dim(n) for n in "bshal")


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


@pytest.fixture(scope="module")
def llama():
    return costgraph.load("llama")


# ------------------------------------------------------------------- solve

def test_largest_s_within_an_activation_budget_is_exact_and_matches_the_closed_form(gpt):
    costs = gpt.costs("model")
    values = gpt.values("gpt2")
    budget = 60 * 10**9
    sol = solve_budget(costs["activation_bytes"], s, values, budget)
    # the integer answer is the boundary: Q(n) <= M < Q(n + 1), evaluated independently
    assert costs.evaluate("gpt2", s=sol.value)["activation_bytes"] <= budget
    assert costs.evaluate("gpt2", s=sol.value + 1)["activation_bytes"] > budget
    assert sol.monotone == "proven"
    # the closed form is the positive root of the quadratic Q(s) = M: it satisfies the equation exactly
    q = costs["activation_bytes"]
    assert sympy.simplify(q.xreplace({s: sol.closed_form}) - BUDGET) == 0
    rest = {k: v for k, v in values.items() if k != s}
    assert sympy.floor(sol.closed_form.xreplace({**rest, BUDGET: budget})) == sol.value


def test_llama3_8b_kv_cache_fits_80_sequences_of_8192_tokens_in_80_gib(llama):
    # Llama-3-8B (config.json: 32 layers, 8 KV heads of 128): 2 (K, V) · 2 bytes · 32 · 8 · 128 = 131,072
    # bytes per token, so an 8,192-token sequence holds exactly 1 GiB and 80 GiB hold exactly b = 80.
    costs = llama.costs()
    sol = solve_budget(costs["kv_cache_bytes"], b, llama.values("llama-3-8b"), 80 * 2**30)
    assert (sol.value, sol.at, sol.beyond) == (80, 80 * 2**30, 81 * 2**30)
    assert sympy.expand(sol.closed_form - BUDGET / (4 * l * dim("kv") * dim("d") * s)) == 0


def test_smallest_data_parallel_degree_under_zero3(llama):
    mem = llama.train(zero=3, recompute="full", attention="flash")
    total = mem.stages[0].memory["total"]
    nd = next(x for x in total.free_symbols if str(x) == "N_d")
    values = llama.values("llama-3-8b", b=1)
    sol = solve_budget(total, nd, values, 80 * 10**9, direction="smallest")
    at = lambda n: total.xreplace({**values, nd: n})  # noqa: E731
    assert at(sol.value) <= 80 * 10**9 < at(sol.value - 1)
    assert sol.monotone == "proven"


def test_solve_refuses_what_it_cannot_do(gpt):
    costs = gpt.costs("model")
    with pytest.raises(costgraph.CostgraphError, match="does not depend on"):
        solve_budget(costs["params"], s, gpt.values("gpt2"), 10**9)
    with pytest.raises(costgraph.CostgraphError, match="no value for"):
        solve_budget(costs["activation_bytes"], s, {}, 10**9)
    sol = solve_budget(costs["activation_bytes"], s, gpt.values("gpt2"), 10)
    assert sol.value is None


# ------------------------------------------------------------- sensitivity

def test_elasticity_of_gpt_layer_flops_in_s(gpt):
    # Narayanan et al. 2021: a layer's forward FLOPs are 24 b s h² + 4 b s² h, so
    # ∂/∂s = 24 b h² + 8 b s h and ε = s·(24 b h² + 8 b s h)/(24 b s h² + 4 b s² h) = (6h + 2s)/(6h + s)
    sens = sensitivity(gpt.costs("layer")["flops_forward"], s)
    assert sympy.expand(sens.derivative - (24 * b * h**2 + 8 * b * s * h)) == 0
    assert sympy.simplify(sens.elasticity - (6 * h + 2 * s) / (6 * h + s)) == 0
    assert sympy.expand(sens.step - (24 * b * h**2 + 4 * b * h * (2 * s + 1))) == 0


# ----------------------------------------------------------------- leading

def test_leading_terms_of_gpt_layer_flops(gpt):
    f = gpt.costs("layer")["flops_forward"]
    wide = leading(f, [h])          # h ≫ s: the parameter matmuls, 2 FLOPs × 12 h² weights × b s tokens
    assert sympy.expand(wide.lead - 24 * b * s * h**2) == 0
    assert sympy.simplify(wide.ratio - s / (6 * h)) == 0
    long = leading(f, [s])          # s ≫ h: attention's QKᵀ and PV, 4 b s² h
    assert sympy.expand(long.lead - 4 * b * s**2 * h) == 0


def test_leading_refuses_a_dominant_symbol_inside_min():
    m = costgraph.load("mistral")
    with pytest.raises(costgraph.CostgraphError, match="Min"):
        leading(m.costs()["flops_forward"], [s])


# -------------------------------------------------------------------- diff

def test_diff_of_two_models_sums_over_the_nodes(gpt, llama):
    ca, cb = gpt.costs(), llama.costs()
    for d in diff_costs(ca, cb):
        assert sympy.expand(d.delta - (cb[d.quantity] - ca[d.quantity])) == 0
        assert sympy.expand(sum((c.delta for c in d.changes), sympy.Integer(0)) - d.delta) == 0
    params = diff_costs(ca, cb, quantities=("params",))[0]
    paths = {c.path for c in params.changes}
    assert {"wpe", "layers/layer/mlp/gate_proj", "layers/mlp/c_fc"} <= paths


def test_diff_of_two_configurations_gives_numbers(gpt):
    c = gpt.costs()
    va, vb = gpt.values("gpt2"), gpt.values("gpt2-medium")
    d = diff_costs(c, c, va, vb, quantities=("params",))[0]
    # GPT-2 124,439,808 and GPT-2 medium 354,823,168 parameters (Radford et al. 2019; HF counts, tied head)
    assert (d.a, d.b, d.delta) == (124_439_808, 354_823_168, 0)
    assert sum(ch.value for ch in d.changes) == 354_823_168 - 124_439_808


# ------------------------------------------------------------------ optimal

def test_tokens_per_param_rule_spends_the_budget_exactly_at_the_boundary(llama):
    costs, values = llama.costs(), llama.values("llama-3-8b")
    budget = 10**23
    opt = optimal(costs, values, l, budget)
    assert opt.tokens == 20 * opt.params
    def spend(depth):
        v = {**values, l: depth}
        n = costs["params"].xreplace(v)
        f = (costs["flops_forward"] + costs["flops_backward"]).xreplace(v) / (v[b] * v[s])
        return 20 * n * f
    assert spend(opt.value) <= budget < spend(opt.value + 1)
    assert opt.flops == spend(opt.value)


def test_chinchilla_rule_is_a_local_minimum_of_the_fitted_loss(llama):
    costs, values = llama.costs(), llama.values("llama-3-8b")
    opt = optimal(costs, values, l, 10**23, rule="chinchilla")
    assert opt.tokens * opt.flops_per_token <= 10**23 < (opt.tokens + 1) * opt.flops_per_token
    from costgraph.symbolic.optimal import constants
    c = {k: float(v) for k, v in constants()["chinchilla"].items()}
    def loss(depth):
        v = {**values, l: depth}
        n = int(costs["params"].xreplace(v))
        f = Fraction(int((costs["flops_forward"] + costs["flops_backward"]).xreplace(v)), v[b] * v[s])
        return c["E"] + c["A"] / n ** c["alpha"] + c["B"] / (10**23 / float(f)) ** c["beta"]
    assert loss(opt.value) <= loss(opt.value - 1) and loss(opt.value) <= loss(opt.value + 1)


def test_chinchilla_closed_form_spends_6nd():
    # Hoffmann et al. 2022, Eq. 4: N_opt·D_opt = C/6 by construction; exponents a = β/(α+β) = 0.4516…
    n, d = chinchilla_closed_form(5.76e23)
    assert abs(6 * n * d / 5.76e23 - 1) < 1e-12
    n2, _ = chinchilla_closed_form(5.76e24)
    assert abs(n2 / n - 10 ** (0.28 / 0.62)) < 1e-9


# --------------------------------------------------------------------- CLI

def test_cli_commands(capsys):
    assert main(["solve", "llama", "--config", "llama-3-8b", "--for", "b", "--quantity", "kv_cache_bytes",
                 "--budget", "80GiB", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["value"] == 80 and doc["closed_form"]["budget_symbol"] == "M"
    assert main(["sensitivity", "gpt", "--scope", "layer", "--wrt", "s", "--quantity", "flops_forward"]) == 0
    assert "(2 s + 6 h)/(s + 6 h)" in capsys.readouterr().out
    assert main(["leading", "gpt", "--scope", "layer", "--large", "h", "--quantity", "flops_forward"]) == 0
    assert "24 b s h^2" in capsys.readouterr().out
    assert main(["diff", "gpt@gpt2", "gpt@gpt2-medium", "--quantity", "params", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["quantities"]["params"]["value"] == 354_823_168 - 124_439_808
    assert main(["optimal", "llama", "--config", "llama-3-8b", "--flops", "1e23", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["value"] == 112


@pytest.mark.parametrize("argv, message", [
    (["solve", "gpt", "--config", "gpt2", "--for", "zz", "--budget", "1GB"], "no symbol 'zz'"),
    (["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "lots"], "cannot read"),
    (["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "1GB", "--quantity", "nope"], "unknown quantity"),
    (["solve", "gpt", "--config", "gpt2", "--set", "s=5", "--for", "s", "--budget", "1GB"], "solved for"),
    (["diff", "gpt@gpt2", "llama", "--quantity", "params"], "both sides"),
    (["optimal", "llama", "--config", "llama-3-8b", "--flops", "1e3"], "do not"),
    (["leading", "gpt", "--large", "q"], "no symbol"),
])
def test_cli_bad_input_exits_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("argv, error, hint", [
    (["leading", "gpt", "--large", "s,h"], "error: --large 's,h': one name per word, not a list in one word",
     "hint: write them apart, separated by spaces: --large s h (the most dominant first)"),
    (["diff", "gpt", "llama", "--quantity", "params, kv_cache_bytes"],
     "error: --quantity 'params, kv_cache_bytes': one name per word, not a list in one word",
     "hint: write them apart, separated by spaces: --quantity params kv_cache_bytes"),
])
def test_a_list_in_one_word_says_how_to_write_it(argv, error, hint, capsys):
    """``leading --large s,h`` said "the quantity has no symbol 's,h'" (issue 30): the message names the flag
    and the hint the command line that works."""
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [error, hint]


# ----------------------------------------------------------- JSON schemas

SCHEMA_CASES = [
    ("solve", ["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "60GB"]),
    ("solve", ["solve", "llama", "--config", "llama-3-8b", "--train", "--pp", "4", "--gpus", "8", "--recompute",
               "full", "--quantity", "total", "--budget", "80GB", "--for", "b"]),
    ("solve", ["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "10"]),
    ("sensitivity", ["sensitivity", "gpt", "--scope", "layer", "--wrt", "s", "--config", "gpt2"]),
    ("sensitivity", ["sensitivity", "llama", "--wrt", "h"]),
    ("leading", ["leading", "llama", "--large", "s", "h"]),
    ("diff", ["diff", "gpt", "llama"]),
    ("diff", ["diff", "llama@llama-2-7b", "llama@llama-3-8b", "--quantity", "params", "kv_cache_bytes"]),
    ("optimal", ["optimal", "llama", "--config", "llama-3-8b", "--flops", "1e23"]),
    ("optimal", ["optimal", "llama", "--config", "llama-3-8b", "--flops", "1e23", "--rule", "chinchilla"]),
]


@pytest.mark.parametrize("name, argv", SCHEMA_CASES)
def test_json_documents_follow_their_schemas(name, argv, capsys):
    from costgraph.export.exprtree import from_tree
    from costgraph.export.schema import validator

    assert main(argv + ["--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    v = validator(name)
    v.check_schema(v.schema)
    assert not list(v.iter_errors(doc))
    broken = dict(doc)
    broken.pop(next(iter(v.schema["required"])))
    assert list(v.iter_errors(broken))          # a missing required key is caught
    # every formula's tree rebuilds its expr exactly
    def formulas(node):
        if isinstance(node, dict):
            if {"expr", "tree", "latex"} <= set(node):
                yield node
            for x in node.values():
                yield from formulas(x)
        elif isinstance(node, list):
            for x in node:
                yield from formulas(x)
    from costgraph.export.printing import to_latex, to_python

    found = list(formulas(doc))
    assert found or name == "optimal"
    for f in found:   # the tree is the same formula as expr and latex: it prints back to both
        e = from_tree(f["tree"])
        assert (to_python(e), to_latex(e)) == (f["expr"], f["latex"])


# ------------------------------------------------- sizes the model can have (new-user trial)

def test_solve_answers_a_valid_size(capsys):
    # GPT-2 small (h = 768): the activation budget binds at a = 948, where h/a = 768/948 is
    # fractional; the largest a ≤ 948 dividing 768 is 768 (derive refuses a = 948)
    assert main(["solve", "gpt", "--config", "gpt2", "--for", "a", "--budget", "60GB", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["value"], doc["boundary"]) == (768, 948)
    # Llama-3-8B: a must be a multiple of kv = 8 (and divide h = 4096): the budget binds at 10 → 8
    assert main(["solve", "llama", "--config", "llama-3-8b", "--for", "a", "--budget", "80GB",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["value"], doc["boundary"]) == (8, 10)


def test_solve_train_refuses_an_uneven_layout_and_defaults_to_total(capsys):
    # t = 5 cannot split GPT-2's 3h = 2304 QKV columns: train refuses it, solve too
    assert main(["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "60GB", "--train", "--tp", "5"]) == 2
    assert "splits an axis of 2304" in capsys.readouterr().err
    assert main(["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "60GB", "--train",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["quantity"] == "total"
    assert main(["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "60GB", "--gpus", "3"]) == 2
    assert "add --train" in capsys.readouterr().err


def test_solve_train_refuses_an_uneven_layout_before_deriving(capsys, monkeypatch):
    # check_layout at the given sizes (s left out) already refuses t = 5: no memory is derived first
    import costgraph.commands.solve as solve_command

    def derived(*args):
        raise AssertionError("derived the memory of a layout the sizes refuse")
    monkeypatch.setattr(solve_command, "_expressions", derived)
    assert main(["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "60GB", "--train", "--tp", "5"]) == 2
    assert "no valid s: tensor parallelism t = 5 splits an axis of 2304" in capsys.readouterr().err


def test_solve_warns_past_the_position_table(capsys):
    assert main(["solve", "gpt", "--config", "gpt2", "--for", "s", "--budget", "60GB", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["value"] == 8911 and "s_max = 1,024" in doc["warnings"][0]


def test_optimal_answers_a_valid_size_and_refuses_past_the_search_bound(capsys):
    assert main(["optimal", "gpt", "--config", "gpt2", "--flops", "1e20", "--scale", "h", "--format", "json"]) == 0
    h = json.loads(capsys.readouterr().out)["value"]
    assert h % 12 == 0          # a = 12 heads: h/a whole (2,308 before, 577/3 per head)
    for rule in ("tokens-per-param", "chinchilla"):
        assert main(["optimal", "gpt", "--config", "gpt2", "--flops", "1e60", "--rule", rule]) == 2
        assert "2^62" in capsys.readouterr().err
    assert main(["optimal", "gpt", "--config", "gpt2", "--flops", "abc"]) == 2
    assert "cannot read --flops" in capsys.readouterr().err


def test_sensitivity_at_a_min_switch_has_no_derivative(capsys):
    # Mistral-7B's KV cache 4 b d kv l Min(s, w) at s = w = 4096: 131,072 bytes per token below w, 0 above
    assert main(["sensitivity", "mistral", "--wrt", "s", "--config", "mistral-7b", "--set", "s=4096",
                 "--quantity", "kv_cache_bytes", "--format", "json"]) == 0
    at = json.loads(capsys.readouterr().out)["quantities"]["kv_cache_bytes"]["at"]
    assert at == {"derivative": None, "step": "0", "elasticity": None, "step_back": "131072"}
    assert main(["sensitivity", "mistral", "--wrt", "s", "--config", "mistral-7b", "--set", "s=2048",
                 "--quantity", "kv_cache_bytes", "--format", "json"]) == 0
    at = json.loads(capsys.readouterr().out)["quantities"]["kv_cache_bytes"]["at"]
    assert (at["derivative"], at["elasticity"]) == ("131072", "1")


@pytest.mark.parametrize("argv, message", [
    (["leading", "gpt", "--large", "s", "s"], "named twice"),
    (["leading", "gemma3_text", "--large", "l"], "layer pattern's count"),
    (["diff", "gpt@", "llama"], "no configuration after '@'"),
])
def test_more_refusals(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


# --- sensitivity in a rounded layer count (floor(l/6) global layers; issue 18) ---------------------------------------


# Gemma-3-1B (models/gemma3_text.cg, config gemma-3-1b: d = 256, kv = 1, w = 512, s = 32768, b = 1):
# a local layer caches 2·2 bytes·d·kv·min(s, w) = 524,288 B, a global one 2·2·d·kv·s = 33,554,432 B;
# floor(l/6) of the l layers are global.
def test_sensitivity_in_a_rounded_layer_count(cg):
    import json

    p = cg("sensitivity", "gemma3_text", "--config", "gemma-3-1b", "--wrt", "l", "--quantity", "kv_cache_bytes",
            "--format", "json")
    assert p.returncode == 0, p.stderr
    q = json.loads(p.stdout)["quantities"]["kv_cache_bytes"]
    # l = 26: 26/6 not whole, floor(l/6) locally constant: ∂/∂l is one local layer's bytes
    assert q["at"] == {"derivative": "524288", "step": "524288", "elasticity": "13/139", "step_back": "524288"}
    assert q["differentiable"] is True


def test_sensitivity_where_the_rounded_count_jumps(cg):
    p = cg("sensitivity", "gemma3_text", "--config", "gemma-3-1b", "--set", "l=24", "--wrt", "l",
            "--quantity", "kv_cache_bytes")
    assert p.returncode == 0, p.stderr
    # l = 24 → 25 adds a local layer; 24 → 23 removes a global one (floor(23/6) = 3)
    assert "no derivative (a min/max switches or a rounded count jumps exactly here); one-sided whole steps: " \
           "+1 → 524,288, −1 → 33,554,432" in p.stdout


@pytest.mark.parametrize("model", ["gpt_oss", "jamba", "llama4_text"])
def test_sensitivity_in_l_of_pattern_models(cg, model):
    p = cg("sensitivity", model, "--wrt", "l")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Piecewise((0, Ne(l, " in p.stdout


def test_sensitivity_rounded_derivative_exact():
    import sympy

    from costgraph.symbolic.sensitivity import sensitivity

    l, k = sympy.symbols("l k", positive=True, integer=True)
    sens = sensitivity(7 * l + 5 * sympy.floor(l / 6) + 3 * sympy.ceiling(l / 4) + sympy.Mod(l, 5), l)
    assert sens.derivative.xreplace({l: sympy.Integer(26)}) == 8      # 7 + 0 + 0 + 1
    assert sens.derivative.xreplace({l: sympy.Integer(24)}) is sympy.nan   # 24/6 whole: no derivative
    assert sens.step.xreplace({l: sympy.Integer(29)}) == 7 + 5 + 0 - 4   # 29 → 30: floor 4 → 5, Mod 4 → 0


def test_a_pipeline_degree_past_any_split_is_refused_not_allocated(capsys):
    """--pp 10**30 made a list of 10**30 stage shares (OverflowError, exit 3, found by the property
    tests): a split of more than layer_split.MAX_CHUNKS chunks is refused first (exit 2)."""
    from cli_checks import refused

    refused(capsys, ["solve", "gemma4_text", "--train", "--tp", "1", "--pp", str(10**30), "--smallest", "--for", "b",
                     "--quantity", "flops_forward", "--cp", "4", "--budget", "0.45"],
            "at most 1,024 pipeline stages")   # Layout's bound, before layer_split.MAX_CHUNKS


def test_many_stages_over_symbolic_layer_counts_are_refused_in_time(capsys):
    """The fuzz campaign (bench/bench_fuzz.py, seed 10012): report qwen2_vl --pp 68306 --format html ran
    278 s of CPU (every stage's closed form over the vision and language layer counts, l and lv symbolic):
    over Layout's 1,024 stages refused; over symbolic counts, more than pipeline.MAX_SYMBOLIC_STAGES (128;
    twice Narayanan et al. 2021's PP 64) refused, with the hint to give the counts."""
    from cli_checks import refused

    refused(capsys, ["report", "qwen2_vl", "--pp", "68306", "--format", "html"], "p (--pp) is 68,306: at most 1,024")
    refused(capsys, ["train", "qwen2_vl", "--pp", "129"],
            "129 pipeline stages over symbolic layer counts: at most 128", "--config NAME or --set l=N")
    refused(capsys, ["train", "qwen2_vl", "--config", "qwen2-vl-7b", "--pp", "129"],
            "129 pipeline stages for 60 layers: a stage would hold none")
