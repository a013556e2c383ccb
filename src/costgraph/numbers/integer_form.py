"""Exact integer form of a cost formula: for exact evaluation
(:class:`costgraph.numbers.evaluator.ExactEvaluator`) and for generated code.

A cost formula is a whole number at valid sizes, but it may be written with
fractions (``s w − w²/2`` under ``--causal half``, ``55 h/4`` per device),
``Min``/``Max`` of fractions, ``floor``/``ceiling`` (layer patterns count
``floor(l/6)`` layers), ``Mod`` and costgraph's
:class:`cg_floordiv`. :func:`exact_parts` rewrites it as
``num / den`` where ``num`` and ``den`` use only integer operations on
integers — ``+``, ``−``, ``×``, powers with whole exponents, ``Min``, ``Max``
and ``cg_floordiv(n, d)`` (floor division, rounding towards −∞) — so
generated code evaluates it in exact integer arithmetic and divides once at
the end, checking that the remainder is zero.

The rules (``x = n/d`` with ``n``, ``d`` integer-valued, ``d > 0``):

* ``p/q`` (a Rational) → ``(p, q)``; a dimension symbol → ``(x, 1)``;
* sums over a common denominator (the lcm of constant ones);
* ``Min(n₁/d₁, n₂/d₂) = Min(n₁·D/d₁, n₂·D/d₂) / D`` for ``D > 0`` a common
  multiple (this needs ``D`` positive: it is checked with SymPy's
  assumptions, dimensions being positive integers);
* ``floor(n/d) = cg_floordiv(n, d)``; ``ceiling(n/d) = −cg_floordiv(−n, d)``;
  ``Mod(x, y) = x − y·floor(x/y)`` (SymPy's sign convention: that of ``y``).

Anything else (a square root, a symbol that is not an integer) is refused
with :class:`~costgraph.errors.CostgraphValueError`.
"""

from __future__ import annotations

from math import gcd, lcm

import sympy

from ..errors import CostgraphValueError
from ..engine.symbols import as_expr

ONE = sympy.Integer(1)


class cg_floordiv(sympy.Function):
    """``n // d`` of two integer-valued expressions: what ``floor`` and
    ``ceiling`` become (layer patterns count ``floor(l/6)`` layers), so that
    they are evaluated in integers, never through floats. Generated code and
    :mod:`costgraph.numbers.evaluator` print it as floor division (rounding towards −∞)."""


def _refuse(e, why: str):
    return CostgraphValueError(f"cannot generate exact integer code for {e}: {why}",
                               hint="costgraph generates code for sums, products, whole powers, "
                                    "min, max, floor, ceil and % of dimensions")


def _positive(d: sympy.Expr, e) -> None:
    if not (d.is_Integer and d > 0) and d.is_positive is not True:
        raise _refuse(e, f"cannot show that the denominator {d} is positive")


def _common(parts: list[tuple[sympy.Expr, sympy.Expr]], e) -> tuple[list[sympy.Expr], sympy.Expr]:
    """Numerators over one common denominator ``D``: ``n_i·D/d_i``, and ``D``."""
    dens = [d for _, d in parts]
    if all(d.is_Integer for d in dens):
        D = sympy.Integer(lcm(*[int(d) for d in dens]))
        return [n * (D / d) for n, d in parts], D
    distinct = list(dict.fromkeys(d for d in dens if d != ONE))
    for d in distinct:
        _positive(d, e)
    D = sympy.Mul(*distinct)
    return [n * sympy.Mul(*[x for x in distinct if x != d]) if d != ONE else n * D for n, d in parts], D


def _parts(e: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    if e.is_Integer:
        return e, ONE
    if e.is_Rational:
        return sympy.Integer(e.p), sympy.Integer(e.q)
    if e.is_Symbol:
        if e.is_integer is not True:
            raise _refuse(e, f"symbol {e} is not known to be an integer")
        return e, ONE
    if e.is_Add:
        nums, D = _common([_parts(a) for a in e.args], e)
        return sympy.Add(*nums), D
    if e.is_Mul:
        parts = [_parts(a) for a in e.args]
        return sympy.Mul(*[n for n, _ in parts]), sympy.Mul(*[d for _, d in parts])
    if e.is_Pow:
        if not e.exp.is_Integer:
            raise _refuse(e, f"the power {e.exp} is not a whole number")
        n, d = _parts(e.base)
        k = int(e.exp)
        if k >= 0:
            return n ** k, d ** k
        _positive(n, e)
        return d ** -k, n ** -k
    if isinstance(e, (sympy.Min, sympy.Max)):
        parts = [_parts(a) for a in e.args]
        nums, D = _common(parts, e)
        _positive(D, e)
        return type(e)(*nums, evaluate=False), D
    if isinstance(e, (sympy.floor, cg_floordiv)):
        n, d = _parts(e.args[0]) if isinstance(e, sympy.floor) else _parts(e.args[0] / e.args[1])
        return (n if d == ONE else cg_floordiv(n, d)), ONE
    if isinstance(e, sympy.ceiling):
        n, d = _parts(e.args[0])
        return (n if d == ONE else -cg_floordiv(-n, d)), ONE
    if isinstance(e, sympy.Mod):
        x, y = e.args
        return _parts(x - y * sympy.floor(x / y, evaluate=False))
    raise _refuse(e, f"{type(e).__name__} is not an integer operation")


def _content(e: sympy.Expr) -> int:
    """The gcd of the integer coefficients of ``e``'s terms (0 for 0)."""
    g = 0
    for t in sympy.Add.make_args(e):
        c, _ = t.as_coeff_Mul()
        g = gcd(g, int(c))
    return g


def exact_parts(expr) -> tuple[sympy.Expr, sympy.Expr]:
    """``expr`` as ``(num, den)``: ``expr == num/den`` with both written in
    integer operations only (see the module docstring); ``den`` is an
    Integer > 0 when ``expr`` has no symbolic denominator, and common integer
    factors of ``num`` and a constant ``den`` are cancelled.

    Raises
    ------
    CostgraphValueError
        A part that is not an integer operation, or a denominator not
        provably positive.
    """
    e = as_expr(expr)
    num, den = _parts(e)
    num, den = sympy.expand(num), sympy.expand(den)
    if den.is_Integer:
        if den < 0:
            num, den = -num, -den
        g = gcd(_content(num), int(den))
        if g > 1:
            num, den = sympy.expand(num / g), den / g
    if num.atoms(sympy.Rational) - num.atoms(sympy.Integer) or not den.is_positive:
        raise _refuse(e, "no integer form found")   # cannot happen for the rules above
    return num, den


__all__ = ["exact_parts"]
