"""plan = train (issue 27 item 1) for mixtures of experts: every row `costgraph plan` lists is accepted by
`costgraph train` with the row's own check command, with the same memory (bytes, exact) and step time
(tests/plan_train_cases.py; the dense models and layer patterns, Jamba's among them, in
test_plan_equals_train.py). MoE with a dense prefix (DeepSeek-V2/V3, reduced in size), gpt-oss, Mixtral,
Llama 4 and Qwen3-MoE, at several device counts; DeepSeek's pipeline without an even split."""

import pytest

import costgraph
from plan_train_cases import case_id, every_row_is_train, model_named, plan_case

# (model, config, sizes, devices, global batch, device memory[, plan keywords]): memory raised where the model's
# full size does not fit a handful of devices (the rule under test is plan = train, not the fit)
CASES = [
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
]


@pytest.fixture(scope="module", params=CASES, ids=case_id)
def planned(request):
    return plan_case(request.param)


def test_every_row_is_train(planned, train_check):
    every_row_is_train(planned, train_check)


def test_deepseek_pipeline_without_an_even_split():
    """DeepSeek-V3 (61 layers) on 256 GB200s ranked first TP 2 × PP 32 × CP 2 with an even split that
    train refuses ("32 pipeline stages cannot share the 61 iterations"). At 7 layers (one dense),
    p = 2 and 4 have no even split: the grid offers them only with Megatron's other splits, and
    train accepts each."""
    from costgraph.parallel.layout import Layout
    from costgraph.training.plan import _space
    from costgraph.training.plan_grid import Grid

    m = model_named("deepseek_v3")   # the planned cases' model: its placements and derivations shared
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
    # first chunk E t t, two middle chunks t t, the last t L), and one layer a chunk with the loss alone (8 chunks
    # of 7 layers, p·v ≤ layers + 2: the Llama 3 paper's layout, arXiv 2407.21783 §3.3.2) over PP 2 × VP 4 and
    # PP 4 × VP 2, each accepted by train with its p and v
    texts = {(p, v, s[4]) for p, v, s in rows if len(s) == 5}
    assert texts == {(2, 2, "Et*2|(t*2|)*2tL"), (2, 4, "Et|(t|)*6L"), (4, 2, "Et|(t|)*6L")}
    for p, v, text in sorted(texts):
        m.train(Layout(p=p, v=v, gpus=8, m=2 * p, schedule="interleaved", pipeline_layout=text), values=values)
    with pytest.raises(costgraph.errors.CostgraphValueError, match="cannot share"):
        m.train(Layout(p=2, gpus=8, m=2), values=values)
