"""The user's cache folder: ``$XDG_CACHE_HOME/costgraph`` (default ``~/.cache/costgraph``), where
``costgraph list`` keeps its answer and the loader the bundled files' syntax trees
(:mod:`costgraph.language.parse_cache`). ``COSTGRAPH_NO_CACHE=1`` turns every cache off. Standard
library only."""

from __future__ import annotations

import os
from pathlib import Path


def cache_file(kind: str, key: str) -> Path | None:
    """``$XDG_CACHE_HOME/costgraph/<kind>-<key>`` (default ``~/.cache``), or None
    when there is no such folder to use (``COSTGRAPH_NO_CACHE=1`` turns it off)."""
    if os.environ.get("COSTGRAPH_NO_CACHE"):
        return None
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home != "~" else "")
    if not os.path.isabs(base):
        return None
    return Path(base) / "costgraph" / f"{kind}-{key}"
