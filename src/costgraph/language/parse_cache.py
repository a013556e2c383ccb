"""A cache of the syntax trees of the bundled model files (issue 31 item 8: cold start).

Parsing ``models/gpt.cg`` and the ``std/`` files it imports, and importing lark to do it, is
about a fifth of a cold ``costgraph derive gpt``. The bundled files change only with the package,
so their trees are kept as pickles in the user's cache folder, named by the SHA-256 of the
package version, the grammar, the code that builds the trees (``ast.py``, ``parser.py``) and the
file's name and text: an edited file, grammar or tree builder, or another version, is a different
name, never a stale tree. Only bundled files are cached (their text is the
package's, not a user's); a user's model file is parsed each time.

The files are ``parse-<key>`` in the user's cache folder (:func:`costgraph.user_cache.cache_file`:
``$XDG_CACHE_HOME/costgraph``, else ``~/.cache/costgraph``; ``COSTGRAPH_NO_CACHE=1`` turns it off).
A folder that cannot be written, or a cache file that does not read back as a tree, is passed over
(the file is parsed): the cache never changes an answer or an error.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from . import ast
from .resources import grammar_text
from ..user_cache import cache_file
from ..version import __version__

#: The modules whose code shapes a tree (their text is part of the key).
_BUILDERS = ("ast.py", "parser.py")


def _key(text: str, display: str) -> str:
    h = hashlib.sha256()
    here = Path(__file__).parent
    for part in (__version__, grammar_text(), *((here / m).read_text(encoding="utf-8") for m in _BUILDERS),
                 display, text):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def parsed_bundled(text: str, display: str) -> ast.File:
    """The syntax tree of a bundled model file's ``text`` (named ``display`` in locations):
    read from the cache, else parsed (:func:`costgraph.language.parser.parse`) and stored.
    A fresh tree each call (the loader changes the tree it gets).

    Raises CostgraphSyntaxError as :func:`~costgraph.language.parser.parse` (never for a bundled
    file the tests pass)."""
    path = cache_file("parse", _key(text, display))
    if path is not None:
        try:
            with open(path, "rb") as f:
                tree = pickle.load(f)
            if isinstance(tree, ast.File):
                return tree
        except Exception:   # absent, unreadable, truncated, from another Python: parse instead
            pass
    from .parser import parse

    tree = parse(text, display)
    if path is not None:
        _store(path, tree)
    return tree


def _store(path: Path, tree: ast.File) -> None:
    """Write ``tree`` to ``path`` through a temporary file and a rename (a reader never sees half
    a file); any failure (read-only home, a full disk) leaves the cache as it was."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".parse-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(tree, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:
        pass
