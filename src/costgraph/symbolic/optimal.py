"""Compute-optimal model size and training tokens for a FLOP budget, from the
model's own formulas (not ``C ≈ 6 N D``).

One dimension ``x`` of the model is scaled (depth ``l`` by default; the others
stay at the configuration's values). For each ``x`` the model's parameters
``N(x)`` (``params``) and training FLOPs per token
``F(x) = (flops_forward + flops_backward) / (b·s)`` come from the graph
(``matmul`` convention by default, so ``F ≈ 6 N`` plus attention), and ``D``
tokens cost ``D·F(x)`` FLOPs. Two rules, named:

``tokens-per-param`` (default ratio 20, Hoffmann et al. 2022, Table 3)
    ``D = r·N(x)``: the largest ``x`` with ``r·N(x)·F(x) ≤ C``, solved exactly
    over the integers (:func:`costgraph.symbolic.solve.solve_budget`).
``chinchilla``
    the ``x`` minimising the fitted loss ``L = E + A/N^α + B/D^β`` (Hoffmann et
    al. 2022 §3.3, Approach 3; constants in ``scaling_laws.toml``) with
    ``D = C / F(x)``: integer golden-section search on ``[1, x_max]``
    (``x_max``: one token's FLOPs fit), then the neighbours checked. The
    paper's closed form for ``C = 6ND``, ``N_opt = G (C/6)^{β/(α+β)}`` with
    ``G = (αA/(βB))^{1/(α+β)}`` (its Eq. 4), is given beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import sympy

from .. import datafiles
from ..datafiles import Field, Kind, Schema
from ..errors import CostgraphValueError
from ..engine.symbols import dim
from .solve import nearest_candidate, solve_budget


_SOURCE = Field("source", "text")
#: ``scaling_laws.toml``: two fixed tables, decimals read exactly (no user entries).
SCALING_LAWS = Schema("scaling_laws.toml", __package__, records=(
    ("chinchilla", Kind("loss fit", (*(Field(k, "decimal", positive=True) for k in ("E", "A", "B", "alpha", "beta")),
                                     _SOURCE))),
    ("tokens_per_param", Kind("token ratio", (Field("ratio", unit="tokens per parameter", positive=True), _SOURCE))),
))


@cache
def constants() -> dict:
    """The scaling-law constants of ``scaling_laws.toml`` (numbers as Fractions, exact),
    validated by :mod:`costgraph.datafiles` against :data:`SCALING_LAWS`."""
    data = datafiles.bundled(SCALING_LAWS).records
    ch = {k: v for k, v in data["chinchilla"].values.items() if k != "source"}
    return {"chinchilla": ch, "chinchilla_source": data["chinchilla"]["source"],
            "ratio": data["tokens_per_param"]["ratio"], "ratio_source": data["tokens_per_param"]["source"]}


@dataclass(frozen=True)
class Optimum:
    """The chosen size: ``value`` of the scaled symbol, ``params`` N, ``tokens`` D,
    ``flops`` D·F spent (≤ the budget), ``loss`` (chinchilla rule), and the rule's name."""

    rule: str
    symbol: sympy.Symbol
    value: int
    params: int
    tokens: int
    flops: int
    flops_per_token: Fraction
    loss: float | None = None


def per_token(costs, values: dict) -> tuple[sympy.Expr, sympy.Expr]:
    """``(N, F)``: params and training FLOPs per token as expressions, the batch and sequence
    (``b``, ``s``) and every other symbol but the scaled one substituted from ``values``."""
    b, s = dim("b"), dim("s")
    n = costs["params"]
    f = (costs["flops_forward"] + costs["flops_backward"]) / (b * s)
    return n, f


def optimal(costs, values: dict, symbol: sympy.Symbol, budget: int, *, rule: str = "tokens-per-param",
            ratio: int | None = None, valid=None, candidates=None) -> Optimum:
    """The compute-optimal value of ``symbol`` for ``budget`` FLOPs (see the module docstring).

    ``values``: symbol → integer for every other symbol (``b`` and ``s`` included; ``b·s``
    tokens per step only fix how attention's ``s`` enters ``F``). ``valid``: an optional
    ``n -> bool`` for the sizes the model can have (``h/a`` whole); the answer is then valid.
    ``candidates``: an optional ascending list of every value that can be valid
    (:func:`costgraph.symbolic.solve.divisor_candidates`): only those are tried for validity.

    Raises
    ------
    CostgraphValueError
        Unknown rule, a non-positive budget or ratio, a symbol params do not depend on,
        a budget below one token of the smallest model, no valid size, or an optimum past the
        search bound 2^62.
    """
    if rule not in ("tokens-per-param", "chinchilla"):
        raise CostgraphValueError(f"unknown rule {rule!r}", hint="tokens-per-param or chinchilla")
    if not isinstance(budget, int) or budget <= 0:
        raise CostgraphValueError("the FLOP budget must be a positive whole number")
    ratio = constants()["ratio"] if ratio is None else ratio
    if not isinstance(ratio, int) or ratio <= 0:
        raise CostgraphValueError("the tokens-per-parameter ratio must be a positive whole number")
    n_expr, f_expr = per_token(costs, values)
    if symbol not in n_expr.free_symbols:
        raise CostgraphValueError(f"the parameter count does not depend on {symbol}",
                                  hint="scale a dimension of the weights: l, h, i, E, ...")
    rest = {k: sympy.Integer(v) for k, v in values.items() if k != symbol}
    n_x, f_x = n_expr.xreplace(rest), f_expr.xreplace(rest)
    free = (n_x.free_symbols | f_x.free_symbols) - {symbol}
    if free:
        raise CostgraphValueError(f"no value for {', '.join(sorted(map(str, free)))}",
                                  hint="give every dimension but the scaled one (--config or --set)")

    n_fast, f_fast = _rational_function(n_x, symbol), _rational_function(f_x, symbol)

    def N(x):
        v = n_fast(x) if n_fast is not None else None
        return int(v) if v is not None else int(n_x.xreplace({symbol: sympy.Integer(x)}))

    def F(x):
        v = f_fast(x) if f_fast is not None else None
        if v is not None:
            return v
        v = f_x.xreplace({symbol: sympy.Integer(x)})
        return Fraction(int(v.p), int(v.q))

    if rule == "tokens-per-param":
        sol = solve_budget(ratio * n_expr * f_expr, symbol, values, budget, valid=valid, candidates=candidates,
                           with_closed_form=False)
        if sol.unbounded:
            raise CostgraphValueError(f"no optimum below {symbol} = 2^62: {budget:,} FLOPs train larger models "
                                      f"than the search reaches", hint="scale another dimension or lower --flops")
        if sol.value is None:
            raise CostgraphValueError(f"{budget:,} FLOPs do not train even {symbol} = 1 on {ratio} tokens "
                                      "per parameter" if sol.boundary is None else
                                      f"no valid {symbol} at or below {sol.boundary:,}", hint="raise the budget")
        x = sol.value
        tokens = ratio * N(x)
        return Optimum(rule, symbol, x, N(x), tokens, int(tokens * F(x)), F(x))
    return _chinchilla(f_expr, symbol, values, budget, N, F, valid, candidates)


def _chinchilla(f_expr, symbol, values: dict, budget: int, N, F, valid, candidates) -> Optimum:
    """``optimal``'s ``chinchilla`` rule: the size of lowest Hoffmann et al. loss with
    ``budget/F(x)`` tokens, searched up to the largest size one token fits (``N``, ``F``:
    parameters and FLOPs per token at a size, exact)."""
    one = solve_budget(f_expr, symbol, values, budget, with_closed_form=False)      # one token fits: x ≤ x_max
    if one.value is None:
        raise CostgraphValueError(f"{budget:,} FLOPs do not pay for one token at {symbol} = 1")
    if one.unbounded:
        raise CostgraphValueError(f"no optimum below {symbol} = 2^62: one token costs under {budget:,} FLOPs "
                                  "even there", hint="scale another dimension or lower --flops")
    c = constants()["chinchilla"]
    E, A, B, al, be = (float(c[k]) for k in ("E", "A", "B", "alpha", "beta"))

    def loss(x):
        d = budget / float(F(x))
        return E + A / N(x) ** al + B / d ** be

    lo, hi = 1, one.value
    while hi - lo > 2:              # integer golden-section (ternary) search on a unimodal loss
        m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
        if loss(m1) <= loss(m2):
            hi = m2
        else:
            lo = m1
    x = min(range(lo, hi + 1), key=loss)
    if valid is not None and not valid(x):      # the valid size with the lower loss on either side
        near = _nearest_valid(x, one.value, valid, candidates=candidates)
        if not near:
            raise CostgraphValueError(f"no valid {symbol} near {x:,}, the loss's minimum")
        x = min(near, key=loss)
    tokens = int(Fraction(budget) / F(x))
    return Optimum("chinchilla", symbol, x, N(x), tokens, int(tokens * F(x)), F(x), loss(x))


def _rational_function(expr: sympy.Expr, symbol: sympy.Symbol):
    """``expr`` (no free symbol but ``symbol``) as ``x -> P(x)/Q(x)``, a Fraction evaluated exactly
    (Horner, rational coefficients): the same value as substituting into ``expr``, without SymPy
    per call; the function returns None where ``Q(x) = 0``. None when ``expr`` is no ratio of
    polynomials with rational coefficients (``Min``, a float)."""
    try:
        parts = sympy.fraction(sympy.together(expr))
        coeffs = [[Fraction(int(c.p), int(c.q)) for c in sympy.Poly(e, symbol).all_coeffs()] for e in parts]
    except (sympy.PolynomialError, sympy.GeneratorsNeeded, AttributeError, TypeError, ValueError):
        return None

    def horner(cs, x: int) -> Fraction:
        v = Fraction(0)
        for c in cs:
            v = v * x + c
        return v

    def value(x: int) -> Fraction | None:
        den = horner(coeffs[1], x)
        return None if den == 0 else horner(coeffs[0], x) / den
    return value


def _nearest_valid(x: int, top: int, valid, steps: int = 100_000, candidates=None) -> list[int]:
    """The nearest valid values below and above ``x`` (within ``[1, top]`` and ``steps`` tries; among
    ``candidates`` only, at any distance, when given)."""
    if candidates is not None:
        found = (nearest_candidate(candidates, x, step, valid, top) for step in (-1, 1))
        return [m for m in found if m is not None]
    out = []
    for direction in (-1, 1):
        m = x
        for _ in range(steps):
            m += direction
            if m < 1 or m > top:
                break
            if valid(m):
                out.append(m)
                break
    return out


def chinchilla_closed_form(budget: float) -> tuple[float, float]:
    """Hoffmann et al. 2022, Eq. 4 with the Approach 3 constants: ``(N_opt, D_opt)`` for ``C = 6ND``:
    ``N_opt = G (C/6)^a``, ``D_opt = G⁻¹ (C/6)^b``, ``a = β/(α+β)``, ``b = α/(α+β)``,
    ``G = (αA/(βB))^{1/(α+β)}`` (floats)."""
    c = constants()["chinchilla"]
    A, B, al, be = (float(c[k]) for k in ("A", "B", "alpha", "beta"))
    g = (al * A / (be * B)) ** (1 / (al + be))
    return g * (budget / 6) ** (be / (al + be)), (budget / 6) ** (al / (al + be)) / g


__all__ = ["Optimum", "chinchilla_closed_form", "constants", "optimal", "per_token"]
