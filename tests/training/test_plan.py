"""The layout planner (issue 8, item 6): every layout it reports agrees with
`costgraph train` on that layout; JSON contract; errors."""

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.hardware import preset
from costgraph.training.memory import Layout
from costgraph.training.plan import plan
from costgraph.training.steptime import step_time


@pytest.mark.parametrize("name, config, gpus, batch", [("llama", "llama-3-8b", 8, 512), ("gpt", "gpt2", 4, 64)])
def test_reported_layouts_agree_with_train(name, config, gpus, batch):
    m = costgraph.load(name)
    values = m.values(config)
    hw = preset("h100-sxm")
    result = plan(m, values, gpus=gpus, hardware=hw, global_batch=batch, top=4)
    assert result.layouts
    b = m.graph.dims["b"].symbol
    for c in result.layouts:
        layout = Layout(t=c.tp, p=c.pp, c=c.cp, e=c.ep, m=c.micro_batches, zero=c.zero, recompute=c.recompute,
                        sp=c.sp, gpus=gpus, schedule=c.schedule, v=c.virtual_stages,
                        pipeline_layout=c.options.get("pipeline_layout"))   # a chunk layout (options.chunk_layouts)
        vals = {**values, b: sympy.Integer(c.micro_batch)}
        mem = m.train(layout)
        top = mem.most_loaded(vals).memory["total"].xreplace(vals)
        assert float(top) == pytest.approx(c.memory_bytes, rel=1e-9)
        assert top <= hw.memory_bytes
        st = step_time(m.graph, layout, hw)["total"].xreplace(vals)
        assert float(st) == pytest.approx(c.step_seconds, rel=1e-9)
    steps = [c.step_seconds for c in result.layouts]
    assert steps == sorted(steps)


def test_plan_json(capsys):
    assert main(["plan", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm",
                 "--global-batch", "512", "--format", "json", "--top", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["layouts"]) == 3
    for row in doc["layouts"]:
        assert set(row) >= {"tp", "pp", "dp", "cp", "ep", "zero", "recompute", "sp", "micro_batch", "memory_bytes",
                            "step_seconds", "mfu"}
        assert row["tp"] * row["pp"] * row["cp"] * row["dp"] == 8
        assert row["micro_batch"] * row["micro_batches"] * row["dp"] == 512
    assert doc["refused"]["out of memory"] > 0


@pytest.mark.parametrize("argv, message", [
    (["plan", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100", "--global-batch", "8"],
     "did you mean"),
    (["plan", "llama", "--gpus", "8", "--hardware", "h100-sxm", "--global-batch", "8"], "sizes"),
    (["plan", "llama", "--config", "llama-3-8b", "--gpus", "0", "--hardware", "h100-sxm", "--global-batch", "8"],
     "positive"),
    # an absurd --top (issue 27 item 6): refused before any work, each shown row being derived exactly
    (["plan", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--global-batch", "8",
      "--top", "1000000000"], "plan shows at most 100 layouts"),
    # trial4: a global batch above 2^53 came back with m rounded (99,999,999,999,999,999,999 → 10^20 in the check
    # command, another global batch); 2^53 + 1 is the first integer a float64 cannot hold
    (["plan", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--global-batch",
      str(2**53 + 1)], "plan searches up to 9,007,199,254,740,992 sequences"),
])
def test_plan_errors(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_full_derivation_store_evicts_the_least_recently_used():
    # plan_forms.derived keeps at most `size` derivations per graph: a full store drops the entry read least
    # recently (functools.lru_cache's policy), never the whole store, so the derivations a session keeps reading
    # survive a long sweep of others
    from costgraph.engine.graph import CostGraph
    from costgraph.training.plan_forms import derived, store

    cg, made = CostGraph("cache", ""), []

    def get(key):
        return derived(cg, (key,), lambda: made.append(key) or key * 10, kind="test", size=3)

    assert [get(k) for k in (1, 2, 3)] == [10, 20, 30]
    assert get(1) == 10                  # a hit: 1 is now the most recently used, 2 the least
    assert get(4) == 40                  # full: 2 is evicted, not 1 or 3
    assert list(store(cg, "test")) == [(3,), (1,), (4,)]
    assert [get(k) for k in (1, 3, 4)] == [10, 30, 40] and made == [1, 2, 3, 4]   # no re-derivation
    assert get(2) == 20 and made == [1, 2, 3, 4, 2]                               # 2 was dropped: derived again
    assert len(store(cg, "test")) == 3
