"""Reading a launch file under the limits of a ``config.json``, and errors located in it.

:func:`read` is :func:`costgraph.datafiles.read_text` (a regular file, at most
:data:`costgraph.datafiles.MAX_BYTES`, UTF-8, recorded so ``-o`` never replaces it) plus the NUL
check of :func:`costgraph.language.hf_config.read_config`: a binary file is refused without being
quoted, and a symbolic link that leads out of its folder is not read
(:func:`costgraph.language.hf_hub.check_link`). :func:`located` words an error at ``file:line:column`` with the line (cut) under it.
Nothing a file holds is executed or evaluated.
"""

from __future__ import annotations

import bisect
import re

from ..arguments import digits, shown
from ..errors import CostgraphValueError, Location

#: the widest value a message quotes from a file (longer ones are cut, as :func:`costgraph.arguments.shown`)
_QUOTED = 40


#: the most characters a launch file may hold (the shell reader's own bound, ``shell.MAX_VALUE``)
MAX_TEXT = 1 << 20


def read(path: str, what: str) -> str:
    """The text of the launch file ``path`` (``what``: its kind, for messages).

    Raises
    ------
    CostgraphValueError
        No such file, a folder, a device or pipe, over the size limit (:data:`MAX_TEXT` characters), not
        UTF-8, holding NUL bytes, or
        a symbolic link leading out of its folder."""
    from pathlib import Path

    from ..datafiles import read_text
    from ..language.hf_hub import check_link

    try:
        check_link(Path(path), path)   # a link out of its folder (to /etc/passwd, /proc/...) is never read
    except CostgraphValueError as e:
        raise CostgraphValueError(e.message, hint="give the path of the launch file itself") from None
    text = read_text(path, what)
    if len(text) > MAX_TEXT:   # a 16 MB YAML of keys took about a minute to parse
        raise CostgraphValueError(f"{path} holds over {MAX_TEXT:,} characters, more than a launch file ({what})",
                                  hint="a launch file is a few kilobytes: give the file you launch with")
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
    if isinstance(value, str) and digits(value.strip()) and len(value.strip()) <= 18:
        value = int(value.strip())
    if not isinstance(value, int) or value < 1 or value >= 10**18:
        raise located(f"{name} must be a positive whole number, got {quoted(value)}", path, text, line,
                      hint=hint or "write a whole number, e.g. 8", word=name.split()[-1])
    return value


def line_finder(text: str, pattern: str):
    """``line(key)``: the 1-based line of ``text`` where ``pattern`` (a regular expression whose group 1
    is the key) first matches that key, 1 where it never does. Every match is found once: a file of
    200,000 keys searched its whole text per key, past a minute. ``pattern`` matches blanks with
    ``[ \\t]``, not ``\\s``, which would start a match on a blank line above the key."""
    first: dict[str, int] = {}
    for m in re.finditer(pattern, text):
        first.setdefault(m.group(1), m.start(1))
    starts = [0, *(m.end() for m in re.finditer("\n", text))]

    def line(key: str) -> int:
        at = first.get(key)
        return 1 if at is None else bisect.bisect_right(starts, at)
    return line
