"""A launch script read as words, never executed: :func:`commands`.

Training and serving scripts spell their command lines with shell: line continuations (``\\``),
comments, quotes, variables (``TP=8 ... --tensor-model-parallel-size $TP``), arrays
(``MODEL_ARGS=( --num-layers 32 ... )`` then ``${MODEL_ARGS[@]}``, ``ARR+=( ... )``) and defaults
(``${1:-"MOCK"}``, ``$(($GPUS_PER_NODE*$NUM_NODES))``). This module reads them as POSIX shell
would split them (quotes as :mod:`shlex` reads them), with each word's line kept:

* a variable is expanded only from an assignment earlier in the same file; anything else (``$1``,
  ``$(cmd)``, an environment variable) stays unresolved: the word holds :data:`UNSET` markers, and
  the reader that needs its value says which name was not assigned;
* arithmetic ``$(( ))`` of whole numbers and assigned variables (``+ - * /``, parentheses) is
  computed by a small parser, nothing else;
* ``if``/``else``/``for`` are not decided: every branch is read (the caller is told, :attr:`Script.branches`).

Nothing is run, no file other than the script is read. Bounds: :data:`MAX_WORDS` words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..arguments import digits

#: the marker around a name that no assignment of the file gives (``\\x00NAME\\x00``)
UNSET = "\x00"
#: the most words a script may hold, or a variable or command expand to (a launch script has a few hundred)
MAX_WORDS = 200_000
#: the longest text a variable may hold once expanded (``X=$X$X`` doubling stops here)
MAX_VALUE = 1 << 20
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_KEYWORDS = {"if", "then", "elif", "else", "fi", "for", "while", "until", "do", "done", "case", "esac", "{", "}",
             "!", "[[", "]]"}
_DECLARE = {"export", "local", "readonly", "declare", "typeset"}


class ShellError(Exception):
    """Text the reader cannot split (an unterminated quote): ``message`` at ``line``."""

    def __init__(self, message: str, line: int):
        super().__init__(message)
        self.message, self.line = message, line


@dataclass
class Word:
    """One word as written: ``parts`` are ``(quoted, kind, text)`` with kind ``text`` or ``var``
    (``NAME``, ``{NAME:-x}``, ``((expr))``, ``(cmd)``); ``line`` where it starts (1-based)."""

    parts: list
    line: int


@dataclass
class Script:
    """A script's commands, each a list of ``(text, line)`` words after expansion; ``variables``
    the assignments read; ``branches`` the lines of ``if``/``case``/loops whose branches were all read."""

    commands: list = field(default_factory=list)
    variables: dict = field(default_factory=dict)
    branches: list = field(default_factory=list)


def commands(text: str) -> Script:
    """The commands of the shell script ``text`` (module docstring).

    Raises
    ------
    ShellError
        An unterminated quote, ``${`` or ``$(``, a text over :data:`MAX_VALUE` characters, or more than
        :data:`MAX_WORDS` words (in the file, a variable or the commands)."""
    if len(text) > MAX_VALUE:
        raise ShellError(f"over {MAX_VALUE} characters: not a launch script", 1)
    script = Script()
    tokens = _lex(text)
    i = 0
    try:
        while i < len(tokens):
            start = i
            i = _command(tokens, i, script)
            if sum(len(c) for c in script.commands) > MAX_WORDS:
                raise ShellError(f"commands of more than {MAX_WORDS} words: not a launch script",
                                 tokens[start].line if isinstance(tokens[start], Word) else tokens[start][1])
    except RecursionError:   # ${A:-${A:-...}} nested past Python's stack
        raise ShellError("expansions nested too deeply", 1) from None
    return script


# ---------------------------------------------------------------- lexing

def _lex(text: str) -> list:
    """Words and operators (``\\n ; & | ( )`` as strings with their line) of ``text``."""
    out, i, line, n = [], 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\\" and text.startswith("\n", i + 1):
            i, line = i + 2, line + 1
        elif c in " \t\r":
            i += 1
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\n;&|()":
            out.append((c, line))
            line += c == "\n"
            i += 1
        else:
            word, i, line2 = _word(text, i, line)
            out.append(word)
            if len(out) > MAX_WORDS:
                raise ShellError(f"more than {MAX_WORDS} words: not a launch script", line)
            line = line2
    return out


def _word(text: str, i: int, line: int):
    """One word from ``text[i]``: ``(Word, next index, line after it)``."""
    parts, start_line, n = [], line, len(text)
    while i < n and text[i] not in " \t\r\n;&|()":
        c = text[i]
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i, line = i + 2, line + 1
                continue
            parts.append((False, "text", text[i + 1]))
            i += 2
        elif c == "'":
            j = text.find("'", i + 1)
            if j < 0:
                raise ShellError("a single quote (') is not closed", line)
            parts.append((True, "text", text[i + 1:j]))
            line += text.count("\n", i, j)
            i = j + 1
        elif c == '"':
            i, line = _double(text, i + 1, line, parts)
        elif c == "$":
            spec, i2 = _dollar(text, i + 1, line)
            line += text.count("\n", i, i2)
            parts.append((False, "var", spec) if spec is not None else (False, "text", "$"))
            i = i2
        elif c == "`":
            j = text.find("`", i + 1)
            if j < 0:
                raise ShellError("a backquote (`) is not closed", line)
            parts.append((False, "var", "(" + text[i + 1:j] + ")"))
            line += text.count("\n", i, j)
            i = j + 1
        else:
            j = i
            while j < n and text[j] not in " \t\r\n;&|()\\'\"$`":
                j += 1
            parts.append((False, "text", text[i:j]))
            i = j
    return Word(parts, start_line), i, line


def _double(text: str, i: int, line: int, parts: list):
    """The inside of ``"..."`` from ``text[i]`` into ``parts``: ``(index after the quote, line)``."""
    buf, n, start = [], len(text), line
    while i < n and text[i] != '"':
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
            if text[i + 1] != "\n":
                buf.append(text[i + 1])
            line += text[i + 1] == "\n"
            i += 2
        elif c == "$" or c == "`":
            if c == "`":
                j = text.find("`", i + 1)
                if j < 0:
                    raise ShellError("a backquote (`) is not closed", line)
                spec, i2 = "(" + text[i + 1:j] + ")", j + 1
            else:
                spec, i2 = _dollar(text, i + 1, line)
            if spec is None:
                buf.append("$")
            else:
                parts.append((True, "text", "".join(buf)))
                buf = []
                parts.append((True, "var", spec))
            line += text.count("\n", i, i2)
            i = i2
        else:
            buf.append(c)
            line += c == "\n"
            i += 1
    if i >= n:
        raise ShellError('a double quote (") is not closed', start)
    parts.append((True, "text", "".join(buf)))
    return i + 1, line


def _dollar(text: str, i: int, line: int):
    """What follows ``$`` at ``text[i]``: ``(spec, index after it)``; spec None for a lone ``$``."""
    if text.startswith("((", i):
        j = _closing(text, i + 1, "(", ")", line)
        if not text.startswith(")", j + 1):
            raise ShellError("$(( is not closed by ))", line)
        return "((" + text[i + 2:j] + "))", j + 2
    if text.startswith("(", i):
        return "(" + text[i + 1:_closing(text, i, "(", ")", line)] + ")", _closing(text, i, "(", ")", line) + 1
    if text.startswith("{", i):
        j = _closing(text, i, "{", "}", line)
        return "{" + text[i + 1:j] + "}", j + 1
    m = _NAME.match(text, i)
    if m:
        return m.group(), m.end()
    if i < len(text) and (text[i].isdigit() or text[i] in "@*#?$!-"):
        return text[i], i + 1
    return None, i


def _closing(text: str, i: int, open_: str, close: str, line: int) -> int:
    """The index of the bracket closing the one at ``text[i]`` (quotes skipped)."""
    depth, j, n, quote = 0, i, len(text), None
    while j < n:
        c = text[j]
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == open_:
            depth += 1
        elif c == close:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise ShellError(f"'{open_}' after $ is not closed", line)


# ---------------------------------------------------------------- commands and assignments

def _command(tokens: list, i: int, script: Script) -> int:
    """Read one command from ``tokens[i]`` into ``script``; the index after it."""
    words = []
    while i < len(tokens) and isinstance(tokens[i], Word):
        w = tokens[i]
        first = w.parts[0] if w.parts else (True, "text", "")
        m = _ASSIGN.match(first[2]) if first[:2] == (False, "text") else None
        if m and not words:
            i = _assign(tokens, i, m, script)
            continue
        plain = _plain(w)
        if not words and plain in _KEYWORDS | _DECLARE:
            if plain in ("if", "case", "for", "while", "until", "elif", "else"):
                script.branches.append(w.line)
            i += 1
            continue
        words.extend(expand(w, script.variables))
        i += 1
    if words:
        script.commands.append(words)
    return i + 1


def _plain(w: Word) -> str | None:
    return w.parts[0][2] if len(w.parts) == 1 and w.parts[0][:2] == (False, "text") else None


def _assign(tokens: list, i: int, m, script: Script) -> int:
    """``NAME=value``, ``NAME+=value``, ``NAME=( ... )`` at ``tokens[i]``; the index after it."""
    w, name, append = tokens[i], m.group(1), bool(m.group(2))
    rest = Word([(False, "text", w.parts[0][2][m.end():])] + w.parts[1:], w.line)
    old = script.variables.get(name)
    if rest.parts == [(False, "text", "")] and i + 1 < len(tokens) and isinstance(tokens[i + 1], tuple) \
            and tokens[i + 1][0] == "(":
        elements, i = [], i + 2
        while i < len(tokens) and not (isinstance(tokens[i], tuple) and tokens[i][0] == ")"):
            if isinstance(tokens[i], Word):
                elements.extend(expand(tokens[i], script.variables, split=False))
            i += 1
        base = (old if isinstance(old, list) else [] if old is None else [(old, w.line)]) if append else []
        if len(base) + len(elements) > MAX_WORDS:
            raise ShellError(f"array {name} grows past {MAX_WORDS} words: not a launch script", w.line)
        script.variables[name] = base + elements
        return i + 1
    value = "".join(t for t, _ in expand(rest, script.variables, split=False)) if rest.parts else ""
    if append and isinstance(old, list):
        script.variables[name] = old + [(value, w.line)]
    else:
        script.variables[name] = ((old or "") if append and isinstance(old, str) else "") + value
    if len(script.variables[name]) > (MAX_WORDS if isinstance(script.variables[name], list) else MAX_VALUE):
        raise ShellError(f"variable {name} grows past the size of a launch script", w.line)
    return i + 1


# ---------------------------------------------------------------- expansion

def expand(w: Word, variables: dict, split: bool = True) -> list:
    """The words ``w`` expands to, as ``(text, line)``: variables from ``variables`` (an unassigned
    one as ``UNSET + name + UNSET``), an unquoted expansion split on blanks when ``split``; an array
    ``${A[@]}`` gives its elements, each with the line it was written on."""
    fields: list = [["", w.line, False]]   # text, line, started
    for quoted, kind, text in w.parts:
        if kind == "text":
            fields[-1][0] += text
            fields[-1][2] = True
            continue
        value = _value(text, variables)
        items = value if isinstance(value, list) else [(value, w.line)]
        for n, (item, line) in enumerate(items):
            pieces = [item] if (quoted or not split) else item.split()
            if not pieces:
                continue
            if n > 0 and (quoted or not split):
                fields.append(["", line, True])
            for k, piece in enumerate(pieces):
                if k > 0 or (n > 0 and not quoted and split):
                    fields.append(["", line, True])
                fields[-1][0] += piece
                fields[-1][1] = line if isinstance(value, list) else fields[-1][1]
                fields[-1][2] = True
        if len(fields) > MAX_WORDS or len(fields[-1][0]) > MAX_VALUE:
            raise ShellError("a word expands past the size of a launch script", w.line)
    return [(t, line) for t, line, started in fields if started and (t or not split)]


def _value(spec: str, variables: dict):
    """A variable's value: a string, or a list of ``(text, line)`` for ``${A[@]}``."""
    if spec.startswith("((") and spec.endswith("))"):
        n = arithmetic(spec[2:-2], variables)
        return str(n) if n is not None else UNSET + "$((...))" + UNSET
    if spec.startswith("("):
        return UNSET + "$(...)" + UNSET
    inner = spec[1:-1] if spec.startswith("{") else spec
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)\[[@*]\]", inner)
    if m:
        v = variables.get(m.group(1))
        return v if isinstance(v, list) else [] if v is None else [(v, 0)]
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(:?[-=])(.*)", inner, re.S)
    if m:
        v = variables.get(m.group(1))
        v = v[0][0] if isinstance(v, list) and v else v
        if v is None or (m.group(2).startswith(":") and v == ""):
            return "".join(t for t, _ in expand(_word(m.group(3), 0, 0)[0], variables, split=False)) \
                if m.group(3) else ""
        return v
    v = variables.get(inner)
    if isinstance(v, list):
        return v[0][0] if v else ""
    return v if v is not None else UNSET + "$" + inner + UNSET


_ARITH = re.compile(r"\s*(?:([0-9]{1,18})|\$?\{?([A-Za-z_][A-Za-z0-9_]*)\}?|([-+*/()]))")


def arithmetic(expr: str, variables: dict) -> int | None:
    """``$(( expr ))`` of whole numbers and assigned variables with ``+ - * /`` (``/`` as shell's
    integer division) and parentheses; None for anything else (never evaluated as code)."""
    tokens, i = [], 0
    expr = expr.strip()
    while i < len(expr):
        m = _ARITH.match(expr, i)
        if not m or m.end() == i:
            return None
        if m.group(1):
            tokens.append(int(m.group(1)))
        elif m.group(2):
            v = variables.get(m.group(2))
            if not isinstance(v, str) or not digits(v.strip()) or len(v.strip()) > 18:
                return None
            tokens.append(int(v))
        else:
            tokens.append(m.group(3))
        i = m.end()
        while i < len(expr) and expr[i] in " \t":
            i += 1
    try:
        value, k = _sum(tokens, 0)
    except (IndexError, ZeroDivisionError, TypeError, ValueError, RecursionError):
        return None
    return value if k == len(tokens) and abs(value) < 10**18 else None


def _sum(t: list, k: int):
    v, k = _product(t, k)
    while k < len(t) and t[k] in ("+", "-"):
        w, k2 = _product(t, k + 1)
        v, k = (v + w if t[k] == "+" else v - w), k2
    return v, k


def _product(t: list, k: int):
    v, k = _factor(t, k)
    while k < len(t) and t[k] in ("*", "/"):
        w, k2 = _factor(t, k + 1)
        if abs(v * w) >= 10**18:
            raise ValueError("too large")
        v, k = (v * w if t[k] == "*" else int(v / w)), k2
    return v, k


def _factor(t: list, k: int):
    if t[k] == "-":
        v, k = _factor(t, k + 1)
        return -v, k
    if t[k] == "(":
        v, k = _sum(t, k + 1)
        if t[k] != ")":
            raise ValueError("unclosed")
        return v, k + 1
    if isinstance(t[k], int):
        return t[k], k + 1
    raise ValueError("operand")


#: the expansions left unresolved that no assignment in the file can give, and why
_UNREAD = {"$(...)": "a command substitution, which is not run",
           "$((...))": "arithmetic beyond whole numbers, assigned variables, + - * / and parentheses"}


def unset_message(option: str, name: str) -> tuple[str, str]:
    """The message and the hint of ``option`` whose value holds the unresolved ``name`` (``$LAYERS``,
    ``$(...)``, ``$((...))``): a variable may be assigned in the file; a command is never run."""
    if name in _UNREAD:
        return f"{option} takes its value from {name}, {_UNREAD[name]}", "write the value: the file is read, never run"
    return (f"{option} takes its value from {name}, which this file does not assign",
            f"assign it in the file ({name.lstrip('$').strip('{}')}=...) or write the value: the file is read, never run")


def unset_names(text: str) -> list[str]:
    """The unassigned names a word holds (``$1``, ``$DATA_PATH``), in order."""
    return text.split(UNSET)[1::2]
