"""The names an error's hint suggests, each once.

Every "did you mean" and every list of known names in a hint goes through
:func:`unique`: names are compared as text, the first occurrence keeps its
place (the order the caller chose: a model's order, sorted, the closest
first), and no name is shown twice (a model with several layer kinds has one
``q_proj`` per kind; a list put together from several tables may repeat one).

This module imports only the standard library: the CLI reads it to word
argparse's errors without loading the engine.

>>> listing(["q_proj", "k_proj", "q_proj"])
'q_proj, k_proj'
>>> did_you_mean("h100", ["h100-sxm", "h100-pcie", "h100-sxm"], prefix=True)
"did you mean 'h100-sxm' or 'h100-pcie'?"
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unique(names: Iterable[object]) -> list[str]:
    """``names`` as text, each once, in the order of their first occurrence."""
    return list(dict.fromkeys(str(n) for n in names))


def listing(names: Iterable[object], sep: str = ", ") -> str:
    """``a, b, c``: :func:`unique` names joined by ``sep``."""
    return sep.join(unique(names))


def them(names: Iterable[object]) -> str:
    """``it`` for one name, ``them`` for several: a hint's pronoun for what it lists (``give it with --set``).

    >>> them(["s"]), them(["s", "h"])
    ('it', 'them')"""
    return "it" if len(unique(names)) == 1 else "them"


def close(name: str, candidates: Iterable[object], n: int = 1, cutoff: float = 0.6,
          prefix: bool = False) -> list[str]:
    """The candidates closest to ``name`` (:func:`difflib.get_close_matches`, at most ``n``, the
    closest first), each once; with ``prefix``, those that start with ``name`` come first (every one
    of them: ``h100`` → ``h100-sxm``, ``h100-pcie``). An empty ``name`` matches nothing."""
    pool = unique(candidates)
    if not name:
        return []
    starts = [c for c in pool if c.startswith(name) and c != name] if prefix else []
    return starts or difflib.get_close_matches(name, pool, n=n, cutoff=cutoff)


def did_you_mean(name: str, candidates: Iterable[object], n: int = 1, cutoff: float = 0.6,
                 prefix: bool = False, quote: str = "'") -> str | None:
    """``did you mean 'x'?`` (``'x' or 'y'`` for several) for :func:`close`'s names, or None."""
    found = close(name, candidates, n, cutoff, prefix)
    if not found:
        return None
    return "did you mean " + " or ".join(f"{quote}{c}{quote}" for c in found) + "?"
