"""Derivatives and elasticities of a quantity with respect to a dimension.

``∂Q/∂x`` is the exact derivative of the closed form, ``x`` treated as a real
variable (for a whole-number step the change is ``Q(x + 1) − Q(x)``, also
given). The elasticity ``ε = (x/Q)·∂Q/∂x`` is the percentage change of ``Q``
per percent of ``x``: a term ``c·x^k`` contributes ``k``, so attention's
``4 b s² h`` pulls the elasticity of layer FLOPs in ``s`` from 1 toward 2
(``(6h + 2s)/(6h + s)`` for GPT's ``24 b s h² + 4 b s² h``). ``Min``/``Max``
are differentiated piecewise (``∂Min(s, w)/∂s`` is 1 where ``s < w``, 0 where
``s > w``, undefined at ``s = w``).

A count that a layer pattern rounds (Gemma 3's ``floor(l/6)`` global layers,
``ceil``, ``Mod``) is a step function of the real variable: its derivative is
0 where the rounded value ``u`` is not whole and undefined where it is (the
count jumps there), the same convention as ``Min``/``Max``; the whole steps
``Q(x ± 1) − Q(x)`` are given in every case. The derivative is not taken of
the pattern's average share (``l/6`` for ``floor(l/6)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..errors import CostgraphValueError


def _without_heaviside(e: sympy.Expr) -> sympy.Expr:
    """SymPy differentiates ``Min(s, w)`` to ``Heaviside(w - s)``, worth 1/2 at the switch; write it
    as the field would, ``1 where w > s, 0 where w < s``, undefined (no derivative) at ``s = w``."""
    if not e.has(sympy.Heaviside):
        return e
    return e.replace(lambda x: isinstance(x, sympy.Heaviside),
                     lambda x: sympy.Piecewise((1, x.args[0] > 0), (0, x.args[0] < 0)))


def _rounded(e: sympy.Expr) -> sympy.Expr:
    """The derivative of a ``floor``/``ceiling`` that SymPy leaves unevaluated
    (``Subs(Derivative(floor(ξ), ξ), ξ, u)``) written as the step function's: 0 where ``u`` is
    not whole, undefined (no condition holds) where it is. Raises CostgraphValueError for any
    other derivative left unevaluated."""
    def step(x):
        inner, (var,), (u,) = x.expr, x.variables, x.point
        if isinstance(inner, sympy.Derivative) and isinstance(inner.expr, (sympy.floor, sympy.ceiling)) \
                and inner.expr.args[0] == var and inner.variables == (var,):
            return sympy.Piecewise((0, sympy.Ne(u, sympy.floor(u))))
        return x

    e = e.replace(lambda x: isinstance(x, sympy.Subs), step)
    left = e.atoms(sympy.Derivative, sympy.Subs)
    if left:
        raise CostgraphValueError(f"no derivative of {sympy.sstr(next(iter(left)))[:80]} in closed form",
                                  hint="the whole steps Q(x ± 1) − Q(x) are what a count's change is: use a "
                                       "dimension that is not rounded, or costgraph sweep")
    return e


@dataclass(frozen=True)
class Sensitivity:
    """``derivative`` ∂Q/∂x; ``step`` Q(x + 1) − Q(x); ``elasticity`` (x/Q)·∂Q/∂x, cancelled
    to lowest terms (all SymPy, in the model's symbols)."""

    symbol: sympy.Symbol
    derivative: sympy.Expr
    step: sympy.Expr
    elasticity: sympy.Expr


def sensitivity(expr: sympy.Expr, symbol: sympy.Symbol) -> Sensitivity:
    """The derivative, unit step and elasticity of ``expr`` in ``symbol``.

    Raises
    ------
    CostgraphValueError
        ``expr`` does not depend on ``symbol``.
    """
    if symbol not in expr.free_symbols:
        raise CostgraphValueError(f"the quantity does not depend on {symbol}",
                                  hint="symbols in it: " + ", ".join(sorted(map(str, expr.free_symbols))))
    mod_free = expr.replace(lambda x: isinstance(x, sympy.Mod),   # Mod(a, k) = a − k·floor(a/k)
                            lambda x: x.args[0] - x.args[1] * sympy.floor(x.args[0] / x.args[1]))
    d = _rounded(_without_heaviside(sympy.expand(sympy.diff(mod_free, symbol))))
    step = sympy.expand(expr.xreplace({symbol: symbol + 1}) - expr)
    elasticity = sympy.cancel(symbol * d / expr) if not expr.has(sympy.Min, sympy.Max, sympy.floor, sympy.ceiling, sympy.Mod) \
        else _without_heaviside(symbol * d / expr)
    return Sensitivity(symbol, d, step, elasticity)
