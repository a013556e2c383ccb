"""Printer mixins shared by the code generators (SymPy code printers):

* :class:`NamedSymbols` — each symbol printed by a ``names`` map (the
  model's dimension → a name safe in the target language), printer settings
  from the class attribute ``SETTINGS``;
* :class:`MinMaxAsCalls` — ``Min``/``Max`` of any number of arguments as nested
  two-argument calls (``cg_min(a, cg_min(b, c))``) of the functions named by
  ``MIN_CALL`` and ``MAX_CALL``.
"""

from __future__ import annotations


class NamedSymbols:
    SETTINGS: dict = {"order": "none"}

    def __init__(self, names: dict[str, str]):
        super().__init__(dict(self.SETTINGS))
        self._names = names

    def _print_Symbol(self, e):
        return self._names[e.name]


class MinMaxAsCalls:
    MIN_CALL = "min"
    MAX_CALL = "max"

    def _pairwise(self, fn, args):
        out = self._print(args[-1])
        for a in reversed(args[:-1]):
            out = f"{fn}({self._print(a)}, {out})"
        return out

    def _print_Min(self, e):
        return self._pairwise(self.MIN_CALL, e.args)

    def _print_Max(self, e):
        return self._pairwise(self.MAX_CALL, e.args)
