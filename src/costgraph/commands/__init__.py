"""The subcommands of ``costgraph``, one module each (:mod:`costgraph.cli` builds
the parser from them and dispatches; it holds no command of its own).

Every module of this package but ``common`` and the private ``_`` ones is a subcommand (found by
:func:`names`, sorted); each defines

* ``add_parser(sub)`` — adds its argparse subparser to ``sub`` (the object
  ``ArgumentParser.add_subparsers`` returned), with ``help=``;
* ``run(args) -> str | tuple[str, int]`` — does the work and returns the text to
  print (and, optionally, the exit status; 0 when only text is returned).

A module imports only light modules at its top (argparse, the standard
library); SymPy, NetworkX, matplotlib and the engine are imported inside
``run``, so ``costgraph --help`` stays fast. Mistakes in the input raise
:class:`costgraph.errors.CostgraphError`, which the CLI prints with exit 2.
Shared argument helpers are in :mod:`costgraph.commands.common`.
"""

from __future__ import annotations

import importlib
import pkgutil


#: the order ``costgraph --help`` lists them in (others follow, sorted)
ORDER = ("derive", "train", "plan", "infer", "fit", "solve", "sensitivity", "leading", "diff", "optimal", "report", "plot",
         "graph", "codegen", "sweep", "schema", "verify", "import", "hardware", "list", "ops")


def names() -> list[str]:
    """The subcommands: each module here but ``common`` and private ones, ``_`` written ``-``,
    in :data:`ORDER`, then the rest sorted."""
    found = sorted(m.name.replace("_", "-") for m in pkgutil.iter_modules(__path__)
                   if m.name != "common" and not m.name.startswith("_"))
    return [n for n in ORDER if n in found] + [n for n in found if n not in ORDER]


def module(name: str):
    """The module of subcommand ``name``."""
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}")
