"""The largest (or smallest) value of one dimension such that a quantity stays
within a budget: "how large can ``s`` get before activations pass 60 GB".

Two answers:

* **closed form** — when the quantity, with the other dimensions left
  symbolic, is a polynomial of degree 1 or 2 in the solved symbol with
  non-negative coefficients (every cost of a Transformer in ``s``, ``b``,
  ``h``): the positive root of ``Q(x) = M`` in the other symbols and the
  budget ``M`` (quadratic formula), so ``x_max = ⌊root⌋``;
* **integer** — exact over the integers at given values of the others: the
  largest ``n ≥ 1`` with ``Q(n) ≤ M`` (``Q(n + 1) > M`` is checked), found
  by doubling and bisection on exact evaluations. It is exact when ``Q`` is
  non-decreasing in ``x``, which holds (and is reported as *proven*) when ``Q``
  at the given values is a polynomial in ``x`` with non-negative
  coefficients; otherwise it is reported as *assumed*. ``smallest`` solves the
  mirror problem for a quantity that falls as ``x`` grows (memory per device
  against the data-parallel degree ``N_d`` under ZeRO-3): the smallest ``n``
  with ``Q(n) ≤ M``.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..errors import CostgraphValueError

#: the budget's symbol in closed forms
BUDGET = sympy.Symbol("M", positive=True)

#: search bound: 2^62 (values beyond are reported as unbounded)
LIMIT = 2**62

#: at most this many values are tried past the budget's boundary for a valid size (h/a whole, ...)
MAX_STEPS = 100_000


@dataclass(frozen=True)
class Solution:
    """``value``: the integer answer (``None``: not even the bound fits / nothing fits);
    ``closed_form``: ``x_max`` as a SymPy expression in the other symbols and ``M``
    (``floor`` of it is the answer), or ``None``; ``monotone``: ``"proven"`` or ``"assumed"``;
    ``at``, ``beyond``: the quantity at ``value`` and at the first integer past the budget's
    boundary (``boundary`` when the boundary itself is not a valid size)."""

    symbol: sympy.Symbol
    budget: int | None
    direction: str
    value: int | None
    closed_form: sympy.Expr | None
    monotone: str
    at: int | None = None
    beyond: int | None = None
    unbounded: bool = False
    #: the budget's own boundary when it is not a valid size (``value`` is then the nearest
    #: valid size inside the budget), else None
    boundary: int | None = None


def closed_form(expr: sympy.Expr, symbol: sympy.Symbol) -> sympy.Expr | None:
    """The positive root of ``expr = M`` in ``symbol`` when ``expr`` is a polynomial of degree 1
    or 2 in it with coefficients that are non-negative polynomials of the other symbols
    (then the root is where the budget binds); ``None`` otherwise."""
    e = sympy.expand(expr)
    if not e.has(symbol):
        return None
    try:
        poly = sympy.Poly(e, symbol)
    except sympy.PolynomialError:
        return None
    if poly.degree() not in (1, 2) or any(c.has(symbol) for c in poly.all_coeffs()):
        return None
    coeffs = poly.all_coeffs()
    if not all(_nonnegative(c) for c in coeffs):
        return None
    if poly.degree() == 1:
        k, c0 = coeffs
        return sympy.simplify((BUDGET - c0) / k)
    a2, a1, a0 = coeffs
    if a2 == 0:
        return None
    return (-a1 + sympy.sqrt(a1**2 + 4 * a2 * (BUDGET - a0))) / (2 * a2)


def _nonnegative(c: sympy.Expr) -> bool:
    """A coefficient with only non-negative terms (symbols are positive)."""
    c = sympy.expand(c)
    terms = c.args if c.is_Add else (c,)
    return all(t.as_coeff_Mul()[0] >= 0 and not t.has(sympy.Min, sympy.Max, sympy.floor, sympy.ceiling)
               for t in terms)


def monotonicity(f: sympy.Expr, symbol: sympy.Symbol, direction: str) -> str:
    """``"proven"`` when ``f`` (one free symbol) is a polynomial in it with non-negative
    coefficients (non-decreasing) — or, for ``smallest``, in ``1/symbol`` — else ``"assumed"``."""
    g = f if direction == "largest" else f.xreplace({symbol: 1 / symbol})
    g = sympy.expand(g)
    try:
        poly = sympy.Poly(g, symbol)
    except sympy.PolynomialError:
        return "assumed"
    return "proven" if all(c >= 0 for c in poly.all_coeffs()) else "assumed"


#: a divisibility bound past this is not factored (:func:`divisor_candidates` gives up: None)
MAX_FACTORED = 10 ** 18


def divisor_candidates(sizes, symbol: sympy.Symbol, values: dict) -> list[int] | None:
    """The values ``symbol`` can take at most, when a size divides by it: every size ``n / (c·x^k)``
    (``n`` a whole number once the other symbols take ``values``; ``h/a``, ``a/kv``) must be whole,
    so ``x`` divides ``n``, and ``x`` is a divisor of the gcd of every such ``n`` (ascending). A
    superset of the valid sizes (the full check, :meth:`Model.values`, still decides); ``None``
    when no size bounds ``x`` this way (or the bound is past :data:`MAX_FACTORED`).

    ``sizes``: SymPy expressions (a model's ``_sizes``); ``values``: symbol → integer."""
    import math

    rest = {k: sympy.Integer(v) for k, v in values.items() if k != symbol}
    bound = None
    for e in sizes:
        if not isinstance(e, sympy.Expr) or symbol not in e.free_symbols:
            continue
        ex = e.xreplace(rest)
        if ex.free_symbols != {symbol}:
            continue
        num, den = sympy.fraction(sympy.together(ex))
        if not num.is_Integer or num == 0 or symbol not in den.free_symbols:
            continue
        try:
            monomial = sympy.Poly(den, symbol).is_monomial
        except sympy.PolynomialError:
            continue
        if monomial:
            bound = abs(int(num)) if bound is None else math.gcd(bound, abs(int(num)))
    if bound is None or bound > MAX_FACTORED:
        return None
    return [int(d) for d in sympy.divisors(bound)]


def nearest_candidate(candidates, n: int, step: int, valid, top: int | None = None) -> int | None:
    """The first value of the ascending ``candidates`` past ``n`` going by ``step`` (−1: below,
    +1: above, at most ``top``) for which ``valid`` holds; None if none."""
    import bisect

    if step < 0:
        seq = reversed(candidates[:bisect.bisect_left(candidates, n)])
    else:
        seq = candidates[bisect.bisect_right(candidates, n):]
    for m in seq:
        if top is not None and m > top:
            return None
        if valid(m):
            return m
    return None


def _step_to_valid(n: int, step: int, valid, candidates) -> int | None:
    """The valid value nearest ``n`` going by ``step`` (±1): among ``candidates`` at any distance
    when given, else within :data:`MAX_STEPS` tries; None when there is none."""
    if candidates is not None:
        return nearest_candidate(candidates, n, step, valid)
    m = n
    for _ in range(MAX_STEPS):
        m += step
        if m < 1:
            return None
        if valid(m):
            return m
    return None


def solve_budget(expr: sympy.Expr, symbol: sympy.Symbol, values: dict, budget: int, *,
                 direction: str = "largest", limit: int = LIMIT, valid=None, candidates=None,
                 with_closed_form: bool = True) -> Solution:
    """Solve ``expr ≤ budget`` for ``symbol`` over the positive integers.

    ``values``: every other symbol of ``expr`` → integer (SymPy symbols as keys).
    ``direction``: ``"largest"`` (``expr`` non-decreasing in ``symbol``) or ``"smallest"``
    (non-increasing). Units: whatever ``expr`` counts (bytes, FLOPs, parameters).
    ``valid``: an optional ``n -> bool`` for the sizes the model can have (``h/a`` whole, a
    layout's splits even); the answer is then the valid value nearest the budget's boundary
    on its inside (every valid value past it is over the budget, by monotonicity), found
    within :data:`MAX_STEPS` tries or reported as none. ``candidates``: an optional ascending list
    of every value that can be valid (:func:`divisor_candidates`); the nearest valid value is then
    looked for among them only, at any distance. ``with_closed_form=False``: no closed form
    (``closed_form`` is None; saves a SymPy ``simplify`` when only the value is wanted).

    Raises
    ------
    CostgraphValueError
        ``symbol`` not in ``expr``, a symbol without a value, a budget that is not positive,
        an unknown direction.
    """
    if direction not in ("largest", "smallest"):
        raise CostgraphValueError(f"unknown direction {direction!r}", hint="largest or smallest")
    if not isinstance(budget, int) or budget <= 0:
        raise CostgraphValueError("the budget must be a positive whole number")
    if symbol not in expr.free_symbols:
        raise CostgraphValueError(f"the quantity does not depend on {symbol}",
                                  hint="symbols in it: " + ", ".join(sorted(map(str, expr.free_symbols))))
    rest = {k: sympy.Integer(v) for k, v in values.items() if k != symbol}
    f = expr.xreplace(rest)
    free = f.free_symbols - {symbol}
    if free:
        raise CostgraphValueError(f"no value for {', '.join(sorted(map(str, free)))}",
                                  hint="give every dimension but the one solved for (--config or --set)")
    at = lambda n: int(f.xreplace({symbol: sympy.Integer(n)}))  # noqa: E731
    fits = lambda n: at(n) <= budget  # noqa: E731
    form = closed_form(expr, symbol) if direction == "largest" and with_closed_form else None
    mono = monotonicity(f, symbol, direction)
    def settle(n: int, step: int, **kw) -> Solution:
        """The valid value nearest ``n`` going by ``step`` (toward the inside of the budget)."""
        if valid is None or valid(n):
            return Solution(symbol, budget, direction, n, form, mono, at=at(n), **kw)
        m = _step_to_valid(n, step, valid, candidates)
        if m is not None:
            return Solution(symbol, budget, direction, m, form, mono, at=at(m), boundary=n, **kw)
        return Solution(symbol, budget, direction, None, form, mono, boundary=n, **kw)

    if direction == "largest":
        if not fits(1):
            return Solution(symbol, budget, direction, None, form, mono, at=None, beyond=at(1))
        lo, hi = 1, 2
        while hi <= limit and fits(hi):
            lo, hi = hi, hi * 2
        if hi > limit:
            return settle(lo, -1, unbounded=True)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid)
        return settle(lo, -1, beyond=at(lo + 1))
    # smallest n with f(n) <= budget, f non-increasing
    form = None
    if fits(1):
        return settle(1, +1)
    lo, hi = 1, 2       # f(lo) > budget
    while hi <= limit and not fits(hi):
        lo, hi = hi, hi * 2
    if hi > limit:
        return Solution(symbol, budget, direction, None, None, mono, beyond=at(lo), unbounded=True)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return settle(hi, +1, beyond=at(hi - 1))
