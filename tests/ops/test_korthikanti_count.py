"""The recompute FLOP count as a named convention (issue 27 item 4): ``rerun`` (what a policy
actually re-runs, default) beside ``korthikanti-eq8`` (Korthikanti et al. 2022, "Reducing
Activation Recomputation in Large Transformer Models", arXiv 2205.05198, App. A):

    model FLOPs    72 B L s h² (1 + s/6h + V/12hL)      (Eq. 7)
    hardware FLOPs 72 B L s h² (1 + s/3h + V/12hL)      (Eq. 8, selective recomputation)

an overhead of 2.7% for GPT-3 175B and 1.6% for MT-NLG 530B (the paper's figures). Exact
rationals from the GPT graph (matmul convention, --causal full)."""

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.engine.symbols import dim
from costgraph.training.compute import training_flops
from costgraph.training.memory import Layout

R = sympy.Rational
b, s, h, l, V, a = (dim(n) for n in ("b", "s", "h", "l", "V", "a"))
# GPT-3 175B (Brown et al. 2020 Table 2.1) and MT-NLG 530B (Smith et al. 2022), as Korthikanti et al.
# 2022 Table 3 lists them: h, a, L, s, V = 51200 (the padded GPT-2 vocabulary)
GPT3 = {h: 12288, a: 96, l: 96, s: 2048, V: 51200, b: 1}
MTNLG = {h: 20480, a: 128, l: 105, s: 2048, V: 51200, b: 1}


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt").graph


def _overhead(cg, vals, **kw):
    """hardware / model FLOPs − 1, exact, per iteration (m = d = 1)."""
    L = Layout(m=1, attention="eager", **kw).filled()
    L.d = 1
    f = training_flops(cg, L)
    return sympy.nsimplify(f["hardware_per_iteration"].xreplace(vals) / f["model_per_iteration"].xreplace(vals) - 1)


def _eq(sh, sv, *, hardware):
    """Eq. 8 / Eq. 7 − 1 at h, L, s, V (the B and 72BLsh² cancel)."""
    hh, LL, ss, VV = (sv[x] for x in (h, l, s, V))
    model = 1 + R(ss, 6 * hh) + R(VV, 12 * hh * LL)
    hw = 1 + R(ss, 3 * hh) + R(VV, 12 * hh * LL) if hardware else model
    return hw / model - 1


def test_eq8_reproduces_the_papers_overheads(gpt):
    # GPT-3 175B: s/6h = 1/36, V/12hL = 25/6912: overhead (1/36) / (7129/6912) = 192/7129 = 2.69%
    # MT-NLG 530B: s/6h = 1/60, V/12hL = 1/504: overhead (1/60) / (2567/2520) = 42/2567 = 1.64%
    for vals, want, pct in ((GPT3, R(192, 7129), "2.7%"), (MTNLG, R(42, 2567), "1.6%")):
        assert _eq(None, vals, hardware=True) == want
        assert f"{float(want):.1%}" == pct   # the paper's rounded figures
        for policy in ("selective", "selective-korthikanti"):
            assert _overhead(gpt, vals, recompute=policy, recompute_count="korthikanti-eq8") == want


def test_rerun_counts_what_runs_again(gpt):
    # selective-korthikanti re-runs QKᵀ → softmax → dropout: 2 B s² h per layer, a sixth of Eq. 8's
    # 12 B s² h: 32/7129 = 0.45% (GPT-3), 7/2567 = 0.27% (MT-NLG); Megatron's core_attn also re-runs
    # probs·V: 4 B s² h, a third: 64/7129 = 0.90%, 14/2567 = 0.55%
    for vals, k, m in ((GPT3, R(32, 7129), R(64, 7129)), (MTNLG, R(7, 2567), R(14, 2567))):
        assert _overhead(gpt, vals, recompute="selective-korthikanti") == k
        assert _overhead(gpt, vals, recompute="selective-korthikanti", recompute_count="rerun") == k
        assert _overhead(gpt, vals, recompute="selective") == m
        assert 6 * k == 3 * m == _overhead(gpt, vals, recompute="selective", recompute_count="korthikanti-eq8")
    assert f"{float(R(32, 7129)):.2%}" == "0.45%" and f"{float(R(7, 2567)):.2%}" == "0.27%"


def test_eq8_is_the_s_squared_part_of_eq7_once_more(gpt):
    # symbolically: Eq. 8 − Eq. 7 = 72BLsh²·s/6h = 12 B L s² h, the forward + backward of QKᵀ and probs·V
    L = Layout(m=1, attention="eager", recompute="selective", recompute_count="korthikanti-eq8").filled()
    L.d = 1
    f = training_flops(gpt, L)
    assert sympy.expand(f["hardware_per_iteration"] - 72 * b * l * s * h**2 * (1 + s / (3 * h) + V / (12 * h * l))) == 0
    # with a fused kernel the core is re-run once, however it is counted
    flash = Layout(m=1, attention="flash", recompute="selective", recompute_count="korthikanti-eq8").filled()
    flash.d = 1
    assert sympy.expand(training_flops(gpt, flash)["hardware_per_iteration"] - f["hardware_per_iteration"]) == 0
    # full recomputation: Eq. 8 does not apply; both counts are Narayanan et al. 2021 Eq. 3
    full = Layout(m=1, attention="eager", recompute="full", recompute_count="korthikanti-eq8").filled()
    full.d = 1
    want = 96 * b * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    assert sympy.expand(training_flops(gpt, full)["hardware_per_iteration"] - want) == 0


def test_cli_names_the_count_and_checks_it(capsys):
    argv = ["train", "gpt", "--config", "gpt3-175b", "--set", "V=51200", "--gpus", "8", "--tp", "8", "--recompute", "selective",
            "--attention", "eager", "--recompute-count", "korthikanti-eq8", "--format", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["plan"]["recompute_count"] == "korthikanti-eq8"
    hw, model = doc["flops"]["hardware_per_iteration"]["value"], doc["flops"]["model_per_iteration"]["value"]
    assert R(hw, model) - 1 == R(192, 7129)   # gpt3-175b (h 12288, l 96, s 2048) with the paper's V
    assert main(argv[:-2]) == 0
    assert "hardware FLOPs count the re-run as: korthikanti-eq8" in capsys.readouterr().out
    assert main(["train", "gpt", "--recompute-count", "paper"]) == 2
    assert "invalid choice: 'paper'" in capsys.readouterr().err
    with pytest.raises(costgraph.errors.CostgraphValueError, match="unknown recompute_count 'paper'"):
        Layout(recompute_count="paper").filled()
