"""A closed form as a compact tree the calculator page evaluates exactly (:mod:`costgraph.export.web`).

``costgraph train``'s step time on a preset is a closed form with rational coefficients, ``Min``,
``Max`` and ``Piecewise`` choices whose conditions are integer facts about the layout (whether a
tensor- or data-parallel group stays inside one node: :mod:`costgraph.parallel.placement`). Brought
over one common denominator for integer code (:func:`costgraph.numbers.integer_form.exact_parts`) it
grows to megabytes; the page instead evaluates the tree itself, in exact fractions of ``BigInt``
(``web.js``: ``evalTree``), and shows the same rational number ``costgraph train`` computes.

The tree (JSON): a whole number or a fraction is the text ``"p"`` or ``"p/q"``; a dimension or a layout
degree its name as text (a name never starts with a digit or ``-``, a number always does); an operation ``[op, arg, ...]`` with ``op`` one of ``+ * ^ min max mod floor
pw`` (``^``: a whole exponent; ``pw``: ``[value, condition]`` pairs, the first whose condition holds),
and conditions ``<= < == != or and not`` (``>=`` and ``>`` written as ``<=`` and ``<`` swapped).
Anything else is refused. :func:`program` shares repeated parts (SymPy's ``cse``): ``{"defs": [tree, ...],
"e": tree}``, where ``{"t": i}`` stands for ``defs[i]`` (each defined from the dimensions and the
earlier ones); a step time of Llama's layout space is about 4 KB so, 10 KB written out.
"""

from __future__ import annotations

import sympy

from ..errors import CostgraphValueError

_OPS = ((sympy.Add, "+"), (sympy.Mul, "*"), (sympy.Min, "min"), (sympy.Max, "max"), (sympy.Mod, "mod"),
        (sympy.floor, "floor"), (sympy.Or, "or"), (sympy.And, "and"), (sympy.Not, "not"),
        (sympy.Le, "<="), (sympy.Lt, "<"), (sympy.Eq, "=="), (sympy.Ne, "!="))


def tree(e, shared: dict | None = None, children=None) -> object:
    """``e`` (a SymPy expression or condition) as the page's tree (module docstring). ``shared``: the
    symbols :func:`program` introduced → their index; ``children``: how an argument is written
    (:func:`interned`'s; default: as a tree).

    Raises
    ------
    CostgraphValueError
        A part that is not a rational number, a symbol or one of the operations above (a square root,
        a fractional power)."""
    rec = children or (lambda a: tree(a, shared))
    if e is sympy.true or e is sympy.false:
        return ["==", "0", "0" if e is sympy.true else "1"]
    if isinstance(e, sympy.Rational):
        return str(e.p) if e.q == 1 else f"{e.p}/{e.q}"
    if e.is_Symbol:
        if shared and e in shared:
            return {"t": shared[e]}
        if not str(e)[:1].isalpha() and not str(e).startswith("_"):
            raise CostgraphValueError(f"the page cannot name the symbol {str(e)[:40]!r}", hint="a name starts with a letter")
        return str(e)
    if isinstance(e, sympy.Pow):
        if not e.exp.is_Integer:
            raise CostgraphValueError(f"the page cannot evaluate the power {e}", hint="whole exponents only")
        return ["^", rec(e.base), str(e.exp)]
    if isinstance(e, sympy.Piecewise):
        return ["pw", *[[rec(p.expr), rec(p.cond)] for p in e.args]]
    if isinstance(e, sympy.ceiling):   # ⌈x⌉ = −⌊−x⌋ (8-bit Adam's blocks of states: the optimizer step)
        return ["*", "-1", ["floor", ["*", "-1", rec(e.args[0])]]]
    if isinstance(e, (sympy.Ge, sympy.Gt)):
        return ["<=" if isinstance(e, sympy.Ge) else "<", rec(e.rhs), rec(e.lhs)]
    for kind, op in _OPS:
        if isinstance(e, kind):
            return [op, *[rec(a) for a in e.args]]
    raise CostgraphValueError(f"the page cannot evaluate {type(e).__name__} ({str(e)[:80]})",
                              hint="sums, products, whole powers, min, max, mod, floor, ceiling and piecewise "
                                   "choices")


def interned(e, pool: list, seen: dict) -> object:
    """``e`` as a tree whose every operation is written once into ``pool`` (a list of trees shared by
    all of a page's closed forms: :mod:`costgraph.export.web_steps`) and referred to by its index ``i``
    (a bare JSON number: 3 characters where ``{"t": i}`` takes 9; a number is never a constant, which is text);
    ``seen``: expression or tree text (keyed ``("e", e)``, ``("j", text)``) → its node, kept between calls. An operation's arguments come
    before it in ``pool``, so the page may evaluate the pool in order or on demand."""
    import json

    if ("e", e) in seen:
        return seen["e", e]
    node = tree(e, children=lambda a: interned(a, pool, seen))
    if isinstance(node, list):
        text = json.dumps(node, separators=(",", ":"))
        if ("j", text) not in seen:
            pool.append(node)
            seen["j", text] = len(pool) - 1
        node = seen["j", text]
    seen["e", e] = node
    return node


def program(e) -> dict:
    """``e`` as ``{"defs": [...], "e": tree}``, its repeated parts shared (module docstring)."""
    import itertools

    names = (sympy.Dummy(f"t{i}") for i in itertools.count())
    defs, (reduced,) = sympy.cse(e, symbols=names, optimizations=None)
    shared = {sym: i for i, (sym, _) in enumerate(defs)}
    return {"defs": [tree(v, shared) for _, v in defs], "e": tree(reduced, shared)}


__all__ = ["interned", "program", "tree"]
