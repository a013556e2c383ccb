"""Training memory per device under a parallel layout — the entry point that
puts the graph analyses together.

For every pipeline stage (:mod:`costgraph.parallel.pipeline`), the bytes one
device of that stage holds:

``weights``, ``gradients``, ``optimizer``
    Model states (:func:`costgraph.training.states.model_states`) of the
    weights the stage holds: its own layers (``l/p`` of every layer's weights
    by default; Megatron's uneven split and a multi-stack model's contiguous
    assignment per :mod:`costgraph.parallel.layer_split`), the
    embeddings on the first stage, final norm and head on the last (a tied
    table on both). Each weight divided as tensor parallelism splits it
    (:mod:`costgraph.parallel.tensor`, derived from the graph); routed
    experts (a ``repeat E as ... active k`` group) divided by ``e`` (expert
    parallelism) and, with expert tensor parallelism ``etp = t``, by ``t``.
    ZeRO shards over the data-parallel group of ``d·c`` devices (Megatron's
    distributed optimizer shards over DP × CP); expert weights over their
    own data-parallel group of ``d·c·t / (e·etp)`` devices.
``activations``
    What the stage keeps for backward (:mod:`costgraph.engine.activations`:
    recomputation, flash attention, TP/SP splits, context parallelism
    dividing every tensor with a sequence axis by ``c``), for the
    micro-batches it holds in flight (:mod:`costgraph.parallel.schedules`:
    1F1B ``min(p − i, m)`` on stage ``i``; interleaved, ZB-H1, DualPipe
    per schedule), plus, on the last stage, the loss: the buffers of the logits'
    shape its cross-entropy holds at its peak (``--cross-entropy``: under ``megatron``,
    the default, the fp32 softmax and the 16-bit gradient, 4 + 2 bytes an element
    under bf16; :func:`loss_bytes_per_logit`), split as the logits are. With full recomputation one layer's activations are
    live again during its recompute (added once, not per micro-batch).
``total``
    The sum.

Data parallelism ``d = gpus / (t·p·c)``; ``gpus`` must be a multiple.
Symbols: ``t p d c e m`` from :mod:`costgraph.engine.symbols` (``N_d`` is the
data-parallel degree when it is not given, see
:data:`costgraph.training.states.DP`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.activations import activation_rows, layer_activation_bytes
from ..engine.recompute import recompute_plan
from ..errors import CostgraphValueError
from ..choices import CROSS_ENTROPY
from ..engine.graph import CostGraph
from ..parallel.layout import Layout
from ..parallel.placement import Placement, placement as place
from ..engine.precision import precision as get_precision
from ..engine.symbols import as_expr
from .cross_entropy import implementation, loss_warnings
from .offload import offload_memory, offloaded
from .states import model_states

__all__ = ["Layout", "MEMORY_KEYS", "StageMemory", "TrainingMemory", "training_memory"]

MEMORY_KEYS = ("weights", "gradients", "optimizer", "activations", "total")


@dataclass
class StageMemory:
    """Bytes per device of one pipeline stage: :data:`MEMORY_KEYS` plus ``loss``
    (what the cross-entropy holds at its peak, inside ``activations``; ``loss_held``: that in words,
    the ``--cross-entropy`` convention named) and ``experts`` (the routed
    experts' weights, gradients and optimizer states, inside those three)."""

    index: sympy.Expr
    name: str
    memory: dict[str, sympy.Expr] = field(default_factory=dict)
    #: layer iterations held (all stacks), micro-batches of them in flight, whether it holds the head
    layers: sympy.Expr = sympy.Integer(0)
    in_flight: sympy.Expr = sympy.Integer(1)
    head: bool = False
    #: what the loss holds, in words (costgraph.training.cross_entropy.CrossEntropy.held_words); "" without it
    loss_held: str = ""

    def why(self, values: dict | None = None) -> str:
        """What loads this stage, in words: its layers, the micro-batches it
        keeps in flight, and (the last stage) what the loss holds at its peak, its convention named."""
        def show(x):
            v = as_expr(x).xreplace(values) if values else as_expr(x)
            return (str(int(v)) if v.is_Integer else f"{float(v):.4g}") if v.is_number else str(x)
        out = f"{show(self.layers)} layers × {show(self.in_flight)} micro-batches in flight"
        loss = self.memory.get("loss", 0)
        if self.head and loss != 0:
            v = as_expr(loss).xreplace(values) if values else as_expr(loss)
            said = [self.loss_held] if self.loss_held else []
            said += [f"{int(v):,} bytes"] if v.is_number else []
            out += ", plus the loss" + (f" ({'; '.join(said)})" if said else "")
        return out


@dataclass
class TrainingMemory:
    """:func:`training_memory`'s result: the filled-in ``layout``, one
    :class:`StageMemory` per stage (first and last when ``p`` is a symbol) and
    ``warnings``: what was assumed (an operator with no tensor-parallel layout)."""

    layout: Layout
    stages: list[StageMemory]
    warnings: list[str] = field(default_factory=list)

    def most_loaded(self, values: dict | None = None) -> StageMemory:
        """The stage with the largest total at ``values`` (symbol → int); with
        no values, the first stage (1F1B: it holds the most micro-batches in
        flight). :meth:`StageMemory.why` says what loads it."""
        if not values or len(self.stages) == 1:
            return self.stages[0]
        best, best_v = self.stages[0], None
        for st in self.stages:
            v = st.memory["total"].xreplace(values)
            if not v.is_number:
                return self.stages[0]
            if best_v is None or v > best_v:
                best, best_v = st, v
        return best


def training_memory(cg: CostGraph, layout: Layout, scope: str = "model", *,
                    placement: Placement | None = None, expand: bool = True) -> TrainingMemory:
    """Training memory per device of ``cg`` under ``layout`` (module docstring).

    ``scope="layer"``: one layer (one iteration of the model's one top-level
    repeat group) on one device: its states and its activations for one
    micro-batch, as Korthikanti et al. Table 2 counts them. ``placement``:
    the layout's :class:`~costgraph.parallel.placement.Placement`, if the
    caller has it (otherwise read from
    :func:`costgraph.parallel.placement.placement`, which keeps one per
    graph and layout). ``expand=False``: each stage's quantities left as
    sums of products, not expanded (the same values; the planner compiles
    or substitutes them, :mod:`costgraph.training.plan_forms`).

    Raises
    ------
    CostgraphValueError
        Bad layout settings (see :meth:`Layout.filled`), or ``scope="layer"``
        for a model without exactly one top-level repeat group.
    """
    L = layout.filled()
    from .fp8_options import check_fp8_options

    check_fp8_options(L)   # the FP8 options against the recipe, and delayed scaling's recompute modules
    pl = placement if placement is not None else place(cg, L)
    warned = list(pl.tp.warnings) if pl.tp is not None else []
    prec = get_precision(L.precision)
    lo = None
    if L.lora_rank is not None:
        from .lora import lora

        lo = lora(cg, rank=L.lora_rank, targets=L.lora_targets, dropout=L.lora_dropout)
    states = _States(cg, L, pl, lo)
    drop, extra = (), ()
    if lo is not None:   # a frozen base keeps no inputs for weight gradients; adapters keep theirs
        drop = lo.released
        extra = [(r["path"], r["active"], r["activation_bytes"]) for r in lo.activation_rows(prec)]
    plan = recompute_plan(cg, L, L.attention)   # what the policy keeps (the FLOPs read the same plan)
    warned += plan.warnings
    rows, extras = activation_rows(cg, prec, t=L.t, sp=L.sp, c=L.c, recompute=L.recompute,
                                   attention=L.attention, tp=pl.tp, drop=drop, extra=extra, plan=plan)
    per_layer = {g.path: layer_activation_bytes(cg, g, rows, extras) for g in pl.top}
    if scope == "layer":
        if len(pl.top) != 1:
            raise CostgraphValueError(f"model '{cg.name}' has {len(pl.top)} top-level repeat groups; "
                                      "'layer' needs one")
        g = pl.top[0]
        st = states(states.in_layer.__contains__, scale=1 / as_expr(g.count))
        st.pop("gathered")
        mem = {**st, "activations": per_layer[g.path], "loss": sympy.Integer(0)}
        mem["total"] = sympy.expand(mem["weights"] + mem["gradients"] + mem["optimizer"] + mem["activations"])
        return TrainingMemory(L, [StageMemory(sympy.Integer(0), "one layer", _expand(mem))], warned)
    live = 0
    if plan.live != 0 and pl.top:   # the layers of a checkpointed run, live again while it is re-run
        live_rows, live_extras = activation_rows(cg, prec, t=L.t, sp=L.sp, c=L.c, recompute="none",
                                                 attention=L.attention, tp=pl.tp, drop=drop, extra=extra)
        lives = [layer_activation_bytes(cg, g, live_rows, live_extras) for g in pl.top]
        live = plan.live * (sympy.Max(*lives) if len(lives) > 1 else lives[0])
    loss = _loss_bytes(cg, pl, L.cross_entropy, prec) if L.loss else sympy.Integer(0)
    warned += loss_warnings(cg, L.cross_entropy) if L.loss else []   # a model without a head: the loss assumed, said
    stages = [_stage_memory(states, stage, rows, per_layer, live, loss, expand) for stage in pl.stages]
    _add_fp8(cg, L, pl, stages, plan, sympy.expand if expand else _as_is)
    return TrainingMemory(L, stages, warned)


def _as_is(x):
    """``x`` unexpanded (``training_memory(expand=False)``: the same value, without SymPy's expand)."""
    return x


def _add_fp8(cg: CostGraph, L: Layout, pl: Placement, stages: list, plan, expand=sympy.expand) -> None:
    """An FP8 policy's buffers (:func:`costgraph.training.fp8.fp8_memory`): each part under its
    name, their sum as ``fp8``, added to ``total``, on every stage; the linears' inputs saved in
    FP8 (:func:`costgraph.training.fp8.saved_inputs`) change ``activations``, their bytes under
    ``fp8 saved inputs``."""
    from .fp8 import ATTENTION_SAVED, SAVED, fp8_memory, low_precision_saved, saved_by, saved_inputs
    from .fp8_options import dpa_saved

    for st, stage in zip(stages, pl.stages):
        parts = fp8_memory(cg, L, pl, stage)
        if parts:
            fp8 = expand(sympy.Add(*parts.values()))
            prec = get_precision(L.precision)
            saved, change = saved_inputs(cg, L, pl, stage, prec, plan)
            change = expand(change + low_precision_saved(cg, L, pl, stage, prec, plan))
            if L.fp8_attention:   # FP8 dot-product attention: Q, K, V (and O) saved in FP8
                dpa, dpa_change = dpa_saved(cg, L, pl, stage, prec, saved_by(cg))
                st.memory[ATTENTION_SAVED] = dpa
                change = expand(change + dpa_change)
            st.memory.update(parts, fp8=fp8, activations=expand(st.memory["activations"] + change),
                             total=expand(st.memory["total"] + fp8 + change))
            st.memory[SAVED] = saved


class _States:
    """Model states of a selection of weights under the layout: dense weights
    sharded by ZeRO over the DP × CP group, routed experts over their own
    expert-DP group; each weight as the placement shards it."""

    def __init__(self, cg: CostGraph, L: Layout, pl: Placement, lo):
        self.cg, self.L, self.lo = cg, L, lo
        self.experts = pl.expert_weights
        self.in_layer = {w for w in cg.weights if pl.in_layer(w)}
        self.dense_dp, self.expert_dp = pl.groups["dp"].size, pl.groups["expert_dp"].size
        self.shard = dict(pl.shards)   # per axis; LoRA's quantized bases take the whole divisor, as before
        self.whole = {w: s.total for w, s in self.shard.items()}
        self.per_group: dict = {}   # group path → (one iteration's states, the gathered unit): the same on every stage
        from .fp8 import fp8_param_bytes

        self.weight_bytes = fp8_param_bytes(cg, L.policy)   # FP8 parameters (fp8_params), else empty

    def __call__(self, select, scale=1) -> dict:
        """States of the selected weights, × ``scale`` (the gathered ZeRO-3 unit
        unscaled); ``experts``: the routed experts' part."""
        L, parts, expert_total = self.L, [], sympy.Integer(0)
        for is_expert, dp in ((False, self.dense_dp), (True, self.expert_dp)):
            sel = (lambda w, x=is_expert: select(w) and (w in self.experts) == x)
            if not any(sel(w) for w in self.cg.weights):
                continue
            if self.lo is None:
                s = model_states(self.cg, policy=L.policy, optimizer=L.optimizer, zero=L.zero, dp=dp,
                                 hsdp_group=L.hsdp, shard=self.shard, select=sel, weight_bytes=self.weight_bytes,
                                 gathered_units=L.resolved("zero3_gathered"))
            else:
                from .lora import lora_states

                s = lora_states(self.lo, policy=L.policy, optimizer=L.optimizer, zero=L.zero, dp=dp,
                                hsdp_group=L.hsdp, shard=self.whole, select=sel, quantization=L.quantization)
            if scale != 1:
                s = {k: (v - s["gathered"]) * scale + s["gathered"] if k in ("weights", "total") else
                     v * scale if k != "gathered" else v for k, v in s.items()}
            parts.append(s)
            if is_expert:
                expert_total = s["weights"] + s["gradients"] + s["optimizer"]
        out = {k: sympy.Add(*[s[k] for s in parts]) for k in ("weights", "gradients", "optimizer")}
        out["experts"] = expert_total
        out["gathered"] = sympy.Add(*[s["gathered"] for s in parts])   # inside weights (offload keeps it)
        return out


def _stage_memory(states: _States, stage, rows, per_layer, live, loss, expand: bool = True) -> StageMemory:
    """One stage's bytes per device; ``loss``: what the cross-entropy holds on the last stage (None elsewhere)."""
    L, in_layer = states.L, states.in_layer
    if L.p == 1:
        st = states(lambda w: w in in_layer or w in stage.weights)
    else:   # the stage's own share of each stack's weights, and the stage's own others
        outside = states(lambda w: w not in in_layer and w in stage.weights)
        st = dict(outside)
        for k, v in _layer_states(states, stage, expand).items():
            st[k] = st[k] + v
    act_layers = sympy.Add(*[stage.layers[path] * b for path, b in per_layer.items()])
    act_one = act_layers + sympy.Add(*[r["count"] * r["activation_bytes"] for r in rows
                           if r["path"] in stage.nodes or (r["kind"] == "storage" and "/" not in r["path"])])
    loss = sympy.Integer(0) if loss is None or not stage.head else loss
    act = stage.in_flight * act_one + live + loss
    gathered = st.pop("gathered")
    mem = {**st, "activations": act, "loss": loss}
    if offloaded(L):   # CPU/NVMe offload: what leaves the device (costgraph.training.offload)
        mem.update(offload_memory(mem, L, gathered=gathered, layer_activations=act_layers,
                                  in_flight=stage.in_flight))
    mem["total"] = mem["weights"] + mem["gradients"] + mem["optimizer"] + mem["activations"]
    held = implementation(L.cross_entropy).held_words(L.precision) if L.loss else ""   # the loss's convention
    return StageMemory(stage.index, stage.name, _expand(mem) if expand else mem, sympy.Add(*stage.layers.values()), stage.in_flight,
                       stage.head, loss_held=held)


def _layer_states(states: _States, stage, expand: bool = True) -> dict:
    """States of the layers' weights a stage holds: each top-level group's
    weights × the stage's share of its iterations (``stage.layers[g] / count``;
    ``1/p`` when the split is even). One gathered ZeRO-3 unit in all (the
    largest of the groups'), not one per group. ``expand=False``: the products
    left as they are (the same values once the sizes are numbers: the planner's
    confirmation substitutes them, :mod:`costgraph.training.plan_confirm`)."""
    groups = [(path, n) for path, n in stage.layers.items()]
    if len({sympy.expand(n / _count(states, path)) for path, n in groups}) <= 1 and groups:
        share = groups[0][1] / _count(states, groups[0][0])   # one share for every stack: one call, as before
        return states(states.in_layer.__contains__, scale=share)
    keys = ("weights", "gradients", "optimizer", "experts")
    out = dict.fromkeys(keys, sympy.Integer(0))
    gathered = []
    for path, n in groups:   # one iteration's states (the count cancelled), × the iterations held
        one, unit = _one_iteration(states, path, keys, expand)
        gathered.append(unit)
        for k in keys:
            out[k] += sympy.expand(one[k] * n) if expand else one[k] * n
    # one gathered unit in flight, the largest; none on a stage without layers (CLIP's towers are no top-level
    # repeat group: nothing to split, every weight outside the layers; SymPy's Max() of nothing is -oo)
    unit = sympy.Max(*gathered) if gathered else sympy.Integer(0)
    out["weights"] += unit
    out["gathered"] = unit   # inside weights (offload keeps it)
    return out


def _one_iteration(states: _States, path: str, keys: tuple, expand: bool = True) -> tuple[dict, sympy.Expr]:
    """The states of one iteration of group ``path`` (the gathered ZeRO-3 unit left out of
    ``weights``) and that unit; derived once per group and shared by every stage (the count
    cancelled unless ``expand=False``: then the quotient as it is, the same value at numbers)."""
    if path not in states.per_group:
        sel = (lambda w, g=path: w in states.in_layer and w.startswith(g + "/"))
        unit = states(sel, scale=0)["weights"] if states.L.zero >= 3 else sympy.Integer(0)   # the gathered unit
        x = states(sel, scale=1 / _count(states, path))
        tidy = sympy.cancel if expand else (lambda e: e)
        states.per_group[path] = ({k: tidy(x[k] - (unit if k == "weights" else 0)) for k in keys}, unit)
    return states.per_group[path]


def _count(states: _States, path: str) -> sympy.Expr:
    return as_expr(states.cg.groups[path].count)


def _expand(mem):
    return {k: sympy.expand(v) for k, v in mem.items()}


def loss_bytes_per_logit(convention: str, precision) -> object:
    """Bytes per logit element the loss holds at its peak, the start of its backward, under the
    cross-entropy implementation ``convention`` (:data:`costgraph.choices.CROSS_ENTROPY`; the counts and
    their sources: ``training/cross_entropy.toml``, :mod:`costgraph.training.cross_entropy`); ``precision``:
    the activations' :class:`~costgraph.engine.precision.Precision` (the logits' gradient is cast back to
    it). ``megatron`` and ``megatron-fused``: the fp32 softmax and the 16-bit gradient (4 + 2 under bf16);
    ``te``: the 16-bit logits, overwritten by their gradient (2 under bf16); ``te-fp32grad``: the fp32
    gradient and its 16-bit cast (4 + 2);
    ``pytorch``: log-softmax's output, nll_loss's gradient and log_softmax_backward's output (3 × 4);
    ``pytorch-bf16``: the same three in the activations' dtype, no fp32 upcast (3 × 2 under bf16);
    ``logits``: the fp32 logits only (4).

    Raises
    ------
    CostgraphValueError
        An unknown ``convention``."""
    return implementation(convention).held(int(precision.bytes("act")))


def _loss_bytes(cg: CostGraph, pl: Placement, convention: str = CROSS_ENTROPY.default, precision=None) -> sympy.Expr:
    """What the cross-entropy holds at its peak (:func:`loss_bytes_per_logit` bytes per element of
    each model output), split as TP splits the logits (vocabulary-parallel) and as CP splits the
    sequence."""
    per = loss_bytes_per_logit(convention, precision if precision is not None else get_precision("bf16"))
    return sympy.Add(*[per * cg.tensors[o].numel / (pl.tensor_divisor(o) * pl.sequence_divisor(o))
                       for o in cg.outputs])
