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
from tests.device_memory import H100_SXM_CUDA


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


def test_plan_searches_torchtitan_sac(capsys, train_check):
    """torchtitan's per-op SAC (choices.RECOMPUTE_PLANNED, issue 27 item 2) is a recompute policy of the search on
    every layout under torchtitan's conventions (--overlap torchtitan; Megatron's --overlap, the default, searches
    Megatron's none, selective and full: choices.RECOMPUTE_BY_OVERLAP): named in `searched`, ranked between no recompute and full where the memory asks for it (GPT-2,
    s 2048 on one H100 held to 6 GB: b 2 fits without recompute at 4.53 GB, b 4 only with SAC or full), and its
    row's memory and time are train's own (plan = train: its check command). Under torchtitan's attention kernel
    (plan --attention-kernel fa2: PyTorch SDPA's FlashAttention-2, a convention plan passes to every row and to
    the check command, never searched), as the torchtitan rows of bench/published_layouts.toml run."""
    assert main(["plan", "gpt", "--config", "gpt2", "--set", "s=2048", "--gpus", "1", "--hardware", "h100-sxm",
                 "--global-batch", "8", "--memory", "6GB", "--format", "json", "--top", "4",
                 "--attention-kernel", "fa2", "--overlap", "torchtitan"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "--attention-kernel fa2" in doc["check"]
    gpt = costgraph.load("gpt")
    res = gpt.plan(gpt.values("gpt2", s=2048), gpus=1, hardware="h100-sxm", global_batch=8, memory="6GB", top=4,
                   attention_kernel="fa2", overlap="torchtitan")
    assert [(r["recompute"], r["micro_batch"]) for r in res.layouts] == \
        [(r["recompute"], r["micro_batch"]) for r in doc["layouts"]]
    for r in res.layouts:
        assert train_check(res.check_command(r)) == (r["memory_bytes"], r["step_seconds"], True)
    assert doc["searched"]["recompute"] == ["none", "full", "torchtitan-op"]   # not selective under flash
    rows = [(r["recompute"], r["micro_batch"]) for r in doc["layouts"]]
    assert ("torchtitan-op", 2) in rows
    sac = next(r for r in doc["layouts"] if r["recompute"] == "torchtitan-op")
    none = next(r for r in doc["layouts"] if r["recompute"] == "none" and r["micro_batch"] == sac["micro_batch"])
    # SAC keeps less than no recompute and re-runs some of the forward: less memory, more time, at the same b
    assert sac["memory_bytes"] < none["memory_bytes"] and sac["step_seconds"] > none["step_seconds"]
    megatron = gpt.plan(gpt.values("gpt2", s=2048), gpus=1, hardware="h100-sxm", global_batch=8, memory="6GB", top=4)
    assert megatron.searched["recompute"] == ["none", "full"]


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
    # session 42 trial: one missing flag was "give them"
    (["plan", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--global-batch", "8"],
     "hint: give it, or a --launch file that holds it"),
    (["plan", "gpt", "--set", "V=50257", "a=12", "h=768", "l=12", "--gpus", "8", "--hardware", "h100-sxm",
      "--global-batch", "8"], "hint: give them with --set or --config"),   # s and s_max: two
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


@pytest.mark.parametrize("extra, figure, said", [
    # the default: what CUDA reports (runtime_memory.toml [visible.h100-sxm]: vllm PR #10511's 79.22 GiB)
    ([], H100_SXM_CUDA, "as CUDA reports it (memory convention cuda): runtime_memory.toml [visible.h100-sxm]"),
    # the printed figure (hardware.toml's memory_bytes: NVIDIA's H100 datasheet, 80 GB), named with its source
    (["--memory-convention", "nominal"], 80_000_000_000, "memory convention nominal, h100-sxm's printed figure: "),
    (["--memory", "80GiB"], 80 * 2**30, "--memory"),
])
def test_plan_json_names_its_memory_figure(capsys, extra, figure, said):
    """Session 42 trial: plan's JSON gave capacity_bytes but not which figure it is (the text said it); its
    capacity_from is train's key, from the same data (runtime_memory.device_memory), and in the schema."""
    import jsonschema

    from costgraph.export.schema import schema

    assert main(["plan", "gpt", "--config", "gpt2", "--gpus", "8", "--hardware", "h100-sxm", "--global-batch", "64",
                 "--format", "json", "--top", "1", *extra]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["capacity_bytes"] == figure and doc["capacity_from"].startswith(said)
    jsonschema.validate(doc, schema("plan"))
    api = costgraph.load("gpt")
    keywords = {"memory_convention": "nominal"} if "nominal" in extra else {"memory": "80GiB"} if extra else {}
    r = api.plan(api.values("gpt2"), gpus=8, hardware="h100-sxm", global_batch=64, top=1, **keywords)
    assert r.capacity_from == r.device_memory.source == doc["capacity_from"] and r.device_memory.bytes == figure
