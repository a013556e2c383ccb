"""Seconds of the expert-parallel all-to-all: hierarchical links, device-limited
routing, and its overlap with computation.

All-to-all over scale-up domains (:func:`alltoall_seconds`)
    A device's send buffer ``S`` (one call) goes ``S/n`` to each of the
    ``n`` members (its own share stays: the **uniform-routing** convention,
    a token's copy lands on each EP rank with probability ``1/n``). Of the
    ``n`` members, ``n_d`` share its scale-up domain
    (:func:`costgraph.parallel.ranks.domain_members`), so ``S·(n_d − 1)/n``
    goes over the scale-up link and ``S·(n − n_d)/n`` leaves the domain on
    the NIC; the two run at once (NCCL posts every peer's send together):
    ``max(intra/β_up, inter/β_out)``, plus one latency step at the NIC's
    latency when the group leaves a domain (below). Inside one domain this is
    the ring convention's ``(n−1)/n·S/β_up``; with every member in its own
    domain ``(n−1)/n·S/β_out``.
Latency (:func:`latency_rounds`)
    Not ``n − 1`` ring steps: NCCL runs an all-to-all's ``n − 1`` sends and
    receives concurrently, each channel up to 8 p2p operations at once
    (NCCL @ 5067397c ``src/enqueue.cc``, ``NCCL_MAX_DEV_WORK_P2P_PER_BATCH``
    in ``src/include/device.h``), and across scale-up domains it cuts the
    channels per peer "to fit all the peers within a single round"
    (``src/graph/paths.cc::ncclTopoComputeP2pChannels``): one step of the
    NIC's latency per call when the group leaves a domain; inside one domain
    at most ``⌈(n − 1)/8⌉`` steps of the scale-up latency (every channel on
    every peer: 8 peers a round), one for EP ≤ 9. NCCL's base latency
    (``tuning.cc`` baseLat) is not counted, as for the rings.
Link bandwidths (``--link-rate``, :func:`costgraph.parallel.ranks.link_bandwidths`)
    ``nccl`` (default): NCCL's all-to-all (Megatron's ``alltoall`` token
    dispatcher, ``MoEAlltoAllTokenDispatcher``) at the same bus bandwidths
    as the rings, the presets' ``scale_up_busbw`` / ``scale_out_busbw``:
    nccl-tests count an all-to-all's busbw as ``algbw·(n−1)/n``
    (NVIDIA/nccl-tests ``doc/PERFORMANCE.md``), the time above at ``β``;
    "NCCL can get an effective NVLink bandwidth of 370GB/s, which you can
    observe as BusBw when running non-allreduce operations" (S. Jeaugey,
    NVIDIA/nccl-tests#212, 8 × H100); across nodes "Alltoall cannot
    aggregate the bandwidth of multiple NICs, so the performance you should
    see is the performance of a single NIC" (S. Jeaugey, NVIDIA/nccl-tests#267,
    H100 nodes with 8 × 400 Gb/s CX-7) and "CX-7 NICs at NDR rate (400Gbps)
    should achieve up to 48-49GB/s per NIC" (AddyLaddy, NVIDIA, same
    thread): one NIC per device at its busbw. A preset without a busbw keeps
    its line rate (the report says so). ``line``: the line rates.
Dispatcher (``--ep-dispatcher``, :func:`dispatch_bandwidths`)
    ``alltoall`` (default): NCCL's all-to-all as above. ``deepep``: DeepEP's
    dispatch and combine kernels (Megatron's ``flex`` dispatcher, backend
    ``deepep``) at what DeepEP measured on the preset, ``deepep_scale_up_bw``
    and ``deepep_scale_out_bw`` (hardware.toml: on H800, 153 GB/s over
    NVLink at EP 8 and 43 GB/s over RDMA per 400 Gb/s NIC at EP 16,
    deepseek-ai/DeepEP README @ ebfe47e), each link without one at NCCL's
    figure (the report says so); under ``--link-rate line`` the line rates.
    DeepEP's normal kernels send a token once over RDMA to each domain its
    experts are on and forward it there over NVLink (README "Normal kernels
    with NVLink and RDMA forwarding"), whatever the routing: the bytes that
    leave the domain are ``S/k · D`` with ``D`` the domains a token reaches
    counted as DeepEP counts them for its measured bandwidths, its own
    domain included (:func:`deepep_domains`; none inside one domain: the
    intranode kernels), and every copy but those
    landing on the receiving rank moves once over NVLink,
    ``S·(n_d − 1)/n_d`` (as for device-limited routing below).
Device-limited routing (``route_nodes = M``; DeepSeek-V3 report §3.2)
    Each token's ``k`` copies go to experts on at most ``M`` domains (nodes
    in the report: 8-GPU NVLink domains; Megatron ``moe_utils.py::group_limited_topk``
    with ``moe_router_num_groups`` / ``moe_router_group_topk``). The
    dispatch sends a token once over the NIC to each chosen remote domain
    and forwards it there over the scale-up link (DeepSeek's IB-then-NVLink
    dispatch): with ``G = n/n_d`` domains in the group and
    ``M' = min(k, M, G)`` of them chosen uniformly, ``M'·(G − 1)/G`` copies
    of ``S/k`` leave the domain per call; every copy but those landing on
    the receiving rank itself moves once on the scale-up link:
    ``S·(n_d − 1)/n_d``. Without it a copy goes to each expert's rank
    separately (Megatron's ``MoEAlltoAllTokenDispatcher``).
Overlap (:func:`ep_exposed`, :func:`megatron_hides`, ``ep_overlap``)
    ``none`` (default, as Megatron's ``overlap_moe_expert_parallel_comm =
    False``): all of it exposed. ``megatron``: Megatron's combined 1F1B
    (Megatron-LM @ d98e8a64 ``megatron/core/pipeline_parallel/combined_1f1b.py``:
    ``combined_1f1b_schedule_for_no_pipelining``, ``..._for_interleaved_pipelining``;
    ``schedules.py``) runs the forward of one micro-batch beside the backward
    of another, layer by layer (``models/common/model_chunk_schedule_plan.py``
    ``TransformerModelChunkSchedulePlan.run``: forward layer ``i`` with
    backward layer ``L − 1 − i``), and inside a layer pair node by node
    (``TransformerLayerSchedulePlan.run``; the nodes of
    ``models/gpt/fine_grained_callables.py``: ``pre_dispatch_computation`` =
    attention, pre-MLP norm, router and shared experts; ``moe_dispatch``;
    ``mlp`` = the routed experts; ``moe_combine``), the all-to-alls on the
    communication stream::

        comm_stream: combine_bwd       | dispatch_fwd->dispatch_bwd  | combine_fwd
        comp_stream: pre_dispatch_fwd  | mlp_bwd->mlp_bwd_dw->mlp_fwd| pre_dispatch_bwd

    Each of the three phases lasts the longer of its two streams, so per
    layer pair the exposed part is what each communication phase exceeds
    its paired compute by: ``max(0, combine_b − pre_f) + max(0, dispatch_f
    + dispatch_b − mlp_b − mlp_f) + max(0, combine_f − pre_b)`` (the middle
    phase's order inside — dispatch_bwd after mlp_bwd — is not charged: the
    source's own phase diagram). The chunks that have no partner run alone,
    their all-to-all exposed in full: the first forward and the last backward
    without a pipeline (``w = 1``); on the first stage of the interleaved
    schedule the ``w = 2(p − 1) + (v − 1)·p + 1`` warm-up forwards (one extra
    forward before the 1F1B phase) and as many cool-down backwards, at most
    ``m·v`` (:func:`warmup_chunks`). Of the ``N = m·v`` chunks, ``(N − w)/N``
    of each node's seconds are paired. The per-step sums stand for the sum
    over the layer pairs (exact when the paired layers are alike); the
    compute of each node is its share of the stage's forward (``pre_f``,
    ``mlp_f``) or backward (``pre_b``, ``mlp_b``) compute: the forward FLOPs
    of the layers' operators outside the routed experts (``pre``) and of the
    routed experts (``mlp``) over the model's
    (:func:`costgraph.training.overlap.ep_node_shares`); the embedding, the
    output layer and the loss are in neither (Megatron runs them outside the
    layer pairs). Megatron needs the interleaved schedule when ``p > 1`` and
    no full recomputation. ``dualpipe``: DeepSeek's DualPipe overlaps every
    forward and backward chunk pair (DeepSeek-V3 report §3.2.1: "both
    all-to-all and PP communication can be fully hidden"; its warm-up has
    no 1F1B partner either, which the report counts in the bubble, Table 2):
    exposed ``= max(0, a2a − compute)``, the overlappable compute all of the
    stage's.
"""

from __future__ import annotations

import sympy

from ..errors import CostgraphValueError
from ..engine.symbols import as_expr
from ..choices import EP_DISPATCHER, LINK_RATE
from .ranks import domain_members, intra_domain, link_bandwidths, no_zero_link, one_domain, ranks_per_domain

Expr = sympy.Expr
ONE = sympy.Integer(1)
ZERO = sympy.Integer(0)
#: p2p operations one NCCL channel runs at once (NCCL @ 5067397c src/include/device.h NCCL_MAX_DEV_WORK_P2P_PER_BATCH)
P2P_PER_ROUND = 8


def dispatch_bandwidths(hardware, rate: str = LINK_RATE.default, dispatcher: str = EP_DISPATCHER.default) -> tuple:
    """``(scale-up, scale-out)`` B/s per direction per device the EP all-to-all runs at (module docstring):
    :func:`costgraph.parallel.ranks.link_bandwidths` at ``rate``, with ``dispatcher`` ``deepep`` (and ``rate``
    ``nccl``) DeepEP's measured figure of each link the preset gives (``deepep_scale_up_bw``,
    ``deepep_scale_out_bw``)."""
    base = link_bandwidths(hardware, LINK_RATE.check(rate))
    if EP_DISPATCHER.check(dispatcher) != "deepep" or rate == "line":
        return base
    deep = (getattr(hardware, "deepep_scale_up_bw", None), getattr(hardware, "deepep_scale_out_bw", None))
    return tuple(b if d is None or b == 0 else d for b, d in zip(base, deep))   # a link of 0: none there


def alltoall_seconds(part, hardware, *, world=None, domain_ranks=None, route_nodes=None,
                     rate: str = LINK_RATE.default, dispatcher: str = EP_DISPATCHER.default) -> Expr:
    """Seconds per step of an all-to-all :class:`~costgraph.parallel.collectives.Transfer`
    ``part`` on ``hardware`` (module docstring); ``world`` the ranks in all,
    ``domain_ranks`` the ranks per domain (default: the power-of-two fill),
    ``route_nodes`` the domains a token may reach (``part.copies`` its ``k``),
    ``rate`` the ``--link-rate`` the links run at, ``dispatcher`` the ``--ep-dispatcher`` (module docstring)."""
    n = as_expr(part.group)
    fs = part.factors or ((n, as_expr(part.stride)),)
    R = ranks_per_domain(hardware, domain_ranks)
    limit = one_domain(hardware, domain_ranks)
    local = domain_members(fs, R, world, limit)
    S = part.size
    deepep = EP_DISPATCHER.check(dispatcher) == "deepep" and part.copies is not None
    if deepep:          # DeepEP's hierarchical dispatch: once per reached domain over RDMA (module docstring)
        G = n / local   # one domain (G = 1): DeepEP's intranode kernels, nothing over RDMA (min(1, G − 1) = 0)
        inter = S / part.copies * deepep_domains(part.copies, G, route_nodes) * sympy.Min(ONE, G - 1)
        intra = S * (local - 1) / local
    elif route_nodes is not None and part.copies is not None:
        G = n / local
        chosen = sympy.Min(as_expr(part.copies), sympy.Integer(route_nodes), G)
        inter = S / part.copies * chosen * (G - 1) / G
        intra = S * (local - 1) / local
    else:
        inter = S * (n - local) / n
        intra = S * (local - 1) / n
    up_b, out_b = (as_expr(b) for b in dispatch_bandwidths(hardware, rate, dispatcher))   # may be symbols
    if up_b == 0:       # no scale-up link (domain 1): nothing stays inside a domain (intra is 0)
        up_b = out_b
    if inter != 0:      # traffic between nodes needs a scale-out bandwidth (issue 30)
        no_zero_link((ZERO, out_b), hardware, n)
    if inter == 0:
        wire = intra / up_b
    elif intra == 0:
        wire = inter / out_b
    else:
        wire = sympy.Max(intra / up_b, inter / out_b)
    return part.calls * (alltoall_latency(hardware, n, fs, world=world, domain_ranks=domain_ranks) + wire)


def deepep_domains(k, G, route_nodes=None) -> Expr:
    """Domains ``D`` one token's ``k`` copies reach under DeepEP's normal (internode) kernels, the
    token's own domain included, as DeepEP counts the RDMA bytes its bandwidths are measured on
    (deepseek-ai/DeepEP @ 499ec88b ``tests/test_internode.py``: ``rdma_idx = topk_idx // (num_experts //
    num_nodes)``, deduplicated, ``num_rdma_token_sent = rdma_idx.ne(-1).sum()``,
    ``dispatch_bf16_rdma_send_bytes = num_rdma_token_sent * hidden * 2``): ``min(k, M, G)`` with
    device-limited routing to ``M = route_nodes`` domains (DeepEP's benchmark routes to its top
    groups so), else, each copy on one of the ``G`` domains with probability ``1/G`` independently
    (the module's uniform-routing convention), the expected count ``G·(1 − (1 − 1/G)^k)``."""
    k, G = as_expr(k), as_expr(G)
    if route_nodes is not None:
        return sympy.Min(k, sympy.Integer(route_nodes), G)
    return G * (1 - (1 - 1 / G) ** k)


def alltoall_latency(hardware, n, factors=None, *, world=None, domain_ranks=None) -> Expr:
    """Latency seconds of one NCCL all-to-all call over ``n`` ranks on ``hardware`` (module docstring,
    "Latency"): :func:`latency_rounds` steps of the scale-up latency (``latency_scale_up_ns``) when the
    group — ``factors`` ``((size, stride), …)``, default ``n`` consecutive ranks — stays inside one
    scale-up domain (:func:`costgraph.parallel.ranks.intra_domain`; ``world`` the ranks in all,
    ``domain_ranks`` the ranks per domain), else one step of the NIC's (``latency_scale_out_ns``); a
    ``Piecewise`` on that condition with symbolic degrees. Training's EP all-to-all
    (:func:`alltoall_seconds`) and serving's (:mod:`costgraph.inference.parallel`) both charge this."""
    n = as_expr(n)
    fs = factors or ((n, ONE),)
    cond = intra_domain(fs, ranks_per_domain(hardware, domain_ranks), world, one_domain(hardware, domain_ranks))
    up_a = as_expr(hardware.latency_scale_up_ns) / 10**9 * latency_rounds(n, True)
    out_a = as_expr(hardware.latency_scale_out_ns) / 10**9 * latency_rounds(n, False)
    return up_a if cond == sympy.true else out_a if cond == sympy.false else \
        sympy.Piecewise((up_a, cond), (out_a, True))


def latency_rounds(n, in_one_domain: bool) -> Expr:
    """Latency steps of one NCCL all-to-all over ``n`` ranks (module docstring): the rounds NCCL runs
    its ``n − 1`` peers' sends and receives in — one across scale-up domains (``in_one_domain`` False),
    at most ``⌈(n − 1)/8⌉`` inside one (NCCL @ 5067397c ``src/graph/paths.cc``, ``src/enqueue.cc``)."""
    if not in_one_domain:
        return ONE
    return sympy.ceiling((as_expr(n) - 1) / P2P_PER_ROUND)


def warmup_chunks(layout) -> Expr:
    """``w``: the first stage's chunks before Megatron's combined 1F1B phase (module docstring)."""
    p, v, m = (as_expr(x) for x in (layout.p, layout.v, layout.m))
    if p == 1:
        return ONE
    return sympy.Min(m * v, 2 * (p - 1) + (v - 1) * p + 1)


def check_overlap(layout) -> None:
    """Refuse an EP overlap where its schedule cannot run it. ``megatron``: what Megatron's EP overlap
    refuses (``transformer_config.py``): ``p > 1`` outside the interleaved schedule, full recomputation.
    ``dualpipe``: DualPipe's overlap pairs the forward chunk of one micro-batch with the backward
    chunk of another on the two pipeline directions (deepseek-ai/DualPipe @ bb214e82 ``dualpipe/dualpipe.py``:
    ``DualPipe.step``'s main step ``nF0B1F1B0`` calls ``_forward_backward_compute_chunk``, which runs
    the modules' ``overlapped_forward_backward``; ``step`` asserts ``num_ranks % 2 == 0``; DeepSeek-V3
    report §3.2.1), so it needs ``--schedule dualpipe``, whose ``p > 1`` (a symbolic ``p`` is let
    through; its value is checked when given).

    Raises
    ------
    CostgraphValueError
        ``megatron`` as above; ``dualpipe`` with another schedule or ``p = 1``; each naming ``--ep-overlap``.
    """
    if layout.ep_overlap == "dualpipe":
        if layout.schedule != "dualpipe":
            raise CostgraphValueError(f"--ep-overlap dualpipe needs --schedule dualpipe, not {layout.schedule} "
                                      "(DualPipe overlaps a forward and a backward chunk only inside its own "
                                      "schedule)", hint="--schedule dualpipe --pp P (P > 1), or --ep-overlap "
                                      "megatron / none")
        if as_expr(layout.p) == 1:
            raise CostgraphValueError("--ep-overlap dualpipe needs pipeline parallelism (--pp > 1): DualPipe "
                                      "pairs chunks of the two pipeline directions",
                                      hint="--pp 2 or more with --schedule dualpipe, or --ep-overlap megatron / none")
        return
    if layout.ep_overlap != "megatron":
        return
    if as_expr(layout.p) != 1 and layout.schedule != "interleaved":
        raise CostgraphValueError("--ep-overlap megatron needs the interleaved schedule when pp > 1 (Megatron's "
                                  "combined 1F1B pairs the chunks of interleaving)",
                                  hint="--schedule interleaved --virtual-stages V, or --ep-overlap dualpipe")
    if layout.recompute == "full":
        raise CostgraphValueError("--ep-overlap megatron does not run with full recomputation",
                                  hint="--recompute none or selective")


def megatron_hides(dispatch_f, combine_f, backward, pre_share, mlp_share, layout) -> tuple:
    """``(fixed, ((seconds, weight, phase), ...))`` of Megatron's combined 1F1B EP overlap (module
    docstring): ``dispatch_f``, ``combine_f`` the forward dispatch and combine seconds per step,
    ``backward`` their gradients' (half each: the combine's gradient is a dispatch and the dispatch's a
    combine, the same bytes); ``pre_share`` and ``mlp_share`` the shares of the compute the
    ``pre_dispatch_computation`` and ``mlp`` nodes run. ``fixed``: the unpaired chunks' all-to-all
    (``w/N`` of it); each hide ``H`` runs beside ``weight × `` the ``phase``'s (``forward``,
    ``backward`` or ``step``) compute: exposed ``max(0, H − weight · C)``.

    Raises
    ------
    CostgraphValueError
        ``p > 1`` outside the interleaved schedule, or full recomputation (:func:`check_overlap`).
    """
    check_overlap(layout)
    N = as_expr(layout.m) * as_expr(layout.v)
    w = warmup_chunks(layout)
    q = (N - w) / N
    half = as_expr(backward) / 2
    fixed = (as_expr(dispatch_f) + as_expr(combine_f) + as_expr(backward)) * w / N
    return fixed, ((q * half, q * pre_share, "forward"),                   # combine_bwd | pre_dispatch_fwd
                   (q * (dispatch_f + half), q * mlp_share, "step"),      # dispatch_fwd, dispatch_bwd | mlp_bwd, mlp_fwd
                   (q * combine_f, q * pre_share, "backward"))            # combine_fwd | pre_dispatch_bwd


def ep_exposed(dispatch_f, combine_f, backward, forward_compute, backward_compute, layout,
               pre_share=ONE, mlp_share=ZERO) -> Expr:
    """Exposed seconds of the EP all-to-all under ``layout.ep_overlap`` (module docstring):
    ``dispatch_f``, ``combine_f`` the forward dispatch and combine seconds per step, ``backward``
    their gradients', beside ``forward_compute`` and ``backward_compute`` seconds of the stage;
    ``pre_share``, ``mlp_share`` (``megatron``) the shares of that compute the attention side
    (``pre_dispatch_computation``) and the routed experts (``mlp``) run. The step time forms the
    same value as :class:`costgraph.training.overlap.KindOverlap` (:func:`megatron_hides`).

    Raises
    ------
    CostgraphValueError
        ``megatron`` with ``p > 1`` outside the interleaved schedule, or with
        full recomputation (Megatron ``transformer_config.py`` refuses both).
    """
    mode = layout.ep_overlap
    a2a = as_expr(dispatch_f) + as_expr(combine_f) + as_expr(backward)
    if mode == "none" or a2a == 0:
        return a2a
    if mode == "dualpipe":
        return sympy.Max(ZERO, a2a - forward_compute - backward_compute)
    fixed, hides = megatron_hides(dispatch_f, combine_f, backward, pre_share, mlp_share, layout)
    budget = {"forward": forward_compute, "backward": backward_compute,
              "step": forward_compute + backward_compute}
    return fixed + sympy.Add(*[sympy.Max(ZERO, h - wt * budget[ph]) for h, wt, ph in hides])
