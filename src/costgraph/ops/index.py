"""Selections and reductions by position: ``max``, ``topk``, ``gather``,
``scatter``, ``select``.

What each keeps for backward is what PyTorch autograd keeps
(``tools/autograd/derivatives.yaml``): a reduction that selects values
(``max`` over a dimension, ``topk``) keeps the int64 indices of what it chose
(``value_selecting_reduction_backward``); an indexed copy (``x[ids]``,
``index_select``) and an indexed accumulate (``index_add``) keep the indices
only. No matrix products: under ``matmul`` all cost 0 FLOPs; under ``all``
a comparison or an add counts 1, a copy 0. Index tensors have the role
``index`` (8 bytes an element).
"""

from __future__ import annotations

from ..engine.graph import Flops, numel
from .elementwise import PER_ELEMENT
from .registry import op


@op("max", "maximum over the last dimension: [..., n] → [...] ([..., 1] with keepdim = true; keeps "
    "the int64 argmax)", x="tensor", keepdim=("bool", False), layout="whole")
def max_(c):
    """``x.max(dim=-1).values`` (``keepdim = true``: ``x.max(dim=-1,
    keepdim=True).values``, ``[..., 1]``, which broadcasts against ``x`` —
    gpt-oss subtracts it from its attention logits). The reduction is over
    the last axis (for the elementwise maximum of two tensors use
    ``maximum``). 1 comparison per input element (`all`); backward scatters
    the gradient to the argmax (0 FLOPs) and keeps only the indices, one per
    output element."""
    x = c["x"]
    if not x.shape:
        c.fail("max reduces the last dimension: it needs a tensor with at least one")
    shape = (*x.shape[:-1], 1) if c["keepdim"] else x.shape[:-1]
    y = c.output(shape, role=c.float_role(x))
    c.forward(Flops(other=PER_ELEMENT["max"] * x.numel))
    c.save(c.aux("indices", shape, "index"))
    return y


@op("topk", "the k largest entries of the last dimension: [..., n] → values [..., k], ids [..., k] (index)",
    x="tensor", k="dim", layout="whole")
def topk(c):
    """``values, ids = torch.topk(x, k)`` (an MoE router's choice). Returns
    two tensors, the ids with role ``index``. 1 comparison per input element
    (`all`, our convention). Backward scatters into zeros by the ids, which it
    keeps (PyTorch keeps ``indices``); 0 FLOPs."""
    x, k = c["x"], c["k"]
    if not x.shape:
        c.fail("topk selects along the last dimension: it needs a tensor with at least one")
    c.at_most(k, x.shape[-1], "takes")
    values = c.output((*x.shape[:-1], k), role=c.float_role(x))
    ids = c.output((*x.shape[:-1], k), role="index")
    c.forward(Flops(other=PER_ELEMENT["topk"] * x.numel))
    c.save(ids)
    return values, ids


@op("gather", "rows of x by index: x [..., d] (rows: all but the last axis), ids [...] → [..., d] (copy)",
    x="tensor", ids="tensor", layout="whole")
def gather(c):
    """``x.reshape(-1, d)[ids]`` / ``index_select``: MoE dispatch copies each
    token once per chosen expert (``ids`` of ``T·k`` entries → ``[T·k, d]``).
    A copy, a new storage: 0 FLOPs forward; the input gradient is an indexed
    accumulate (``index_add``), 1 add per output element (`all`). Keeps the
    ids only (PyTorch ``index`` and ``index_select`` keep the indices)."""
    x, ids = c["x"], c["ids"]
    if not x.shape:
        c.fail("gather reads rows of x [..., d]: it needs a tensor with at least one dimension")
    if ids.role != "index":
        c.fail("gather's second argument holds row numbers: it must be an 'index' tensor",
               hint="topk's second result, or an input declared `: index`")
    y = c.output((*ids.shape, x.shape[-1]), role=c.float_role(x))
    c.backward_input(Flops(other=y.numel))
    c.save(ids)
    return y


@op("scatter", "add rows of x into `rows` rows by index: x [..., d], ids [...] → [rows, d] (copy)",
    x="tensor", ids="tensor", rows="dim", layout="whole")
def scatter(c):
    """``out.index_add_(0, ids, x)`` into zeros of ``[rows, d]``: an MoE's
    combine (each token's expert outputs summed back into its row). 1 add per
    element of ``x`` (`all`); the input gradient gathers rows (a copy,
    0 FLOPs). Keeps the ids and ``x``: PyTorch's ``index_add`` backward
    (``grad.index_select(dim, index).expand_as(source)``) reads ``source``, so
    autograd keeps it."""
    x, ids, rows = c["x"], c["ids"], c["rows"]
    if not x.shape:
        c.fail("scatter adds rows of x [..., d]: it needs a tensor with at least one dimension")
    if ids.role != "index":
        c.fail("scatter's second argument holds row numbers: it must be an 'index' tensor")
    if not c.same(numel(ids.shape), numel(x.shape[:-1])):
        c.fail(f"scatter needs one id per row of x: ids {ids.shape_str()}, x {x.shape_str()}")
    y = c.output((rows, x.shape[-1]), role=c.float_role(x))
    c.forward(Flops(other=x.numel))
    c.save(ids, x)
    return y


@op("select", "one position of the sequence axis: [..., S, d] → [..., d] (view; BERT's pooler reads "
    "the first token)", x="tensor", index=("dim", None), layout="whole")
def select(c):
    """``x[:, 0]``: a view (a consumer that keeps it keeps the whole
    ``[..., S, d]`` storage alive, as in PyTorch). ``index`` (which position:
    the first when omitted) changes no count. No FLOPs, keeps nothing."""
    x = c["x"]
    if len(x.shape) < 2:
        c.fail(f"select needs [..., S, d], got {x.shape_str()}")
    if c["index"] is not None:
        c.at_most(c["index"], x.shape[-2], "selects position")
    return c.output((*x.shape[:-2], x.shape[-1]), view_of=x)
