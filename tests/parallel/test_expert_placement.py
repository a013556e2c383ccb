"""Expert placement (issue 16 item 5, the EP part of item 13): rank order, scale-up domains,
the EP all-to-all's bytes and seconds, device-limited routing, EP overlap, and plan = train."""

from __future__ import annotations

import itertools

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.hardware import preset
from costgraph.parallel.collectives import Transfer
from costgraph.parallel.communication import comm_time, communication
from costgraph.parallel.ep_time import alltoall_seconds, ep_exposed
from costgraph.parallel.layout import Layout
from costgraph.parallel.placement import link, placement, rank_order_groups
from costgraph.parallel.ranks import DEFAULT_ORDER, TP_PP_DP_ORDER, domain_members, ranks_per_domain


# ---------------------------------------------------------------- Megatron's rank groups, transcribed
# Megatron-LM @ d98e8a64, megatron/core/parallel_state.py::generate_masked_orthogonal_rank_groups
# and RankGenerator.get_ranks (the order's missing names appended, sizes 1 kept)

def _prefix_product(a, init=1):
    r = [init]
    for v in a:
        init = init * v
        r.append(init)
    return r


def _decompose(index, shape):
    stride = _prefix_product(shape)
    return [(index // d) % s for s, d in zip(shape, stride)]


def _megatron_groups(world_size, parallel_size, mask):
    masked_shape = [s for s, m in zip(parallel_size, mask) if m]
    unmasked_shape = [s for s, m in zip(parallel_size, mask) if not m]
    global_stride = _prefix_product(parallel_size)
    masked_stride = [d for d, m in zip(global_stride, mask) if m]
    unmasked_stride = [d for d, m in zip(global_stride, mask) if not m]
    group_size = _prefix_product(masked_shape)[-1]
    ranks = []
    for group_index in range(world_size // group_size):
        gi = _decompose(group_index, unmasked_shape)
        rank = []
        for rank_in_group in range(group_size):
            ri = _decompose(rank_in_group, masked_shape)
            rank.append(sum(x * y for x, y in zip(ri, masked_stride)) + sum(x * y for x, y in zip(gi, unmasked_stride)))
        ranks.append(rank)
    return ranks


def _get_ranks(order, sizes, token):
    names = order.split("-")
    world = 1
    for n in names:
        world *= sizes[n]
    mask = [n in token.split("-") for n in names]
    return _megatron_groups(world, [sizes[n] for n in names], mask)


def _offsets(group):
    out = [0]
    for n, s in group.parts():
        out = [o + i * int(s) for o in out for i in range(int(n))]
    return sorted(out)


@pytest.mark.parametrize("order", [DEFAULT_ORDER, TP_PP_DP_ORDER])
@pytest.mark.parametrize("t,c,e,etp,d,p", [(2, 2, 1, 1, 2, 2), (2, 1, 4, 1, 4, 2), (2, 1, 2, 2, 4, 2),
                                           (1, 2, 4, 1, 2, 3), (4, 1, 8, 1, 2, 2)])
def test_rank_groups_equal_megatrons(order, t, c, e, etp, d, p):
    groups = rank_order_groups(order, *(sympy.Integer(x) for x in (t, c, e, etp, d, p)))
    dense = {"tp": t, "cp": c, "ep": 1, "dp": d, "pp": p}
    edp = d * c * t // (e * etp)
    expert = {"tp": etp, "cp": 1, "ep": e, "dp": edp, "pp": p}
    # Megatron's calls: decoder_rank_generator.get_ranks("tp" / "cp" / "dp-cp" / "pp"),
    # expert_decoder_rank_generator.get_ranks("ep" / "dp")
    for name, sizes, token in (("tp", dense, "tp"), ("cp", dense, "cp"), ("dp", dense, "dp-cp"),
                               ("pp", dense, "pp"), ("ep", expert, "ep"), ("expert_dp", expert, "dp")):
        want = _get_ranks(order, sizes, token)
        g = groups[name]
        assert int(g.size) == len(want[0])
        offsets = _offsets(g)
        assert sorted(sorted(min(r) + o for o in offsets) for r in want) == sorted(sorted(r) for r in want), name


def test_dp_cp_group_of_the_tp_pp_dp_mapping_is_two_factors():
    # tp-cp-ep-pp-dp: CP at stride t, DP at stride t·c·p: not one progression
    g = rank_order_groups(TP_PP_DP_ORDER, *(sympy.Integer(x) for x in (2, 2, 1, 1, 2, 2)))["dp"]
    assert g.parts() == ((2, 2), (2, 8)) and g.size == 4
    assert rank_order_groups(DEFAULT_ORDER, *(sympy.Integer(x) for x in (2, 2, 1, 1, 2, 2)))["dp"].parts() == \
        ((4, 2),)


def test_bad_rank_order_is_refused():
    with pytest.raises(CostgraphValueError, match="rank order"):
        Layout(rank_order="tp-dp-pp").filled()
    with pytest.raises(CostgraphValueError, match="ep_overlap"):
        Layout(ep_overlap="always").filled()


# ---------------------------------------------------------------- scale-up domains

def test_ranks_per_domain_power_of_two_fill():
    assert ranks_per_domain(preset("gb200")) == 64          # 64 of an NVL72's 72 (16 of 18 trays)
    assert ranks_per_domain(preset("h100-sxm")) == 8
    assert ranks_per_domain(preset("tpu-v5p")) == 4096       # of a 6144-chip slice
    assert ranks_per_domain(preset("gb200"), 72) == 72
    # a job that fits the whole domain is inside it: 72 GPUs on one NVL72, a 6144-chip v5p slice
    gb, v5p = preset("gb200"), preset("tpu-v5p")
    # (at the line rates: which link, not its rate; --link-rate nccl in tests/parallel/test_communication.py)
    assert link(1, 72, gb, 72, rate="line")[1] == gb.scale_up_bandwidth
    assert link(1, 72, gb, 144, rate="line")[1] == gb.scale_out_bandwidth
    assert link(2, 1536, v5p, 6144)[1] == v5p.scale_up_bandwidth     # no busbw in the TPU preset: the line rate
    assert link(1, 64, gb, 72, domain_ranks=32, rate="line")[1] == gb.scale_out_bandwidth   # 32 per rack asked


def test_ep_64_verdicts_on_gb200_and_h100():
    gb, h = preset("gb200"), preset("h100-sxm")
    up_gb = (sympy.Rational(3400, 10**9), 900_000_000_000)
    out_gb = (sympy.Rational(14000, 10**9), 50_000_000_000)
    # EP 64 at stride 1 (etp = 1) on 256 GPUs
    assert link(1, 64, gb, 256, rate="line") == up_gb                     # 64 ranks per NVL72: inside
    assert domain_members(((64, 1),), 64, 256) == 64
    # consecutive 72: ranks 64..127 straddle the first boundary: the worst member is alone
    assert link(1, 64, gb, 256, domain_ranks=72, rate="line") == out_gb
    assert domain_members(((64, 1),), 72, 256) == 1
    # H100: 8 of the 64 members share each 8-GPU node, 8 nodes
    assert domain_members(((64, 1),), 8, 256) == 8
    assert link(1, 64, h, 256, rate="line")[1] == h.scale_out_bandwidth
    # EP 8 at stride t = 8 on H100: every member on its own node
    assert domain_members(((8, 8),), 8, 256) == 1
    # everything in one domain
    assert domain_members(((6, 1),), 8, 6) == 6


def test_symbolic_verdict_equals_numeric():
    # the planner's forms (symbolic degrees) and train (numbers) decide by the same conditions
    e, t, w = sympy.symbols("e t w", positive=True, integer=True)
    for R in (8, 64, 72):
        form = domain_members(((e, t),), R, w)
        for ev, tv, wv in itertools.product((1, 2, 4, 8, 16, 64), (1, 2, 4, 8), (8, 64, 256)):
            assert form.subs({e: ev, t: tv, w: wv}) == domain_members(((ev, tv),), R, wv), (R, ev, tv, wv)


# ---------------------------------------------------------------- EP all-to-all bytes and seconds

@pytest.fixture(scope="module")
def ds():
    return costgraph.load("deepseek_v3", config="deepseek-v3")


def test_ep_all_to_all_bytes_per_layer_equal_the_dispatcher(ds):
    # Megatron-LM @ d98e8a64, moe/token_dispatcher.py::MoEAlltoAllTokenDispatcher (dropless): each
    # of a rank's T = b·s tokens is copied once per chosen expert (k rows), dispatched and combined
    # with the same splits: T·k·h elements per layer per rank per direction; 1/ep of them stay on
    # the rank (uniform routing). DeepSeek-V3: k = 8, h = 7168, b = 1, s = 4096, bf16.
    vals = ds.values("deepseek-v3", b=1, s=4096)
    col = communication(ds.graph, Layout(p=4, e=64, gpus=256, m=16, attention="eager"))["ep"]
    per_layer = col.parts[:4]
    T, k, h = 4096, 8, 7168
    assert [int(x.elements.xreplace(vals)) for x in per_layer[:3]] == [T * k * h] * 3
    # (61 − 3 dense) MoE layers / 4 stages × m = 16: 232 forward calls, dispatch and combine, 464 backward
    assert [x.calls.xreplace(vals) for x in per_layer[:3]] == [232, 232, 464]
    assert sum(x.copies.xreplace(vals) for x in per_layer[:3]) == 3 * k
    # bytes sent by a rank per MoE layer per micro-batch: 4 all-to-alls × 63/64 × T·k·h × 2 bytes
    one = sum(x.bytes.xreplace(vals) for x in per_layer[:3]) / 232
    assert one == 4 * sympy.Rational(63, 64) * T * k * h * 2 == 1_849_688_064


@pytest.mark.parametrize("rate", ["nccl", "line"])
def test_hierarchical_all_to_all_and_route_nodes_exact(rate):
    h = preset("h200")
    # --link-rate nccl: NCCL's all-to-all at the busbw of hardware.toml (370.8 GB/s NVLink4, 48 GB/s a 400 Gb/s NIC;
    # nccl-tests#212: non-allreduce busbw 370 GB/s; nccl-tests#267: an all-to-all runs at one NIC, 48-49 GB/s)
    up, out = ((370_800_000_000, 48_000_000_000) if rate == "nccl" else (450_000_000_000, 50_000_000_000))
    assert (h.scale_up_busbw, h.scale_out_busbw, h.scale_up_bandwidth, h.scale_out_bandwidth) == \
        (370_800_000_000, 48_000_000_000, 450_000_000_000, 50_000_000_000)
    S = 10**9
    part = Transfer("x", "all-to-all", sympy.Integer(64), sympy.Integer(1), sympy.Integer(S // 2), sympy.Integer(2),
                    sympy.Integer(1), (), sympy.Integer(8))
    # one latency step of the NIC per call: NCCL runs every peer in one round across nodes (ep_time.latency_rounds)
    lat = sympy.Rational(h.latency_scale_out_ns, 10**9)
    # 8 of 64 on the node: 7/64 on NVLink, 56/64 on the NIC, at once
    want = lat + sympy.Max(S * sympy.Rational(7, 64) / up, S * sympy.Rational(56, 64) / out)
    assert alltoall_seconds(part, h, world=256, rate=rate) == want
    # DeepSeek-V3 §3.2: at most M = 4 of the G = 8 nodes: 4·7/8 copies of S/k leave the node
    inter = S * sympy.Rational(1, 8) * 4 * sympy.Rational(7, 8)
    intra = S * sympy.Rational(7, 8)
    want = lat + sympy.Max(intra / up, inter / out)
    assert alltoall_seconds(part, h, world=256, route_nodes=4, rate=rate) == want
    # inside one domain (GB200, 64 per NVL72): the ring convention, (n−1)/n·S on NVLink (NVLink5: 721.8 of 900 GB/s)
    gb = preset("gb200")
    gb_up = 721_800_000_000 if rate == "nccl" else 900_000_000_000
    assert alltoall_seconds(part, gb, world=256, rate=rate) == \
        8 * sympy.Rational(3400, 10**9) + S * sympy.Rational(63, 64) / gb_up   # ⌈63/8⌉ rounds of 8 p2p ops
    assert alltoall_seconds(part, gb, world=256, route_nodes=4, rate=rate) == \
        alltoall_seconds(part, gb, world=256, rate=rate)


def test_one_all_to_all_seconds_at_nccl_busbw():
    """One EP all-to-all of 1 GB sent per device (S = 10^9 B) on h100-sxm at the default --link-rate nccl:
    EP 8 in one node, 7/8 of S over NVLink at 370.8 GB/s (NCCL src/graph/topo.h SM90_NVLINK_BW 20.6 x 18; nccl-tests
    #212) plus one step of 3.4 us (NCCL tuning.cc hwLat NVLINK: its 7 peers in one round of 8 p2p operations,
    enqueue.cc); EP 16 over two nodes, 8/16 of S on the node's one NIC per device at 48 GB/s (NET_BW 12.0 per
    100 Gbit; nccl-tests#267: an all-to-all cannot aggregate NICs) beside 7/16 on NVLink, plus one step of 14.0 us
    (hwLat NET: paths.cc fits every peer in a single round across nodes)."""
    h = preset("h100-sxm")
    S = sympy.Integer(10**9)
    ep8 = Transfer("x", "all-to-all", sympy.Integer(8), sympy.Integer(1), S / 2, sympy.Integer(2), sympy.Integer(1), ())
    assert alltoall_seconds(ep8, h, world=8) == \
        sympy.Rational(3400, 10**9) + sympy.Rational(7, 8) * S / 370_800_000_000 == sympy.Rational(10953259, 4635000000)   # 2.363 ms
    assert alltoall_seconds(ep8, h, world=8, rate="line") == \
        sympy.Rational(3400, 10**9) + sympy.Rational(7, 8) * S / 450_000_000_000
    ep16 = Transfer("x", "all-to-all", sympy.Integer(16), sympy.Integer(1), S / 2, sympy.Integer(2), sympy.Integer(1), ())
    assert alltoall_seconds(ep16, h, world=16) == \
        sympy.Rational(14000, 10**9) + sympy.Rational(8, 16) * S / 48_000_000_000 == sympy.Rational(7823, 750000)   # 10.43 ms


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_all_to_all_across_nodes_at_the_network_rate_sjeaugey_gives(nodes):
    """An all-to-all over N nodes of 8 H100s, every GPU at its own NIC: "the portion that's going through the
    network will determine the global time [...] On 2 nodes, 50% of the traffic is inter-node so you should see
    BusBW = 2x network bandwidth per GPU [...] general formula is N/(N-1)x the bandwidth per GPU" (S. Jeaugey,
    NVIDIA/nccl-tests#130). His figure counts what a GPU sends, S per call, over the time (nccl-tests' algbw;
    ×(n−1)/n for the busbw column): S / t = N/(N−1) · 48 GB/s, less the latency steps."""
    h = preset("h100-sxm")
    n = 8 * nodes
    S = sympy.Integer(10**9)
    part = Transfer("x", "all-to-all", sympy.Integer(n), sympy.Integer(1), S / 2, sympy.Integer(2), sympy.Integer(1), ())
    wire = alltoall_seconds(part, h, world=n) - sympy.Rational(h.latency_scale_out_ns, 10**9)
    assert S / wire == sympy.Rational(nodes, nodes - 1) * 48_000_000_000


def test_deepep_dispatcher_at_deepeps_measured_bandwidths():
    """--ep-dispatcher deepep (Megatron's flex dispatcher, backend deepep): DeepEP's measured bottleneck bandwidths
    on H800 (hardware.toml h800, deepseek-ai/DeepEP README @ ebfe47e: 153 GB/s NVLink at EP 8, the lower of dispatch
    153 and combine 158; 43 GB/s RDMA per 400 Gb/s NIC at EP 16); a preset without them at NCCL's busbw, said so;
    --link-rate line keeps the line rates."""
    from costgraph.hardware import dispatch_text
    from costgraph.parallel.ep_time import dispatch_bandwidths

    h8, h1 = preset("h800"), preset("h100-sxm")
    S = sympy.Integer(10**9)
    ep8 = Transfer("x", "all-to-all", sympy.Integer(8), sympy.Integer(1), S / 2, sympy.Integer(2), sympy.Integer(1), ())
    ep16 = Transfer("x", "all-to-all", sympy.Integer(16), sympy.Integer(1), S / 2, sympy.Integer(2), sympy.Integer(1), ())
    assert dispatch_bandwidths(h8, "nccl", "deepep") == (153_000_000_000, 43_000_000_000)
    assert dispatch_bandwidths(h8, "nccl", "alltoall") == (164_800_000_000, 48_000_000_000)   # NCCL: 20.6 x 8 links
    assert dispatch_bandwidths(h8, "line", "deepep") == (200_000_000_000, 50_000_000_000)
    assert alltoall_seconds(ep8, h8, world=8, dispatcher="deepep") == \
        sympy.Rational(3400, 10**9) + sympy.Rational(7, 8) * S / 153_000_000_000   # 5.722 ms
    # EP 16 on two nodes: 8/16 of S on the NIC at 43 GB/s beside 7/16 on NVLink at 153 GB/s: the NIC is slower
    assert alltoall_seconds(ep16, h8, world=16, dispatcher="deepep") == \
        sympy.Rational(14000, 10**9) + sympy.Rational(1, 2) * S / 43_000_000_000   # 11.64 ms
    assert alltoall_seconds(ep16, h1, world=16, dispatcher="deepep") == alltoall_seconds(ep16, h1, world=16)
    assert dispatch_text(h8, "deepep") == ("EP dispatch (--ep-dispatcher deepep): scale-up: DeepEP's measured 153 "
                                           "GB/s; scale-out per NIC: DeepEP's measured 43 GB/s")
    assert "scale-up: no DeepEP measurement for h100-sxm in hardware.toml, NCCL's figure above assumed" in \
        dispatch_text(h1, "deepep")
    assert dispatch_text(h1, "alltoall") == ("EP dispatch (--ep-dispatcher alltoall, default): NCCL's all-to-all at "
                                             "the links above, one NIC per device")
    # a preset without nccl-tests' busbw times DeepEP at the line rate, and says so (trial 9: mi300x's said NCCL's)
    assert dispatch_text(preset("mi300x"), "deepep") == (
        "EP dispatch (--ep-dispatcher deepep): scale-up: no DeepEP measurement for mi300x in hardware.toml, the line "
        "rate above assumed (no busbw); scale-out per NIC: no DeepEP measurement for mi300x in hardware.toml, the "
        "line rate above assumed (no busbw)")


def test_deepep_dispatcher_through_the_layout(ds):
    # the layout's --ep-dispatcher reaches the EP collective's seconds (communication.comm_time): DeepSeek-V3's EP 8
    # on one H800 node at DeepEP's 153 GB/s, NCCL's 164.8 GB/s by default
    vals = ds.values("deepseek-v3", b=1, s=4096)
    h8 = preset("h800")
    L = Layout(p=4, e=8, gpus=32, m=16, attention="eager")
    col = communication(ds.graph, L)
    calls, sent = col["ep"].calls.xreplace(vals), col["ep"].bytes.xreplace(vals)
    for dispatcher, bw in (("alltoall", 164_800_000_000), ("deepep", 153_000_000_000)):
        at = Layout(p=4, e=8, gpus=32, m=16, attention="eager", ep_dispatcher=dispatcher)
        assert comm_time(col, h8, at)["ep"].xreplace(vals) == calls * sympy.Rational(3400, 10**9) + sent / bw


# ---------------------------------------------------------------- overlap

def test_ep_overlap_exposure_exact():
    # dispatch 3 s and combine 3 s forward, 4 s of their gradients backward; compute 1 s forward, 3 s backward
    a2a = (3, 3, 4)
    assert ep_exposed(*a2a, 1, 3, Layout(p=4, m=8, d=1).filled()) == 10                    # none
    assert ep_exposed(*a2a, 1, 3, Layout(p=4, m=8, d=1, schedule="dualpipe", ep_overlap="dualpipe").filled()) == 6
    assert ep_exposed(*a2a, 8, 12, Layout(p=2, schedule="dualpipe", ep_overlap="dualpipe", d=1).filled()) == 0
    # Megatron, no pipeline: one warm-up forward alone, then 7 of 8 paired node by node, all of the compute on
    # the attention side (pre_dispatch): 10/8 + 7/8 · (max(0, 2 − 1) + max(0, 5 − 0) + max(0, 3 − 3))
    # (tests/training/test_ep_overlap_megatron.py: the schedule simulated chunk by chunk)
    assert ep_exposed(*a2a, 1, 3, Layout(m=8, d=1, ep_overlap="megatron").filled()) == sympy.Rational(52, 8)
    # interleaved p = 4, v = 2, m = 8: w = 2·3 + 1·4 + 1 = 11 of 16 chunks (Megatron schedules.py,
    # one extra warm-up forward with overlap_moe_expert_parallel_comm)
    L = Layout(p=4, v=2, m=8, d=1, schedule="interleaved", ep_overlap="megatron").filled()
    assert ep_exposed(*a2a, 1, 3, L) == sympy.Rational(110 + 5 * 6, 16)
    with pytest.raises(CostgraphValueError, match="interleaved"):
        ep_exposed(*a2a, 1, 3, Layout(p=4, m=8, d=1, ep_overlap="megatron").filled())
    with pytest.raises(CostgraphValueError, match="recomputation"):
        ep_exposed(*a2a, 1, 3, Layout(m=8, d=1, ep_overlap="megatron", recompute="full").filled())


# ---------------------------------------------------------------- DeepSeek-V3 on 256 GB200, EP 64

def test_deepseek_v3_gb200_ep_64_on_nvlink_and_overlapped(ds):
    from costgraph.training.steptime import step_time

    vals = ds.values("deepseek-v3", b=1, s=4096)
    gb = preset("gb200")
    L = Layout(p=4, e=64, gpus=256, m=16, attention="eager")
    # the group's link at NCCL's busbw (hardware.toml gb200 scale_up_busbw: NCCL src/graph/topo.h SM100_NVLINK_BW
    # 40.1 GB/s x 18 links); the all-to-all itself too under --link-rate nccl (parallel.ep_time: NCCL's all-to-all
    # busbw, nccl-tests#212), the line rate under --link-rate line
    assert placement(ds.graph, L).link("ep", gb) == (sympy.Rational(3400, 10**9), 721_800_000_000)
    col = communication(ds.graph, L)
    ep = comm_time(col, gb, L)["ep"].xreplace(vals)
    # 429,127,630,848 bytes at 721.8 GB/s, ⌈63/8⌉ = 8 NVLink latency steps per call (8 p2p operations a round)
    assert col["ep"].bytes.xreplace(vals) == 429_127_630_848
    calls = col["ep"].calls.xreplace(vals)
    assert ep == calls * 8 * sympy.Rational(3400, 10**9) + sympy.Rational(429_127_630_848, 721_800_000_000)
    line = Layout(p=4, e=64, gpus=256, m=16, attention="eager", link_rate="line")
    assert comm_time(col, gb, line)["ep"].xreplace(vals) == \
        calls * 8 * sympy.Rational(3400, 10**9) + sympy.Rational(429_127_630_848, 900_000_000_000)
    # the NIC only when the domain's 72 ranks are filled consecutively: one NIC per device at 48 of its 50 GB/s
    L72 = Layout(p=4, e=64, gpus=256, m=16, attention="eager", domain_ranks=72)
    assert comm_time(communication(ds.graph, L72), gb, L72)["ep"].xreplace(vals) == \
        calls * sympy.Rational(14000, 10**9) + sympy.Rational(429_127_630_848, 48_000_000_000)
    # (DualPipe's overlap only under its schedule: ep_time.check_overlap)
    st = step_time(ds.graph, Layout(p=4, e=64, gpus=256, m=16, attention="eager", schedule="dualpipe",
                                    ep_overlap="dualpipe"), gb)
    assert st["by_kind"]["ep"].xreplace(vals) == ep
    # DualPipe: the all-to-all exposed beyond the stage's compute only (ep_time.ep_exposed); its PP sends hidden
    # beside the step's compute as well (rule dualpipe), the tied table's all-reduce exposed whole
    # (costgraph.training.overlap)
    exposed = st["overlap"].exposed()
    assert exposed["ep"].xreplace(vals) == max(0, ep - st["compute"].xreplace(vals))
    assert st["overlap"].kinds["pp"].rule == "dualpipe"
    assert all(exposed[k] == st["by_kind"][k] for k in ("tied_embedding",) if k in exposed)
    assert st["communication_exposed"] == sum(exposed.values())


def test_plan_row_equals_train_deepseek_v3_256_gb200_ep_64(ds):
    # issue 16 item 13: the planner's EP placement (symbolic degrees, compiled) and train's (numbers)
    # are one function (costgraph.parallel.ranks); before, plan said 5.26 s and train 18.60 s for
    # tp 1 × pp 4 × dp 64, EP 64 (the planner's span ≤ 72, train's 72 mod 64 = 0). The screen's EP
    # seconds (the planner's forms: step_time at symbolic degrees, evaluated in float64) equal
    # train's exact seconds to 1e-12; the rows plan shows are train's exactly
    # (tests/training/test_plan_equals_train.py). Checked at p = 1: an even 4-stage split of DeepSeek-V3's 61
    # layers, which that case used, is refused by train as by Megatron (issue 27 item 1).
    from costgraph.numbers.evaluator import vectorized
    from costgraph.training.plan_forms import C, D, EP, M, P, T
    from costgraph.training.steptime import step_time

    gb = preset("gb200")
    vals = ds.values("deepseek-v3", b=1, s=4096)
    for zero, recompute in ((3, "selective"), (0, "full")):
        sym = Layout(t=T, p=P, c=C, e=EP, d=D, m=M, zero=zero, recompute=recompute, attention="eager")
        form = step_time(ds.graph, Layout(**{**sym.__dict__, "p": 1}), gb, with_total=False)["by_kind"]["ep"]
        screened = vectorized([form.xreplace(vals)], [T, C, EP, D, M])(1, 1, 64, 256, 4)[0]
        L = Layout(e=64, gpus=256, m=4, zero=zero, recompute=recompute, attention="eager")
        train = step_time(ds.graph, L, gb)["by_kind"]["ep"].xreplace(vals)
        assert float(screened) == pytest.approx(float(train), rel=1e-12), (zero, recompute)
        assert train > 0
