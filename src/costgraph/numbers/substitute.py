"""Substitution for compilation: :func:`substitute`, SymPy's ``xreplace`` without re-deciding
``Min``/``Max`` and relations.

``xreplace`` rebuilds every node above a replaced symbol with its constructor; ``Max`` and
``Min`` then look for arguments that dominate others (``_find_localzeros``: a sign test of
each difference, ``factor_terms`` of long sums) and a ``Piecewise``'s relations are
re-evaluated — most of the time the planner spent preparing its closed forms
(:mod:`costgraph.training.plan_forms`). Here those nodes are rebuilt unevaluated (the same
value: a compiled ``Max`` takes the maximum of its arguments' numbers), every other node by
its constructor, and each distinct subexpression is substituted once (``memo``, shared
between the forms of one compilation).
"""

from __future__ import annotations

from fractions import Fraction
from math import gcd

import sympy
from sympy.core.relational import Relational

from ..engine.symbols import as_expr

#: nodes rebuilt with ``evaluate=False`` (their evaluation compares arguments symbolically)
_UNEVALUATED = (sympy.Min, sympy.Max, Relational, sympy.Piecewise)


def substitute(expr, mapping: dict, memo: dict | None = None):
    """``expr`` with each key of ``mapping`` (symbols) replaced by its value, as
    ``expr.xreplace(mapping)`` but with ``Min``, ``Max``, relations and ``Piecewise`` rebuilt
    unevaluated (module docstring); ``memo``: substituted subexpressions, shared between calls
    with the same ``mapping``. Used where the result is compiled (:func:`costgraph.numbers.evaluator.vectorized`),
    not where it is shown."""
    memo = {} if memo is None else memo

    def sub(e):
        got = memo.get(e)
        if got is not None:
            return got
        if e in mapping:
            out = mapping[e]
        elif not e.args:
            out = e
        else:
            args = tuple(sub(a) for a in e.args)
            if all(a is b for a, b in zip(args, e.args)):
                out = e
            elif isinstance(e, _UNEVALUATED):
                out = e.func(*args, evaluate=False)
            else:
                out = e.func(*args)
        memo[e] = out
        return out

    return sub(expr)


def exact_value(expr, mapping: dict, memo: dict | None = None):
    """The exact number ``expr.xreplace(mapping)`` gives when ``mapping`` (symbols → SymPy
    integers or rationals) covers every free symbol of ``expr``, computed bottom-up on numbers:
    each distinct subexpression once (``memo``, for one ``mapping``), an ``Add``/``Mul``/``Pow`` of
    rationals in Python's exact :class:`fractions.Fraction`, ``Min``/``Max`` as Python's
    ``min``/``max`` of its numbers and a ``Piecewise`` by its first true condition, without
    building the symbolic intermediates ``xreplace`` builds (a ``Max`` of long sums compares them
    symbolically). Any other node (``ceiling``, a relation, a float) is rebuilt by its constructor
    from its arguments' numbers, as ``xreplace`` rebuilds it: the same value. A symbol missing from
    ``mapping`` is left as it is (the result is then symbolic, as ``xreplace``'s). Used by the
    planner's exact confirmation (:mod:`costgraph.training.plan_confirm`)."""
    memo = {} if memo is None else memo
    done = _exact(as_expr(expr), mapping, memo)   # an int or Fraction too; text is never parsed
    return _sym(done)


def _sym(v):
    """An exact value of :func:`_exact` as SymPy: an int or Fraction as its Integer or Rational, anything else
    as it is."""
    t = type(v)
    if t is int:
        return sympy.Integer(v)
    if t is Fraction:
        return sympy.Integer(v.numerator) if v.denominator == 1 else sympy.Rational(v.numerator, v.denominator)
    return v


def _frac(v):
    """``v`` as an exact Python number — an ``int`` when whole, else a :class:`~fractions.Fraction` —
    when it is a SymPy rational (or already one), else None."""
    t = type(v)
    if t is int or t is Fraction:
        return _whole(v) if t is Fraction else v
    if isinstance(v, int) and not isinstance(v, bool):
        return int(v)
    if isinstance(v, sympy.Integer):
        return int(v)
    if isinstance(v, sympy.Rational):
        return Fraction(int(v.p), int(v.q))
    return None


def _whole(f: Fraction):
    return f.numerator if f.denominator == 1 else f


def is_exact(v) -> bool:
    """Whether ``v`` (a value of :func:`_exact`) is an exact rational number (``int`` or ``Fraction``)."""
    t = type(v)
    return t is int or t is Fraction


def _exact(e, mapping: dict, memo: dict):
    """``e`` at ``mapping``, bottom-up: an exact rational as a Python ``int`` (whole) or
    :class:`~fractions.Fraction` (:func:`is_exact`), anything else as a SymPy object (:func:`exact_value`)."""
    got = memo.get(e)
    if got is not None:
        return got
    if e in mapping:
        out = _frac(mapping[e])
        out = mapping[e] if out is None else out
    elif e.is_Rational:
        out = _frac(e)
    elif not e.args:
        out = e
    elif isinstance(e, sympy.Piecewise):
        out = _piecewise(e, mapping, memo)
    else:
        args = [_exact(a, mapping, memo) for a in e.args]
        out = _rational_op(e, args)
        if out is None:
            out = e.func(*[_sym(a) for a in args])
            if getattr(out, "is_Rational", False):   # a ceiling, floor or Mod of numbers: exact for the nodes above
                out = _frac(out)
    memo[e] = out
    return out


def _rational_op(e, fr: list):
    """``e``'s operation on ``fr``, its arguments' values, when each is an exact number (:func:`is_exact`) and
    ``e`` one of Add, Mul, Pow (integer exponent), Min, Max; else None. Sums and products of Fractions are taken
    over a common denominator and reduced once (the same number as Fraction's term-by-term arithmetic, fewer
    gcds)."""
    if e.is_Add:
        n, d = 0, 1
        for f in fr:
            t = type(f)
            if t is int:
                n += f * d
            elif t is Fraction:
                fd = f.denominator
                if fd == d:
                    n += f.numerator
                else:
                    g = gcd(d, fd)
                    n, d = n * (fd // g) + f.numerator * (d // g), d // g * fd
            else:
                return None
        return n if d == 1 else _whole(Fraction(n, d))
    if e.is_Mul:
        n, d = 1, 1
        for f in fr:
            t = type(f)
            if t is int:
                n *= f
            elif t is Fraction:
                n, d = n * f.numerator, d * f.denominator
            else:
                return None
        return n if d == 1 else _whole(Fraction(n, d))
    if not all(map(is_exact, fr)):
        return None
    if e.is_Pow and type(fr[1]) is int and (fr[0] != 0 or fr[1] > 0):
        base, k = fr
        if k >= 0:
            return base ** k if type(base) is int else _whole(base ** k)
        return _whole(Fraction(1) / (Fraction(base) ** -k))
    if isinstance(e, sympy.Max):
        return max(fr)
    if isinstance(e, sympy.Min):
        return min(fr)
    return None


def _piecewise(e, mapping: dict, memo: dict):
    """A ``Piecewise``'s value: the first piece whose condition holds at ``mapping`` (the
    conditions evaluated as numbers); rebuilt by its constructor when a condition stays symbolic."""
    for value, cond in e.args:
        c = cond if cond in (sympy.true, sympy.false) else _sym(_exact(cond, mapping, memo))
        if c is sympy.true or c is True:
            return _exact(value, mapping, memo)
        if c is not sympy.false and c is not False:
            return e.func(*[(_sym(_exact(v, mapping, memo)), _sym(_exact(k, mapping, memo)))
                            for v, k in e.args])
    return e.func(*[(v.xreplace(mapping), k.xreplace(mapping)) for v, k in e.args])
