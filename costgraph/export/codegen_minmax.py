"""A printer mixin shared by the code generators: ``Min``/``Max`` of any
number of arguments as nested two-argument calls (``cg_min(a, cg_min(b, c))``),
the functions named by the class attributes ``MIN_CALL`` and ``MAX_CALL``."""

from __future__ import annotations


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
