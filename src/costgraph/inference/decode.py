"""Decode totals and means as closed forms: no loop over the decode steps.

A decode step (``q = 1`` new token per sequence against ``n`` cached positions)
takes, on the per-op roofline of :func:`costgraph.inference.roofline.step_seconds`,
``T(n) = Σ_ops max(F_op(n)/peak, B_op(n)/bw) + c`` where every ``F_op`` and
``B_op`` is linear in ``n`` (or ``Min(n, w)``, ``Min(n + 1, w)`` under a window
``w``, or constant: weights, recurrent states, the TP all-reduces ``c``). So
``T`` is piecewise linear in ``n``: it changes formula only where an op's
roofline switches between compute and memory (one crossing per op) and where a
window fills. :func:`decode_totals` finds those points once, at the given
dimension values, and sums each linear piece over ``n = P, …, P + G − 2`` (the
``G − 1`` decode steps; the first generated token comes from the prefill) with
Faulhaber's sums ``Σ 1 = x + 1``, ``Σ n = x(x + 1)/2``, … . Cost: independent of
``G`` and ``P``. Under ``--causal half``/``exact`` a window's attention counts
``Min(n + 1, w)²``-style pairs: pieces are then quadratic in ``n``; two quadratic
rooflines may cross twice, at irrational points, which are located to within 1
(mpmath) and cut around on both sides (single-position pieces), so the sum stays
exact. The oracle the tests compare with is the loop this replaced
(``tests/inference/test_decode.py``).

**Exactness.** The total is exact (a SymPy Rational, equal to the sum of every
step's exact time). The expected distinct experts of a mixture,
``E·(1 − (1 − k/E)^(b·q))``, has a rational power that would need millions of
digits at a long prompt or a large batch (Llama-4-Scout's 10M-token prefill:
``(15/16)^10^7``); :func:`bounded_subs` keeps such a power as an unevaluated
:class:`ExactPow` (still exact), which becomes a float only when printed
(mpmath at the printed precision). Where the roofline switches is decided with
interval arithmetic on those powers, and exactly when the intervals cannot
tell (no approximation is made).

**The expression** (``time_per_output_token_mean``'s ``expr``) is the same sum
with the dimensions kept as symbols and ``P``, ``G`` free: each piece's bounds are
``Max``/``Min`` of ``P``, ``P + G − 2`` and the crossing ``⌊x⌋ + 1`` (``x`` where an
op's two rooflines meet, in the dimensions). Which side of each crossing is
compute-bound, and the order of the crossings, are those at the given values:
the expression holds wherever they are the same (for every ``P``, ``G``).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError, no_value

#: a power r^m of a rational r is evaluated into a Rational only below this many bits
EXACT_BITS = 1 << 16
#: the cached positions of a decode step in the step time the closed form sums
N_STEP = sympy.Symbol("n_step", integer=True, nonnegative=True)


class ExactPow(sympy.Function):
    """``base**exp`` for a number ``base`` and a whole ``exp`` ≥ 0, exactly: a Rational when
    it has at most :data:`EXACT_BITS` bits, else kept unevaluated (it evaluates to a float
    with mpmath at the precision asked, :meth:`_eval_evalf`). With a symbol in either
    argument it is the ordinary power."""

    nargs = 2

    @classmethod
    def eval(cls, base, exp):
        if not (base.is_number and exp.is_number):
            return base ** exp
        if base.is_Rational and exp.is_Integer and exp >= 0:
            bits = max(abs(base.p).bit_length(), base.q.bit_length())
            if base in (0, 1) or exp <= 1 or bits * int(exp) <= EXACT_BITS:
                return base ** exp
            return None
        return base ** exp

    def _eval_is_extended_real(self):
        return self.args[0].is_extended_real

    def _eval_is_positive(self):
        return True if self.args[0].is_positive else None

    def _eval_is_integer(self):
        return self.args[0].is_integer

    def _eval_evalf(self, prec):
        import mpmath

        base, exp = self.args
        with mpmath.workprec(prec + 20 + int(exp).bit_length()):
            v = mpmath.power(mpmath.mpf(int(base.p)) / int(base.q), int(exp))
        return sympy.Float(v, precision=prec)

    def exact(self) -> sympy.Rational:
        """The power as a Rational (as many digits as it takes)."""
        return self.args[0] ** self.args[1]

    def _sympystr(self, printer):
        return printer._print(sympy.Pow(*self.args, evaluate=False))

    def _latex(self, printer):
        return printer._print(sympy.Pow(*self.args, evaluate=False))


def bounded_subs(expr, subs: dict) -> sympy.Expr:
    """``expr.xreplace(subs)``, each power with a symbol in its exponent made an
    :class:`ExactPow` (exact; evaluated only when small): bounded time and memory where
    ``xreplace`` would expand ``(1 − k/E)^(b·P)`` at ``b·P = 10^7``."""
    expr = as_expr(expr)
    pows = {p: ExactPow(p.base.xreplace(subs), p.exp.xreplace(subs))
            for p in expr.atoms(sympy.Pow) if p.exp.free_symbols}
    return expr.xreplace({**subs, **pows}) if pows else expr.xreplace(subs)


def materialize(expr) -> sympy.Expr:
    """``expr`` with every :class:`ExactPow` replaced by its exact Rational (large)."""
    expr = as_expr(expr)
    pows = {p: p.exact() for p in expr.atoms(ExactPow)}
    return expr.xreplace(pows) if pows else expr


# ------------------------------------------------------------------ exact signs and floors
def _interval(e):
    """An mpmath interval enclosing the number ``e`` (Add, Mul, integer Pow, Rational, ExactPow)."""
    from mpmath import iv

    if e.is_Rational:
        return iv.mpf(int(e.p)) / int(e.q)
    if isinstance(e, ExactPow):
        return _interval(e.args[0]) ** int(e.args[1])
    if e.is_Add:
        return sum((_interval(a) for a in e.args), iv.mpf(0))
    if e.is_Mul:
        out = iv.mpf(1)
        for a in e.args:
            out = out * _interval(a)
        return out
    if e.is_Pow and e.exp.is_Integer:
        return _interval(e.base) ** int(e.exp)
    raise TypeError(e)


def _enclose(e, prec):
    from mpmath import iv

    old = iv.prec
    iv.prec = prec
    try:
        return _interval(e)
    except TypeError:
        return None
    finally:
        iv.prec = old


def sign(e) -> int:
    """The exact sign (−1, 0, 1) of a real number expression: exact for a Rational, else
    from intervals of growing precision, else from the exact value."""
    e = as_expr(e)
    if e.is_Rational:
        return int(e.p > 0) - int(e.p < 0)
    for prec in (128, 2048, 32768):
        box = _enclose(e, prec)
        if box is None:
            break
        if box.a > 0:
            return 1
        if box.b < 0:
            return -1
    v = materialize(e)
    v = v if v.is_Rational else sympy.simplify(v)
    if not v.is_Rational:
        raise CostgraphValueError(f"cannot decide the sign of {str(e)[:80]}")
    return int(v.p > 0) - int(v.p < 0)


def floor(e) -> int:
    """⌊e⌋ exactly (see :func:`sign`)."""
    e = as_expr(e)
    if e.is_Rational:
        return int(e.p // e.q)
    box = _enclose(e, 256)
    if box is not None:
        from mpmath.libmp import mpf_floor, to_int

        lo, hi = (int(to_int(mpf_floor(x))) for x in box._mpi_)
        if lo == hi:
            return lo
        return lo if sign(e - hi) < 0 else hi
    v = materialize(e)
    return int(sympy.floor(v))


# ------------------------------------------------------------------ piecewise-linear pieces
@dataclass(frozen=True)
class Piece:
    """``T(n)`` on ``lo ≤ n < next piece's lo``: ``num`` (numbers in ``n``) and ``sym`` (the
    same in the model's dimensions); ``lo`` an int, ``lo_sym`` its expression."""

    lo: int
    lo_sym: sympy.Expr
    num: sympy.Expr
    sym: sympy.Expr


class Unsupported(CostgraphValueError):
    """A decode step time that is not piecewise linear in the cached positions."""


def _merge(parts: list[list[Piece]]) -> list[tuple[int, sympy.Expr, list[Piece]]]:
    """The common refinement of piece lists (each covering n ≥ 0): ``(lo, lo_sym, [the piece of
    each list holding lo])``."""
    starts = {}
    for part in parts:
        for p in part:
            starts.setdefault(p.lo, p.lo_sym)
    out = []
    for lo in sorted(starts):
        held = [next(p for p in reversed(part) if p.lo <= lo) for part in parts]
        out.append((lo, starts[lo], held))
    return out


def pieces(sym: sympy.Expr, subs: dict, n=N_STEP) -> list[Piece]:
    """``sym`` (a step time in ``n`` and the dimensions) as linear pieces over ``n ≥ 0``,
    decided at the values ``subs``. Raises :class:`Unsupported` for a term that is not a
    polynomial, a sum or product of them, or a ``Max``/``Min`` of linear ones."""
    if n not in sym.free_symbols or sym.is_polynomial(n):
        return [Piece(0, sympy.Integer(0), bounded_subs(sym, subs), sym)]
    if sym.is_Add or sym.is_Mul:
        op = sympy.Add if sym.is_Add else sympy.Mul
        return [Piece(lo, lo_sym, sympy.expand(op(*[p.num for p in held])), op(*[p.sym for p in held]))
                for lo, lo_sym, held in _merge([pieces(a, subs, n) for a in sym.args])]
    if sym.is_Pow and sym.exp.is_Integer and sym.exp > 0:   # Min(w, n + 1)**2 (causal half/exact)
        return [Piece(p.lo, p.lo_sym, sympy.expand(p.num ** sym.exp), p.sym ** sym.exp)
                for p in pieces(sym.base, subs, n)]
    if isinstance(sym, (sympy.Max, sympy.Min)):
        out = []
        merged = _merge([pieces(a, subs, n) for a in sym.args])
        for i, (lo, lo_sym, held) in enumerate(merged):
            hi = merged[i + 1][0] - 1 if i + 1 < len(merged) else None
            out += _envelope(held, lo, lo_sym, hi, n, isinstance(sym, sympy.Max))
        return out
    raise Unsupported(f"the decode step time has a term that is not piecewise linear in n: {str(sym)[:120]}")


def _roots(cs) -> list:
    """Approximate real roots (mpmath, 200 bits) of ``Σ cs[k]·n^k`` (degree ≤ 2, numbers)."""
    import mpmath

    def mid(c):
        box = _enclose(c, 256)
        if box is None:
            return mpmath.mpf(sympy.Float(materialize(c), 80))
        return (mpmath.mpf(box._mpi_[0]) + mpmath.mpf(box._mpi_[1])) / 2

    with mpmath.workprec(200):
        c = [mid(x) for x in cs] + [mpmath.mpf(0)] * (3 - len(cs))
        if sign(cs[2] if len(cs) > 2 else 0) == 0:
            return [] if sign(cs[1] if len(cs) > 1 else 0) == 0 else [-c[0] / c[1]]
        disc = c[1] ** 2 - 4 * c[2] * c[0]
        if disc < 0:
            return [-c[1] / (2 * c[2])]    # no real root: a cut near the vertex is harmless
        r = mpmath.sqrt(disc)
        return [(-c[1] - r) / (2 * c[2]), (-c[1] + r) / (2 * c[2])]


def _cuts(num_i, num_j, sym_i, sym_j, n, lo, hi) -> dict:
    """Piece starts in ``(lo, hi]`` after which the order of two polynomials may change: a
    linear difference changes sign after ``⌊x⌋`` (exact, symbolic ``⌊x⌋ + 1``); a quadratic's
    roots are located to within 1 and cut at the four integers around each (single-position
    pieces around the root, placed at the given values: a number in the expression too)."""
    d = _coefficients(sympy.expand(num_i - num_j), n)
    if len(d) > 3:
        raise Unsupported("Max/Min of terms of degree above 2 in the cached positions")
    out = {}
    if len(d) <= 2:
        if len(d) < 2 or sign(d[1]) == 0:
            return out
        at = floor(-d[0] / d[1]) + 1
        if lo < at and (hi is None or at <= hi):
            ds = _coefficients(sym_i - sym_j, n)
            out[at] = sympy.floor(-ds[0] / ds[1]) + 1
        return out
    import mpmath

    for r in _roots(d):
        base = int(mpmath.floor(r))
        for at in range(base - 1, base + 3):
            if lo < at and (hi is None or at <= hi):
                out[at] = sympy.Integer(at)
    return out


def _at(poly, n, x):
    return poly.xreplace({n: sympy.Integer(x)})


def _envelope(held: list[Piece], lo: int, lo_sym, hi, n, is_max: bool) -> list[Piece]:
    """The upper (``is_max``) or lower envelope of polynomial pieces (degree ≤ 2) on
    ``lo ≤ n ≤ hi`` (hi None: unbounded): cut where two of them may change order
    (:func:`_cuts`), then on each piece the one largest (smallest) at its start."""
    cuts = {}
    for i in range(len(held)):
        for j in range(i + 1, len(held)):
            for at, at_sym in _cuts(held[i].num, held[j].num, held[i].sym, held[j].sym, n, lo, hi).items():
                cuts.setdefault(at, at_sym)
    bounds = [(lo, lo_sym)] + sorted(cuts.items(), key=lambda kv: kv[0])
    out = []
    for start, start_sym in bounds:
        best = 0
        for k in range(1, len(held)):
            d = 0
            for x in (start, start + 1, start + 2):   # a tie at the start: the order just after it
                d = sign(_at(held[k].num, n, x) - _at(held[best].num, n, x))
                if d:
                    break
            if (d > 0) == is_max and d != 0:
                best = k
        out.append(Piece(start, start_sym, held[best].num, held[best].sym))
    return out


# ------------------------------------------------------------------ Faulhaber sums
def _power_sum(k: int, x):
    """Σ_{n=0}^{x} n^k (Faulhaber), k ≤ 3; 0 at x = −1."""
    return (x + 1, x * (x + 1) / 2, x * (x + 1) * (2 * x + 1) / 6, (x * (x + 1) / 2) ** 2)[k]


def _coefficients(e, n) -> list:
    """The Taylor coefficients of a polynomial in ``n`` at 0 (no expansion of the rest)."""
    out, k, fact = [], 0, 1
    while True:
        if k > 3:
            raise Unsupported(f"a decode step term of degree above 3 in n: {str(e)[:80]}")
        out.append(e.xreplace({n: 0}) / fact)
        if n not in e.free_symbols:
            return out
        e = sympy.diff(e, n)
        k += 1
        fact *= k
        if e == 0:
            return out


def _range_sum(poly, n, a, b):
    """Σ_{n=a}^{b} poly(n) in closed form (b ≥ a − 1)."""
    cs = _coefficients(poly, n)
    return sympy.Add(*[c * (_power_sum(k, b) - _power_sum(k, a - 1)) for k, c in enumerate(cs) if c != 0])


@dataclass(frozen=True)
class DecodeTotals:
    """The ``G − 1`` decode steps: ``total`` and ``mean`` seconds (exact numbers; ``mean`` None
    when ``G = 1``), ``total_expr`` / ``mean_expr`` the closed forms in the dimensions, ``P``
    and ``G`` (module docstring), ``pieces`` the linear pieces of the step time in ``n``."""

    total: sympy.Expr
    mean: sympy.Expr | None
    total_expr: sympy.Expr
    mean_expr: sympy.Expr
    pieces: tuple


def decode_totals(step_time: sympy.Expr, n: sympy.Symbol, subs: dict, P, G, prompt: int,
                  generate: int) -> DecodeTotals:
    """Total and mean of ``step_time`` (a decode step's seconds at ``n`` cached positions, in
    the dimensions) over ``n = prompt, …, prompt + generate − 2``, in closed form.

    ``subs``: a value for every dimension (symbol → Integer; ``P``, ``G`` not needed);
    ``P``, ``G``: the symbols of the expression. Raises :class:`Unsupported` for a step time
    that is not piecewise linear in ``n``, CostgraphValueError when a dimension has no value."""
    rest = {k: v for k, v in subs.items() if k not in (P, G)}
    free = bounded_subs(step_time, rest).free_symbols - {n}
    if free:
        raise no_value(free)
    ps = pieces(step_time, rest, n)
    last = prompt + generate - 2
    total, total_expr = sympy.Integer(0), sympy.Integer(0)
    for i, p in enumerate(ps):
        hi = ps[i + 1].lo - 1 if i + 1 < len(ps) else None
        a = max(p.lo, prompt)
        b = last if hi is None else min(hi, last)
        if b >= a:
            total += _range_sum(p.num, n, sympy.Integer(a), sympy.Integer(b))
        a_sym = P if p.lo == 0 else sympy.Max(p.lo_sym, P, evaluate=False)
        b_top = P + G - 2 if hi is None else sympy.Min(ps[i + 1].lo_sym - 1, P + G - 2, evaluate=False)
        total_expr += _range_sum(p.sym, n, a_sym, b_top if p.lo == 0 and hi is None else
                                 sympy.Max(b_top, a_sym - 1, evaluate=False))
    mean = total / (generate - 1) if generate > 1 else None
    return DecodeTotals(total, mean, total_expr, total_expr / (G - 1), tuple(ps))
