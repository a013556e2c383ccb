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

from functools import lru_cache
from typing import Protocol

import sympy

from ..errors import CostgraphSemanticError, Location
from ..ops.registry import has_role
from .symbols import as_expr
from .graph import ONE, CacheEntry, CostGraph, Flops, Tensor, Weight


class Walk(Protocol):
    """What an :class:`OpContext` reads from the walk that builds the graph
    (:class:`costgraph.engine.builder.Builder` is one): the build settings, the graph
    being filled, the number of copies (``count``) and of active copies
    (``active``) of the statement being built, the tensors made once for the
    whole model (``shared``, by key), and how a ``tied=`` name finds its weight.
    This module owns the interface, so it never imports the builder."""

    settings: object
    cg: CostGraph
    count: sympy.Expr
    active: sympy.Expr
    shared: dict[str, Tensor]

    def find_weight(self, name: str, loc: Location) -> str:
        """The id of the weight ``tied=name`` names, seen from the current block."""


def as_dim(d) -> sympy.Expr:
    """A size handed over by an operator rule: a SymPy expression or a Python
    int (never text), as a SymPy expression."""
    if isinstance(d, sympy.Expr) or (isinstance(d, int) and not isinstance(d, bool)):
        return as_expr(d)
    raise TypeError(f"a dimension must be a SymPy expression or an int, not {type(d).__name__}")


# Largest dimension expression, counted as if expanded: at most 32 terms and
# degree 16. Cost formulas multiply several dimensions, and every total is
# expanded, so the work grows with a power of these sizes (two linears on a
# 32-term size take about 1 s, on 64 terms 7 s). The bundled models use at
# most 2 terms and degree 2 (h / n_heads counts as degree 2).
MAX_TERMS = 32
MAX_DEGREE = 16

_CAP = MAX_TERMS + MAX_DEGREE + 1   # sizes saturate here: only "over the limit" matters


@lru_cache(maxsize=4096)
def expanded_size(e) -> tuple[int, int]:
    """Upper bounds on the number of terms and the degree of ``sympy.expand(e)``,
    found without expanding: a sum adds the terms of its parts, a product
    multiplies them, a power ``p**n`` takes ``p``'s to the ``|n|``-th; degrees
    add in a product and multiply in a power. Saturates above the limits."""
    if not isinstance(e, sympy.Basic) or e.is_Atom:
        return 1, int(isinstance(e, sympy.Symbol))
    if e.is_Pow and e.exp.is_Integer:
        terms, degree = expanded_size(e.base)
        n = min(abs(int(e.exp)), _CAP)
        return (min(terms ** n, _CAP), min(degree * n, _CAP)) if n else (1, 0)
    parts = [expanded_size(a) for a in e.args]
    if e.is_Mul:
        terms, degree = 1, 0
        for t, d in parts:
            terms, degree = min(terms * t, _CAP), min(degree + d, _CAP)
        return terms, degree
    # a sum, or anything else (Min, ceiling...): its arguments' terms side by side
    return min(sum(t for t, _ in parts), _CAP), max((d for _, d in parts), default=0)


def check_expansion(v, what: str, loc: Location | None):
    """Refuse a dimension expression beyond :data:`MAX_TERMS` terms or
    :data:`MAX_DEGREE` when expanded (estimated by :func:`expanded_size`)."""
    if not isinstance(v, sympy.Expr):
        return v
    terms, degree = expanded_size(v)
    if terms > MAX_TERMS or degree > MAX_DEGREE:
        size = (f"more than {MAX_TERMS} terms" if terms > MAX_TERMS else
                f"degree {degree}" if degree < _CAP else f"a degree above {MAX_DEGREE}")
        raise CostgraphSemanticError(
            f"{what} is too large: multiplied out, it has {size} (at most {MAX_TERMS} terms of degree "
            f"{MAX_DEGREE})", loc,
            hint="a size is a short formula such as 4 * h or h / n_heads; for a size of its own, "
                 "declare it with `dim NAME` and give its value in a configuration")
    return v


def same(a, b) -> bool:
    """Exact symbolic equality of two dimension expressions."""
    return a == b or sympy.expand(a - b) == 0   # the same object, most often: no expansion


class OpContext:
    """What an operator rule sees: its arguments and ways to declare its costs."""

    def __init__(self, builder: Walk, kind: str, path: str, args: dict, loc: Location,
                 given: frozenset | None = None):
        self.b = builder
        self.kind = kind
        self.path = path
        self.args = args
        self._given = given
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

    def given(self, name: str) -> bool:
        """Whether the call wrote argument ``name`` (false: its default is in use)."""
        return self._given is None or name in self._given

    def fail(self, message: str, hint: str | None = None):
        raise CostgraphSemanticError(message, self.loc, hint)

    def same(self, a, b) -> bool:
        return same(a, b)

    def at_most(self, part, whole, verb: str):
        """Refuse ``part`` (a slice, the rotated entries) when it is provably
        larger than ``whole`` (the dimension it is taken from): SymPy decides
        the sign of ``part - whole`` from the dimensions being positive;
        undecided is recorded in the graph's ``limits`` and checked when
        values are given (``--set r=100000`` on GPT-NeoX's ``h/a = 64``)."""
        excess = sympy.expand(as_dim(part) - as_dim(whole))
        if excess.is_positive:
            self.fail(f"{self.kind} {verb} {part} entries of a last dimension of {whole}: more than it has",
                      hint=f"give at most {whole}: a part of a dimension cannot be larger than the dimension")
        if excess.free_symbols:
            self.b.cg.limits.append((as_dim(whole) - as_dim(part) + 1,
                                     f"{self.kind} '{self.path}' {verb} {part} entries of a last dimension of "
                                     f"{whole} (at most {whole}): {whole} - {part} + 1", self.loc, self.path))

    def _shape(self, shape) -> tuple:
        """Sizes handed over by the rule, as SymPy expressions of bounded size."""
        return tuple(check_expansion(as_dim(d), f"a size {self.kind} makes", self.loc) for d in shape)

    def output(self, shape, role: str = "act", view_of: Tensor | None = None) -> Tensor:
        tid = f"{self.path}:{len(self.outputs)}"
        t = Tensor(tid, self._shape(shape), role,
                   view_of.storage if view_of is not None else tid, self.b.count, self.path, self.b.active)
        self.outputs.append(t)
        return t

    def shared_aux(self, key: str, shape, role: str) -> Tensor:
        """A tensor made once for the whole model and kept by many nodes (the
        rotary cos/sin tables): one storage, counted once."""
        t = self.b.shared.get(key)
        if t is None:
            t = Tensor(f"shared/{key}", self._shape(shape), role, f"shared/{key}", ONE, self.path, ONE)
            self.b.cg.tensors[t.id] = t
            self.b.shared[key] = t
        return t

    def aux(self, suffix: str, shape, role: str) -> Tensor:
        """A tensor the op makes and keeps but does not pass on (a dropout mask)."""
        tid = f"{self.path}/{suffix}"
        t = Tensor(tid, self._shape(shape), role, tid, self.b.count, self.path, self.b.active)
        self.b.cg.tensors[tid] = t
        return t

    def identity(self, x: Tensor) -> Tensor:
        self.is_identity = True
        return x

    def weight(self, suffix: str, shape, tied: str | None = None) -> str:
        shape = self._shape(shape)
        if tied is not None:
            wid = self.b.find_weight(tied, self.loc)
            have = self.b.cg.weights[wid].shape
            if len(have) != len(shape) or not all(same(p, q) for p, q in zip(have, shape)):
                self.fail(f"cannot tie to '{tied}': its weight is [{', '.join(map(str, have))}], "
                          f"this {self.kind} needs [{', '.join(map(str, shape))}]")
            self.tied.append(wid)
            return wid
        wid = f"{self.path}/{suffix}"
        sharing = getattr(self.b, "sharing", None)
        if sharing is not None and wid.startswith(sharing[1] + "/") and not self.b.own:   # a shared block: its source's
            return self.share(self._shared_weight(sharing, wid, shape))
        self.b.cg.weights[wid] = Weight(wid, shape, self.b.count, self.b.active, self.b.frozen or self.b.no_grad)
        self.weights.append(wid)
        return wid

    def _shared_weight(self, sharing, wid: str, shape) -> str:
        """The weight of the shared block instance ``sharing[0]`` at ``wid``'s place in this one."""
        source, here, loc = sharing
        src = source + wid[len(here):]
        have = self.b.cg.weights.get(src)
        if have is None or len(have.shape) != len(shape) or not all(same(p, q) for p, q in zip(have.shape, shape)):
            got = "none" if have is None else "[" + ", ".join(map(str, have.shape)) + "]"
            self.fail(f"reuse = '{source}': its weight {src} is {got}, this call needs "
                      f"[{', '.join(map(str, shape))}]",
                      hint="a shared call builds what its source built: the same block, the same sizes")
        return src

    def share(self, wid: str) -> str:
        """Read the weight ``wid`` another node owns (a tied linear's bias is its source's):
        counted once, by its owner."""
        if wid not in self.tied:
            self.tied.append(wid)
        return wid

    def attr(self, name: str, value) -> None:
        """Record ``value`` on the node's ``attrs`` beside the call's arguments
        (the builder copies the arguments after the rule has run): what an
        analysis needs from the rule, such as a causal product's queries and
        keys (:func:`costgraph.engine.totals.causal_share`)."""
        self.args[name] = value

    def float_role(self, *tensors: Tensor) -> str:
        """The role of a floating-point result computed from ``tensors``, as
        PyTorch promotes: ``fp32`` if any is fp32, else the first explicit
        ``bf16``/``fp16``, else ``act`` (masks and ids do not count)."""
        roles = [t.role for t in tensors if t is not None]
        if "fp32" in roles:
            return "fp32"
        return next((r for r in roles if r in ("bf16", "fp16")), "act")

    def cache(self, t: Tensor, window, state: bool = False, shared: bool = False, topk=None,
              fp8_block=None) -> None:
        """Mark ``t`` ([B, ..., S, d]) as kept in the KV cache at inference; a
        tensor already cached (``cache(cache(x))``: the outer call reads the
        inner one's output) is counted once. Views of one storage that are
        different tensors — K and V split off GPT's fused QKV — are cached
        each. ``state = True``: a fixed-size recurrent state with no sequence
        axis; ``shared = True``: another layer's cache read, not stored (see
        :class:`costgraph.engine.graph.CacheEntry`)."""
        producer = self.b.cg.nodes.get(t.producer)
        if (producer is not None and has_role(producer["kind"], "cache")) \
                or any(e.tensor == t.id for e in self.b.cg.caches):
            return
        self.b.cg.caches.append(CacheEntry(t.id, window, self.path, state, shared, topk, fp8_block))

    def producer_keeping_input(self, t: Tensor) -> str | None:
        """The operator kind that produced ``t`` when that operator saved its own first input for
        its backward (a fused gated unit can then recompute ``t`` from it); None otherwise (a
        model input, a weight, or a producer that keeps something else)."""
        node = self.b.cg.nodes.get(t.producer)
        if node is None or not node.get("inputs"):
            return None
        tensors = self.b.cg.tensors
        src = tensors[node["inputs"][0]].storage
        return node["kind"] if any(tensors[s].storage == src for s in node["cost"].saved) else None

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
