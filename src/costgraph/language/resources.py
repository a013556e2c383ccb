"""The one package-aware loader for files shipped with costgraph.

The grammar (``grammars/``) and the bundled model files (``models/``) live at
the top of the repository and are installed as the data packages
``costgraph.grammars`` and ``costgraph.models`` (see ``pyproject.toml``), so
they are found through :mod:`importlib.resources` from any working directory,
in a wheel, an editable install or a zip.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

MODEL_SUFFIX = ".cg"


def grammar_text(name: str = "costgraph.lark") -> str:
    """Text of a bundled grammar file."""
    return (files("costgraph.grammars") / name).read_text(encoding="utf-8")


def models_root() -> Traversable:
    """The bundled ``models/`` folder (contains ``std/``, the block library)."""
    return files("costgraph.models")


def bundled_model(name: str) -> Traversable | None:
    """The bundled model file called ``name`` (``gpt`` → ``models/gpt.cg``), or None."""
    entry = models_root() / f"{name}{MODEL_SUFFIX}"
    return entry if entry.is_file() else None


def bundled_import(path: str) -> Traversable | None:
    """A library file named in an ``import`` (``"std/attention.cg"``), or None."""
    entry = models_root()
    for part in path.split("/"):
        entry = entry / part
    return entry if entry.is_file() else None


@cache
def bundled_model_names() -> tuple[str, ...]:
    """Names of the bundled models, sorted (the library folder ``std/`` excluded)."""
    return tuple(sorted(
        e.name[: -len(MODEL_SUFFIX)]
        for e in models_root().iterdir()
        if e.is_file() and e.name.endswith(MODEL_SUFFIX)
    ))
