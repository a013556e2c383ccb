"""Names, values and scopes of the builder's walk (:mod:`costgraph.engine.builder`).

What every part of the walk shares: the language's constants, a
:class:`Scope` of variables (a repeat body or an if branch reads through to
its parent), how a value is described in an error message
(:func:`describe`), the checks on a dimension expression's value
(:func:`check_size`, :func:`check_magnitude`), and the statements of a body
seen through its ifs and repeats (:func:`statements`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..language import ast
from ..errors import CostgraphSemanticError, Location
from ..hints import did_you_mean as _did_you_mean
from .graph import Tensor
from ..language.limits import MAX_DIGITS
from ..language.patterns import Index as _Index

CONSTANTS = {"true": True, "false": False, "none": None}


def describe(v) -> str:
    """A value as an error message names it: "a tensor [b, s, h]", "the dimension 4*h"."""
    if isinstance(v, _Index):
        return f"the index '{v.name}' of repeat '{v.group}'"
    if isinstance(v, Tensor):
        return f"a tensor {v.shape_str()}"
    if isinstance(v, bool):
        return f"the value {str(v).lower()}"
    if v is None:
        return "none"
    if isinstance(v, tuple):
        return f"{len(v)} tensors"
    if isinstance(v, str):
        return f'the string "{v}"'
    return f"the dimension {v}"


class Return(Exception):
    """A ``return`` statement: unwinds the walk of a block or model body with its value."""

    def __init__(self, value, loc: Location | None = None):
        self.value = value
        self.loc = loc


def check_size(v, what: str, loc: Location | None):
    """A dimension expression that is a number must be a positive whole number."""
    if isinstance(v, sympy.Expr):
        if v.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            raise CostgraphSemanticError(f"{what} divides by zero", loc)
        if (v.is_number and not (v.is_integer and v.is_positive)) or v.is_positive is False:
            raise CostgraphSemanticError(f"{what} must be a positive whole number, got {v}", loc,
                                         hint="a dimension counts something: 1, 2, 3, ... or an expression such as 4 * h")
    return v


#: the words of conditions (``if not a and b or c``): a name spelled so would parse as a dim, then
#: fail at its first use as an operator word, so they are refused where the name is declared
OPERATOR_WORDS = ("not", "and", "or")


def not_constant(name: str, loc: Location):
    if name in CONSTANTS:
        raise CostgraphSemanticError(f"'{name}' is a constant (true, false, none) and cannot be redefined", loc,
                                     hint="choose another name")
    if name in OPERATOR_WORDS:
        raise CostgraphSemanticError(f"'{name}' is an operator word (not, and, or) and cannot be a name", loc,
                                     hint="choose another name")


def check_magnitude(v, loc: Location | None):
    for n in v.atoms(sympy.Rational):
        if len(str(max(abs(n.p), n.q))) > MAX_DIGITS:
            raise CostgraphSemanticError(f"number too large: a dimension expression holds a number of more "
                                         f"than {MAX_DIGITS} digits", loc)
    return v


@dataclass(frozen=True)
class Evaluated:
    """An argument already evaluated (a call named like a dimension function
    whose arguments turned out to be tensors)."""

    value: object
    loc: Location


class Scope:
    """Variables visible at one place; a repeat body reads through to its parent."""

    def __init__(self, parent: "Scope | None" = None):
        self.vars: dict = {}
        self.parent = parent

    def get(self, name: str):
        s = self
        while s is not None:
            if name in s.vars:
                return s.vars[name]
            s = s.parent
        raise KeyError(name)

    def has(self, name: str) -> bool:
        try:
            self.get(name)
            return True
        except KeyError:
            return False

    def names(self) -> set[str]:
        out = set(self.vars)
        if self.parent:
            out |= self.parent.names()
        return out


def did_you_mean(name: str, candidates, otherwise: str | None = None) -> str | None:
    """``did you mean 'x'?`` for the closest of ``candidates``, else ``otherwise``."""
    return _did_you_mean(name, sorted(set(map(str, candidates)))) or otherwise


def show(e) -> str:
    """A dimension written in a shape pattern, as the user wrote it (``4*h``; ``…`` beyond names,
    numbers and arithmetic)."""
    if isinstance(e, ast.Var):
        return e.name
    if isinstance(e, ast.Int):
        return str(e.value)
    if isinstance(e, ast.BinOp):   # a chain in a loop, as Builder.binop walks it
        tail = []
        while isinstance(e, ast.BinOp):
            tail.append(f"{e.op}{show(e.right)}")
            e = e.left
        return show(e) + "".join(reversed(tail))
    return "…"


def statements(body, into_repeats: bool):
    """Every statement of ``body``, through both branches of each ``if`` and,
    with ``into_repeats``, into repeat bodies."""
    for st in body:
        yield st
        if isinstance(st, ast.If):
            yield from statements(st.then, into_repeats)
            yield from statements(st.orelse, into_repeats)
        elif into_repeats and isinstance(st, ast.Repeat):
            yield from statements(st.body, into_repeats)


def declared_dims(body) -> set[str]:
    """Names of every ``dim`` at model level, in either branch of every ``if``."""
    return {st.name for st in statements(body, into_repeats=False) if isinstance(st, ast.Dim)}


def assigned_names(body) -> set[str]:
    """Names assigned anywhere in a repeat body (the values it carries)."""
    return {t for st in statements(body, into_repeats=True) if isinstance(st, ast.Assign) for t in st.targets}
