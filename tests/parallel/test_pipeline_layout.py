"""Megatron-LM's --pipeline-model-parallel-layout (issue 27 item 3): the parser, its bounds and
errors, the published DeepSeek-V3 layouts, the MTP depths on the last stage, memory per stage.

Sources read at the source:
  NVIDIA/Megatron-LM @ d98e8a64 — megatron/core/transformer/pipeline_parallel_layer_layout.py
  (parse_str_to_list, validate_layer_layout, get_layer_offset), tests/unit_tests/transformer/
  test_transformer_block.py::test_parsing_layout_from_str, docs/user-guide/features/
  pipeline_parallel_layout.md (the PP 16 × VPP 2 rank map), megatron/core/models/gpt/gpt_model.py
  (the MTP rank builds the embedding), tests/functional_tests/test_cases/moe/
  gpt3_mcore_te_tp2_pp2_ep4_etp1_{memory_speed,selective_recompute_experimental}/model_config.yaml
  (DeepSeek-V3-style CI runs with MTP: TP 2, PP 2, EP 4, 16 layers + 1 MTP).
  NVIDIA-NeMo/Megatron-Bridge @ 067f987d — src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py::
  _get_deepseek_v3_pipeline_layout (the (PP, VP) → layout map), skills/nemo-mbridge-perf-moe-
  hardware-configs/card.yaml (dsv3_685b_h100_1024: TP2 EP64 PP8 VPP4, pp_layout "Et*3|(tt|)*29m|L"),
  src/megatron/bridge/perf_recipes/deepseek/gb300/deepseek_v3.py ("Et*4|(t*4|)*14tmL").
"""

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.parallel.layout import Layout
from costgraph.parallel.pipeline_layout import (MAX_COUNT, MAX_SYMBOLS, format_layout, parse_pipeline_layout,
                                                pipeline_layout_for)
from costgraph.parallel.placement import placement
from costgraph.training.memory import training_memory
from costgraph.training.validity import check_layout
from cli_checks import run as _run, refused as _refused

PP16 = "Et*4|(t*4|)*14tmL"          # DeepSeek-V3's PP 16 layout; Megatron-Bridge's PP 4 × VP 4 too
PP8_VP4 = "Et*3|(tt|)*29m|L"        # Megatron-Bridge's DSV3 H100 1024-GPU best config, PP 8 × VPP 4

# deepseek-ai/DeepSeek-V3 config.json; parameters per layer as tests/models/test_mtp.py counts them
H, A, RQ, RKV, DN, DR, DV, E, IE, IS, I, V = 7168, 128, 1536, 512, 128, 64, 128, 256, 2048, 2048, 18432, 129280
MLA = H * RQ + RQ + RQ * A * (DN + DR) + H * (RKV + DR) + RKV + RKV * A * (DN + DV) + A * DV * H
MOE_LAYER = MLA + E * 3 * H * IE + 3 * H * IS + H * E + E + 2 * H
DENSE_LAYER = MLA + 3 * H * I + 2 * H
MTP = MOE_LAYER + 2 * H * H + 3 * H


@pytest.fixture(scope="module")
def ds():
    m = costgraph.load("deepseek_v3", options={"mtp": True})
    return m, m.values(config="deepseek-v3")


def _shares(graph, layout, values):
    """Per rank: group → iterations held, as integers."""
    return [{k: int(sympy.sympify(n).xreplace(values)) for k, n in st.layers.items()}
            for st in placement(graph, layout).stages]


# ------------------------------------------------------------------ parsing, as Megatron parses


@pytest.mark.parametrize("pp, text, stages, vp", [
    # Megatron-LM tests/unit_tests/transformer/test_transformer_block.py::test_parsing_layout_from_str
    (2, "Et|t*4|t|tL", ["Et", "tttt", "t", "tL"], 2),
    (2, "E|t*6|t|L", ["E", "tttttt", "t", "L"], 2),
    (4, "E|t|t*2|t||(t|)*2,t*2,L", ["E", "t", "tt", "t", "", "t", "t", "ttL"], 2),
    (8, "Et*3|(tt|)*29,m|L", ["Ettt"] + ["tt"] * 29 + ["m", "L"], 4),
    (16, "Et*2|(tt|)*29,t|mL", ["Ett"] + ["tt"] * 29 + ["t", "mL"], 2),
])
def test_megatron_unit_test_layouts(pp, text, stages, vp):
    got = parse_pipeline_layout(text, pp)
    assert list(got.stages) == stages and got.vp == vp and got.pp == pp
    assert parse_pipeline_layout(format_layout(got.stages)).stages == got.stages   # compact text reads back


def test_formatted_texts_read_back_by_the_grammar():
    # parse_pipeline_layout takes a text format_layout wrote without lark (pipeline_layout._FORMATTED): the
    # grammar reads every such text back to the very stages, so the shortcut gives what the parser gives
    import random

    from costgraph.options import chunk_layout
    from costgraph.parallel import pipeline_layout as pl

    rng = random.Random(27)
    cases = [[rng.choice(["", "E", "t", "tt", "t" * 5, "tm", "L", "tL", "Et"]) for _ in range(rng.randint(1, 12))]
             for _ in range(300)]
    cases += [list(pl._parsed(t).stages) for t in filter(None, (chunk_layout(n, k, mtp) for n in (7, 32, 61, 126)
                                                               for k in range(2, 40) for mtp in (0, 1)))]
    for stages in cases:
        text = format_layout(stages)
        if not text.strip(", "):
            continue
        assert pl._parsed(text).stages == tuple(stages), text   # the grammar's reading
        assert text in pl._FORMATTED and parse_pipeline_layout(text).stages == tuple(stages)
    # a symbol outside the layout's is never taken past the grammar
    assert "Ex|L" not in pl._FORMATTED and format_layout(["Ex", "L"]) not in pl._FORMATTED
    with pytest.raises(CostgraphValueError):
        parse_pipeline_layout(format_layout(["Ex", "L"]))


def test_each_bound_is_checked_in_one_place(monkeypatch):
    """The shortcut for a formatted text runs the parser's own bound checks (it restated them, _within_bounds): one
    comparison per bound in the module, and a bound lowered is refused alike on either path."""
    import inspect
    import re

    from costgraph.parallel import pipeline_layout as pl

    source = inspect.getsource(pl)
    for bound in ("MAX_TEXT", "MAX_COUNT", "MAX_SYMBOLS", "MAX_STAGES"):
        assert len(re.findall(rf"[<>]=? *{bound}\b", source)) == 1, bound
    stages = ("Et", "t", "t", "tL")
    text = format_layout(stages)
    assert text in pl._FORMATTED
    monkeypatch.setattr(pl, "MAX_STAGES", 3)
    pl._parse.cache_clear()
    with pytest.raises(CostgraphValueError, match="the layout lists 4 stages: at most 3") as shortcut:
        parse_pipeline_layout(text)
    with pytest.raises(CostgraphValueError) as parsed:
        pl._parsed(text)
    assert str(shortcut.value) == str(parsed.value)
    monkeypatch.undo()
    pl._parse.cache_clear()
    assert parse_pipeline_layout(text).stages == stages


def test_megatron_docs_rank_map():
    # docs/user-guide/features/pipeline_parallel_layout.md: PP 16, VPP 2
    lay = parse_pipeline_layout("Et*3|(tt|)*29,m|L", 16)
    assert lay.ranks()[0] == ["Ettt", "tt"] and lay.ranks()[14] == ["tt", "m"] and lay.ranks()[15] == ["tt", "L"]
    assert all(lay.ranks()[r] == ["tt", "tt"] for r in range(1, 14))
    assert lay.describe().splitlines() == ["rank 0: E t*3 | t*2", "ranks 1-13: t*2 | t*2", "rank 14: t*2 | m",
                                           "rank 15: t*2 | L"]
    assert lay.mtp_rank() == 14


def test_megatron_bridge_deepseek_v3_map():
    # Megatron-Bridge _get_deepseek_v3_pipeline_layout, written as Bridge builds the lists
    last = ["mtp", "loss"]
    sym = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}
    bridge = {
        (4, 1): [["embedding"] + ["decoder"] * 16, ["decoder"] * 16, ["decoder"] * 16, ["decoder"] * 13 + last],
        (8, 1): [["embedding"] + ["decoder"] * 8] + [["decoder"] * 8] * 6 + [["decoder"] * 5 + last],
        (16, 1): [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 14 + [["decoder"] + last],
        (4, 4): [["embedding"] + ["decoder"] * 4] + [["decoder"] * 4] * 14 + [["decoder"] + last],
    }
    texts = {(4, 1): "Et*16|t*16|t*16|t*13mL", (8, 1): "Et*8|(t*8|)*6t*5mL", (16, 1): PP16, (4, 4): PP16}
    for (pp, vp), rows in bridge.items():
        lay = parse_pipeline_layout(texts[pp, vp], pp)
        assert list(lay.stages) == ["".join(sym[x] for x in row) for row in rows] and lay.vp == vp
        lay.validate(61, 1)


@pytest.mark.parametrize("text, column, words", [
    ("Et*4|(t*4|)*14tmX", 17, "'X' is not a layout symbol"),
    ("E((t)*2)*3", 3, "parentheses do not nest"),
    ("E(tt)|L", 6, "needs its repetition"),
    ("Et*", 4, "a count after *"),
    ("Et4L", 3, "a number without *"),
    ("E t L", 2, "a space"),
    ("E)", 2, "')' closes no '('"),
    ("Et*4|(", 7, "the rest of a ( … )*n"),
])
def test_syntax_errors_are_located(text, column, words):
    with pytest.raises(CostgraphValueError) as e:
        parse_pipeline_layout(text)
    assert e.value.loc.column == column and words in e.value.message
    assert f"--pipeline-layout, column {column}" in str(e.value) and e.value.hint


def test_bounds_refuse_before_allocating():
    with pytest.raises(CostgraphValueError, match=f"over {MAX_COUNT}") as e:
        parse_pipeline_layout("Et*99999999999999999999L")
    assert e.value.loc.column == 4
    with pytest.raises(CostgraphValueError, match="unrolls to more than"):
        parse_pipeline_layout(",".join(["(tt|)*4096"] * 9))
    assert len(",".join(["(tt|)*4096"] * 9)) < 100 and 9 * 3 * 4096 > MAX_SYMBOLS
    with pytest.raises(CostgraphValueError, match="characters long"):
        parse_pipeline_layout("t" * 5000)
    with pytest.raises(CostgraphValueError, match="empty"):
        parse_pipeline_layout(",,")


def test_cli_refuses_with_a_location_and_exit_2(capsys):
    assert main(["train", "gpt", "--config", "gpt2", "--pipeline-layout", "Et*6|t*6X"]) == 2
    err = capsys.readouterr().err
    assert "--pipeline-layout, column 9" in err and "Traceback" not in err and "hint:" in err


# ------------------------------------------------------------------ the layout against the pipeline options


def test_conflicts_name_both_options():
    with pytest.raises(CostgraphValueError, match="--virtual-stages is 2"):
        Layout(p=4, v=2, schedule="interleaved", pipeline_layout=PP16).filled()
    with pytest.raises(CostgraphValueError, match="--pp 3 does not divide"):
        Layout(p=3, pipeline_layout=PP16).filled()
    with pytest.raises(CostgraphValueError, match="--decoder-first/last-pipeline-num-layers"):
        Layout(p=16, first_stage_layers=4, pipeline_layout=PP16).filled()
    with pytest.raises(CostgraphValueError, match="not --schedule dualpipe"):
        Layout(p=4, schedule="dualpipe", pipeline_layout=PP16).filled()
    with pytest.raises(CostgraphValueError, match="t·p·c = 15"):
        Layout(gpus=256, pipeline_layout="Et*4|(t*4|)*13tmL").filled()
    # the layout sets p (one stage per rank), or v beside --pp; 1F1B becomes interleaved
    assert (Layout(pipeline_layout=PP16).filled().p, Layout(pipeline_layout=PP16).filled().v) == (16, 1)
    got = Layout(p=4, pipeline_layout=PP16).filled()
    assert (got.p, got.v, got.schedule) == (4, 4, "interleaved")


def test_layout_checked_against_the_model(ds):
    m, v = ds
    assert pipeline_layout_for(PP16, m, v).pp == 16
    assert pipeline_layout_for(PP16, m, v, v=4).pp == 4
    with pytest.raises(CostgraphValueError, match=r"places 60 Transformer layer\(s\) \(t\); 'deepseek_v3' has 61"):
        pipeline_layout_for("Et*4|(t*4|)*14mL", m, v)
    with pytest.raises(CostgraphValueError, match="has 0"):
        pipeline_layout_for(PP16, costgraph.load("deepseek_v3"), v)
    # m in stage 5 of 16 on PP 4: chunk 1 of rank 1, not its last chunk (3)
    early = format_layout(["E" + "t" * 30, "t" * 31, "", "", "", "m"] + [""] * 9 + ["L"])
    with pytest.raises(CostgraphValueError, match="last chunk of a rank"):
        pipeline_layout_for(early, m, v, pp=4)
    assert pipeline_layout_for(early, m, v, pp=16).mtp_rank() == 5   # on PP 16 it is rank 5's one chunk
    with pytest.raises(CostgraphValueError, match="the loss L comes once, last"):
        pipeline_layout_for("Et*4|(t*4|)*14tLm", m, v)


# ------------------------------------------------------------------ DeepSeek-V3 layouts: layers and memory


def test_deepseek_v3_pp16_memory_per_stage(ds):
    m, v = ds
    res = training_memory(m.graph, Layout(pipeline_layout=PP16, gpus=16))
    layers = _shares(m.graph, res.layout, v)
    # Megatron's get_layer_offset: stage 0 layers 0-3 (the 3 dense + the first MoE), stage 15 layer 60 + MTP
    assert [sum(x.values()) for x in layers] == [4] * 15 + [2]
    assert layers[0] == {"dense_layers": 3, "moe_layers": 1, "mtp_layers": 0}
    assert layers[15] == {"dense_layers": 0, "moe_layers": 1, "mtp_layers": 1}
    w = [int(s.memory["weights"].xreplace(v)) for s in res.stages]   # bf16 weights: 2 bytes a parameter
    # but the router's e_score_correction_bias [E = 256]: a buffer in transformers, kept in fp32
    # (models/std/moe.cg; DeepseekV3TopkRouter registers it with dtype float32): 4 bytes, not 2
    bias = 4 * 256 - 2 * 256
    assert w[0] == 2 * (V * H + 3 * DENSE_LAYER + MOE_LAYER) + bias == 28_368_831_488
    assert w[1:15] == [4 * (2 * MOE_LAYER + bias)] * 14
    # the last stage: one MoE layer, the MTP module, the final norm, the head — and the embedding, which
    # Megatron builds on the MTP rank (gpt_model.py: pre_process or mtp_process)
    assert w[15] == 2 * (MOE_LAYER + MTP + H + 2 * V * H) + 2 * bias
    # the loss: the two outputs' logits (the model's and the MTP depth's), b = 1, s = 4096, under Megatron-LM's
    # default unfused cross-entropy: the fp32 softmax and the bf16 gradient, 6 B a logit (training/cross_entropy.toml)
    assert int(res.stages[15].memory["loss"].xreplace(v)) == 2 * 6 * 4096 * V


def test_deepseek_v3_pp4_vp4_and_pp8_vp4(ds):
    m, v = ds
    got = _shares(m.graph, Layout(p=4, pipeline_layout=PP16, gpus=4).filled(), v)
    # rank r holds stages r, r + 4, r + 8, r + 12: 16 layers each, rank 3 13 + the MTP
    assert got[0] == {"dense_layers": 3, "moe_layers": 13, "mtp_layers": 0}
    assert got[1] == got[2] == {"dense_layers": 0, "moe_layers": 16, "mtp_layers": 0}
    assert got[3] == {"dense_layers": 0, "moe_layers": 13, "mtp_layers": 1}
    got = _shares(m.graph, Layout(p=8, pipeline_layout=PP8_VP4, gpus=8).filled(), v)
    assert [sum(r.values()) for r in got] == [9, 8, 8, 8, 8, 8, 7, 6]
    # m is stage 30: chunk 3 of rank 6 (Megatron's standalone MTP), the loss on rank 7
    assert got[6]["mtp_layers"] == 1 and got[7]["mtp_layers"] == 0
    stages = placement(m.graph, Layout(p=8, pipeline_layout=PP8_VP4, gpus=8)).stages
    assert "embed_tokens/weight" in stages[6].weights and "embed_tokens/weight" not in stages[5].weights
    assert stages[6].name == "stage 6 [t*2 | t*2 | t*2 | m]"


def test_cli_accepts_the_published_layouts(ds, capsys):
    m, v = ds
    for lay in (Layout(pipeline_layout=PP16, e=8, gpus=256), Layout(p=8, pipeline_layout=PP8_VP4, e=8, gpus=256)):
        check_layout(m.graph, lay.filled(), v)   # what train checks: accepted
    assert main(["train", "deepseek_v3", "--config", "deepseek-v3", "--set", "mtp=true", "--ep", "8", "--gpus",
                 "256", "--pp", "4", "--pipeline-layout", PP16]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "schedule interleaved (v = 4)" in out
    assert "\nstage 0 (first) [E t*4 | t*4 | t*4 | t*4]\n  16 layers × 4 micro-batches in flight" in out
    # 13 layers + the MTP depth on the last rank, with the loss
    # with the loss of the default cross-entropy (Megatron-LM's unfused: training/cross_entropy.toml [megatron])
    assert "\nstage 3 (last) [t*4 | t*4 | t*4 | t m L]\n  14 layers × 3.25 micro-batches in flight, plus the loss " \
        "(--cross-entropy megatron: 1 fp32 + 1 bf16 buffers of the logits' shape; " in out


# ------------------------------------------------------------------ MTP on the last stage; consistency


def test_megatron_ci_mtp_layout_is_accepted(ds):
    # memory_speed: 16 layers (moe-layer-freq ([0]*1+[1]*15): 1 dense), 1 MTP, TP 2, PP 2, v = 4, EP 4 —
    # refused before: "2 pipeline stages cannot share the 17 iterations"
    m, _ = ds
    v = m.values("deepseek-v3", {"l": 16, "k_d": 1, "E": 32})
    lay = Layout(t=2, p=2, v=4, schedule="interleaved", e=4, gpus=8).filled()
    check_layout(m.graph, lay, v)
    # even split, 2 layers a chunk; the MTP with the loss on the last rank
    assert _shares(m.graph, lay, v) == [{"dense_layers": 1, "moe_layers": 7, "mtp_layers": 0},
                                        {"dense_layers": 0, "moe_layers": 8, "mtp_layers": 1}]
    # selective_recompute_experimental: the same with the layout Et*3|(tt|)*6tmL and 3 dense layers
    v = m.values("deepseek-v3", {"l": 16, "k_d": 3, "E": 32})
    lay = Layout(t=2, p=2, e=4, gpus=8, pipeline_layout="Et*3|(tt|)*6tmL").filled()
    check_layout(m.graph, lay, v)
    assert _shares(m.graph, lay, v) == [{"dense_layers": 3, "moe_layers": 6, "mtp_layers": 0},
                                        {"dense_layers": 0, "moe_layers": 7, "mtp_layers": 1}]


@pytest.mark.parametrize("flags, text", [
    ({"first_stage_layers": 5, "last_stage_layers": 9}, "Et*5|t*9|t*9|t*9L"),
    ({"account_embedding": True, "account_loss": True}, "Et*7|t*8|t*8|t*7L"),
])
def test_megatron_split_options_are_layouts(flags, text):
    # the uneven split is a special case: its explicit layout gives the same memory on every stage
    m = costgraph.load("llama")
    v = m.values("llama-2-7b", {"l": 30 if flags.get("account_loss") else 32})
    a = training_memory(m.graph, Layout(p=4, gpus=4, **flags))
    b = training_memory(m.graph, Layout(p=4, gpus=4, pipeline_layout=text))
    assert [sympy.expand(x.memory["total"].xreplace(v)) for x in a.stages] == \
        [sympy.expand(x.memory["total"].xreplace(v)) for x in b.stages]
    assert [int(x.layers.xreplace(v)) for x in b.stages] == [int(x.layers.xreplace(v)) for x in a.stages]


def test_flops_per_stage_add_up_and_set_the_pace(ds):
    # the stages' FLOPs add up to the model's; on PP 16 the last stage (a MoE layer, the MTP module and the
    # head run twice) is the busiest, and the step time's compute is its share
    from costgraph.engine.precision import precision
    from costgraph.engine.totals import MODEL_SCOPE, breakdown
    from costgraph.parallel.pipeline import flops_pace, stage_flops

    m, v = ds
    rows = breakdown(m.graph, MODEL_SCOPE, "matmul", precision("bf16"), "half", leaves_only=True)
    stages = placement(m.graph, Layout(pipeline_layout=PP16, gpus=16)).stages
    work = [sympy.sympify(w).xreplace(v) for w in stage_flops(m.graph, stages, rows)]
    assert sum(work) == sum(r["count"] * (r["flops_forward"] + r["flops_backward"]) for r in rows).xreplace(v)
    assert max(work) == work[15] and work[1] == work[14]
    assert flops_pace(m.graph, stages, rows, v) == 16 * work[15] / sum(work)


# --- a one-stage layout checked; more than 1,024 stages refused at once (issues 27/29 hostile input) -----------------

GPT2 = ["train", "gpt", "--config", "gpt2", "--set", "b=4", "--gpus", "8", "--hardware", "h100-sxm"]


@pytest.mark.parametrize("layout, words", [
    ("E", "the loss L comes once, last"),                     # no layers, no loss: Megatron's validate_layer_layout
    ("Et*11L", "places 11 Transformer layer(s) (t); 'gpt' has 12"),
])
def test_a_one_stage_pipeline_layout_is_checked_against_the_model(capsys, layout, words):
    # one stage means p = 1: the layout's checks ran only for p > 1, so 'E' alone trained GPT-2's 12 layers
    rc, out, err = _run(capsys, GPT2 + ["--pipeline-layout", layout])
    assert rc == 2 and words in err and "hint:" in err and "Traceback" not in err


def test_a_pipeline_layout_of_more_than_1024_stages_is_refused_at_once(capsys):
    # 61,442 stages (within the 65,536 symbols) ran past a minute: every stage is analysed
    from costgraph.errors import CostgraphValueError
    from costgraph.parallel.pipeline_layout import MAX_STAGES, parse_pipeline_layout

    text = "Et*12" + "(|)*4096" * 15 + "|L"
    with pytest.raises(CostgraphValueError, match="the layout lists 61,442 stages: at most 1,024"):
        parse_pipeline_layout(text)
    assert len(parse_pipeline_layout("Et*12" + "(|)*1022" + "|L").stages) == MAX_STAGES == 1024
    _refused(capsys, [w if w != "8" else "61442" for w in GPT2] + ["--pipeline-layout", text], "61,442 stages")
