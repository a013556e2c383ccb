"""Megatron's EP all-to-all overlap (``--ep-overlap megatron``) as its combined 1F1B schedule pairs the nodes
(issue 27 item 4; costgraph.parallel.ep_time, "Overlap").

The schedule, read at the source (Megatron-LM @ d98e8a64):

* ``megatron/core/pipeline_parallel/combined_1f1b.py::combined_1f1b_schedule_for_no_pipelining``: the first
  micro-batch's forward alone, then ``m − 1`` steps of one forward beside the previous micro-batch's backward,
  then the last backward alone ("Phases 0: 1st microbatch forward ... Phases 4: 4th microbatch backward");
* ``schedules.py::forward_backward_pipelining_with_interleaving`` with ``overlap_moe_expert_parallel_comm``:
  the first stage's warm-up forwards (``2(p − 1) + (v − 1)·p``, one more with the overlap) alone, the steady
  1F1B phase combined, the cool-down backwards alone;
* ``megatron/core/models/common/model_chunk_schedule_plan.py::TransformerLayerSchedulePlan.run``: in a layer
  pair, three phases, each as long as the longer of its two streams::

      comm_stream: combine_bwd       | dispatch_fwd->dispatch_bwd  | combine_fwd
      comp_stream: pre_dispatch_fwd  | mlp_bwd->mlp_bwd_dw->mlp_fwd| pre_dispatch_bwd

The tests below simulate that schedule chunk by chunk from per-node figures and compare the exposed
all-to-all (the schedule's time less its compute) with costgraph's, exactly.
"""

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.hardware import preset
from costgraph.parallel.ep_time import ep_exposed, warmup_chunks
from costgraph.parallel.layout import Layout
from costgraph.parallel.placement import placement
from costgraph.training.overlap import ep_node_shares, phase
from costgraph.training.steptime import step_time

R = sympy.Rational


def simulated_exposed(chunk, N, w):
    """The exposed all-to-all of the combined 1F1B schedule of the first stage, simulated: ``N`` forward and
    ``N`` backward chunks, the first ``w`` forwards and the last ``w`` backwards alone (all four of their
    nodes run one after the other), each of the other ``N − w`` forwards beside one backward in the three
    phases of TransformerLayerSchedulePlan.run. ``chunk``: one chunk's node seconds (dispatch/combine
    forward and backward, pre_dispatch and mlp forward and backward). Returns the schedule's seconds less
    its compute."""
    c = chunk
    alone_f = c["pre_f"] + c["dispatch_f"] + c["mlp_f"] + c["combine_f"]
    alone_b = c["combine_b"] + c["mlp_b"] + c["dispatch_b"] + c["pre_b"]
    pair = (max(c["combine_b"], c["pre_f"])
            + max(c["dispatch_f"] + c["dispatch_b"], c["mlp_b"] + c["mlp_f"])
            + max(c["combine_f"], c["pre_b"]))
    schedule = w * alone_f + (N - w) * pair + w * alone_b
    compute = N * (c["pre_f"] + c["mlp_f"] + c["pre_b"] + c["mlp_b"])
    return schedule - compute


def _chunk(dispatch_f, combine_f, backward, fwd, bwd, pre, mlp, N):
    """One chunk's node seconds from the per-step figures ep_exposed takes (``N`` chunks a step)."""
    return {"dispatch_f": dispatch_f / N, "combine_f": combine_f / N, "dispatch_b": backward / 2 / N,
            "combine_b": backward / 2 / N, "pre_f": pre * fwd / N, "mlp_f": mlp * fwd / N,
            "pre_b": pre * bwd / N, "mlp_b": mlp * bwd / N}


@pytest.mark.parametrize("layout, w", [
    (Layout(m=4, d=1, ep_overlap="megatron"), 1),                                          # no pipeline
    (Layout(p=2, v=2, m=4, d=1, schedule="interleaved", ep_overlap="megatron"), 5),       # 2·1 + 1·2 + 1
    (Layout(p=4, v=2, m=8, d=1, schedule="interleaved", ep_overlap="megatron"), 11),      # 2·3 + 1·4 + 1
])
@pytest.mark.parametrize("figures", [
    # dispatch_f, combine_f, backward, forward compute, backward compute, pre share, mlp share (seconds a step)
    (4, 4, 8, 8, 16, R(1, 2), R(1, 4)),       # the middle phase exposed only
    (4, 4, 8, 2, 4, R(1, 2), R(1, 4)),        # every phase exposed
    (1, 1, 2, 40, 80, R(3, 5), R(1, 3)),      # all hidden
    (6, 2, 8, 10, 20, R(1, 10), R(4, 5)),     # dispatch longer than combine (route_nodes), attention short
])
def test_exposed_equals_the_simulated_schedule(layout, w, figures):
    L = layout.filled()
    N = L.m * L.v
    assert warmup_chunks(L) == w
    df, cf, b, fwd, bwd, pre, mlp = (sympy.sympify(x) for x in figures)
    got = ep_exposed(df, cf, b, fwd, bwd, L, pre, mlp)
    assert got == simulated_exposed(_chunk(df, cf, b, fwd, bwd, pre, mlp, N), N, w)


def test_hand_example_no_pipeline():
    """m = 4, no pipeline, each node 1 s a micro-batch; pre_dispatch 1 s forward, 2 s backward, mlp 0.5 s forward,
    1 s backward: per pair max(0, 1 − 1) + max(0, 2 − 1.5) + max(0, 1 − 2) = 0.5, three pairs; the first forward's
    dispatch and combine and the last backward's: 4 s. Complete overlap (before) said 4 s."""
    L = Layout(m=4, d=1, ep_overlap="megatron").filled()
    assert ep_exposed(4, 4, 8, 8, 16, L, R(1, 2), R(1, 4)) == R(11, 2)


def test_none_and_dualpipe_and_refusals():
    assert ep_exposed(4, 4, 8, 8, 16, Layout(m=4, d=1).filled()) == 16
    # DualPipe (DeepSeek-V3 report §3.2.1): the stage's all-to-all beyond its whole compute
    dual = Layout(p=2, m=4, d=1, schedule="dualpipe", ep_overlap="dualpipe").filled()   # DualPipe's least: p 2, m 2p
    assert ep_exposed(4, 4, 8, 2, 4, dual) == 10
    assert ep_exposed(4, 4, 8, 8, 16, dual) == 0
    with pytest.raises(CostgraphValueError, match="interleaved"):
        ep_exposed(4, 4, 8, 8, 16, Layout(p=4, m=8, d=1, ep_overlap="megatron").filled())
    with pytest.raises(CostgraphValueError, match="recomputation"):
        ep_exposed(4, 4, 8, 8, 16, Layout(m=8, d=1, ep_overlap="megatron", recompute="full").filled())


@pytest.fixture(scope="module")
def qwen():
    m = costgraph.load("qwen3_moe")
    return m, m.values("qwen3-30b-a3b", b=1, s=4096, l=4)


@pytest.mark.parametrize("kw", [dict(gpus=8, m=8), dict(p=2, v=2, schedule="interleaved", gpus=16, m=8)])
def test_step_time_charges_the_schedules_pairing(qwen, kw):
    """The step time's exposed EP (training.overlap) equals the simulated schedule on the nodes' figures it
    reads: the ep parts' seconds (dispatch, combine forward; their gradients backward) and the stage's
    forward and backward compute split by the operators' FLOP shares (ep_node_shares)."""
    m, vals = qwen
    L = Layout(e=8, ep_overlap="megatron", **kw).filled()
    st = step_time(m.graph, L, preset("h100-sxm"))
    ov = st["overlap"]
    col_secs = {"dispatch": 0, "combine": 0, "backward": 0}
    from costgraph.parallel.communication import communication, comm_time
    from costgraph.parallel.collectives import Collective
    for p in communication(m.graph, L)["ep"].parts:
        s = comm_time({"x": Collective("ep", (p,))}, preset("h100-sxm"), L)["x"]
        key = "backward" if phase(p) == "backward" else "combine" if ": combine" in p.what else "dispatch"
        col_secs[key] += s.xreplace(vals)
    pre, mlp = (x.xreplace(vals) for x in ep_node_shares(m.graph, placement(m.graph, L)))
    assert 0 < pre < 1 and 0 < mlp < 1 and pre + mlp < 1
    fwd, bwd = ov.forward.xreplace(vals), ov.backward.xreplace(vals)
    N = L.m * L.v
    want = simulated_exposed(_chunk(col_secs["dispatch"], col_secs["combine"], col_secs["backward"], fwd, bwd,
                                    pre, mlp, N), N, warmup_chunks(L))
    got = ov.exposed()["ep"].xreplace(vals)
    assert got == want
    assert ov.kinds["ep"].rule == "ep_overlap megatron"
    # more than the unpaired chunks' share alone only where a phase's communication outlasts its compute
    assert got >= sum(col_secs.values()) * warmup_chunks(L) / N


def test_plan_rows_with_megatrons_overlap_are_train(train_check):
    """plan = train (issue 27 item 1) for rows under --ep-overlap megatron: the planner's evaluated forms of the
    pairing (Overlaps.mapped over its arrays) give train's step time. The variants are cut to the base and
    Megatron's EP overlap, the stages to 1 (the test's time; the pipelined forms differ in w and N only, which
    test_step_time_charges_the_schedules_pairing checks on train's side)."""
    from unittest import mock

    from costgraph import options
    from costgraph.training import plan_variants

    m = costgraph.load("qwen3_moe")
    first = plan_variants.variants
    only = lambda space: [v for v in first(space) if len(v) == 1 or v.get("ep_overlap") == "megatron"]   # noqa: E731
    with mock.patch.object(plan_variants, "variants", only), \
            mock.patch.object(options, "pipeline_degrees", lambda space: (1,)):
        res = m.plan(m.values("qwen3-30b-a3b", s=1024, l=4), gpus=8, global_batch=16, top=40, hardware="h100-sxm",
                     exhaustive=True)
    rows = [r for r in res.layouts if r.get("options", {}).get("ep_overlap") == "megatron"]
    assert rows, res.to_text()
    for r in rows[:2]:
        peak, step, fits = train_check(res.check_command(r))
        assert (peak, step) == (r["memory_bytes"], r["step_seconds"]) and fits
