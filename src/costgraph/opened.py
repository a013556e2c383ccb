"""The files this process has read on a user's behalf, in one place: model files and their
imports (:mod:`costgraph.language.loader`), ``config.json`` files
(:func:`costgraph.language.hf_config.read_config`), and every user file read through
:func:`costgraph.datafiles.read_text` (``COSTGRAPH_DATA`` tables and hardware files, calibration
profiles, the runs of ``calibrate``). The ``-o`` writer (:mod:`costgraph.commands._output`)
refuses all of them, ``--force`` or not: an output never replaces a file the run read.

Paths are kept as real paths (links followed), so a file named by another path or through a
link is the same file. Bundled files are not recorded (they are the package's, not the user's).
Standard library only."""

from __future__ import annotations

import os

_READ: set[str] = set()


def record(path: str | os.PathLike) -> None:
    """Note that ``path`` is read (before or as it is opened); a path that cannot be resolved is skipped."""
    try:
        _READ.add(os.path.realpath(path))
    except (OSError, ValueError, TypeError):   # a NUL byte, a name too long: nothing was opened
        pass


def read_files() -> frozenset[str]:
    """The real paths of every user file this process has read (see the module docstring)."""
    return frozenset(_READ)


__all__ = ["record", "read_files"]
