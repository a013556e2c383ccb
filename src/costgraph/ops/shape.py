"""Free reshapes and copies: no FLOPs, no parameters, nothing saved.

``split``, ``split_heads``, ``transpose``, ``slice`` and ``cache`` return
*views*: they share the storage of their input, so a saved view is counted
with its storage, once (PyTorch keeps the whole storage of a saved view
alive). ``merge_heads``, ``concat`` and ``repeat_kv`` copy (as
``.contiguous()``, ``torch.cat`` and Hugging Face's ``repeat_kv`` do),
producing a new storage. ``cache`` also records its input as a KV-cache
entry (:class:`costgraph.engine.graph.CacheEntry`).
"""

from __future__ import annotations

import sympy

from .registry import op

# Most parts `split` makes (each part is a tensor of its own in the graph).
MAX_PARTS = 1024


@op("split", "n equal views along the last dimension: [..., n·k] → n × [..., k]",
    x="tensor", n="dim", layout=("view",), roles="view")
def split(c):
    x, n = c["x"], c["n"]
    if not isinstance(n, sympy.Integer) or n < 1:
        c.fail(f"split needs a whole number of parts, got {n}")
    if n > MAX_PARTS:
        c.fail(f"split into {n} parts: at most {MAX_PARTS}")
    if not x.shape:
        c.fail("split needs a tensor with at least one dimension, got a scalar []")
    *batch, last = x.shape
    return tuple(c.output((*batch, last / n), view_of=x) for _ in range(int(n)))


@op("split_heads", "[..., S, H] → [..., heads, S, H/heads] (view)", x="tensor", heads="dim",
    layout=("view", (-1, -2), (-2, -1)), roles="view")
def split_heads(c):
    x, heads = c["x"], c["heads"]
    if len(x.shape) < 2:
        c.fail(f"split_heads needs [..., S, H], got {x.shape_str()}")
    *batch, seq, hidden = x.shape
    return c.output((*batch, heads, seq, hidden / heads), view_of=x)


@op("merge_heads", "[..., heads, S, d] → [..., S, heads·d] (copy)", x="tensor",
    layout=("view", (-3, -2), (-2, -3), (-1, -2)))
def merge_heads(c):
    x = c["x"]
    if len(x.shape) < 3:
        c.fail(f"merge_heads needs [..., heads, S, d], got {x.shape_str()}")
    *batch, heads, seq, d = x.shape
    return c.output((*batch, seq, heads * d))


@op("transpose", "swap the last two dimensions (view)", x="tensor", layout=("view", (-1, -2), (-2, -1)),
    roles=("view", "kv_passthrough"))
def transpose(c):
    x = c["x"]
    if len(x.shape) < 2:
        c.fail(f"transpose needs a tensor of rank ≥ 2, got {x.shape_str()}")
    *batch, m, n = x.shape
    return c.output((*batch, n, m), view_of=x)


@op("slice", "the first or next `size` entries of the last dimension (view); grouped = true: under "
    "TP the projection before is laid out rank by rank, each rank takes its shard of every part",
    x="tensor", size="dim", grouped=("bool", False), layout="slice_last", roles="view")
def slice_(c):
    x = c["x"]
    if not x.shape:
        c.fail("slice needs a tensor with at least one dimension, got a scalar []")
    *batch, last = x.shape
    c.at_most(c["size"], last, "takes")
    return c.output((*batch, c["size"]), view_of=x)


@op("concat", "join along the last dimension, broadcasting the others (copy)", x="tensor", y="tensor",
    layout="join_last")
def concat(c):
    x, y = c["x"], c["y"]
    if len(x.shape) != len(y.shape):
        c.fail(f"concat needs tensors of one rank, got {x.shape_str()} and {y.shape_str()}")
    if not x.shape:
        c.fail("concat needs tensors with at least one dimension, got scalars []")
    lead = []
    for p, q in zip(x.shape[:-1], y.shape[:-1]):
        if c.same(p, q) or q == 1:
            lead.append(p)
        elif p == 1:
            lead.append(q)
        else:
            c.fail(f"concat: shapes differ outside the last dimension: {x.shape_str()} and {y.shape_str()}")
    return c.output((*lead, x.shape[-1] + y.shape[-1]))


@op("repeat_kv", "grouped-query attention: [B, kv, S, d] → [B, kv·groups, S, d] (copy; "
    "the identity for groups = 1)", x="tensor", groups="dim", layout="follow",
    roles=("kv_expand", "kv_passthrough"))
def repeat_kv(c):
    x, g = c["x"], c["groups"]
    if g == 1:
        return c.identity(x)
    if len(x.shape) < 3:
        c.fail(f"repeat_kv needs [..., kv, S, d], got {x.shape_str()}")
    *batch, heads, seq, d = x.shape
    return c.output((*batch, heads * g, seq, d))


@op("zeros", "a new tensor of zeros shaped like x (an accumulator)", x="tensor", layout="follow")
def zeros(c):
    return c.output(c["x"].shape)


@op("cache", "marks a [B, ..., S, d] tensor as kept in the KV cache at inference (view); shared = true: an "
    "earlier layer's cache this layer reads (KV sharing), nothing stored or written; topk = k: each query reads at "
    "most k positions (a sparse attention's selection); fp8_block = n: kept in FP8, one fp32 scale per n values",
    x="tensor", window=("dim", None), shared=("bool", False), topk=("dim", None), fp8_block=("dim", None),
    layout="follow", roles=("cache", "view", "kv_passthrough"))
def cache(c):
    x = c["x"]
    if len(x.shape) < 3:
        c.fail(f"cache needs [B, ..., S, d], got {x.shape_str()}")
    c.cache(x, c["window"], shared=bool(c["shared"]), topk=c["topk"], fp8_block=c["fp8_block"])
    return c.output(x.shape, view_of=x)
