"""``plan --compare`` (issue 27 item 2; costgraph.training.plan_compare): a layout against plan's first row,
each side derived by train's path and split into parts that sum to its step.

Checked against train itself (the check command run by the real CLI parser: the train_check fixture) and
against the pipeline bubble's closed form, (p − 1)/(v·m) of the compute for 1F1B (Narayanan et al. 2021 §2.2;
Megatron-LM@d98e8a64:megatron/core/pipeline_parallel/schedules.py
forward_backward_pipelining_without_interleaving: p − 1 warm-up micro-batches on the first stage)."""

import math

import pytest

import costgraph
from cli_checks import refused, run
from costgraph.training.plan_compare import CAUSES, compare_layout

SIZES = {"s": 8192}
PLAN = dict(gpus=16, hardware="h100-sxm", global_batch=128, top=6)


@pytest.fixture(scope="module")
def planned():
    model = costgraph.load("llama", config="llama-3-8b")
    values = model.values("llama-3-8b", SIZES)
    return model, values, model.plan(values, **PLAN)


def _total(c, side):
    return math.fsum(getattr(g, side) for g in c.parts)


def test_a_row_of_plan_ranks_where_plan_lists_it(planned, train_check):
    model, values, res = planned
    row = res.layouts[2]
    given = {"t": row["tp"], "p": row["pp"], "c": row["cp"], "zero": row["zero"], "recompute": row["recompute"],
             "sp": row["sp"], "b": row["micro_batch"]}
    c = compare_layout(model, values, res, given)
    assert c.rank == 3 and c.shape_rank is not None and c.shape_rank <= 3
    # each side is train's step: the first row's is plan's (its confirmation is train's path), the given's the
    # step of its own check command run by costgraph train
    assert c.first_step == pytest.approx(res.layouts[0]["step_seconds"], rel=1e-12)
    assert c.given_step == pytest.approx(train_check(res.check_command(row))[1], rel=1e-12)
    assert c.gap == pytest.approx(row["step_seconds"] - res.layouts[0]["step_seconds"], rel=1e-9, abs=1e-12)
    # the parts of each side sum to its step
    assert _total(c, "given") == pytest.approx(c.given_step, rel=1e-12)
    assert _total(c, "first") == pytest.approx(c.first_step, rel=1e-12)
    assert c.cause in CAUSES and c.given_fits


def test_a_pipeline_shows_its_bubble(planned):
    model, values, res = planned
    c = compare_layout(model, values, res, {"t": 2, "p": 2, "zero": 1, "sp": True, "b": 1})
    parts = {g.part: g for g in c.parts}
    compute = math.fsum(parts[k].given for k in ("matmul", "attention", "memory", "other"))
    m = c.layout["micro_batches"]   # B / (b·d) = 128 / (1·4)
    assert m == 32 and c.layout["dp"] == 4
    assert parts["bubble"].given == pytest.approx(compute * (2 - 1) / m, rel=1e-12)   # (p − 1)/m, 1F1B
    assert parts["bubble"].first == 0 and res.layouts[0]["pp"] == 1
    assert "exposed:tp" in parts and parts["exposed:tp"].first == 0
    assert c.rank is None and c.gap > 0
    assert [x["difference"] for x in c.causes] == sorted((x["difference"] for x in c.causes), reverse=True)
    assert c.cause == parts[c.causes[0]["part"]].cause


def test_recompute_and_what_plan_does_not_search(planned):
    model, values, res = planned
    full = compare_layout(model, values, res, {"zero": 1, "recompute": "full", "b": 2, "overlap": "torchtitan"})
    none = compare_layout(model, values, res, {"zero": 1, "b": 2, "overlap": "torchtitan"})
    rec = {g.part: g.given for g in full.parts}["recompute"]
    assert rec > 0 and full.gap > none.gap
    # the re-run is the rest of the compute: the classes are the layout's without recomputation
    assert {g.part: g.given for g in none.parts}["matmul"] == {g.part: g.given for g in full.parts}["matmul"]
    assert full.unsearched == ["overlap=torchtitan"]
    # Megatron's layer split: plan searched the even split only (its `split` domain)
    split = compare_layout(model, values, res, {"p": 2, "account_embedding": True, "account_loss": True, "b": 1})
    assert res.searched["split"] == [[None, None, False, False]]
    assert split.unsearched == ["account_embedding=True", "account_loss=True"]
    # a value outside an option's searched domain: torchtitan's per-op SAC under Megatron's --overlap (the default;
    # choices.RECOMPUTE_BY_OVERLAP), whose searched recompute policies are none and full under flash
    sac = compare_layout(model, values, res, {"zero": 1, "recompute": "torchtitan-op", "b": 2})
    assert res.searched["recompute"] == ["none", "full"] and sac.unsearched == ["recompute=torchtitan-op"]
    assert full.unsearched == ["overlap=torchtitan"]   # full is searched: not named
    # a searched degree at a value outside its domain: CP 16 (plan's CP degrees are 1, 2, 4, 8 unless given)
    assert res.searched["c"] == [1, 2, 4, 8]
    cp16 = compare_layout(model, values, res, {"c": 16, "b": 1})
    assert cp16.unsearched == ["c=16 (plan searches 1, 2, 4, 8)"]
    # v: the virtual stages plan searched (p·v dividing the 32 layers) and the v of each chunk layout text it tried
    # (options.chunk_layouts: PP 2 × V 3, 5, 6, 9, 17, PP 4 × V 3); V 17 on PP 2 is E|(t|)*32L, searched as a text
    assert res.searched["v"] == [1, 2, 4, 8, 16]
    assert sorted({v for v, _ in res.searched["pipeline_layout"]}) == [3, 5, 6, 9, 17]
    v17 = compare_layout(model, values, res, {"p": 2, "v": 17, "schedule": "interleaved", "account_embedding": True,
                                              "account_loss": True, "b": 1})
    assert not any(u.startswith("v=") for u in v17.unsearched)


def test_a_layout_that_does_not_fit(planned):
    model, values, res = planned
    c = compare_layout(model, values, res, {"t": 2, "b": 2})
    assert not c.given_fits and c.cause == "memory: does not fit" and c.given_bytes > c.usable_bytes


def test_cli_text_and_json(capsys):
    argv = ["plan", "llama", "--config", "llama-3-8b", "--set", "s=8192", "--gpus", "16", "--hardware", "h100-sxm",
            "--global-batch", "128", "--top", "6", "--compare", "--tp 2 --pp 2 --zero 1 --sp --set b=1"]
    rc, out, _ = run(capsys, argv)
    assert rc == 0 and "compare: not among the 6 rows shown" in out and "pipeline bubble" in out
    rc, out, _ = run(capsys, argv + ["--format", "json"])
    import json

    c = json.loads(out)["comparison"]
    assert c["layout"]["tp"] == 2 and c["layout"]["pp"] == 2 and c["layout"]["sp"] is True
    assert math.fsum(p["given"] for p in c["parts"]) == pytest.approx(c["given_step"], rel=1e-12)


def test_cli_text_names_the_compared_layout_and_the_tables_unit(capsys):
    """Issue 27, trial fixes 1 and 3: ``--compare ""`` compares train's defaults (TP 1, ZeRO 0, b = 1, m from
    the global batch: 128 / (1·16) = 8), and the text now says so in train's flags; its memory is in the
    table's unit and format (GB, 10^9 bytes, two decimals), so the first row's figure reads as the table's."""
    argv = ["plan", "llama", "--config", "llama-3-8b", "--set", "s=8192", "--gpus", "16", "--hardware", "h100-sxm",
            "--global-batch", "128", "--top", "6", "--compare="]
    rc, out, _ = run(capsys, argv)
    assert rc == 0
    assert "\n  layout compared: --tp 1 --pp 1 --cp 1 --ep 1 --zero 0 --recompute none --set b=1 --micro-batches 8\n" \
        in out
    lines = out.splitlines()
    head = next(i for i, x in enumerate(lines) if "memory GB" in x)
    table_first = lines[head + 1].split()[lines[head].split().index("memory")]   # the first row's memory GB cell
    memory = next(x for x in lines if x.startswith("  memory GB: "))
    assert f"against the first row's {table_first} of " in memory and "GiB" not in memory


def test_a_single_flag_is_read_as_the_value_of_compare(capsys):
    """``--compare --tp=2`` (one word that starts with ``-``, no space): argparse alone would refuse it ("expected
    one argument"), as it did; the option's ``FLAGS`` metavar makes the next word its value, whatever it starts with
    (costgraph.cli._join_flag_values), so it compares as ``--compare "--tp 2"`` does."""
    argv = ["plan", "llama", "--config", "llama-3-8b", "--set", "s=8192", "--gpus", "16", "--hardware", "h100-sxm",
            "--global-batch", "128", "--top", "6", "--format", "json", "--compare"]
    rc, one, _ = run(capsys, argv + ["--tp=2"])
    rc2, spaced, _ = run(capsys, argv + ["--tp 2"])
    assert rc == rc2 == 0 and one == spaced
    refused(capsys, argv + ["--sp"], "error: --compare: sequence parallelism splits along s")


@pytest.mark.parametrize("flags, fragment", [
    ("--tp 2 --hardware h100-sxm", "is no layout flag of costgraph train"),
    ("--tp x", "argument --tp: cannot read 'x'"),
    ("--set h=3", "only the micro-batch b=N"),
    ("--set b=0", "the micro-batch b must be a positive whole number"),
    ("--set b=nan", "the micro-batch b must be a positive whole number"),
    ("--set b=1.5", "the micro-batch b must be a positive whole number"),
    ("--gpus 8", "is not plan's --gpus 16"),
    # refusals of train's path carry the prefix too (issue 27): 16 = t·p·c·d has no whole d for t = 3, and
    # 128 sequences are no multiple of b·d = 32·16
    ("--tp 3", "error: --compare: 16 GPUs do not divide into t·p·c = 3\nhint: gpus = t × p × c × d"),
    ("--set b=32", "error: --compare: the global batch 128 is not a multiple of b·d = 32·16\nhint: B = b × m × d"),
])
def test_cli_refusals(capsys, flags, fragment):
    refused(capsys, ["plan", "llama", "--config", "llama-3-8b", "--set", "s=8192", "--gpus", "16", "--hardware",
                     "h100-sxm", "--global-batch", "128", "--compare", flags], fragment)


@pytest.mark.parametrize("given", [
    {"t": 2, "cross_entropy": "te"},                                          # a loss other than plan's
    {"t": 2, "recompute": "selective", "recompute_modules": ("mlp",)},       # a variant field
    {"t": 2, "zero": 3, "offload_optimizer": "cpu"},                          # offload, not searched by default
    {"t": 2, "policy": "fp8-current"},                                        # a precision other than plan's
])
def test_the_given_layouts_check_command_gives_its_figures(planned, train_check, given):
    """The comparison's check command carries the given layout's own settings (trial 10: it dropped every
    setting plan does not search, so train gave other figures): costgraph train on it gives the given step."""
    model, values, res = planned
    c = compare_layout(model, values, res, {**given, "b": 1})
    assert c.given_step == pytest.approx(train_check(c.check)[1], rel=1e-12)


def test_micro_batches_that_contradict_the_global_batch_are_refused(planned):
    """--compare "--tp 2 --micro-batches 7" timed 7 micro-batches where the plan's global batch makes 16
    (trial 10): refused, with the batch arithmetic."""
    from costgraph.errors import CostgraphValueError

    model, values, res = planned
    with pytest.raises(CostgraphValueError, match=r"b·m·d = 1·7·8 = 56 sequences a step, where the plan's global "
                                                  r"batch is 128"):
        compare_layout(model, values, res, {"t": 2, "m": 7, "b": 1})
