"""The planner's screen of an uneven pipeline split (Megatron's --decoder-first/last-pipeline-num-layers,
--account-for-embedding/loss-in-pipeline-split, a chunk layout text) gives lower bounds of its exact figures
(training/plan_forms.py uneven_bounds): on a grid of such layouts, the screened memory and step never exceed
what train derives for the layout (training/plan_confirm.py exact_figures, train's own calls), so pruning
by them never drops a layout that fits or is faster (issue 27 item 2)."""

from unittest import mock

import numpy as np
import pytest

import costgraph
from costgraph.choices import ATTENTION, DEFAULT_OPTIMIZER, DEFAULT_POLICY, OVERLAP
from costgraph.hardware import preset
from costgraph.training import plan as planner
from costgraph.training.plan_confirm import checked, exact_figures, exact_memory, layout_of
from costgraph.training.plan_forms import screen
from costgraph.training.plan_grid import uneven

GPUS = 4


@pytest.fixture(scope="module")
def screened():
    """The grids and forms one ``plan`` screens (Llama 3 8B at 7 layers, 4 GPUs: p = 2 and 4 with Megatron's
    uneven splits and chunk layout texts), with the model, its values and the hardware."""
    m = costgraph.load("llama")
    values = m.values("llama-3-8b", s=1024, l=7)
    hw = preset("h100-sxm")
    calls = []
    first = planner._evaluate

    def record(forms, grid, with_b, refused, **kw):
        calls.append((forms, grid, with_b))
        return first(forms, grid, with_b, refused, **kw)
    with mock.patch.object(planner, "_evaluate", record):
        res = planner.plan(m, values, gpus=GPUS, hardware=hw, global_batch=16, top=1, capacity=10 ** 15)
    return m, values, hw, calls, res


def _sample(forms, grid, with_b, limit, per_pipeline=3):
    """Up to ``limit`` bounded rows: up to ``per_pipeline`` of each pipeline (p, v, schedule, split), each at
    the next option combination (ZeRO stage, recomputation, SP) in turn, with the screened memory and step."""
    bounded = uneven(grid)
    by_option = {key: (*low, valid) for key, _, _, _, valid, low in screen(forms, grid.rows, with_b, False, bounded)}
    keys = list(by_option)
    taken, out = {}, []
    for i in np.nonzero(bounded)[0]:
        t, p, c, e, d, b, m, v, k, s = (int(x) for x in grid.rows[i])
        if taken.get((p, v, k, s), 0) >= per_pipeline:
            continue
        key = keys[len(out) % len(keys)]
        mem, step, valid = by_option[key]
        if valid[i]:
            taken[(p, v, k, s)] = taken.get((p, v, k, s), 0) + 1
            out.append((i, key, float(mem[i]), float(step[i])))
        if len(out) >= limit:
            break
    return out


def test_uneven_split_bounds_never_exceed_exact(screened):
    m, values, hw, calls, res = screened
    b = m.graph.dims["b"].symbol
    settings = dict(attention=ATTENTION.default, policy=DEFAULT_POLICY, optimizer=DEFAULT_OPTIMIZER, gpus=GPUS,
                    overlap=OVERLAP.default, pipeline_layout=None)
    forms, grid, with_b = calls[0]   # the base forms (the variants are screened the same way)
    rows = _sample(forms, grid, with_b, 12)
    splits = {grid.splits[int(grid.rows[i][8])] for i, *_ in rows}
    assert any(len(s) == 5 for s in splits) and any(s[0] is not None or s[2] for s in splits), splits
    for i, (z, r, sp), mem, step in rows:
        c = planner._candidate(grid, i, z, r, sp, mem, step, 0.0)
        at = {**values, b: c.micro_batch}
        layout = checked(m, layout_of(c, settings), at)
        exact_mem, exact_step = exact_figures(m, layout, at, hw, None, None)
        assert exact_mem == exact_memory(m, layout, at)
        assert mem <= exact_mem and step <= float(exact_step), (c, exact_mem, float(exact_step))


def test_plan_says_what_the_bounds_pruned(screened):
    res = screened[-1]
    assert res.pruned[planner.BOUND_SLOWER] > 0
    assert planner.BOUND_OOM in res.refused


def test_a_planned_graph_is_freed_with_its_caches(screened):
    """The analyses' caches (placements, the planner's derivations and exact figures, the kernel times) are
    the graph's own (``CostGraph.memo``): a graph that was placed, planned on and confirmed is freed when the
    last reference to it goes, its caches with it. (Review finding: placement's module-level cache held each
    Placement, whose ``graph`` is the graph, under the graph's id: every graph ever placed stayed alive.)
    Each graph's entries are its own, so another graph at a freed one's address cannot meet them."""
    import gc
    import types
    import weakref

    m, values, hw, calls, res = screened
    b = m.graph.dims["b"].symbol
    row = res.layouts[0]
    settings = dict(attention=ATTENTION.default, policy=DEFAULT_POLICY, optimizer=DEFAULT_OPTIMIZER, gpus=GPUS,
                    overlap=OVERLAP.default, pipeline_layout=None)
    at = {**values, b: row.micro_batch}
    layout = checked(m, layout_of(row, settings), at)
    want = exact_figures(m, layout, at, hw, None, None)
    g = costgraph.load("llama").graph   # a graph of its own: the module's graph keeps its cache
    assert exact_figures(types.SimpleNamespace(graph=g), layout, at, hw, None, None) == want
    assert {"placement", "kernel_times", "plan.derived", "plan.figures"} <= set(g._memo)
    gone = weakref.ref(g)
    del g
    gc.collect()
    assert gone() is None


def test_screened_rows_rank_as_their_candidates_sort(screened):
    """The screen's rows are kept as arrays and ranked by one lexsort (training/plan_rows.py): the order, and
    the confirmation's pool by least step, are those of sorting the built candidates with the planner's own
    keys (plan._order; plan_confirm._lowest), both sorts stable, every candidate field as _evaluate built it."""
    from costgraph.training.plan_confirm import _lowest

    m, values, hw, calls, res = screened
    forms, grid, with_b = calls[0]
    refused = {k: 0 for k in ("out of memory",)}
    rows, _, _ = planner._evaluate(forms, grid, with_b, refused, capacity=10 ** 15, gpus=GPUS,
                                   peak=float(hw.peak_flops_bf16), keep=None)
    built = [rows.batches[n].candidate(j) for n in range(len(rows.batches)) for j in range(len(rows.batches[n].idx))]
    assert len(built) == len(rows) > 100 and any(c.bound is not None for c in built)
    rows.sort()
    ranked = list(rows)

    def fields(c):
        return (c.as_dict(), c.bound, c.likely, c.screen is None or (id(c.screen[0]), c.screen[1]))
    assert [fields(c) for c in ranked] == [fields(c) for c in sorted(built, key=planner._order)]
    pool = [(low, bounded, get()) for low, bounded, get in rows.pool(0, [], _lowest)]
    by_lowest = sorted(ranked, key=_lowest)
    assert [(low, bounded) for low, bounded, _ in pool] == [(_lowest(c), c.bound is not None) for c in by_lowest]
    assert [fields(c) for *_, c in pool] == [fields(c) for c in by_lowest]
