"""The formula printers for the renderers: :mod:`costgraph.numbers.printing` (field order, text, LaTeX,
Python), which the API's lower floors (``model``, ``verify``, ``diffusion``) import from there."""

from __future__ import annotations

from ..numbers.printing import field_order, grouped, to_latex, to_python, to_text

__all__ = ["field_order", "grouped", "to_latex", "to_python", "to_text"]
