"""Layer patterns: counting the copies of a repeat that take a branch.

``repeat l as layers[i] { if i % 6 == 5 { A } else { B } }`` builds A and B
once each (:mod:`costgraph.engine.builder`); A's nodes count ``floor(l/6)`` copies,
B's the rest. A condition on an index is a formula over atoms; each atom is a
*cell*: the i with ``lo ≤ i < hi`` and ``i mod m`` in a set of residues.
Counting the i in ``0..n-1`` that satisfy a formula is exact: conjunctions of
cells intersect (bounds by ``Max``/``Min``, congruences by their least common
multiple), ``not`` and ``or`` go by inclusion–exclusion. ``i % m == r`` holds
for ``floor((n + m − 1 − r)/m)`` of ``0 … n−1``.

A congruence between whole-number bounds (``i % 6 == 5`` with ``i in [0, 1, 2]`` or ``i < 3``) holds a few listed
indices: each is tested against the residues at once and counts ``[i ≥ lo][i < hi]`` for the bounds that are symbols (the repeat's
count ``n``, ``n − 1``), so that a pattern of a few first layers, the last and every m-th (Beam's: transformers 5.24
configuration_beam.py ``BeamConfig.__post_init__``) counts as a short sum over its index sets instead of floors of
``Min``/``Max`` of every bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import gcd

import sympy

from ..errors import CostgraphSemanticError, Location

# Largest modulus a conjunction of congruences may reach (the lcm of the
# moduli): its residues are listed.
MAX_MODULUS = 1_000

# Most conjunctions one condition may expand into (each `or` and `not` doubles
# the work of inclusion-exclusion).
MAX_CONDITION_TERMS = 1024

# Most indices a cell between whole-number bounds is listed by (beyond: counted by floors, as any cell).
MAX_LISTED = 64

PATTERN_HINT = ("a condition on a layer index is written i % M == R (M, R whole numbers), i < K, i >= K, "
                 "i == K ..., i in [2, 5, 8], joined with and, or, not")


@dataclass(frozen=True)
class Index:
    """The value of a repeat's index in scope: which level of repeats it numbers."""

    name: str
    group: str
    level: int
    count: sympy.Expr


@dataclass(frozen=True)
class Cell:
    """The i with lo ≤ i < hi (None: no bound) and i mod m in ``residues``."""

    lo: sympy.Expr | None = None
    hi: sympy.Expr | None = None
    m: int = 1
    residues: frozenset = frozenset({0})


@dataclass(frozen=True)
class Cond:
    """A condition on the index of repeat level ``level``: ``tree`` is a
    :class:`Cell` or ``("and"|"or", a, b)`` or ``("not", a)`` or ``("any", c1, c2, ...)``
    (cells no two of which hold for one index: ``i in [2, 5, 8]``)."""

    level: int
    tree: object


@dataclass
class Level:
    """One enclosing repeat while its body is walked: its count and active
    count, and the conditions on its index of the branches being walked."""

    count: sympy.Expr
    active: sympy.Expr
    conds: list = field(default_factory=list)


def count_pattern(n: sympy.Expr, trees: list, loc: Location) -> sympy.Expr:
    """How many i in 0..n-1 satisfy every condition of ``trees`` (exact)."""
    budget = [MAX_CONDITION_TERMS]

    def cells(lo: list, hi: list, m: int, res: frozenset) -> sympy.Expr:
        if not res:
            return sympy.Integer(0)
        listed = _listed(lo, hi, m, res)
        if listed is not None:
            return listed
        L, H = sympy.Max(*lo), sympy.Min(*hi)
        nonneg = (H - L).is_nonnegative
        total = sympy.Integer(0)
        for r in sorted(res):
            c = sympy.floor((H + m - 1 - r) / sympy.Integer(m)) - sympy.floor((L + m - 1 - r) / sympy.Integer(m))
            total += c if nonneg else sympy.Max(0, c)
        return total

    def count(ctx, pending: list) -> sympy.Expr:
        lo, hi, m, res = ctx
        if not res:
            return sympy.Integer(0)
        if not pending:
            budget[0] -= 1
            if budget[0] < 0:
                raise CostgraphSemanticError(
                    f"this condition is too complex: counting it exactly takes more than {MAX_CONDITION_TERMS} "
                    "terms", loc, hint="write it with fewer 'or' and 'not', or split it into nested ifs")
            return cells(lo, hi, m, res)
        first, rest = pending[0], pending[1:]
        if isinstance(first, Cell):
            m2 = first.m * m // gcd(first.m, m)
            if m2 > MAX_MODULUS:
                raise CostgraphSemanticError(
                    f"the moduli of this condition combine to {m2} (at most {MAX_MODULUS})", loc,
                    hint="a layer pattern repeats every few layers: i % 6 == 5")
            res2 = frozenset(x for x in range(m2) if x % m in res and x % first.m in first.residues)
            return count((lo + ([first.lo] if first.lo is not None else []),
                          hi + ([first.hi] if first.hi is not None else []), m2, res2), rest)
        op = first[0]
        if op == "any":   # disjoint cells: |A ∪ B ∪ ...| = |A| + |B| + ...
            return sympy.Add(*(count(ctx, [cell, *rest]) for cell in first[1:]))
        if op == "and":
            return count(ctx, [first[1], first[2], *rest])
        if op == "not":
            return count(ctx, rest) - count(ctx, [first[1], *rest])
        # or: |A ∪ B| = |A| + |B| − |A ∩ B|
        return count(ctx, [first[1], *rest]) + count(ctx, [first[2], *rest]) - count(ctx, [first[1], first[2], *rest])

    return count(([sympy.Integer(0)], [n], 1, frozenset({0})), list(trees))


def _between(x: int, lo: list, hi: list) -> sympy.Expr:
    """``[lo ≤ x < hi]`` for every bound (1 or 0) of a whole number x and bounds that are whole-number expressions:
    ``max(0, min(1, x − lo + 1, hi − x, ...))``, one term (each ``[x ≥ lo]`` is ``x − lo + 1`` clamped to 0..1, and
    a product of such is their minimum)."""
    if not lo and not hi:
        return sympy.Integer(1)
    return sympy.Max(0, sympy.Min(1, *(x - b + 1 for b in lo), *(b - x for b in hi)))


def _listed(lo: list, hi: list, m: int, res: frozenset) -> sympy.Expr | None:
    """How many i with every ``lo ≤ i < hi`` and ``i mod m`` in ``res``, by listing the i between the bounds that
    are whole numbers, when some upper bound is one, a congruence is in play (m > 1) and at most :data:`MAX_LISTED`
    indices lie between them: the i whose residue is not in ``res`` count nothing; each other counts ``[i ≥ lo]``
    and ``[i < hi]`` for each bound that is a symbol (``[i < n]`` is ``[n ≥ i + 1]``). None otherwise: without a
    congruence nothing is pruned and ``Min(3, n)`` (DeepSeek's ``i < 3``) reads better than three clamps."""
    whole_hi = [int(b) for b in hi if isinstance(b, sympy.Integer)]
    if not whole_hi or m == 1:
        return None
    first = max([int(b) for b in lo if isinstance(b, sympy.Integer)], default=0)
    last = min(whole_hi)
    if last - first > MAX_LISTED:
        return None
    sym_lo = list(dict.fromkeys(b for b in lo if not isinstance(b, sympy.Integer)))
    sym_hi = list(dict.fromkeys(b for b in hi if not isinstance(b, sympy.Integer)))
    return sympy.Add(*(_between(x, sym_lo, sym_hi) for x in range(first, last) if x % m in res))
