"""Text → located syntax tree (:mod:`costgraph.language.ast`).

Syntax only: names are not resolved here. The grammar is
``grammars/costgraph.lark`` (LALR(1)), built once by
:mod:`costgraph.language.grammar`. Syntax errors become
:class:`~costgraph.errors.CostgraphSyntaxError` with file, line, column, the
line with a caret, and what was expected in the words a user types.
"""

from __future__ import annotations

import re

from lark import Token, Transformer_NonRecursive, Tree, v_args
from lark.exceptions import UnexpectedInput, VisitError

from . import ast
from ..errors import CostgraphError, CostgraphSemanticError, CostgraphSyntaxError, Location
from .grammar import lark_parser
from .syntax_errors import _location, _syntax_error
from .limits import (MAX_DEPTH, MAX_DIGITS, MAX_SOURCE_CHARS, MAX_TOKENS, check_number,  # noqa: F401
                     check_source_size)  # (the limits are read from here too)


class _ToAst(Transformer_NonRecursive):
    """Builds :mod:`costgraph.language.ast` nodes; every node gets its location."""

    def __init__(self, path: str, lines: list[str]):
        super().__init__()
        self.path = path
        self.lines = lines

    def _loc(self, meta_or_token) -> Location:
        line = getattr(meta_or_token, "line", 1) or 1
        col = getattr(meta_or_token, "column", 1) or 1
        text = self.lines[line - 1] if 0 < line <= len(self.lines) else ""
        return Location(self.path, line, col, text)

    # expressions
    def var(self, children):
        (tok,) = children
        return ast.Var(str(tok), self._loc(tok))

    def int(self, children):
        (tok,) = children
        loc = self._loc(tok)
        return ast.Int(check_number(str(tok), loc), loc)

    def string(self, children):
        (tok,) = children
        return ast.String(str(tok)[1:-1], self._loc(tok))

    @v_args(meta=True)
    def _binop(self, op, meta, children):
        left, right = children
        return ast.BinOp(op, left, right, left.loc)

    def add(self, c):
        return self._binop("+", None, c)

    def sub(self, c):
        return self._binop("-", None, c)

    def mul(self, c):
        return self._binop("*", None, c)

    def div(self, c):
        return self._binop("/", None, c)

    def mod(self, c):
        return self._binop("%", None, c)

    def compare(self, children):
        left, op, right = children
        return ast.Compare(str(op), left, right, left.loc)

    def list(self, children):
        return tuple(c for c in children if c is not None)

    def in_list(self, children):
        value, items = children
        return ast.InList(value, items, False, value.loc)

    def not_in_list(self, children):
        value, items = children
        return ast.InList(value, items, True, value.loc)

    def and_(self, children):
        left, right = children
        return ast.Logic("and", left, right, left.loc)

    def or_(self, children):
        left, right = children
        return ast.Logic("or", left, right, left.loc)

    @v_args(meta=True)
    def not_(self, meta, children):
        (value,) = children
        return ast.Logic("not", value, None, self._loc(meta))

    def kwarg(self, children):
        name, value = children
        return ("kw", str(name), value, self._loc(name))

    def call(self, children):
        name, *rest = children
        args, kwargs = [], []
        for item in rest:
            if item is None:
                continue
            if isinstance(item, tuple) and item and item[0] == "kw":
                kwargs.append(item[1:])
            else:
                args.append(item)
        return ast.Call(str(name), tuple(args), tuple(kwargs), self._loc(name))

    # statements
    def shape(self, children):
        return tuple(c for c in children if c is not None)

    def body(self, children):
        stmts = tuple(c for c in children if c is not None)
        for before, after in zip(stmts, stmts[1:]):
            if isinstance(before, ast.Return):   # the builder stops at a return: refuse what it would drop
                raise CostgraphSemanticError("unreachable: statements after return", after.loc,
                                             hint="a block or model ends at its return; move the "
                                                  "statements before it, or delete them")
        return stmts

    @v_args(meta=True)
    def dim_stmt(self, meta, children):
        name, value, meaning, default = children
        return ast.Dim(str(name), value, _unquote(meaning), default, self._loc(meta))

    @v_args(meta=True)
    def option_stmt(self, meta, children):
        name, value, meaning = children
        return ast.Option(str(name), value, _unquote(meaning), self._loc(meta))

    @v_args(meta=True)
    def input_stmt(self, meta, children):
        name, shape, role = children
        return ast.Input(str(name), shape, str(role) if role else None, self._loc(meta))

    @v_args(meta=True)
    def param_stmt(self, meta, children):
        name, shape, mark, dtype = children
        return ast.ParamDecl(str(name), shape, self._loc(meta), str(mark) if mark else None,
                             str(dtype) if dtype else None)

    def index(self, children):
        (tok,) = children
        return (str(tok), self._loc(tok))

    @v_args(meta=True)
    def assign_stmt(self, meta, children):
        *targets, value = children
        return ast.Assign(tuple(str(t) for t in targets), value, self._loc(meta))

    @v_args(meta=True)
    def repeat_stmt(self, meta, children):
        count, name, index, active, body = children
        return ast.Repeat(count, str(name), active, body, self._loc(meta),
                          index[0] if index else None, index[1] if index else None)

    @v_args(meta=True)
    def if_stmt(self, meta, children):
        cond, then, orelse = children
        return ast.If(cond, then, orelse or (), self._loc(meta))

    @v_args(meta=True)
    def return_stmt(self, meta, children):
        value = children[0] if len(children) == 1 else tuple(children)   # several outputs: a tuple
        return ast.Return(value, self._loc(meta))

    # top level
    @v_args(meta=True)
    def param(self, meta, children):
        name, shape, default = children
        return ast.Param(str(name), shape, default, self._loc(meta))

    @v_args(meta=True)
    def block_def(self, meta, children):
        name, *params, body = children
        params = tuple(p for p in params if p is not None)
        return ast.Block(str(name), params, body, self._loc(meta))

    @v_args(meta=True)
    def model_def(self, meta, children):
        name, base, body = children
        return ast.Model(str(name), body, self._loc(meta), str(base) if base else None)

    def setting(self, children):
        name, value = children
        return (str(name), value, self._loc(name))

    @v_args(meta=True)
    def config_def(self, meta, children):
        name, *settings = children
        return ast.Config(str(name), tuple(s for s in settings if s is not None), self._loc(meta))

    @v_args(meta=True)
    def import_stmt(self, meta, children):
        (path,) = children
        return ast.Import(str(path)[1:-1], self._loc(meta))

    def start(self, children):
        f = ast.File(self.path)
        for item in children:
            bucket = {
                ast.Import: f.imports, ast.Block: f.blocks,
                ast.Model: f.models, ast.Config: f.configs,
            }[type(item)]
            bucket.append(item)
        return f


def _unquote(tok: Token | None) -> str | None:
    return str(tok)[1:-1] if tok is not None else None


# Operators of one precedence level: `a + b - c` is a flat chain, not nesting.
_CHAINS = ({"add", "sub"}, {"mul", "div", "mod"}, {"and_"}, {"or_"})


def _chain(node: Tree, child) -> bool:
    """Whether ``child`` continues ``node``'s chain of operators of one level
    (the left operand of `a + b + c` is `a + b`)."""
    return (isinstance(child, Tree) and child is node.children[0]
            and any(node.data in c and child.data in c for c in _CHAINS))


def _check_depth(tree: Tree, path: str, lines: list[str]) -> None:
    """Refuse nesting deeper than :data:`MAX_DEPTH` (the passes after this
    recurse); a flat chain such as ``a + b + ... + z`` counts as one level
    (the passes after this walk chains in a loop)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            meta = node.meta
            loc = _location(path, lines, getattr(meta, "line", None), getattr(meta, "column", None))
            raise CostgraphSyntaxError(
                f"this is nested too deeply (more than {MAX_DEPTH} levels of calls, operators or bodies)",
                loc, hint="split it into several statements with intermediate names")
        for child in node.children:
            if isinstance(child, Tree):
                stack.append((child, depth if _chain(node, child) else depth + 1))


# `dim not "w"` parses, and the file then fails where `not` is used, as an expression after 'not'
_OPERATOR_WORD_NAME = re.compile(r"^(\s*(?:dim|option|param|input)\s+)(not|and|or)\b|^(\s*)(not|and|or)\s*=[^=]")


def _operator_word_named(lines: list[str], path: str) -> CostgraphSyntaxError | None:
    """The error of a declaration naming ``not``, ``and`` or ``or`` (a dim, option, parameter, input
    or variable), located there, when the text does not parse: the parse failure at its first use
    is a consequence (issue 30). None when there is none."""
    for i, line in enumerate(lines):
        m = _OPERATOR_WORD_NAME.match(line)
        if m:
            word, col = (m.group(2), len(m.group(1))) if m.group(2) else (m.group(4), len(m.group(3)))
            return CostgraphSyntaxError(f"'{word}' is an operator word (not, and, or) and cannot be a name",
                                        Location(path, i + 1, col + 1, line), hint="choose another name")
    return None


def parse(text: str, path: str = "<string>") -> ast.File:
    """Parse model-file text into an :class:`ast.File`.

    Raises
    ------
    CostgraphSyntaxError
        With the location of the first unexpected character or token, what
        the grammar would have accepted there in the words a user types, and
        a hint (an unclosed bracket, how the construct is written); also
        for a text over :data:`MAX_SOURCE_CHARS` characters or
        :data:`MAX_TOKENS` tokens (refused before parsing) or nested deeper
        than :data:`MAX_DEPTH`.
    """
    if text.startswith("\ufeff"):   # a byte-order mark some editors write
        text = text[1:]
    check_source_size(text, path)
    # lines as the parser counts them (only "\n" ends a line)
    lines = [ln.rstrip("\r") for ln in text.split("\n")]
    try:
        tree = lark_parser().parse(text)
    except UnexpectedInput as e:
        raise (_operator_word_named(lines, path) or _syntax_error(e, text, path, lines)) from None
    _check_depth(tree, path, lines)
    try:
        return _ToAst(path, lines).transform(tree)   # not recursive: a chain may be long
    except VisitError as e:
        if isinstance(e.orig_exc, CostgraphError):
            raise e.orig_exc from None
        raise
