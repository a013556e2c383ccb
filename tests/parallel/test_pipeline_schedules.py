"""Pipeline schedules per stage and Megatron's layer split (issue 16 items 1 and 2).

References, read at the source:
  Megatron-LM @ d98e8a64, megatron/core/pipeline_parallel/schedules.py::get_pp_rank_microbatches
    (warm-up micro-batches per rank), ::forward_backward_pipelining_with_interleaving (its checks);
  Megatron-LM @ d98e8a64, megatron/core/transformer/transformer_block.py::get_num_layers_to_build,
    megatron/core/transformer/transformer_layer.py::get_transformer_layer_offset;
  Qi et al. 2023 (arXiv 2401.10241) §3.1 ZB-H1; DeepSeek-V3 technical report (arXiv 2412.19437) Table 2.
"""

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.engine.symbols import dim
from costgraph.errors import CostgraphValueError
from costgraph.parallel.layer_split import check_split, chunk_ranges, chunk_sizes, stage_shares
from costgraph.parallel.layout import Layout
from costgraph.parallel.placement import placement
from costgraph.parallel.schedules import bubble_fraction, chunks_in_flight, in_flight

b, s, h, a, l, V = (dim(n) for n in ("b", "s", "h", "a", "l", "V"))


# --- transcriptions of Megatron-LM @ d98e8a64 (plain Python, as the source computes) ------------------

def megatron_warmup(num_microbatches, num_model_chunks, group, p, rank, interleaved):
    """schedules.py::get_pp_rank_microbatches (forward_only False, no MoE overlap): the number of
    warm-up micro-batches (chunks, interleaved) and whether all of them are warm-up."""
    total_num_microbatches = num_microbatches * num_model_chunks
    if p > 1:
        if not interleaved:
            num_warmup_microbatches = p - rank - 1
        else:
            num_warmup_microbatches = (p - rank - 1) * 2
            num_warmup_microbatches += (num_model_chunks - 1) * group
    else:
        num_warmup_microbatches = 0
    all_warmup = False
    if num_warmup_microbatches >= total_num_microbatches:
        num_warmup_microbatches = total_num_microbatches
        all_warmup = True
    return num_warmup_microbatches, all_warmup


def megatron_peak(m, v, g, p, rank, interleaved):
    """Forwards held at the peak: the warm-up, and one more in the steady state's forward-then-backward
    (none more when every forward is warm-up)."""
    w, all_warmup = megatron_warmup(m, v, g, p, rank, interleaved)
    return w if all_warmup else w + 1


def megatron_num_layers_to_build(L, p, rank, vp, v=None, first=None, last=None, emb=False, loss=False):
    """transformer_block.py::get_num_layers_to_build (no pipeline_model_parallel_layout)."""
    is_first, is_last = rank == 0, rank == p - 1
    if first is not None or last is not None:
        assert not (emb or loss)
        layers, left = L, p
        if first is not None:
            layers -= first
            left -= 1
        if last is not None:
            layers -= last
            left -= 1
        if left > 0:
            assert layers % left == 0
            per_rank = layers // left
        else:
            per_rank = 0
        if is_first and first is not None:
            per_rank = first
        if is_last and last is not None:
            per_rank = last
    else:
        n = L + int(emb) + int(loss)
        assert n % p == 0
        per_rank = n // p
    if v is not None and p > 1:
        assert per_rank % v == 0
        build = per_rank // v
    else:
        build = per_rank
    if emb and (v is None or vp == 0) and is_first:
        build -= 1
    if loss and (v is None or vp == v - 1) and is_last:
        build -= 1
    return build


def megatron_offset(L, p, rank, vp, v=None, first=None, last=None, emb=False, loss=False):
    """transformer_layer.py::get_transformer_layer_offset (no layout)."""
    if p == 1:
        return 0
    if first is not None or last is not None:
        middle_stages = p - sum(1 for x in (first, last) if x is not None)
        f, la = first or 0, last or 0
        middle_num_layers = L - f - la
        middle_rank = rank if first is None else rank - 1
        if v is not None:
            fc, lc, mc = f // v, la // v, middle_num_layers // v
            total_chunks = fc + mc + lc
            return vp * total_chunks if rank == 0 else vp * total_chunks + fc + middle_rank * (mc // middle_stages)
        per_rank = middle_num_layers // middle_stages if middle_stages > 0 else 0
        return 0 if rank == 0 else middle_rank * per_rank + f
    n = L + int(emb) + int(loss)
    per_rank = n // p
    if v is not None:
        offset = vp * (n // v) + rank * (per_rank // v)
    else:
        offset = rank * per_rank
    if emb and not ((v is None or vp == 0) and rank == 0):
        offset -= 1
    return offset


# --- item 1: in flight per stage -------------------------------------------------------------------------

@pytest.mark.parametrize("p,v,m,g", [(4, 2, 8, None), (4, 8, 8, None), (8, 3, 16, None), (4, 2, 4, None),
                                     (2, 4, 2, None), (4, 3, 12, 6), (16, 2, 64, None), (4, 5, 5, 5)])
def test_interleaved_chunks_equal_megatrons_warmup_plus_one(p, v, m, g):
    for rank in range(p):
        want = megatron_peak(m, v, g or p, p, rank, interleaved=True)
        assert chunks_in_flight(rank, p, m, "interleaved", v, g) == want, (p, v, m, g, rank)
        assert in_flight(rank, p, m, "interleaved", v, g) == sympy.Rational(want, v)


@pytest.mark.parametrize("p,m", [(4, 8), (4, 2), (8, 8), (16, 3), (2, 1), (1, 4)])
def test_1f1b_is_warmup_plus_one(p, m):
    # the figure costgraph had (min(p − i, m)) equals warm-up + 1 of the source, capped at m
    for rank in range(p):
        want = megatron_peak(m, 1, p, p, rank, interleaved=False) if p > 1 else 1
        assert chunks_in_flight(rank, p, m, "1f1b") == min(p - rank, m) == (want if p > 1 else min(p, m))
        assert chunks_in_flight(rank, p, m, "zb-h1") == min(p - rank, m)   # ZB-H1: 1F1B's peak (Qi et al. §3.1)


def test_korthikanti_convention_kept_by_name():
    # Korthikanti et al. 2022 §4.2.3 / theoretical_memory_usage.py: the first stage × (1 + (p − 1)/(p v)),
    # later stages as 1F1B; equal to the source's count on the first stage when m·v does not cap it
    p, v, m = 4, 8, 8
    assert in_flight(0, p, m, "interleaved", v, accounting="korthikanti") == p * (1 + sympy.Rational(p - 1, p * v))
    assert in_flight(0, p, m, "interleaved", v) == p * (1 + sympy.Rational(p - 1, p * v))
    assert in_flight(3, p, m, "interleaved", v, accounting="korthikanti") == 1
    assert in_flight(3, p, m, "interleaved", v) == sympy.Rational(29, 8)    # (v − 1)·p + 1 = 29 chunks of l/32


def test_pp4_vpp8_last_stage_before_and_after():
    # Llama-3-8B (32 layers) on PP 4 × VPP 8, m = 8, one layer a chunk: the last stage keeps 29 chunks
    # (Megatron's warm-up (v − 1)·g = 28, + 1), i.e. 29/8 micro-batches of its 8 layers; the old figure
    # (the named 'korthikanti' convention) kept one
    llama = costgraph.load("llama")
    vals = llama.values("llama-3-8b")
    kw = dict(t=8, p=4, gpus=32, m=8, schedule="interleaved", v=8, sp=True, recompute="selective",
              attention="flash")
    new = llama.train(**kw).stages[-1].memory
    old = llama.train(**kw, schedule_accounting="korthikanti").stages[-1].memory
    per_mb = old["activations"] - old["loss"]            # one micro-batch of the last stage's 8 layers
    assert sympy.expand(new["activations"] - new["loss"] - sympy.Rational(29, 8) * per_mb) == 0
    # (per layer, t 8 + SP: K and V with their 8 heads under flash, the fused SwiGLU's input: 41,943,040 bytes
    # below the figures before those rules, 2,019,557,376 and 5,941,886,976, × 8 layers and × 29/8 of that;
    # the loss of Megatron-LM's default unfused cross-entropy, 6 B a logit split by t = 8: 3·b·s·V/4 =
    # 788,004,864 bytes, 262,668,288 more than the 4 B logits count before issue 31: 1,684,013,056 and 4,725,538,816)
    assert int(old["loss"].xreplace(vals)) == 6 * 8192 * 128256 // 8
    assert int(old["activations"].xreplace(vals)) == 1_946_681_344
    assert int(new["activations"].xreplace(vals)) == 4_988_207_104
    # the device's total: the old figure is 0.68 of the new (issue 16: "about 0.6")
    assert (int(old["total"].xreplace(vals)), int(new["total"].xreplace(vals))) == (6_488_129_536, 9_529_655_296)


def test_megatron_refuses_these_interleaved_settings():
    with pytest.raises(CostgraphValueError, match=r"\[p, m\]"):
        Layout(p=4, m=2, schedule="interleaved", v=2).filled()          # g = p = 4 > m
    with pytest.raises(CostgraphValueError, match="m mod g"):
        Layout(p=4, m=10, schedule="interleaved", v=2).filled()         # 10 mod 4 = 2 < p
    Layout(p=4, m=12, schedule="interleaved", v=2).filled()
    with pytest.raises(CostgraphValueError, match=r"\[p, m\]"):
        Layout(p=4, m=8, schedule="interleaved", v=2, vp_group=2).filled()   # g < p
    with pytest.raises(CostgraphValueError, match="even p"):
        Layout(p=3, schedule="dualpipe").filled()
    # DualPipe feeds half the micro-batches from each end: m even and m >= 2p (deepseek-ai/DualPipe @ 3da1bbe
    # dualpipe.py DualPipe.step: `num_chunks > 0 and num_chunks % 2 == 0 and num_chunks >= num_ranks * 2`)
    for m, hint in ((1, "--micro-batches 4"), (2, "--micro-batches 4"), (5, "--micro-batches 6")):
        with pytest.raises(CostgraphValueError, match="at least 2p = 4") as e:
            Layout(p=2, m=m, schedule="dualpipe").filled()
        assert e.value.hint == hint
    assert Layout(p=2, m=4, schedule="dualpipe").filled().m == 4
    assert Layout(p=4, schedule="dualpipe").filled().m == 8      # the default: DualPipe's least, 2p (1F1B's: p)
    assert Layout(p=4, schedule="1f1b").filled().m == 4


def test_zero_bubble_and_dualpipe():
    p, m = 8, 16
    # bubbles as a fraction of compute, T_F = T_B = T_W: 1F1B (p−1)/m, ZB-H1 a third of it (Qi et al.),
    # DualPipe (p/2 − 1)(F&B + B − 3W) = (p/2 − 1)·2T over 3T per micro-batch (DeepSeek-V3 Table 2)
    assert bubble_fraction("1f1b", p, m) == sympy.Rational(7, 16)
    assert bubble_fraction("interleaved", p, m, 2) == sympy.Rational(7, 32)
    assert bubble_fraction("zb-h1", p, m) == sympy.Rational(7, 48)
    assert bubble_fraction("dualpipe", p, m) == sympy.Rational(6, 48)
    # DualPipe: p + 1 stage-sized units on every device, two stages' parameters each
    assert chunks_in_flight(3, p, m, "dualpipe") == 9 and in_flight(3, p, m, "dualpipe") == sympy.Rational(9, 2)
    gpt = costgraph.load("gpt")
    stages = placement(gpt.graph, Layout(p=4, gpus=4, schedule="dualpipe")).stages
    assert [st.layers["layers"] for st in stages] == [l / 2] * 4
    assert stages[0].head and stages[3].head and not stages[1].head
    assert "wte" in stages[3].nodes and "lm_head" in stages[0].nodes
    # over a symbolic p (the planner's screen) each device holds the same: two stages' layers, both ends
    P = dim("N_p")
    sym = placement(gpt.graph, Layout(p=P, schedule="dualpipe")).stages
    assert [st.layers["layers"] for st in sym] == [2 * l / P] * 2
    assert [st.layers["layers"].subs(P, 4) for st in sym] == [st.layers["layers"] for st in stages[::3]]
    assert all(st.head and {"wte", "lm_head"} <= st.nodes for st in sym)


# --- item 2: layers per stage ----------------------------------------------------------------------------

SPLITS = [
    # Llama-3.1-405B (126 layers) on PP 16: embedding and loss counted as layers (Megatron-Bridge's 405B
    # recipe sets account_for_embedding/loss_in_pipeline_split with TP 8, PP 16), or first = last = 7
    (126, 16, None, dict(emb=True, loss=True)),
    (126, 16, None, dict(first=7, last=7)),
    (126, 8, 2, dict(emb=True, loss=True)),            # 128/8 = 16 a rank, 8 a chunk
    (126, 16, 2, dict(first=6, last=8)),               # 112/14 = 8 a middle rank; 3, 4, 4 a chunk
    (61, 7, None, dict(emb=True, loss=True)),          # DeepSeek-V3's 61 + 2 = 63 = 7 × 9
    (61, 16, None, dict(first=3, last=2)),             # 56/14 = 4
    (80, 8, 5, dict()),
    (30, 4, None, dict(first=9)),                      # 21/3 = 7
]


@pytest.mark.parametrize("L,p,v,kw", SPLITS)
def test_layers_to_build_equal_megatrons(L, p, v, kw):
    args = dict(first=kw.get("first"), last=kw.get("last"), embedding=kw.get("emb", False), loss=kw.get("loss", False))
    check_split(L, p, v or 1, **args)
    sizes = chunk_sizes(L, p, v or 1, **args)
    ranges = chunk_ranges(sizes)
    for r in range(p):
        for vp in range(v or 1):
            assert sizes[r][vp] == megatron_num_layers_to_build(L, p, r, vp, v, **kw), (r, vp)
            assert ranges[r][vp][0] == megatron_offset(L, p, r, vp, v, **kw), (r, vp)
    assert sum(sum(row) for row in sizes) == L


def test_405b_layer_counts_and_deepseek_refusal():
    assert [sum(r) for r in chunk_sizes(126, 16, embedding=True, loss=True)] == [7] + [8] * 14 + [7]
    with pytest.raises(CostgraphValueError, match="63") as e:   # 61 + 2 does not divide by 16
        check_split(61, 16, embedding=True, loss=True)
    assert "--decoder-first-pipeline-num-layers" in e.value.hint
    with pytest.raises(CostgraphValueError, match="126"):
        check_split(126, 16)                                  # Megatron's default must divide
    with pytest.raises(CostgraphValueError, match="cannot be combined"):
        Layout(p=4, first_stage_layers=2, account_loss=True).filled()


def test_deepseek_v3_dense_then_moe_contiguously():
    # 61 layers: k_d = 3 dense then 58 MoE; PP 16 with the first stage 3 layers, the last 2, 4 on each
    # other: stage 0 holds the three dense layers, every other stage only MoE layers
    ds = costgraph.load("deepseek_v3")
    vals = ds.values("deepseek-v3")
    stages = placement(ds.graph, Layout(p=16, gpus=16, first_stage_layers=3, last_stage_layers=2)).stages
    held = [(int(st.layers["dense_layers"].xreplace(vals)), int(st.layers["moe_layers"].xreplace(vals)))
            for st in stages]
    assert held == [(3, 0)] + [(0, 4)] * 14 + [(0, 2)]
    # an even split of 64 layers over 16 stages with k_d = 6: stage 1 holds 2 dense and 2 MoE layers
    assert stage_shares([6, 58], 16)[1] == [2, 2]
    # interleaved, chunks (vp, r) in Megatron's order: rank 0's chunks are layers 0-1 and 32-33
    assert stage_shares([3, 61], 16, 2)[0] == [2, 2] and stage_shares([3, 61], 16, 2)[1] == [1, 3]


def test_memory_uses_each_stages_own_layers():
    gpt = costgraph.load("gpt")
    vals = gpt.values("gpt2")                                      # 12 layers
    even = gpt.train(p=4, gpus=4).stages
    uneven = gpt.train(p=4, gpus=4, first_stage_layers=2, last_stage_layers=2).stages
    # a middle stage holds no embedding nor head: its weights are its layers', 4 instead of 3
    assert sympy.expand(uneven[1].memory["weights"] - even[1].memory["weights"] * sympy.Rational(4, 3)).xreplace(
        {l: 12}) == 0
    assert int(uneven[1].layers.xreplace(vals)) == 4 and int(uneven[0].layers.xreplace(vals)) == 2


def test_405b_shaped_layout_answers(capsys):
    # refused before ("16 pipeline stages cannot share the 126 iterations")
    argv = ["train", "llama", "--config", "llama-3-70b", "--set", "b=1", "s=8192", "l=126", "h=16384", "a=128",
            "i=53248", "--gpus", "2048", "--tp", "8", "--pp", "16", "--sp", "--recompute", "selective",
            "--attention", "flash", "--zero", "1", "--micro-batches", "16"]
    assert main(argv) == 2
    assert "--decoder-first-pipeline-num-layers" in capsys.readouterr().err
    assert main(argv + ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split",
                        "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [st["layers"]["value"] for st in doc["stages"]] == [7] + [8] * 14 + [7]
    assert [st["in_flight"]["value"] for st in doc["stages"]] == list(range(16, 0, -1))
    # stage 1: 8 layers × 15 micro-batches beats stage 0's 7 × 16
    assert doc["most_loaded_stage"] == 1
    assert doc["most_loaded_reason"].startswith("8 layers × 15 micro-batches in flight")
    assert main(argv[:-2] + ["--micro-batches", "16", "--decoder-first-pipeline-num-layers", "7",
                             "--decoder-last-pipeline-num-layers", "7"]) == 0
    text = capsys.readouterr().out
    assert "most loaded: stage 1: 8 layers × 15 micro-batches in flight" in text
    # the loss under the default cross-entropy (Megatron-LM's unfused: the fp32 softmax and the bf16 gradient held,
    # training/cross_entropy.toml [megatron]), its convention named
    assert "stage 15 (last)\n  7 layers × 1 micro-batches in flight, plus the loss (--cross-entropy megatron: " \
        "1 fp32 + 1 bf16 buffers of the logits' shape; " in text


def test_pace_of_the_most_loaded_stage():
    # 126 layers on PP 16 with the embedding and loss counted: 8 layers on the busiest stage against a
    # mean of 126/16 — its layers take 64/63 of the even share's time; an even split takes 1
    from costgraph.parallel.pipeline import most_loaded_layers, pace_factor

    llama = costgraph.load("llama")
    stages = placement(llama.graph, Layout(p=16, gpus=16, account_embedding=True, account_loss=True)).stages
    assert pace_factor(stages).xreplace({l: 126}) == sympy.Rational(64, 63)
    assert most_loaded_layers(stages, {l: 126}).index == 1
    assert pace_factor(placement(llama.graph, Layout(p=4, gpus=4)).stages) == 1


# --- virtual stages bounded (issue 16 trial) -------------------------------------------------------------------------

@pytest.mark.parametrize("v", ["1025", "1000000000000000000000000000000"])
def test_virtual_stages_are_bounded(capsys, v):
    # before: v = 10^30 hung (the chunk layout is built per chunk)
    argv = ["train", "gpt", "--config", "gpt2", "--pp", "2", "--schedule", "interleaved", "--micro-batches", "4",
            "--virtual-stages", v]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "at most 1024 model chunks" in err and "hint:" in err


def _zb_h1_steps(p: int, m: int) -> int:
    """The step of ZB-H1 in slots (T_F = T_B = T_W = 1 slot), list-scheduled as Qi et al. 2023 (arXiv 2401.10241)
    §3.1 build it: per stage a B pass first when its input gradient has arrived, else the next F while fewer than
    1F1B's min(p − i, m) micro-batches are in flight (the memory ZB-H1 keeps), else a deferred W pass."""
    done, end, t = {}, 0, 0
    nf, nb, w, free = [0] * p, [0] * p, [[] for _ in range(p)], [0] * p
    left = 3 * m * p
    while left:
        for i in range(p):
            if free[i] > t:
                continue
            j, op = nb[i], None
            if j < nf[i] and done.get(("F", i, j) if i == p - 1 else ("B", i + 1, j), t + 1) <= t:
                op, nb[i] = ("B", i, j), nb[i] + 1
                w[i].append(j)
            elif nf[i] < m and nf[i] - nb[i] < min(p - i, m) and (i == 0 or done.get(("F", i - 1, nf[i]), t + 1) <= t):
                op, nf[i] = ("F", i, nf[i]), nf[i] + 1
            elif w[i]:
                op = ("W", i, w[i].pop(0))
            if op is not None:
                done[op], free[i], left, end = t + 1, t + 1, left - 1, t + 1
        t += 1
    return end


def test_zb_h1_bubble_with_fewer_micro_batches_than_stages():
    # Qi et al. 2023 §3.1: ZB-H1's bubble (p − 1)(T_F + T_B − T_W), a third of 1F1B's, with m ≥ p (their Figure 3);
    # with m < p no steady state forms and the step is (2p + 2m − 1)·T (schedules.py's docstring): by hand,
    # p = 2, m = 1: F0 | F1 B1 | B0 W0 on stage 0, 5 slots for 3 of work, a bubble of 2/3 (not 1/3);
    # p = 4, m = 2: 11 slots for 6, 5/6 (the formula of m ≥ p would say 1/2)
    assert bubble_fraction("zb-h1", 2, 1) == sympy.Rational(2, 3)
    assert bubble_fraction("zb-h1", 4, 2) == sympy.Rational(5, 6)
    assert bubble_fraction("zb-h1", 4, 4) == sympy.Rational(3, 12)    # m = p: the paper's (p − 1)/(3m)
    assert bubble_fraction("zb-h1", 8, 16) == sympy.Rational(7, 48)
    # the list schedule above, every p ≤ 6 and m ≤ 2p + 1: the closed form exactly
    for p in range(2, 7):
        for m in range(1, 2 * p + 2):
            assert bubble_fraction("zb-h1", p, m) == sympy.Rational(_zb_h1_steps(p, m) - 3 * m, 3 * m), (p, m)
    # over a symbolic m (the planner's screen) the same values
    M = dim("N_m")
    assert bubble_fraction("zb-h1", 4, M).subs(M, 2) == sympy.Rational(5, 6)
    assert bubble_fraction("zb-h1", 4, M).subs(M, 8) == sympy.Rational(3, 24)
