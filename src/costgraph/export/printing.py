"""The formula printers for the renderers: :mod:`costgraph.numbers.printing` (field order, text, LaTeX,
Python), which the API's lower floors (``model``, ``verify``, ``diffusion``) import from there; and
:func:`printed`, the three texts of a JSON document's formula, each expression printed once."""

from __future__ import annotations

import functools

import sympy

from ..numbers.printing import field_order, grouped, to_latex, to_python, to_text
from .exprtree import to_tree

__all__ = ["field_order", "grouped", "printed", "to_latex", "to_python", "to_text"]


@functools.lru_cache(maxsize=256)   # a stage's memory is printed again as the model's, a part inside the total
def _texts(expr: sympy.Expr, order: bool) -> tuple:
    ordered = field_order(expr) if order else expr
    return ordered, to_python(ordered), to_latex(ordered)


def printed(expr: sympy.Expr, order: bool) -> dict:
    """``{expr, tree, latex}`` of ``expr`` in field order (``order``: :func:`field_order`), its texts printed once
    per expression (a bounded cache: SymPy's printers are slow on the conditional formulas of 8-bit optimizers)."""
    ordered, text, tex = _texts(expr, order)
    return {"expr": text, "tree": to_tree(ordered), "latex": tex}
