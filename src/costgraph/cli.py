"""The ``costgraph`` command (argparse, from the standard library).

``costgraph derive MODEL`` prints the closed-form costs of a bundled model
(``gpt``) or a ``.cg`` file, and numbers with units when given values::

    costgraph derive gpt --scope layer --format latex
    costgraph derive gpt --config gpt2
    costgraph derive gpt --scope model --set h=768 l=12 a=12 V=50257 s=1024 s_max=1024 b=1 --format json

``costgraph list`` names the bundled models and their configurations;
``costgraph ops`` lists the operators a model file can call.

Every subcommand lives in :mod:`costgraph.commands` (one module each, with
``add_parser`` and ``run``); this module builds the parser from them and
dispatches. A mistake in the input prints a located message and exits with
status 2, with no traceback.

``--help``, ``--version``, ``list`` and ``ops`` do not import SymPy (nor
NetworkX): the command modules import only light modules at the top, and
the engine is imported when a command runs.
"""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .cli_errors import Parser   # argparse's errors with a hint (every subcommand's too), exit 2
from .errors import CostgraphError


def _parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``costgraph``. When ``argv`` starts with a command's name, only that
    command's arguments are built (the others cannot be reached from that command line:
    ``costgraph derive gpt`` builds one subparser of 29; a cold start saves their imports and
    ``add_argument`` calls); otherwise (``--help``, a mistyped command, completion) all of them."""
    p = Parser(prog="costgraph", description="Symbolic cost models of Transformer architectures.")
    p.add_argument("--version", action="version", version=f"costgraph {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    from . import commands

    names = commands.names()
    first = argv[0] if argv else None
    for name in ((first,) if first in names else names):
        commands.module(name).add_parser(sub)
    if first not in names:   # a top-level option, read before a command's name: never after it
        from .completion import add_completion_argument

        add_completion_argument(p)   # --print-completion bash|zsh|tcsh (shtab, the `completion` extra)
    return p


#: the metavar of an option whose value is other options' words (plan's ``--compare FLAGS``)
FLAGS_METAVAR = "FLAGS"


def _join_flag_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``--compare --sp`` as ``--compare=--sp``: argparse takes a value that starts with ``-`` and has no
    space for an option of its own ("expected one argument"); an option declared with the metavar ``FLAGS``
    takes the next word whatever it starts with. Other words are left as they are."""
    names = set()
    for action in parser._actions:   # the chosen command's subparser (the parser builds only that one)
        for sub in getattr(action, "choices", None).values() if isinstance(action, argparse._SubParsersAction) \
                else ():
            names.update(o for a in sub._actions if a.metavar == FLAGS_METAVAR for o in a.option_strings)
    out, i = [], 0
    while i < len(argv):
        word = argv[i]
        if word in names and i + 1 < len(argv) and argv[i + 1].startswith("-") and argv[i + 1] != "--":
            out.append(f"{word}={argv[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``costgraph`` console script; returns the exit status:
    0, or 2 for a mistake in the input (the located message is on stderr; no
    traceback), 3 for a bug in costgraph itself, 130 when interrupted; when stdout cannot take the
    output, 2 (a full disk, an I/O error; one line on stderr) or 1 (the reader has gone: EPIPE)."""
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        parser = _parser(argv)
        argv = _join_flag_values(parser, argv)
        args = parser.parse_args(argv)
    except SystemExit as e:   # argparse has printed usage (status 2), --help or --version (0)
        return e.code if isinstance(e.code, int) else 2
    stdin = None   # MODEL '-': the model or config.json read from standard input (commands/_stdin.py)
    try:
        from . import commands
        from .commands.common import resolve_models

        launch_hook = None
        if hasattr(args, "launch"):   # --launch FILE fills the options (train, plan, fit, infer, report, plot)
            from .commands import _launch_hook as launch_hook

            launch_hook.apply(args, parser, args.command, sys.argv[1:] if argv is None else argv)
        if isinstance(getattr(args, "model", None), str):
            args.model_given = args.model   # as written, for regenerate lines (commands.common.shown_model)
        if getattr(args, "model", None) == "-":
            from .commands._stdin import StdinModel

            stdin = StdinModel(args)
        resolve_models(args)   # a Hub id or a snapshot folder → its config.json (issue 20)
        out, status = commands.module(args.command).run(args), 0
        out = out if launch_hook is None else launch_hook.render(args, out)
        if isinstance(out, tuple):
            out, status = out
        if not isinstance(out, str):     # an iterator of text pieces (sweep): written as they come
            return _write_stream(out, status)
        out = stdin.shown(out) if stdin is not None else out
    except CostgraphError as e:
        from .errors import MISSING_HINT

        if e.hint == MISSING_HINT:   # a .cg file's own configurations, which costgraph list does not show
            from .commands.common import missing_hint

            e.hint = missing_hint(args) or e.hint
        print(stdin.shown(str(e)) if stdin is not None else e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:   # a bug, not the user's mistake: say so, without a traceback
        print(f"costgraph: internal error: {type(e).__name__}: {e}\n"
              "this is a bug in costgraph; please report it with the command that caused it", file=sys.stderr)
        return 3
    finally:
        if stdin is not None:
            stdin.close()
    return _write(out, status)


def _write(out: str, status: int) -> int:
    """Print ``out`` on stdout and flush it, checked: ``status``, or 1 with no message when the
    reader has gone (EPIPE: ``costgraph list | head -1``; Python's documented convention), or 2 with
    a one-line message when stdout cannot take it (a full disk: ``> /dev/full``, an I/O error)."""
    if sys.stdout is None:   # started with stdout closed (>&-)
        print("costgraph: cannot write the output: stdout is closed", file=sys.stderr)
        return 2
    try:
        print(out)
        sys.stdout.flush()
        return status
    except OSError as e:
        return _write_failed(e)


def _write_stream(pieces, status: int) -> int:
    """Write each text piece of the iterator ``pieces`` to stdout as it comes (memory independent of the
    output's length; the pieces carry their own final newline), then flush: as :func:`_write` for a
    stdout that cannot take it. A CostgraphError raised while the pieces are made propagates (to
    :func:`main`: exit 2, after what was already written)."""
    if sys.stdout is None:
        return _write("", status)
    try:
        try:
            for piece in pieces:
                sys.stdout.write(piece)
            sys.stdout.flush()
        except OSError as e:
            return _write_failed(e)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
    return status


def _write_failed(e: OSError) -> int:
    """Stdout refused a write (``e``): point it at /dev/null (so the interpreter's own flush at exit does
    not fail again); 1 with no message for EPIPE, else 2 with one line on stderr."""
    import errno
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    if isinstance(e, BrokenPipeError) or e.errno == errno.EPIPE:
        return 1
    print(f"costgraph: cannot write the output to stdout: {e.strerror or e}", file=sys.stderr)
    return 2


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s status (SymPy's cache sized when ``costgraph`` was
    imported: :data:`costgraph.SYMPY_CACHE_SIZE`)."""
    sys.exit(main())


if __name__ == "__main__":
    run()
