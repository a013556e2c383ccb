"""The EP all-to-all against its kernel-level sources (issue 27 items 2 and 4; costgraph.parallel.ep_time).

DeepEP's normal (internode) kernels send a token once over RDMA to each node its experts are on and forward
it there over NVLink (deepseek-ai/DeepEP README @ ebfe47e, "Normal kernels with NVLink and RDMA forwarding");
the RDMA bandwidths its README lists are measured on the bytes of the distinct nodes a token reaches, its own
included (deepseek-ai/DeepEP @ 499ec88b tests/test_internode.py: ``rdma_idx = topk_idx // (num_experts //
num_nodes)``, deduplicated; ``dispatch_bf16_rdma_send_bytes = num_rdma_token_sent * hidden * 2``). DualPipe's
overlap runs only inside its schedule (deepseek-ai/DualPipe @ bb214e82 dualpipe/dualpipe.py ``DualPipe.step``,
``_forward_backward_compute_chunk``): train refuses ``--ep-overlap dualpipe`` elsewhere, and plan never
generates such a row.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.hardware import preset
from costgraph.parallel.collectives import Transfer
from costgraph.parallel.ep_time import alltoall_seconds, deepep_domains

R = sympy.Rational
HARDWARE = Path(costgraph.__file__).parent / "hardware.toml"


def test_deepep_figures_are_the_readme_s():
    """hardware.toml [h800] holds DeepEP's README figures (deepseek-ai/DeepEP README @ ebfe47e, H800, the
    DeepSeek-V3 pretraining setting: intranode EP 8 dispatch 153 GB/s over NVLink, combine 158: the lower;
    internode RDMA 43/43 GB/s at EP 16, 44/47 at EP 32, 46/45 at EP 64: the lowest), and the preset reads them."""
    h800 = tomllib.loads(HARDWARE.read_text())["h800"]
    assert (h800["deepep_scale_up_bw"], h800["deepep_scale_out_bw"]) == (153 * 10**9, 43 * 10**9)
    hw = preset("h800")
    assert (hw.deepep_scale_up_bw, hw.deepep_scale_out_bw) == (153 * 10**9, 43 * 10**9)
    # NCCL's figures beside them, which the alltoall dispatcher runs at (NCCL topo.h @ 5067397c: 8 x 20.6 GB/s;
    # NET_BW 12 GB/s per 100 Gbit of a 400 Gb/s NIC)
    assert (hw.scale_up_busbw, hw.scale_out_busbw) == (164_800_000_000, 48_000_000_000)


def test_domains_a_token_reaches():
    # DeepSeek-V3 on 8 nodes, k = 8 unconfined: 8·(1 − (7/8)^8) = 8 − 7^8/8^7 (uniform, independent copies)
    assert deepep_domains(8, 8) == 8 - R(7**8, 8**7) == R(11_012_415, 2_097_152)
    # node-limited to M = 4 (DeepSeek-V3 report §2.1.2; DeepEP's benchmark routes to its top-4 groups so): 4
    assert deepep_domains(8, 8, 4) == 4
    assert deepep_domains(2, 8, 4) == 2 and deepep_domains(8, 2, 4) == 2   # at most k, at most the domains


def test_one_dispatch_by_hand():
    """One forward dispatch of 4096 tokens × hidden 7168 in BF16, top-8, EP 64 on H800 (8 nodes of 8), DeepEP:
    over RDMA S/k·D bytes at 43 GB/s, over NVLink S·7/8 at 153 GB/s, at once (the longer counts), plus one
    step of the NIC's latency (14 us: NCCL tuning.cc hwLat[NET], hardware.toml) — the RDMA leg is longer."""
    S = 4096 * 7168 * 2
    part = Transfer("dispatch", "all-to-all", sympy.Integer(64), sympy.Integer(1), sympy.Integer(4096 * 7168 * 8),
                    sympy.Integer(2), sympy.Integer(1), (), sympy.Integer(8))
    assert part.size == 8 * S
    hw = preset("h800")
    rdma = R(S) * (8 - R(7**8, 8**7)) / (43 * 10**9)
    nvl = R(8 * S) * R(7, 8) / (153 * 10**9)
    assert rdma > nvl
    assert alltoall_seconds(part, hw, world=64, dispatcher="deepep") == R(14_000, 10**9) + rdma
    # node-limited to 4 nodes: 4 of the 8 copies' bytes over RDMA
    assert alltoall_seconds(part, hw, world=64, route_nodes=4, dispatcher="deepep") == \
        R(14_000, 10**9) + R(4 * S, 43 * 10**9)
    # NCCL's all-to-all (Megatron's alltoall dispatcher): every copy to its expert's rank, 56 of 64 shares over
    # the NIC at 48 GB/s (unchanged)
    assert alltoall_seconds(part, hw, world=64) == R(14_000, 10**9) + R(8 * S * 56, 64 * 48 * 10**9)
    # one node (EP 8): DeepEP's intranode kernels, nothing over RDMA: 7/8 of S over NVLink at 153 GB/s, one round
    one = Transfer("dispatch", "all-to-all", sympy.Integer(8), sympy.Integer(1), sympy.Integer(4096 * 7168 * 8),
                   sympy.Integer(2), sympy.Integer(1), (), sympy.Integer(8))
    assert alltoall_seconds(one, hw, world=8, dispatcher="deepep") == R(3_400, 10**9) + nvl


MOE = ["train", "deepseek_v2", "--config", "deepseek-v2-lite", "--set", "s=1024", "--gpus", "16", "--ep", "16",
       "--hardware", "h800"]


@pytest.mark.parametrize("flags", [
    [],                                                    # PP 1 under 1F1B
    ["--pp", "2"],                                         # another schedule
    ["--pp", "2", "--schedule", "interleaved", "--virtual-stages", "2"],
])
def test_dualpipe_overlap_refused_outside_its_schedule(capsys, flags):
    from cli_checks import refused

    refused(capsys, MOE + flags + ["--ep-overlap", "dualpipe"], "--ep-overlap dualpipe needs")


def test_dualpipe_overlap_accepted_under_dualpipe(capsys):
    from cli_checks import run

    code, _, err = run(capsys, MOE[:-4] + ["--ep", "8", "--pp", "2", "--decoder-first-pipeline-num-layers", "13",
                                           "--schedule", "dualpipe", "--ep-overlap",
                                           "dualpipe", "--hardware", "h800"])
    assert code == 0, err


def test_plan_screens_dualpipe_overlap_only_under_its_schedule():
    """The planner's ``dualpipe`` EP-overlap variant requires its schedule and ``p > 1`` (layout_options: requires
    ``schedule`` dualpipe, ``pipelined``); of a grid's rows it keeps only those (plan_variants._rows_meeting)."""
    from types import SimpleNamespace

    import numpy as np

    from costgraph.layout_options import LayoutOptions
    from costgraph.option_fields import specs
    from costgraph.training.plan_grid import COL, COLUMNS
    from costgraph.training.plan_variants import _rows_meeting

    need = specs(LayoutOptions)["ep_overlap"][1].domain.extra["requires"]["dualpipe"]
    assert need == {"schedule": ("dualpipe",), "pipelined": (True,)}
    schedules = ["1f1b", "interleaved", "dualpipe"]
    rows = np.zeros((4, len(COLUMNS)))
    rows[:, COL["e"]] = 8
    rows[:, COL["p"]] = (1, 2, 2, 4)
    rows[:, COL["s"]] = (0, 0, 2, 2)          # p 1 1F1B, p 2 1F1B, p 2 and p 4 DualPipe
    grid = SimpleNamespace(rows=rows, splits=None, schedules=schedules, explicit=False)
    kept = _rows_meeting(grid, need, experts=True)
    assert kept.rows[:, COL["p"]].tolist() == [2, 4] and kept.schedules[:1] == ["dualpipe"]


@pytest.fixture(scope="module")
def planned():
    m = costgraph.load("deepseek_v2")
    values = m.values("deepseek-v2-lite", s=1024)
    return m.plan(values, gpus=16, hardware="h800", global_batch=32, top=4, ep_dispatcher="deepep")


def test_plan_is_train_on_a_moe_layout(planned, train_check):
    """plan = train on its first MoE layout with an EP all-to-all under DeepEP (plan ranks PP 8 first here,
    EP 2 inside a node; the RDMA leg is exact by hand above)."""
    res = planned
    row = next(r for r in res.layouts if r["ep"] > 1)
    assert train_check(res.check_command(row)) == (row["memory_bytes"], row["step_seconds"], True)
