"""User-facing errors, each with a source location.

Every error a user can cause (a malformed model file, an unknown operator, a
shape mismatch, a bad ``--set`` value) is a :class:`CostgraphError`. Its
``str()`` is printed by the CLI as it is, gcc-style::

    models/bad.cg:4:11: error: unknown operator 'lineer'
        x = lineer(x, h)
            ^
    hint: did you mean 'linear'?

The CLI exits with status 2 on these and prints no traceback.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


# Widest source line shown under a message; a longer one is cut around the column.
_WIDTH = 100

# Longest run of digits a message shows whole; a longer number (a value found
# once numbers are filled in, a number pasted from elsewhere) is cut to its
# first and last digits: 123456…(1200 digits)…789.
SHOWN_DIGITS = 100
_LONG_NUMBER = re.compile(r"\d{%d,}" % (SHOWN_DIGITS + 1))


def tidy(text: str) -> str:
    """``text`` as a message shows it: numbers of more than :data:`SHOWN_DIGITS`
    digits cut short, control and other invisible characters (in a name
    given on the command line, a string in a file) escaped as ``\\x01``; line
    breaks are kept."""
    text = _LONG_NUMBER.sub(lambda m: f"{m[0][:6]}…({len(m[0])} digits)…{m[0][-3:]}", text)
    if not text.isprintable():
        text = "\n".join("".join(c if c.isprintable() else ascii(c)[1:-1] for c in part)
                         for part in text.split("\n"))
    return text


@dataclass(frozen=True)
class Location:
    """A position in a model file: 1-based ``line`` and ``column``."""

    file: str
    line: int
    column: int
    source_line: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class CostgraphError(Exception):
    """A mistake in user input, reported with its location and a hint.

    Parameters
    ----------
    message : str
        What is wrong, in the user's terms.
    loc : Location, optional
        Where; its source line is drawn with a caret under the column.
    hint : str, optional
        What to do about it.
    """

    kind = "error"

    def __init__(self, message: str, loc: Location | None = None, hint: str | None = None):
        message = tidy(str(message))
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.hint = tidy(str(hint)) if hint is not None else None

    def __str__(self) -> str:
        head = f"{self.loc}: " if self.loc else ""
        lines = [f"{head}{self.kind}: {self.message}"]
        if self.loc and self.loc.source_line:
            text = self.loc.source_line.rstrip("\r\n")
            # control characters (a NUL of a binary file...) would garble the terminal
            text = "".join(c if c.isprintable() or c == "\t" else "\N{REPLACEMENT CHARACTER}" for c in text)
            col = self.loc.column - 1
            if len(text) > _WIDTH:   # show a window of a long line around the column
                start = max(0, min(col - _WIDTH // 2, len(text) - _WIDTH))
                head = "…" if start > 0 else ""
                text = head + text[start:start + _WIDTH] + ("…" if start + _WIDTH < len(text) else "")
                col = col - start + len(head)
            # the caret lines up under tabs too: copy the tabs before the column
            col = min(col, len(text))   # a column past the shown text: the caret at its end
            pad = "".join("\t" if c == "\t" else " " for c in text[:col])
            lines.append("    " + text)
            lines.append("    " + pad + "^")
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)


class CostgraphSyntaxError(CostgraphError):
    """The text does not follow the grammar (``grammars/costgraph.lark``)."""

    kind = "syntax error"


class CostgraphSemanticError(CostgraphError):
    """The text parses but does not describe a valid architecture."""


class CostgraphValueError(CostgraphError):
    """A value given on the command line or to the API is unusable."""


# The hint of every "no value for" message: where the model's sizes come from.
MISSING_HINT = "give the model's sizes with --config NAME or --set NAME=VALUE (costgraph list names the configurations)"


def no_value(names) -> CostgraphValueError:
    """The error of an analysis that needs numbers but is missing some sizes:
    ``no value for E, V, a`` (the dimensions' names, sorted, each once) with
    :data:`MISSING_HINT`. ``names``: strings or SymPy symbols. Raise what it
    returns: ``raise no_value(missing)``."""
    shown = sorted({str(n) for n in names})
    return CostgraphValueError(f"no value for {', '.join(shown)}", hint=MISSING_HINT)
