"""The one table of dimension symbols.

Every dimension is a SymPy ``Symbol`` that is a positive integer; making them
all here (never ``Symbol(name)`` elsewhere) guarantees that the ``h`` of one
model file is the ``h`` of another and of the tests. Names follow the field
(Megatron-LM, Korthikanti et al. 2022; see DOMAIN.md).
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache

import sympy

# Meanings of the field's standard names, used when a model file gives none.
STANDARD_MEANINGS: dict[str, str] = {
    "b": "micro-batch size (sequences)",
    "s": "sequence length (tokens)",
    "h": "hidden size (d_model)",
    "a": "attention heads",
    "l": "Transformer layers",
    "V": "vocabulary size",
    "n": "new tokens generated at inference",
    "s_max": "maximum sequence length (learned position table)",
}

# The order in which the field writes the factors of a term: l(24 b s h^2 ...).
FIELD_ORDER: tuple[str, ...] = ("l", "b", "s", "h", "a", "V")


def as_expr(x, what: str = "a value") -> sympy.Expr:
    """``x`` — a SymPy expression, a Python ``int`` or a ``fractions.Fraction``
    — as a SymPy object. The one door numbers take into SymPy: text is never
    parsed (no ``sympify``); anything else raises ``CostgraphValueError``
    naming ``what``."""
    if isinstance(x, sympy.Basic):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return sympy.Integer(x)
    if isinstance(x, Fraction):
        return sympy.Rational(x.numerator, x.denominator)
    from ..errors import CostgraphValueError

    raise CostgraphValueError(f"{what} must be a whole number or a SymPy expression, not {type(x).__name__}")


@cache
def dim(name: str) -> sympy.Symbol:
    """The dimension symbol ``name``: a positive integer."""
    return sympy.Symbol(name, positive=True, integer=True)


def factor_rank(name: str) -> tuple[int, str]:
    """Sort key of a symbol name in a printed term (field order, then by name)."""
    try:
        return (FIELD_ORDER.index(name), "")
    except ValueError:
        return (len(FIELD_ORDER), name)
