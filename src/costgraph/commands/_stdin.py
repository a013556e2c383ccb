"""``-`` as MODEL: the model file or ``config.json`` read from standard input.

The text (at most :data:`MAX_STDIN_BYTES`, UTF-8) is a ``config.json`` when it starts with ``{``
(after blanks), else model-file text. It is put in a private temporary folder under a name the
commands read as they read any path (``<stdin>.json`` / ``<stdin>.cg``), and every message that
names that path names ``<stdin>`` instead (``<stdin>:3:7: error: ...``). Imports of a model read
from stdin resolve in that folder: only the bundled library (``std/...``) can be imported.

Light at import (standard library only).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

from ..errors import CostgraphValueError

#: The most standard input read for a model or a config.json (16 MiB, as a config.json file).
MAX_STDIN_BYTES = 16 * 1024 * 1024
#: How messages name the text read from standard input.
STDIN_NAME = "<stdin>"


def read_stdin(stream=None, limit: int = MAX_STDIN_BYTES) -> str:
    """The text of ``stream`` (default: standard input's bytes), at most ``limit`` bytes.

    Raises
    ------
    CostgraphValueError
        Nothing on standard input (a terminal, or closed), nothing but blanks, more than ``limit`` bytes,
        or not UTF-8."""
    if stream is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise CostgraphValueError("MODEL '-' reads the model from standard input, and there is none",
                                      hint="pipe it in: cat model.cg | costgraph derive - ; or name the file")
        stream = sys.stdin.buffer
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise CostgraphValueError(f"{STDIN_NAME} is too large for a model or a config.json (over {limit:,} bytes)",
                                  hint="a model file or a config.json is a few kB: check what is piped in")
    if not data.strip():
        raise CostgraphValueError(f"{STDIN_NAME} is empty: MODEL '-' reads the model file or config.json from it",
                                  hint="pipe one in: cat model.cg | costgraph derive - ; or name the file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CostgraphValueError(f"cannot read {STDIN_NAME}: not UTF-8 text",
                                  hint="give a model file or a config.json as UTF-8 text") from None


class StdinModel:
    """``args.model == "-"``: the text of standard input in a temporary file, and ``args.model``
    pointed at it; :meth:`shown` names it ``<stdin>`` in a message; :meth:`close` removes it."""

    def __init__(self, args, stream=None):
        text = read_stdin(stream)
        suffix = ".json" if text.lstrip().startswith("{") else ".cg"
        self.folder = tempfile.mkdtemp(prefix="costgraph-stdin-")
        self.path = os.path.join(self.folder, STDIN_NAME + suffix)
        with open(self.path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        args.model = self.path

    def shown(self, text: str) -> str:
        """``text`` with the temporary path (and its folder) named ``<stdin>``."""
        return text.replace(self.path, STDIN_NAME).replace(self.folder + os.sep, "")

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
