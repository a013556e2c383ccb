"""The planner generates the layouts real runs used (issue 27, "Done when"; bench/published_layouts.toml).

Each search-space addition generates the published layout it was made for (exact degrees), and plan = train on
that row: the row's own check command, run through train, gives its memory (bytes) and step time exactly.

* CP beyond the candidates given (:func:`costgraph.options.context_degrees`): every power of two up to the device
  count at which each CP rank keeps at least :data:`costgraph.options.MIN_CP_TOKENS` (8,192) tokens — the Llama 3
  paper's long-context stage ran CP 16 at 131,072 tokens (arXiv 2407.21783 v3, §3.3.2, Table 4, row "16,384 GPUs,
  CP 16"); plan searched 1, 2, 4, 8 only, and ``--compare`` named ``c=16 (plan searches 1, 2, 4, 8)``.
* Activation offload under ``--allow-offload`` (:func:`costgraph.options.offload_fractions`): half the layers, as
  Megatron-Bridge's Llama-3-70B GB200 FSDP recipe runs it (``cpu_offloading_num_layers`` 40 of 80), on Megatron's
  terms (no pipeline, no recomputation); ``--compare`` named ``offload_activations=1/2`` as not searched.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

import costgraph
from costgraph.options import MIN_CP_TOKENS, OFFLOAD_FRACTION, Space, context_degrees, offload_fractions, variants

DATA = Path(__file__).resolve().parents[2] / "bench" / "published_layouts.toml"


def _row(row_id: str) -> dict:
    with open(DATA, "rb") as f:
        return next(r for r in tomllib.load(f)["run"] if r["id"] == row_id)


def test_min_cp_tokens_is_the_llama3_papers_tokens_per_cp_rank():
    # arXiv 2407.21783 v3 §3.3.2, Table 4: 131,072 tokens over CP 16
    row = _row("llama3-paper-405b-16384gpu-cp16")
    assert (row["seq"], row["cp"]) == (131_072, 16)
    assert MIN_CP_TOKENS == row["seq"] // row["cp"] == 8192


@pytest.mark.parametrize("seq,gpus,expected", [
    (131_072, 16_384, (1, 2, 4, 8, 16)),      # the Llama 3 paper's 128K stage: CP 16 added, 32 would keep 4,096 a rank
    (262_144, 8, (1, 2, 4, 8)),               # torchtitan's 256K on 8 GPUs: no degree above the device count
    (262_144, 64, (1, 2, 4, 8, 16, 32)),      # 8,192 tokens a rank at CP 32
    (65_536, 1024, (1, 2, 4, 8)),             # 64K: CP 16 would keep 4,096 a rank; the candidates only
    (8192, 1024, (1, 2, 4, 8)),
    (0, 1024, (1, 2, 4, 8)),                  # the sequence unknown (0): the candidates given
])
def test_context_degrees_add_long_sequence_cp(seq, gpus, expected):
    assert context_degrees(Space(gpus=gpus, max_tp=8, layers=126, seq=seq)) == expected


def test_context_degrees_keep_the_candidates_given():
    # plan(cp_options=...) as given, then the larger degrees the rule adds
    assert context_degrees(Space(gpus=64, max_tp=8, layers=8, cp=(1, 3), seq=262_144)) == (1, 3, 4, 8, 16, 32)


@pytest.fixture(scope="module")
def llama3_cp16():
    """Plan on the Llama 3 paper's 16,384-GPU 128K row as the bench asks it (its CP exchange, Megatron's
    ``--cp-comm-type all_gather``, given)."""
    row = _row("llama3-paper-405b-16384gpu-cp16")
    m = costgraph.load(row["model"], config=row["config"], dropout=False)
    values = m.values(row["config"], {**row["set"], "s": row["seq"], "b": 1})
    res = m.plan(values, gpus=row["gpus"], hardware=row["hardware"], global_batch=row["global_batch"],
                 precision=row["precision"], top=5, cp_comm_type=row["layout"]["cp_comm_type"])
    return row, res


def test_plan_generates_the_llama3_cp16_layout(llama3_cp16, train_check):
    row, res = llama3_cp16
    assert res.searched["c"] == [1, 2, 4, 8, 16]
    published = [r for r in res.layouts if (r["tp"], r["pp"], r["cp"], r["virtual_stages"], r["zero"])
                 == (row["tp"], row["pp"], row["cp"], row["vp"], row["zero"])]
    assert published, res.to_text()
    (r,) = published
    assert (r["micro_batch"], r["micro_batches"], r["sp"], r["options"]) == \
        (1, 16, True, {"pipeline_layout": "E|(t|)*126L"})   # DP 8: 128 sequences = 16 micro-batches of 1 a rank
    command = res.check_command(r)
    assert "--cp 16" in command and "--cp-comm-type all_gather" in command
    peak, step, fits = train_check(command)   # plan = train: the row's own check command
    assert (peak, step) == (r["memory_bytes"], r["step_seconds"]) and fits


def test_offload_fraction_is_the_recipes_layers():
    # Megatron-Bridge 067f987 docs/performance-summary-archive.md (26.04.01, LLAMA3_70B, DGX-GB200 FP8): recipe
    # llama3_70b_pretrain_64gpu_gb200_fp8cs_config, cpu_offloading_num_layers 40 of Llama-3-70B's 80 layers
    row = _row("mbridge-26.04.01-gb200-llama3-70b-fp8cs-fsdp")
    assert row["layout"]["offload_activations"] == float(OFFLOAD_FRACTION) == 40 / 80


def test_activation_offload_is_searched_with_allow_offload_only_on_megatrons_terms():
    space = Space(gpus=8, max_tp=8, layers=80)
    assert offload_fractions(space) == (False,)
    assert offload_fractions(Space(gpus=8, max_tp=8, layers=80, allow_offload=True)) == (False, "0.5")
    (v,) = [v for v in variants(Space(gpus=8, max_tp=8, layers=80, allow_offload=True)) if "offload_activations" in v]
    # Megatron-LM megatron/core/transformer/transformer_config.py __post_init__: "Currently there is no support for
    # Pipeline parallelism with CPU offloading", "CPU offloading does not work when activation recomputation is
    # enabled"; a group of its own: no optimizer or parameter offload with it
    assert v == {"offload_activations": "0.5", "requires": {"p": (1,), "recompute": ("none",)}}


@pytest.fixture(scope="module")
def llama3_70b_offload():
    """Plan on Megatron-Bridge's Llama-3-70B GB200 FSDP row as the bench asks it (--allow-offload: the run offloads)."""
    row = _row("mbridge-26.04.01-gb200-llama3-70b-fp8cs-fsdp")
    m = costgraph.load(row["model"], config=row["config"], dropout=False)
    values = m.values(row["config"], {"s": row["seq"], "b": 1})
    res = m.plan(values, gpus=row["gpus"], hardware=row["hardware"], global_batch=row["global_batch"],
                 precision=row["precision"], top=1, cross_entropy=row["layout"]["cross_entropy"], allow_offload=True)
    return row, res


def test_plan_generates_the_offloading_fsdp_layout(llama3_70b_offload, train_check):
    row, res = llama3_70b_offload
    assert res.searched["offload_activations"] == [False, "0.5"]
    (r,) = res.layouts   # the first row is the run's: FSDP (ZeRO 3) over 64, b = 2, no recompute, half offloaded
    assert (r["tp"], r["pp"], r["cp"], r["micro_batch"], r["micro_batches"], r["zero"], r["recompute"]) == \
        (1, 1, 1, row["micro_batch"], 2, 3, "none")
    assert r["options"] == {"offload_activations": "0.5"}
    command = res.check_command(r)
    assert "--offload-activations 0.5" in command
    peak, step, fits = train_check(command)   # plan = train: the row's own check command
    assert (peak, step) == (r["memory_bytes"], r["step_seconds"]) and fits


def test_layout_reads_the_variants_decimal_text():
    # the planner's variant value is the CLI's text ("0.5": JSON-friendly), read as the CLI reads --offload-activations
    import sympy

    from costgraph.errors import CostgraphValueError
    from costgraph.parallel.layout import Layout

    assert Layout(offload_activations=OFFLOAD_FRACTION).filled().offload_activations == sympy.Rational(1, 2)
    with pytest.raises(CostgraphValueError, match="cannot read offload_activations"):
        Layout(offload_activations="half").filled()


@pytest.fixture(scope="module")
def torchtitan_fsdp8():
    """Plan on torchtitan's FSDP-8 row with its conventions, FSDP2's gathered root among them (--zero3-gathered)."""
    row = _row("torchtitan-2412-h100-llama31-8b-fsdp8")
    m = costgraph.load(row["model"], config=row["config"], dropout=False)
    values = m.values(row["config"], {"s": row["seq"], "b": 1})
    res = m.plan(values, gpus=row["gpus"], hardware=row["hardware"], global_batch=row["global_batch"],
                 memory=row["memory"], precision=row["precision"], top=10, **row["layout"])
    return row, res


def test_plan_passes_fsdp2s_gathered_root_to_its_zero3_rows(torchtitan_fsdp8, train_check):
    # torchtitan's FSDP2 (fully_shard(model): the root module stays gathered; costgraph.launch.torchtitan sets it for
    # a torchtitan launch file) was train's convention for the run's layout but not plan's: --compare named
    # zero3_gathered=fsdp2 as a setting plan does not search. Now a given setting, on the rows it applies to
    # (ZeRO 3; train refuses it below: layout_options.given_where_applies), in their check command
    row, res = torchtitan_fsdp8
    assert row["layout"]["zero3_gathered"] == "fsdp2"
    by_zero = {}
    for r in res.layouts:
        by_zero.setdefault(r["zero"] == 3, r)
    assert set(by_zero) == {True, False}, res.to_text()
    for zero3, r in by_zero.items():
        command = res.check_command(r)
        assert ("--zero3-gathered fsdp2" in command) == zero3
        peak, step, fits = train_check(command)   # plan = train on a ZeRO-3 row and on another
        assert (peak, step) == (r["memory_bytes"], r["step_seconds"]) and fits


def test_plans_json_states_zero3_gathered(torchtitan_fsdp8):
    import json

    doc = json.loads(torchtitan_fsdp8[1].to_json())
    assert doc["zero3_gathered"] == "fsdp2" and "zero3_gathered" not in doc["searched"]


def test_compare_does_not_call_a_given_setting_unsearched_where_the_first_row_has_no_zero3():
    # AutoModel's gpt-oss-20b row: FSDP2 (ZeRO 3, --zero3-gathered fsdp2) against plan's first row at ZeRO 2 (main at
    # bc2b71f, /work/notes/pub13_base.json); plan is given fsdp2, which does not apply at ZeRO 2: not "not searched"
    row = _row("automodel-h100-gpt-oss-20b-bf16")
    m = costgraph.load(row["model"], config=row["config"], dropout=False)
    values = m.values(row["config"], {"s": row["seq"], "b": 1})
    compare = {"t": row["tp"], "p": row["pp"], "c": row["cp"], "e": row["ep"], "sp": row["sp"], "zero": row["zero"],
               "recompute": row["recompute"], "policy": row["precision"], "b": row["micro_batch"], **row["layout"]}
    res = m.plan(values, gpus=row["gpus"], hardware=row["hardware"], global_batch=row["global_batch"],
                 precision=row["precision"], top=1, compare=compare, **row["layout"])
    assert res.layouts[0]["zero"] != 3 and row["zero"] == 3
    assert res.comparison.unsearched == []
