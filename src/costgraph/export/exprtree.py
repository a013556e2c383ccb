"""SymPy expressions as structured JSON trees, and back, without parsing text.

Every ``expr`` in costgraph's JSON documents has a ``tree`` beside it, so that
another program (a simulator, a spreadsheet macro, JavaScript) reads the
formula as data: no SymPy, no ``eval``, no infix parser. The node kinds (the
JSON Schema is ``costgraph/export/schemas/expression.json``):

``{"int": "123"}``
    A whole number, as a decimal string (exact at any size; JSON numbers
    lose digits above 2⁵³ in many readers).
``{"rational": {"p": "55", "q": "4"}}``
    ``p/q`` in lowest terms, ``q > 1``, as decimal strings.
``{"float": "0.45"}``
    A binary floating-point constant (times and rates of ``infer``/``train``
    carry a few), Python's shortest decimal that reads back to the same
    double (``repr(float)``).
``{"sym": "h"}``
    A dimension symbol; its meaning is in the document's ``symbols``. Every
    symbol is a positive integer (:func:`costgraph.engine.symbols.dim`).
``{"op": NAME, "args": [tree, ...]}``
    ``add`` (sum of 2+ args), ``mul`` (product of 2+ args), ``pow`` (base,
    exponent: a whole number in the cost formulas, negative for a division,
    ``1/2`` for a square root in a solved closed form; ``x/2`` is ``mul``
    of ``rational 1/2`` and ``x``, ``x/y`` is ``mul`` of ``x`` and ``pow(y,
    -1)``), ``min``/``max`` (2+ args), ``floor``/``ceiling`` (1 arg: the
    greatest whole number ≤ x, the least ≥ x; layer patterns count
    ``floor(l/6)`` layers, see :mod:`costgraph.engine.builder`), ``mod`` (2 args:
    ``a mod b``, the sign of ``b``), ``floordiv`` (2 args: ``⌊n/d⌋`` of two
    whole numbers, the form :class:`costgraph.numbers.integer_form.cg_floordiv` gives
    floors for exact evaluation), ``piecewise`` (args: ``{"op": "case",
    "args": [value, condition]}`` in order, the first true condition wins),
    ``sum`` (4 args: body, a ``sym`` node naming the index, lower and
    upper bound: Σ over the whole numbers from lower to upper inclusive;
    ``infer``'s mean time per output token averages its decode steps so),
    and in conditions ``lt``, ``le``, ``gt``, ``ge``, ``eq``, ``ne`` (2
    args), ``and``, ``or`` (2+), ``not`` (1), and ``{"bool": true}``.

The tree follows the expression as given: of the unevaluated, field-ordered
forms in the documents (:func:`costgraph.export.printing.field_order`) it keeps the
printed order of terms and factors (``24 b s h^2`` is ``mul(24, b, s,
pow(h, 2))``).

:func:`from_tree` rebuilds a SymPy expression from the nodes (symbols by
:func:`costgraph.engine.symbols.dim`, numbers by ``sympy.Integer``/``Rational``
from validated digit strings): text is never parsed as an expression.
Malformed trees raise :class:`costgraph.errors.CostgraphValueError` naming
the place in the tree.
"""

from __future__ import annotations

import re

import sympy

from ..errors import CostgraphValueError

#: deepest tree :func:`from_tree` accepts (the documents' trees are < 15 deep)
MAX_DEPTH = 200
#: longest number string :func:`from_tree` accepts
MAX_DIGITS = 1000

_INT = re.compile(r"-?[0-9]{1,%d}" % MAX_DIGITS)
_FLOAT = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")

_NARY = {"add": sympy.Add, "mul": sympy.Mul, "min": sympy.Min, "max": sympy.Max,
         "and": sympy.And, "or": sympy.Or}
_RELATIONS = {"lt": sympy.StrictLessThan, "le": sympy.LessThan, "gt": sympy.StrictGreaterThan,
              "ge": sympy.GreaterThan, "eq": sympy.Eq, "ne": sympy.Ne}
_ARITY = {"pow": 2, "mod": 2, "floordiv": 2, "floor": 1, "ceiling": 1, "not": 1, "case": 2, "sum": 4,
          **{k: 2 for k in _RELATIONS}}
#: every ``op`` name of the format
OPS = tuple(sorted({*_NARY, *_ARITY, "piecewise"}))


def _floordiv():
    from ..numbers.integer_form import cg_floordiv

    return cg_floordiv


def to_tree(expr) -> dict:
    """The tree of ``expr`` (a SymPy expression, an ``int`` or a
    ``fractions.Fraction``); see the module docstring for the node kinds.

    Raises
    ------
    CostgraphValueError
        An object outside the format (a function costgraph never makes).
    """
    from ..engine.symbols import as_expr

    return _to(as_expr(expr), 0)


def _nodes():
    """``(SymPy class, op name)`` of the nodes written by class (relations by exact type)."""
    return ((sympy.Add, "add"), (sympy.Mul, "mul"), (sympy.Pow, "pow"), (sympy.Min, "min"), (sympy.Max, "max"),
            (sympy.floor, "floor"), (sympy.ceiling, "ceiling"), (sympy.Mod, "mod"), (_floordiv(), "floordiv"),
            (sympy.And, "and"), (sympy.Or, "or"), (sympy.Not, "not"))


def _to(e, depth: int) -> dict:
    if depth > MAX_DEPTH:
        raise CostgraphValueError(f"expression nested deeper than {MAX_DEPTH} levels")
    if e is sympy.true or e is sympy.false:
        return {"bool": bool(e)}
    if isinstance(e, sympy.Integer):
        return {"int": str(int(e))}
    if isinstance(e, sympy.Rational):
        return {"rational": {"p": str(int(e.p)), "q": str(int(e.q))}}
    if isinstance(e, sympy.Float):
        return {"float": repr(float(e))}
    if isinstance(e, sympy.Symbol):
        return {"sym": e.name}
    if isinstance(e, sympy.Sum):
        if len(e.limits) != 1 or len(e.limits[0]) != 3:
            raise CostgraphValueError(f"no expression-tree node for a sum over several indices ({e})")
        i, lo, hi = e.limits[0]
        body = e.function
        taken = {x.name for x in body.free_symbols | lo.free_symbols | hi.free_symbols if x != i}
        if i.name in taken:   # a dimension of the same name (LLaMA's MLP width i): rename the index
            k = 1
            while f"{i.name}_{k}" in taken:
                k += 1
            fresh = sympy.Symbol(f"{i.name}_{k}", **i.assumptions0)
            body, i = body.xreplace({i: fresh}), fresh
        return {"op": "sum", "args": [_to(body, depth + 1), _to(i, depth + 1), _to(lo, depth + 1),
                                      _to(hi, depth + 1)]}
    if isinstance(e, sympy.Piecewise):
        return {"op": "piecewise", "args": [{"op": "case", "args": [_to(p.expr, depth + 2), _to(p.cond, depth + 2)]}
                                            for p in e.args]}
    args = [_to(a, depth + 1) for a in e.args]
    for cls, name in _nodes():
        if isinstance(e, cls):
            return {"op": name, "args": args}
    for name, cls in _RELATIONS.items():
        if type(e) is cls:
            return {"op": name, "args": args}
    raise CostgraphValueError(f"no expression-tree node for {type(e).__name__} ({e})",
                              hint="the format has: int, rational, float, sym, op " + ", ".join(OPS))


def from_tree(tree, symbols: dict | None = None) -> sympy.Expr:
    """The SymPy expression of ``tree`` (as :func:`to_tree` writes it, or read
    from a JSON document), built node by node; never parsed from text.

    ``symbols`` maps names to SymPy symbols; a name not in it becomes
    :func:`costgraph.engine.symbols.dim` (a positive integer), the engine's own
    symbol, so ``from_tree(to_tree(e)) == e`` for costgraph's formulas.
    Unevaluated forms come back evaluated (SymPy's canonical order).

    Raises
    ------
    CostgraphValueError
        A malformed tree: unknown node or ``op``, wrong number of ``args``, a
        number that is not a decimal string (at most 1000 digits), a symbol
        that is not a name, nesting deeper than 200; the message gives the
        path in the tree (``args[1].args[0]``).
    """
    return _from(tree, symbols or {}, "tree", 0)


def _bad(where: str, what: str):
    return CostgraphValueError(f"malformed expression tree at {where}: {what}",
                               hint="see costgraph.export.exprtree (costgraph schema expression)")


def _digits(text, where: str) -> int:
    if not isinstance(text, str) or not _INT.fullmatch(text):
        raise _bad(where, f"expected a decimal string of at most {MAX_DIGITS} digits, got {str(text)[:40]!r}")
    return int(text)


def _from(t, symbols: dict, where: str, depth: int):
    if depth > MAX_DEPTH:
        raise _bad(where, f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(t, dict) or len(t) not in (1, 2):
        raise _bad(where, "expected an object with one of int, rational, float, sym, bool, or op and args")
    if len(t) == 1:
        (key, val), = t.items()
        if key == "int":
            return sympy.Integer(_digits(val, where + ".int"))
        if key == "rational":
            if not isinstance(val, dict) or set(val) != {"p", "q"}:
                raise _bad(where, "rational needs {p, q}")
            p, q = _digits(val["p"], where + ".p"), _digits(val["q"], where + ".q")
            if q <= 0:
                raise _bad(where, "rational needs q > 0")
            return sympy.Rational(p, q)
        if key == "float":
            if not isinstance(val, str) or len(val) > 40 or not _FLOAT.fullmatch(val):
                raise _bad(where, f"expected a decimal float string, got {str(val)[:40]!r}")
            return sympy.Float(float(val))
        if key == "sym":
            if not isinstance(val, str) or not _NAME.fullmatch(val):
                raise _bad(where, f"expected a symbol name, got {str(val)[:40]!r}")
            if val in symbols:
                return symbols[val]
            from ..engine.symbols import dim

            return dim(val)
        if key == "bool":
            if not isinstance(val, bool):
                raise _bad(where, "bool must be true or false")
            return sympy.true if val else sympy.false
        raise _bad(where, f"unknown node {key!r}")
    op, args = t.get("op"), t.get("args")
    if not isinstance(op, str) or not isinstance(args, list):
        raise _bad(where, "expected {op, args} with args a list")
    if op not in OPS or op == "case":
        raise _bad(where, f"unknown op {str(op)[:40]!r}; ops: " + ", ".join(o for o in OPS if o != "case"))
    if op == "piecewise":
        pieces = []
        for i, c in enumerate(args):
            w = f"{where}.args[{i}]"
            if not isinstance(c, dict) or c.get("op") != "case" or not isinstance(c.get("args"), list) \
                    or len(c["args"]) != 2 or set(c) != {"op", "args"}:
                raise _bad(w, "a piecewise arg is {op: case, args: [value, condition]}")
            pieces.append((_from(c["args"][0], symbols, w + ".args[0]", depth + 2),
                           _from(c["args"][1], symbols, w + ".args[1]", depth + 2)))
        if not pieces:
            raise _bad(where, "piecewise needs at least one case")
        return sympy.Piecewise(*pieces)
    n = _ARITY.get(op)
    if n is not None and len(args) != n:
        raise _bad(where, f"{op} takes {n} args, got {len(args)}")
    if n is None and len(args) < 2:
        raise _bad(where, f"{op} takes at least 2 args, got {len(args)}")
    if op == "sum":
        return _sum(args, symbols, where, depth)
    xs = [_from(a, symbols, f"{where}.args[{i}]", depth + 1) for i, a in enumerate(args)]
    if op in _NARY:
        return _NARY[op](*xs)
    if op in _RELATIONS:
        return _RELATIONS[op](*xs)
    if op == "pow":
        return sympy.Pow(*xs)
    if op == "mod":
        return sympy.Mod(*xs)
    if op == "floordiv":
        return _floordiv()(*xs)
    if op == "floor":
        return sympy.floor(xs[0])
    if op == "ceiling":
        return sympy.ceiling(xs[0])
    return sympy.Not(xs[0])


def _sum(args: list, symbols: dict, where: str, depth: int):
    """``sum``: the index is a fresh integer symbol (nonnegative when the lower
    bound is a whole number ≥ 0), bound by the sum, not a dimension."""
    ix = args[1]
    if not isinstance(ix, dict) or set(ix) != {"sym"} or not isinstance(ix["sym"], str) \
            or not _NAME.fullmatch(ix["sym"]):
        raise _bad(where + ".args[1]", "the index of a sum is a sym node")
    lo = _from(args[2], symbols, where + ".args[2]", depth + 1)
    hi = _from(args[3], symbols, where + ".args[3]", depth + 1)
    i = sympy.Symbol(ix["sym"], integer=True, **({"nonnegative": True} if lo.is_nonnegative else {}))
    body = _from(args[0], {**symbols, ix["sym"]: i}, where + ".args[0]", depth + 1)
    return sympy.Sum(body, (i, lo, hi))
