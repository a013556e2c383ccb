"""``plan --cp-comm-type`` and ``plan --gemm-rate`` (round 12) in plan's JSON (session 44 trial12).

Both are conventions passed to every row plan ranks and to its check command (never searched); the text's header
named them ("GEMM rate --gemm-rate isolated", "CP --cp-comm-type all_gather"), but the JSON stated neither (only
``link_rate`` and ``ep_dispatcher``), so a reader of the JSON could not tell which rate its step times are at. Now
``cp_comm_type`` and ``gemm_rate`` stand beside them, as train's JSON states them (``plan.cp_comm_type``,
``step.gemm_rate``), and the first row's step time and memory equal train's at its layout (plan = train).
"""

from __future__ import annotations

import json
import shlex

import pytest

import costgraph
from costgraph.cli import main


@pytest.fixture(scope="module")
def gpt():
    m = costgraph.load("gpt")
    return m, m.values("gpt2", s=4096)


@pytest.mark.parametrize("given,expected", [({}, ("p2p", "sustained")),
                                            ({"cp_comm_type": "all_gather", "gemm_rate": "isolated"},
                                             ("all_gather", "isolated"))])
def test_the_json_states_the_cp_communication_and_the_gemm_rate(gpt, capsys, given, expected):
    m, values = gpt
    res = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=16, top=1, **given)
    doc = json.loads(res.to_json())
    assert (doc["cp_comm_type"], doc["gemm_rate"]) == expected
    assert "cp_comm_type" not in doc["searched"] and "gemm_rate" not in doc["searched"]
    row = doc["layouts"][0]
    words = shlex.split(res.check_command())     # the first row's check command, run through train
    assert words[:2] == ["costgraph", "train"]
    assert main(words[1:] + ["--format", "json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert (trained["plan"]["cp_comm_type"], trained["step"]["gemm_rate"]) == expected
    assert trained["memory"]["total"]["value"] == row["memory_bytes"]
    assert trained["step"]["total"]["value"] == row["step_seconds"]
