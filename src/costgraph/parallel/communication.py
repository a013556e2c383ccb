"""Communication per device per training step, derived from the graph and the layout.

Where a layout splits a tensor that some operator needs whole, or holds a
replica of a weight whose gradients must agree, there is a collective. Which
ones, and how large, is read off the operator graph — the tensor-parallel
walk (:mod:`costgraph.parallel.tensor`), the pipeline stages
(:mod:`costgraph.parallel.pipeline`), the attention cores
(:func:`costgraph.engine.activations.attention_cores`), the routed-expert groups and
the weights — never typed per model.

One entry function, :func:`communication`, gives a
:class:`~costgraph.parallel.collectives.Collective` per *kind*, each kind
derived by its own function (DP and ZeRO: :mod:`costgraph.parallel.comm_data`; TP/SP:
:mod:`costgraph.parallel.comm_tensor`; PP, CP, EP: here) over the layout's shared
:class:`~costgraph.parallel.placement.Placement` (who holds which shard,
which stage, which group), as one ``_Step`` (:mod:`costgraph.parallel.comm_step`) reads them; :func:`comm_time` turns them into seconds on a
hardware preset.

Conventions
-----------
* **Per device per step.** A step is ``m`` micro-batches of the model's
  micro-batch ``b`` (``m`` defaults to ``p``, as
  :class:`~costgraph.parallel.layout.Layout` fills it),
  on one device of one pipeline stage (``stage``: ``"first"`` by default,
  ``"last"``, ``"middle"``, or an index when ``p`` is a number).
* **Bytes a device sends**, ring algorithms (Patarasuk & Yuan 2009; NCCL):
  with ``S`` the bytes of the whole buffer of one call and ``n`` devices in
  the group, all-reduce sends ``2(n−1)/n · S`` (a reduce-scatter and an
  all-gather), all-gather ``(n−1)/n · S`` (``S`` the gathered result),
  reduce-scatter ``(n−1)/n · S`` (``S`` the input), all-to-all
  ``(n−1)/n · S`` (``S`` the device's send buffer, its own ``1/n`` stays),
  send/recv ``S``. It receives as much (links are full duplex). The ZeRO
  paper (Rajbhandari et al. 2020 §7) drops the ``(n−1)/n``: its ``2Ψ`` is
  ``2Ψ(n−1)/n`` here. Each :class:`Transfer` keeps ``elements`` and
  ``dtype_bytes`` of its buffer, so volumes in elements are exact too.
* **Latency steps** per call: all-reduce ``2(n−1)``, all-gather,
  reduce-scatter and all-to-all ``n−1``, send/recv 1.

Kinds (present when the layout has that parallelism; a symbolic degree
keeps its kind, and the ``(n−1)/n`` factor makes it 0 at ``n = 1``):

``dp_grads`` (ZeRO 0)
    All-reduce of the gradients once per step (Megatron DDP, PyTorch DDP with
    ``no_sync`` over the micro-batches): the gradient bytes a device holds —
    the weights of its stage (``1/p`` of the layers' weights, the stage's
    embeddings or head, a tied table on both ends), split as TP splits them,
    at the policy's gradient bytes (``megatron``: fp32 main gradients, 4).
    Dense weights over the data-parallel × context-parallel group (``d·c``
    devices: CP ranks hold the same weights); routed experts over their own
    data-parallel group of ``d·c·t/(e·etp)`` (Megatron's expert-DP group).
``zero_reduce_scatter`` + ``zero_all_gather`` (ZeRO 1, 2; the distributed optimizer)
    Reduce-scatter of the gradients (gradient bytes) and all-gather of the
    updated parameters (the policy's weight bytes): ``2Ψ`` in all, as the
    all-reduce. ZeRO-1 reduces once per step; ZeRO-2 keeps only its
    gradient shard, so it reduce-scatters every micro-batch (``m`` times;
    DeepSpeed stage 2). The all-gather is once per step.
``fsdp`` (ZeRO 3)
    All-gather of the parameters in forward and again in backward, and a
    reduce-scatter of the gradients, every micro-batch: ``3Ψ`` at ``m = 1``
    (ZeRO §7). One call per unit (a layer; the weights outside the layers
    together), as :mod:`costgraph.training.states` counts units.
    HSDP (``layout.hsdp = g``): the above within groups of ``g``, plus an
    all-reduce of the ``1/g`` gradient shard across the ``d·c/g`` replicas.
``tp`` (per layer per micro-batch, from the graph's TP walk)
    A row-parallel linear's output and a vocabulary-parallel embedding's
    output are made whole: all-reduce forward (Shoeybi et al. 2019 §3, the
    ``g`` operator), with SP a reduce-scatter forward and an all-gather
    backward (Korthikanti et al. 2022 §4.2.2). A column-parallel linear's
    input gradient is summed: all-reduce backward (the ``f`` operator), with
    SP an all-gather of the input forward and a reduce-scatter of its
    gradient backward — one per distinct input tensor (Q, K and V
    projections of one input share one, as Megatron's fused QKV). The
    vocabulary-parallel cross-entropy all-reduces three fp32 values per
    token (max, target logit, sum of exponentials; Megatron
    ``tensor_parallel/cross_entropy.py``) when ``layout.loss``. With SP the
    gradients of the weights TP keeps whole but that see only ``s/t`` tokens
    (norms, a router, a row-parallel bias) are all-reduced over TP once per
    step. ``sp_backward_gather=True`` adds Megatron's extra all-gather of a
    column-parallel input in backward (it keeps the input split and gathers
    it again for the weight gradient; Korthikanti §4.2.2, overlapped with
    computation) — off by default, as the paper counts the volume.
    For GPT: 2 all-reduces of ``b·s·h`` forward and 2 backward per layer.
``pp``
    Send/recv of the activation a stage hands on (the carried tensor of the
    layers, ``b·s·h``; ``÷ t`` with SP, ``÷ c`` with CP) per micro-batch
    forward, and of its gradient backward: the first stage sends ``v``
    forward and ``v − 1`` backward per micro-batch, the last ``v − 1`` and
    ``v``, a middle one ``v`` and ``v`` (``v`` virtual stages).
``tied_embedding``
    With ``p > 1``, a table both the first and the last stage hold (a tied
    embedding and head) has its gradients all-reduced between the two
    (Megatron's embedding group), once per step.
``cp`` (per attention layer per micro-batch, from the graph's attention cores)
    K and V — QKᵀ's second input and the next product's second input, traced
    back through ``transpose``, ``repeat_kv`` and ``cache`` (so GQA's
    ``kv`` heads, after RoPE) — all-gathered forward over the ``c`` devices,
    dK and dV reduce-scattered backward (Megatron ``context_parallel.md``;
    its ring sends the same volume point to point). Per device its TP share
    of the heads. Megatron's ring also sends K and V again in backward,
    which this does not count. With ``cp_comm_type = "all_gather"``
    (:data:`costgraph.choices.CP_COMM_TYPE`) the backward gathers K and V again
    before it (TE @ d0067d0d context_parallel.py
    ``AttnFuncWithCPAndKVAllGather.backward``: ``gather_along_first_dim(k,
    ctx.cp_group)``, the forward's gathered copies are not saved) and
    reduce-scatters dK and dV after it.
``ep`` (per MoE layer per micro-batch, from the routed-expert groups)
    All-to-all dispatch and combine of the tokens routed to experts forward,
    and both again backward: ``k`` copies of each of the device's tokens
    (``b·s/c``, ``÷ t`` with SP) of the experts' input width, over ``e``
    devices, perfect balance and no dropped tokens (capacity factor 1):
    Megatron's ``MoEAlltoAllTokenDispatcher`` (dropless), ``T·k·h`` per layer
    per direction, ``1/e`` of it staying on the device (uniform routing).

Full recomputation (``layout.recompute == "full"``) runs each layer's
forward twice: the forward collectives inside the layers (TP, CP, EP) are
counted twice.

Not modelled: LoRA (frozen weights need no gradient reduction; refused),
Megatron's gradient buckets (one call per step and group is counted), the
routers' load-balancing statistics, GQA's K/V heads replicated when
``kv < t``, expert tensor parallelism's own dispatch (``etp = t``: the
experts' TP collectives are counted as dense ones, at the active copies),
MoE with TP but without SP (Megatron requires SP there), sliding windows
under CP (the whole K/V is counted).

Time (:func:`comm_time`)
------------------------
Latency–bandwidth per call: ``steps · α + bytes_sent / β``, ``α`` and ``β``
the link's latency and per-direction bandwidth per device
(:func:`costgraph.parallel.placement.link`). Placement follows
Megatron-core's rank order (``initialize_model_parallel``,
``order="tp-cp-ep-dp-pp"``): the dense grid is TP innermost (stride 1), then
CP (stride ``t``), then DP (stride ``t·c``; the DP × CP group: stride ``t``),
then PP (stride ``t·c·d``); the expert grid (its own ``RankGenerator``, no
CP) is expert TP (stride 1), EP (stride ``etp``), expert DP (stride
``etp·e``), PP. A group of ``n`` devices at stride ``σ`` spans ``n·σ``
consecutive ranks; it uses the scale-up link (NVLink) when every such group
stays inside one scale-up domain of ``R`` consecutive ranks — ``R`` a
multiple of ``n·σ``, or all the GPUs in one domain — and the scale-out link
otherwise: a ring (all-reduce, all-gather, reduce-scatter) at the NICs of
the group's ``r`` members on a domain, ``min(r·B_out, B_up)``, as NCCL spreads
a ring's channels over them (:func:`costgraph.parallel.ranks.ring_scale_out`),
send/recv at one NIC per device; with symbolic degrees a ``Piecewise`` on the
same conditions. The rank order (``layout.rank_order``), ``R`` (the power-of-two
fill of the preset's domain, or ``layout.domain_ranks``) and groups of several
factors are :mod:`costgraph.parallel.ranks`'s. The EP all-to-all splits its
bytes between the members sharing the device's domain (scale-up) and the
others (scale-out), both at once, and device-limited routing
(``layout.route_nodes``) bounds what leaves the domain
(:mod:`costgraph.parallel.ep_time`). Pipeline
send/recv and the tied-embedding all-reduce are placed as the group of all
``p`` stages (the slowest boundary sets the time). Overlap with computation
is left to the step-time model.
"""

from __future__ import annotations

import sympy

from ..engine.activations import attention_cores
from ..choices import EP_DISPATCHER, LINK_RATE
from ..errors import CostgraphValueError
from ..engine.graph import CostGraph
from ..engine.precision import precision as get_precision
from ..engine.symbols import as_expr
from ..ops.registry import has_role
from .collectives import OPS, Collective, Transfer, latency_steps, ring_factor
from .comm_data import dp_collectives
from .comm_step import ONE, ZERO, Expr, _Step, _trivial
from .comm_tensor import tp_collectives
from .ep_time import alltoall_seconds
from .placement import Placement, link, placement as place

#: the operations NCCL runs as rings, whose channels spread over the NICs of the group's members on a
#: domain (costgraph.parallel.ranks.ring_scale_out); send/recv and the all-to-all keep one NIC per device
RING_OPS = ("all-reduce", "all-gather", "reduce-scatter")

KINDS = ("dp_grads", "zero_reduce_scatter", "zero_all_gather", "fsdp", "tp", "pp", "tied_embedding", "cp", "ep")

__all__ = ["KINDS", "OPS", "Collective", "Transfer", "comm_time", "communication", "latency_steps", "link",
           "ring_factor"]


def communication(cg: CostGraph, layout, *, stage="first", sp_backward_gather: bool = False,
                  placement: Placement | None = None) -> dict[str, Collective]:
    """Communication per device per training step of ``cg`` under ``layout``
    (a :class:`costgraph.parallel.layout.Layout`; see the module docstring).
    ``placement``: the layout's :class:`~costgraph.parallel.placement.Placement`
    if the caller has it (by default the one
    :func:`costgraph.parallel.placement.placement` keeps).

    Returns ``{kind: Collective}`` for the kinds of :data:`KINDS` that the
    layout has, in that order.

    Raises
    ------
    CostgraphValueError
        Bad layout settings (:meth:`Layout.filled`), LoRA (not modelled), or a
        stage that is not ``first``, ``last``, ``middle`` or an index of a
        numeric ``p``.
    """
    if not isinstance(cg, CostGraph):
        cg = getattr(cg, "graph", cg)   # a costgraph.Model
    L = layout.filled()
    if L.lora_rank is not None:
        raise CostgraphValueError("communication with LoRA adapters is not modelled",
                                  hint="leave out --lora for communication figures")
    from ..training.data import policy as get_policy

    pol = get_policy(L.policy)
    pl = placement if placement is not None else place(cg, L)
    x = _Step(cg, L, pl, pl.stage(stage), pol.gradients, pol.weights, get_precision(L.precision), sp_backward_gather)
    out: dict[str, Collective] = {}
    for kind in (dp_collectives, tp_collectives, pp_collectives, cp_collectives, ep_collectives):
        out.update(kind(x))
    return {kind: out[kind] for kind in KINDS if kind in out}


# ---------------------------------------------------------------- pipeline parallelism

def pp_collectives(x: _Step) -> dict[str, Collective]:
    """``pp`` (the activation a stage hands on and its gradient) and
    ``tied_embedding`` (a table on both the first and the last stage)."""
    if _trivial(x.L.p):
        return {}
    cg, pl, out = x.cg, x.pl, {}
    carried = _boundary(cg)
    if carried:
        el = sympy.Max(*[x.elements(xs) for xs in carried]) if len(carried) > 1 else x.elements(carried[0])
        eb = x.act_bytes(carried[0][0])
        fwd, bwd = x.stage.sends(pl.degree("v"))
        m, g = pl.degree("m"), pl.groups["pp"]
        parts = [Transfer("activation to the next stage (forward)", "send/recv", g.size, g.stride, el, eb, fwd * m),
                 Transfer("its gradient to the previous stage (backward)", "send/recv", g.size, g.stride, el, eb,
                          bwd * m)]
        out["pp"] = Collective("pp", tuple(t for t in parts if t.calls != 0))
    tied = x.stage.tied_weights()
    if tied:
        el = sympy.Add(*[cg.weights[w].count * cg.weights[w].numel / pl.weight_divisor(w) for w in tied])
        g = pl.groups["tied_embedding"]
        out["tied_embedding"] = Collective("tied_embedding", (Transfer(
            "gradients of the table held by the first and the last stage (step)", "all-reduce", g.size, g.stride,
            el, x.grad_bytes, ONE),))
    return out


def _boundary(cg: CostGraph) -> list[list[str]]:
    """The tensors a stage hands to the next: each top-level group's carried inputs."""
    out = []
    for path, g in cg.groups.items():
        if "/" in path:
            continue
        xs = [f"{path}/{name}@in" for name in g.carried if f"{path}/{name}@in" in cg.tensors]
        if xs:
            out.append(xs)
    return out


# ---------------------------------------------------------------- context parallelism

def cp_collectives(x: _Step) -> dict[str, Collective]:
    """``cp``: K and V all-gathered forward, dK and dV reduce-scattered
    backward, per attention core on the stage."""
    if _trivial(x.L.c):
        return {}
    cg, pl, parts = x.cg, x.pl, []
    g = pl.groups["cp"]
    for first, core in attention_cores(cg):
        f = x.stage.node_factor(first)
        if f == 0:
            continue
        k, val = _kv(cg, first, core)
        el = sympy.Add(*[cg.tensors[t].numel / pl.tensor_divisor(t) for t in (k, val)])
        eb = x.act_bytes(k)
        calls = cg.nodes[first]["active"] * f * pl.degree("m")
        parts.append(Transfer(f"{first}: K and V ({k}, {val}) (forward)", "all-gather", g.size, g.stride, el, eb,
                              calls * (1 + x.rerun(first, "all-gather", "cp"))))
        if x.L.cp_comm_type == "all_gather":   # gathered again in the backward (module docstring)
            parts.append(Transfer(f"{first}: K and V again (backward)", "all-gather", g.size, g.stride, el, eb, calls))
        parts.append(Transfer(f"{first}: dK and dV (backward)", "reduce-scatter", g.size, g.stride, el, eb, calls))
    return {"cp": Collective("cp", tuple(parts))} if parts else {}


def _kv(cg: CostGraph, first: str, core: list[str]) -> tuple[str, str]:
    """K (QKᵀ's second input) and V (the next product's second input), each
    traced back through views to the tensor the attention receives."""
    def back(tid):
        while True:
            prod = cg.tensors[tid].producer
            if prod in cg.nodes and has_role(cg.nodes[prod]["kind"], "kv_passthrough") and cg.nodes[prod]["inputs"]:
                tid = cg.nodes[prod]["inputs"][0]
            else:
                return tid

    k = back(cg.nodes[first]["inputs"][1])
    outs = {o for n in core for o in cg.nodes[n]["outputs"]}
    nxt = next(q for q, dd in cg.ops() if dd["kind"] == "matmul" and q != first and dd["inputs"][0] in outs)
    return k, back(cg.nodes[nxt]["inputs"][1])


# ---------------------------------------------------------------- expert parallelism

def ep_collectives(x: _Step) -> dict[str, Collective]:
    """``ep``: all-to-all dispatch and combine of the routed tokens forward,
    and both again backward, per MoE group on the stage."""
    if _trivial(x.L.e):
        return {}
    pl, parts = x.pl, []
    g = pl.groups["ep"]
    for gpath, grp in pl.experts.items():
        f = x.stage.node_factor(gpath + "/")
        if f == 0 or not grp.inputs:
            continue
        k = grp.active
        el = k * x.elements(grp.inputs)
        eb = x.act_bytes(grp.inputs[0])
        calls = grp.calls * f * pl.degree("m")
        fwd = calls * (1 + x.rerun(gpath + "/", "all-to-all", "ep"))
        parts += [Transfer(f"{gpath}: dispatch of {k} copies of each token (forward)", "all-to-all", g.size,
                           g.stride, el, eb, fwd, g.factors, k),
                  Transfer(f"{gpath}: combine (forward)", "all-to-all", g.size, g.stride, el, eb, fwd, g.factors, k),
                  Transfer(f"{gpath}: gradients of combine and dispatch (backward)", "all-to-all", g.size,
                           g.stride, el, eb, 2 * calls, g.factors, k)]
    return {"ep": Collective("ep", tuple(parts))} if parts else {}


# ---------------------------------------------------------------- time

def comm_time(collectives: dict[str, Collective], hardware, layout=None) -> dict[str, Expr]:
    """Seconds per step of each kind: ``Σ calls · steps · α + bytes / β`` over
    its parts, on the link :func:`~costgraph.parallel.placement.link` picks
    (module docstring). ``layout`` (optional) gives the number of GPUs: when
    all fit in one scale-up domain every group is scale-up."""
    gpus, dom, route, rate, dispatcher = None, None, None, LINK_RATE.default, EP_DISPATCHER.default
    if layout is not None:
        L = layout.filled()
        gpus = L.gpus if L.gpus is not None else as_expr(L.t) * as_expr(L.p) * as_expr(L.c) * as_expr(L.d)
        dom, route, rate, dispatcher = L.domain_ranks, L.route_nodes, L.link_rate, L.ep_dispatcher
    out = {}
    for kind, col in collectives.items():
        total = ZERO
        for part in col.parts:
            if part.op == "all-to-all":
                total += alltoall_seconds(part, hardware, world=gpus, domain_ranks=dom, route_nodes=route,
                                          rate=rate, dispatcher=dispatcher)
                continue
            alpha, beta = link(part.stride, part.group, hardware, gpus, factors=part.factors or None,
                               domain_ranks=dom, ring=part.op in RING_OPS, rate=rate)
            total += part.calls * latency_steps(part.op, part.group) * alpha + part.bytes / beta
        out[kind] = total
    return out
