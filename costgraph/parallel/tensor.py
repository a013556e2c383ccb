"""Tensor (and sequence) parallelism derived from the graph.

Megatron-LM's tensor parallelism (Shoeybi et al. 2019, §3) splits each
Transformer layer over ``t`` devices. Which weight and which tensor is split is
not written per model here: it is read off the operator graph by these rules,
applied to every node in program order.

* A ``linear`` reading a *replicated* tensor is **column-parallel**: its weight
  (and bias) split by ``t`` along the output features, its output split along
  the last axis.
* A ``linear`` reading a tensor split along its last axis is **row-parallel**:
  its weight split by ``t`` along the input features, its bias replicated, its
  output replicated (an all-reduce, or a reduce-scatter with SP).
* An ``embedding`` whose table has a row per entry of the vocabulary (the
  last axis of the model's output) is **vocabulary-parallel**: its table
  split by ``t``, its output replicated (an all-reduce); other tables
  (learned positions) stay replicated. The output head is a linear reading a
  replicated tensor, so column-parallel: logits split along the vocabulary
  (vocab-parallel cross-entropy); a tied head shares the split table.
* Views and reshapes (``split``, ``split_heads``, ``transpose``,
  ``merge_heads``, ``repeat_kv``, ``cache``), activations, ``scale``,
  ``dropout`` (with its mask), ``rope`` and products of two activations
  follow their inputs: a split on the features becomes a split on the heads.
* Mamba's ``conv1d`` and ``selective_scan`` work per channel: a split of
  their channels (the last axis of ``x``, and of ``Δ``) carries through, ``B``
  and ``C`` stay whole, and their weights (the convolution's kernel and bias,
  ``A_log``, ``D``) and inference states (``[B, C, k]``, ``[B, D, N]``) split
  with the channels. With the linear rules this is Megatron-LM's Mamba layer
  (``megatron/core/ssm/mamba_mixer.py``): ``in_proj`` column-parallel,
  ``conv1d``/``A``/``D`` and ``dt_proj`` per channel (``d_inner / t`` on each
  rank), ``out_proj`` row-parallel; Mamba-1's ``x_proj`` (``d_inner → R + 2N``)
  reads split channels, so it is row-parallel (an all-reduce of its small
  output), and ``dt_proj`` then reads a whole tensor: column-parallel — as
  GPT-NeoX's ``ParallelMambaBlock`` (``megatron/model/mamba/mamba.py``:
  ``x_proj`` a ``RowParallelLinear``, ``dt_proj`` ``R → d_inner/t`` per rank).
* Operators that need a whole axis — ``softmax``, norms and ``rope`` along
  the last axis, ``slice`` and ``concat`` of the last axis, a sum of a split
  and a replicated tensor of full size (the residual add) — require their
  input whole along it. When a split reaches one, the column-parallel linears
  it came from are made **replicated** instead (MLA's down-projections before
  their norms, an MoE router before its softmax), and the walk starts again.
  Everything else stays replicated: norms, residual adds and the tensors
  around them. In a sum of a split and a replicated tensor, each device
  takes its part of the replicated one (T5's position bias, split by heads).
* Where these rules cannot decide as a framework does, the model file can
  say it: ``linear(x, n, tp = false)`` keeps that linear replicated.

``sp=True`` adds sequence parallelism: every replicated activation with a
sequence axis (the last axis of an ``index`` input, e.g. ``tokens[b, s]``)
is split along it by ``t`` (LayerNorm inputs, dropout masks, the layer's input).

For GPT this gives Korthikanti et al. 2022 Table 2: per layer
``sbh(10 + 24/t + 5as/(ht))`` bytes with TP, ``sbh/t · (34 + 5as/h)`` with
TP + SP (tested). The rules assume heads divide by ``t`` (Megatron requires
it; for K/V heads fewer than ``t`` Megatron replicates them, which this does
not model).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..graph import CostGraph

# operators whose output has the input's shape and whose split follows it
_FOLLOW = {"gelu", "silu", "relu", "softplus", "scale", "dropout", "cache", "zeros", "repeat_kv",
           "sigmoid", "tanh", "square", "relu2", "clamp", "softcap", "cast"}
# operators that need their last axis whole
_WHOLE_LAST = {"softmax", "layernorm", "rmsnorm", "rope", "slice"}


@dataclass
class TensorParallel:
    """Where tensor parallelism of degree ``t`` splits a graph.

    ``split``: tensor id → the axis it is split along (absent: replicated);
    ``weights``: weight id → divisor (``t`` or 1); ``column``, ``row``,
    ``vocab``: node paths of column-parallel, row-parallel and
    vocabulary-parallel operators; ``replicated``: linears kept whole because
    a consumer needs their whole output; ``sequence``: tensor ids split along
    the sequence by SP.
    """

    t: sympy.Expr
    sp: bool
    split: dict[str, int] = field(default_factory=dict)
    weights: dict[str, sympy.Expr] = field(default_factory=dict)
    column: list[str] = field(default_factory=list)
    row: list[str] = field(default_factory=list)
    vocab: list[str] = field(default_factory=list)
    replicated: set[str] = field(default_factory=set)
    sequence: set[str] = field(default_factory=set)

    def tensor_divisor(self, tid: str) -> sympy.Expr:
        """How many devices share tensor ``tid`` (t if split by TP or SP, else 1)."""
        return self.t if tid in self.split or tid in self.sequence else sympy.Integer(1)

    def weight_divisor(self, wid: str) -> sympy.Expr:
        return self.weights.get(wid, sympy.Integer(1))


class _Conflict(Exception):
    def __init__(self, origins: set[str]):
        self.origins = origins


def tensor_parallel(cg: CostGraph, t: sympy.Expr | int, sp: bool = False) -> TensorParallel:
    """Derive the TP (and SP) layout of ``cg`` for degree ``t`` (see the module docstring).

    ``t`` may be a symbol (``costgraph.symbols.dim("t")``) or an int; the
    result's divisors are ``t`` or 1.
    """
    t = sympy.Integer(t) if isinstance(t, int) else t
    forced: set[str] = set()
    while True:
        try:
            tp = _walk(cg, t, sp, forced)
            break
        except _Conflict as c:
            new = c.origins - forced
            if not new:   # cannot happen: every split starts at a column-parallel linear
                raise AssertionError("tensor-parallel walk did not converge") from None
            forced |= new
    if sp:
        seq = sequence_dims(cg)
        for tid, ten in cg.tensors.items():
            if tid in tp.split or ten.role == "index":
                continue
            if any(any(_same(d, s) for s in seq) for d in ten.shape):
                tp.sequence.add(tid)
    return tp


def _same(a, b) -> bool:
    return a == b or sympy.expand(a - b) == 0


def sequence_dims(cg: CostGraph) -> list[sympy.Expr]:
    """The sequence lengths of the model: the last axis of each ``index`` input."""
    out = []
    for path, d in cg.nodes.items():
        if d["kind"] == "input":
            ten = cg.tensors[path]
            if ten.role == "index" and ten.shape and ten.shape[-1] not in out:
                out.append(ten.shape[-1])
    return out


def _walk(cg: CostGraph, t, sp: bool, forced: set[str]) -> TensorParallel:
    tp = TensorParallel(t, sp, replicated=set(forced))
    split = tp.split
    origin: dict[str, set[str]] = {}
    aux: dict[str, list[str]] = {}
    for tid, ten in cg.tensors.items():
        if ten.producer in cg.nodes and tid not in cg.nodes[ten.producer]["outputs"] and tid != ten.producer:
            aux.setdefault(ten.producer, []).append(tid)

    # the vocabulary: the features of the model's outputs (the logits)
    vocab = [cg.tensors[o].shape[-1] for o in cg.outputs if cg.tensors[o].shape]

    def need_whole(*tids):
        bad = set()
        for x in tids:
            if x in split:
                bad |= origin.get(x, set())
        if bad:
            raise _Conflict(bad)

    for path, d in cg.ops():
        kind, ins, outs = d["kind"], list(d["inputs"]), list(d["outputs"])
        c = d["cost"]
        axes = [split.get(x) for x in ins]
        ranks = [len(cg.tensors[x].shape) for x in ins]
        src = set().union(*(origin.get(x, set()) for x in ins)) if ins else set()
        out_axis = None
        if kind == "embedding":
            if any(_same(d["attrs"]["num"], v) for v in vocab):
                for w in c.weights:
                    tp.weights[w] = t
                tp.vocab.append(path)
        elif kind == "linear":
            ax, r = axes[0], ranks[0]
            weight = [w for w in c.weights if w.endswith("/weight")]
            bias = [w for w in c.weights if w.endswith("/bias")]
            if ax is None:
                if path not in forced and d["attrs"].get("tp", True):
                    out_axis, src = r - 1, {path}
                    for w in weight + bias:
                        tp.weights[w] = t
                    tp.column.append(path)
            elif ax == r - 1:
                for w in weight:
                    tp.weights[w] = t
                tp.row.append(path)
                src = set()
            else:
                out_axis = ax
        elif kind == "matmul":
            (ax, ay), (rx, _) = axes, ranks
            if ax is None and ay is None:
                pass
            elif (ax == ay or ay is None or ax is None) and (ax if ax is not None else ay) < rx - 2:
                out_axis = ax if ax is not None else ay
            else:
                need_whole(*ins)
        elif kind in ("conv1d", "selective_scan"):
            # per channel (Megatron-LM megatron/core/ssm/mamba_mixer.py: conv1d, A_log, D and dt_bias
            # hold d_inner/t channels per rank): the channels (last axis of x, and of dt) split, B and C
            # whole; the weights split with them, and so is the state kept at inference ([B, C, k],
            # [B, D, N]: channels on axis 1)
            per_channel = ins[:2] if kind == "selective_scan" else ins[:1]
            if all(split.get(x) == len(cg.tensors[x].shape) - 1 for x in per_channel) \
                    and not any(x in split for x in ins[len(per_channel):]):
                for w in c.weights:
                    tp.weights[w] = t
                for o in outs:
                    split[o], origin[o] = len(cg.tensors[o].shape) - 1, src
                for o in aux.get(path, []):
                    split[o], origin[o] = 1, src
            elif any(x in split for x in ins):
                need_whole(*ins)
        elif kind in _FOLLOW:
            out_axis = axes[0] if axes else None
        elif kind in _WHOLE_LAST:
            if axes[0] is not None and axes[0] == ranks[0] - 1:
                need_whole(ins[0])
            out_axis = axes[0]
        elif kind == "split":
            out_axis = axes[0]
        elif kind == "split_heads":
            ax, r = axes[0], ranks[0]
            out_axis = None if ax is None else {r - 1: r - 2, r - 2: r}.get(ax, ax)
        elif kind == "merge_heads":
            ax, r = axes[0], ranks[0]
            out_axis = None if ax is None else {r - 3: r - 2, r - 2: r - 3, r - 1: r - 2}.get(ax, ax)
        elif kind == "transpose":
            ax, r = axes[0], ranks[0]
            out_axis = None if ax is None else {r - 1: r - 2, r - 2: r - 1}.get(ax, ax)
        elif kind == "concat":   # along the last axis; a replicated part is sliced locally
            along = {a for a in axes if a is not None}
            if len(along) > 1 or ranks[0] - 1 in along:
                need_whole(*ins)
            out_axis = along.pop() if along else None
        elif kind in ("add", "sub", "mul", "maximum"):
            out_axis = _broadcast(cg, ins, axes, ranks, outs, need_whole)
        else:   # an operator with no rule here: its inputs must be whole
            need_whole(*ins)
        if out_axis is not None and outs and any(
                len(cg.tensors[o].shape) > out_axis and cg.tensors[o].shape[out_axis] == 1 for o in outs):
            need_whole(*ins)   # a split cannot land on an axis of one (MLA's single latent "head")
        if out_axis is not None:
            for o in outs + aux.get(path, []):
                if len(cg.tensors[o].shape) > out_axis:
                    split[o] = out_axis
                    origin[o] = src
    return tp


def _broadcast(cg, ins, axes, ranks, outs, need_whole):
    """Split of an elementwise op's output: operands aligned from the right; a
    replicated operand is sliced locally to match a split one (T5's position
    bias added to scores split by heads)."""
    out_rank = len(cg.tensors[outs[0]].shape)
    ks = {r - a for a, r in zip(axes, ranks) if a is not None}
    if not ks:
        return None
    if len(ks) > 1:
        need_whole(*ins)
    return out_rank - ks.pop()
