"""Syntax errors in the user's words: a Lark ``UnexpectedInput`` → a located
:class:`~costgraph.errors.CostgraphSyntaxError` (file:line:column, the line
with a caret, what was expected as a user would type it — ``')' or ','``,
never a terminal name — the construct being written, and a hint for an
unclosed bracket). Used by :func:`costgraph.language.parser.parse`.
"""

from __future__ import annotations

import difflib
import re

from lark import Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..errors import CostgraphSyntaxError, Location
from .grammar import lark_parser

# --- syntax errors in the user's words ---------------------------------------
#
# Everything below is data about the language, so that a message says what a
# user would type ("expected ')' or ','"), never a terminal name (RPAR).

# How each construct is written, keyed by the keyword that opens it; shown
# when an error falls inside that construct's header.
_FORMS = {
    "import": 'write import "path/to/file.cg"',
    "block": "write block NAME(x[B, S, H], width, bias = true) { ... return y }",
    "model": "write model NAME { ... } or model NAME extends BASE { option ... }",
    "config": "write config NAME { h = 768, l = 12 }",
    "dim": 'write dim NAME ["meaning"] [default N], or dim NAME = EXPR for a derived one',
    "option": 'write option NAME = VALUE ["meaning"]',
    "input": "write input NAME[b, s] or input NAME[b, s]: ROLE",
    "param": "write param NAME[a] or param NAME[h, h]",
    "repeat": "write repeat COUNT as NAME { ... } (or repeat COUNT as NAME[i] { ... }, "
              "repeat COUNT as NAME active K { ... })",
    "if": "write if COND { ... } or if COND { ... } else { ... }",
    "return": "write return EXPR",
}

# Keywords that start a top-level item and a statement (for "did you mean").
_TOP_KEYWORDS = ("import", "block", "model", "config")
_STMT_KEYWORDS = ("dim", "option", "input", "param", "repeat", "if", "return")
_OTHER_KEYWORDS = ("as", "active", "else", "extends", "default", "and", "or", "not", "in")

# What a user types for each named terminal of the grammar.
_TERMINAL_WORDS = {
    "NAME": "a name",
    "INT": "a whole number",
    "STRING": 'a quoted string ("...")',
    "CONFIG_NAME": "a configuration name",
    "COMPARE": "a comparison (==, !=, <, <=, >, >=)",
    "$END": "the end of the file",
}

# Sets of expected words a user thinks of as one thing: when all of `core`
# are expected, every word of `members` is replaced by `word`.
_GROUPS = (
    ({"'dim'", "'input'", "'option'", "'repeat'", "'return'"},
     {"'dim'", "'input'", "'option'", "'param'", "'repeat'", "'return'", "'if'", "a name"}, "a statement"),
    ({"'('", "a whole number", "a name"},
     {"'('", "a whole number", "a name", 'a quoted string ("...")', "'not'"}, "an expression"),
)

# After a complete value these continue the expression; they are not what is
# missing, so they are left out when something else is expected too.
_CONTINUATIONS = {"'+'", "'-'", "'*'", "'/'", "'%'", "'('", "'='", "'and'", "'or'", "'in'", "'not'",
                  "a comparison (==, !=, <, <=, >, >=)"}
_OPERATORS = {"'+'", "'-'", "'*'", "'/'", "'%'"}

# Characters that are not part of the language, and what to write instead.
_CHAR_HINTS = {
    "@": "a matrix product is written matmul(x, y)",
    "×": "multiplication is written '*'",
    "·": "multiplication is written '*'",
    "÷": "division is written '/'",
    "−": "minus is written '-'",
    "–": "minus is written '-'",
    "^": "there is no power operator: write h * h",
    "'": 'strings use double quotes: "..."',
    "“": 'strings use plain double quotes: "..."',
    "”": 'strings use plain double quotes: "..."',
    "‘": 'strings use plain double quotes: "..."',
    "’": 'strings use plain double quotes: "..."',
    "!": "'not' is written not: if not bias { ... }; 'not equal' is written !=",
    "&": "'and' is written and: if i % 2 == 0 and i < k { ... }",
    "|": "'or' is written or: if i == 0 or i == 5 { ... }",
    "$": "names are letters, digits and '_'",
    "\xa0": "a non-breaking space: replace it with a plain space",
    "\u200b": "an invisible zero-width space: delete it",
    "\\": "a line cannot be continued with '\\'; expressions may span lines inside parentheses",
}

_OPENERS = {"(": ")", "[": "]", "{": "}"}
_CLOSERS = {v: k for k, v in _OPENERS.items()}


def _word(name: str) -> str:
    if name in _TERMINAL_WORDS:
        return _TERMINAL_WORDS[name]
    try:
        pattern = lark_parser().get_terminal(name).pattern
    except KeyError:
        return name.lower()
    return f"'{pattern.value}'" if pattern.type == "str" else name.lower()


def _words(names) -> set[str]:
    words = {_word(n) for n in names}
    if words & _OPERATORS and words - _CONTINUATIONS:
        words -= _CONTINUATIONS
    for core, members, word in _GROUPS:
        if core <= words:
            words = (words - members) | {word}
    if len(words) > 1:
        words.discard("';'")   # optional punctuation is never what is missing
    return words


def _join(words) -> str:
    # quoted things first, then descriptions, the end of the file last
    ordered = sorted(words, key=lambda w: (w == "the end of the file", not w.startswith("'"), w))
    if len(ordered) == 1:
        return ordered[0]
    return ", ".join(ordered[:-1]) + " or " + ordered[-1]


def _expected_words(names) -> str:
    """``names`` (terminals the grammar accepts) as a user reads them: "')' or ','"."""
    return _join(_words(names))


def _open_brackets(text: str, end: int) -> list[tuple[str, int, int]]:
    """The brackets still open at ``text[end]`` (innermost last) with their
    line and column, outside strings and comments; a closer that matches
    nothing is passed over."""
    stack: list[tuple[str, int, int]] = []
    line, col, i = 1, 1, 0
    while i < end:
        ch = text[i]
        if ch == "#":
            while i < end and text[i] != "\n":
                i += 1
                col += 1
            continue
        if ch == '"':
            j = i + 1
            while j < end and text[j] not in '"\n':
                j += 1
            col += j - i + (1 if j < end and text[j] == '"' else 0)
            i = j + (1 if j < end and text[j] == '"' else 0)
            continue
        if ch in _OPENERS:
            stack.append((ch, line, col))
        elif ch in _CLOSERS:
            if stack and stack[-1][0] == _CLOSERS[ch]:
                stack.pop()
        if ch == "\n":
            line, col = line + 1, 1
        else:
            col += 1
        i += 1
    return stack


def _bracket_hint(text: str, pos: int, tok: Token, words: set[str]) -> str | None:
    """An unclosed or unmatched bracket that explains an unexpected ``tok`` at ``pos``."""
    opened = _open_brackets(text, pos)
    top = opened[-1] if opened else None
    if str(tok) in _CLOSERS and tok.type != "STRING":
        if top is not None and top[0] == _CLOSERS[str(tok)]:
            return None
        if top is not None and f"'{_OPENERS[top[0]]}'" in words:
            return f"the '{top[0]}' at {top[1]}:{top[2]} is not closed"
        if not any(o[0] == _CLOSERS[str(tok)] for o in opened):
            return f"this '{tok}' has no '{_CLOSERS[str(tok)]}' to close"
        return None
    # '(' and '[' close on their own line, as a rule: one still open on an
    # earlier line is the likely culprit
    if top is not None and top[0] in "([" and f"'{_OPENERS[top[0]]}'" in words and top[1] < tok.line:
        return f"the '{top[0]}' at {top[1]}:{top[2]} is not closed"
    return None


def _value_stack(e: UnexpectedInput) -> list:
    """What the parser had read when it stopped (tokens and finished rules)."""
    try:
        return list(e.interactive_parser.parser_state.value_stack)
    except AttributeError:
        try:
            return list(e.state.value_stack)
        except AttributeError:
            return []


def _keyword(item) -> str | None:
    """The keyword ``item`` is, if it is a keyword token (``dim``, ``as``...)."""
    if isinstance(item, Token) and item.type == str(item).upper() and (
            str(item) in _FORMS or str(item) in _OTHER_KEYWORDS):
        return str(item)
    return None


def _construct(stack: list) -> str | None:
    """The construct whose header the parser is in (``repeat``, ``dim``...), if any."""
    for i in range(len(stack) - 1, -1, -1):
        item = stack[i]
        if not isinstance(item, Token):
            continue
        if item.type == "LBRACE":
            before = stack[i - 1] if i > 0 else None
            return "config" if isinstance(before, Token) and before.type == "CONFIG_NAME" else None
        if item.type == "LPAR":
            return "block" if i >= 2 and _keyword(stack[i - 2]) == "block" else None
        kw = _keyword(item)
        if kw in _FORMS:
            return kw
    return None


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    text = str(tok)
    if len(text) > 24:
        text = text[:20] + "…"
    return text if tok.type == "STRING" else repr(text)


def _location(path: str, lines: list[str], line, column) -> Location:
    if not isinstance(line, int) or line < 1 or line > max(len(lines), 1):
        line = max(len(lines), 1)
        column = len(lines[line - 1]) + 1 if lines else 1
    if not isinstance(column, int) or column < 1:
        column = 1
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    return Location(path, line, column, src)


def _syntax_error(e: UnexpectedInput, text: str, path: str, lines: list[str]) -> CostgraphSyntaxError:
    stack = _value_stack(e)
    construct = _construct(stack)
    form = _FORMS.get(construct) if construct else None

    if isinstance(e, UnexpectedCharacters):
        return _bad_character(e, text, path, lines, form)

    if isinstance(e, UnexpectedToken):
        tok, names = e.token, e.accepts or e.expected
    else:   # UnexpectedEOF: the LALR parser reports the end as a '$END' token instead
        tok, names = Token("$END", ""), getattr(e, "expected", None) or ()
    words = _words(names)
    last = stack[-1] if stack else None
    after = _keyword(last)

    if tok.type == "$END":
        # the caret goes where the missing text belongs: after the last token
        line = getattr(tok, "end_line", None) or getattr(e, "line", None)
        column = getattr(tok, "end_column", None) or getattr(e, "column", None)
        loc = _location(path, lines, line, column)
        opened = _open_brackets(text, len(text))
        if opened:
            ch, ol, oc = opened[-1]
            closer = f"'{_OPENERS[ch]}'"
            hint = f"the '{ch}' at {ol}:{oc} is never closed"
            if closer in words:
                words = {closer}
            return CostgraphSyntaxError(f"unexpected end of file: expected {_join(words)}", loc, hint=hint)
        suffix = f" after '{after}'" if after else ""
        return CostgraphSyntaxError(f"unexpected end of file: expected {_join(words)}{suffix}", loc, hint=form)

    loc = _location(path, lines, getattr(tok, "line", None), getattr(tok, "column", None))
    what = _describe_token(tok)
    hint = None
    pos = getattr(tok, "start_pos", None)
    if isinstance(pos, int):
        hint = _bracket_hint(text, pos, tok, words)
    if tok.type == "INT" and "a statement" in words:
        hint = "a name starts with a letter or '_'"

    top_level = "'model'" in words and "'block'" in words
    if top_level and hint is None:
        word = re.fullmatch(r"[A-Za-z_]\w*", str(tok)) is not None
        close = difflib.get_close_matches(str(tok), _TOP_KEYWORDS, n=1, cutoff=0.7) if word else []
        hint = (f"did you mean '{close[0]}'?" if close else
                "statements belong inside a model or block: model NAME { ... }")
    elif words == {"','", "'='"} and isinstance(last, Token) and last.type == "NAME":
        # a statement that starts with a name is an assignment: `name = ...`
        prev = stack[-2] if len(stack) >= 2 else None
        if isinstance(prev, Tree) and str(prev.data).startswith("__") and prev.children:
            prev = prev.children[-1]   # the statements of a body so far: the last one
        close = difflib.get_close_matches(str(last), _STMT_KEYWORDS, n=1, cutoff=0.7)
        if (isinstance(prev, Tree) and prev.data == "input_stmt" and str(last) != "else" and not close
                and getattr(prev.meta, "end_line", None) == last.line):
            # `input x[b, s] ids` (on the input's line): the role without its colon
            hint = f"a role is written after a colon: input NAME[...]: {last}"
            loc = _location(path, lines, last.line, last.column)
            return CostgraphSyntaxError(f"unexpected {last.value!r} after an input: expected ':' before it",
                                        loc, hint=hint)
        if str(last) == "else":
            hint = "an else follows the '}' of an if: if COND { ... } else { ... }"
        elif close:
            hint = f"did you mean '{close[0]}'?"
        else:
            hint = hint or f"a statement that starts with a name assigns to it: {last} = ..."
    if tok.type == "EQUAL" and isinstance(pos, int) and text[pos + 1:pos + 2] == "=" and hint is None:
        hint = "a comparison is written ==, and tests a repeat's index: if i % 2 == 0 { ... }"
    if tok.type == "EQUAL" and construct == "if" and hint is None:
        hint = "a comparison is written '==': if i % 2 == 0 { ... }"
    if after and tok.type == "EQUAL" and after in _FORMS:
        hint = f"'{after}' is a keyword and cannot be a variable's name; {form}" if form else hint
    suffix = f" after '{after}'" if after else ""
    return CostgraphSyntaxError(f"unexpected {what}: expected {_join(words)}{suffix}", loc, hint=hint or form)


def _bad_character(e: UnexpectedCharacters, text: str, path: str, lines: list[str], form) -> CostgraphSyntaxError:
    loc = _location(path, lines, e.line, e.column)
    pos = e.pos_in_stream
    ch = text[pos] if isinstance(pos, int) and pos < len(text) else ""
    if ch == '"':
        return CostgraphSyntaxError("unterminated string", loc, hint='a string ends with " on the same line')
    if ch == "." and pos > 0 and text[pos - 1].isdigit():
        return CostgraphSyntaxError("unexpected character '.': numbers are whole numbers", loc,
                                    hint="write a fraction as a division, e.g. 8 * h / 3")
    if ch == ".":
        hint = "names are letters, digits and '_' (no '.')"
    elif ch in _CHAR_HINTS:
        hint = _CHAR_HINTS[ch]
    elif ch.isalpha() or ch.isdigit():
        hint = "names use the ASCII letters a-z, A-Z, digits and '_'"
    elif not ch.isprintable():
        hint = "the file contains a control character: is it a text file?"
    else:
        hint = None
    allowed = _words(e.allowed or ())
    expected = f": expected {_join(allowed)}" if allowed and len(allowed) <= 4 else ""
    shown = repr(ch) if ch.isprintable() else ascii(ch)
    return CostgraphSyntaxError(f"unexpected character {shown}{expected}", loc, hint=hint or form)
