"""Communication per device per training step (issue 8, item 4):
costgraph.parallel.communication. Every figure is derived from the graph and
the layout; the sources are cited in each test."""

from dataclasses import dataclass

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.parallel.communication import (Collective, Transfer, comm_time, communication, latency_steps,
                                                ring_factor)
from costgraph.parallel.placement import link
from costgraph.engine.symbols import dim
from costgraph.training.memory import Layout

b, s, h, l, V, s_max = (dim(n) for n in ("b", "s", "h", "l", "V", "s_max"))
t, p, m, c, e = (dim(n) for n in ("t", "p", "m", "c", "e"))
N = dim("N_d")   # the data-parallel degree (Llama's d is its head size)


def _eq(a, b):
    return sympy.simplify(a - b) == 0


def _params(cg):
    return sympy.Add(*[w.count * w.numel for w in cg.weights.values()])


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


# ---------------------------------------------------------------- ZeRO §7

def test_zero_paper_volumes_in_elements_and_bytes(gpt):
    # Rajbhandari et al. 2020 §7.1: data parallelism all-reduces the gradients, a reduce-scatter
    # and an all-gather, Ψ elements each: 2Ψ per device; ZeRO-1/2 (P_os+g) reduce-scatter the
    # gradients and all-gather the parameters: 2Ψ; §7.2 ZeRO-3 (P_os+g+p): all-gather the
    # parameters in forward and in backward, reduce-scatter the gradients: 3Ψ. The paper drops the
    # ring's (N_d − 1)/N_d; here it is kept: exactly 2Ψ(N_d − 1)/N_d and 3Ψ(N_d − 1)/N_d.
    cg = gpt.graph
    psi = _params(cg)
    ring = (N - 1) / N
    vol = {}
    for zero in (0, 1, 2, 3):
        r = communication(cg, Layout(zero=zero, d=N, m=1))
        vol[zero] = sympy.Add(*[col.elements() for col in r.values()])
        # the mixed policy (ZeRO §3.1): 16-bit gradients and parameters, 2 bytes an element
        assert _eq(sympy.Add(*[col.bytes for col in r.values()]), 2 * vol[zero])
    assert _eq(vol[0], 2 * psi * ring)
    assert _eq(vol[1], 2 * psi * ring) and _eq(vol[2], 2 * psi * ring)
    assert _eq(vol[3], 3 * psi * ring)
    r0 = communication(cg, Layout(zero=0, d=N))
    assert list(r0) == ["dp_grads"] and r0["dp_grads"].op == "all-reduce" and r0["dp_grads"].group == N
    r1 = communication(cg, Layout(zero=1, d=N))
    assert (r1["zero_reduce_scatter"].op, r1["zero_all_gather"].op) == ("reduce-scatter", "all-gather")
    assert _eq(r1["zero_reduce_scatter"].elements(), psi * ring) and _eq(r1["zero_all_gather"].elements(), psi * ring)
    r3 = communication(cg, Layout(zero=3, d=N))["fsdp"]
    assert r3.op == "all-gather + reduce-scatter"
    # one call per unit and direction: the l layers and the weights outside them
    assert _eq(r3.calls, 3 * (l + 1))
    # numbers: GPT-2 small has Ψ = 124,439,808 (DOMAIN.md §1); on 8 devices the all-reduce sends
    # 2Ψ·7/8 = 217,769,664 elements = 435,539,328 bytes
    vals = gpt.values(config="gpt2")
    assert psi.xreplace(vals) == 124_439_808
    r = communication(cg, Layout(zero=0, gpus=8))["dp_grads"]
    assert r.elements().xreplace(vals) == 217_769_664 and r.bytes.xreplace(vals) == 435_539_328


def test_zero_bytes_follow_the_policy_and_the_micro_batches(gpt):
    cg = gpt.graph
    psi = _params(cg)
    ring = (N - 1) / N
    # Megatron's distributed optimizer: fp32 main gradients reduce-scattered (4 bytes), bf16
    # parameters all-gathered (2 bytes) (Megatron-LM docs/distrib_optimizer.md)
    r = communication(cg, Layout(zero=1, d=N, policy="megatron"))
    assert _eq(r["zero_reduce_scatter"].bytes, 4 * psi * ring) and _eq(r["zero_all_gather"].bytes, 2 * psi * ring)
    # ZeRO-2 keeps only its gradient shard: a reduce-scatter per micro-batch; ZeRO-1 once per step
    assert _eq(communication(cg, Layout(zero=2, d=N, m=m))["zero_reduce_scatter"].elements(), m * psi * ring)
    assert _eq(communication(cg, Layout(zero=1, d=N, m=m))["zero_reduce_scatter"].elements(), psi * ring)
    # ZeRO-3 gathers the parameters every micro-batch
    assert _eq(communication(cg, Layout(zero=3, d=N, m=m))["fsdp"].elements(), 3 * m * psi * ring)


def test_hsdp_shards_within_groups_and_all_reduces_the_shard_across_them(gpt):
    cg = gpt.graph
    psi = _params(cg)
    parts = communication(cg, Layout(zero=3, gpus=16, hsdp=8, m=1))["fsdp"].parts
    assert {(x.op, x.group) for x in parts} == {("all-gather", 8), ("reduce-scatter", 8), ("all-reduce", 2)}
    across = next(x for x in parts if x.op == "all-reduce")
    assert _eq(across.elements, psi / 8) and across.stride == 8


def test_dp_gradients_are_the_stage_s_tp_shard(gpt):
    # what each device all-reduces is what it holds: the first of p stages holds l/p layers split
    # by TP (12h² + 7h of each layer split, 6h replicated), the vocabulary-parallel table Vh/t and
    # the position table; 2 bytes each (mixed)
    r = communication(gpt.graph, Layout(t=t, p=p, d=N))["dp_grads"]
    held = (l / p) * ((12 * h**2 + 7 * h) / t + 6 * h) + V * h / t + s_max * h
    assert _eq(r.bytes, 2 * (N - 1) / N * 2 * held)
    assert r.parts[0].group == N and r.parts[0].stride == t


# ---------------------------------------------------------------- TP

def _layer_parts(col):
    return [x for x in col.parts if x.what.startswith("layers/")]


def test_megatron_gpt_layer_two_all_reduces_each_way(gpt):
    # Shoeybi et al. 2019 §3 (Fig. 3, operators f and g): per layer, the attention and the MLP
    # each all-reduce their b·s·h output in forward (g) and their input's gradient in backward (f):
    # 2 all-reduces forward, 2 backward — read off the graph's row- and column-parallel linears
    tp = communication(gpt.graph, Layout(t=t, d=N, m=1))["tp"]
    parts = _layer_parts(tp)
    fwd = [x for x in parts if "(forward)" in x.what]
    bwd = [x for x in parts if "(backward)" in x.what]
    assert [x.op for x in fwd] == ["all-reduce"] * 2 and [x.op for x in bwd] == ["all-reduce"] * 2
    assert [x.what.split(":")[0] for x in fwd] == ["layers/attn/c_proj", "layers/mlp/c_proj"]
    assert [x.what.split(": ")[0] for x in bwd] == ["layers/ln_1:0", "layers/ln_2:0"]
    for x in parts:
        assert x.elements == b * s * h and x.calls == l and x.group == t and x.stride == 1
    # per layer per micro-batch: 4 all-reduces of 2bsh bytes, each sending 2(t−1)/t of it
    assert _eq(sympy.Add(*[x.bytes for x in parts]) / l, 4 * 2 * (t - 1) / t * 2 * b * s * h)


def test_sequence_parallel_two_all_gathers_two_reduce_scatters_each_way(gpt):
    # Korthikanti et al. 2022 §4.2.2 (Fig. 5): with SP, g becomes an all-gather forward /
    # reduce-scatter backward, ḡ a reduce-scatter forward / all-gather backward: per layer 2
    # all-gathers and 2 reduce-scatters each way, the same bytes as the all-reduces
    cg = gpt.graph
    sp = _layer_parts(communication(cg, Layout(t=t, sp=True, d=N, m=1))["tp"])
    for phase in ("(forward)", "(backward)"):
        ops = sorted(x.op for x in sp if phase in x.what)
        assert ops == ["all-gather"] * 2 + ["reduce-scatter"] * 2
    plain = _layer_parts(communication(cg, Layout(t=t, d=N, m=1))["tp"])
    assert _eq(sympy.Add(*[x.bytes for x in sp]), sympy.Add(*[x.bytes for x in plain]))
    # Megatron's extra all-gather of the kept input in backward (Korthikanti §4.2.2), on request
    more = _layer_parts(communication(cg, Layout(t=t, sp=True, d=N, m=1), sp_backward_gather=True)["tp"])
    assert len(more) == len(sp) + 2


def test_gpt_whole_model_tp_volume(gpt):
    # the whole model on one stage, m micro-batches: the layers' 4 all-reduces of b·s·h; the
    # vocabulary-parallel embedding's output (forward) and the head's input gradient (backward),
    # one all-reduce each; the vocabulary-parallel cross-entropy's 3 all-reduces of b·s fp32
    # values (Megatron tensor_parallel/cross_entropy.py)
    tp = communication(gpt.graph, Layout(t=t, d=N, m=m))["tp"]
    ar = 2 * (t - 1) / t
    want = m * ar * (4 * l * 2 * b * s * h + 2 * 2 * b * s * h + 3 * 4 * b * s)
    assert _eq(tp.bytes, want)
    assert _eq(tp.calls, m * (4 * l + 2 + 3))


def test_full_recompute_repeats_the_layers_forward_collectives(gpt):
    # Megatron's --recompute-granularity full re-runs each layer's forward, its all-reduces included
    cg = gpt.graph
    plain = _layer_parts(communication(cg, Layout(t=t, d=N, m=1))["tp"])
    full = _layer_parts(communication(cg, Layout(t=t, d=N, m=1, recompute="full"))["tp"])
    fwd = lambda parts: sympy.Add(*[x.calls for x in parts if "(forward)" in x.what])
    assert fwd(full) == 2 * fwd(plain) == 4 * l


def test_torchtitan_sac_replays_the_collectives_off_its_save_list(gpt):
    # torchtitan's per-op SAC replays the block's forward in the backward but for the ops on its save list
    # (torchtitan @ 9dec370 torchtitan/parallelisms/parallelize_llama.py _save_list: aten.mm, the SDPA ops,
    # _c10d_functional.reduce_scatter_tensor, abs, max; all_gather_into_tensor is not on it): under TP with SP
    # each layer's 2 forward all-gathers (the inputs of the column-parallel linears) run again, its 2
    # reduce-scatters are saved. torchtitan-layer (_apply_layer_sac) replays every collective of floor(l/n) of l.
    cg = gpt.graph

    def forward(layout, op):
        parts = _layer_parts(communication(cg, layout)["tp"])
        return sympy.Add(*[x.calls for x in parts if "(forward)" in x.what and x.op == op])

    for op, again in (("all-gather", 2), ("reduce-scatter", 1)):
        assert forward(Layout(t=t, sp=True, d=N, m=1, recompute="torchtitan-op"), op) == again * 2 * l
        assert forward(Layout(t=t, sp=True, d=N, m=1, recompute="none"), op) == 2 * l
    # without SP the forward's all-reduces (Megatron's ḡ; funcol all_reduce, not saved either) run again
    assert forward(Layout(t=t, d=N, m=1, recompute="torchtitan-op"), "all-reduce") == 2 * 2 * l
    every3 = forward(Layout(t=t, sp=True, d=N, m=1, recompute="torchtitan-layer", recompute_frequency=3),
                     "reduce-scatter")
    assert sympy.expand(every3.xreplace({l: 12})) == 2 * 12 + 2 * 4   # 4 of 12 blocks replayed


# ---------------------------------------------------------------- PP

def test_pipeline_sends_one_activation_per_boundary_per_micro_batch(gpt):
    # Calculon (Isaev et al. 2023) and Narayanan et al. 2021 §2.2: each micro-batch crosses each
    # stage boundary as one b·s·h activation forward and its gradient backward (2 bytes an element);
    # with SP the activation stays split by t (Korthikanti et al. 2022 §4.2.2)
    cg = gpt.graph
    L = Layout(t=t, p=4, d=N, m=m)
    middle = communication(cg, L, stage="middle")["pp"]
    assert middle.op == "send/recv" and middle.group == 4 and middle.parts[0].stride == t * N
    assert _eq(middle.bytes, 2 * m * 2 * b * s * h)
    assert _eq(communication(cg, L, stage="first")["pp"].bytes, m * 2 * b * s * h)
    assert _eq(communication(cg, L, stage=3)["pp"].bytes, m * 2 * b * s * h)
    with_sp = communication(cg, Layout(t=t, p=4, d=N, m=m, sp=True), stage=1)["pp"]
    assert _eq(with_sp.bytes, 2 * m * 2 * b * s * h / t)
    # interleaved, v = 2 virtual stages: each device sends v times per micro-batch each way
    inter = communication(cg, Layout(p=4, d=N, m=8, schedule="interleaved", v=2), stage="middle")["pp"]
    assert _eq(inter.bytes, 2 * 2 * 8 * 2 * b * s * h)
    assert "pp" not in communication(cg, Layout(d=N))


def test_tied_table_gradients_are_all_reduced_between_first_and_last_stage(gpt):
    # Megatron's embedding group: GPT's word embedding is tied to the head, the last stage keeps a
    # copy, and the two all-reduce its gradients each step (V·h/t, vocabulary-parallel)
    r = communication(gpt.graph, Layout(t=t, p=4, d=N), stage="last")["tied_embedding"]
    assert r.group == 2 and _eq(r.bytes, 2 * V * h / t)
    assert "tied_embedding" not in communication(gpt.graph, Layout(t=t, p=4, d=N), stage="middle")
    assert "tied_embedding" not in communication(costgraph.load("llama").graph, Layout(p=4, d=N), stage="last")


# ---------------------------------------------------------------- CP and EP

def test_llama_gqa_context_parallel_exchanges_kv_heads_only():
    # Megatron context_parallel.md: per attention layer K and V are gathered in forward (a ring
    # of point-to-point sends of the same volume) and dK, dV reduce-scattered in backward. Under
    # GQA the exchanged K and V have kv heads of d, not a heads: Llama-3-8B (kv 8, d 128, s 8192)
    model = costgraph.load("llama")
    kv, d = dim("kv"), dim("d")
    cp = communication(model.graph, Layout(c=c, d=N, m=1))["cp"]
    assert cp.op == "all-gather + reduce-scatter" and cp.group == c and cp.parts[0].stride == 1
    fwd, bwd = cp.parts
    assert "rope_1:0" in fwd.what and "split_heads_2:0" in fwd.what   # K after RoPE, V before repeat_kv
    assert _eq(fwd.elements, 2 * b * kv * s * d) and fwd.calls == l and bwd.calls == l
    assert _eq(cp.bytes, 2 * l * (c - 1) / c * 2 * 2 * b * kv * s * d)
    vals = model.values(config="llama-3-8b")
    r = communication(model.graph, Layout(c=2, gpus=2, m=1))["cp"]
    # 32 layers × (forward + backward) × ½ × (K + V = 2 · 8192 · 8 · 128 elements × 2 bytes)
    assert r.bytes.xreplace(vals) == 32 * 2 * 33_554_432 // 2 == 1_073_741_824
    # with TP each device exchanges its share of the heads
    assert _eq(communication(model.graph, Layout(c=c, t=t, d=N, m=1))["cp"].bytes, cp.bytes / t)


def test_mixtral_expert_parallel_all_to_all_with_k_2():
    # llm-analysis and the Scaling Book: an MoE layer all-to-alls its tokens to the experts
    # (dispatch) and back (combine) in forward, and both again in backward; each token goes to
    # k experts, so each all-to-all carries k·b·s·h. Mixtral-8x7B: k = 2 read from the graph's
    # expert group (repeat E as experts active k); with SP each TP rank dispatches its s/t tokens
    model = costgraph.load("mixtral")
    k = dim("k")
    ep = communication(model.graph, Layout(e=e, d=N, m=1))["ep"]
    assert ep.op == "all-to-all" and ep.group == e and ep.calls == 4 * l
    assert all(_eq(x.elements, k * b * s * h) for x in ep.parts)
    assert _eq(ep.bytes, 4 * l * (e - 1) / e * 2 * k * b * s * h)
    sp = communication(model.graph, Layout(e=e, t=t, sp=True, d=N, m=1))["ep"]
    assert _eq(sp.bytes, ep.bytes / t)
    vals = model.values(config="mixtral-8x7b")
    r = communication(model.graph, Layout(e=8, gpus=8, m=1))["ep"]
    # 32 layers × 4 calls × 7/8 × (2 · 4096 · 4096 elements × 2 bytes)
    assert r.bytes.xreplace(vals) == 32 * 4 * 7 * 67_108_864 // 8 == 7_516_192_768
    # the experts' gradients are all-reduced over their own data-parallel group d·c·t/e
    dp = communication(model.graph, Layout(e=8, gpus=16))["dp_grads"]
    assert [(x.what.split()[0], x.group, x.stride) for x in dp.parts] == [("dense", 16, 1), ("experts", 2, 8)]


def test_lora_and_bad_stages_are_refused(gpt):
    with pytest.raises(CostgraphValueError, match="LoRA"):
        communication(gpt.graph, Layout(lora_rank=8, d=N))
    with pytest.raises(CostgraphValueError, match="stage"):
        communication(gpt.graph, Layout(p=p, d=N), stage=2)


# ---------------------------------------------------------------- time

@dataclass(frozen=True)
class _Hw:
    """A stand-in with costgraph.hardware.Hardware's link fields (H100-like: NVLink 450 GB/s per
    direction in 8-GPU domains, a 400 Gb/s NIC per GPU)."""

    scale_up_bandwidth: int = 450_000_000_000
    scale_up_domain: int = 8
    scale_out_bandwidth: int = 50_000_000_000
    devices_per_node: int = 8
    latency_scale_up_ns: int = 1_000
    latency_scale_out_ns: int = 5_000


def test_ring_conventions():
    assert ring_factor("all-reduce", 8) == sympy.Rational(7, 4)
    assert ring_factor("all-gather", 8) == ring_factor("reduce-scatter", 8) == sympy.Rational(7, 8)
    assert ring_factor("send/recv", 2) == 1
    one = Transfer("x", "all-reduce", sympy.Integer(4), sympy.Integer(1), sympy.Integer(1000), sympy.Integer(2),
                   sympy.Integer(3))
    assert one.bytes == 3 * 2000 * sympy.Rational(3, 2)
    assert Collective("k", (one,)).bytes == 9000


def test_link_follows_megatron_rank_order():
    hw = _Hw()
    up = (sympy.Rational(1, 10**6), 450_000_000_000)
    out = (sympy.Rational(5, 10**6), 50_000_000_000)
    assert link(1, 8, hw, 64) == up           # TP of 8 in an 8-GPU domain
    assert link(8, 8, hw, 64) == out          # DP across 8 nodes, stride t = 8
    assert link(4, 2, hw, 64) == up           # t = 4, d = 2: one node
    assert link(2, 3, hw, 64) == out          # a group of 6 straddles 8-GPU domains
    assert link(2, 3, hw, 6) == up            # unless all the GPUs are in one domain
    pw = link(t, 2, hw)                        # symbolic: a Piecewise on 2t ≤ 8
    assert pw[1].xreplace({t: 4}) == 450_000_000_000 and pw[1].xreplace({t: 8}) == 50_000_000_000


def test_comm_time_latency_bandwidth(gpt):
    # dp_grads of GPT-2 small on t = 8 × d = 2: 16 GPUs, DP stride 8 → scale-out; one ring
    # all-reduce over 2: 2(n−1) = 2 latency steps + bytes / 50 GB/s
    hw = _Hw()
    L = Layout(t=8, gpus=16)
    col = communication(gpt.graph, L)
    secs = comm_time(col, hw, L)
    vals = gpt.values(config="gpt2")
    bytes_dp = col["dp_grads"].bytes.xreplace(vals)
    assert secs["dp_grads"].xreplace(vals) == 2 * sympy.Rational(5, 10**6) + bytes_dp / 50_000_000_000
    # TP inside the node: per call 2(t−1) latency steps over NVLink
    tp = col["tp"]
    want = tp.calls * 14 * sympy.Rational(1, 10**6) + tp.bytes / 450_000_000_000
    assert _eq(secs["tp"], want)


def tp_bytes_over(col, bandwidth):
    """The bytes term of a collective's seconds at ``bandwidth`` B/s."""
    return col.bytes / bandwidth


def test_comm_time_on_a_preset():
    # the preset's fields are the ones the stand-in has (costgraph.hardware, issue 8 item 3):
    # Llama-3-70B, t = 8 (one NVLink domain of 8 H100s), SP, 4 stages, d = 2 across nodes
    hardware = pytest.importorskip("costgraph.hardware")
    hw = hardware.preset("h100-sxm")
    model = costgraph.load("llama")
    L = Layout(t=8, p=4, gpus=64, sp=True, zero=1, policy="megatron", m=16)
    col = communication(model.graph, L, stage="middle")
    secs = comm_time(col, hw, L)
    vals = model.values(config="llama-3-70b")
    alpha_up, beta_up = link(1, 8, hw, 64)
    # --link-rate nccl (default): what NCCL reaches, NCCL @ 5067397 src/graph/topo.h SM90_NVLINK_BW 20.6 GB/s
    # x 18 NVLink4 links = 370.8 of the line's 450 (nccl-tests#212: "NCCL can get an effective NVLink
    # bandwidth of 370GB/s"); NET_BW 12.0 per 100 Gbit: 48 of a 400 Gb/s NIC's 50 (nccl-tests#290: 46-48)
    assert beta_up == 370_800_000_000 and hw.scale_up_bandwidth == 450_000_000_000
    assert link(8, 2, hw, 64)[1] == 48_000_000_000
    assert link(1, 8, hw, 64, rate="line")[1] == hw.scale_up_bandwidth    # --link-rate line: the vendors'
    assert link(8, 2, hw, 64, rate="line")[1] == hw.scale_out_bandwidth
    # a ring of one rank per node on 8 NICs: min(r·48, 370.8) GB/s (ranks.ring_scale_out at busbw)
    assert link(8, 8, hw, 64, ring=True)[1] == 48_000_000_000
    assert link(1, 16, hw, 64, ring=True)[1] == 370_800_000_000
    line = comm_time(col, hw, Layout(t=8, p=4, gpus=64, sp=True, zero=1, policy="megatron", m=16, link_rate="line"))
    assert (line["tp"] - tp_bytes_over(col["tp"], 450_000_000_000) - (secs["tp"] - tp_bytes_over(
        col["tp"], 370_800_000_000))).xreplace(vals) == 0   # the latency terms alike, the bytes at the line rate
    tp = col["tp"]
    want = sum(x.calls * latency_steps(x.op, 8) * alpha_up for x in tp.parts) + tp.bytes / beta_up
    assert secs["tp"].xreplace(vals) == want.xreplace(vals)
    # per layer per micro-batch: 8 calls (2 all-gathers and 2 reduce-scatters each way) of
    # b·s·h = 8192 · 8192 bf16 values, each sending 7/8: 20 layers × 16 micro-batches
    layer = sum(x.bytes for x in tp.parts if x.what.startswith("layers/")).xreplace(vals)
    assert layer == 20 * 16 * 8 * 7 * 8192 * 8192 * 2 // 8


def test_ring_across_nodes_takes_its_members_nics():
    # NCCL runs an inter-node ring channel NET -> GPU a -> ... -> GPU x -> NET (NVIDIA/nccl @ 5067397
    # src/graph/search.cc, above ncclTopoSearchParams), its channels on the NICs of the communicator's GPUs
    # (ncclTopoPrefNetsChannelFirst) and its bus bandwidth nChannels · bwInter (src/graph/tuning.cc): "with
    # rings, you should get ~12 GB/s with each NIC, then ~24 when using 2 NICs" (NVIDIA/nccl#307). So a ring
    # with r members on a node crosses at r NICs, at most the scale-up link: min(r · 50, 450) GB/s here.
    hw = _Hw()
    lat = sympy.Rational(5, 10**6)
    assert link(2, 32, hw, 64, ring=True) == (lat, 200_000_000_000)    # 4 of the group on each node
    assert link(1, 16, hw, 64, ring=True) == (lat, 400_000_000_000)    # all 8 GPUs of each node
    assert link(8, 8, hw, 64, ring=True) == (lat, 50_000_000_000)      # one per node: its own NIC
    assert link(2, 32, hw, 64) == (lat, 50_000_000_000)                # send/recv: one NIC
    assert link(2, 3, hw, 64, ring=True)[1] == 50_000_000_000          # straddling: counted as one member
    assert link(1, 8, hw, 64, ring=True) == link(1, 8, hw, 64)         # inside the node: NVLink either way
    wide = _Hw(scale_up_domain=72)                                     # 64 of 72 per domain: capped by NVLink
    assert link(1, 128, wide, 128, ring=True)[1] == 450_000_000_000
    sym = link(t, 64, hw, ring=True)[1]                                # symbolic t: the same at each t
    for tv in (1, 2, 4, 8):
        assert sym.xreplace({t: tv}) == link(tv, 64, hw, ring=True)[1]


def test_comm_time_rings_across_nodes(gpt):
    # GPT-2 small on t = 2 × d = 8 (16 GPUs, two nodes): the DP group (stride 2) has 4 members a node, so its
    # all-reduce runs at 4 NICs (200 GB/s); pipeline sends (p = 2 × t = 8) keep one NIC
    hw = _Hw()
    L = Layout(t=2, gpus=16)
    col = communication(gpt.graph, L)
    vals = gpt.values(config="gpt2")
    got = comm_time(col, hw, L)["dp_grads"].xreplace(vals)
    assert got == 14 * sympy.Rational(5, 10**6) + col["dp_grads"].bytes.xreplace(vals) / 200_000_000_000
    L = Layout(t=8, p=2, gpus=16, m=4)
    col = communication(gpt.graph, L)
    pp = col["pp"]
    want = sum(x.calls * sympy.Rational(5, 10**6) for x in pp.parts) + pp.bytes / 50_000_000_000
    assert _eq(comm_time(col, hw, L)["pp"], want)
