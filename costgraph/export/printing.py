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

import sympy

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
    others = tuple(sorted(str(b) for b in powers if not (isinstance(b, sympy.Symbol) and b.name in FIELD_ORDER)))
    return (-exp_of("h"), -degree, lex, others)


def _factor_key(base: sympy.Expr):
    if isinstance(base, sympy.Symbol):
        return (0, factor_rank(base.name))
    return (1, (0, str(base)))


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


def grouped(parts: list[tuple[sympy.Expr, sympy.Expr]], rest: sympy.Expr) -> sympy.Expr:
    """``count · (per-instance)`` for each repeat group, then the rest (each
    already expanded):
    ``l (12 h^2 + 13 h) + V h + s_max h + 2 h`` (unevaluated, for printing)."""
    terms = []
    for count, inner in parts:
        inner = field_order(inner, expanded=True)
        if inner == 0:
            continue
        if isinstance(inner, sympy.Add):
            terms.append(sympy.Mul(count, inner, evaluate=False))
        else:  # one term: l (24 b s h^2) reads better as 24 l b s h^2
            terms.append(field_order(count * sympy.expand(inner)))
    rest = field_order(rest, expanded=True)
    if rest != 0:
        terms.extend(sympy.Add.make_args(rest) if isinstance(rest, sympy.Add) else [rest])
    if not terms:
        return sympy.Integer(0)
    return terms[0] if len(terms) == 1 else sympy.Add(*terms, evaluate=False)


def to_latex(expr: sympy.Expr) -> str:
    """LaTeX in field order: ``24 b s h^{2} + 4 b s^{2} h``. A name of several
    letters is set upright as one word (``\\mathrm{kv}``, not ``k v``)."""
    names = {sym: f"\\mathrm{{{sym.name}}}" for sym in expr.free_symbols
             if len(sym.name) > 1 and sym.name.isalpha()}
    return sympy.latex(expr, order="none", symbol_names=names)


def to_python(expr: sympy.Expr) -> str:
    """Infix SymPy/Python syntax in field order: ``24*b*s*h**2 + 4*b*s**2*h``."""
    return sympy.sstr(expr, order="none")


def to_text(expr: sympy.Expr) -> str:
    """Readable plain text: ``24 b s h^2 + 4 b s^2 h``."""
    return (to_python(expr).replace("**", "^").replace("*", " "))
