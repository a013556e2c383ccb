"""Who holds which part of each tensor under a layout: :class:`Placement`.

:func:`placement` reads the graph and a :class:`~costgraph.parallel.layout.Layout`
once and says, per axis of parallelism, what one device holds. Memory,
optimizer states, communication, step time, the planner, the validity checks
and inference read it instead of deriving it again.

Tensor and sequence parallelism (``t``)
    The TP/SP walk of :mod:`costgraph.parallel.tensor` (:attr:`Placement.tp`):
    which activations are split along which axis, which linears are
    column-, row- or vocabulary-parallel.
Weight shards (:class:`WeightShard`, one divisor per axis)
    A column-parallel linear (PyTorch's ``[out, in]`` weight) is split along
    its output features (axis 0, and its bias), a row-parallel one along its
    input features (the last axis), a vocabulary-parallel embedding
    (``[num, dim]``) along its rows, a per-channel weight (Mamba's
    ``conv1d`` ``[C, 1, k]``, ``A_log`` ``[D, N]``, ``D``) along its
    channels (axis 0). Routed experts are divided along the expert axis —
    their copies — by ``e``, and keep their TP split only with expert tensor
    parallelism ``etp = t``. A factored optimizer (Adafactor) keeps the row
    and column statistics of the local shard.
Context parallelism (``c``)
    Every tensor with a sequence axis (the last axis of an ``index`` input)
    is divided by ``c`` (:meth:`Placement.sequence_divisor`).
Routed experts (:class:`ExpertGroup`)
    The ``repeat E as ... active k`` groups (fewer active copies than
    copies): ``E``, ``k``, the activations they read from outside, and their
    calls per model pass.
Pipeline stages
    :func:`costgraph.parallel.pipeline.pipeline_stages` for the layout's
    ``p``, ``m``, schedule and ``v`` (:attr:`Placement.stages`), and a view
    of one device's stage (:meth:`Placement.stage`: ``first``, ``last``,
    ``middle`` or an index of a numeric ``p``).
Groups and links (:attr:`Placement.groups`)
    Each collective's group of devices and its rank stride in Megatron-core's
    order (``initialize_model_parallel``, ``order="tp-cp-ep-dp-pp"``): the
    dense grid TP innermost (stride 1), CP (stride ``t``), DP × CP (``d·c``
    devices at stride ``t``: Megatron's distributed optimizer shards over
    it), PP (stride ``t·c·d``); the expert grid expert TP (stride 1), EP
    (``e`` at stride ``etp``), expert DP (``d·c·t/(e·etp)`` at stride
    ``etp·e``); HSDP's groups of ``g`` (stride ``t``) and its ``d·c/g``
    replicas (stride ``t·g``). :func:`link` says which link a group crosses.
    The order is the layout's ``rank_order`` (:mod:`costgraph.parallel.ranks`;
    a group whose ranks are not one progression keeps its factors).

A placement depends on the degrees, ``sp``, ``m``, the schedule, ``v``,
``hsdp`` and ``gpus`` only; :func:`placement` keeps one per graph and such
settings, so analyses of the same layout share it.
"""

from __future__ import annotations

import functools

from dataclasses import dataclass, field

import sympy

from ..choices import LINK_RATE
from ..errors import CostgraphValueError
from ..engine.graph import CostGraph
from ..engine.symbols import as_expr
from .layout import Layout
from .pipeline import Stage, pipeline_stages, split_of
from .ranks import link_bandwidths, no_zero_link
from .tensor import TensorParallel, sequence_dims, tensor_parallel

Expr = sympy.Expr
ONE = sympy.Integer(1)
ZERO = sympy.Integer(0)
# the Layout fields a placement depends on (its cache key)
KEY_FIELDS = ("t", "p", "c", "e", "etp", "d", "gpus", "sp", "m", "schedule", "v", "hsdp", "rank_order", "tp_replicated")
KEY_FIELDS += ("vp_group", "first_stage_layers", "last_stage_layers", "account_embedding", "account_loss",
               "schedule_accounting", "pipeline_layout")   # the pipeline split (costgraph.parallel.pipeline.Split)
KEY_FIELDS += ("domain_ranks", "link_rate")   # what Placement.link reads of the layout: a placement per link setting


@dataclass(frozen=True)
class WeightShard:
    """The part of one weight a device holds: ``axes``, one divisor per axis
    of the weight's shape, and ``experts``, the divisor of its copies along
    the expert axis (routed experts under expert parallelism)."""

    axes: tuple[Expr, ...]
    experts: Expr = ONE

    @property
    def total(self) -> Expr:
        """The whole divisor: the product of the axes' and the experts'."""
        return sympy.Mul(self.experts, *self.axes)


@dataclass(frozen=True)
class ExpertGroup:
    """A routed-expert group at ``path``: ``count`` experts (``E``), ``active``
    per token (``k``), ``inputs`` (the activations it reads from outside, in
    program order), ``calls`` (calls of the group per model pass: the
    multiplicity around it)."""

    path: str
    count: Expr
    active: Expr
    inputs: tuple[str, ...]
    calls: Expr


@dataclass(frozen=True)
class Group:
    """A group of ``size`` devices whose ranks are ``stride`` apart;
    ``factors``: its ``(size, stride)`` factors in the rank order
    (:mod:`costgraph.parallel.ranks`; empty: the one factor ``(size, stride)``)."""

    size: Expr
    stride: Expr
    factors: tuple = field(default=(), compare=False)

    def parts(self) -> tuple:
        """The ``(size, stride)`` factors (the one factor when none are given)."""
        return self.factors or ((self.size, self.stride),)


def link(stride, n, hardware, gpus=None, *, factors=None, domain_ranks=None, ring=False,
         rate: str = LINK_RATE.default) -> tuple[Expr, Expr]:
    """``(latency s, bandwidth B/s)`` of the link a group of ``n`` devices at
    ``stride`` (or of ``factors``, ``((size, stride), …)``) uses: scale-up
    (NVLink) when every such group stays inside one scale-up domain of ``R``
    consecutive ranks — ``R`` a multiple of each factor's span ``size·stride``,
    or all ``gpus`` in one domain (:func:`~costgraph.parallel.ranks.one_domain`)
    — else scale-out: one NIC per device, or with ``ring`` (a ring collective: all-reduce,
    all-gather, reduce-scatter) the NICs of the group's members on a domain
    (:func:`costgraph.parallel.ranks.ring_scale_out`: ``r`` members on the worst-placed
    member's domain cross it at ``min(r·B_out, B_up)``, NCCL's rings spreading their
    channels over those NICs); always scale-out on a preset without a scale-up
    link (bandwidth 0: a group inside its domain of 1 is one device, with no traffic);
    with symbolic degrees a ``Piecewise`` on the same condition.
    Bandwidths per ``rate`` (:data:`costgraph.choices.LINK_RATE`, ``--link-rate``;
    :func:`costgraph.parallel.ranks.link_bandwidths`): ``nccl`` (default) the bus
    bandwidth NCCL reaches where the preset gives it (nccl-tests busbw: 370.8 of an H100's
    450 GB/s of NVLink, 48 of a 400 Gb/s NIC's 50; NCCL src/graph/topo.h), ``line`` the
    vendors' line rates.
    ``R``: :func:`costgraph.parallel.ranks.ranks_per_domain` (``domain_ranks``,
    or the power-of-two fill of the preset's domain). Train and plan both
    decide here. Computed once per distinct arguments (the planner's
    step times ask for the same groups again)."""
    key = (stride, n, gpus, factors, domain_ranks, bool(ring), rate)
    try:
        return _linked(hardware, key)
    except TypeError:   # an argument that cannot be hashed: computed directly
        return _link(stride, n, hardware, gpus, factors=factors, domain_ranks=domain_ranks, ring=ring, rate=rate)


@functools.lru_cache(maxsize=4096)
def _linked(hardware, key: tuple) -> tuple[Expr, Expr]:
    stride, n, gpus, factors, domain_ranks, ring, rate = key
    return _link(stride, n, hardware, gpus, factors=factors, domain_ranks=domain_ranks, ring=ring, rate=rate)


def _link(stride, n, hardware, gpus=None, *, factors=None, domain_ranks=None, ring=False,
          rate: str = LINK_RATE.default) -> tuple[Expr, Expr]:
    """The link of :func:`link`, computed."""
    from .ranks import intra_domain, one_domain, ranks_per_domain, ring_scale_out

    # as_expr: a preset's numbers may be symbols (the calculator page's per-preset step time, export.web_steps)
    up_bw, out_bw = link_bandwidths(hardware, LINK_RATE.check(rate))   # --link-rate: nccl-tests busbw or line
    up = (as_expr(hardware.latency_scale_up_ns) / 10**9, as_expr(up_bw))
    down = (as_expr(hardware.latency_scale_out_ns) / 10**9, as_expr(out_bw))
    if hardware.scale_up_bandwidth == 0:    # no scale-up link (Apple M-series: domain 1): a group inside a
        return no_zero_link(down, hardware, n)   # domain is one device and sends nothing; any larger one goes out
    fs = factors or ((as_expr(n), as_expr(stride)),)
    R, limit = ranks_per_domain(hardware, domain_ranks), one_domain(hardware, domain_ranks)
    cond = intra_domain(fs, R, gpus, limit)
    if cond == sympy.true:
        return up
    if ring and down[1] != 0:   # the NICs of the group's members on the domain (ranks.ring_scale_out)
        down = (down[0], ring_scale_out(fs, R, down[1], up[1]))
    if cond == sympy.false:
        return no_zero_link(down, hardware, n)
    if down[1] == 0:   # symbolic degrees (the planner) on a preset without scale-out: a crossing row never ends
        down = (sympy.oo, up[1])   # (plan refuses a job past one domain; train refuses at its degrees)
    return tuple(sympy.Piecewise((a, cond), (b, True)) for a, b in zip(up, down))


def expert_groups(cg: CostGraph) -> dict[str, ExpertGroup]:
    """The routed-expert groups of ``cg`` (fewer active copies than copies), path → :class:`ExpertGroup`."""
    return _cached(cg, ("experts",), lambda: _expert_groups(cg))


def _expert_groups(cg: CostGraph) -> dict[str, ExpertGroup]:
    out = {}
    for path, g in cg.groups.items():
        if sympy.expand(g.count - g.active) == 0:
            continue
        inside = [q for q, _ in cg.ops() if q.startswith(path + "/")]
        produced = {tid for tid, ten in cg.tensors.items() if ten.producer in inside}
        carried = {f"{path}/{name}@in" for name in g.carried}
        xs = []
        for q in inside:
            for x in cg.nodes[q]["inputs"]:
                if x not in produced and x not in carried and x not in xs and cg.tensors[x].role != "index":
                    xs.append(x)
        out[path] = ExpertGroup(path, g.count, g.active, tuple(xs), sympy.cancel(g.active_multiplicity / g.active))
    return out


def tp_weight_shards(cg: CostGraph, tp: TensorParallel) -> dict[str, tuple[Expr, ...]]:
    """Weight id → divisors per axis under the TP walk ``tp`` (module
    docstring): row-parallel weights on their last axis (input features),
    every other weight TP splits on axis 0 (output features, vocabulary rows,
    channels)."""
    out = {}
    for wid, div in tp.weights.items():
        if div == 1:
            continue
        rank = len(cg.weights[wid].shape)
        axis = rank - 1 if wid.rsplit("/", 1)[0] in tp.row else 0
        out[wid] = tuple(div if i == axis else ONE for i in range(rank))
    return out


class StageView:
    """Which part of the graph one device of a pipeline stage holds: the layers
    (``1/p`` of every top-level group's iterations) and, on the first stage,
    the operators before them, on the last those after them."""

    def __init__(self, pl: "Placement", stage):
        p = pl.degree("p")
        self.p, self.top = p, pl.top
        before, after = pl.ends
        if p == 1:
            which = {"first", "last"}
        elif stage in ("first", "last", "middle"):
            which = {stage} - {"middle"}
        elif isinstance(stage, int) and p.is_Integer and 0 <= stage < int(p):
            which = ({"first"} if stage == 0 else set()) | ({"last"} if stage == int(p) - 1 else set())
        else:
            raise CostgraphValueError(f"unknown pipeline stage {stage!r}",
                                      hint="first, last, middle, or an index 0 … p−1 when p is a number")
        self.first, self.last = "first" in which, "last" in which
        self.nodes = (before.nodes if self.first else set()) | (after.nodes if self.last else set())
        self.weights = (before.weights if self.first else set()) | (after.weights if self.last else set())
        self._tied = before.weights & after.weights
        self._in_layer = pl.in_layer
        self.shares = _layer_shares(pl, stage, p, self.first, self.last)
        own = _own_stage(pl, stage, p)
        if own is not None:   # the tables an MTP on this stage reads (the tied embedding)
            self.weights = self.weights | {w for w in own.weights if not pl.in_layer(w)}

    def in_layer(self, path: str) -> bool:
        """Whether ``path`` lies inside a top-level repeat group (a layer)."""
        return self._in_layer(path)

    def share(self, path: str) -> Expr:
        """The share of the iterations of the group holding ``path`` on this stage."""
        g = next(g for g in self.top if path.startswith(g.path + "/"))
        return self.shares.get(g.path, ONE / self.p)

    def node_factor(self, path: str) -> Expr:
        """The share of a node's instances on this stage (``path`` may be a group prefix ``g/``)."""
        if self.in_layer(path):
            return self.share(path)
        return ONE if path in self.nodes else ZERO

    def weight_factor(self, wid: str) -> Expr:
        """The share of a weight's copies on this stage."""
        if self.in_layer(wid):
            return self.share(wid)
        return ONE if wid in self.weights else ZERO

    def units(self) -> Expr:
        """ZeRO-3 units on this stage: its layers, and the weights outside them as one."""
        n = sympy.Add(*[g.count * self.shares.get(g.path, ONE / self.p) for g in self.top])
        return n + (1 if self.weights else 0)

    def has_head(self) -> bool:
        """Whether the stage holds the output head (the last stage)."""
        return self.last

    def sends(self, v):
        """Sends per micro-batch (forward, backward) of a device of this stage."""
        v = as_expr(v)
        return v - (1 if self.last else 0), v - (1 if self.first else 0)

    def tied_weights(self) -> set[str]:
        """Tables both the first and the last stage hold (a tied embedding and head), when ``p > 1``."""
        return self._tied if (self.first or self.last) and self.p != 1 else set()


def _own_stage(pl: "Placement", stage, p) -> Stage | None:
    """The :class:`Stage` a view of a numeric ``p`` stands for (None: ``middle``, or ``p`` a symbol)."""
    if not p.is_Integer or p == 1:
        return pl.stages[0] if p == 1 else None
    if stage == "first":
        return pl.stages[0]
    if stage == "last":
        return pl.stages[-1]
    return pl.stages[stage] if isinstance(stage, int) else None


def _layer_shares(pl: "Placement", stage, p, first: bool, last: bool) -> dict:
    """Group path → the share of its iterations the viewed stage holds. The groups after the
    head (MTP, :func:`costgraph.parallel.pipeline.layer_groups`) sit whole on one stage; with an
    explicit layout (``pipeline_layout``) or MTP the stage's own counts are read; otherwise
    every group is ``1/p`` (the mean share, as the analyses always took it)."""
    from .pipeline import layer_groups

    _, post = layer_groups(pl.graph)
    if not post and getattr(pl.layout, "pipeline_layout", None) is None:
        return {}
    own = _own_stage(pl, stage, p)
    if own is None or pl.layout.schedule == "dualpipe":
        out = {g.path: ONE / p for g in pl.top}
        out.update({g.path: ONE if last else ZERO for g in post})
        return out
    return {g.path: as_expr(own.layers.get(g.path, 0)) / as_expr(g.count) for g in pl.top if g.count != 0}


@dataclass
class Placement:
    """Who holds what under ``layout`` (filled), for graph ``graph`` (module docstring).

    ``tp``: the TP/SP walk (None when ``t`` is 1); ``shards``: weight id →
    :class:`WeightShard` for every weight a device holds part of;
    ``experts``: routed-expert groups; ``expert_weights``: their weight ids;
    ``stages``: the pipeline stages; ``ends``: the stages of a two-stage
    split (what sits before and after the layers); ``top``: the top-level
    repeat groups (the layers); ``groups``: name → :class:`Group` (``tp``,
    ``cp``, ``dp``, ``expert_dp``, ``ep``, ``pp``, ``tied_embedding``, and
    with HSDP ``hsdp``, ``hsdp_replicas``).
    """

    graph: CostGraph
    layout: Layout
    tp: TensorParallel | None
    shards: dict[str, WeightShard]
    experts: dict[str, ExpertGroup]
    expert_weights: frozenset[str]
    stages: list[Stage]
    ends: list[Stage]
    top: list
    sequence: list[Expr]
    groups: dict[str, Group] = field(default_factory=dict)

    def degree(self, name: str) -> Expr:
        """The layout's ``name`` (``t p c e etp d m v``) as a SymPy expression."""
        return as_expr(getattr(self.layout, name))

    def weight_shard(self, wid: str) -> WeightShard:
        """The part of weight ``wid`` a device holds (all ones: the whole weight)."""
        got = self.shards.get(wid)
        return got if got is not None else WeightShard((ONE,) * len(self.graph.weights[wid].shape))

    def weight_divisor(self, wid: str) -> Expr:
        """How many devices share weight ``wid`` by model parallelism (TP × EP)."""
        got = self.shards.get(wid)
        return ONE if got is None else got.total

    def tensor_divisor(self, tid: str) -> Expr:
        """How many devices share activation ``tid`` by TP or SP (``t`` or 1)."""
        return ONE if self.tp is None else self.tp.tensor_divisor(tid)

    def sequence_divisor(self, tid: str) -> Expr:
        """``c`` when activation ``tid`` has a sequence axis (context parallelism), else 1."""
        c = self.degree("c")
        if c == 1:
            return ONE
        return c if any(any(_same(x, s) for s in self.sequence) for x in self.graph.tensors[tid].shape) else ONE

    def in_layer(self, path: str) -> bool:
        """Whether node or weight ``path`` lies inside a top-level repeat group."""
        return any(path.startswith(g.path + "/") for g in self.top)

    def in_experts(self, path: str) -> bool:
        """Whether node or weight ``path`` lies inside a routed-expert group."""
        return any(path.startswith(g + "/") for g in self.experts)

    def stage(self, which="first") -> StageView:
        """One device's stage: ``first``, ``last``, ``middle`` or an index of a numeric ``p``.

        Raises
        ------
        CostgraphValueError
            Any other stage.
        """
        return StageView(self, which)

    def devices(self) -> Expr:
        """The number of devices: ``gpus``, or ``t·p·c·d``."""
        L = self.layout
        return as_expr(L.gpus) if L.gpus is not None else \
            self.degree("t") * self.degree("p") * self.degree("c") * self.degree("d")

    def link(self, group: str, hardware) -> tuple[Expr, Expr]:
        """``(latency s, bandwidth B/s)`` of the link the group named ``group`` crosses (:func:`link`)."""
        g = self.groups[group]
        gpus = self.layout.gpus
        return link(g.stride, g.size, hardware, gpus if gpus is not None else self.devices(), factors=g.parts(),
                    domain_ranks=self.layout.domain_ranks, rate=self.layout.link_rate)


def placement(cg: CostGraph, layout: Layout) -> Placement:
    """The :class:`Placement` of ``cg`` under ``layout`` (filled here if it is
    not), computed once per graph and layout (module docstring).

    Raises
    ------
    CostgraphValueError
        Bad layout settings (:meth:`Layout.filled`).
    """
    if not isinstance(cg, CostGraph):
        cg = getattr(cg, "graph", cg)   # a costgraph.Model
    L = layout.filled()
    key = ("placement",) + tuple(_key(getattr(L, f)) for f in KEY_FIELDS)
    return _cached(cg, key, lambda: _build(cg, L))


def _key(v):
    return v if isinstance(v, (bool, str, tuple)) or v is None else as_expr(v)


def _build(cg: CostGraph, L: Layout) -> Placement:
    t, p, c, e, etp, d = (as_expr(x) for x in (L.t, L.p, L.c, L.e, L.etp, L.d))
    rep = L.tp_replicated   # K/V heads fewer than t, replicated (parallel/tensor.py)
    tp = None if t == 1 else _cached(cg, ("tp", t, L.sp, rep), lambda: tensor_parallel(cg, t, L.sp, replicate=rep))
    experts = expert_groups(cg)
    expert_weights = frozenset(w for w in cg.weights if any(w.startswith(g + "/") for g in experts))
    tp_axes = {} if tp is None else _cached(cg, ("tp_shards", t, L.sp, rep), lambda: tp_weight_shards(cg, tp))
    shards = {}
    for wid, w in cg.weights.items():
        axes = tp_axes.get(wid, (ONE,) * len(w.shape))
        experts_div = ONE
        if wid in expert_weights:
            experts_div = e
            if etp == 1:
                axes = (ONE,) * len(w.shape)
        s = WeightShard(axes, experts_div)
        if s.total != 1:
            shards[wid] = s
    split = split_of(L)
    stages = _cached(cg, ("stages", p, as_expr(L.m), L.schedule, L.v, split),
                     lambda: pipeline_stages(cg, L.p, L.m, L.schedule, L.v, split))
    ends = _cached(cg, ("ends",), lambda: pipeline_stages(cg, 2))
    top = [g for path, g in cg.groups.items() if "/" not in path]
    groups = rank_order_groups(L.rank_order, t, c, e, etp, d, p)
    if L.hsdp is not None:
        g = as_expr(L.hsdp)
        groups["hsdp"] = Group(g, t)
        groups["hsdp_replicas"] = Group(d * c / g, t * g)
    return Placement(cg, L, tp, shards, experts, expert_weights, stages, ends, top,
                     _cached(cg, ("sequence",), lambda: sequence_dims(cg)), groups)


def rank_order_groups(order: str, t, c, e, etp, d, p) -> dict[str, Group]:
    """The groups ``tp``, ``cp``, ``dp`` (DP × CP), ``expert_dp``, ``ep``,
    ``pp`` and ``tied_embedding`` under the rank ``order``
    (:mod:`costgraph.parallel.ranks`: Megatron's ``RankGenerator``, the dense
    grid ``(t, c, 1, d, p)``, the expert grid ``(etp, 1, e, d·c·t/(e·etp), p)``)."""
    from .ranks import factors, strides

    edp = d * c * t / (e * etp)
    dense = {"tp": t, "cp": c, "ep": ONE, "dp": d, "pp": p}
    expert = {"tp": etp, "cp": ONE, "ep": e, "dp": edp, "pp": p}

    def group(sizes, names):
        fs = factors(order, sizes, names)
        size = sympy.Mul(*[sizes[n] for n in names])
        stride = fs[0][1] if fs else strides(order, sizes)[names[0]]
        return Group(as_expr(size), as_expr(stride), fs if len(fs) > 1 else ())

    pp = group(dense, ("pp",))
    return {"tp": group(dense, ("tp",)), "cp": group(dense, ("cp",)), "dp": group(dense, ("dp", "cp")),
            "expert_dp": group(expert, ("dp",)), "ep": group(expert, ("ep",)), "pp": pp,
            "tied_embedding": Group(sympy.Integer(2), (p - 1) * pp.stride)}


def _same(a, b) -> bool:
    return a == b or sympy.expand(a - b) == 0


# ---------------------------------------------------------------- one cache per graph

def _cached(cg: CostGraph, key: tuple, make):
    """``make()`` once per graph object and ``key``, in the graph's own cache (``CostGraph.memo``)."""
    store = cg.memo("placement")
    if key not in store:
        store[key] = make()
    return store[key]


def cache_clear(cg: CostGraph) -> None:
    """Forget every placement of graph ``cg`` (tests that count how often one is built)."""
    cg.memo("placement").clear()
