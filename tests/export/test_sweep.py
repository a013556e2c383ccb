"""`costgraph sweep`: the range grammar (and its refusals), rows equal to
`Costs.evaluate` exactly, CSV read back by the csv module, JSON by json,
size checks per row, the row cap, int64 refusal past 2^63, and the progress
bar on stderr only."""

from __future__ import annotations

import csv
import io
import json

import pytest
from rich.console import Console

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.export import sweep as sweep_mod
from costgraph.export.sweep import Progress, parse_axes, parse_axis, sweep


@pytest.mark.parametrize("spec,values", [
    ("s=512:32768:x2", (512, 1024, 2048, 4096, 8192, 16384, 32768)),
    ("s=512:5000:x4", (512, 2048)),                  # stops before passing the bound
    ("b=1:10:+3", (1, 4, 7, 10)),
    ("b=1:9:+3", (1, 4, 7)),
    ("b=1,2,4", (1, 2, 4)),
    ("h=4_096", (4096,)),   # a thousands separator
    ("w=7:7:x2", (7,)),
])
def test_grammar(spec, values):
    a = parse_axis(spec)
    assert (a.name, tuple(a.values)) == (spec.split("=")[0], values)     # a range for +K: never listed


@pytest.mark.parametrize("spec,message", [
    ("s=32768:512:x2", "ends"),
    ("s=1:10:x1", "multiply by 2"),
    ("s=0:10:+1", "not positive"),
    ("s=1:10:+0", "not positive"),
    ("s=1,1", "twice"),
    ("s=-1", "cannot read"),
    ("s=1e3", "cannot read"),
    ("s=2**10", "cannot read"),
    ("s=__import__('os')", "cannot read"),
    ("s=1:10", "cannot read"),
    ("s=1__0", "only separates groups of three digits"),   # arguments.ascii_number, every number's rule
    ("h=40_96", "only separates groups of three digits"),   # int('40_96') is 4096, as int('7_68') is 768
    ("s=+4", "without a sign '\\+'"),
    ("1s=4", "cannot read"),
    ("s", "NAME=VALUES"),
])
def test_grammar_refusals(spec, message):
    with pytest.raises(CostgraphValueError, match=message):
        parse_axis(spec)


def test_row_cap():
    with pytest.raises(CostgraphValueError, match="100,000,000 rows, more than the cap of 10,000,000"):
        parse_axes(["b=1:100000:+1", "s=1:1000:+1"])
    # counted without listing: a range of 10^30 values is refused at once
    with pytest.raises(CostgraphValueError, match="rows, more than the cap"):
        parse_axes(["s=1:1000000000000000000000000000000:+1"])
    assert len(parse_axes(["b=1:200:+1"], max_rows=200)[0].values) == 200
    with pytest.raises(CostgraphValueError, match="cap of 199"):
        parse_axes(["b=1:200:+1"], max_rows=199)


def _csv(capsys, argv):
    assert main(argv) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    return list(csv.DictReader(io.StringIO(captured.out))), captured


def test_csv_rows_equal_evaluate(capsys):
    rows, captured = _csv(capsys, ["sweep", "llama", "--config", "llama-2-70b", "--over", "s=512:32768:x2",
                                   "--over", "b=1,2,4"])
    costs = costgraph.load("llama").costs()
    assert len(rows) == 7 * 3
    assert list(rows[0]) == ["s", "b", *costs.quantities]
    assert [(int(r["s"]), int(r["b"])) for r in rows[:4]] == [(512, 1), (512, 2), (512, 4), (1024, 1)]
    for r in rows:
        want = costs.evaluate("llama-2-70b", s=int(r["s"]), b=int(r["b"]))
        assert {q: int(r[q]) for q in costs.quantities} == want
    # README/derive: Llama-2-70B's KV cache at s = 4096, b = 1 is 1,342,177,280 bytes (GQA, 8 KV heads)
    assert next(int(r["kv_cache_bytes"]) for r in rows if r["s"] == "4096" and r["b"] == "1") == 1_342_177_280
    assert captured.err == ""          # a fast sweep draws no progress bar


def test_json_and_quantities(capsys, tmp_path):
    out = tmp_path / "sweep.json"
    assert main(["sweep", "gemma2", "--config", "gemma-2-9b", "--over", "s=1024:16384:x2", "--causal", "half",
                 "--quantity", "flops_forward", "kv_cache_bytes", "--format", "json", "-o", str(out)]) == 0
    assert "wrote 5 rows × 3 columns (json)" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["columns"] == ["s", "flops_forward", "kv_cache_bytes"]
    assert doc["units"] == {"flops_forward": "FLOP", "kv_cache_bytes": "bytes"}
    assert doc["fixed"]["w"] == 4096 and "s" not in doc["fixed"]
    assert doc["conventions"]["causal"] == "half"
    costs = costgraph.load("gemma2").costs(causal="half")
    for s, flops, kv in doc["rows"]:     # both sides of the window w = 4096: Min(s, w)
        want = costs.evaluate("gemma-2-9b", s=s)
        assert (flops, kv) == (want["flops_forward"], want["kv_cache_bytes"])


def test_dtypes(capsys):
    big = ["sweep", "llama", "--config", "llama-2-70b", "--over", "b=4096", "--over", "s=131072",
           "--quantity", "flops_backward"]
    # README: Llama-2-70B's backward FLOPs pass 2^63 at b = 4096, s = 131072: int64 refuses
    assert main(big) == 2
    assert "int64 evaluation refused" in capsys.readouterr().err
    rows, _ = _csv(capsys, big + ["--dtype", "exact"])
    want = costgraph.load("llama").costs().evaluate("llama-2-70b", b=4096, s=131072)["flops_backward"]
    assert want > 2 ** 63 and int(rows[0]["flops_backward"]) == want
    rows, _ = _csv(capsys, big + ["--dtype", "float64"])
    assert float(rows[0]["flops_backward"]) == float(want)
    # float64 values below 2^53 are written as exact integers
    rows, _ = _csv(capsys, ["sweep", "gpt", "--config", "gpt2", "--over", "b=1,2", "--dtype", "float64",
                            "--quantity", "params"])
    assert [r["params"] for r in rows] == ["124439808", "124439808"]   # GPT-2 small (DOMAIN.md §1)


@pytest.mark.parametrize("argv,message", [
    (["--over", "a=7,12"], "row 1 (a=7)"),                   # h/a = 768/7 is no head size
    (["--over", "q=1,2"], "no dimension 'q'"),
    (["--over", "s=1,2", "--set", "s=4"], "both swept"),
    (["--over", "s=1:2:x1"], "multiply by 2"),
    (["--over", "b=1:10000:+1", "--over", "s=1:10000:+1"], "cap of 10,000,000"),
    (["--over", "b=1:100:+1", "--max-rows", "99"], "cap of 99"),
])
def test_refusals(argv, message, capsys):
    assert main(["sweep", "gpt", "--config", "gpt2", *argv]) == 2
    assert message in capsys.readouterr().err


def test_missing_values(capsys):
    assert main(["sweep", "gpt", "--over", "s=1,2"]) == 2
    err = capsys.readouterr().err
    assert "no value for" in err and "--config" in err and "give them with" in err
    # session 42 trial: one value missing was "give them"
    assert main(["sweep", "gpt", "--over", "s=1,2", "--set", "V=1", "a=1", "b=1", "h=4", "l=1"]) == 2
    assert capsys.readouterr().err.splitlines()[-2:] == [
        "error: no value for s_max", "hint: give it with --config, --set NAME=VALUE or --over NAME=..."]


def test_progress_bar_on_stderr_only(monkeypatch, capsys):
    monkeypatch.setattr(sweep_mod, "CHUNK", 16)
    model = costgraph.load("gpt")
    costs = model.costs()
    fixed = {str(k): int(v) for k, v in model.values("gpt2").items()}
    err = io.StringIO()
    bar = Progress("sweep gpt", after=0.0, console=Console(file=err, force_terminal=True, width=100))
    seen = []
    result = sweep(model, costs, parse_axes(["b=1:10:+1", "s=1:10:+1"]), fixed, ["params"],
                   progress=lambda d, t: (seen.append(d), bar(d, t)))
    sweep_mod.to_csv(result, io.StringIO(), progress=bar)
    bar.close()
    assert seen == [16, 32, 48, 64, 80, 96, 100]       # 100 rows in chunks of 16
    text = err.getvalue()
    assert "sweep gpt: evaluating" in text and "100/100" in text
    assert capsys.readouterr().out == ""
    # and a sweep under the threshold draws nothing
    quiet = io.StringIO()
    bar = Progress("x", after=60.0, console=Console(file=quiet, force_terminal=True))
    sweep(model, costs, parse_axes(["b=1:10:+1"]), fixed, ["params"], progress=bar)
    bar.close()
    assert quiet.getvalue() == ""


# --- --max-rows read in scientific notation (issue 19 trial) ---------------------------------------------------------

def run(argv, capsys):
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


def test_max_rows_reads_scientific_notation(capsys):
    status, out, err = run(["sweep", "llama", "--config", "llama-3-8b", "--over", "h=64:128:+64",
                            "--max-rows", "1e11"], capsys)
    assert status == 0, err
    assert len(out.strip().splitlines()) == 3      # the header and the rows h = 64, 128


# --- past the position table a warning on stderr; past 2^63 exact, or refused in int64/float64 (new-user trial) ------

def _err(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


S_WARNING = ("warning: s = 4,096 is longer than s_max = 1,024: the learned position table has s_max rows, "
             "so the model cannot read that many tokens as built\n")


def test_sweep_warns_on_stderr_past_the_position_table(capsys):
    assert main(["sweep", "gpt", "--config", "gpt2", "--over", "s=512:4096:x2", "--quantity", "params",
                 "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert err == S_WARNING
    assert out.splitlines()[0] == "s,params" and len(out.splitlines()) == 5     # the rows stay CSV
    assert main(["sweep", "gpt", "--config", "gpt2", "--over", "s=512,1024", "--quantity", "params",
                 "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


# sweeps past 2^63: exact in Python integers, refused by name in int64/float64
def _gpt2_forward(s, b=1, l=12, h=768, V=50257):
    """DOMAIN.md §3: l(24bsh² + 4bs²h) + 2bshV ('matmul' convention, full attention)."""
    return l * (24 * b * s * h * h + 4 * b * s * s * h) + 2 * b * s * h * V


def test_sweep_exact_past_int64(capsys):
    assert main(["sweep", "gpt", "--config", "gpt2", "--set", "s=9223372036854775808", "--dtype", "exact",
                 "--quantity", "params", "flops_forward", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["params,flops_forward", f"124439808,{_gpt2_forward(2 ** 63)}"]
    top = 10 ** 33
    assert main(["sweep", "gpt", "--config", "gpt2", "--over", f"s=1:{top}:x2", "--dtype", "exact",
                 "--quantity", "flops_forward", "--format", "json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"] == [[2 ** i, _gpt2_forward(2 ** i)] for i in range(top.bit_length())]


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_sweep_refuses_values_past_int64(capsys, dtype):
    err = _err(capsys, ["sweep", "gpt", "--config", "gpt2", "--set", "s=9223372036854775808", "--dtype", dtype,
                        "--no-progress"])
    assert err == (f"error: s = 9223372036854775808 is past the int64 range (at most 2^63 - 1) that --dtype "
                   f"{dtype} evaluates in\nhint: --dtype exact evaluates in Python integers, at any size\n")


def test_sweep_renders_as_a_table_in_notebooks():
    """A Sweep in Jupyter and in IPython's pretty printer is a table (issue 32 item 2), not the dataclass's
    fields and arrays; print() gives the same text; a long sweep shows its first and last rows. GPT-2 small:
    124,439,808 parameters, forward FLOPs l(24bsh² + 4bs²h) + 2bshV (DOMAIN.md §3)."""
    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    model = costgraph.load("gpt")
    fixed = {k: int(v) for k, v in {"h": 768, "a": 12, "l": 12, "V": 50257, "s_max": 1024}.items()}
    sw = sweep(model, model.costs(), parse_axes(["s=128:8192:x2", "b=1:7:+1"]), fixed, ["params", "flops_forward"])
    shown = pretty(sw)
    assert shown == str(sw) and "Sweep(" not in shown and "array(" not in shown
    lines = shown.splitlines()
    assert lines[0] == ("sweep over s, b: 49 rows, the first and last 20 "
                        "(h = 768, a = 12, l = 12, V = 50,257, s_max = 1,024)")
    assert lines[1].split() == ["s", "b", "params", "flops_forward"] and len(lines) == 2 + 41
    assert lines[2].split() == ["128", "1", "124,439,808", "parameters", f"{_gpt2_forward(128):,}", "FLOP"]
    assert lines[-1].split() == ["8,192", "7", "124,439,808", "parameters", f"{_gpt2_forward(8192, 7):,}", "FLOP"]
    assert lines[22].split() == ["…"] * 4
    html = sw._repr_html_()
    assert html.startswith("<table") and html.count("<tr>") == 1 + 41 and f"<td>{_gpt2_forward(128, 1):,} FLOP</td>" in html
    short = sweep(model, model.costs(), parse_axes(["s=512,1024"]), {**fixed, "b": 1}, ["params"])
    assert pretty(short).splitlines()[0] == "sweep over s: 2 rows (h = 768, a = 12, l = 12, V = 50,257, s_max = 1,024, b = 1)"
