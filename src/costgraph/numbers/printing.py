"""Formulas printed the way the field writes them.

SymPy sorts the factors of a term by name (``24 b h^2 s``); papers write
``24 b s h^2 + 4 b s^2 h`` (Korthikanti et al. 2022; Narayanan et al. 2021).
:func:`field_order` rebuilds an expanded expression as an *unevaluated*
``Add`` of ``Mul``s in that order, which SymPy's own printers then print as
is (``order='none'``):

* terms: highest power of ``h`` first, then higher total degree, then by
  the powers of ``l, b, s, h, a, V`` (:data:`costgraph.engine.symbols.FIELD_ORDER`);
* factors: coefficient, then ``l, b, s, h, a, V``, then other symbols by name,
  then anything else (``Min(s, w)``).

The result is equal to the input (``expand`` gives it back) and prints the
same bytes for the same input.
"""

from __future__ import annotations

import functools

import sympy
from sympy.printing.latex import LatexPrinter
from sympy.printing.str import StrPrinter

from ..engine.symbols import FIELD_ORDER, factor_rank


def _powers(term: sympy.Expr) -> tuple[sympy.Expr, dict]:
    coeff, rest = term.as_coeff_Mul()
    return coeff, rest.as_powers_dict() if rest != 1 else {}


def _term_key(term: sympy.Expr):
    _, powers = _powers(term)
    def exp_of(name):
        for base, e in powers.items():
            if isinstance(base, sympy.Symbol) and base.name == name and e.is_number:
                return e
        return 0
    degree = sum(e for e in powers.values() if e.is_number)
    lex = tuple(-exp_of(n) for n in FIELD_ORDER)
    others = tuple(sorted(_text(b) for b in powers if not (isinstance(b, sympy.Symbol) and b.name in FIELD_ORDER)))
    return (-exp_of("h"), -degree, lex, others)


@functools.lru_cache(maxsize=4096)
def _text(base: sympy.Expr) -> str:
    """``str(base)``, printed once per distinct factor: the sort keys of an expanded sum print the same
    factors (a ``Max`` of long sums) once for each term that has them."""
    return str(base)


def _factor_key(base: sympy.Expr):
    if isinstance(base, sympy.Symbol):
        return (0, factor_rank(base.name))
    return (1, (0, _text(base)))


def _ordered_term(term: sympy.Expr) -> sympy.Expr:
    coeff, powers = _powers(term)
    if not powers:
        return coeff
    factors = [sympy.Pow(b, e, evaluate=False) if e != 1 else b
               for b, e in sorted(powers.items(), key=lambda be: _factor_key(be[0]))]
    if coeff == 1:
        return sympy.Mul(*factors, evaluate=False) if len(factors) > 1 else factors[0]
    return sympy.Mul(coeff, *factors, evaluate=False)


def field_order(expr: sympy.Expr, expanded: bool = False) -> sympy.Expr:
    """``expr`` expanded, as an unevaluated sum in the field's term and factor
    order. ``expanded``: the caller vouches that ``expr`` is already expanded."""
    expr = sympy.Integer(expr) if isinstance(expr, int) else expr
    if not expanded:
        expr = sympy.expand(expr)
    terms = sorted(sympy.Add.make_args(expr), key=_term_key)
    if len(terms) == 1:
        return _ordered_term(terms[0])
    return sympy.Add(*[_ordered_term(t) for t in terms], evaluate=False)


def _split_pattern(count: sympy.Expr, inner: sympy.Expr) -> tuple[sympy.Expr, dict]:
    """``inner`` (one instance of a group of ``count``, expanded) as its terms every instance has
    and, for the terms of a layer pattern (divided by ``count``: the average layer), their
    totals grouped by what counts the layers: ``{floor((l + 1)/2): h^2 + h}``."""
    uniform, pattern = [], {}
    den = count.free_symbols
    for t in sympy.Add.make_args(inner):
        if not (sympy.fraction(t)[1].free_symbols & den):
            uniform.append(t)
            continue
        for u in sympy.Add.make_args(sympy.expand(t * count)):
            coeff, factors = u.as_coeff_mul()
            poly = [f for f in factors if f.is_Symbol or (f.is_Pow and f.base.is_Symbol)]
            key = sympy.Mul(*[f for f in factors if f not in poly])
            pattern[key] = pattern.get(key, sympy.Integer(0)) + coeff * sympy.Mul(*poly)
    return sympy.Add(*uniform), {k: v for k, v in pattern.items() if v != 0}


def _count_term(count: sympy.Expr, inner: sympy.Expr, after: bool = False):
    """``count (inner)`` (``after``: ``(inner) count``), or ``24 l b s h^2`` for a one-term ``inner``."""
    inner = field_order(inner, expanded=True)
    if inner == 0:
        return None
    if isinstance(inner, sympy.Add):
        return sympy.Mul(*((inner, count) if after else (count, inner)), evaluate=False)
    return field_order(count * sympy.expand(inner))


def grouped(parts: list[tuple[sympy.Expr, sympy.Expr]], rest: sympy.Expr) -> sympy.Expr:
    """``count · (per-instance)`` for each repeat group, then the rest (each
    already expanded):
    ``l (12 h^2 + 13 h) + V h + s_max h + 2 h`` (unevaluated, for printing).
    A layer pattern's terms are written by the layers that take them:
    ``(h^2 + h) floor((l + 1)/2)``, not ``l (h^2 floor(1/2 + l/2)/l + ...)``."""
    terms = []
    rest = rest + sum((inner for count, inner in parts if count == 1), sympy.Integer(0))   # a group of one instance
    parts = [(count, inner) for count, inner in parts if count != 1]       # (ALBERT's shared layer): no 1 (...)
    for count, inner in parts:
        uniform, pattern = _split_pattern(count, inner) if count.free_symbols else (inner, {})
        term = _count_term(count, uniform)
        if term is not None:
            terms.append(term)
        for key, poly in sorted(pattern.items(), key=lambda kv: str(kv[0])):
            term = _count_term(key, sympy.expand(poly), after=True)
            if term is not None:
                terms.append(term)
    rest = field_order(rest, expanded=True)
    if rest != 0:
        terms.extend(sympy.Add.make_args(rest) if isinstance(rest, sympy.Add) else [rest])
    if not terms:
        return sympy.Integer(0)
    return terms[0] if len(terms) == 1 else sympy.Add(*terms, evaluate=False)


class _Str(StrPrinter):
    """SymPy's printer, the argument of a floor or ceiling over one denominator:
    ``floor((l + 1)/2)``, not ``floor(1/2 + l/2)`` (the same value)."""

    def _print_floor(self, e):
        return f"floor({_over_one(e.args[0])})"

    def _print_ceiling(self, e):
        return f"ceiling({_over_one(e.args[0])})"


def _over_one(arg: sympy.Expr) -> str:
    """``arg`` over one denominator, its terms in SymPy's order: ``(l + 1)/2``."""
    return sympy.sstr(sympy.together(arg))


class _Latex(LatexPrinter):
    """SymPy's LaTeX printer, floors and ceilings as :class:`_Str` writes them."""

    def _print_floor(self, e, exp=None):
        return self._round(r"\left\lfloor{%s}\right\rfloor", e, exp)

    def _print_ceiling(self, e, exp=None):
        return self._round(r"\left\lceil{%s}\right\rceil", e, exp)

    def _round(self, form: str, e, exp):
        inner = LatexPrinter({"symbol_names": self._settings["symbol_names"]})   # SymPy's term order
        tex = form % inner.doprint(sympy.together(e.args[0]))
        return tex if exp is None else r"%s^{%s}" % (tex, exp)


def to_latex(expr: sympy.Expr) -> str:
    """LaTeX in field order: ``24 b s h^{2} + 4 b s^{2} h``. A name of several
    letters is set upright as one word (``\\mathrm{kv}``, not ``k v``)."""
    names = {sym: f"\\mathrm{{{sym.name}}}" for sym in expr.free_symbols
             if len(sym.name) > 1 and sym.name.isalpha()}
    return _Latex({"order": "none", "symbol_names": names}).doprint(expr)


def to_python(expr: sympy.Expr) -> str:
    """Infix SymPy/Python syntax in field order: ``24*b*s*h**2 + 4*b*s**2*h``
    (``floor((l + 1)/2)``: a floor's argument over one denominator)."""
    return _Str({"order": "none"}).doprint(expr)


def to_text(expr: sympy.Expr) -> str:
    """Readable plain text: ``24 b s h^2 + 4 b s^2 h``."""
    return (to_python(expr).replace("**", "^").replace("*", " "))
