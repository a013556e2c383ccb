"""plan = train (issue 27 item 1): every row `costgraph plan` lists is accepted by `costgraph train`
run with the row's own check command — parsed by the real CLI parser and run through the API
`costgraph train` calls (the train_check fixture of tests/conftest.py) — with the same memory of the
most-loaded device (bytes, exact) and the same step time; a layout train would refuse is never listed. Over dense, MoE with a dense prefix
(DeepSeek-V2/V3, reduced in size), gpt-oss, Mixtral, Llama 4, Qwen3-MoE and layer patterns
(Gemma 3, Jamba), at several device counts."""

import functools

import pytest

import costgraph

# (model, config, sizes, devices, global batch, device memory): memory raised where the model's full
# size does not fit a handful of devices (the rule under test is plan = train, not the fit). A model's cases
# side by side: the planner's forms of a model and settings are derived once (training/plan.py's forms_of,
# a cache of the last few), and a layout text or a device count that leaves them alike derives nothing again
CASES = [
    ("llama", "llama-3-8b", {"s": 2048}, 8, 64, None),
    ("llama", "llama-3-8b", {"s": 2048}, 6, 48, None),
    # a fraction of the device memory and a size (--reserve), on the memory CUDA reports (79.22 GiB on an H100 SXM,
    # vllm PR #10511: runtime_memory.toml [visible.h100-sxm]) and on the printed 80 GB (--memory-convention nominal):
    # the planner's capacity is train's under each (the llama cases' closed forms, derived once)
    ("llama", "llama-3-8b", {"s": 2048}, 8, 64, None, {"reserve": "0.1"}),
    ("llama", "llama-3-8b", {"s": 2048}, 8, 64, None, {"reserve": "8GB", "memory_convention": "nominal"}),
    # 7 layers, one dense: no even split for p = 2 or 4 — Megatron's other splits are searched
    ("deepseek_v3", "deepseek-v3", {"s": 1024, "l": 7, "k_d": 1, "E": 16}, 8, 32, "1000GB"),
    ("deepseek_v3", "deepseek-v3", {"s": 1024, "l": 7, "k_d": 1, "E": 16}, 12, 24, "1000GB"),
    # a DeepSeek layout with no even split: Megatron-Bridge's chunk layout of 7 layers over 4 chunks
    # (options.chunk_layout), PP 2 × VP 2 or PP 4
    ("deepseek_v3", "deepseek-v3", {"s": 1024, "l": 7, "k_d": 1, "E": 16}, 8, 32, "1000GB",
     {"pipeline_layout": "Et*2|(t*2|)*2tL"}),
    ("deepseek_v2", "deepseek-v2-lite", {"s": 1024}, 4, 16, None),
    ("gpt_oss", "gpt-oss-20b", {"s": 1024}, 8, 32, None),
    ("mixtral", "mixtral-8x7b", {"s": 1024}, 8, 16, "1000GB"),
    ("llama4_text", "llama-4-scout-17b-16e", {"s": 1024}, 8, 16, "1000GB"),
    ("qwen3_moe", "qwen3-30b-a3b", {"s": 1024}, 8, 16, None),
    ("gemma3_text", "gemma-3-1b", {"s": 1024}, 4, 16, None),
    ("jamba", "jamba-v0.1", {"s": 1024}, 8, 16, "1000GB"),
    # the new options (issue 27 items 2 and 3): an FP8 policy searched (--allow-fp8: the first FP8 policy only,
    # to keep the test cheap; its rows are the fastest at s = 4096: at s = 1024 TE's quantize kernels and the
    # 262k-vocabulary loss leave Gemma 3 1B's BF16 rows first), Megatron's pipeline layout text as the candidate
    ("gemma3_text", "gemma-3-1b", {"s": 4096}, 4, 16, None, {"allow_fp8": True}),
    # ... with torchtitan's cross-entropy (plan --cross-entropy: a layout field, in the check command), its
    # collectives at the line rates (plan --link-rate line: a convention, not searched, in the check command)
    ("gemma3_text", "gemma-3-1b", {"s": 1024}, 4, 16, None,
     {"pipeline_layout": "Et*7|t*6|t*6|t*7L", "cross_entropy": "pytorch", "link_rate": "line"}),
]


@functools.lru_cache(maxsize=None)
def _model(name):
    """One model per name for the whole module (the planner's closed forms are derived once per model and
    settings: training/plan.py's forms_of)."""
    return costgraph.load(name)


@pytest.fixture(scope="module", params=CASES,
                ids=lambda c: f"{c[0]}-{c[3]}gpus" + "".join(f"-{k}" for k in (c[6] if len(c) > 6 else {})))
def planned(request):
    from unittest import mock

    from costgraph import options
    from costgraph.training import plan_variants

    name, config, sets, gpus, batch, memory = request.param[:6]
    kw = request.param[6] if len(request.param) > 6 else {}
    m = _model(name)
    first = plan_variants.variants
    with mock.patch.object(plan_variants, "variants", lambda space: first(space)[:2]):   # the base and one FP8 policy
        res = m.plan(m.values(config, **sets), gpus=gpus, hardware="h100-sxm", global_batch=batch, memory=memory,
                     top=1, **kw)
    if kw.get("allow_fp8"):
        assert res.layouts[0]["options"] == {"policy": "fp8-delayed"} and "--precision fp8-delayed" in res.check_command()
    if kw.get("reserve"):   # the capacity under the convention, named in the check command where not the default
        assert res.capacity_bytes == (80_000_000_000 if kw.get("memory_convention") else 85_061_827_297)
        assert ("--memory-convention nominal" in res.check_command()) == bool(kw.get("memory_convention"))
    if kw.get("cross_entropy"):
        assert f"--cross-entropy {kw['cross_entropy']}" in res.check_command()
    assert ("--link-rate line" in res.check_command()) == (kw.get("link_rate") == "line")
    if kw.get("pipeline_layout"):
        assert all(r["pp"] in (2, 4) for r in res.layouts) and "--pipeline-layout" in res.check_command()
    return res


def test_every_row_is_train(planned, train_check):
    assert planned.layouts, planned.to_text()
    for row in planned.layouts:
        peak, step, fits = train_check(planned.check_command(row))
        assert (peak, step) == (row["memory_bytes"], row["step_seconds"])
        assert fits
    assert planned.refused.get("refused by train", 0) == 0   # the grid asks train's checks first


def test_deepseek_pipeline_without_an_even_split():
    """DeepSeek-V3 (61 layers) on 256 GB200s ranked first TP 2 × PP 32 × CP 2 with an even split that
    train refuses ("32 pipeline stages cannot share the 61 iterations"). At 7 layers (one dense),
    p = 2 and 4 have no even split: the grid offers them only with Megatron's other splits, and
    train accepts each."""
    from costgraph.parallel.layout import Layout
    from costgraph.training.plan import _space
    from costgraph.training.plan_grid import Grid

    m = _model("deepseek_v3")   # the planned cases' model: its placements and derivations shared
    values = m.values("deepseek-v3", s=1024, l=7, k_d=1, E=16)
    b = m.graph.dims["b"].symbol
    fixed = {k: v for k, v in values.items() if k != b}
    space, pl = _space(m.graph, fixed, gpus=8, max_tp=8)
    grid = Grid(m.graph, fixed, space, global_batch=32, placement=pl)
    rows = {(int(r[1]), int(r[7]), grid.splits[int(r[8])]) for r in grid.rows if r[1] > 1}
    splits = {(p, s) for p, _, s in rows if len(s) == 4}
    assert {p for p, _ in splits} == {2, 4} and (2, (None, None, False, False)) not in splits
    assert (2, (None, None, True, False)) in splits and (4, (None, None, True, False)) in splits
    for p, (first, last, emb, loss) in sorted(splits, key=repr):
        layout = Layout(p=p, gpus=8, m=p, first_stage_layers=first, last_stage_layers=last, account_embedding=emb,
                        account_loss=loss)
        m.train(layout, values=values)   # raises CostgraphValueError if train refuses the split
    # Megatron-Bridge's chunk layout texts (options.chunk_layouts): 7 layers over PP 2 × VP 2 (q = 2, the
    # first chunk E t t, two middle chunks t t, the last t L), accepted by train with its p and v
    texts = {(p, v, s[4]) for p, v, s in rows if len(s) == 5}
    assert texts == {(2, 2, "Et*2|(t*2|)*2tL")}
    for p, v, text in sorted(texts):
        m.train(Layout(p=p, v=v, gpus=8, m=2 * p, schedule="interleaved", pipeline_layout=text), values=values)
    with pytest.raises(costgraph.errors.CostgraphValueError, match="cannot share"):
        m.train(Layout(p=2, gpus=8, m=2), values=values)
