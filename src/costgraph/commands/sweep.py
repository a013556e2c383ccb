"""``costgraph sweep MODEL --over s=512:32768:x2 --over b=1,2,4``: a model's
costs over a grid of dimension values, as CSV or JSON rows, with the
compiled evaluator (see :mod:`costgraph.export.sweep`)."""

from __future__ import annotations

from ..engine.quantities import QUANTITIES as QUANTITY_NAMES
from .common import cost_arguments, model_arguments



def add_parser(sub) -> None:
    from ._output import output_arguments

    p = sub.add_parser("sweep", help="costs over a grid of dimension values, as CSV or JSON rows",
                       description="Evaluate a scope's quantities at every combination of the --over axes "
                                   "(first axis slowest), the other dimensions from --config/--set. "
                                   "Ranges: NAME=a:b:xK (geometric), NAME=a:b:+K (arithmetic), NAME=a,b,c.")
    model_arguments(p, set_help="dimension values held fixed (h=768), or model options (bias=false)")
    p.add_argument("--over", action="append", default=[], metavar="NAME=RANGE",
                   help="a swept dimension: s=512:32768:x2, b=1:64:+1 or b=1,2,4 (repeat for more axes)")
    p.add_argument("--quantity", nargs="+", action="extend", default=None, metavar="Q", choices=QUANTITY_NAMES,
                   help="only these quantities (default: all)")
    p.add_argument("--scope", default="model", help="model (default), layer, or a group/block/node path")
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("--dtype", choices=("int64", "float64", "exact"), default="int64",
                   help="int64 (exact, refuses past 2^63; default), float64 (fastest, rounded to 53 bits) "
                        "or exact (Python integers, slow)")
    p.add_argument("--max-rows", type=_row_count, default=None, metavar="N",
                   help="write up to N rows (default 10,000,000; 1e11 and 10**11 are read exactly); "
                        "memory does not grow with N")
    cost_arguments(p, scope=False)
    p.add_argument("--no-progress", action="store_true", help="never show the progress bar (stderr)")
    output_arguments(p, help="write the rows to FILE instead of printing them")


def run(args):
    """Check and compile the sweep, evaluate its first chunk (so that a bad row or an overflow there
    is refused before anything is written), then stream the rows: to the ``-o`` file (through
    :func:`._output.write_output`'s temporary file; returns a one-line summary), or to stdout
    (returns an iterator of text pieces that :func:`costgraph.cli.main` writes as they come).
    Memory does not grow with the number of rows; ``--max-rows`` caps the output."""
    import itertools
    import sys

    from ..arguments import ascii_number
    from ..errors import CostgraphValueError
    from ..export.sweep import MAX_ROWS, Progress, parse_axes, plan
    from ..export.text_report import sweep_warnings
    from .common import load_any, settings

    max_rows = MAX_ROWS if args.max_rows is None else args.max_rows
    if max_rows <= 0:
        raise CostgraphValueError(f"--max-rows {args.max_rows}: give a positive number of rows",
                                  hint="--max-rows 1000000 (the default is 10**7)")
    for spec in args.over:   # ASCII numbers, as every reader of numbers takes them (arguments.ascii_number)
        ascii_number(spec, "--over", pair=True)
    axes = parse_axes(args.over, max_rows)     # before loading: a bad range fails fast
    dims, options = settings(args.set)
    swept = {a.name for a in axes}
    overlap = sorted(swept & set(dims))
    if overlap:
        raise CostgraphValueError(f"'{overlap[0]}' is both swept (--over) and fixed (--set)", hint="give it once")
    model, values = load_any(args, dims, options)
    values = values if values is not None else model.values()     # the dimensions' defaults, if any
    fixed = {str(k): int(v) for k, v in values.items()}
    costs = model.costs(args.scope, convention=args.convention, precision=args.precision, causal=args.causal)
    bar = None if args.no_progress else Progress(f"sweep {model.name}")
    try:
        p = plan(model, costs, axes, fixed, args.quantity, args.dtype)
        chunks = p.chunks(progress=bar)
        chunks = itertools.chain([next(chunks)], chunks)
        over = {a.name: (a.values[0], a.values[-1]) if isinstance(a.values, range) else a.values for a in axes}
        for w in sweep_warnings(fixed, over):
            print(f"warning: {w}", file=sys.stderr)     # stderr: the rows on stdout stay CSV/JSON
        pieces = _pieces(args, p, model, costs, chunks)
        if not args.output:
            return _stdout(pieces, bar, args.format == "json")     # it closes the bar
        summary = _write_file(args, p, pieces)
    except BaseException:
        if bar is not None:
            bar.close()
        raise
    if bar is not None:
        bar.close()
    return summary


def _pieces(args, p, model, costs, chunks):
    """The output's text pieces, in ``args.format``."""
    from ..export.sweep import csv_pieces, json_head, json_pieces
    from ..numbers.units import UNITS

    if args.format == "csv":
        return csv_pieces(p.columns, chunks, p.dtype)
    conventions = {"convention": args.convention, "causal": args.causal, "precision": args.precision,
                   "profile": model.settings.profile, "dropout": model.settings.dropout}
    head = json_head(model.name, costs.scope, conventions, p.dtype, p.fixed)
    return json_pieces(head, p.axes, p.columns, {q: UNITS[q] for q in p.quantities}, chunks, p.dtype)


def _write_file(args, p, pieces) -> str:
    """Write ``pieces`` to the ``-o`` file as they come (a temporary file, then moved into place)."""
    from ._output import write_output

    def write_file(tmp):
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            for piece in pieces:
                fh.write(piece)
    write_output(args, write_file)
    return f"wrote {p.rows:,} rows × {len(p.columns)} columns ({args.format}) to {args.output}"


def _stdout(pieces, bar, json_doc: bool):
    """The pieces for stdout, ending in one newline (as the other commands' printed text), closing
    the progress bar at the end (or when the reader has gone)."""
    try:
        yield from pieces
        if json_doc:
            yield "\n"
    finally:
        if bar is not None:
            bar.close()


def _row_count(text: str) -> int:
    """``--max-rows``: a positive whole number read as ``infer --generate`` reads its count
    (``100000``, ``1e11``, ``10**11``; never evaluated), at most 10**15."""
    from .infer import generate_count

    return generate_count(text, "--max-rows")
