"""Shell completion of the ``costgraph`` command: ``costgraph --print-completion bash`` (or
``zsh``, ``tcsh``) prints a script that completes subcommands, options and their choices,
written by `shtab <https://github.com/iterative/shtab>`_ from the argparse parser itself (so it
never falls behind the options). shtab is the optional ``completion`` extra; without it the
option says how to install it (exit 2).

Install, e.g.::

    costgraph --print-completion bash > ~/.local/share/bash-completion/completions/costgraph
    costgraph --print-completion zsh > ~/.zfunc/_costgraph      # with fpath+=(~/.zfunc)

Light at import (standard library only; shtab is imported when the parser is built).
"""

from __future__ import annotations

import argparse
import sys

#: The shells shtab writes for (shtab 1.13 adds fish and powershell).
SHELLS = ("bash", "zsh", "tcsh")
_HELP = "print a shell completion script for SHELL (bash, zsh, tcsh; fish with shtab 1.13) and exit"


class _Missing(argparse.Action):
    """``--print-completion`` without shtab: say which extra provides it, exit 2."""

    def __call__(self, parser, namespace, values, option_string=None):
        print("costgraph: error: --print-completion needs shtab, which is not installed\n"
              "hint: pip install 'costgraph[completion]' (or pip install shtab)", file=sys.stderr)
        parser.exit(2)


def add_completion_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--print-completion SHELL`` to ``parser`` (the top-level one, after its subparsers):
    shtab's action when shtab is installed, else one that names the extra."""
    try:
        import shtab
    except ImportError:
        parser.add_argument("--print-completion", choices=SHELLS, action=_Missing, help=_HELP)
        return
    shtab.add_argument_to(parser, ["--print-completion"], help=_HELP)
