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

import sympy
from sympy.core.relational import Relational

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
