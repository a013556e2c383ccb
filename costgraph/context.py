"""What an operator rule sees: :class:`OpContext`.

A rule (:mod:`costgraph.ops`) reads its arguments from the context and
declares, through it, its output tensors (``output``; views share their
input's storage), parameters (``weight``, or a tied one), FLOPs
(``forward``, ``backward_input``, ``backward_weight``), the tensors it keeps
for backward (``save``; ``aux`` and ``shared_aux`` make ones that do not flow
on an edge, such as dropout masks or rotary tables) and KV-cache entries
(``cache``). The builder turns what was declared into one graph node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from .errors import CostgraphSemanticError, Location
from .graph import ONE, CacheEntry, Flops, Tensor, Weight

if TYPE_CHECKING:
    from .builder import Builder


def as_dim(d) -> sympy.Expr:
    """A size handed over by an operator rule: a SymPy expression or a Python
    int (never text), as a SymPy expression."""
    if isinstance(d, sympy.Expr):
        return d
    if isinstance(d, int) and not isinstance(d, bool):
        return sympy.Integer(d)
    raise TypeError(f"a dimension must be a SymPy expression or an int, not {type(d).__name__}")


def same(a, b) -> bool:
    """Exact symbolic equality of two dimension expressions."""
    return sympy.expand(a - b) == 0


class OpContext:
    """What an operator rule sees: its arguments and ways to declare its costs."""

    def __init__(self, builder: "Builder", kind: str, path: str, args: dict, loc: Location):
        self.b = builder
        self.kind = kind
        self.path = path
        self.args = args
        self.loc = loc
        self.settings = builder.settings
        self.outputs: list[Tensor] = []
        self.cost = dict(forward=Flops(), backward_input=Flops(), backward_weight=Flops())
        self.weights: list[str] = []
        self.tied: list[str] = []
        self.saved: list[str] = []
        self.is_identity = False

    def __getitem__(self, name):
        return self.args[name]

    def fail(self, message: str, hint: str | None = None):
        raise CostgraphSemanticError(message, self.loc, hint)

    def same(self, a, b) -> bool:
        return same(a, b)

    def output(self, shape, role: str = "act", view_of: Tensor | None = None) -> Tensor:
        tid = f"{self.path}:{len(self.outputs)}"
        t = Tensor(tid, tuple(as_dim(d) for d in shape), role,
                   view_of.storage if view_of is not None else tid, self.b.count, self.path, self.b.active)
        self.outputs.append(t)
        return t

    def shared_aux(self, key: str, shape, role: str) -> Tensor:
        """A tensor made once for the whole model and kept by many nodes (the
        rotary cos/sin tables): one storage, counted once."""
        t = self.b.shared.get(key)
        if t is None:
            t = Tensor(f"shared/{key}", tuple(as_dim(d) for d in shape), role, f"shared/{key}", ONE, self.path, ONE)
            self.b.cg.tensors[t.id] = t
            self.b.shared[key] = t
        return t

    def aux(self, suffix: str, shape, role: str) -> Tensor:
        """A tensor the op makes and keeps but does not pass on (a dropout mask)."""
        tid = f"{self.path}/{suffix}"
        t = Tensor(tid, tuple(as_dim(d) for d in shape), role, tid, self.b.count, self.path, self.b.active)
        self.b.cg.tensors[tid] = t
        return t

    def identity(self, x: Tensor) -> Tensor:
        self.is_identity = True
        return x

    def weight(self, suffix: str, shape, tied: str | None = None) -> str:
        shape = tuple(as_dim(d) for d in shape)
        if tied is not None:
            wid = self.b.find_weight(tied, self.loc)
            have = self.b.cg.weights[wid].shape
            if len(have) != len(shape) or not all(same(p, q) for p, q in zip(have, shape)):
                self.fail(f"cannot tie to '{tied}': its weight is [{', '.join(map(str, have))}], "
                          f"this {self.kind} needs [{', '.join(map(str, shape))}]")
            self.tied.append(wid)
            return wid
        wid = f"{self.path}/{suffix}"
        self.b.cg.weights[wid] = Weight(wid, shape, self.b.count, self.b.active)
        self.weights.append(wid)
        return wid

    def cache(self, t: Tensor, window) -> None:
        """Mark ``t`` ([B, ..., S, d]) as kept in the KV cache at inference."""
        self.b.cg.caches.append(CacheEntry(t.id, window, self.path))

    def forward(self, f: Flops):
        self.cost["forward"] = self.cost["forward"] + f

    def backward_input(self, f: Flops):
        self.cost["backward_input"] = self.cost["backward_input"] + f

    def backward_weight(self, f: Flops):
        self.cost["backward_weight"] = self.cost["backward_weight"] + f

    def save(self, *tensors: Tensor):
        for t in tensors:
            if t.id not in self.saved:
                self.saved.append(t.id)

    def broadcast(self, x: Tensor, y: Tensor) -> tuple:
        out = []
        for i in range(1, max(len(x.shape), len(y.shape)) + 1):
            p = x.shape[-i] if i <= len(x.shape) else ONE
            q = y.shape[-i] if i <= len(y.shape) else ONE
            if same(p, q) or q == 1:
                out.append(p)
            elif p == 1:
                out.append(q)
            else:
                self.fail(f"shapes do not broadcast: {x.shape_str()} and {y.shape_str()}")
        return tuple(reversed(out))
