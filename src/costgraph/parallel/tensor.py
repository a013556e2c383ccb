"""Tensor (and sequence) parallelism derived from the graph.

Megatron-LM's tensor parallelism (Shoeybi et al. 2019, §3) splits each
Transformer layer over ``t`` devices. Which weight and which tensor is split is
not written per model here: it is read off the operator graph, every node in
program order, by the rule its operator's *layout trait* names (declared on
the operator, ``@op(..., layout=...)`` in :mod:`costgraph.ops`; the names are
:data:`costgraph.ops.registry.LAYOUTS`, one rule each in
:mod:`costgraph.parallel.tensor_rules`). An operator that declares no layout is taken to need its inputs
whole, its output replicated, and :attr:`TensorParallel.warnings` names it.
The rules:

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
  ``merge_heads``: ``view``; ``repeat_kv``, ``cache``: ``follow``),
  activations, ``scale``, ``dropout`` (with its mask) and products of two
  activations follow their inputs: a split on the features becomes a split
  on the heads.
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
* **Norms split by heads** (``norm_last``: ``rmsnorm``, ``layernorm``): a norm
  over the last axis needs it whole, except when that axis is split and every
  consumer of the norm's output splits it into heads next (``split_heads``:
  QK-norm over the whole Q or K projection, OLMo 2/3 and MiniMax-M2, where
  Qwen3 normalises per head). Then the projection stays column-parallel and
  the K cache split by heads, as vLLM runs it: each rank normalises its heads'
  part, the sum of squares of a token all-reduced over the group (vllm @
  d29a69a5, ``vllm/model_executor/layers/mamba/linear_attn.py::
  MiniMaxText01RMSNormTP.forward_qk``: ``tensor_model_parallel_all_reduce`` of
  the fp32 variances, weight ``hidden_size / tp`` per rank; MiniMax-M2's
  attention uses it, ``models/minimax_m2.py`` @ 01d99586). vLLM's OLMo 2
  (``vllm/model_executor/models/olmo2.py::Olmo2Attention._apply_qk_norm`` @
  52e9d6f2) gets the same split cache another way: it all-gathers Q and K,
  normalises them whole and keeps its rank's slice (``Attention(num_kv_heads =
  total // tp)``). The layout records these norms in
  :attr:`TensorParallel.split_norms` (their weight split with the heads) and
  the communication counts one fp32 value per token and norm all-reduced.
  The other traits that need a last axis whole leave caches as they were:
  ``softmax`` and ``rope`` act after the heads are split (their last axis is
  a head's), ``slice`` of a projection's last axis keeps MLA's down-projection
  replicated, so its latent cache stays whole on every rank (vLLM's MLA
  caches the latent once per rank) — unless the model file says the projection
  is laid out rank by rank (``slice(x, n, grouped = true)``: Qwen3-Next's fused
  ``in_proj_qkvz``, so its DeltaNet state splits by heads as in vLLM) —, and ``concat`` joins per-head parts, or
  parts each split along the last axis rank by rank (a merged column-parallel
  projection: Kimi Linear's q, k, v, so KDA's state splits by heads).
* A norm over the heads of an attention merged (``merge_heads`` its input:
  MiniMax-01's lightning attention) stays split with its all-reduce, as vLLM's
  ``MiniMaxText01RMSNormTP`` runs it: the lightning state splits by heads.
* Where these rules cannot decide as a framework does, the model file can
  say it: ``linear(x, n, tp = false)`` keeps that linear replicated.

``sp=True`` adds sequence parallelism: every replicated activation with a
sequence axis (the last axis of an ``index`` input, e.g. ``tokens[b, s]``)
is split along it by ``t`` (LayerNorm inputs, dropout masks, the layer's input).

For GPT this gives Korthikanti et al. 2022 Table 2: per layer
``sbh(10 + 24/t + 5as/(ht))`` bytes with TP, ``sbh/t · (34 + 5as/h)`` with
TP + SP (tested). The rules assume heads divide by ``t`` (Megatron requires
it), except K/V heads fewer than ``t``:

* **K/V heads replicated** (Megatron-LM @ d98e8a64,
  ``megatron/core/transformer/attention.py::SelfAttention``: with
  ``num_query_groups < tp_size`` each rank holds one query group, the
  ``t / kv`` ranks of a group holding the same K/V head; ``t`` must be a
  multiple of ``kv``). ``replicate`` names the head-count dimensions (``kv``)
  so replicated (:func:`kv_replication` finds them from the values): every
  tensor TP splits along an axis with that factor (``k_proj``'s output
  ``[b, s, kv·d]``, the heads ``[b, kv, s, d]``, the KV cache) and the weights
  of the column-parallel linears producing them are divided by ``kv`` (one
  head per device) instead of ``t``. Query heads and the rest still divide by
  ``t``. Per-device FLOPs are left at the model's ÷ ``n`` (the ``t/kv``
  copies' extra K/V projections are not counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.graph import CostGraph
from ..ops.registry import REGISTRY, has_role
from .tensor_rules import _RULES, _Conflict, _Node, _place, _same, _Walk, _whole


@dataclass
class TensorParallel:
    """Where tensor parallelism of degree ``t`` splits a graph.

    ``split``: tensor id → the axis it is split along (absent: replicated);
    ``weights``: weight id → divisor (``t`` or 1); ``column``, ``row``,
    ``vocab``: node paths of column-parallel, row-parallel and
    vocabulary-parallel operators; ``replicated``: linears kept whole because
    a consumer needs their whole output; ``sequence``: tensor ids split along
    the sequence by SP; ``warnings``: one sentence per operator that declares
    no layout trait (what was assumed for it), for the reports to show.
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
    warnings: list[str] = field(default_factory=list)
    divisors: dict[str, sympy.Expr] = field(default_factory=dict)   # split tensors of replicated K/V heads: kv
    #: norms over a last axis split by heads (QK-norm over the whole projection): their
    #: statistics all-reduced over the group (module docstring, "norms split by heads")
    split_norms: list[str] = field(default_factory=list)

    def tensor_divisor(self, tid: str) -> sympy.Expr:
        """How many devices share tensor ``tid`` (t if split by TP or SP, else 1; the
        K/V heads' count for a tensor of replicated K/V heads)."""
        if tid in self.divisors:
            return self.divisors[tid]
        return self.t if tid in self.split or tid in self.sequence else sympy.Integer(1)

    def weight_divisor(self, wid: str) -> sympy.Expr:
        return self.weights.get(wid, sympy.Integer(1))



def tensor_parallel(cg: CostGraph, t: sympy.Expr | int, sp: bool = False,
                    replicate: tuple[str, ...] = ()) -> TensorParallel:
    """Derive the TP (and SP) layout of ``cg`` for degree ``t`` (see the module docstring).

    ``t`` may be a symbol (``costgraph.engine.symbols.dim("t")``) or an int; the
    result's divisors are ``t`` or 1, or, for the head-count dimensions named in
    ``replicate`` (K/V heads fewer than ``t``, replicated), that dimension.
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
    _replicate_heads(cg, tp, replicate)
    return tp


def _replicate_heads(cg: CostGraph, tp: TensorParallel, names: tuple[str, ...]) -> None:
    """Megatron's replicated K/V heads (module docstring): a split tensor whose split axis has
    the factor ``kv`` (a name in ``names``) is divided by ``kv``, and so are the weights of the
    column-parallel linears that produce one."""
    for name in names:
        sym = cg.dims[name].symbol if name in cg.dims else None
        if sym is None:
            continue
        for tid, axis in tp.split.items():
            if sym in sympy.Mul.make_args(sympy.factor(cg.tensors[tid].shape[axis])):
                tp.divisors[tid] = sym
        for path in tp.column:
            if any(o in tp.divisors for o in cg.nodes[path]["outputs"]):
                for wid in cg.nodes[path]["cost"].weights:
                    tp.weights[wid] = sym


def with_kv_replication(cg: CostGraph, layout, values: dict):
    """``layout`` (a :class:`~costgraph.parallel.layout.Layout`) with ``tp_replicated`` set to
    :func:`kv_replication` at ``values``, unless it names some already."""
    import dataclasses

    if layout.tp_replicated or not isinstance(layout.t, int):
        return layout
    return dataclasses.replace(layout, tp_replicated=kv_replication(cg, layout.t, values))


def kv_replication(cg: CostGraph, t, values: dict) -> tuple[str, ...]:
    """The head-count dimensions (names) that TP of degree ``t`` must replicate at ``values``
    (symbol → int): the split head axis of a cached tensor (K or V, ``[b, kv, s, d]``), a bare
    dimension with fewer entries than ``t``, ``t`` a multiple of it (Megatron's condition;
    otherwise nothing is returned and :func:`costgraph.training.validity.check_layout` refuses
    the layout), and not the heads of the attention scores (query heads are never replicated).
    ``()`` for a symbolic ``t`` or without values."""
    if not isinstance(t, int) or t == 1 or not values:
        return ()
    probe = tensor_parallel(cg, t)
    cached = {o for _, d in cg.ops() if has_role(d["kind"], "cache") for o in d["outputs"]}
    scores = {cg.tensors[o].shape[probe.split[o]] for _, d in cg.ops() if d["kind"] == "matmul"
              for o in d["outputs"] if o in probe.split}
    out = []
    for tid, axis in probe.split.items():
        size = cg.tensors[tid].shape[axis]
        if tid not in cached or size in scores:
            continue
        if not isinstance(size, sympy.Symbol) or size not in values:
            continue
        n = int(values[size])
        name = next((k for k, d in cg.dims.items() if d.symbol == size), None)
        if name is not None and n < t and t % n == 0 and name not in out:
            out.append(name)
    return tuple(out)


def sequence_dims(cg: CostGraph) -> list[sympy.Expr]:
    """The sequence lengths of the model: the last axis of each ``index`` input; for a
    model without token ids (ViT reads pixels), its dimension ``s`` (derived there:
    the patches and the class token). One id per sample, ``[b]`` (DiT's class label, CLIP's
    end-of-text position), is no sequence."""
    out = []
    batch = cg.dims["b"].symbol if "b" in cg.dims else None
    for path, d in cg.nodes.items():
        if d["kind"] == "input":
            ten = cg.tensors[path]
            if len(ten.shape) == 1 and batch is not None and ten.shape[0] == batch:
                continue
            if ten.role == "index" and ten.shape and ten.shape[-1] not in out:
                out.append(ten.shape[-1])
    if not out and "s" in cg.dims:
        info = cg.dims["s"]
        out.append(info.symbol if info.derived is None else info.derived)
    return out


def _walk(cg: CostGraph, t, sp: bool, forced: set[str]) -> TensorParallel:
    """One pass over ``cg`` in program order, each node laid out by the rule
    its operator's layout trait names; raises :class:`_Conflict` when a split
    reaches an operator that needs it whole (``forced``: linears kept whole)."""
    w = _Walk(cg, TensorParallel(t, sp, replicated=set(forced)), forced)
    for tid, ten in cg.tensors.items():
        if ten.producer in cg.nodes and tid not in cg.nodes[ten.producer]["outputs"] and tid != ten.producer:
            w.aux.setdefault(ten.producer, []).append(tid)
    w.vocab = [cg.tensors[o].shape[-1] for o in cg.outputs if cg.tensors[o].shape]
    for _, d in cg.ops():
        for x in d["inputs"]:
            w.readers.setdefault(x, []).append(d["kind"])
    for path, d in cg.ops():
        ins = list(d["inputs"])
        src = set().union(*(w.origin.get(x, set()) for x in ins)) if ins else set()
        n = _Node(path, d, ins, list(d["outputs"]), [w.tp.split.get(x) for x in ins], [w.rank(x) for x in ins], src)
        rule, args = _rule(w, n)
        _place(w, n, rule(w, n, *args))
    if t != 1:
        w.tp.warnings = [_unlaid_warning(kind, paths) for kind, paths in w.unlaid.items()]
    return w.tp


def _rule(w: _Walk, n: _Node):
    """The layout rule of ``n``'s operator and the trait's arguments; for an
    operator without a layout trait, :func:`_whole` (noted in ``w.unlaid``)."""
    kind = n.d["kind"]
    if kind == "param":   # a model's own parameter (no inputs): kept whole
        return _whole, ()
    spec = REGISTRY.get(kind)
    if spec is None or spec.layout is None:
        w.unlaid.setdefault(kind, []).append(n.path)
        return _whole, ()
    return _RULES[spec.layout[0]], spec.layout[1:]


def _unlaid_warning(kind: str, paths: list[str]) -> str:
    where = paths[0] + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
    return (f"operator '{kind}' ({where}) declares no tensor-parallel layout: it was assumed to need its "
            f"inputs whole (the linears before it kept replicated) and its output replicated; declare "
            f"layout= in its @op (see `costgraph ops`)")
