"""The calculator page's serving table (costgraph.export.web_serving): ``infer`` without a preset where every
size has a value; again on the page's preset where one is missing, whose error names it (as ``costgraph infer
--hardware`` does)."""

from __future__ import annotations

import pytest

import costgraph
from costgraph.export import web_serving


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


def _table(model, values, monkeypatch):
    calls, added = [], []
    infer = model.infer

    def spy(**kw):
        calls.append(kw["hardware"])
        return infer(**kw)

    monkeypatch.setattr(model, "infer", spy)
    monkeypatch.setattr(web_serving, "SERVE_TP", (1,))   # one TP degree: the four dtype pairs
    table = web_serving.serving_table(model, lambda name, *a: added.append(name) or {"fn": name}, values, "h100-sxm")
    return table, calls, added


def test_every_size_given_no_preset(gpt, monkeypatch):
    table, calls, added = _table(gpt, dict(gpt.values(config="gpt2")), monkeypatch)
    assert calls == [None] * 4   # one infer per (KV dtype, weight dtype) pair, none on the preset
    assert set(table["tp"]["1"]["weights"]) == set(web_serving.WEIGHTS)
    assert set(table["tp"]["1"]["kv"]["bf16"]) == {"kv_per_token", "kv", "base", "per_sequence"}
    assert table["reserve"] == ["1", "10"]   # infer's default reserve, 1/10 of the device
    assert "serve_weights_tp1_int4" in added


def test_a_missing_size_is_named(gpt, monkeypatch):
    # the vocabulary left out: infer on the preset refuses the memory verdict, naming V; the page says so
    values = {k: v for k, v in gpt.values(config="gpt2").items() if str(k) != "V"}
    table, calls, added = _table(gpt, values, monkeypatch)
    assert calls == [None, "h100-sxm"]
    assert table == {"absent": "costgraph infer: no value for V"}
    assert added == []
