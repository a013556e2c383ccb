"""``plan --ep-dispatcher`` (issue 27): the EP dispatcher is a convention of the cluster's software, passed to
every row plan ranks and to its check command (never searched, as ``--link-rate``), and plan's JSON states
both: what it timed the rows' collectives at and which kernels ran the EP dispatch. The bandwidths: DeepEP's
measured figures on H800 (hardware.toml [h800] deepep_scale_up_bw 153 GB/s: deepseek-ai/DeepEP README @ ebfe47e,
the lower of dispatch 153 and combine 158 over NVLink at EP 8) against NCCL's busbw (164.8 GB/s,
tests/parallel/test_expert_placement.py)."""

from __future__ import annotations

import json

import pytest

import costgraph


@pytest.fixture(scope="module")
def planned():
    m = costgraph.load("deepseek_v2")
    values = m.values("deepseek-v2-lite", s=1024)
    res = m.plan(values, gpus=8, hardware="h800", global_batch=16, top=8, ep_dispatcher="deepep")
    return m, values, res


def test_the_json_states_the_link_rate_and_the_dispatcher(planned):
    _, _, res = planned
    doc = json.loads(res.to_json())
    assert (doc["link_rate"], doc["ep_dispatcher"]) == ("nccl", "deepep")
    assert "ep_dispatcher" not in doc["searched"]


def test_every_row_is_train_with_the_dispatcher_in_its_check_command(planned, train_check):
    _, _, res = planned
    assert "EP dispatch --ep-dispatcher deepep" in res.to_text()
    for row in res.layouts:
        words = res.check_command(row)
        assert "--ep-dispatcher deepep" in words
        assert train_check(words) == (row["memory_bytes"], row["step_seconds"], True)
    # the fastest rows run PP 8 under DualPipe without EP; the first with EP runs an all-to-all
    row = next(r for r in res.layouts if r["ep"] > 1)
    words = res.check_command(row)
    peak, step, _ = train_check(words)
    # the same row with NCCL's all-to-all (164.8 GB/s, faster than DeepEP's 153 on H800): the same memory, a
    # shorter step, so the dispatcher reached the row's time
    peak_nccl, step_nccl, _ = train_check(words.replace(" --ep-dispatcher deepep", ""))
    assert peak_nccl == peak and step_nccl < step


def test_the_default_is_alltoall_and_left_out_of_the_check_command():
    from costgraph.train_options import PlanOptions

    assert PlanOptions.__dataclass_fields__["ep_dispatcher"].default == "alltoall"
