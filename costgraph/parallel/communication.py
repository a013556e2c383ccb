"""Communication per device per training step, derived from the graph and the layout.

Where a layout splits a tensor that some operator needs whole, or holds a
replica of a weight whose gradients must agree, there is a collective. Which
ones, and how large, is read off the operator graph — the tensor-parallel
walk (:mod:`costgraph.parallel.tensor`), the pipeline stages
(:mod:`costgraph.parallel.pipeline`), the attention cores
(:func:`costgraph.activations.attention_cores`), the routed-expert groups and
the weights — never typed per model.

One entry function, :func:`communication`, gives a :class:`Collective` per
*kind*; :func:`comm_time` turns them into seconds on a hardware preset.

Conventions
-----------
* **Per device per step.** A step is ``m`` micro-batches of the model's
  micro-batch ``b`` (``m`` defaults to ``p``, as :class:`Layout` fills it),
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
    which this does not count.
``ep`` (per MoE layer per micro-batch, from the routed-expert groups)
    All-to-all dispatch and combine of the tokens routed to experts forward,
    and both again backward: ``k`` copies of each of the device's tokens
    (``b·s/c``, ``÷ t`` with SP) of the experts' input width, over ``e``
    devices, perfect balance and no dropped tokens (capacity factor 1).

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
the link's latency and per-direction bandwidth per device. Placement follows
Megatron-core's rank order (``initialize_model_parallel``,
``order="tp-cp-ep-dp-pp"``): the dense grid is TP innermost (stride 1), then
CP (stride ``t``), then DP (stride ``t·c``; the DP × CP group: stride ``t``),
then PP (stride ``t·c·d``); the expert grid (its own ``RankGenerator``, no
CP) is expert TP (stride 1), EP (stride ``etp``), expert DP (stride
``etp·e``), PP. A group of ``n`` devices at stride ``σ`` spans ``n·σ``
consecutive ranks; it uses the scale-up link (NVLink) when every such group
fits in one scale-up domain of ``D`` devices — ``D`` a multiple of ``n·σ``,
or all the GPUs in one domain — and the scale-out link (one NIC per device)
otherwise; with symbolic degrees a ``Piecewise`` on ``n·σ ≤ D``. Pipeline
send/recv and the tied-embedding all-reduce are placed as the group of all
``p`` stages (the slowest boundary sets the time). Overlap with computation
is left to the step-time model.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..activations import attention_cores
from ..errors import CostgraphValueError
from ..graph import CostGraph
from ..precision import precision as get_precision
from ..symbols import as_expr
from .pipeline import pipeline_stages
from .tensor import sequence_dims, tensor_parallel

Expr = sympy.Expr
ONE = sympy.Integer(1)
ZERO = sympy.Integer(0)

OPS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "send/recv")
KINDS = ("dp_grads", "zero_reduce_scatter", "zero_all_gather", "fsdp", "tp", "pp", "tied_embedding", "cp", "ep")
# views that K and V pass through between their projection and the attention products
_KV_VIEWS = {"transpose", "repeat_kv", "cache"}


def ring_factor(op: str, n) -> Expr:
    """Bytes a device sends per byte of the call's whole buffer (module docstring)."""
    n = as_expr(n)
    if op == "all-reduce":
        return 2 * (n - 1) / n
    if op in ("all-gather", "reduce-scatter", "all-to-all"):
        return (n - 1) / n
    if op == "send/recv":
        return ONE
    raise ValueError(op)


def latency_steps(op: str, n) -> Expr:
    """Latency terms per call of a ring algorithm over ``n`` devices."""
    n = as_expr(n)
    if op == "all-reduce":
        return 2 * (n - 1)
    if op in ("all-gather", "reduce-scatter", "all-to-all"):
        return n - 1
    if op == "send/recv":
        return ONE
    raise ValueError(op)


@dataclass(frozen=True)
class Transfer:
    """One kind of call: ``calls`` per step of ``op`` over ``group`` devices
    spaced ``stride`` ranks apart (placement), each on a whole buffer of
    ``elements`` × ``dtype_bytes`` bytes; ``what`` says which tensor and when
    (``forward``, ``backward``, ``step``)."""

    what: str
    op: str
    group: Expr
    stride: Expr
    elements: Expr
    dtype_bytes: Expr
    calls: Expr

    @property
    def size(self) -> Expr:
        """Bytes of the whole buffer of one call (``S``)."""
        return self.elements * self.dtype_bytes

    @property
    def bytes(self) -> Expr:
        """Bytes one device sends per step: calls × ring factor × S."""
        return self.calls * ring_factor(self.op, self.group) * self.size


@dataclass(frozen=True)
class Collective:
    """The communication of one kind per device per step: its ``parts``
    (:class:`Transfer`), with ``bytes`` (sent, summed), ``calls`` (summed),
    ``op`` (the operation, or several joined by ``+``) and ``group`` (the
    first part's group size)."""

    kind: str
    parts: tuple[Transfer, ...]

    @property
    def bytes(self) -> Expr:
        return sympy.Add(*[p.bytes for p in self.parts])

    @property
    def calls(self) -> Expr:
        return sympy.Add(*[p.calls for p in self.parts])

    @property
    def op(self) -> str:
        seen = []
        for p in self.parts:
            if p.op not in seen:
                seen.append(p.op)
        return " + ".join(seen)

    @property
    def group(self) -> Expr:
        return self.parts[0].group if self.parts else ONE

    def elements(self) -> Expr:
        """Elements sent per step (bytes without the dtype): the ZeRO paper's unit."""
        return sympy.Add(*[p.calls * ring_factor(p.op, p.group) * p.elements for p in self.parts])




def _trivial(x) -> bool:
    """A degree known to be 1 (no communication along it)."""
    return as_expr(x) == 1


def communication(cg: CostGraph, layout, *, stage="first", sp_backward_gather: bool = False) -> dict[str, Collective]:
    """Communication per device per training step of ``cg`` under ``layout``
    (a :class:`costgraph.training.memory.Layout`; see the module docstring).

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
    prec = get_precision(L.precision)
    t, p, c, e, d, m, v = (as_expr(x) for x in (L.t, L.p, L.c, L.e, L.d, L.m, L.v))
    etp = as_expr(L.etp)
    tp = tensor_parallel(cg, t, L.sp) if not _trivial(t) else None
    seq = sequence_dims(cg)
    place = _Stage(cg, p, stage)
    experts = _expert_groups(cg)
    expert_weights = {w for w in cg.weights if any(w.startswith(g + "/") for g in experts)}
    full = L.recompute == "full"

    def in_experts(path):
        return any(path.startswith(g + "/") for g in experts)

    def seq_div(tid):
        """CP divides every tensor with a sequence axis by c."""
        if _trivial(c):
            return ONE
        return c if any(any(_same(x, s) for s in seq) for x in cg.tensors[tid].shape) else ONE

    def tdiv(tid):
        return ONE if tp is None else tp.tensor_divisor(tid)

    def act_bytes(tid):
        return sympy.Integer(prec.bytes(cg.tensors[tid].role))

    out: dict[str, Collective] = {}

    # ---- data parallelism: gradients (and parameters) of the stage's weights
    def wdiv(wid):
        div = ONE if tp is None else tp.weight_divisor(wid)
        if wid in expert_weights:
            div = (div if etp != 1 else ONE) * e
        return div

    dense_el = ZERO
    expert_el = ZERO
    for wid, w in cg.weights.items():
        f = place.weight_factor(wid)
        if f == 0:
            continue
        el = w.count * w.numel / wdiv(wid) * f
        if wid in expert_weights:
            expert_el += el
        else:
            dense_el += el
    dp_groups = []   # (label, elements, group, stride)
    dense_n = d * c
    if dense_el != 0:
        dp_groups.append(("dense", dense_el, dense_n, t))
    if expert_el != 0:
        dp_groups.append(("experts", expert_el, dense_n * t / (e * etp), etp * e))
    gb, wb = pol.gradients, pol.weights
    if dp_groups and not (_trivial(d) and _trivial(c) and not expert_el):
        hsdp = None if L.hsdp is None else as_expr(L.hsdp)
        if L.zero == 0:
            out["dp_grads"] = Collective("dp_grads", tuple(
                Transfer(f"{lab} gradients (step)", "all-reduce", n, s, el, gb, ONE) for lab, el, n, s in dp_groups))
        else:
            rs, ag, fs = [], [], []
            for lab, el, n, s in dp_groups:
                sharded = hsdp is not None and lab != "experts"
                g = hsdp if sharded else n
                rs_calls = ONE if L.zero == 1 else m
                units = place.units() if L.zero == 3 else ONE
                if L.zero == 3:
                    fs.append(Transfer(f"{lab} parameters (forward)", "all-gather", g, s, el / units, wb, m * units))
                    fs.append(Transfer(f"{lab} parameters (backward)", "all-gather", g, s, el / units, wb, m * units))
                    fs.append(Transfer(f"{lab} gradients (backward)", "reduce-scatter", g, s, el / units, gb,
                                       m * units))
                else:
                    rs.append(Transfer(f"{lab} gradients ({'step' if L.zero == 1 else 'backward'})",
                                       "reduce-scatter", g, s, el, gb, rs_calls))
                    ag.append(Transfer(f"{lab} parameters (step)", "all-gather", g, s, el, wb, ONE))
                if sharded:   # HSDP: the shard's gradients across the replicas
                    (fs if L.zero == 3 else rs).append(Transfer(
                        f"{lab} gradient shard across {n / g} replicas (step)", "all-reduce", n / g, s * g, el / g,
                        gb, ONE if L.zero == 1 else m if L.zero == 2 else ONE))
            if L.zero == 3:
                out["fsdp"] = Collective("fsdp", tuple(fs))
            else:
                out["zero_reduce_scatter"] = Collective("zero_reduce_scatter", tuple(rs))
                out["zero_all_gather"] = Collective("zero_all_gather", tuple(ag))

    # ---- tensor (and sequence) parallelism
    if tp is not None:
        parts = []

        def add(what, op, el, eb, calls):
            parts.append(Transfer(what, op, t, ONE, el, eb, calls))

        def node_calls(path, forward):
            f = place.node_factor(path)
            if f == 0:
                return ZERO
            calls = cg.nodes[path]["active"] * f * m
            if forward and full and place.in_layer(path):
                calls *= 2
            return calls

        skip = (lambda path: in_experts(path)) if etp == 1 else (lambda path: False)
        for path in tp.row + tp.vocab:
            if skip(path) or place.node_factor(path) == 0:
                continue
            o = cg.nodes[path]["outputs"][0]
            el, eb = cg.tensors[o].numel / seq_div(o), act_bytes(o)
            label = "row-parallel" if path in tp.row else "vocab-parallel"
            if o in tp.sequence:
                add(f"{path}: {label} output (forward)", "reduce-scatter", el, eb, node_calls(path, True))
                add(f"{path}: gradient of its output (backward)", "all-gather", el, eb, node_calls(path, False))
            else:
                add(f"{path}: {label} output (forward)", "all-reduce", el, eb, node_calls(path, True))
        inputs: dict[str, str] = {}
        for path in tp.column:
            if skip(path) or place.node_factor(path) == 0:
                continue
            inputs.setdefault(cg.nodes[path]["inputs"][0], path)
        for x, path in inputs.items():
            el, eb = cg.tensors[x].numel / seq_div(x), act_bytes(x)
            readers = [q for q in tp.column if cg.nodes[q]["inputs"][0] == x and not skip(q)]
            who = ", ".join(q.rsplit("/", 1)[-1] for q in readers)
            if x in tp.sequence:
                add(f"{x}: input of {who} (forward)", "all-gather", el, eb, node_calls(path, True))
                add(f"{x}: its gradient (backward)", "reduce-scatter", el, eb, node_calls(path, False))
                if sp_backward_gather:
                    add(f"{x}: input gathered again for the weight gradient (backward)", "all-gather", el, eb,
                        node_calls(path, False))
            else:
                add(f"{x}: gradient of the input of {who} (backward)", "all-reduce", el, eb, node_calls(path, False))
        if L.loss and place.has_head():
            for o in cg.outputs:
                if o in tp.split and cg.tensors[o].shape:
                    ten = cg.tensors[o]
                    add(f"{o}: vocabulary-parallel cross-entropy, max, target logit, sum of exponentials (forward)",
                        "all-reduce", ten.numel / ten.shape[-1] / seq_div(o), sympy.Integer(4), 3 * m)
        if L.sp:
            el = _sp_replicated_weights(cg, tp, place, wdiv)
            if el != 0:
                add("weights TP keeps whole that see s/t tokens: gradients (step)", "all-reduce", el, gb, ONE)
        if parts:
            out["tp"] = Collective("tp", tuple(parts))

    # ---- pipeline parallelism
    if not _trivial(p):
        carried = _boundary(cg)
        if carried:
            el = sympy.Max(*[sympy.Add(*[cg.tensors[x].numel / tdiv(x) / seq_div(x) for x in xs])
                             for xs in carried]) if len(carried) > 1 else \
                sympy.Add(*[cg.tensors[x].numel / tdiv(x) / seq_div(x) for x in carried[0]])
            eb = act_bytes(carried[0][0])
            fwd, bwd = place.sends(v)
            world_stride = t * c * d
            parts = [Transfer("activation to the next stage (forward)", "send/recv", p, world_stride, el, eb, fwd * m),
                     Transfer("its gradient to the previous stage (backward)", "send/recv", p, world_stride, el, eb,
                              bwd * m)]
            out["pp"] = Collective("pp", tuple(x for x in parts if x.calls != 0))
        tied = place.tied_weights()
        if tied:
            el = sympy.Add(*[cg.weights[w].count * cg.weights[w].numel / wdiv(w) for w in tied])
            out["tied_embedding"] = Collective("tied_embedding", (Transfer(
                "gradients of the table held by the first and the last stage (step)", "all-reduce", sympy.Integer(2),
                (p - 1) * t * c * d, el, gb, ONE),))

    # ---- context parallelism
    if not _trivial(c):
        parts = []
        for first, core in attention_cores(cg):
            f = place.node_factor(first)
            if f == 0:
                continue
            k, val = _kv(cg, first, core)
            el = sympy.Add(*[cg.tensors[x].numel / tdiv(x) for x in (k, val)])
            eb = act_bytes(k)
            calls = cg.nodes[first]["active"] * f * m
            parts.append(Transfer(f"{first}: K and V ({k}, {val}) (forward)", "all-gather", c, t, el, eb,
                                  calls * (2 if full and place.in_layer(first) else 1)))
            parts.append(Transfer(f"{first}: dK and dV (backward)", "reduce-scatter", c, t, el, eb, calls))
        if parts:
            out["cp"] = Collective("cp", tuple(parts))

    # ---- expert parallelism
    if not _trivial(e) and experts:
        parts = []
        for gpath, (xs, k, per) in experts.items():
            f = place.node_factor(gpath + "/")
            if f == 0:
                continue
            el = k * sympy.Add(*[cg.tensors[x].numel / tdiv(x) / seq_div(x) for x in xs])
            eb = act_bytes(xs[0])
            calls = per * f * m
            fwd = calls * (2 if full and place.in_layer(gpath + "/") else 1)
            parts += [Transfer(f"{gpath}: dispatch of {k} copies of each token (forward)", "all-to-all", e, etp, el,
                               eb, fwd),
                      Transfer(f"{gpath}: combine (forward)", "all-to-all", e, etp, el, eb, fwd),
                      Transfer(f"{gpath}: gradients of combine and dispatch (backward)", "all-to-all", e, etp, el,
                               eb, 2 * calls)]
        if parts:
            out["ep"] = Collective("ep", tuple(parts))
    return {kind: out[kind] for kind in KINDS if kind in out}


def _same(a, b) -> bool:
    return a == b or sympy.expand(a - b) == 0


class _Stage:
    """Which part of the graph one device holds: the layers (``1/p`` of every
    top-level group's iterations) and, on the first stage, the operators
    before them, on the last those after them."""

    def __init__(self, cg: CostGraph, p, stage):
        self.cg, self.p = cg, p
        two = pipeline_stages(cg, 2)   # before / after the layers, whatever p
        before, after = two[0], two[1]
        self.top = [g for path, g in cg.groups.items() if "/" not in path]
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

    def in_layer(self, path: str) -> bool:
        return any(path.startswith(g.path + "/") for g in self.top)

    def node_factor(self, path: str) -> Expr:
        """The share of a node's instances on this stage (``path`` may be a group prefix ``g/``)."""
        if self.in_layer(path):
            return ONE / self.p
        return ONE if path in self.nodes else ZERO

    def weight_factor(self, wid: str) -> Expr:
        if self.in_layer(wid):
            return ONE / self.p
        return ONE if wid in self.weights else ZERO

    def units(self) -> Expr:
        """ZeRO-3 units on this stage: its layers, and the weights outside them as one."""
        n = sympy.Add(*[g.count for g in self.top]) / self.p
        return n + (1 if self.weights else 0)

    def has_head(self) -> bool:
        return self.last

    def sends(self, v):
        """Sends per micro-batch (forward, backward) of a device of this stage."""
        v = as_expr(v)
        return v - (1 if self.last else 0), v - (1 if self.first else 0)

    def tied_weights(self) -> set[str]:
        return self._tied if (self.first or self.last) and self.p != 1 else set()


def _expert_groups(cg: CostGraph) -> dict[str, tuple[list[str], Expr, Expr]]:
    """Routed-expert groups (fewer active copies than copies): path → (the
    activations they read from outside, ``k`` copies per token, calls of the
    group per model pass = the multiplicity around it)."""
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
        if xs:
            out[path] = (xs, g.active, sympy.cancel(g.active_multiplicity / g.active))
    return out


def _kv(cg: CostGraph, first: str, core: list[str]) -> tuple[str, str]:
    """K (QKᵀ's second input) and V (the next product's second input), each
    traced back through views to the tensor the attention receives."""
    def back(tid):
        while True:
            prod = cg.tensors[tid].producer
            if prod in cg.nodes and cg.nodes[prod]["kind"] in _KV_VIEWS and cg.nodes[prod]["inputs"]:
                tid = cg.nodes[prod]["inputs"][0]
            else:
                return tid

    k = back(cg.nodes[first]["inputs"][1])
    outs = {o for n in core for o in cg.nodes[n]["outputs"]}
    nxt = next(q for q, dd in cg.ops() if dd["kind"] == "matmul" and q != first and dd["inputs"][0] in outs)
    return k, back(cg.nodes[nxt]["inputs"][1])


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


def _sp_replicated_weights(cg: CostGraph, tp, place: _Stage, wdiv) -> Expr:
    """Elements of weights TP keeps whole whose owner sees only its ``s/t``
    tokens under SP (an input split along the sequence; a row-parallel bias,
    added after the reduce-scatter)."""
    total = ZERO
    for path, dd in cg.ops():
        f = place.node_factor(path)
        if f == 0:
            continue
        ws = [w for w in dd["cost"].weights if tp.weight_divisor(w) == 1]
        if not ws:
            continue
        sees_part = any(x in tp.sequence for x in dd["inputs"]) or (
            path in tp.row and any(o in tp.sequence for o in dd["outputs"]))
        if sees_part:
            total += sympy.Add(*[cg.weights[w].count * cg.weights[w].numel / wdiv(w) * f for w in ws])
    return total


# ---------------------------------------------------------------- time

def placement(stride, n, hardware, gpus=None):
    """``(latency s, bandwidth B/s)`` of the link a group of ``n`` devices at
    ``stride`` uses (module docstring): scale-up when every group fits in one
    scale-up domain, else scale-out; a ``Piecewise`` pair when symbolic."""
    up = (sympy.Rational(hardware.latency_scale_up_ns, 10**9), sympy.Integer(hardware.scale_up_bandwidth))
    down = (sympy.Rational(hardware.latency_scale_out_ns, 10**9), sympy.Integer(hardware.scale_out_bandwidth))
    span = as_expr(stride) * as_expr(n)
    dom = sympy.Integer(hardware.scale_up_domain)
    if span.is_Integer:
        fits = (int(dom) % int(span) == 0) or (gpus is not None and as_expr(gpus).is_Integer and gpus <= dom)
        return up if fits else down
    cond = span <= dom
    return tuple(sympy.Piecewise((a, cond), (b, True)) for a, b in zip(up, down))


def comm_time(collectives: dict[str, Collective], hardware, layout=None) -> dict[str, Expr]:
    """Seconds per step of each kind: ``Σ calls · steps · α + bytes / β`` over
    its parts, on the link :func:`placement` picks (module docstring).
    ``layout`` (optional) gives the number of GPUs: when all fit in one
    scale-up domain every group is scale-up."""
    gpus = None
    if layout is not None:
        L = layout.filled()
        gpus = L.gpus if L.gpus is not None else as_expr(L.t) * as_expr(L.p) * as_expr(L.c) * as_expr(L.d)
    out = {}
    for kind, col in collectives.items():
        total = ZERO
        for part in col.parts:
            alpha, beta = placement(part.stride, part.group, hardware, gpus)
            total += part.calls * latency_steps(part.op, part.group) * alpha + part.bytes / beta
        out[kind] = total
    return out
