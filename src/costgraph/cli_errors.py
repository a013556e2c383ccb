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

An option that takes one value, given twice on one command line (``--gpus 16 --gpus 32``), is refused
(argparse would keep the last silently), as ``--set`` refuses a name given twice; so are two switches
that set one setting to different values. Options that add up (``--set``, ``sweep --over``) repeat
freely. The rule is :class:`Parser`'s (its ``store`` actions), so every subcommand follows it.

A number is written with the ASCII digits 0-9, without ``_`` or a leading ``+``: ``type=int`` and
``type=float`` (which would read ``１６``, ``1_6``, ``+8``) refuse them as every other reader of numbers does
(:func:`costgraph.arguments.ascii_number`).

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

#: a flag another command takes, given to one that has none of it (the command's prog name, the flag): the hint says
#: what the command does instead (trial 8: `plan --link-rate line` hinted "did you mean --format?"; plan takes it now)
ELSEWHERE = {
    ("costgraph fit", "--link-rate"): "fit prints no step time (it judges memory), so the link bandwidth changes "
                                      "nothing there; time a layout with costgraph train --link-rate, or rank "
                                      "layouts with costgraph plan --link-rate;",
    ("costgraph fit", "--ep-dispatcher"): "fit prints no step time (it judges memory), so the EP dispatcher changes "
                                          "nothing there; time a layout with costgraph train --ep-dispatcher;",
}

#: train's flags that plan has none of, by what plan does instead (trial 9: `plan --tp 2` hinted "did you mean
#: --top?", `plan --attention-kernel fa2` "--attention?"; plan takes --ep-dispatcher now, passed to every row)
PLAN_SEARCHES = ("--tp", "--pp", "--cp", "--ep", "--sp", "--zero", "--recompute", "--schedule", "--virtual-stages",
                 "--micro-batches")
PLAN_WIDER = {"--ep-overlap": "--exhaustive", "--route-nodes": "--exhaustive", "--recompute-modules": "--exhaustive",
              "--recompute-num-layers": "--exhaustive", "--recompute-method": "--exhaustive",
              "--offload-optimizer": "--allow-offload", "--offload-params": "--allow-offload"}
PLAN_AT_DEFAULT = ("--domain-ranks", "--rank-order", "--fp8-transpose")


def _plan_instead(prog: str, flag: str) -> str | None:
    """What ``costgraph plan`` does in place of a flag of train's it has none of, or None."""
    if prog != "costgraph plan":
        return None
    if flag in PLAN_SEARCHES:
        return f"plan searches {flag} itself (each row names its value); time one layout with costgraph train {flag};"
    if flag in PLAN_WIDER:
        return (f"plan searches {flag} with {PLAN_WIDER[flag]}; time one layout with costgraph train {flag};")
    if flag in PLAN_AT_DEFAULT:
        return (f"plan ranks layouts at train's default {flag}; time a row with it: plan's check command "
                f"(costgraph train ...) with {flag};")
    return None

#: train's flags that web's page has no input for: its step time is train's at their defaults (trial 9: `web
#: --link-rate line` hinted "did you mean --no-dropout?", `web --sp` "--tp?")
WEB_AT_DEFAULT = ("--link-rate", "--ep-dispatcher", "--overlap", "--attention-kernel", "--zero3-gathered", "--sp",
                  "--cp", "--ep", "--schedule", "--micro-batches", "--ep-overlap", "--domain-ranks", "--rank-order",
                  "--fp8-transpose")


def _web_instead(prog: str, flag: str) -> str | None:
    """What ``costgraph web``'s page does in place of a flag of train's it has no input for, or None."""
    if prog != "costgraph web":
        return None
    if flag == "--gpus":
        return "the page's devices are its first TP × PP × DP degrees (--tp, --pp, --dp);"
    if flag in WEB_AT_DEFAULT:
        at = "without --sp" if flag == "--sp" else f"at the default {flag}"
        return (f"the page has no {flag}: its step time is costgraph train's {at}; time a layout with it: "
                f"costgraph train ... {flag};")
    return None


#: what a value of each type function's name is, for the hint of "invalid int value"
KINDS = {"int": "a whole number, e.g. 8", "float": "a number, e.g. 0.5"}


class _Once:
    """An argparse ``store`` action (mixed in before argparse's class) that refuses its setting given
    twice on one command line: the parser records each setting (``dest``) a word has given, with the
    flag and the value; a second value-taking flag of that setting, or a switch giving it another
    value, raises argparse's ArgumentError (worded with a hint by :meth:`Parser.error`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(parser, "given", None)
        value = values if self.nargs != 0 else self.const
        if given is not None:
            first = given.get(self.dest)
            if first is not None and (self.nargs != 0 or first[1] != value):
                raise argparse.ArgumentError(self, _twice(first, (option_string, value, self.nargs != 0)))
            given[self.dest] = (option_string, value, self.nargs != 0)
        super().__call__(parser, namespace, values, option_string)


def _shown(given: tuple) -> str:
    """``--gpus '16'`` (a flag with its value, cut to 24 characters) or ``--json`` (a switch)."""
    flag, value, takes = given
    if not takes:
        return flag
    text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
    return f"{flag} {text if len(text) <= 24 else text[:21] + '...'!r}"


def _twice(first: tuple, second: tuple) -> str:
    """The message of a setting given twice (``(flag, value, takes a value)`` each), with its hint."""
    if first[0] == second[0]:
        return (f"given twice ({_shown(first)}, then {_shown(second)}) "
                f"(hint: give {second[0]} once, with the value you mean)")
    return (f"{_shown(first)} and {_shown(second)} both set one setting "
            f"(hint: give one of {first[0]} and {second[0]}, once)")


class _StoreOnce(_Once, argparse._StoreAction):
    pass


class _StoreConstOnce(_Once, argparse._StoreConstAction):
    pass


class _StoreTrueOnce(_Once, argparse._StoreTrueAction):
    pass


class _StoreFalseOnce(_Once, argparse._StoreFalseAction):
    pass


def _ascii(convert):
    """argparse's ``type=int`` and ``type=float`` read ASCII text only (``int('１６')`` is 16), without
    ``_`` (``int('1_6')`` is 16) or a leading ``+`` (``int('+8')`` is 8): such a value is refused as
    :func:`costgraph.arguments.ascii_number` refuses it, so every number the command line reads follows
    one rule (issue 30)."""
    def read(text: str):
        if not text.isascii() or "_" in text or text.lstrip().startswith("+"):
            from .arguments import ascii_number
            from .errors import CostgraphValueError

            try:
                ascii_number(text, "")
            except CostgraphValueError as e:
                raise argparse.ArgumentTypeError(f"{e.message} (hint: {e.hint})") from None
        return convert(text)
    read.__name__ = convert.__name__
    return read


def number_types(parser: argparse.ArgumentParser) -> None:
    """``type=int`` and ``type=float`` of ``parser``'s arguments read ASCII numbers only (:func:`_ascii`)."""
    parser.register("type", int, _ascii(int))
    parser.register("type", float, _ascii(float))


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors carry a hint (exit status 2). Subparsers
    made by ``add_subparsers`` are of this class too (argparse's default ``parser_class``). Its
    ``store`` actions refuse a setting given twice (:class:`_Once`); its numbers are ASCII
    (:func:`number_types`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        number_types(self)
        for name, action in ((None, _StoreOnce), ("store", _StoreOnce), ("store_const", _StoreConstOnce),
                             ("store_true", _StoreTrueOnce), ("store_false", _StoreFalseOnce)):
            self.register("action", name, action)
        self.given: dict | None = None

    def parse_known_args(self, args=None, namespace=None):
        """As argparse's, recording the settings given (``given``: dest → (flag, value)) afresh."""
        self.given = {}
        return super().parse_known_args(args, namespace)

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


#: argparse's help flags: never what a mistyped flag meant (``-o`` is not ``-h``)
_HELP = ("-h", "--help")


def _no_output(prog: str, flag: str, words: list[str], options: list[str]) -> str | None:
    """The hint of ``-o FILE`` (or ``--output``) given to a command that has none (``costgraph schema``, ``derive``):
    it prints to standard output, and the shell's ``>`` writes that to a file; None for any other flag."""
    if flag not in ("-o", "--output") or flag in options:
        return None
    target = "FILE"
    for i, w in enumerate(words):
        if w.startswith(flag + "="):
            target = w[len(flag) + 1:] or target
        elif w == flag and i + 1 < len(words) and not words[i + 1].startswith("-"):
            target = words[i + 1]
    return f"{prog} has no {flag}: it prints to standard output; redirect that to a file: {prog} ... > {target};"


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
        # a field of Layout or an options class written as a flag (Layout(policy=...) is --precision) names
        # its flag; any other flag its closest
        fields = {a.field: a.option_strings[-1] for a in parser._actions if getattr(a, "field", None)}
        words, close = m.group(1).split(), []
        for f in unique(flags):
            k = f.lstrip("-").replace("-", "_")
            named = f"did you mean {fields[k]} ({k} in the Python API)?" if fields.get(k, f) != f else None
            close.append((f, named or ELSEWHERE.get((parser.prog, f)) or _plan_instead(parser.prog, f)
                          or _web_instead(parser.prog, f) or _no_output(parser.prog, f, words, options)
                          or did_you_mean(f, [o for o in options if o not in _HELP], cutoff=0.5, quote="")))
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
