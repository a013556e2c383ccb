"""Issue 20, item 2: every typed result renders in a notebook — HTML, LaTeX and text tables from one
mixin (costgraph.export.display.Tabular), to_dict() (JSON, exact) and to_pandas() — plots display
inline without pyplot, and docs/notebook.ipynb runs.

The figures: GPT-2 small (the bundled ``gpt2`` configuration: h 768, l 12, a 12, V 50257,
s = s_max = 1024, b 1) has 124,439,808 parameters (Hugging Face's GPT2LMHeadModel count, pinned in
tests/engine/test_evaluate.py). Trained on 4 devices with ZeRO-1 (mixed precision, Adam): bf16 weights and
gradients 2 · 124,439,808 = 248,879,616 bytes each, fp32 master + Adam moments 12 · 124,439,808 / 4 =
373,319,424 bytes (ZeRO-1 shards them, Rajbhandari et al. 2020 §5.1), and the flash-attention
activations 34·l·b·s·h + 5·b·s·h + 4·l·b·s·a + 4·b·s·V + 8·b·s + 8·s = 531,255,296 bytes
(Korthikanti et al. 2022 without the s² scores). Its forward FLOPs 24·b·s·h²·l + 4·b·s²·h·l +
2·b·s·h·V = 291,648,307,200 (Narayanan et al. 2021, eq. 3's forward third). The H100 SXM's dense BF16
peak 989.4 TFLOP/s over 3.35 TB/s HBM3 (NVIDIA H100 datasheet) puts the ridge at 19788/67 FLOP/byte.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.export import plots
from costgraph.export.display import Q, Table, Tabular, frame, html, latex, seconds_text, text
from tests.device_memory import H100_SXM_CUDA

PARAMS = 124_439_808
WEIGHTS = 2 * PARAMS
OPTIMIZER = 12 * PARAMS // 4
ACTIVATIONS = 34 * 12 * 1024 * 768 + 5 * 1024 * 768 + 4 * 12 * 1024 * 12 + 4 * 1024 * 50257 + 8 * 1024 + 8 * 1024
TOTAL = 2 * WEIGHTS + OPTIMIZER + ACTIVATIONS
FORWARD = 24 * 1024 * 768**2 * 12 + 4 * 1024**2 * 768 * 12 + 2 * 1024 * 768 * 50257


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


@pytest.fixture(scope="module")
def trained(gpt):
    # the 4·b·s·V bytes of fp32 logits of the docstring's count: its cross-entropy convention named (the default,
    # Megatron-LM's unfused kernel, holds 6 B a logit)
    return gpt.train(gpus=4, zero=1, values=gpt.values("gpt2"), hardware="h100-sxm", cross_entropy="logits")


@pytest.fixture(scope="module")
def served(gpt):
    return gpt.infer(hardware="h100-sxm", prompt=64, generate=8, values=gpt.values("gpt2"))


def test_the_figures_add_up():
    assert (WEIGHTS, OPTIMIZER, ACTIVATIONS, TOTAL) == (248_879_616, 373_319_424, 531_255_296, 1_402_333_952)
    assert FORWARD == 291_648_307_200


def test_training_renders_as_a_table(trained):
    page = trained._repr_html_()
    assert page.startswith("<table") and f"<tr><td>total</td><td>{TOTAL:,} bytes</td></tr>" in page
    assert f"<tr><td>optimizer</td><td>{OPTIMIZER:,} bytes</td></tr>" in page
    tex = trained._repr_latex_()
    assert tex.startswith("$\\begin{array}") and tex.endswith("\\end{array}\\end{array}$")
    assert f"\\text{{activations}} & \\text{{{ACTIVATIONS:,} bytes}} \\\\" in tex
    assert "\\text{model\\_per\\_iteration}" in tex   # LaTeX's specials escaped
    step = trained.to_dict()["step"]["total"]["value"]
    assert f"<tr><td>step time</td><td>{seconds_text(step)}</td></tr>" in page
    assert "/" not in seconds_text(step) and seconds_text(step).endswith(" s")


def test_training_to_pandas_keeps_exact_ints(trained):
    pytest.importorskip("pandas")
    df = trained.to_pandas()
    assert list(df.columns) == ["quantity", "value", "unit"]
    row = df[df.quantity == "total"].iloc[0]
    assert (row.value, type(row.value), row.unit) == (TOTAL, int, "bytes")
    assert df.attrs["title"].startswith("gpt: training per device — 4 GPUs")


def test_inference_renders_with_units(served):
    page = served._repr_html_()
    kv = 4 * 12 * 1 * 768 * (64 + 8)   # 2 (K, V) · 2 bytes · l · b · h · (P + G)
    assert f"<tr><td>kv_cache_bytes</td><td>{kv:,} bytes</td></tr>" in page
    ttft = served.to_dict()["time_to_first_token"]["value"]
    assert f"<tr><td>time_to_first_token</td><td>{seconds_text(ttft)}</td></tr>" in page
    assert "\\text{fits} & \\text{yes} \\\\" in served._repr_latex_()


def test_plan_table_from_its_rows():
    from costgraph.training.planning import PlanResult

    row = {"tp": 2, "pp": 1, "dp": 4, "cp": 1, "ep": 1, "zero": 1, "recompute": "none", "sp": True, "micro_batch": 1,
           "micro_batches": 8, "memory_bytes": 12_345_678_901, "step_seconds": 0.5, "mfu": 0.25}
    settings = {"attention": "flash", "precision": "mixed", "optimizer": "adam"}
    plan = PlanResult("gpt", 8, "h100-sxm", 64, 80 * 10**9, 0.5, 10, {}, [row], settings=settings, divisible=1)
    page = plan._repr_html_()
    assert ("<tr><td>2</td><td>1</td><td>4</td><td>1</td><td>1</td><td>1</td><td>none</td><td>yes</td><td>1</td>"
            "<td>8</td><td>1</td><td>1f1b</td><td>12,345,678,901 bytes</td><td>0.5 s</td><td>0.25</td></tr>") in page
    # the virtual stages, the schedule and the variants: rows differing only there printed alike
    twin = {**row, "virtual_stages": 4, "schedule": "interleaved", "options": {"ep_overlap": "megatron"}}
    plan = PlanResult("gpt", 8, "h100-sxm", 64, 80 * 10**9, 0.5, 10, {}, [row, twin], settings=settings, divisible=1)
    lines = str(plan).splitlines()
    assert lines[1].split() == ["tp", "pp", "dp", "cp", "ep", "zero", "recompute", "sp", "micro_batch", "micro_batches",
                                "virtual_stages", "schedule", "memory_bytes", "step_seconds", "mfu", "options"]
    assert lines[3].split()[10:12] == ["4", "interleaved"] and lines[3].endswith("ep_overlap megatron")
    pytest.importorskip("pandas")
    df = plan.to_pandas()
    assert list(df.columns)[12:17] == ["memory_bytes", "memory_bytes unit", "step_seconds", "step_seconds unit", "mfu"]
    assert int(df.memory_bytes[0]) == 12_345_678_901


def test_seconds_are_decimal_with_their_unit():
    assert seconds_text(Fraction(1, 8)) == "0.125 s"
    assert seconds_text(sympy.Rational(1, 3)) == "0.333333 s"
    assert seconds_text(7.499669014925373e-05) == "0.0000749967 s"
    assert seconds_text(12345.678) == "12345.7 s"
    assert seconds_text(0) == "0 s"


def test_one_table_three_renderings():
    t = Table("a_b & c", ("quantity", "value"), [("x_1", Q(1234, "bytes")), ("t", Q(Fraction(1, 4), "s")),
                                                  ("ok", True), ("n", None)])
    assert html(t) == ('<table style="border-collapse:collapse;text-align:left"><caption style="text-align:left">'
                       "<b>a_b &amp; c</b></caption><tr><th>quantity</th><th>value</th></tr>"
                       "<tr><td>x_1</td><td>1,234 bytes</td></tr><tr><td>t</td><td>0.25 s</td></tr>"
                       "<tr><td>ok</td><td>yes</td></tr><tr><td>n</td><td>—</td></tr></table>")
    assert latex(t) == ("$\\begin{array}{l}\\textbf{a\\_b \\& c} \\\\\n\\begin{array}{ll}\\hline\n"
                        "\\text{quantity} & \\text{value} \\\\ \\hline\n\\text{x\\_1} & \\text{1,234 bytes} \\\\\n"
                        "\\text{t} & \\text{0.25 s} \\\\\n\\text{ok} & \\text{yes} \\\\\n\\text{n} & \\text{—} \\\\\n"
                        "\\hline\\end{array}\\end{array}$")
    assert text(t) == "a_b & c\n  quantity  value\n  x_1       1,234 bytes\n  t         0.25 s\n  ok        yes\n  n         —"


def test_ipython_text_is_the_table(trained):
    class Printer:
        out = ""

        def text(self, s):
            self.out += s

    p = Printer()
    trained._repr_pretty_(p, False)
    assert p.out.startswith("gpt: training per device") and f"total" in p.out and f"{TOTAL:,} bytes" in p.out
    # IPython's own printer takes the first class of the MRO with _repr_pretty_ or __repr__: the
    # dataclass's __repr__ must not hide the table (issue 32 item 2)
    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    assert pretty(trained) == p.out


def test_print_and_ipython_pretty_show_the_table(trained):
    """``print(result)`` and IPython's pretty printer (which takes the first class in the MRO that
    defines ``__repr__`` or ``_repr_pretty_``: the result's ``@dataclass`` defines ``__repr__``) show
    the table, not the dataclass's fields (issue 31 item 2)."""
    pretty = pytest.importorskip("IPython.lib.pretty")
    shown = pretty.pretty(trained)
    assert shown == str(trained) == text(trained._shown())
    assert shown.startswith("gpt: training per device") and f"{TOTAL:,} bytes" in shown
    assert repr(trained).startswith("TrainingResult(")   # repr keeps the fields


def test_print_and_pretty_show_the_table_of_every_command_result(served):
    """InferenceReport and PlanResult as TrainingResult above (Sweep: tests/export/test_sweep.py; Verification:
    tests/test_verify.py): ``print`` and IPython's pretty printer give the table, ``repr`` the fields. The KV
    cache of GPT-2 small at P = 64, G = 8: 2 (K, V) · 2 bytes · l · b · h · (P + G)."""
    from costgraph.training.planning import PlanResult

    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    row = {"tp": 1, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "zero": 1, "recompute": "none", "sp": False, "micro_batch": 1,
           "micro_batches": 8, "memory_bytes": 12_345_678_901, "step_seconds": 0.5, "mfu": 0.25}
    plan = PlanResult("gpt", 8, "h100-sxm", 64, 80 * 10**9, 0.5, 10, {}, [row], divisible=1,
                      settings={"attention": "flash", "precision": "mixed", "optimizer": "adam"})
    for result, head, cell in ((served, "gpt: inference on h100-sxm", f"{4 * 12 * 768 * (64 + 8):,} bytes"),
                               (plan, "gpt: layouts on 8 × h100-sxm", "12,345,678,901 bytes")):
        shown = pretty(result)
        assert shown == str(result) == text(result._shown()) and shown.startswith(head) and cell in shown
        assert repr(result).startswith(type(result).__name__ + "(")


def test_each_row_carries_its_own_unit(gpt):
    """The run's length is in its own units, not seconds: days, GPU-hours, PF-days, a step count;
    per-token FLOPs say so (issue 31 item 2: to_pandas() labelled all of the time section "s")."""
    run = gpt.train(gpus=4, zero=1, values=gpt.values("gpt2"), hardware="h100-sxm", tokens=10**9)
    units = {row[0]: row[1].unit for row in run._shown().rows if isinstance(row[1], Q)}
    assert {k: units[k] for k in ("step_seconds", "train_seconds", "train_days", "gpu_hours", "pf_days", "steps",
                                  "per_token", "six_n", "model_per_iteration", "total")} == {
        "step_seconds": "s", "train_seconds": "s", "train_days": "days", "gpu_hours": "GPU-hours",
        "pf_days": "PF-days", "steps": "", "per_token": "FLOP/token", "six_n": "FLOP/token",
        "model_per_iteration": "FLOP", "total": "bytes"}
    # the units are the fields' (costgraph.training.result_parts): TrainingTime's, TrainingFlops', StepParts'
    from costgraph.result_fields import quantities

    c = run.compute
    assert {n: q.unit for n, q in quantities(c.time)}["gpu_hours"] == "GPU-hours" and c.time.train_days is not None
    assert {n: q.unit for n, q in quantities(c.step)}["total"] == "s" and c.step.total == c.time.step_seconds
    # to_pandas() carries them in its unit column, row by row (the notebook extra)
    pytest.importorskip("pandas")
    df = run.to_pandas()
    column = dict(zip(df.quantity, df.unit))
    assert {k: column[k] for k in ("train_days", "gpu_hours", "pf_days", "steps", "step_seconds", "per_token")} == {
        "train_days": "days", "gpu_hours": "GPU-hours", "pf_days": "PF-days", "steps": "", "step_seconds": "s",
        "per_token": "FLOP/token"}


def test_to_pandas_without_pandas_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(CostgraphValueError, match=r"needs pandas") as e:
        frame(Table("t", ("a",), [(1,)]))
    assert "costgraph[notebook]" in str(e.value)


def test_plot_data_to_dict_is_exact_json(gpt, served):
    share = plots.flops_share(gpt.costs(), gpt.values("gpt2"))
    doc = json.loads(json.dumps(share.to_dict()))
    assert doc["total"] == FORWARD and sum(p["value"] for p in doc["parts"]) == FORWARD
    roof = json.loads(json.dumps(plots.roofline(served).to_dict()))
    assert (roof["peak_flops"], roof["bandwidth"], roof["ridge"]) == (989_400_000_000_000, 3_350_000_000_000, "19788/67")
    sweep = plots.MemorySweep("s", [1, 2], {"weights": [10, 10], "kv_cache": [1, 2]}, "infer", "t", capacity=100)
    assert sweep.to_dict() == {"symbol": "s", "points": [1, 2], "phase": "infer", "title": "t",
                               "parts": {"weights": [10, 10], "kv_cache": [1, 2]}, "totals": [11, 12],
                               "capacity_bytes": 100}
    assert "<tr><td>2</td><td>10 bytes</td><td>2 bytes</td><td>12 bytes</td></tr>" in sweep._repr_html_()
    assert f"<tr><td>total</td><td>{FORWARD:,} FLOP</td><td>100.0%</td></tr>" in share._repr_html_()


def test_every_result_type_is_tabular(trained, served):
    from costgraph.training.bare_time import BareTime, bare_training_time
    from costgraph.training.planning import PlanResult

    for cls in (type(trained), type(served), PlanResult, BareTime, plots.MemorySweep, plots.FlopsShare, plots.Roofline):
        assert issubclass(cls, Tabular), cls
        assert "_repr_html_" not in vars(cls) and "_repr_latex_" not in vars(cls)   # one mixin, no copies
    bt = bare_training_time(7 * 10**9, tokens=10**12, gpus=1024, hardware="h100-sxm", mfu="0.4")
    assert json.loads(json.dumps(bt.to_dict()))["params"] == 7 * 10**9
    # 6·N·D, labelled and with the unit its field declares (costgraph.results.quantity)
    assert "<tr><td>model FLOPs</td><td>42,000,000,000,000,000,000,000 FLOP</td></tr>" in bt._repr_html_()


def test_figures_display_inline_without_pyplot(gpt):
    fig = plots.flops_figure(plots.flops_share(gpt.costs(), gpt.values("gpt2")))
    png = fig._repr_png_()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.figure import Figure

    assert isinstance(fig, Figure)


NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "notebook.ipynb"


def test_docs_notebook_runs():
    """docs/notebook.ipynb executed by nbclient (the `notebook` extra): every cell runs, the tables
    and the figure come back as rich outputs with the figures above."""
    missing = [m for m in ("nbclient", "nbformat", "ipykernel", "pandas") if _missing(m)]
    if missing:
        pytest.skip(f"needs the notebook extra (pip install 'costgraph[notebook]'): {', '.join(missing)} missing")
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    outs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outs if o.output_type == "error"]
    data = [o.get("data", {}) for o in outs]
    # the notebook trains under the default cross-entropy (Megatron-LM's unfused: 6 B a logit, 2·b·s·V more than
    # the 4 B fp32 logits of TOTAL's count)
    default_total = TOTAL + 2 * 1024 * 50257
    assert any(f"<tr><td>total</td><td>{default_total:,} bytes</td></tr>" in d.get("text/html", "") for d in data)
    assert any("\\text{parameters} &= 12 h^{2} + 13 h" in d.get("text/latex", "") for d in data)
    assert any(d.get("text/plain") == str(PARAMS) for d in data)
    assert sum("image/png" in d for d in data) == 1


def _missing(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is None


def test_json_names_labels_and_units_come_from_the_fields():
    """BareTime's JSON keys, table labels and units are its fields' declarations (issue 31 item 2: producer,
    labels and schema are not three lists). The rule 6·N·D/(n·X) for N = 7·10⁹ on D = 10¹² tokens over
    1,024 H100s at 40% of 989.4 TFLOP/s (NVIDIA H100 datasheet, dense BF16): 4.2·10²² FLOP."""
    from costgraph.result_fields import quantities
    from costgraph.training.bare_time import bare_training_time

    bt = bare_training_time(7 * 10**9, tokens=10**12, gpus=1024, hardware="h100-sxm", mfu="0.4", price="2")
    declared = quantities(bt)
    doc = bt.to_dict()
    assert list(doc) == ["rule"] + [q.json for _, q in declared if q.json is not None]
    assert doc["flops"] == 4.2e22 and doc["params"] == 7 * 10**9 and doc["cost"] == float(bt.gpu_hours * 2)
    units = {row[0]: row[1].unit for row in bt._shown().rows}
    assert units == {q.label: q.unit for name, q in declared if getattr(bt, name) is not None}   # None: no row
    assert (units["GPU-hours"], units["PF-days"], units["days"], units["time"]) == ("GPU-hours", "PF-days", "days", "s")


def test_train_sections_are_the_declared_quantities(gpt):
    """The train schema's ``flops`` names and ``time`` enum are the quantities costgraph.training.compute
    declares (their units and labels beside them), and a run fills only declared keys."""
    from costgraph.export.schema import schema
    from costgraph.training.compute import FLOPS, RATIOS, TIME

    props = schema("train")["$defs"]["model"]["properties"]
    assert set(props["flops"]["properties"]) == set(FLOPS)
    assert props["time"]["propertyNames"]["enum"] == list(TIME)
    run = gpt.train(gpus=4, zero=1, values=gpt.values("gpt2"), hardware="h100-sxm", tokens=10**9, price="2",
                    mfu="0.4")
    assert set(run.compute["flops"]) <= set(FLOPS) and set(run.compute["time"]) == set(TIME)
    assert {"mfu", "hfu"} <= set(run.compute) and set(RATIOS) == {"mfu", "hfu"}
    units = {row[0]: row[1].unit for row in run._shown().rows if isinstance(row[1], Q)}
    assert units["cost"] == "" and units["steps"] == "" and units["per_token_minus_six_n"] == "FLOP/token"


def test_train_schema_names_the_fields_of_the_typed_parts():
    """The JSON names of train's inner sections are their typed parts' fields (costgraph.training.result_parts),
    and the keys the schema requires are the fields never left out (no ``omit_none``): producer and schema
    are one list (issue 31 item 2)."""
    from costgraph.export.schema import schema
    from costgraph.result_fields import quantities
    from costgraph.training import result_parts as rp

    def names(cls, required=False):
        return [q.json for _, q in quantities(cls) if q.json is not None and not (required and q.omit_none)]

    props = schema("train")["$defs"]["model"]["properties"]
    kind = props["communication"]["additionalProperties"]
    assert (list(kind["properties"]), kind["required"]) == (names(rp.CollectiveCost), names(rp.CollectiveCost, True))
    assert (props["time"]["propertyNames"]["enum"], props["time"]["required"]) == (
        names(rp.TrainingTime), names(rp.TrainingTime, True))
    step = props["step"]   # the parts, then what the step's rate adds (efficiency, hardware, rate, ...)
    assert set(names(rp.StepParts)) <= set(step["properties"]) and set(names(rp.StepParts, True)) <= set(step["required"])
    assert set(step["required"]) - set(names(rp.StepParts)) == {"efficiency", "hardware", "rate", "time_model"}
    off = props["offload"]["properties"]
    assert off["settings"]["required"] == list(off["settings"]["properties"]) == names(rp.OffloadSettings)
    assert set(off["seconds"]["anyOf"][1]["properties"]) == set(names(rp.OffloadSeconds))
    assert set(props["flops"]["required"]) <= set(names(rp.TrainingFlops, True))
    # LoRA, compute by kernel class, userbuffers' SMs, the calibration, --megatron: their parts' fields
    lora, meg = props["lora"], props["megatron"]
    assert (list(lora["properties"]), lora["required"]) == (names(rp.LoraCompute), names(rp.LoraCompute, True))
    for part, cls in ((step["properties"]["compute_by_class"], rp.ComputeByClass), (props["calibration"], rp.Calibrated),
                      (step["properties"]["userbuffers_sms"], rp.UserbuffersSMs), (meg["additionalProperties"],
                      rp.MemoryEstimate), (schema("plan")["properties"]["calibration"], rp.Calibrated)):
        assert list(part["properties"]) == part["required"] == names(cls)
    assert meg["propertyNames"]["enum"] == names(rp.MegatronBeside)


def test_infer_quantities_are_declared_once(served):
    """The infer JSON writes the declared quantities in their order, and the table takes their units."""
    from costgraph.inference.quantities import STEP, TOP

    doc = served.to_dict()
    assert [k for k in doc if k in TOP] == list(TOP)
    assert set(doc["decode"]) <= set(STEP) and "seconds" in doc["decode"]
    units = {row[0]: row[1].unit for row in served._shown().rows if isinstance(row[1], Q)}
    assert units["tokens_per_second"] == "tokens/s" and units["max_context"] == "tokens"
    assert units["time_per_output_token"] == "s" and units["kv_cache_bytes"] == "bytes"
    # declared as fields (costgraph.inference.quantities, the mechanism of training.result_parts); TOP, STEP and
    # CAPACITY are generated from them; the report reads its formulas and numbers as these typed parts
    from costgraph.inference.quantities import CAPACITY, CapacityAnswers, InferenceFigures, StepFigures
    from costgraph.result_fields import quantities

    for table, cls in ((TOP, InferenceFigures), (STEP, StepFigures), (CAPACITY, CapacityAnswers)):
        assert {k: q.unit for k, q in table.items()} == {n: q.unit for n, q in quantities(cls)}
    q = served.quantities
    assert type(served.figures) is InferenceFigures and type(served.decode) is StepFigures
    assert served.figures.kv_cache_bytes == q["kv_cache_bytes"]
    assert (served.decode.seconds, served.prefill.flops) == (q["decode.seconds"], q["prefill.flops"])
    assert "communication_seconds" not in served.decode   # TP 1: no all-reduce
    assert list(doc["decode"]) == list(served.decode)   # the JSON's step is the part's fields present, in order
    assert dict(served.answers) == {k: served.values[k] for k in ("fits", "max_batch", "max_context")}


def test_a_new_result_is_one_dataclass():
    """Issue 31's maintainer change, "energy per step": a result declared once, as fields with their unit,
    label and JSON name, gets its JSON, its text, its table and its DataFrame columns with no renderer
    written for it. 700 W for 0.5 s is 350 J (power × time); 1,000 steps 350,000 J."""
    from dataclasses import dataclass

    from costgraph.result_fields import quantity
    from costgraph.results import Document

    @dataclass(frozen=True)
    class Energy(Document):
        watts: int = quantity("W", label="power per device", json="power_watts")
        seconds: object = quantity("s", label="step time", json="step_seconds")
        joules: object = quantity("J", label="energy per step", json="energy_joules")
        steps: int | None = quantity(label="steps", omit_none=True, default=None)

    e = Energy(700, sympy.Rational(1, 2), sympy.Integer(350))
    assert e.to_dict() == {"power_watts": 700, "step_seconds": "1/2", "energy_joules": 350}
    assert json.loads(e.to_json()) == e.to_dict()
    assert e.to_text() == str(e) == "Energy\n  quantity          value\n  power per device  700 W\n  step time         0.5 s\n  energy per step   350 J"
    assert "<tr><td>energy per step</td><td>350 J</td></tr>" in e._repr_html_()
    assert Energy(700, 1, 700, steps=1000).to_dict()["steps"] == 1000


def test_the_door_opens_onto_export_on_the_first_rendering():
    """The package's face installs costgraph.export.present behind costgraph.results; a fresh process
    that builds a training result has imported nothing from export/ until the result is shown."""
    import subprocess

    from costgraph import results
    from costgraph.export import present

    assert results.renderer() is present
    code = ("import sys, costgraph\n"
            "g = costgraph.load('gpt')\n"
            "r = g.train(gpus=4, zero=1, values=g.values('gpt2'))\n"
            "before = sorted(m for m in sys.modules if m.startswith('costgraph.export'))\n"
            "shown = str(r)\n"
            "after = 'costgraph.export.present' in sys.modules\n"
            "print(before, after, shown.splitlines()[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] True gpt: training per device — 4 GPUs = tp 1 × pp 1 × cp 1 × dp 4; ZeRO 1"


def _plan_result():
    from costgraph.training.planning import PlanResult

    row = {"tp": 2, "pp": 1, "dp": 4, "cp": 1, "ep": 1, "zero": 1, "recompute": "none", "sp": True, "micro_batch": 1,
           "micro_batches": 8, "memory_bytes": 12_345_678_901, "step_seconds": 0.5, "mfu": 0.25}
    return PlanResult("gpt", 8, "h100-sxm", 64, 80 * 10**9, 0.5, 10, {"memory": 3}, [row],
                      settings={"attention": "flash", "precision": "mixed", "optimizer": "adam"}, divisible=1,
                      searched={"tp": (1, 2)})


def test_documents_are_written_from_their_declared_keys(trained, served):
    """Issue 31 item 2: the JSON of train, infer and plan is generated from the result class's DOCUMENT (each
    key's source field, unit, label and kind: costgraph.result_fields.document_json), so the producer and the
    schema hold one list: the document's keys come in the declared order, every key the schema's, and a key
    the renderer would write without a declaration (spread sections aside) does not exist."""
    from costgraph.export.schema import schema
    from costgraph.result_fields import document_units

    plan = _plan_result()
    for result, name in ((trained, "train"), (served, "infer"), (plan, "plan")):
        keys = [k for k in type(result).DOCUMENT if not k.spread]
        doc = result.to_dict()
        assert [k for k in doc if k in document_units(type(result))] == [k.json for k in keys if k.json in doc]
        s = schema(name)
        props = s.get("properties") or s["$defs"]["model"]["properties"]
        assert {k.json for k in keys} <= set(props), name
    assert plan.to_dict()["searched"] == {"tp": [1, 2]} and plan.to_dict()["check"] == plan.check_command()
    assert document_units(type(trained))["memory"].unit == "bytes"


def test_plan_rows_take_their_units_from_the_candidates_fields():
    # the row's table units are declared on costgraph.training.plan.Candidate's fields, not in the table
    from costgraph.result_fields import quantities
    from costgraph.training.plan import Candidate

    units = {name: q.unit for name, q in quantities(Candidate)}
    assert units == {"memory_bytes": "bytes", "step_seconds": "s", "mfu": ""}
    cells = _plan_result()._shown().rows[0]
    assert (cells[12], cells[13], cells[14]) == (Q(12_345_678_901, "bytes"), Q(0.5, "s"), 0.25)


def test_training_parts_are_typed_with_units(trained):
    """Issue 31 item 2: TrainingResult's settings, fit verdict and compute sections are dataclasses whose
    fields carry their unit (costgraph.training.result_parts), read also as the mappings they were, and
    the JSON's ``fits`` and ``plan`` are their fields. The headroom is recomputed here from the memory:
    capacity − reserve − the most-loaded device's peak (bytes, rounded up)."""
    from costgraph.result_fields import quantities
    from costgraph.training.result_parts import FitVerdict, TrainingCompute, TrainingSettings

    f, c, s = trained.fits, trained.compute, trained.settings
    assert (type(f), type(c), type(s)) == (FitVerdict, TrainingCompute, TrainingSettings)
    peak = int(sympy.ceiling(trained.most_loaded().memory["total"].xreplace(trained.values)))
    assert f.headroom_bytes == f["headroom_bytes"] == f.capacity_bytes - f.reserve_bytes - peak
    # the runtime reserve's parts are typed too (costgraph.runtime_memory.Part): the unit sits on their bytes
    assert [dict(p) for p in f.reserve_parts] == [{"name": p.name, "bytes": p.bytes, "source": p.source}
                                                  for p in f.reserve_parts] and len(f.reserve_parts) >= 3
    assert {n: q.unit for n, q in quantities(f.reserve_parts[0])} == {"name": "", "bytes": "bytes", "source": ""}
    assert sum(p["bytes"] for p in f.reserve_parts) == f.reserve_bytes   # the reserve is its parts' sum
    assert trained.to_dict()["fits"] == {**{k: getattr(f, k) for k in f.keys()},
                                         "reserve_parts": [dict(p) for p in f.reserve_parts]}
    assert "largest_b" in f and "changes" not in f and f.get("changes", 0) == 0   # fits: no changes
    # one capacity in the plan and the verdict: what CUDA reports on an H100 SXM (79.22 GiB, vllm PR #10511's
    # total_gpu_memory: runtime_memory.toml [visible.h100-sxm]; memory convention cuda), not the printed 80 GB
    assert trained.to_dict()["plan"]["memory"] == s.memory == s["memory"] == H100_SXM_CUDA == f.capacity_bytes
    assert {**s}["profile"] == s.profile and f.capacity_from.startswith("as CUDA reports it")
    assert ("time" in c, "step" in c, c.get("calibration")) == (True, True, None)
    assert c.step["total"] == c["time"]["step_seconds"]   # the one step time (costgraph.training.rate)
    units = {cls.__name__: {n: q.unit for n, q in quantities(cls)} for cls in (FitVerdict, TrainingCompute)}
    assert units["FitVerdict"]["headroom_bytes"] == "bytes" and units["FitVerdict"]["largest_s"] == "tokens"
    # a section's units are its fields' (days, GPU-hours, PF-days beside seconds in time), none on the section
    assert (units["TrainingCompute"]["flops"], units["TrainingCompute"]["time"], units["TrainingCompute"]["step"]) == (
        "", "", "")
    assert {n: q.unit for n, q in quantities(c.time)} == {"step_seconds": "s", "steps": "", "train_seconds": "s",
                                                        "train_days": "days", "gpu_hours": "GPU-hours",
                                                        "pf_days": "PF-days", "cost": ""}
    assert {n: q.unit for n, q in quantities(c.flops)}["per_token"] == "FLOP/token"
    assert {n: q.unit for k in c.communication.values() for n, q in quantities(k)}["bytes"] == "bytes"
    empty = FitVerdict(capacity_bytes=1, reserve_bytes=0, fits=False, headroom_bytes=-1, reserve_from="--reserve",
                       searched=("b",))
    assert "largest_b" in empty and empty["largest_b"] is None and "largest_s" not in empty   # b = 1 does not fit
    with pytest.raises(KeyError):
        empty["no_such_key"]
