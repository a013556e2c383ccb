"""Communication overlap conventions (costgraph.training.overlap): each rule's exposed seconds,
exact, on GPT-2 and Llama-2-7B."""

import pytest
import sympy

import costgraph
from costgraph.hardware import preset
from costgraph.parallel.collectives import Collective
from costgraph.parallel.communication import comm_time, communication
from costgraph.parallel.layout import Layout
from costgraph.parallel.placement import placement
from costgraph.training.overlap import attention_share, phase
from costgraph.training.steptime import step_time

H100 = preset("h100-sxm")


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


def _run(model, layout, vals):
    st = step_time(model.graph, layout, H100)
    ov = st["overlap"]
    ex = {k: x.xreplace(vals) for k, x in ov.exposed().items()}
    return st, ov, ex


def _seconds(model, layout, kind, vals, keep=lambda p: True):
    """Seconds of the parts of ``kind`` that ``keep`` selects, by comm_time (independent of the rules)."""
    L = layout.filled()
    col = communication(model.graph, L)[kind]
    parts = tuple(p for p in col.parts if keep(p))
    return comm_time({kind: Collective(kind, parts)}, H100, L)[kind].xreplace(vals) if parts else 0


def test_zero3_compute_dominates_exposes_the_first_unit(gpt):
    vals = gpt.values("gpt2", b=8)
    L = Layout(zero=3, gpus=8, m=1)
    st, ov, ex = _run(gpt, L, vals)
    U = 12 + 1          # GPT-2's 12 layers and the weights outside them
    fsdp = _seconds(gpt, L, "fsdp", vals)
    assert ex["fsdp"] == fsdp / U             # the first unit's gathers (forward, backward), the last reduce-scatter
    # total = compute + bubble + the optimizer step (after the backward: nothing hides behind it) + exposed
    # + the compute the hidden part slows (costgraph.training.contention; tests/training/test_overlap_contention.py)
    assert st["total"].xreplace(vals) == (st["compute"] + st["bubble"] + st["optimizer"]).xreplace(vals) \
        + sum(ex.values()) + st["contention"].xreplace(vals)
    assert (st["communication_overlapped"] + st["communication_exposed"]).xreplace(vals) == fsdp


def test_zero3_gather_dominates_exposes_the_traffic_beyond_the_compute(gpt):
    vals = gpt.values("gpt2", b=1, s=64)
    L = Layout(zero=3, gpus=64, m=1)          # 64 devices over 8 nodes: the gathers leave the node
    st, ov, ex = _run(gpt, L, vals)
    U = 13
    fsdp, compute = _seconds(gpt, L, "fsdp", vals), st["compute"].xreplace(vals)
    assert fsdp > compute
    # G/U + (U−1)/U·(G_f − C_f) + (U−1)/U·(G_b + RS − C_b) = G − (U−1)/U·C
    assert ex["fsdp"] == fsdp - sympy.Rational(U - 1, U) * compute


def test_megatron_buckets_expose_the_last_bucket():
    llama = costgraph.load("llama")
    vals = llama.values("llama-2-7b", b=1, s=4096)
    L = Layout(gpus=8, m=8)
    st, ov, ex = _run(llama, L, vals)
    part = communication(llama.graph, L.filled())["dp_grads"].parts[0]
    assert part.elements.xreplace(vals) == 6_738_415_616   # Llama-2-7B's parameters (Touvron et al. 2023)
    grads = _seconds(llama, L, "dp_grads", vals)
    # Megatron-Bridge comm_overlap.py: bucket_size = 128 * 1024 * 1024 parameters; the rest is within the
    # last micro-batch's backward
    assert ex["dp_grads"] == grads * sympy.Rational(128 * 2**20, 6_738_415_616)
    assert ov.kinds["dp_grads"].rule == "buckets"
    tt = _run(llama, Layout(gpus=8, m=8, overlap="torchtitan"), vals)[2]
    # PyTorch DDP's bucket_cap_mb = 25: 25 MiB of gradients of part.dtype_bytes each
    assert tt["dp_grads"] == grads * sympy.Rational(25 * 2**20, part.dtype_bytes) / 6_738_415_616
    assert _run(llama, Layout(gpus=8, m=8, overlap="none"), vals)[2]["dp_grads"] == grads


def test_one_bucket_is_all_exposed(gpt):
    vals = gpt.values("gpt2", b=8)
    ex = _run(gpt, Layout(gpus=8, m=1), vals)[2]
    # GPT-2's 124,439,808 parameters fit one bucket of 128 Mi: nothing to overlap
    assert ex["dp_grads"] == _seconds(gpt, Layout(gpus=8, m=1), "dp_grads", vals)


def test_zero1_param_gather_first_bucket():
    llama = costgraph.load("llama")
    vals = llama.values("llama-2-7b", b=1, s=4096)
    L = Layout(gpus=8, m=8, zero=1)
    ex = _run(llama, L, vals)[2]
    ag = _seconds(llama, L, "zero_all_gather", vals)
    assert ex["zero_all_gather"] == ag * sympy.Rational(128 * 2**20, 6_738_415_616)


def _tp_split(model, layout):
    """(chunked, bulk, other) selectors of the TP parts, by TransformerEngine initialize_ub's methods."""
    rows = set(placement(model.graph, layout.filled()).tp.row)

    def who(p):
        return p.what.split(": ", 1)[0]

    def chunked(p):   # ring_exchange (t splits) and pipeline (4 splits): at t = 4, a quarter exposed
        return (p.op == "reduce-scatter" and phase(p) == "forward" and who(p) in rows) or \
            (p.op == "all-gather" and (" input of " in p.what or (phase(p) == "backward" and who(p) in rows)))

    def bulk(p):
        return p.op == "reduce-scatter" and phase(p) == "backward" and "its gradient" in p.what

    return chunked, bulk, lambda p: not chunked(p) and not bulk(p)


def test_tp_comm_overlap_on_and_off(gpt):
    vals = gpt.values("gpt2", b=8)
    L = Layout(t=4, sp=True, gpus=4, m=1)
    st, ov, ex = _run(gpt, L, vals)
    chunked, bulk, other = _tp_split(gpt, L)
    c, b, o = (_seconds(gpt, L, "tp", vals, k) for k in (chunked, bulk, other))
    assert c > 0 and b > 0 and o > 0
    assert ex["tp"] == c / 4 + o               # the embedding's, the cross-entropy's, the norms' gradients: exposed
    assert ov.kinds["tp"].rule == "userbuffers"
    # without SP Megatron refuses --tp-comm-overlap: all of it exposed; --overlap none: all exposed
    L0 = Layout(t=4, gpus=4, m=1)
    assert _run(gpt, L0, vals)[2]["tp"] == _seconds(gpt, L0, "tp", vals)
    Ln = Layout(t=4, sp=True, gpus=4, m=1, overlap="none")
    assert _run(gpt, Ln, vals)[2]["tp"] == _seconds(gpt, Ln, "tp", vals)


def test_pp_sends_overlapped_only_interleaved(gpt):
    vals = gpt.values("gpt2", b=8)
    L = Layout(p=2, v=2, schedule="interleaved", gpus=2, m=4)
    ex = _run(gpt, L, vals)[2]
    # warm-up w = 2(p−1) + (v−1)·p + 1 = 5 of N = m·v = 8 chunks (ep_time.warmup_chunks): their sends exposed
    assert ex["pp"] == _seconds(gpt, L, "pp", vals) * sympy.Rational(5, 8)
    L1 = Layout(p=2, gpus=2, m=4)              # 1F1B: Megatron sets overlap_p2p_comm = False
    assert _run(gpt, L1, vals)[2]["pp"] == _seconds(gpt, L1, "pp", vals)


def test_pp_sends_hidden_under_dualpipe(gpt):
    # DeepSeek-V3 report (arXiv 2412.19437) §3.2.1: "both all-to-all and PP communication can be fully hidden during
    # execution" under DualPipe: no PP second exposed, all of them hidden within the step's compute
    vals = gpt.values("gpt2", b=8)
    L = Layout(p=2, gpus=2, m=4, schedule="dualpipe")
    st, ov, ex = _run(gpt, L, vals)
    secs = _seconds(gpt, L, "pp", vals)
    assert secs > 0 and ex["pp"] == 0
    assert ov.kinds["pp"].rule == "dualpipe" and ov.kinds["pp"].seconds.xreplace(vals) == secs
    # under --overlap none every send is exposed, as for every schedule
    assert _run(gpt, Layout(p=2, gpus=2, m=4, schedule="dualpipe", overlap="none"), vals)[2]["pp"] == secs


def test_cp_ring_hidden_behind_attention(gpt):
    b, s, h, l, V = (gpt.graph.dims[n].symbol for n in ("b", "s", "h", "l", "V"))
    # Narayanan et al. 2021 §5.1: forward FLOPs per layer 24bsh² + 4bs²h, logits 2bshV; attention products 4bs²h
    expected = 4 * s**2 * h * l / (l * (24 * s * h**2 + 4 * s**2 * h) + 2 * s * h * V)
    assert sympy.simplify(attention_share(gpt.graph) - expected) == 0
    vals = gpt.values("gpt2", b=1, s=8192)
    L = Layout(c=2, gpus=2, m=1)
    st, ov, ex = _run(gpt, L, vals)
    assert ov.kinds["cp"].rule == "ring" and _seconds(gpt, L, "cp", vals) > 0
    assert ex["cp"] == 0                       # each K/V transfer shorter than one block's attention
    assert _run(gpt, Layout(c=2, gpus=2, m=1, overlap="none"), vals)[2]["cp"] == _seconds(gpt, L, "cp", vals)


def test_none_exposes_everything(gpt):
    vals = gpt.values("gpt2", b=8)
    L = Layout(t=2, sp=True, zero=3, gpus=8, m=2, overlap="none")
    st = step_time(gpt.graph, L, H100)
    assert st["total"].xreplace(vals) == (st["compute"] + st["bubble"] + st["optimizer"]
                                          + sum(st["by_kind"].values())).xreplace(vals)
    assert st["communication_overlapped"].xreplace(vals) == 0


def test_unknown_convention_refused(gpt):
    from costgraph.errors import CostgraphValueError

    with pytest.raises(CostgraphValueError, match="unknown overlap"):
        Layout(overlap="nccl").filled()


def test_each_link_rate_gets_its_own_seconds_in_one_process(gpt):
    """The overlap model's per-part cache (overlap.part_seconds) was keyed without --link-rate: a step at
    --link-rate line after one at nccl, in one process, reused the nccl seconds (found by plan = train at
    --link-rate line after the nccl rows). Each step's seconds of each kind are comm_time's at its own rate."""
    vals = gpt.values("gpt2", b=4)
    for rate in ("nccl", "line", "nccl"):
        L = Layout(t=2, gpus=16, zero=1, m=4, link_rate=rate)
        st = step_time(gpt.graph, L, H100)
        assert set(st["by_kind"]) == {"tp", "zero_reduce_scatter", "zero_all_gather"}   # ZeRO 1's kinds
        for kind in st["by_kind"]:
            assert st["by_kind"][kind].xreplace(vals) == _seconds(gpt, L, kind, vals), (rate, kind)
    nccl, line = (step_time(gpt.graph, Layout(t=2, gpus=16, zero=1, m=4, link_rate=r), H100)["by_kind"]["tp"]
                  .xreplace(vals) for r in ("nccl", "line"))
    assert line < nccl   # 450 GB/s of NVLink against NCCL's 370.8


def test_smax_of_zero_is_sympys_max(gpt):
    """``smax(0, X)``, built without Max's sort of its arguments, is the object ``Max(0, X, evaluate=False)``
    builds (SymPy 1.14 miscellaneous.py, MinMaxBase.__new__: ``ordered`` puts the tree of fewer nodes first):
    equal, the same arguments in the same order, the same hash and text, for the rules' ``H − w·C`` of a step
    and for small operations; other arguments go to SymPy's Max itself."""
    from costgraph.training.overlap import smax

    x, y = sympy.symbols("x y", positive=True)
    ov = step_time(gpt.graph, Layout(t=2, d=4, zero=1, sp=True), H100)["overlap"]
    terms = [h.seconds - h.weight * ov.forward for o in ov.kinds.values() for h in o.hides]
    assert terms, "the layout's rules hide some communication"
    for e in terms + [x + 1, 2 * x, -x, x * y, sympy.Min(x, 1), sympy.Rational(1, 2) * x]:
        want, got = sympy.Max(0, e, evaluate=False), smax(0, e)
        assert got == want and got.args == want.args and hash(got) == hash(want) and str(got) == str(want)
        assert got.args[0] == 0 and type(got) is sympy.Max
    for a, b in [(0, x), (0, 3), (x, 0), (x, y + 1), (0, 0)]:
        assert smax(a, b) == sympy.Max(a, b, evaluate=False)
    assert smax(0, x).args == (0, x) and smax(0, 0) == 0 and smax(0, 3) == sympy.Max(0, 3, evaluate=False)
