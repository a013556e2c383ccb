"""The tensor-parallel layout rules, one per layout trait (:data:`costgraph.ops.registry.LAYOUTS`).

A walk of :func:`costgraph.parallel.tensor.tensor_parallel` visits the graph's nodes in program order
and lays each out by the rule its operator's ``@op(..., layout=...)`` names; the rules, and the
conventions they follow (column- and row-parallel linears, vocabulary-parallel embeddings, views,
broadcasts, per-channel splits, norms split by heads), are described in the docstring of
:mod:`costgraph.parallel.tensor`. Each rule takes the walk's state (:class:`_Walk`), the node
(:class:`_Node`) and the trait's arguments, and returns the axis the node's outputs are split along
(None: replicated, or placed by the rule itself); a split that reaches an operator needing its input
whole raises :class:`_Conflict`, naming the column-parallel linears to keep whole on the next walk.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.graph import CostGraph
from ..ops.registry import REGISTRY

class _Conflict(Exception):
    def __init__(self, origins: set[str]):
        self.origins = origins


def _same(a, b) -> bool:
    return a == b or sympy.expand(a - b) == 0


@dataclass
class _Walk:
    """The state of one walk over the graph: the layout being built, the
    column-parallel linears each split tensor comes from (``origin``), each
    node's auxiliary tensors (its kept states, ``aux``), the model's vocabulary
    (the last axis of its outputs) and the nodes of operators that declare no
    layout (``unlaid``: kind → paths)."""

    cg: CostGraph
    tp: TensorParallel   # costgraph.parallel.tensor's (not imported: tensor imports this module)
    forced: set[str]
    origin: dict[str, set[str]] = field(default_factory=dict)
    aux: dict[str, list[str]] = field(default_factory=dict)
    vocab: list = field(default_factory=list)
    unlaid: dict[str, list[str]] = field(default_factory=dict)
    readers: dict[str, list[str]] = field(default_factory=dict)   # tensor id → kinds of the ops reading it

    def rank(self, tid: str) -> int:
        return len(self.cg.tensors[tid].shape)

    def need_whole(self, *tids: str) -> None:
        """Raise :class:`_Conflict` naming the linears a split of ``tids`` came from."""
        bad = set()
        for x in tids:
            if x in self.tp.split:
                bad |= self.origin.get(x, set())
        if bad:
            raise _Conflict(bad)

    def assign(self, tids, axis: int, src: set[str]) -> None:
        for o in tids:
            self.tp.split[o], self.origin[o] = axis, src


@dataclass
class _Node:
    """An operator node as a layout rule sees it: its inputs' split axes
    (``axes``, None where replicated) and ranks, and ``src``, the
    column-parallel linears its output's split comes from (a rule may set it)."""

    path: str
    d: dict
    ins: list[str]
    outs: list[str]
    axes: list
    ranks: list[int]
    src: set[str]


def _place(w: _Walk, n: _Node, out_axis: int | None) -> None:
    """Split ``n``'s outputs (and auxiliary tensors) along ``out_axis``."""
    if out_axis is None:
        return
    if any(w.rank(o) > out_axis and w.cg.tensors[o].shape[out_axis] == 1 for o in n.outs):
        w.need_whole(*n.ins)   # a split cannot land on an axis of one (MLA's single latent "head")
    w.assign([o for o in n.outs + w.aux.get(n.path, []) if w.rank(o) > out_axis], out_axis, n.src)


# ----------------------------------------------------------------- the rules, one per LAYOUTS name
# Each takes the walk, the node and the trait's arguments and returns the axis its
# outputs are split along (None: replicated, or placed by the rule itself).


def _follow(w: _Walk, n: _Node) -> int | None:
    return n.axes[0] if n.axes else None


def _whole_last(w: _Walk, n: _Node) -> int | None:
    if n.axes[0] is not None and n.axes[0] == n.ranks[0] - 1:
        w.need_whole(n.ins[0])
    return n.axes[0]


def _slice_last(w: _Walk, n: _Node) -> int | None:
    """``slice`` of the last axis: whole (:func:`_whole_last`), unless the model declares the
    projection before laid out rank by rank (``grouped = true``) and its split is on that axis:
    then each rank takes its shard of the part: vLLM's Qwen3-Next (vllm-project/vllm
    ``vllm/model_executor/models/qwen3_next.py`` @ 002d6073, the gated DeltaNet built with
    ``gqa_interleaved_layout=True``) makes ``in_proj_qkvz`` one column-parallel linear whose
    checkpoint rows are grouped per key head, and ``fix_query_key_value_ordering`` views the rank's
    output as ``[T, num_k_heads / tp, 2·head_k_dim + 2·head_v_dim·num_v_heads / num_k_heads]``;
    TensorRT-LLM's likewise (``num_k_heads_local = num_k_heads // attn_tp_size``)."""
    if n.d["attrs"].get("grouped") and n.axes[0] == n.ranks[0] - 1:
        return n.axes[0]
    return _whole_last(w, n)


def _norm_last(w: _Walk, n: _Node) -> int | None:
    """Along the last axis: whole, unless that axis is split and every reader of the output splits
    it into heads next (module docstring, "norms split by heads"), or its input is the heads of an
    attention merged (MiniMax-01's lightning attention: vLLM's ``MiniMaxText01RMSNormTP`` over the
    rank's heads, the variance all-reduced): then split, the weight with it."""
    last = n.ranks[0] - 1
    if n.axes[0] == last:
        readers = [k for o in n.outs for k in w.readers.get(o, [])]
        src = w.cg.nodes.get(getattr(w.cg.tensors.get(n.ins[0]), "producer", None))
        if readers and all(k == "split_heads" for k in readers) or (src or {}).get("kind") == "merge_heads":
            for wid in n.d["cost"].weights:
                w.tp.weights[wid] = w.tp.t
            w.tp.split_norms.append(n.path)
            return last
    return _whole_last(w, n)


def _whole(w: _Walk, n: _Node) -> None:
    w.need_whole(*n.ins)
    return None


def _broadcast(w: _Walk, n: _Node) -> int | None:
    """Operands aligned from the right; a replicated operand is sliced locally
    to match a split one (T5's position bias added to scores split by heads)."""
    ks = {r - a for a, r in zip(n.axes, n.ranks) if a is not None}
    if not ks:
        return None
    if len(ks) > 1:
        w.need_whole(*n.ins)
    return w.rank(n.outs[0]) - ks.pop()


def _view(w: _Walk, n: _Node, *pairs: tuple[int, int]) -> int | None:
    ax, r = n.axes[0], n.ranks[0]
    return None if ax is None else {r + i: r + j for i, j in pairs}.get(ax, ax)


def _join_last(w: _Walk, n: _Node) -> int | None:
    """Along the last axis; a replicated part is sliced locally. Parts each split along their own
    last axis join rank by rank, each rank its shard of every part (vLLM's merged column-parallel
    projections; Kimi Linear's q, k, v before KDA's short convolutions, vllm/model_executor/layers/
    kda.py: ``local_num_heads = num_heads // tp`` per rank): the join is split along its last axis."""
    if all(a is not None and a == r - 1 for a, r in zip(n.axes, n.ranks)):
        return n.ranks[0] - 1
    along = {a for a in n.axes if a is not None}
    if len(along) > 1 or n.ranks[0] - 1 in along:
        w.need_whole(*n.ins)
    return along.pop() if along else None


def _per_channel(w: _Walk, n: _Node, *names: str) -> None:
    """Megatron-LM ``megatron/core/ssm/mamba_mixer.py``: conv1d, A_log, D and
    dt_bias hold d_inner/t channels per rank. The channels (last axis of the
    named operands) split, the others whole; the weights split with them, and
    so does the state kept at inference ([B, C, k], [B, D, N]: channels on axis 1)."""
    tensors = [p.name for p in REGISTRY[n.d["kind"]].params if p.kind == "tensor"]
    per = [n.ins[tensors.index(x)] for x in names]
    rest = [x for x, pname in zip(n.ins, tensors) if pname not in names]
    split = w.tp.split
    if all(split.get(x) == w.rank(x) - 1 for x in per) and not any(x in split for x in rest):
        for wid in n.d["cost"].weights:
            w.tp.weights[wid] = w.tp.t
        for o in n.outs:   # [B, S, C] along its channels; a per-head output [B, H, S, d] (KDA, Gated DeltaNet) its heads
            w.assign([o], 1 if w.rank(o) == 4 else w.rank(o) - 1, n.src)
        w.assign(w.aux.get(n.path, []), 1, n.src)
    elif any(x in split for x in n.ins):
        w.need_whole(*n.ins)
    return None


def _column_row(w: _Walk, n: _Node) -> int | None:
    """Column-parallel reading a replicated input (unless kept whole), row-parallel
    reading one split along its features; a split elsewhere carries through."""
    tp, weights = w.tp, n.d["cost"].weights
    ax, r = n.axes[0], n.ranks[0]
    weight = [x for x in weights if x.endswith("/weight")]
    bias = [x for x in weights if x.endswith("/bias")]
    if ax is None:
        if n.path in w.forced or not n.d["attrs"].get("tp", True):
            return None
        n.src = {n.path}
        for x in weight + bias:
            tp.weights[x] = tp.t
        tp.column.append(n.path)
        return r - 1
    if ax == r - 1:
        for x in weight:
            tp.weights[x] = tp.t
        tp.row.append(n.path)
        n.src = set()
        return None
    return ax


def _vocab(w: _Walk, n: _Node) -> None:
    if any(_same(n.d["attrs"]["num"], v) for v in w.vocab):
        for x in n.d["cost"].weights:
            w.tp.weights[x] = w.tp.t
        w.tp.vocab.append(n.path)
    return None


def _batched(w: _Walk, n: _Node) -> int | None:
    (ax, ay), (rx, _) = n.axes, n.ranks
    if ax is None and ay is None:
        return None
    one = ax if ax is not None else ay
    if (ax == ay or ay is None or ax is None) and one < rx - 2:
        return one
    w.need_whole(*n.ins)
    return None


# layout name (costgraph.ops.registry.LAYOUTS) → its rule
_RULES = {"follow": _follow, "whole_last": _whole_last, "slice_last": _slice_last, "norm_last": _norm_last, "whole": _whole, "broadcast": _broadcast,
          "per_channel": _per_channel, "view": _view, "join_last": _join_last, "column_row": _column_row,
          "vocab": _vocab, "batched": _batched}