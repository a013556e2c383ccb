"""The limits of a model file's text, checked before and while it is parsed (no lark here, so
the loader can check a text and read a cached syntax tree without importing the parser)."""

from __future__ import annotations

import re

from ..errors import CostgraphSyntaxError, Location


# Deepest nesting of the syntax tree (calls in calls, operators, parentheses
# around operators, repeat/if bodies) that the recursive passes handle safely.
# A flat chain of one precedence level (a + b - c + ..., a * b / c ...) counts
# as one level, however long: the passes walk chains in a loop. The bundled
# models nest 13 deep.
MAX_DEPTH = 100

# Longest whole number a file may write, and the most digits any number in a
# dimension expression may reach (a dimension has a few digits).
MAX_DIGITS = 100

# Longest text parsed, in characters: 1,000,000. The largest bundled file
# (models/llama.cg) has 5,239. Checked before parsing, so a huge file is refused
# at once; the loader reads no more of a file than can pass it.
MAX_SOURCE_CHARS = 1_000_000

# Most tokens (names, numbers, strings, operators and brackets; comments not
# counted) in one file: 50,000. Parsing takes about 35 µs a token (lark's LALR
# parser, linear), so the largest file accepted parses in about 2 s; the
# largest bundled file (models/llama.cg) has 843 tokens.
MAX_TOKENS = 50_000

# A cheap approximation of the lexer, used only to count tokens before parsing.
_TOKEN = re.compile(r'"[^"\n]*"|#[^\n]*|\w+|\S')


def check_number(digits: str, loc: Location | None = None, error=CostgraphSyntaxError) -> int:
    """``digits`` (a whole number as written) as an int, or a located error if absurdly long."""
    digits = digits.replace("_", "")
    if len(digits) > MAX_DIGITS:
        raise error(f"number too large: it has {len(digits)} digits (at most {MAX_DIGITS})", loc)
    return int(digits)


def _offset_location(text: str, offset: int, path: str) -> Location:
    line = text.count("\n", 0, offset) + 1
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    src = text[start:end if end >= 0 else len(text)]
    return Location(path, line, offset - start + 1, src[:10_000].rstrip("\r"))


def check_source_size(text: str, path: str) -> None:
    """Refuse a text longer than :data:`MAX_SOURCE_CHARS` characters or
    :data:`MAX_TOKENS` tokens before parsing it, located where the limit is
    crossed."""
    hint = ("a model file describes one model, its layers written once in a repeat "
            "(the bundled files have under 1,000 tokens each)")
    if len(text) > MAX_SOURCE_CHARS:
        raise CostgraphSyntaxError(f"the file is too large: more than {MAX_SOURCE_CHARS:,} characters",
                                   _offset_location(text, MAX_SOURCE_CHARS, path), hint=hint)
    tokens = _TOKEN.findall(text)
    if len(tokens) - sum(1 for t in tokens if t[0] == "#") > MAX_TOKENS:
        count = 0
        for m in _TOKEN.finditer(text):
            count += m.group()[0] != "#"
            if count > MAX_TOKENS:
                raise CostgraphSyntaxError(
                    f"the file is too long: more than {MAX_TOKENS:,} tokens (names, numbers and symbols)",
                    _offset_location(text, m.start(), path), hint=hint)
