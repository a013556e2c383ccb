"""``costgraph web MODEL [--config C] -o calc.html``: one self-contained offline
page that recomputes the model's costs, training memory per device and compute
time exactly (``BigInt``) as the user types (:mod:`costgraph.export.web`)."""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from ..export.web_training import OPTIMIZERS, POLICIES
from .common import model_arguments


def add_parser(sub) -> None:
    from ._output import output_arguments

    p = sub.add_parser("web", help="an offline calculator page (one HTML file) for the model",
                       description="Writes one self-contained HTML file (no network, no server) with inputs for "
                                   "the model's dimensions, the layout (TP, PP, DP, ZeRO, recompute, precision, "
                                   "optimizer), the hardware and serving (prompt, batch, KV and weight dtypes, TP), the closed forms, and exact numbers (BigInt) updated as you type. "
                                   "--config/--set and the layout options give the inputs' first values; "
                                   "calc.html#h=4096&TP=2 sets them from the address.")
    model_arguments(p, set_help="dimension values used as the inputs' first values (h=768), "
                                "or model options (bias=false)")
    p.add_argument("--tp", type=int, default=1, help="first TP degree (default 1)")
    p.add_argument("--pp", type=int, default=1, help="first PP degree (default 1)")
    p.add_argument("--dp", type=int, default=1, help="first DP degree (default 1)")
    add_option(p, choices.ZERO_STAGE, "--zero", help="first ZeRO stage")
    p.add_argument("--recompute", choices=choices.RECOMPUTE_SEARCHED, default="none",
                   help="first recompute policy (default none)")
    p.add_argument("--precision", choices=POLICIES, default=POLICIES[0],
                   help="first precision policy (default %(default)s); FP8 ones where the preset has an FP8 peak")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=OPTIMIZERS[0],
                   help="first optimizer (default %(default)s)")
    p.add_argument("--hardware", default="h100-sxm", help="the preset selected first (default h100-sxm); the step time is computed on "
                        "every preset of the menu")
    p.add_argument("--mfu", default="0.45", help="first model FLOPs utilization (default 0.45)")
    from ..train_options import RESERVE_HELP

    p.add_argument("--reserve", default=None, help=RESERVE_HELP + ", as costgraph train --reserve")
    p.add_argument("--no-dropout", action="store_true", help="train without dropout: no dropout masks")
    output_arguments(p, help="the page to write (required)", required=True)


def _command(args) -> str:
    import shlex

    from .common import shown_model

    parts = ["costgraph", "web", shown_model(args)]
    if args.config:
        parts += ["--config", args.config]
    if args.set:
        parts += ["--set", *args.set]
    for flag, value, default in (("--tp", args.tp, 1), ("--pp", args.pp, 1), ("--dp", args.dp, 1),
                                 ("--zero", args.zero, choices.ZERO_STAGE.default),
                                 ("--recompute", args.recompute, "none"), ("--precision", args.precision, POLICIES[0]),
                                 ("--optimizer", args.optimizer, OPTIMIZERS[0]), ("--hardware", args.hardware, "h100-sxm"),
                                 ("--mfu", args.mfu, "0.45"), ("--reserve", args.reserve, None)):
        if value != default:
            parts += [flag, str(value)]
    if args.no_dropout:
        parts.append("--no-dropout")
    return shlex.join(parts + ["-o", "calc.html"])


def run(args) -> str:
    from ..export.web import page
    from ._output import check_output, write_output
    from .common import load_any, settings

    if args.output is not None:   # a page takes seconds: an -o it cannot write is refused first
        check_output(args)
    dims, options = settings(args.set)
    model, values = load_any(args, dims, options)
    text = page(model, values=values, hardware=args.hardware, mfu=args.mfu, command=_command(args), reserve=args.reserve,
                layout={"TP": args.tp, "PP": args.pp, "DP": args.dp, "zero": args.zero,
                        "recompute": args.recompute, "precision": args.precision, "optimizer": args.optimizer})
    if args.output is None:   # -o - (output_file reads "-" as None): the page on standard output
        return text.rstrip("\n")
    write_output(args, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return f"wrote the calculator page of {model.name} ({len(text.encode()):,} bytes) to {args.output}"
