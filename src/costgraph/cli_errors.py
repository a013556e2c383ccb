"""argparse's own errors worded as costgraph's: what was expected and a hint.

argparse prints its usage and ``costgraph infer: error: ...`` for an unknown
flag, a missing argument, a value that is not one of the choices or not of
the flag's type; :class:`Parser` (the parser of ``costgraph`` and, through
``add_subparsers``, of every subcommand) keeps that message and adds a
``hint:`` line, as every other error of costgraph has, then exits with status 2:

* an unknown flag: the command's flags closest to it (:mod:`difflib`);
* a value not among the choices: the closest choice, then all of them;
* a value of the wrong type: the kind of value expected, with an example;
* a missing argument: what each one is (its help) and how to give it;
* a flag without its value, an ambiguous abbreviation: the flags it could be;
* always: ``costgraph CMD --help``.

A type function's message may end in ``(hint: ...)`` (``--prompt``): that
part becomes the hint line. Stdlib only: ``--help`` stays light.
"""

from __future__ import annotations

import argparse
import re
import sys

from .hints import did_you_mean, listing, unique

#: flags that were removed, each with the flag that took its place (when the command has it) and how to
#: say the same with it: the hint of "unrecognized arguments" names it before the closest flags
RETIRED = {
    "--loss-fusion": ("--cross-entropy", "--loss-fusion was replaced by --cross-entropy: 'fused' is "
                                         "--cross-entropy megatron-fused, 'unfused' is --cross-entropy megatron"),
}

#: what a value of each type function's name is, for the hint of "invalid int value"
KINDS = {"int": "a whole number, e.g. 8", "float": "a number, e.g. 0.5"}


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors carry a hint (exit status 2). Subparsers
    made by ``add_subparsers`` are of this class too (argparse's default ``parser_class``)."""

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but unrecognized arguments are reported by the subcommand's parser (its
        usage and flags), not the top one's."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = _chosen(self, parsed) or self
            owner.error("unrecognized arguments: " + " ".join(extras))
        return parsed

    def error(self, message: str):
        """Print the usage, ``PROG: error: MESSAGE`` and ``hint: ...``; exit with status 2."""
        message, hint = _split_hint(message)
        hint = f"{hint}; {self.prog} --help lists its arguments" if hint else hint_for(self, message)
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\nhint: {hint}\n")


def _split_hint(message: str) -> tuple[str, str | None]:
    """``msg (hint: h)`` → ``(msg, h)``: the hint a type function put in its message."""
    m = re.fullmatch(r"(?s)(.*?)\s*\(hint: (.*)\)\s*", message)
    return (m.group(1), m.group(2)) if m else (message, None)


def _chosen(parser: argparse.ArgumentParser, parsed) -> argparse.ArgumentParser | None:
    """The subcommand's parser that ``parsed`` went through, if any."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(getattr(parsed, action.dest or "", None) or "")
    return None


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return unique(s for a in parser._actions for s in a.option_strings)


def _action(parser: argparse.ArgumentParser, name: str) -> argparse.Action | None:
    """The action an error message names: ``--prompt``, ``-o/--output``, ``model`` or a metavar."""
    for a in parser._actions:
        names = {*a.option_strings, "/".join(a.option_strings), a.dest, str(a.metavar)}
        if name in names:
            return a
    return None


def _wanted(action: argparse.Action | None, name: str) -> str:
    """``--prompt PROMPT (prompt tokens per sequence P ...)``: how to give a missing argument."""
    if action is None:
        return name
    flag = action.option_strings[-1] if action.option_strings else ""
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    shown = f"{flag} {metavar}".strip() if action.nargs != 0 else flag
    return shown + (f" — {action.help.split(';')[0]}" if action.help and action.help != argparse.SUPPRESS else "")


def hint_for(parser: argparse.ArgumentParser, message: str) -> str:
    """The hint of one of argparse's error messages (Python 3.11 to 3.13 wordings)."""
    help_line = f"{parser.prog} --help lists its arguments"
    m = re.match(r"unrecognized arguments: (.*)", message)
    if m:
        flags = [t.split("=", 1)[0] for t in m.group(1).split() if t.startswith("-")]
        options = _options(parser)
        retired = [RETIRED[f][1] for f in unique(flags) if f in RETIRED and RETIRED[f][0] in options]
        if retired:
            return "; ".join(retired) + f"; {help_line}"
        close = [(f, did_you_mean(f, options, cutoff=0.5, quote="")) for f in unique(flags)]
        close = [(f"{f}: " if len(flags) > 1 else "") + c for f, c in close if c]
        extra = "" if flags else "it takes no more positional values; "
        return " ".join(close) + (" " if close else "") + extra + help_line
    m = re.match(r"argument (\S+): invalid choice: '?([^']*)'? \(choose from (.*)\)", message)
    if m:
        action = _action(parser, m.group(1))
        choices = [str(c) for c in (action.choices if action is not None and action.choices else [])]
        choices = choices or [c.strip(" '") for c in m.group(3).split(",")]
        close = did_you_mean(m.group(2), choices, cutoff=0.5)
        return (close + " " if close else "") + "one of: " + listing(choices) + "; " + help_line
    m = re.match(r"argument (\S+): invalid (\w+) value: (.*)", message)
    if m:
        return f"{m.group(1)} takes {KINDS.get(m.group(2), 'a ' + m.group(2) + ' value')}; {help_line}"
    m = re.match(r"the following arguments are required: (.*)", message)
    if m:
        names = [n.strip() for n in m.group(1).split(", ")]
        return "give " + "; ".join(_wanted(_action(parser, n), n) for n in names) + f"; {help_line}"
    m = re.match(r"argument (\S+): expected (?:one|at least one|\d+) argument", message)
    if m:
        return f"{_wanted(_action(parser, m.group(1)), m.group(1))}: give its value after it; {help_line}"
    m = re.match(r"ambiguous option: (\S+) could match (.*)", message)
    if m:
        could = [c.split("=", 1)[0] for c in re.split(r",\s*", m.group(2))]
        return "write the flag in full: " + " or ".join(unique(could)) + f"; {help_line}"
    m = re.match(r"argument (\S+): not allowed with argument (\S+)", message)
    if m:
        return f"give {m.group(1)} or {m.group(2)}, not both; {help_line}"
    return help_line
