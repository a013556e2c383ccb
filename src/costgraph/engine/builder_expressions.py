"""Expressions of the builder's walk: values, arithmetic on dimensions and tensors,
dimension functions (``min``, ``max``, ``floor``, ``ceil``) and conditions.

A condition is true/false, or, when it tests a repeat's index (``i % 6 == 5``,
``i < k``), a :class:`~costgraph.language.patterns.Cond` that an ``if`` turns into a
layer pattern (:mod:`costgraph.engine.builder_statements`).
"""

from __future__ import annotations

import sympy

from ..language import ast
from .builder_scope import (CONSTANTS, Evaluated, Scope, check_magnitude, check_size, describe,
                            did_you_mean)
from .context import check_expansion
from ..errors import CostgraphSemanticError, Location
from .graph import Tensor
from ..language.patterns import (MAX_MODULUS, PATTERN_HINT as _PATTERN_HINT, Cell as _Cell, Cond as _Cond,
                       Index as _Index)


def _logic(op: str, a, b, loc: Location):
    """``a and b`` / ``a or b`` of true/false values and conditions on one index."""
    if isinstance(a, bool) and isinstance(b, bool):
        return (a and b) if op == "and" else (a or b)
    for v in (a, b):
        if not isinstance(v, (bool, _Cond)):
            raise CostgraphSemanticError(f"'{op}' joins conditions (true or false), got {describe(v)}", loc,
                                         hint=_PATTERN_HINT)
    if isinstance(a, bool) or isinstance(b, bool):
        flag, cond = (a, b) if isinstance(a, bool) else (b, a)
        if op == "and":
            return cond if flag else False
        return True if flag else cond
    if a.level != b.level:
        raise CostgraphSemanticError("a condition can test the index of one repeat only", loc,
                                     hint="nest two ifs, one per index")
    return _Cond(a.level, (op, a.tree, b.tree))


def _any_of(cells: list):
    """The layers ``lo ≤ i < lo + 1`` of ``cells``: a sum of disjoint cells (``("any", ...)``) when
    every two are provably different, else their ``or`` (inclusion–exclusion)."""
    los = [c.lo for c in cells]
    if all((p - q).is_zero is False for k, p in enumerate(los) for q in los[k + 1:]):
        return cells[0] if len(cells) == 1 else ("any", *cells)
    tree = cells[0]
    for c in cells[1:]:
        tree = ("or", tree, c)
    return tree


# Functions of dimension expressions: SymPy function, arity (2: two or more), usage.
DIM_FUNCS = {
    "min": (sympy.Min, 2, "min(a, b): the smaller of two sizes, e.g. min(s, w)"),
    "max": (sympy.Max, 2, "max(a, b): the larger of two sizes"),
    "floor": (sympy.floor, 1, "floor(x / y): x / y rounded down"),
    "ceil": (sympy.ceiling, 1, "ceil(x / y): x / y rounded up"),
}


class Expressions:
    """The builder's expressions (a mixin of :class:`costgraph.engine.builder.Builder`):
    ``evaluate`` gives a value — a SymPy dimension expression, a tensor, a
    tuple of tensors, true/false, a string or none. It calls back into the walk
    for calls (``call``) and for arithmetic on tensors (``apply_op``)."""

    def evaluate(self, e, scope: Scope):
        if isinstance(e, ast.Int):
            return sympy.Integer(e.value)
        if isinstance(e, ast.String):
            return e.value
        if isinstance(e, ast.Var):
            if scope.has(e.name):
                return scope.get(e.name)
            if e.name in CONSTANTS:
                return CONSTANTS[e.name]
            raise CostgraphSemanticError(
                f"'{e.name}' is not defined", e.loc,
                hint=did_you_mean(e.name, scope.names(),
                                        f"declare a dimension with `dim {e.name}` in the model, or assign "
                                        f"'{e.name}' before this line (names made inside a repeat or block "
                                        "stay there)"))
        if isinstance(e, ast.BinOp):
            return self.binop(e, scope)
        if isinstance(e, ast.Call):
            return self.call(e, scope)
        if isinstance(e, (ast.Compare, ast.InList, ast.Logic)):
            v = self.condition(e, scope)
            if isinstance(v, _Cond):
                raise CostgraphSemanticError("a condition on a repeat's index can only be tested by an if", e.loc,
                                             hint="write it in the if: if i % 2 == 0 { ... }")
            return v
        if isinstance(e, Evaluated):
            return e.value
        raise AssertionError(e)

    def eval_dim(self, e, scope: Scope, what: str):
        v = self.evaluate(e, scope)
        if isinstance(v, (bool, Tensor, tuple, str)) or v is None:
            raise CostgraphSemanticError(f"{what} must be a dimension expression, got {describe(v)}",
                                         getattr(e, "loc", None))
        return check_size(v, what, getattr(e, "loc", None))

    def binop(self, e: ast.BinOp, scope: Scope):
        # a chain `a + b - c + ...` is walked in a loop, left to right: it may be
        # long (the parser counts it as one level of nesting)
        chain = []
        while isinstance(e, ast.BinOp):
            chain.append(e)
            e = e.left
        value = self.evaluate(e, scope)
        for link in reversed(chain):
            value = self._binop(link, value, self.evaluate(link.right, scope))
        return value

    def _binop(self, e: ast.BinOp, left, right):
        for v in (left, right):
            if isinstance(v, _Index):
                raise CostgraphSemanticError(
                    f"the index '{v.name}' can only be tested in an if, not used in arithmetic", e.loc,
                    hint=_PATTERN_HINT)
        if isinstance(left, Tensor) and isinstance(right, Tensor):
            kind = {"+": "add", "-": "sub", "*": "mul"}.get(e.op)
            if kind is None:
                raise CostgraphSemanticError(f"tensors cannot be divided with '{e.op}'", e.loc)
            return self.apply_op(kind, {"x": left, "y": right}, None, e.loc)
        if isinstance(left, sympy.Expr) and isinstance(right, sympy.Expr):
            if e.op in "/%" and right.is_zero:
                raise CostgraphSemanticError("division by zero", e.right.loc)
            if e.op == "%":
                result = sympy.Mod(left, right)
            else:
                result = {"+": left + right, "-": left - right, "*": left * right, "/": left / right}[e.op]
            check_expansion(result, "this dimension expression", e.loc)
            return check_magnitude(result, e.loc)
        hint = "multiply a tensor by a constant with scale(x)" if Tensor in (type(left), type(right)) else None
        raise CostgraphSemanticError(
            f"cannot apply '{e.op}' to {describe(left)} and {describe(right)}", e.loc, hint=hint)

    def dim_function(self, e: ast.Call, values: list):
        """``min(a, b)``, ``max(a, b)``, ``floor(x)``, ``ceil(x)`` of dimension expressions."""
        f, arity, usage = DIM_FUNCS[e.name]
        if (len(values) < 2) if arity == 2 else (len(values) != 1):
            raise CostgraphSemanticError(f"{e.name}() takes {'two or more arguments' if arity == 2 else 'one argument'},"
                                         f" {len(values)} given", e.loc, hint=usage)
        result = f(*values)
        check_expansion(result, "this dimension expression", e.loc)
        return check_magnitude(result, e.loc)

    def condition(self, e, scope: Scope):
        """An if's condition: true/false, or a :class:`_Cond` on a repeat's index."""
        if isinstance(e, ast.Logic):
            a = self.condition(e.left, scope)
            if e.op == "not":
                if isinstance(a, bool):
                    return not a
                if isinstance(a, _Cond):
                    return _Cond(a.level, ("not", a.tree))
                raise CostgraphSemanticError(f"'not' needs true or false, got {describe(a)}", e.loc,
                                             hint="not tests an option or a condition: if not bias { ... }")
            return _logic(e.op, a, self.condition(e.right, scope), e.loc)
        if isinstance(e, ast.Compare):
            return self.compare(e, scope)
        if isinstance(e, ast.InList):
            return self.in_list(e, scope)
        return self.evaluate(e, scope)

    def in_list(self, e: ast.InList, scope: Scope):
        """``i in [a, b, ...]`` (``not in``): ``i == a or i == b ...`` on a repeat's index, the
        listed layers; ``i % M in [r, ...]``: one congruence with those residues."""
        side = self._index_side(e.value, scope)
        items = [self.evaluate(x, scope) for x in e.items]
        for x, v in zip(e.items, items):
            if not isinstance(v, sympy.Expr) or isinstance(v, bool):
                raise CostgraphSemanticError(f"a list in a condition holds numbers or dimensions, got {describe(v)}",
                                             x.loc, hint="if j in [2, 5, 8, 10] { ... }")
        if side[0] == "value":
            v = side[1]
            if isinstance(v, sympy.Expr) and v.is_number and all(x.is_number for x in items):
                return any(v == x for x in items) != e.negated
            raise CostgraphSemanticError(
                f"'in' tests a repeat's index, not {describe(v)}", e.loc,
                hint="number the copies with repeat COUNT as NAME[j] and test j: if j in [2, 5, 8] { ... }")
        _, idx, m = side
        if m is not None:
            if not all(x.is_Integer for x in items):
                raise CostgraphSemanticError(
                    f"the remainder '{idx.name} % {m}' is listed with values that are not whole numbers", e.loc,
                    hint=_PATTERN_HINT)
            tree = _Cell(m=m, residues=frozenset(int(x) % m for x in items if 0 <= x < m))
        else:
            for x, v in zip(e.items, items):
                if v.is_integer is not True:
                    raise CostgraphSemanticError(
                        f"the index '{idx.name}' is listed with {v}, not provably a whole number", x.loc,
                        hint="list whole numbers or dimensions: j in [0, 3, l - 1]")
            tree = _any_of([_Cell(lo=v, hi=v + 1) for v in dict.fromkeys(items)])
        return _Cond(idx.level, ("not", tree) if e.negated else tree)

    def _index_side(self, e, scope: Scope):
        """One side of a comparison: ``("index", idx, modulus or None)`` for
        ``i`` or ``i % M``, else ``("value", v)``."""
        if isinstance(e, ast.Var) and isinstance(v := self.evaluate(e, scope), _Index):
            return ("index", v, None)
        if isinstance(e, ast.BinOp) and e.op == "%" and isinstance(e.left, ast.Var):
            idx = self.evaluate(e.left, scope)
            if isinstance(idx, _Index):
                m = self.evaluate(e.right, scope)
                if not (isinstance(m, sympy.Integer) and m > 0):
                    raise CostgraphSemanticError(
                        f"the index '{idx.name}' is taken modulo a whole number, got {describe(m)}", e.right.loc,
                        hint="a layer pattern repeats every M layers for a fixed M: i % 6 == 5")
                if m > MAX_MODULUS:
                    raise CostgraphSemanticError(f"modulus {m} is too large (at most {MAX_MODULUS})", e.right.loc)
                return ("index", idx, int(m))
        return ("value", self.evaluate(e, scope))

    _FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}

    def compare(self, e: ast.Compare, scope: Scope):
        left, right = self._index_side(e.left, scope), self._index_side(e.right, scope)
        op = e.op
        if left[0] == "value" and right[0] == "value":
            a, b = left[1], right[1]
            if isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr) and a.is_number and b.is_number:
                return bool({"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])
            raise CostgraphSemanticError(
                f"a comparison tests a repeat's index, not {describe(a)} and {describe(b)}", e.loc,
                hint="dimensions are symbols, so the graph cannot depend on their values; number the copies "
                     "with repeat COUNT as NAME[i] and test i (i % 2 == 0, i < k); an option is tested "
                     "directly: if bias { ... }")
        if left[0] == "index" and right[0] == "index":
            raise CostgraphSemanticError("a comparison tests an index against a number or dimension", e.loc,
                                         hint=_PATTERN_HINT)
        if right[0] == "index":
            left, right, op = right, left, self._FLIP[op]
        _, idx, m = left
        v = right[1]
        if not isinstance(v, sympy.Expr) or isinstance(v, bool):
            raise CostgraphSemanticError(f"the index '{idx.name}' is compared with {describe(v)}", e.loc,
                                         hint=_PATTERN_HINT)
        if m is None:
            if op in ("==", "!="):
                if v.is_integer is not True:
                    raise CostgraphSemanticError(
                        f"the index '{idx.name}' is compared for equality with {v}, not provably a whole number",
                        e.loc, hint="compare with a whole number or a dimension: i == 0, i == k")
                cell = _Cell(lo=v, hi=v + 1)
                return _Cond(idx.level, cell if op == "==" else ("not", cell))
            cell = {"<": lambda: _Cell(hi=sympy.ceiling(v)), "<=": lambda: _Cell(hi=sympy.floor(v) + 1),
                    ">": lambda: _Cell(lo=sympy.floor(v) + 1), ">=": lambda: _Cell(lo=sympy.ceiling(v))}[op]()
            return _Cond(idx.level, cell)
        if not v.is_Integer:
            raise CostgraphSemanticError(
                f"the remainder '{idx.name} % {m}' is compared with {v}: compare it with a whole number", e.loc,
                hint=_PATTERN_HINT)
        r = int(v)
        test = {"==": r.__eq__, "!=": r.__ne__, "<": r.__gt__, "<=": r.__ge__, ">": r.__lt__, ">=": r.__le__}[op]
        return _Cond(idx.level, _Cell(m=m, residues=frozenset(x for x in range(m) if test(x))))
