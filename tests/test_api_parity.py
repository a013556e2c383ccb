"""The commands are renderings of the Python API (issue 15 item 3): for the same inputs,
``Model.train(...)``, ``Model.infer(...)`` and ``Model.plan(...)`` return typed results whose
``to_dict()`` is exactly the JSON ``costgraph train|infer|plan --format json`` prints, and
whose ``to_text()`` is its text. Communication bytes come without ``--hardware``."""

from __future__ import annotations

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


def _cli(capsys, argv):
    assert main(argv) == 0
    return capsys.readouterr().out.rstrip("\n")


TRAIN = ["train", "gpt", "--config", "gpt2", "--gpus", "4", "--tp", "2", "--zero", "1", "--hardware", "h100-sxm",
         "--mfu", "0.45", "--tokens", "1e9", "--price", "2.5", "--megatron", "--memory", "80GB"]


def test_train_to_dict_is_the_cli_json(gpt, capsys):
    result = gpt.train(t=2, gpus=4, zero=1, values=gpt.values("gpt2"), hardware="h100-sxm", mfu=0.45, tokens=1e9,
                       price="2.5", megatron=True, memory="80GB")
    doc = json.loads(_cli(capsys, TRAIN + ["--format", "json"]))
    assert result.to_dict() == doc
    assert result.to_text() == _cli(capsys, TRAIN)
    # every section is there, and the memory stays where the older API had it
    assert {"fits", "megatron", "flops", "time", "mfu", "communication", "step"} <= set(doc)
    assert result.stages[0].memory["total"] == result.memory.stages[0].memory["total"]
    assert doc["memory"]["total"]["value"] == int(result.most_loaded().memory["total"].xreplace(result.values))


def test_train_layer_scope_and_global_batch_parity(gpt, capsys):
    argv = ["train", "gpt", "--config", "gpt2", "--gpus", "4", "--global-batch", "32", "--format", "json"]
    result = gpt.train(gpus=4, global_batch=32, values=gpt.values("gpt2"))
    assert result.to_dict() == json.loads(_cli(capsys, argv))
    assert result.layout.m == 8     # B = b·m·d: 32 = 1 · 8 · 4
    argv = ["train", "gpt", "--config", "gpt2", "--tp", "2", "--gpus", "2", "--scope", "layer", "--format", "json"]
    result = gpt.train(t=2, gpus=2, scope="layer", values=gpt.values("gpt2"))
    assert result.to_dict() == json.loads(_cli(capsys, argv))
    assert result.compute is None and result.communication is None


def test_infer_to_dict_is_the_cli_json(gpt, capsys):
    argv = ["infer", "gpt", "--config", "gpt2", "--hardware", "h100-sxm", "--prompt", "128", "--generate", "16",
            "--batch", "2", "--reserve", "0.2"]
    rep = gpt.infer(hardware="h100-sxm", prompt=128, generate=16, batch=2, reserve=0.2, values=gpt.values("gpt2"))
    assert rep.to_dict() == json.loads(_cli(capsys, argv + ["--format", "json"]))
    assert rep.to_text() == _cli(capsys, argv)
    assert rep.settings["reserve"] == "1/5"


def test_plan_to_dict_is_the_cli_json(gpt, capsys):
    argv = ["plan", "gpt", "--config", "gpt2", "--gpus", "8", "--hardware", "h100-sxm", "--global-batch", "64",
            "--top", "3", "--tokens", "1e9"]
    values = {k: v for k, v in gpt.values("gpt2").items() if str(k) != "b"}
    result = gpt.plan(values, gpus=8, hardware="h100-sxm", global_batch=64, top=3, tokens=1e9,
                      command="costgraph train gpt --config gpt2 --profile korthikanti")   # the check command's model words
    assert result.to_dict() == json.loads(_cli(capsys, argv + ["--format", "json"]))
    assert result.to_text() == _cli(capsys, argv)
    assert len(result.layouts) == 3 and all("train_days" in r for r in result.layouts)


def test_zero1_communication_bytes_without_hardware(capsys):
    # ZeRO §7.2.1 (Rajbhandari et al. 2020): ZeRO-1 moves 2Ψ elements per device per step, a
    # reduce-scatter of the gradients and an all-gather of the parameters, Ψ each, times the
    # ring's (N_d − 1)/N_d (tests/parallel/test_communication.py); mixed precision: 2 bytes an element.
    # Llama-2-7B: Ψ = 6,738,415,616 (the Hugging Face checkpoint's count).
    psi = 6_738_415_616
    each = 2 * psi * 7 // 8
    assert each == 11_792_227_328
    argv = ["train", "llama", "--config", "llama-2-7b", "--gpus", "8", "--zero", "1"]
    doc = json.loads(_cli(capsys, argv + ["--format", "json"]))
    comm = doc["communication"]
    assert set(comm) == {"zero_reduce_scatter", "zero_all_gather"}
    assert comm["zero_reduce_scatter"]["bytes"]["value"] == each
    assert comm["zero_all_gather"]["bytes"]["value"] == each
    assert (comm["zero_reduce_scatter"]["op"], comm["zero_all_gather"]["op"]) == ("reduce-scatter", "all-gather")
    assert "seconds" not in comm["zero_all_gather"] and "step" not in doc
    text = _cli(capsys, argv)
    assert "  zero_reduce_scatter  reduce-scatter over 8: 11,792,227,328 bytes (11.79 GB, 10.98 GiB)" in text
    assert "  zero_all_gather      all-gather over 8: 11,792,227,328 bytes (11.79 GB, 10.98 GiB)" in text


def test_communication_is_computed_once_under_hardware(gpt, monkeypatch):
    from costgraph.parallel import communication as comm_module
    from costgraph.training import steptime

    calls = []
    real = comm_module.communication

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(comm_module, "communication", counted)
    monkeypatch.setattr(steptime, "communication", counted)
    result = gpt.train(gpus=4, zero=1, values=gpt.values("gpt2"), hardware="h100-sxm")
    assert len(calls) == 1
    assert set(result.communication) == {"zero_reduce_scatter", "zero_all_gather"}
    assert all("seconds" in c for c in result.communication.values())


def test_results_render_in_jupyter(gpt):
    result = gpt.train(gpus=4, zero=1, values=gpt.values("gpt2"))
    html = result._repr_html_()
    total = int(sympy.ceiling(result.most_loaded().memory["total"].xreplace(result.values)))
    assert html.startswith("<table") and f"{total:,}" in html
    rep = gpt.infer(hardware="h100-sxm", prompt=64, generate=8, values=gpt.values("gpt2"))
    assert rep._repr_html_().startswith("<table") and "time_to_first_token" in rep._repr_html_()


def test_api_reads_numbers_as_the_cli_does(gpt):
    from costgraph.errors import CostgraphValueError

    with pytest.raises(CostgraphValueError, match=r"--mfu 1.5 is not a fraction in \(0, 1\]"):
        gpt.train(gpus=1, mfu=1.5, hardware="h100-sxm")
    with pytest.raises(CostgraphValueError, match="--efficiency is for the step-time model"):
        gpt.train(gpus=1, efficiency=0.4)
    with pytest.raises(CostgraphValueError, match="give --global-batch or --micro-batches, not both"):
        gpt.train(gpus=1, m=2, global_batch=8, values=gpt.values("gpt2"))
    t = gpt.train(gpus=1, mfu=0.45, hardware="h100-sxm").compute
    assert t["mfu"] == sympy.Rational(9, 20)
