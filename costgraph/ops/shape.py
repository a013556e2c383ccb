"""Free reshapes: no FLOPs, no parameters, nothing saved.

``split``, ``split_heads`` and ``transpose`` return *views*: they share the
storage of their input, so a saved view is counted with its storage, once
(PyTorch keeps the whole storage of a saved view alive). ``merge_heads``
copies (``transpose(...).contiguous().view(...)``), producing a new storage.
"""

from __future__ import annotations

import sympy

from .registry import op


@op("split", "n equal views along the last dimension: [..., n·k] → n × [..., k]",
    x="tensor", n="dim")
def split(c):
    x, n = c["x"], c["n"]
    if not isinstance(n, sympy.Integer) or n < 1:
        c.fail(f"split needs a whole number of parts, got {n}")
    *batch, last = x.shape
    return tuple(c.output((*batch, last / n), view_of=x) for _ in range(int(n)))


@op("split_heads", "[..., S, H] → [..., heads, S, H/heads] (view)", x="tensor", heads="dim")
def split_heads(c):
    x, heads = c["x"], c["heads"]
    if len(x.shape) < 2:
        c.fail(f"split_heads needs [..., S, H], got {x.shape_str()}")
    *batch, seq, hidden = x.shape
    return c.output((*batch, heads, seq, hidden / heads), view_of=x)


@op("merge_heads", "[..., heads, S, d] → [..., S, heads·d] (copy)", x="tensor")
def merge_heads(c):
    x = c["x"]
    if len(x.shape) < 3:
        c.fail(f"merge_heads needs [..., heads, S, d], got {x.shape_str()}")
    *batch, heads, seq, d = x.shape
    return c.output((*batch, seq, heads * d))


@op("transpose", "swap the last two dimensions (view)", x="tensor")
def transpose(c):
    x = c["x"]
    if len(x.shape) < 2:
        c.fail(f"transpose needs a tensor of rank ≥ 2, got {x.shape_str()}")
    *batch, m, n = x.shape
    return c.output((*batch, n, m), view_of=x)
