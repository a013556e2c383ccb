"""SymPy's ``Min`` and ``Max`` built faster where SymPy would leave them unevaluated.

``sympy.Min(a, b)`` (and ``Max``) filters and collapses its arguments, then looks for an argument
that dominates another (``MinMaxBase._find_localzeros``): for each pair it asks whether ``a ≥ b``
or ``a ≤ b`` (the assumptions' sign of ``a − b``, then of ``factor_terms(a − b)``), a few
milliseconds over the model's symbolic layer counts, and most of the time it proves neither
(``Min(k_d, l/2 − 1/2)``): the pipeline's layer split builds hundreds of them per plan
(:mod:`costgraph.parallel.layer_split`).

:func:`smin` and :func:`smax` give the very object SymPy gives. They run SymPy's own filter and
collapse (``_new_args_filter``, ``_collapse_arguments``), then evaluate each pair's difference
exactly at a few points where every symbol is a positive integer (:func:`costgraph.numbers.substitute.exact_value`).
A difference that is positive at one point and negative at another has no sign SymPy could prove (its
assumptions hold at those points: each symbol's known facts are those of a positive integer), so no argument
dominates the other and ``_find_localzeros`` would keep both: the result is built as SymPy's constructor
builds it (``Expr.__new__`` over the ordered arguments, ``_argset`` set). Any other case (a pair of one sign at
every point tried, a symbol whose assumptions a positive integer may break, a value that is not a rational)
is SymPy's own ``Min``/``Max``.
"""

from __future__ import annotations

import itertools

import sympy
from sympy.core.basic import ordered
from sympy.core.expr import Expr
from sympy.core.operations import ShortCircuit

from .substitute import _exact, is_exact

#: the values each symbol takes at the points tried (positive integers, small to large)
_VALUES = (1, 2, 3, 5, 8, 13, 100, 1000, 10**6)
#: the facts every positive integer has (what a symbol may assume for the points to lie in its domain)
_FACTS = sympy.Symbol("_positive_integer", positive=True, integer=True).assumptions0


def smin(*args) -> sympy.Expr:
    """``sympy.Min(*args)``, the same object (module docstring), faster where it stays unevaluated."""
    return _build(sympy.Min, args)


def smax(*args) -> sympy.Expr:
    """``sympy.Max(*args)``, the same object (module docstring), faster where it stays unevaluated."""
    return _build(sympy.Max, args)


def _build(cls, args):
    sym = [sympy.sympify(a) for a in args]
    if all(a.is_number for a in sym):   # numbers: SymPy compares them at once
        return cls(*sym)
    try:
        kept = frozenset(cls._new_args_filter(iter(sym)))
    except ShortCircuit:
        return cls.zero
    kept = cls._collapse_arguments(kept)
    kept = frozenset(kept)
    if len(kept) < 2 or not _unordered(kept):
        return cls(*sym)
    obj = Expr.__new__(cls, *ordered(kept))
    obj._argset = kept
    return obj


def _unordered(args: frozenset) -> bool:
    """Whether every pair of ``args`` differs in sign at some two points where each symbol is a positive
    integer (module docstring): then SymPy's ``_find_localzeros`` keeps them all."""
    free = sorted(set().union(*(a.free_symbols for a in args)), key=lambda s: s.name)
    if not free or not all(_positive_integer_domain(s) for s in free):
        return False
    listed = list(args)
    signs = {pair: set() for pair in itertools.combinations(range(len(listed)), 2)}
    for point in _points(free):
        memo: dict = {}
        row = [None] * len(listed)
        for i, a in enumerate(listed):
            got = _exact(a, point, memo)
            if not is_exact(got):
                return False
            row[i] = got
        for (i, j), seen in signs.items():
            d = row[i] - row[j]
            if d:
                seen.add(d > 0)
        if all(len(s) == 2 for s in signs.values()):
            return True
    return False


def _positive_integer_domain(s) -> bool:
    """Whether each fact symbol ``s`` assumes holds for every positive integer."""
    return all(_FACTS.get(k) == v for k, v in s.assumptions0.items())


def _points(free: list):
    """Points (symbol → positive integer, as SymPy integers): every symbol at one value, then the symbols at
    values apart (each shifted by its place), so that differences of two symbols change sign too."""
    n = len(_VALUES)
    for shift in range(len(free)):
        for k in range(n):
            yield {s: sympy.Integer(_VALUES[(k + shift * (i + 1)) % n]) if shift else sympy.Integer(_VALUES[k])
                   for i, s in enumerate(free)}
