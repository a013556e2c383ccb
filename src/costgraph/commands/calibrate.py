"""``costgraph calibrate MODEL [layout options] --hardware X --measured-step S [--measured-memory B]
-o profile.toml``: fit the step-time model's factors (and the memory reserve) to measured runs and
write them as a profile that ``train``, ``plan`` and ``fit`` take (``--efficiency-profile FILE``).
The work is :func:`costgraph.calibrate` (:mod:`costgraph.training.calibration`); this module reads
the options (the layout options of ``costgraph train``, :func:`costgraph.commands._analysis.train_arguments`)
and the rows of ``--runs FILE``, and prints or writes the profile.

``--runs FILE``: a CSV file, one run per row. Its header names the columns: any option of this
command that describes a run, written without the leading dashes (``tp``, ``pp``, ``gpus``,
``zero``, ``recompute``, ``micro-batches``, ``global-batch``, ``config``, ``set``, ...; ``_`` for
``-`` is accepted), and ``measured_step`` (seconds, required) and ``measured_memory`` (bytes or a
size such as ``71.3GiB``, optional). An empty cell leaves the option as the command line gives it;
a switch (``sp``, ``no-loss``) is ``true``/``false``; ``set`` holds ``NAME=VALUE`` pairs separated
by spaces, each replacing the command line's pair of that name. The model is built once, from the
command line.
"""

from __future__ import annotations

import argparse
import re

from ..errors import CostgraphValueError
from ..option_fields import count_type
from .common import model_arguments

#: the cells of a switch column that turn it on, and off
_ON, _OFF = ("true", "yes", "1", "on"), ("false", "no", "0", "off", "")
#: CSV rows read at most
MAX_ROWS = 1000
#: ``-o`` not given (``-o -`` is None: the profile on standard output)
_SUMMARY = "<summary>"


def add_parser(sub) -> None:
    c = sub.add_parser("calibrate", help="fit the step-time model's factors (and the memory reserve) to measured "
                                         "runs; write a profile for --efficiency-profile")
    model_arguments(c, "a bundled model name, a .cg file or a config.json",
                    "dimension values (b is the micro-batch) or model options")
    c.add_argument("--hardware", required=True, help="the hardware preset the runs ran on (costgraph hardware)")
    _run_arguments(c)
    c.add_argument("--runs", metavar="FILE", help="a CSV file of runs, one per row: columns the layout options "
                                                  "(tp, pp, gpus, global-batch, ...), measured_step and "
                                                  "measured_memory (docs: commands/training.md)")
    c.add_argument("--fit", nargs="+", metavar="FACTOR", default=None,
                   help="the factors to fit (default: compute for one run; compute and communication for several): "
                        "compute, compute-matmul, compute-attention, compute-memory-bound, communication, "
                        "communication-tp/-cp/-ep/-pp/-dp")
    c.add_argument("--date", help=argparse.SUPPRESS)   # the date recorded (tests: a fixed one)
    from .common import cost_arguments

    cost_arguments(c, scope=False, precision=False)   # --convention --causal --profile --no-dropout
    c.add_argument("--format", choices=("text", "json"), default="text", help="what is printed (not the file)")
    from ._output import output_arguments

    output_arguments(c, help="write the profile (TOML) to FILE (the summary is printed)")
    c.set_defaults(output=_SUMMARY)   # no -o: the summary only; -o -: the profile on standard output


def _run_arguments(p) -> None:
    """The options that describe one run: ``costgraph train``'s layout options, ``--global-batch``,
    ``--measured-step``, ``--measured-memory`` (shared by the command and a ``--runs`` row)."""
    from ._analysis import train_arguments

    train_arguments(p)
    p.add_argument("--global-batch", type=count_type("--global-batch"), help="sequences per step: sets m = B / (b·d)")
    p.add_argument("--measured-step", metavar="SECONDS",
                   help="the measured seconds of one training step (every micro-batch and the optimizer step)")
    p.add_argument("--measured-memory", metavar="BYTES",
                   help="the measured peak memory of the most-loaded device: bytes or a size (71.3GiB); "
                        "fits the memory reserve")


class _RowParser(argparse.ArgumentParser):
    """A ``--runs`` row's options: argparse's errors as a located :class:`CostgraphValueError`."""

    where = ""

    def error(self, message):
        from ..cli_errors import _split_hint

        message, hint = _split_hint(message)   # a type's own hint (a count's: option_fields.count_type) first
        raise CostgraphValueError(f"{self.where}: {message}", hint=(f"{hint}; " if hint else "") + "the columns are "
                                  "the options of costgraph calibrate without the dashes; see costgraph calibrate --help")


def _row_parser(defaults: dict) -> _RowParser:
    from ..cli_errors import number_types

    p = _RowParser(prog="costgraph calibrate", add_help=False)
    number_types(p)   # a cell's numbers in ASCII digits, as the command line's
    p.add_argument("--config")
    p.add_argument("--set", nargs="+", action="extend", default=[])
    _run_arguments(p)
    p.set_defaults(**{k: v for k, v in defaults.items() if k not in ("set",)})
    return p


def run(args):
    from ..training.calibration import Measured, calibrate, memory_bytes, seconds
    from ..training.calibration_file import to_toml
    from ._analysis import train_layout
    from .common import load_any, settings

    if args.runs is None and args.measured_step is None:
        raise CostgraphValueError("calibrate needs a measured run", hint="give --measured-step SECONDS (one run) "
                                  "or --runs FILE (a CSV of runs)")
    if args.runs is not None and args.measured_step is not None:
        raise CostgraphValueError("give --measured-step or --runs, not both",
                                  hint="one run on the command line, or every run a row of the CSV file")
    if args.measured_step is not None:   # the flags named in the messages (a CSV row: its line)
        seconds(args.measured_step, "--measured-step")
        if args.measured_memory is not None:
            memory_bytes(args.measured_memory, "--measured-memory")
    dims, options = settings(args.set)
    model, given = load_any(args, dims, options)
    # a config.json's sizes come with it (load_any): each row's --set on top of them, by name
    base = ({n: int(given[d.symbol]) for n, d in model.graph.dims.items() if d.derived is None and d.symbol in given}
            if given is not None and args.model.endswith(".json") else None)
    rows = _rows(args) if args.runs is not None else [(args, _flags(args), None)]
    runs = []
    for row, flags, where in rows:
        try:
            row_dims, row_options = settings(row.set)
            if row_options != options:
                raise CostgraphValueError("model options differ from the command line's",
                                          hint="the model is built once: give its options on the command line")
            if base is not None:
                values = model.values(row.config, {**base, **row_dims})
            else:
                values = model.values(row.config, row_dims) if (row_dims or row.config) else None
            layout = train_layout(row, row.micro_batches)
        except CostgraphValueError as e:
            if where is None:
                raise
            raise CostgraphValueError(f"{where}: {e.message}", hint=e.hint) from None
        runs.append(Measured(layout, row.measured_step, values=values, measured_memory=row.measured_memory,
                             global_batch=row.global_batch, config=row.config, flags=flags))
    profile = calibrate(model, runs, args.hardware, fit=args.fit, convention=args.convention,
                        causal=args.causal, date=args.date)
    shown = profile.to_json() if args.format == "json" else profile.to_text()
    text = to_toml(profile)
    if args.output is _SUMMARY:
        return shown
    if args.output is None:   # -o -
        return text.rstrip("\n")
    from ._output import write_output

    path = write_output(args, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return shown + f"\nwrote {path} (the profile: --efficiency-profile {path})"


def _flags(args, skip=("measured_step", "measured_memory")) -> str:
    """The run's options of ``args`` that differ from their defaults, as command-line words."""
    p = _row_parser({})
    words = []
    for action in p._actions:
        dest = action.dest
        if dest in skip or not action.option_strings:
            continue
        v = getattr(args, dest, None)
        if v == action.default or v is None:
            continue
        flag = action.option_strings[0]
        if isinstance(v, bool):
            words.append(flag)
        elif isinstance(v, list):
            words += [flag, *map(str, v)]
        else:
            words += [flag, str(v)]
    return " ".join(words)


def _rows(args) -> list:
    """``(namespace, flags, where)`` per row of ``--runs FILE`` (module docstring; ``where``: its
    file and line). Run N of the profile is the N-th row."""
    import csv
    import io

    from ..datafiles import read_text
    from ..training.calibration_profile import memory_bytes, seconds

    try:
        text = read_text(args.runs, "CSV file of runs")
    except CostgraphValueError as e:
        raise CostgraphValueError(f"--runs: {e.message}", hint=e.hint or "a CSV file: a header line of column "
                                  "names, then one row per run (docs: commands/training.md)") from None
    reader = csv.reader(io.StringIO(text))
    try:
        table = [r for r in reader]
    except csv.Error as e:
        raise CostgraphValueError(f"{args.runs}, line {reader.line_num}: not a CSV file ({e})",
                                  hint="one run per line, at most 131072 characters a cell") from None
    table = [r for r in table if any(c.strip() for c in r)]
    if len(table) < 2:
        raise CostgraphValueError(f"{args.runs}: no run in it", hint="a header line of column names, then one "
                                  "row per run (tp,gpus,global-batch,measured_step)")
    if len(table) - 1 > MAX_ROWS:
        raise CostgraphValueError(f"{args.runs}: more than {MAX_ROWS} runs",
                                  hint="calibrate against the runs that differ in layout; a few are enough")
    head = [c.strip().lower().replace("_", "-") for c in table[0]]
    base = _row_parser(vars(args))
    flags = {o: a for a in base._actions for o in a.option_strings}
    _check_header(args.runs, table[0], head, flags)
    out = []
    for n, row in enumerate(table[1:], 2):
        if len(row) != len(head):
            raise CostgraphValueError(f"{args.runs}, line {n}: {len(row)} cells under {len(head)} columns",
                                      hint="one cell per column (an empty cell keeps the command line's value); "
                                           "quote a cell that holds a comma")
        words, row_set = [], []
        for col, cell in zip(head, row):
            cell = cell.strip()
            action = flags[f"--{col}"]
            if action.nargs == 0:   # a switch
                if cell.lower() not in _ON + _OFF:
                    raise CostgraphValueError(f"{args.runs}, line {n}: {col} is a switch: true or false, "
                                              f"not {cell[:20]!r}", hint="true, yes, 1 or on; false, no, 0, off "
                                                                          "or empty")
                words += [f"--{col}"] if cell.lower() in _ON else []
            elif col == "set":   # NAME=VALUE pairs: each replaces the command line's of that NAME
                row_set = cell.split()
            elif cell:
                words.append(f"--{col}={cell}")
        base.where = f"{args.runs}, line {n}"
        row_args = base.parse_args(words, argparse.Namespace(**vars(args)))
        merged = {pair.split("=", 1)[0]: pair for pair in [*args.set, *row_set]}
        row_args.set = list(merged.values())
        if not row_args.measured_step:
            raise CostgraphValueError(f"{args.runs}, line {n}: no measured_step",
                                      hint="the seconds of the run's step")
        seconds(row_args.measured_step, f"{args.runs}, line {n}: measured_step")
        if row_args.measured_memory:
            memory_bytes(row_args.measured_memory, f"{args.runs}, line {n}: measured_memory")
        out.append((row_args, _flags(row_args), base.where))
    return out


def _check_header(runs: str, cells: list, head: list, flags: dict) -> None:
    """Refuse a header (``cells`` as read, ``head`` normalized) with a column that is no option of
    ``flags``, a column given twice, or no ``measured_step`` (module docstring)."""
    for i, col in enumerate(head):
        if f"--{col}" not in flags or col in ("help",):
            import difflib

            names = [o[2:] for o in flags]
            close = [o for o in names if o.endswith("-" + col)] or difflib.get_close_matches(col, names, n=1)
            # a name only when it looks like one: --runs may be a link to a file that is no CSV (its first
            # line private, /etc/passwd's 'root:x:0:0:...')
            name = cells[i].strip()
            shown = f"{name!r}" if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,39}", name) else "(not an option name)"
            raise CostgraphValueError(f"{runs}: unknown column {shown} (column {i + 1})",
                                      hint=(f"did you mean '{close[0]}'? " if close else "")
                                      + "columns: the options of costgraph calibrate without the dashes "
                                      "(tp, pp, gpus, global-batch, ...), measured_step, measured_memory")
    twice = sorted({c for c in head if head.count(c) > 1})
    if twice:
        raise CostgraphValueError(f"{runs}: column {twice[0]!r} appears {head.count(twice[0])} times "
                                  f"(columns {', '.join(str(i + 1) for i, c in enumerate(head) if c == twice[0])})",
                                  hint="one column per option (an option and its _ spelling are the same)")
    if "measured-step" not in head:
        raise CostgraphValueError(f"{runs}: no measured_step column", hint="the seconds of each run's step")
