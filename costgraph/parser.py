"""Text → located syntax tree (:mod:`costgraph.ast`).

Syntax only: names are not resolved here. The grammar is
``grammars/costgraph.lark`` (LALR(1)), loaded once through
:mod:`costgraph.resources`. Syntax errors become
:class:`~costgraph.errors.CostgraphSyntaxError` with file, line, column, the
line with a caret, and what was expected in the words a user types.
"""

from __future__ import annotations

from functools import cache

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken

from . import ast
from .errors import CostgraphSyntaxError, Location
from .resources import grammar_text

# What a user types for each named terminal of the grammar.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "a whole number",
    "STRING": 'a quoted string ("...")',
    "CONFIG_NAME": "a configuration name",
    "$END": "the end of the file",
}


@cache
def _lark() -> Lark:
    return Lark(grammar_text(), parser="lalr", propagate_positions=True, maybe_placeholders=True)


class _ToAst(Transformer):
    """Builds :mod:`costgraph.ast` nodes; every node gets its location."""

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
        return ast.Int(int(tok), self._loc(tok))

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
        return tuple(c for c in children if c is not None)

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
    def assign_stmt(self, meta, children):
        *targets, value = children
        return ast.Assign(tuple(str(t) for t in targets), value, self._loc(meta))

    @v_args(meta=True)
    def repeat_stmt(self, meta, children):
        count, name, active, body = children
        return ast.Repeat(count, str(name), active, body, self._loc(meta))

    @v_args(meta=True)
    def if_stmt(self, meta, children):
        cond, then, orelse = children
        return ast.If(cond, then, orelse or (), self._loc(meta))

    @v_args(meta=True)
    def return_stmt(self, meta, children):
        (value,) = children
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


def _expected_words(names) -> str:
    parser = _lark()
    words = set()
    for name in names:
        if name in _TERMINAL_WORDS:
            words.add(_TERMINAL_WORDS[name])
            continue
        try:
            pattern = parser.get_terminal(name).pattern
        except KeyError:
            words.add(name.lower())
            continue
        words.add(f"'{pattern.value}'" if pattern.type == "str" else name.lower())
    ordered = sorted(words)
    if len(ordered) == 1:
        return ordered[0]
    return ", ".join(ordered[:-1]) + " or " + ordered[-1]


def parse(text: str, path: str = "<string>") -> ast.File:
    """Parse model-file text into an :class:`ast.File`.

    Raises
    ------
    CostgraphSyntaxError
        With the location of the first unexpected character or token and what
        the grammar would have accepted there.
    """
    lines = text.splitlines()
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, text, path, lines) from None
    return _ToAst(path, lines).transform(tree)


def _syntax_error(e: UnexpectedInput, text: str, path: str, lines: list[str]) -> CostgraphSyntaxError:
    line = getattr(e, "line", None)
    column = getattr(e, "column", None)
    if not isinstance(line, int) or line < 1:
        line = max(len(lines), 1)
        column = len(lines[-1]) + 1 if lines else 1
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    loc = Location(path, line, column, src)
    if isinstance(e, UnexpectedCharacters):
        ch = text[e.pos_in_stream] if e.pos_in_stream < len(text) else ""
        return CostgraphSyntaxError(
            f"unexpected character {ch!r}", loc,
            hint=f"expected {_expected_words(e.allowed)}" if e.allowed else None)
    if isinstance(e, UnexpectedEOF):
        return CostgraphSyntaxError(
            "unexpected end of file", loc, hint=f"expected {_expected_words(e.expected)}")
    if isinstance(e, UnexpectedToken):
        tok = e.token
        what = "the end of the file" if tok.type == "$END" else repr(str(tok))
        hint = f"expected {_expected_words(e.accepts or e.expected)}"
        if tok.type == "$END":
            hint += " (is a '}' or ')' missing?)"
        return CostgraphSyntaxError(f"unexpected {what}", loc, hint=hint)
    return CostgraphSyntaxError(str(e).splitlines()[0], loc)
