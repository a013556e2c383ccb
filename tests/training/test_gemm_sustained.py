"""The sustained GEMM rate (--gemm-rate, choices.GEMM_RATE; kernels.toml gemm_sustained_*; kernel_table.rated and
fit_gemm_derate): the factor refitted from its points, exactly; its effect on one GEMM's seconds; plan = train
with the option; bad values refused.

The points are Azure's AI-benchmarking-guide GEMM tables (Azure/AI-benchmarking-guide @ 8fd0c6e1,
Azure_Results/ND_H100_v5_results.md, "GEMM CuBLASLt": random initialization, FP8, 10,000 warm-up iterations),
measured by superbench's cublaslt_gemm (gitaumark/superbenchmark @ 0b8aff5c,
superbench/benchmarks/micro_benchmarks/cublaslt_gemm/cublaslt_gemm.cu, run(): TFLOPS = m·n·(2k − 1)/time)."""

import json
from fractions import Fraction

import pytest
import sympy

import costgraph
from costgraph import hardware
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.training.kernel_table import fit_gemm_derate, gemm_seconds, rated, tables

# Azure/AI-benchmarking-guide @ 8fd0c6e1, Azure_Results/ND_H100_v5_results.md: m = n = k = 8192, 1290.1 TFLOPS
H100_8192 = (8192, 8192, 8192, 1_290_100_000_000_000)


def test_stored_points_are_the_published_tables():
    """The points are the results files' rows as printed (TFLOPS × 10¹²), the H200 its own, B200 and GB300 the
    GB200's (points_from)."""
    t = tables()
    assert t["h100-sxm"].gemm_sustained_points == ("fp8", (
        (1024, 1024, 1024, 274_100_000_000_000), (2048, 2048, 2048, 1_011_300_000_000_000),
        (4096, 4096, 4096, 1_216_900_000_000_000), H100_8192, (16384, 16384, 16384, 1_377_300_000_000_000),
        (32768, 32768, 32768, 1_382_200_000_000_000), (1024, 2145, 1024, 410_700_000_000_000),
        (6144, 12288, 12288, 1_351_400_000_000_000), (802816, 192, 768, 663_800_000_000_000)))
    # Azure_Results/ND_H200_v5_results.md: 8192^3 at 1300.6 TFLOPS
    assert (8192, 8192, 8192, 1_300_600_000_000_000) in t["h200"].gemm_sustained_points[1]
    # samuel-bohman/AI-benchmarking-guide @ 154d35c0, Azure_Results/ND_GB200_v6_results.md: 8192^3 at 2848.0 TFLOPS
    assert (8192, 8192, 8192, 2_848_000_000_000_000) in t["gb200"].gemm_sustained_points[1]
    assert t["b200"].gemm_sustained_points == t["gb300"].gemm_sustained_points == t["gb200"].gemm_sustained_points


def test_one_point_fit_by_hand():
    """One compute-bound point: the least-squares x = 1/d of s = t0 + c·x is (s − t0)/c exactly, with the
    benchmark's seconds s = m·n·(2k − 1)/rate and c = F/(P·e)·(1 + k0/K) of the table's stored FP8 fit."""
    m, n, k, rate = H100_8192
    e, t0, k0 = tables()["h100-sxm"].gemm["fp8"]
    peak = hardware.preset("h100-sxm").peak_flops("fp8")
    s = Fraction(m * n * (2 * k - 1), rate)
    c = Fraction(2 * m * n * k) / (peak * Fraction(e)) * (1 + Fraction(k0, k))
    assert fit_gemm_derate([H100_8192], (e, t0, k0), peak) == c / (s - Fraction(t0, 10**9))
    # a point the fit calls launch-bound (1024^3: far below 90 % of e) alone is refused
    with pytest.raises(CostgraphValueError, match="compute-bound"):
        fit_gemm_derate([(1024, 1024, 1024, 274_100_000_000_000)], (e, t0, k0), peak)


@pytest.mark.parametrize("preset, fitted", [("h100-sxm", 0.95929), ("h200", 0.94771), ("gb200", 0.94735),
                                            ("b200", 0.94780), ("gb300", 0.94735)])
def test_stored_derate_is_the_fit(preset, fitted):
    """Each table's gemm_sustained_derate is its fit to the points (rounded to 3 decimals as stored; the fit's
    5-decimal value as the file's comment prints it)."""
    t = tables()[preset]
    dtype, pts = t.gemm_sustained_points
    d = fit_gemm_derate(pts, t.gemm[dtype], hardware.preset(preset).peak_flops(dtype))
    assert round(float(d), 5) == fitted
    assert Fraction(t.gemm_sustained) == Fraction(round(d, 3))


def test_rate_scales_one_gemm():
    """--gemm-rate sustained: one GEMM's seconds t0 + F/(P·e·d)·(1 + k0/K); isolated: the table as it is."""
    t = tables()["h100-sxm"]
    peak = hardware.preset("h100-sxm").peak_flops_bf16
    f, k = 2 * 4096 * 4096 * 4096, 4096
    iso = gemm_seconds(f, k, peak, rated(t, "isolated"))
    sus = gemm_seconds(f, k, peak, rated(t, "sustained"))
    e, t0, k0 = t.gemm["bf16"]
    d = sympy.Rational(959, 1000)
    assert iso == gemm_seconds(f, k, peak, t)
    assert sus == sympy.Rational(t0, 10**9) + sympy.Integer(f) / (peak * sympy.Rational(e) * d) * (1 + sympy.Rational(k0, k))
    assert rated(t, "isolated") is t
    with pytest.raises(CostgraphValueError, match="GEMM rate"):
        rated(t, "fast")


@pytest.fixture(scope="module")
def planned():
    gpt = costgraph.load("gpt")
    vals = gpt.values("gpt2", s=1024)
    return {g: gpt.plan(vals, gpus=1, hardware="h100-sxm", global_batch=8, top=2, gemm_rate=g)
            for g in ("isolated", "sustained")}


def test_plan_equals_train(planned, train_check):
    """plan passes --gemm-rate to every row and to its check command (not at the default); each row's step is
    train's with the option; the sustained rows are slower than the isolated ones."""
    iso, sus = planned["isolated"], planned["sustained"]
    assert iso.settings["gemm_rate"] == "isolated" and sus.settings["gemm_rate"] == "sustained"
    for res, flag in ((iso, True), (sus, False)):
        for r in res.layouts:
            words = res.check_command(r)
            assert ("--gemm-rate isolated" in words) is flag and "--gemm-rate sustained" not in words
            assert train_check(words) == (r["memory_bytes"], r["step_seconds"], True)
    assert sus.layouts[0]["step_seconds"] > iso.layouts[0]["step_seconds"]


def test_train_prints_the_rate(capsys):
    """train names the rate and its default, and the JSON carries it."""
    argv = ["train", "gpt", "--config", "gpt2", "--set", "b=1", "--gpus", "1", "--hardware", "h100-sxm"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "GEMM rate: sustained (default) (GEMM efficiencies × 0.959 (kernels.toml [h100-sxm] " \
           "gemm_sustained_derate); --gemm-rate)" in out
    assert main(argv + ["--gemm-rate", "isolated", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["step"]["gemm_rate"] == "isolated"


@pytest.mark.parametrize("command", ["train", "plan"])
def test_bad_value_refused(command, capsys):
    argv = [command, "gpt", "--config", "gpt2", "--gpus", "1", "--hardware", "h100-sxm", "--gemm-rate", "fast"]
    argv += ["--global-batch", "8"] if command == "plan" else []
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--gemm-rate" in err and "'fast'" in err and "sustained, isolated" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("edit, words", [
    ((r'^gemm_sustained_derate = "0.959"', 'gemm_sustained_derate = "1.2"'),
     ("kernels.toml:", ": [h800] gemm_sustained_derate is above 1 (a sustained rate faster than the table's",
      "hint: at most 1")),
    ((r'^gemm_sustained_dtype = "fp8"', 'gemm_sustained_dtype = "fp16"'),
     ("kernels.toml:", ": [h800] gemm_sustained_dtype 'fp16' names no GEMM fit of this table",
      "hint: bf16 (gemm_*) or fp8")),
], ids=["derate-above-1", "dtype-of-no-fit"])
def test_a_user_table_bad_sustained_rate_is_refused(capsys, tmp_path, monkeypatch, edit, words):
    """A COSTGRAPH_DATA kernels.toml (the bundled h100-sxm table as h800) whose derate would make the sustained rate
    faster than the measured curves, or whose points name a fit it lacks: refused at FILE:LINE:COLUMN, exit 2."""
    import pathlib
    import re

    import costgraph.training.kernel_table as kt
    from cli_checks import refused

    s = (pathlib.Path(kt.__file__).parent / "kernels.toml").read_text()
    start = s.index("[h100-sxm]")
    body = s[start:s.index("\n[", start)].replace("[h100-sxm]", "[h800]", 1)
    edited = re.sub(edit[0], edit[1], body, count=1, flags=re.M)
    assert edited != body
    (tmp_path / "kernels.toml").write_text(edited)
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    line = edited[:edited.index(edit[1])].count("\n") + 1
    err = refused(capsys, ["train", "gpt", "--config", "gpt2", "--gpus", "1", "--hardware", "h800"], *words)
    assert f"kernels.toml:{line}:1: [h800]" in err
