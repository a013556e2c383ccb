"""The exact value of an inference quantity once its symbols have values: one function
shared by the roofline, the capacity and the device-figure paths (no import cycle
between them)."""

from __future__ import annotations

import sympy

from ..engine.symbols import as_expr


def exact_value(e, subs: dict):
    """``e`` with ``subs`` substituted: an exact SymPy number (simplified when not already a
    Rational), or None while a symbol is left without a value.

    >>> import sympy
    >>> x = sympy.Symbol("x")
    >>> exact_value(2 * x + 1, {x: sympy.Rational(1, 2)})
    2
    >>> exact_value(2 * x, {}) is None
    True
    """
    from .decode import ExactPow, bounded_subs   # a mixture's huge (1 - k/E)^(b q) kept unevaluated (bounded time)

    v = bounded_subs(as_expr(e), subs)
    if v.free_symbols:
        return None
    return v if v.is_Rational or v.has(ExactPow) else sympy.simplify(v)
