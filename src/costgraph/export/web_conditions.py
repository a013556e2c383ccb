"""``Piecewise`` choices as integer arithmetic, for the calculator page's exact code (:mod:`costgraph.export.web`).

Some memory formulas choose by a size: bitsandbytes keeps 8-bit Adam states only for tensors of at
least 4096 elements, Adafactor factors a matrix's second moment — ``Piecewise((8 h, h < 4096), ...)``.
The exact integer code of :func:`costgraph.numbers.integer_form.exact_parts` knows sums, products,
whole powers, ``Min``, ``Max``, ``floor`` and ``Mod``; :func:`indicator_form` rewrites each
``Piecewise`` into those, so the page evaluates the same choice exactly (``BigInt``):

* ``Piecewise((a, c), (b, True)) = b + (a − b)·[c]``, nested for more pieces;
* a comparison of ``x`` and ``y`` is one of ``g`` and 0, where ``y − x = g/d`` with ``d > 0`` and ``g``
  an integer (:func:`~costgraph.numbers.integer_form.exact_parts`): ``[x ≤ y] = Min(1, Max(0, g + 1))``,
  ``[x < y] = Min(1, Max(0, g))``, ``[x = y] = 1 − Min(1, Max(g, −g))``; ``[A ∨ B] = Max([A], [B])``,
  ``[A ∧ B] = Min([A], [B])``, ``[¬A] = 1 − [A]``.

A condition whose sides have no integer form is refused (:class:`~costgraph.errors.CostgraphValueError`).
"""

from __future__ import annotations

import functools

import sympy

from ..errors import CostgraphValueError
from ..numbers.integer_form import exact_parts

ONE, ZERO = sympy.Integer(1), sympy.Integer(0)


@functools.lru_cache(maxsize=4096)
def indicator(c) -> sympy.Expr:
    """``[c]``: 1 where the condition ``c`` holds, else 0, as ``Min``/``Max`` of integers (module docstring);
    once per condition (SymPy's ``Min`` and ``Max`` compare their arguments: a page's size choices meet the
    same conditions in many of its formulas)."""
    if c is sympy.true or c is sympy.false:
        return ONE if c is sympy.true else ZERO
    if isinstance(c, (sympy.Or, sympy.And)):
        return (sympy.Max if isinstance(c, sympy.Or) else sympy.Min)(*[indicator(a) for a in c.args])
    if isinstance(c, sympy.Not):
        return ONE - indicator(c.args[0])
    if isinstance(c, (sympy.Le, sympy.Lt, sympy.Ge, sympy.Gt, sympy.Eq, sympy.Ne)):
        x, y = (c.rhs, c.lhs) if isinstance(c, (sympy.Ge, sympy.Gt)) else (c.lhs, c.rhs)
        gap, _ = exact_parts(y - x)     # y − x = gap/den with den > 0 (refused unless provable): signs agree
        if isinstance(c, (sympy.Le, sympy.Ge, sympy.Lt, sympy.Gt)):
            return sympy.Min(ONE, sympy.Max(ZERO, gap + 1 if isinstance(c, (sympy.Le, sympy.Ge)) else gap))
        same = ONE - sympy.Min(ONE, sympy.Max(gap, -gap))
        return same if isinstance(c, sympy.Eq) else ONE - same
    raise CostgraphValueError(f"the page cannot write the condition {c} ({type(c).__name__})",
                              hint="conditions of comparisons of whole numbers, joined by and, or, not")


def _piecewise(*pieces) -> sympy.Expr:
    (value, cond), rest = (pieces[0].expr, pieces[0].cond), pieces[1:]
    if cond is sympy.true or not rest:
        return value
    other = _piecewise(*rest)
    return other + (value - other) * indicator(cond)


def indicator_form(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` with every ``Piecewise`` written as integer arithmetic on its conditions (module docstring).

    Raises
    ------
    CostgraphValueError
        A condition whose sides have no integer form, or one that is no comparison."""
    if not expr.has(sympy.Piecewise):
        return expr
    return expr.replace(lambda e: isinstance(e, sympy.Piecewise), lambda e: _piecewise(*e.args))


__all__ = ["indicator", "indicator_form"]
