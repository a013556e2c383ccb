"""Training memory per device under a parallel layout — the entry point that
puts the graph analyses together.

For every pipeline stage (:mod:`costgraph.parallel.pipeline`), the bytes one
device of that stage holds:

``weights``, ``gradients``, ``optimizer``
    Model states (:func:`costgraph.training.states.model_states`) of the
    weights the stage holds: ``l/p`` of every layer's weights, the
    embeddings on the first stage, final norm and head on the last (a tied
    table on both). Each weight divided as tensor parallelism splits it
    (:mod:`costgraph.parallel.tensor`, derived from the graph); routed
    experts (a ``repeat E as ... active k`` group) divided by ``e`` (expert
    parallelism) and, with expert tensor parallelism ``etp = t``, by ``t``.
    ZeRO shards over the data-parallel group of ``d·c`` devices (Megatron's
    distributed optimizer shards over DP × CP); expert weights over their
    own data-parallel group of ``d·c·t / (e·etp)`` devices.
``activations``
    What the stage keeps for backward (:mod:`costgraph.activations`:
    recomputation, flash attention, TP/SP splits, context parallelism
    dividing every tensor with a sequence axis by ``c``), for the
    micro-batches it holds in flight (1F1B: ``min(p − i, m)`` on stage
    ``i``), plus, on the last stage, the loss: the logits in fp32 (4 bytes
    an element; PyTorch's and Megatron's cross-entropy upcast them), split
    as the logits are. With full recomputation one layer's activations are
    live again during its recompute (added once, not per micro-batch).
``total``
    The sum.

Data parallelism ``d = gpus / (t·p·c)``; ``gpus`` must be a multiple.
Symbols: ``t p d c e m`` from :mod:`costgraph.symbols` (``N_d`` is the
data-parallel degree when it is not given, see
:data:`costgraph.training.states.DP`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy


from .. import choices
from ..activations import activation_rows, layer_activation_bytes
from ..errors import CostgraphValueError
from ..graph import CostGraph
from ..parallel.pipeline import pipeline_stages
from ..parallel.tensor import sequence_dims, tensor_parallel
from ..precision import precision as get_precision
from ..symbols import as_expr
from .states import DP, model_states

MEMORY_KEYS = ("weights", "gradients", "optimizer", "activations", "total")


@dataclass
class Layout:
    """A parallel layout and training settings (defaults filled in).

    ``t`` TP, ``p`` PP, ``c`` CP, ``e`` EP, ``etp`` expert TP (1 or ``t``),
    ``d`` DP (from ``gpus``, or the symbol ``N_d``), ``sp`` sequence
    parallelism, ``zero`` ZeRO stage, ``m`` micro-batches per step (default
    ``p``), ``schedule`` and ``v`` (virtual stages, interleaved schedule),
    ``recompute``, ``attention``, ``policy``, ``optimizer``, ``precision``
    (activation bytes), ``hsdp`` (HSDP group size), ``loss`` (count the
    fp32 logits), ``gpus``; ``lora_rank``, ``lora_targets``, ``lora_dropout``
    (LoRA adapters on the named linears, the base frozen:
    :mod:`costgraph.training.lora`) and ``quantization`` (QLoRA: the frozen
    base in ``nf4``, ``nf4-double`` or ``int8``)."""

    t: object = 1
    p: object = 1
    c: object = 1
    e: object = 1
    etp: object = None
    d: object = None
    gpus: int | None = None
    sp: bool = False
    zero: int = choices.ZERO_STAGE.default
    m: object = None
    schedule: str = choices.SCHEDULE.default
    v: int = 1
    recompute: str = choices.RECOMPUTE.default
    attention: str = choices.ATTENTION.default
    policy: str = choices.DEFAULT_POLICY
    optimizer: str = choices.DEFAULT_OPTIMIZER
    precision: str = choices.PRECISION.default
    hsdp: object = None
    loss: bool = True
    lora_rank: object = None
    lora_targets: object = choices.DEFAULT_LORA_TARGETS
    lora_dropout: bool = False
    quantization: str | None = None

    def filled(self) -> "Layout":
        """Check the settings and fill the derived ones (``d``, ``m``, ``etp``).

        Raises
        ------
        CostgraphValueError
            An unknown name, a degree that is not a positive whole number, or
            ``gpus`` not a multiple of ``t·p·c``.
        """
        out = Layout(**self.__dict__)
        for name in ("t", "p", "c", "e", "v"):
            _degree(getattr(out, name), name)
        for name in ("sp", "loss", "lora_dropout"):
            if not isinstance(getattr(out, name), bool):
                raise CostgraphValueError(f"{name} must be true or false, got {getattr(out, name)!r}")
        if out.m is not None:
            _degree(out.m, "m (micro-batches per step)")
        if out.hsdp is not None:
            _degree(out.hsdp, "hsdp")
        if out.lora_rank is not None:
            _degree(out.lora_rank, "lora_rank")
        if isinstance(out.zero, bool) or not isinstance(out.zero, int):
            raise CostgraphValueError(f"zero must be a stage 0-3, got {out.zero!r}")
        if out.zero not in choices.ZERO_STAGE.values:
            raise CostgraphValueError(f"ZeRO stage {out.zero!r} does not exist", hint="0, 1, 2 or 3")
        for choice in (choices.RECOMPUTE, choices.ATTENTION, choices.SCHEDULE):
            if getattr(out, choice.name) not in choice.values:
                raise CostgraphValueError(f"unknown {choice.name} {getattr(out, choice.name)!r}", hint=choice.hint())
        if out.hsdp is not None and out.zero == 0:
            raise CostgraphValueError("HSDP shards ZeRO's states within groups: it needs ZeRO 1, 2 or 3")
        if out.schedule != "interleaved" and out.v != 1:
            raise CostgraphValueError("virtual stages (v) need the interleaved schedule", hint="--schedule interleaved")
        if out.sp and out.t == 1:
            raise CostgraphValueError("sequence parallelism splits along s the regions tensor parallelism replicates: "
                                      "it needs t > 1", hint="add --tp T")
        if out.gpus is not None:
            _degree(out.gpus, "gpus")
            per = out.t * out.p * out.c
            if isinstance(per, int) and out.gpus % per:
                raise CostgraphValueError(f"{out.gpus} GPUs do not divide into t·p·c = {per}",
                                          hint="gpus = t × p × c × d for a whole data-parallel degree d")
            out.d = out.gpus // per if isinstance(per, int) else sympy.Integer(out.gpus) / per
        if out.d is None:
            out.d = DP
        if out.m is None:
            out.m = out.p
        if out.etp is None:
            out.etp = 1
        if out.quantization is not None and out.lora_rank is None:
            raise CostgraphValueError("a quantized base is frozen: quantization needs LoRA adapters",
                                      hint="add --lora R (QLoRA)")
        if out.etp not in (1, out.t):
            raise CostgraphValueError("expert tensor parallelism is 1 or t", hint="--etp 1 (default) or --etp T")
        if isinstance(out.e, int) and isinstance(out.d, int) and isinstance(out.t, int) and isinstance(out.c, int) \
                and (out.d * out.c * out.t) % (out.e * out.etp):
            raise CostgraphValueError(f"expert parallelism e·etp = {out.e * out.etp} must divide d·c·t = "
                                      f"{out.d * out.c * out.t}", hint="experts are spread over data-parallel ranks")
        return out


def _degree(v, name):
    if isinstance(v, bool) or not (isinstance(v, int) and v > 0 or isinstance(v, sympy.Expr) and v.is_positive):
        raise CostgraphValueError(f"{name} must be a positive whole number, got {v!r}")


@dataclass
class StageMemory:
    """Bytes per device of one pipeline stage: :data:`MEMORY_KEYS` plus ``loss``
    (the fp32 logits, inside ``activations``) and ``experts`` (the routed
    experts' weights, gradients and optimizer states, inside those three)."""

    index: sympy.Expr
    name: str
    memory: dict[str, sympy.Expr] = field(default_factory=dict)


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
        no values, the first stage (it holds the most micro-batches in flight)."""
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


def _experts(cg: CostGraph) -> set[str]:
    """Weight ids of routed experts: inside a group with fewer active copies than copies."""
    groups = [g.path for g in cg.groups.values() if sympy.expand(g.count - g.active) != 0]
    return {w for w in cg.weights if any(w.startswith(g + "/") for g in groups)}


def training_memory(cg: CostGraph, layout: Layout, scope: str = "model") -> TrainingMemory:
    """Training memory per device of ``cg`` under ``layout`` (module docstring).

    ``scope="layer"``: one layer (one iteration of the model's one top-level
    repeat group) on one device: its states and its activations for one
    micro-batch, as Korthikanti et al. Table 2 counts them.

    Raises
    ------
    CostgraphValueError
        Bad layout settings (see :meth:`Layout.filled`), or ``scope="layer"``
        for a model without exactly one top-level repeat group.
    """
    L = layout.filled()
    prec = get_precision(L.precision)
    tp = tensor_parallel(cg, L.t, L.sp) if L.t != 1 else None
    warned = list(tp.warnings) if tp is not None else []
    experts = _experts(cg)
    top = [g for path, g in cg.groups.items() if "/" not in path]
    in_layer = {w for w in cg.weights if any(w.startswith(g.path + "/") for g in top)}

    def divisor(wid):
        div = sympy.Integer(1) if tp is None else tp.weight_divisor(wid)
        if wid in experts:
            div = (div if L.etp != 1 else 1) * L.e
        return div

    shard = {w: divisor(w) for w in cg.weights if divisor(w) != 1}
    lo = None
    if L.lora_rank is not None:
        from .lora import lora, lora_states

        lo = lora(cg, rank=L.lora_rank, targets=L.lora_targets, dropout=L.lora_dropout)
    dense_dp = as_expr(L.d) * as_expr(L.c)
    expert_dp = dense_dp * as_expr(L.t) / (as_expr(L.e) * as_expr(L.etp))

    def states(select, scale=1):
        """States of the selected weights (experts sharded over their own group), × scale."""
        parts, expert_total = [], sympy.Integer(0)
        for is_expert, group, dp in ((False, lambda w: w not in experts, dense_dp),
                                     (True, lambda w: w in experts, expert_dp)):
            if not any(select(w) and group(w) for w in cg.weights):
                continue
            sel = (lambda w, g=group: select(w) and g(w))
            if lo is None:
                s = model_states(cg, policy=L.policy, optimizer=L.optimizer, zero=L.zero, dp=dp,
                                 hsdp_group=L.hsdp, shard=shard, select=sel)
            else:
                s = lora_states(lo, policy=L.policy, optimizer=L.optimizer, zero=L.zero, dp=dp,
                                hsdp_group=L.hsdp, shard=shard, select=sel, quantization=L.quantization)
            if scale != 1:
                s = {k: (v - s["gathered"]) * scale + s["gathered"] if k in ("weights", "total") else
                     v * scale if k != "gathered" else v for k, v in s.items()}
            parts.append(s)
            if is_expert:
                expert_total = s["weights"] + s["gradients"] + s["optimizer"]
        out = {k: sympy.Add(*[s[k] for s in parts]) for k in ("weights", "gradients", "optimizer")}
        out["experts"] = expert_total
        return out

    drop, extra = (), ()
    if lo is not None:   # a frozen base keeps no inputs for weight gradients; adapters keep theirs
        drop = lo.released
        extra = [(r["path"], r["active"], r["activation_bytes"]) for r in lo.activation_rows(prec)]
    rows, extras = activation_rows(cg, prec, t=L.t, sp=L.sp, c=L.c, recompute=L.recompute,
                                   attention=L.attention, tp=tp, drop=drop, extra=extra)
    per_layer = {g.path: layer_activation_bytes(cg, g, rows, extras) for g in top}
    if scope == "layer":
        if len(top) != 1:
            raise CostgraphValueError(f"model '{cg.name}' has {len(top)} top-level repeat groups; 'layer' needs one")
        g = top[0]
        st = states(lambda w: w in in_layer, scale=1 / as_expr(g.count))
        mem = {**st, "activations": per_layer[g.path], "loss": sympy.Integer(0)}
        mem["total"] = sympy.expand(mem["weights"] + mem["gradients"] + mem["optimizer"] + mem["activations"])
        return TrainingMemory(L, [StageMemory(sympy.Integer(0), "one layer", _expand(mem))], warned)
    live = 0
    if L.recompute == "full" and top:
        live_rows, live_extras = activation_rows(cg, prec, t=L.t, sp=L.sp, c=L.c, recompute="none",
                                                 attention=L.attention, tp=tp, drop=drop, extra=extra)
        lives = [layer_activation_bytes(cg, g, live_rows, live_extras) for g in top]
        live = sympy.Max(*lives) if len(lives) > 1 else lives[0]
    loss = _loss_bytes(cg, tp, L) if L.loss else sympy.Integer(0)
    out = []
    stages = pipeline_stages(cg, L.p, L.m, L.schedule, L.v)
    for i, stage in enumerate(stages):
        last = i == len(stages) - 1
        if L.p == 1:
            st = states(lambda w, s=stage: w in in_layer or w in s.weights)
        else:   # l/p of the layers' weights, and the stage's own others
            outside = states(lambda w, s=stage: w not in in_layer and w in s.weights)
            layer_part = states(lambda w: w in in_layer, scale=1 / as_expr(L.p))
            st = {k: outside[k] + layer_part[k] for k in outside}
        act_one = sympy.Add(*[stage.layers[g.path] * per_layer[g.path] for g in top])
        act_one += sympy.Add(*[r["count"] * r["activation_bytes"] for r in rows
                               if r["path"] in stage.nodes or (r["kind"] == "storage" and "/" not in r["path"])])
        act = stage.in_flight * act_one + live + (loss if last else 0)
        mem = {**st, "activations": act, "loss": loss if last else sympy.Integer(0)}
        mem["total"] = mem["weights"] + mem["gradients"] + mem["optimizer"] + mem["activations"]
        out.append(StageMemory(stage.index, stage.name, _expand(mem)))
    return TrainingMemory(L, out, warned)




def _expand(mem):
    return {k: sympy.expand(v) for k, v in mem.items()}


def _loss_bytes(cg: CostGraph, tp, L: Layout) -> sympy.Expr:
    """fp32 logits kept by the cross-entropy: 4 bytes per element of each
    model output, split as TP splits the logits (vocabulary-parallel) and as
    CP splits the sequence."""
    seq = sequence_dims(cg)
    total = []
    for o in cg.outputs:
        t = cg.tensors[o]
        div = 1 if tp is None else tp.tensor_divisor(o)
        if L.c != 1 and any(any(sympy.expand(d - s) == 0 for s in seq) for d in t.shape):
            div = div * L.c
        total.append(4 * t.numel / div)
    return sympy.Add(*total)
