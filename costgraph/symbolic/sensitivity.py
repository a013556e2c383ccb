"""Derivatives and elasticities of a quantity with respect to a dimension.

``∂Q/∂x`` is the exact derivative of the closed form, ``x`` treated as a real
variable (for a whole-number step the change is ``Q(x + 1) − Q(x)``, also
given). The elasticity ``ε = (x/Q)·∂Q/∂x`` is the percentage change of ``Q``
per percent of ``x``: a term ``c·x^k`` contributes ``k``, so attention's
``4 b s² h`` pulls the elasticity of layer FLOPs in ``s`` from 1 toward 2
(``(6h + 2s)/(6h + s)`` for GPT's ``24 b s h² + 4 b s² h``). ``Min``/``Max``
are differentiated piecewise (``∂Min(s, w)/∂s`` is 1 where ``s < w``, 0 where
``s > w``, undefined at ``s = w``).
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
    d = _without_heaviside(sympy.expand(sympy.diff(expr, symbol)))
    step = sympy.expand(expr.xreplace({symbol: symbol + 1}) - expr)
    elasticity = sympy.cancel(symbol * d / expr) if not expr.has(sympy.Min, sympy.Max, sympy.floor) \
        else _without_heaviside(symbol * d / expr)
    return Sensitivity(symbol, d, step, elasticity)
