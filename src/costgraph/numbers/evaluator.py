"""Fast evaluation of many closed forms at many points.

SymPy's ``subs`` costs tens of microseconds per expression; a sweep or a
layout planner evaluates the same few formulas millions of times. Here each
formula is compiled once, by :func:`sympy.lambdify` (SymPy's own code
printer, fed only with expressions built from the syntax tree, never with
text), into a Python function of the dimension symbols; with ``use_imps=False``: no formula holds
an ``implemented_function``, and looking for one walks every formula as a tree, not a graph of
shared parts (a quarter of the planner's compile time).

Two evaluators:

:class:`ExactEvaluator`
    Python integers, exact at any size. Each formula is split into numerator
    and denominator with integer coefficients (``3 s Min(s, w) / 2`` →
    ``(3 s Min(s, w), 2)``), both evaluated exactly; the value is whole when
    the denominator divides the numerator.
:func:`vectorized`
    NumPy over arrays of values (broadcast), in ``float64`` (fast, rounded),
    ``int64`` (exact while every intermediate stays below 2⁶³; a guard checks
    a bound on every intermediate, see :func:`_overflow_bound`, and refuses
    instead of wrapping around) or ``exact`` (Python integers in object
    arrays).
"""

from __future__ import annotations

from math import lcm
from typing import Sequence

import sympy

from .integer_form import cg_floordiv, exact_parts
from .substitute import substitute
from ..engine.symbols import as_expr


_PY_MODULES = [{"Min": min, "Max": max, "cg_floordiv": lambda n, d: n // d}, "math"]
def _np_floordiv(n, d):
    import numpy as np

    return np.floor_divide(n, d)


def _np_modules() -> list:
    """lambdify's modules for NumPy: the ``numpy`` module itself, not the name ``"numpy"`` (the same
    printer, NumPyPrinter, and the same names; the name makes lambdify run ``from numpy import *``,
    which imports NumPy's lazily loaded submodules, ``f2py`` and ``testing`` among them: a tenth of
    a second of every process that compiles a form)."""
    import numpy as np

    return [{"cg_floordiv": _np_floordiv}, np]


def _np_printer(exprs):
    """The printer ``lambdify`` builds for :func:`_np_modules` (NumPyPrinter, the same settings), less its pass
    that rewrites ``re(...)`` of an ``UnevaluatedExpr`` (``CodePrinter._handle_UnevaluatedExpr``: a ``replace``
    over each printed expression, whole trees, not a graph of shared parts: about 0.02 s of CPU of the planner's
    compile) where no formula holds an ``re`` (it changes nothing then); None (lambdify's own) where one does."""
    from sympy.printing.numpy import NumPyPrinter

    seen: set = set()
    todo = list(exprs)
    while todo:   # each distinct subexpression once
        e = todo.pop()
        if e in seen:
            continue
        if isinstance(e, sympy.re):
            return None
        seen.add(e)
        todo.extend(e.args)

    class Printer(NumPyPrinter):
        def _handle_UnevaluatedExpr(self, expr):
            return expr
    return Printer({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                    "user_functions": {k: k for k in _np_modules()[0]}})


def _integer_floors(e: sympy.Expr) -> sympy.Expr:
    """``floor(x)`` → ``cg_floordiv(num, den)`` and ``ceiling(x)`` →
    ``-cg_floordiv(-num, den)``, with ``x = num/den`` in integer coefficients."""
    if not e.has(sympy.floor, sympy.ceiling):
        return e
    def fd(arg, sign):
        num, den = integer_fraction(_integer_floors(arg))
        return sign * cg_floordiv(sign * num, den)
    return e.replace(lambda x: isinstance(x, (sympy.floor, sympy.ceiling)),
                     lambda x: fd(x.args[0], 1 if isinstance(x, sympy.floor) else -1))


def _integer_floors_all(exprs) -> list:
    """``[_integer_floors(e) for e in exprs]`` in one bottom-up walk of their distinct subexpressions (the
    planner's forms share most of theirs: ``has`` and ``replace`` per formula walked them again and again, a
    sixth of the forms' compile time): a node whose arguments changed is rebuilt by its constructor, then a
    ``floor``/``ceiling`` becomes the integer division, as ``replace`` does."""
    memo: dict = {}

    def rec(e):
        got = memo.get(e)
        if got is not None:
            return got
        args = e.args
        new = tuple(rec(a) for a in args)
        out = e.func(*new) if new != args else e
        if isinstance(out, (sympy.floor, sympy.ceiling)):
            sign = 1 if isinstance(out, sympy.floor) else -1
            num, den = integer_fraction(_integer_floors(out.args[0]))
            out = sign * cg_floordiv(sign * num, den)
        memo[e] = out
        return out
    return [rec(e) for e in exprs]


def _safe_args(symbols: Sequence[sympy.Symbol]) -> tuple[list[sympy.Symbol], dict]:
    """Positional stand-ins ``x0, x1, ...`` for the model's symbols, so that no
    name from a model file ever reaches generated code."""
    args = [sympy.Symbol(f"x{i}", positive=True, integer=True) for i in range(len(symbols))]
    return args, dict(zip(symbols, args))


def integer_fraction(e: sympy.Expr) -> tuple[sympy.Expr, sympy.Expr]:
    """``e`` as numerator and denominator with integer coefficients:
    ``3 s Min(s, w) / 2`` → ``(3 s Min(s, w), 2)``."""
    num, den = sympy.fraction(sympy.together(as_expr(e)))
    scale = 1
    for part in (num, den):
        for c in part.atoms(sympy.Rational):
            scale = lcm(scale, int(c.q))
    if scale != 1:
        num, den = sympy.expand(num * scale), sympy.expand(den * scale)
    return num, den


class NotWhole(Exception):
    """Formula ``index`` is not a whole number at a point: ``value`` (a Rational)."""

    def __init__(self, index: int, value):
        super().__init__(index, value)
        self.index = index
        self.value = value


class ExactEvaluator:
    """Exact integer values of ``exprs`` (SymPy) at points given as tuples of
    ints in the order of ``symbols``.

    ``evaluator(values)`` returns a list of ints, or raises :class:`NotWhole`
    naming the first formula whose value is not a whole number. ``symbols``
    must include every free symbol of ``exprs``.
    """

    def __init__(self, exprs: Sequence[sympy.Expr], symbols: Sequence[sympy.Symbol]):
        self.symbols = tuple(symbols)
        args, rename = _safe_args(self.symbols)
        parts = []
        self._dens: list[int | None] = []   # a constant denominator, or None (computed)
        for e in exprs:
            # integer operations only, fractions inside Min/Max/floor included: Min(h/3, w) is
            # Min(h, 3 w)/3, never a float division (exact past 2^53)
            num, den = exact_parts(as_expr(e).xreplace(rename))
            parts.append(num)
            if den.is_Integer:
                self._dens.append(int(den))
            else:
                self._dens.append(None)
                parts.append(den)
        self._f = sympy.lambdify(args, parts, modules=_PY_MODULES, use_imps=False)

    def __call__(self, values: Sequence[int]) -> list[int]:
        raw = iter(self._f(*values))
        out = []
        for i, den in enumerate(self._dens):
            num = int(next(raw))
            if den is None:
                den = int(next(raw))
            q, r = divmod(num, den)
            if r:
                raise NotWhole(i, sympy.Rational(num, den))
            out.append(q)
        return out


def _overflow_bound(e: sympy.Expr) -> sympy.Expr:
    """An upper bound on the magnitude of every intermediate result when
    ``e`` (a polynomial in positive integers, possibly with Min/Max) is
    evaluated term by term: the sum of the absolute values of its terms,
    each Min/Max replaced by the sum of its arguments' bounds."""
    e = sympy.expand(e)
    def bound(t):
        if t.is_Add:
            return sympy.Add(*[bound(a) for a in t.args])
        if t.is_Mul:
            return sympy.Mul(*[bound(a) for a in t.args])
        if t.is_Pow:
            return sympy.Pow(bound(t.base), t.exp)
        if isinstance(t, (sympy.Min, sympy.Max)):
            return sympy.Add(*[bound(a) for a in t.args])
        if t.is_Number:
            return abs(t)
        return t
    return bound(e)



def safe_args(symbols: Sequence[sympy.Symbol]) -> tuple[list[sympy.Symbol], dict]:
    """The stand-ins :func:`vectorized` compiles ``symbols`` as (``x0, x1, ...``, each a positive integer:
    no name from a model file reaches generated code) and the mapping to them. A caller that substitutes
    other values anyway (the planner's sizes) maps the symbols in the same pass and passes ``renamed=True``."""
    return _safe_args(symbols)


def vectorized(exprs: Sequence[sympy.Expr], symbols: Sequence[sympy.Symbol], dtype: str = "float64",
               renamed: bool = False):
    """A function of NumPy arrays (one per symbol, in order, broadcast
    together) returning one array per formula.

    ``dtype``: ``float64`` (rounded to 53 bits), ``int64`` (exact; raises
    :class:`OverflowError` if any intermediate could pass 2⁶³ − 1 at some
    point — checked with a bound evaluated in float64 — or a value is not
    whole) or ``exact`` (Python integers, object arrays). ``renamed`` (float64): ``symbols`` are already
    :func:`safe_args`' stand-ins and ``exprs`` written in them, through
    :func:`costgraph.numbers.substitute.substitute` (the planner's forms: one pass that also fixes the sizes).
    """
    import numpy as np

    symbols = tuple(symbols)
    args, rename = (list(symbols), {}) if renamed and dtype == "float64" else _safe_args(symbols)
    if dtype == "float64" and not renamed:   # a compiled Max/Min takes its arguments' maximum/minimum: unevaluated
        memo: dict = {}
        exprs = [substitute(as_expr(e), rename, memo) for e in exprs]
    elif dtype == "float64":
        exprs = list(exprs)
    else:
        exprs = [as_expr(e).xreplace(rename) for e in exprs]
    if dtype == "float64":
        # floors as integer divisions of whole numbers (exact below 2^53, not through x/3 rounded)
        exprs = _integer_floors_all(exprs)
        f = sympy.lambdify(args, exprs, modules=_np_modules(), cse=True, use_imps=False, printer=_np_printer(exprs))

        def run(*arrays):
            # the inputs are not broadcast to the common shape: a constant stays a scalar, and only the
            # terms that vary cost a full array (folding the fixed sizes in, not repeating them per point)
            arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
            shape = np.broadcast_shapes(*(a.shape for a in arrays))
            return [np.broadcast_to(np.asarray(v, dtype=np.float64), shape) for v in f(*arrays)]
        return run
    if dtype == "exact":
        exact = ExactEvaluator(exprs, args)

        def run_exact(*arrays):
            arrays = np.broadcast_arrays(*[np.asarray(a, dtype=object) for a in arrays])
            shape = arrays[0].shape if arrays else ()
            outs = [np.empty(shape, dtype=object) for _ in exprs]
            for idx in np.ndindex(shape):
                for o, v in zip(outs, exact(tuple(int(a[idx]) for a in arrays))):
                    o[idx] = v
            return outs
        return run_exact
    if dtype != "int64":
        raise ValueError(dtype)
    fracs = [integer_fraction(_integer_floors(e)) for e in exprs]
    nums = sympy.lambdify(args, [n for n, _ in fracs], modules=_np_modules(), use_imps=False)
    dens = sympy.lambdify(args, [d for _, d in fracs], modules=_np_modules(), use_imps=False)
    bounds = sympy.lambdify(args, [_overflow_bound(n) for n, _ in fracs] + [_overflow_bound(d) for _, d in fracs],
                            modules=_np_modules(), use_imps=False)

    def run_int(*arrays):
        arrays = [np.asarray(a, dtype=np.int64) for a in arrays]   # not broadcast: see run() above
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        # every intermediate of the evaluation is bounded by these (in float64,
        # with a margin far above float rounding)
        for b in bounds(*[a.astype(np.float64) for a in arrays]):
            if np.any(np.asarray(b) >= 2.0 ** 62):
                bad = int(np.count_nonzero(np.broadcast_to(np.asarray(b) >= 2.0 ** 62, shape)))
                raise OverflowError(f"{bad} point(s) could exceed the int64 range")
        out = []
        for n, d in zip(nums(*arrays), dens(*arrays)):
            n = np.broadcast_to(np.asarray(n, dtype=np.int64), shape)
            d = np.broadcast_to(np.asarray(d, dtype=np.int64), shape)
            q, r = np.divmod(n, d)
            if np.any(r):
                raise ValueError("a value is not a whole number at some points")
            out.append(q)
        return out
    return run_int


class Compiled:
    """Named quantities compiled by :func:`vectorized`; call with one array
    (or number) per name of :attr:`symbols`, by keyword (``defaults`` fill
    the names a call leaves out). Returns ``{quantity: array}``."""

    def __init__(self, quantities: dict[str, sympy.Expr], symbols: Sequence[sympy.Symbol], dtype: str,
                 defaults: dict[str, int] | None = None):
        self.defaults = dict(defaults or {})
        self.symbols = tuple(str(x) for x in symbols)
        self.quantities = tuple(quantities)
        self.dtype = dtype
        self._exprs, self._syms = list(quantities.values()), tuple(symbols)
        self._by_given: dict[frozenset, tuple] = {}
        self._specialized(frozenset())   # compiled now: a bad formula fails here, not at the first call

    def _specialized(self, given: frozenset) -> tuple:
        """(free symbols, function) with the defaults a call does not override folded into the
        formulas: only the terms that vary are evaluated per point (issue 15 item 7: as fast as a bare
        ``lambdify`` of the same quantities with the fixed sizes substituted). One per set of
        overridden defaults, compiled on first use."""
        if given not in self._by_given:
            fold = {x: sympy.Integer(self.defaults[str(x)]) for x in self._syms
                    if str(x) in self.defaults and str(x) not in given}
            free = tuple(x for x in self._syms if x not in fold)
            self._by_given[given] = (free, vectorized([as_expr(e).xreplace(fold) for e in self._exprs], free,
                                                      self.dtype))
        return self._by_given[given]

    def __repr__(self) -> str:
        return f"<compiled costs of ({', '.join(self.symbols)}), {self.dtype}: {', '.join(self.quantities)}>"

    def __call__(self, *positional, **arrays):
        from ..errors import CostgraphValueError

        if positional:
            raise CostgraphValueError("give the values by name", hint="this function takes "
                                      + ", ".join(f"{n}=..." for n in self.symbols))
        given = set(arrays)
        arrays = {**self.defaults, **arrays}
        missing = [n for n in self.symbols if n not in arrays]
        extra = [n for n in arrays if n not in self.symbols]
        if missing or extra:
            raise CostgraphValueError(
                (f"no value for {', '.join(missing)}" if missing else f"no symbol {', '.join(extra)} here"),
                hint="this function takes " + (", ".join(self.symbols) or "no arguments"))
        import numpy as np

        for n in self.symbols:
            arr = np.asarray(arrays[n])
            kind = arr.dtype.kind
            ok = kind in "iu" or (kind == "O" and self.dtype == "exact" and all(
                isinstance(v, int) and not isinstance(v, bool) for v in arr.flat))
            if kind == "f" and self.dtype == "float64":   # floats allowed in float64 sweeps, if whole
                ok = bool(np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)))
            if not ok:
                raise CostgraphValueError(f"'{n}' must be whole numbers (an int or an integer array), "
                                          f"got {type(arrays[n]).__name__} of kind {kind!r}")
            if arr.size and not np.all(arr > 0):
                raise CostgraphValueError(f"'{n}' must be positive: a dimension counts something")
        try:
            free, f = self._specialized(frozenset(n for n in given if n in self.defaults))
            return dict(zip(self.quantities, f(*[arrays[str(x)] for x in free])))
        except OverflowError as e:
            raise CostgraphValueError(f"int64 evaluation refused: {e}",
                                      hint="use dtype='exact' (Python integers) or 'float64'") from None
        except ValueError as e:
            raise CostgraphValueError(f"cannot evaluate: {e}") from None


__all__ = ["Compiled", "ExactEvaluator", "NotWhole", "vectorized", "integer_fraction", "safe_args"]
