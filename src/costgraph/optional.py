"""Optional dependencies: import one, or say which extra installs it.

The core install (``pip install costgraph``) carries what every command needs
(SymPy, NetworkX, lark, NumPy, rich, humanize). Pictures and the operator
graph's DOT writer need more; each lives in an extra of ``pyproject.toml``:

- ``plot``: matplotlib, for ``costgraph plot`` and :mod:`costgraph.export.plots`;
- ``graph``: graphviz (the Python bindings), for ``costgraph graph --format dot|svg``;
- ``yaml``: PyYAML, for ``--launch`` with an accelerate config (:mod:`costgraph.launch.accelerate`);
- ``all``: every extra above.

>>> need("math", "plot", "costgraph plot").sqrt(4)
2.0
>>> need("no_such_module_xyz", "plot", "costgraph plot")
Traceback (most recent call last):
...
costgraph.optional.MissingExtra: error: costgraph plot needs no_such_module_xyz, which is not installed
hint: install the plot extra: pip install 'costgraph[plot]' (from a checkout: pip install -e '.[plot]')
"""

from __future__ import annotations

import importlib

from .errors import CostgraphValueError

#: the extras of pyproject.toml that ``all`` gathers and the modules each one brings (``hub``: Hub ids,
#: :mod:`costgraph.language.hf_hub`, which names the extra itself when it is missing)
EXTRAS = {"plot": ("matplotlib",), "graph": ("graphviz",), "hub": ("huggingface_hub",),
          "yaml": ("yaml",)}


class MissingExtra(CostgraphValueError):
    """An optional dependency is not installed (exit status 2 from the CLI, with the install hint)."""


def install_hint(extra: str) -> str:
    """The hint naming the extra that installs what is missing."""
    return f"install the {extra} extra: pip install 'costgraph[{extra}]' (from a checkout: pip install -e '.[{extra}]')"


def need(module: str, extra: str, purpose: str):
    """Import ``module`` (a dotted name) and return it.

    ``extra``: the extra of ``pyproject.toml`` that installs it (a key of :data:`EXTRAS`);
    ``purpose``: what needs it, as the message's subject (``"costgraph plot"``).

    Raises
    ------
    MissingExtra
        The module (or a package it needs) is not installed; the hint names the extra.
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        missing = (e.name or module).split(".")[0]
        raise MissingExtra(f"{purpose} needs {missing}, which is not installed",
                           hint=install_hint(extra)) from None
