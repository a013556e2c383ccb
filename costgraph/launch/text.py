"""Reading a launch file under the limits of a ``config.json``, and errors located in it.

:func:`read` is :func:`costgraph.datafiles.read_text` (a regular file, at most
:data:`costgraph.datafiles.MAX_BYTES`, UTF-8, recorded so ``-o`` never replaces it) plus the NUL
check of :func:`costgraph.language.hf_config.read_config`: a binary file is refused without being
quoted, and a symbolic link that leads out of its folder is not read
(:func:`costgraph.language.hf_hub.check_link`). :func:`located` words an error at ``file:line:column`` with the line (cut) under it.
Nothing a file holds is executed or evaluated.
"""

from __future__ import annotations

import re

from ..arguments import shown
from ..errors import CostgraphValueError, Location

#: the widest value a message quotes from a file (longer ones are cut, as :func:`costgraph.arguments.shown`)
_QUOTED = 40


def read(path: str, what: str) -> str:
    """The text of the launch file ``path`` (``what``: its kind, for messages).

    Raises
    ------
    CostgraphValueError
        No such file, a folder, a device or pipe, over the size limit, not UTF-8, holding NUL bytes, or
        a symbolic link leading out of its folder."""
    from pathlib import Path

    from ..datafiles import read_text
    from ..language.hf_hub import check_link

    try:
        check_link(Path(path), path)   # a link out of its folder (to /etc/passwd, /proc/...) is never read
    except CostgraphValueError as e:
        raise CostgraphValueError(e.message, hint="give the path of the launch file itself") from None
    text = read_text(path, what)
    if "\x00" in text:
        raise CostgraphValueError(f"{path} is not a text file (it holds NUL bytes)", hint=f"give a {what}")
    return text


def quoted(value: object) -> str:
    """``value`` as a message quotes it: printable, at most :data:`_QUOTED` characters."""
    text = shown(str(value))[1:-1] if isinstance(value, str) else shown(value)
    return text if len(text) <= _QUOTED else text[:_QUOTED - 1] + "…"


def located(message: str, path: str, text: str, line: int, column: int = 1, hint: str | None = None,
            word: str | None = None):
    """A :class:`CostgraphValueError` at ``path:line:column`` of ``text`` (1-based), its line shown cut;
    ``word``: the column is where it starts on that line, when it is there."""
    lines = text.split("\n")
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    if word and word in src:
        column = src.index(word) + 1
    return CostgraphValueError(message, Location(path, line, max(column, 1), src[:200]), hint=hint)


def whole(value: object, name: str, path: str, text: str, line: int, hint: str | None = None) -> int:
    """``value`` (an int, or text of digits) as a positive whole number, or a located error naming ``name``."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 18:
        value = int(value.strip())
    if not isinstance(value, int) or value < 1 or value >= 10**18:
        raise located(f"{name} must be a positive whole number, got {quoted(value)}", path, text, line,
                      hint=hint or "write a whole number, e.g. 8", word=name.split()[-1])
    return value


def key_line(text: str, key: str, json: bool = False) -> int:
    """The 1-based line where ``key`` is first written as a key of ``text`` (YAML ``key:``, or JSON
    ``"key":`` when ``json``), else 1: where a message about that setting points."""
    pattern = (r'"' + re.escape(key) + r'"\s*:') if json else (r"(?m)^\s*" + re.escape(key) + r"\s*:")
    m = re.search(pattern, text)
    return text.count("\n", 0, m.start()) + 1 if m else 1
