"""The difference of two models, or of one model under two configurations:
each quantity's ``B − A`` as a closed form, its value when both sides have
numbers, and the nodes of the operator graph it comes from.

A node's contribution to a quantity is its row's value times the row's count
(:func:`costgraph.engine.totals.breakdown`); rows are matched by path, so a node that
exists on one side only (LLaMA's ``gate_proj`` against GPT's ``c_fc``)
contributes its whole amount, and a node on both sides the difference of its
contributions. The contributions sum to the quantity, so the per-node
differences sum to the total difference exactly (asserted by the tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.totals import QUANTITIES


@dataclass
class Change:
    """One node's share of a difference: ``before``/``after`` its contributions (0 when
    absent), ``delta`` = after − before (SymPy); ``value``: delta at the numbers, if given."""

    path: str
    kind: str
    before: sympy.Expr
    after: sympy.Expr
    delta: sympy.Expr
    value: int | None = None


@dataclass
class QuantityDiff:
    """``delta`` = B − A (expanded); ``a``/``b``: the two values when numbers were given;
    ``changes``: the nodes whose contribution differs, largest |value| (or path order) first."""

    quantity: str
    delta: sympy.Expr
    a: int | None = None
    b: int | None = None
    changes: list[Change] = field(default_factory=list)


def _contributions(costs, q):
    return {r["path"]: (r["kind"], sympy.expand(r["count"] * r[q])) for r in costs.leaves}


def _value(e, values):
    if values is None:
        return None
    v = e.xreplace(values)
    return int(v) if v.is_Integer else None


def diff_costs(a, b, values_a: dict | None = None, values_b: dict | None = None,
               quantities=QUANTITIES) -> list[QuantityDiff]:
    """Compare two :class:`costgraph.model.Costs` (same scope name, any models).

    ``values_a``/``values_b``: symbol → integer for each side (both or neither; one
    model under two configurations gives a symbolic difference of 0 and numeric ones).
    """
    out = []
    for q in quantities:
        delta = sympy.expand(b[q] - a[q])
        ca, cb = _contributions(a, q), _contributions(b, q)
        changes = []
        for path in list(ca) + [p for p in cb if p not in ca]:
            kind = (cb.get(path) or ca.get(path))[0]
            before = ca.get(path, (kind, sympy.Integer(0)))[1]
            after = cb.get(path, (kind, sympy.Integer(0)))[1]
            d = sympy.expand(after - before)
            va = _value(before, values_a)
            vb = _value(after, values_b)
            value = vb - va if va is not None and vb is not None else None
            if d != 0 or (value is not None and value != 0):
                changes.append(Change(path, kind, before, after, d, value))
        if values_a is not None and values_b is not None:
            changes.sort(key=lambda c: -abs(c.value or 0))
        qa, qb = _value(a[q], values_a), _value(b[q], values_b)
        out.append(QuantityDiff(q, delta, qa, qb, changes))
    return out
