"""Matrix products: ``linear``, ``matmul`` and the ``embedding`` lookup.

FLOP convention: an (m×k)·(k×n) product costs ``2mkn`` FLOPs, one multiply
and one add per multiply-add (Megatron-LM, Narayanan et al. 2021 §5.1;
PaLM App. B; PyTorch ``FlopCounterMode``). Backward: the input gradient
``dX = dY·Wᵀ`` and the weight gradient ``dW = Xᵀ·dY`` each cost as much as
the forward product; a product of two activations has two input gradients and
no weight gradient. Weights use PyTorch's layouts: ``Linear`` ``[out, in]``,
``Embedding`` ``[num, dim]``, so a tied head reads the embedding matrix as is.
"""

from __future__ import annotations

import sympy

from ..engine.graph import Flops, numel
from .registry import op


@op("linear", "y = x·Wᵀ (+ bias); x [..., in] → [..., out]; tp = false keeps it whole under tensor parallelism",
    x="tensor", out="dim", bias=("bool", True), tied=("ident", None), tp=("bool", True),
    layout="column_row", roles=("matrix", "router", "weight_grad_input"))
def linear(c):
    """``tp = false`` tells the tensor-parallel analysis
    (:mod:`costgraph.parallel.tensor`) to keep this linear replicated where its
    rules would split it; it changes no count of the model itself.

    ``tied = NAME`` reads the weight of node ``NAME`` (counted once, by it). Its bias:
    ``bias = false``, none; ``bias = true``, a bias of its own (``[out]``, BERT's MLM
    decoder beside the tied embedding); not written, the source's — a linear's bias
    if it has one (the same module called again: DeBERTa's projections on the
    relative-position table), none if it has none; a source with no bias to follow
    (an embedding) is refused: the call must say."""
    x = c["x"]
    if not x.shape:
        c.fail("linear needs a tensor with at least one dimension")
    *batch, k = x.shape
    n = c["out"]
    y = c.output((*batch, n), role=c.float_role(x))   # an fp32 input (a router's upcast) gives fp32
    wid = c.weight("weight", (n, k), tied=c["tied"])
    rows = numel(tuple(batch))
    mm = 2 * rows * k * n
    shared = _tied_bias(c, wid) if c["tied"] is not None and not c.given("bias") else None
    has_bias = c["bias"] if shared is None else bool(shared)
    bias = rows * n if has_bias else 0
    if shared:
        c.share(shared)
    elif has_bias:
        c.weight("bias", (n,))
    c.forward(Flops(matmul=mm, other=bias))          # bias add: one per output element
    c.backward_input(Flops(matmul=mm))                # dX = dY · W
    c.backward_weight(Flops(matmul=mm, other=bias))   # dW = dYᵀ · X; db = Σ dY
    c.save(x)                                         # X is needed for dW
    return y


def _tied_bias(c, wid: str) -> str:
    """The bias a linear tied to weight ``wid`` follows when its call does not write ``bias``:
    the source linear's bias id, or "" (none); refused when the source is not a linear."""
    owner = wid.rsplit("/", 1)[0]
    kind = c.b.cg.nodes.get(owner, {}).get("kind")
    if kind == "linear":
        return owner + "/bias" if owner + "/bias" in c.b.cg.weights else ""
    name = c["tied"]
    article = "an" if (kind or "x")[:1] in "aeiou" else "a"
    c.fail(f"linear '{c.path.rsplit('/', 1)[-1]}' is tied to {article} {kind} ('{name}'), which has no bias "
           "to follow: say whether this linear has a bias",
           hint=f"bias = false (no bias: GPT-2's lm_head tied to wte), or bias = true (a bias of its own "
                f"beside the tied weight: BERT's MLM decoder), e.g. linear(x, V, bias = false, tied = {name})")


@op("matmul", "batched product of two activations: [..., m, k]·[..., k, n] → [..., m, n]",
    x="tensor", y="tensor", window=("dim", None), causal=("bool", False), layout="batched")
def matmul(c):
    """``window = w`` makes a banded product (sliding-window attention): each of
    the ``m`` rows meets only ``Min(n, w)`` columns. For QKᵀ the output is
    ``[..., m, Min(n, w)]``; for scores·V the left operand is that banded
    ``[..., m, Min(k, w)]``. ``causal = true`` marks the product as masked
    causally: the rule records its ``queries`` (``m``) and ``keys`` (the key
    axis before the window: QKᵀ's ``n``, scores·V's ``k``) on the node, and
    ``--causal half``/``exact`` count only the pairs the mask keeps
    (:func:`costgraph.engine.totals.causal_pairs`; queries aligned to the newest
    keys, FlashAttention 2.1's bottom-right mask: with more queries than keys the
    first ones meet none). The key axis is the one equal
    to ``m`` (self-attention), else QKᵀ's when ``y`` is a transpose. Whether an input of the model
    needs a gradient is the builder's one rule (:class:`costgraph.engine.builder.Settings`
    ``input_grads``): by default none does, so a product of two of them has no backward. Batch axes broadcast as PyTorch's ``matmul`` does: a bare parameter (``param W[k, n]``)
    multiplies every batch entry, ``2·Π(batch)·m·k·n`` FLOPs, its gradient (summed over the batch) a
    weight gradient of as many."""
    x, y, w = c["x"], c["y"], c["window"]
    if len(x.shape) < 2 or len(y.shape) < 2:
        c.fail(f"matmul needs two tensors of rank ≥ 2, got {x.shape_str()} and {y.shape_str()}")
    *bx, m, k = x.shape
    *by, k2, n = y.shape
    band_k = k2 if w is None else sympy.Min(k2, w)
    if not c.same(k, k2) and not c.same(k, band_k):
        c.fail(f"matmul inner dimensions differ: {x.shape_str()} · {y.shape_str()} ({k} ≠ {k2})",
               hint="transpose one operand, e.g. matmul(q, transpose(k))")
    batch = _broadcast_batch(c, bx, by)
    if batch is None:
        c.fail(f"matmul batch dimensions differ: {x.shape_str()} · {y.shape_str()}",
               hint="expand grouped K/V heads with repeat_kv first")
    qk = c.same(k, k2) if w is not None else (
        c.same(n, m) or (not c.same(k, m) and c.b.cg.nodes.get(y.producer, {}).get("kind") == "transpose"))
    if c["causal"]:
        keys = n if qk else k2
        c.attr("queries", m)
        c.attr("keys", keys)
    if w is not None and qk:   # QKᵀ: each query row meets Min(n, w) keys
        n = sympy.Min(n, w)
    out = c.output((*batch, m, n), role=c.float_role(x, y))
    mm = 2 * numel(tuple(batch)) * m * k * n
    c.forward(Flops(matmul=mm))
    params = [wid for t in (x, y) if (wid := _parameter(c, t))]
    for wid in params:   # a `param` operand: read here (counted once, by its node); its gradient a weight one
        c.share(wid)
    c.backward_input(Flops(matmul=(2 - len(params)) * mm))   # dX = dZ·Yᵀ and dY = Xᵀ·dZ
    c.backward_weight(Flops(matmul=len(params) * mm))        # of a parameter: summed over the batch it spans
    c.save(x, y)
    return out


def _broadcast_batch(c, bx: list, by: list) -> tuple | None:
    """The batch axes of a product whose operands' batch axes broadcast (PyTorch's ``matmul``:
    aligned from the right, a missing or size-1 axis spans the other's: a parameter ``[k, n]``
    multiplying ``[B, S, m, k]``); None when they do not."""
    out = []
    for i in range(1, max(len(bx), len(by)) + 1):
        p = bx[-i] if i <= len(bx) else None
        q = by[-i] if i <= len(by) else None
        if p is not None and q is not None and not c.same(p, q) and 1 not in (p, q):
            return None
        out.append(q if p is None or p == 1 else p)
    return tuple(reversed(out))


def _parameter(c, t) -> str | None:
    """The weight id of ``t`` when it is a ``param`` node's output (a bare parameter), else None."""
    node = c.b.cg.nodes.get(t.producer, {})
    return node["cost"].weights[0] if node.get("kind") == "param" and t.id == t.storage else None


@op("embedding", "row lookup in a [num, dim] table: ids [...] → [..., dim]",
    ids="tensor", num="dim", dim="dim", tied=("ident", None), layout="vocab",
    roles=("embedding", "weight_grad_input"))
def embedding(c):
    ids = c["ids"]
    if ids.role != "index":
        c.fail("embedding looks up token ids: its first argument must be an 'index' input",
               hint="declare it as `input tokens[b, s]: index`")
    out = c.output((*ids.shape, c["dim"]))
    c.weight("weight", (c["num"], c["dim"]), tied=c["tied"])   # tied: T5's decoder reads `shared`
    # A lookup multiplies nothing: 0 FLOPs forward, no input gradient (ids are
    # integers). The weight gradient scatter-adds one row per id: one add per
    # output element, counted under the `all` convention only.
    c.backward_weight(Flops(other=out.numel))
    c.save(ids)
    return out


@op("relative_position_bias", "T5's learned attention bias: a [buckets, heads] table looked up "
    "by the bucketed distance of each (query, key) pair → [1, heads, q_len, k_len]",
    q_len="dim", k_len="dim", buckets="dim", heads="dim", layout="whole")
def relative_position_bias(c):
    """Raffel et al. 2020 §2.1. Computed once per stack and added to every
    layer's scores. A lookup: 0 FLOPs; keeps its [q_len, k_len] bucket ids."""
    q, k = c["q_len"], c["k_len"]
    out = c.output((1, c["heads"], q, k))
    c.weight("weight", (c["buckets"], c["heads"]))
    c.backward_weight(Flops(other=out.numel))
    c.save(c.aux("buckets", (q, k), role="index"))
    return out
