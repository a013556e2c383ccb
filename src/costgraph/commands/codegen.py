"""``costgraph codegen MODEL --lang python|numpy|c|javascript``: the cost
formulas as source code, one function per quantity and scope (see
:mod:`costgraph.export.codegen`)."""

from __future__ import annotations

from ..engine.quantities import QUANTITIES as QUANTITY_NAMES
from .common import cost_arguments, model_arguments

LANGS = ("python", "numpy", "c", "javascript")


def add_parser(sub) -> None:
    from ._output import output_arguments

    p = sub.add_parser("codegen", help="the cost formulas as Python, NumPy, C or JavaScript functions",
                       description="One function per quantity and scope, arguments named by the model's "
                                   "dimensions (defaults from --config/--set), exact integers in Python, "
                                   "C (checked int64_t or __int128) and JavaScript (BigInt).")
    model_arguments(p, set_help="dimension values used as the arguments' defaults (h=768), "
                                "or model options (bias=false)")
    p.add_argument("--lang", choices=LANGS, required=True, help="the language of the code")
    p.add_argument("--scope", nargs="+", action="extend", default=None, metavar="SCOPE",
                   help="scopes to generate (default: model): model, layer, or a group/block/node path")
    p.add_argument("--quantity", nargs="+", action="extend", default=None, metavar="Q", choices=QUANTITY_NAMES,
                   help="only these quantities (default: all)")
    cost_arguments(p, scope=False)
    output_arguments(p, help="write the code to FILE instead of printing it")


def _command(args) -> str:
    """The command line that regenerates this output (for the file's header)."""
    import shlex

    from .common import shown_model

    parts = ["costgraph", "codegen", shown_model(args), "--lang", args.lang]
    if args.config:
        parts += ["--config", args.config]
    if args.set:
        parts += ["--set", *args.set]
    for scope in args.scope or ():
        parts += ["--scope", scope]
    if args.quantity:
        parts += ["--quantity", *args.quantity]
    for name in ("convention", "precision", "causal", "profile"):
        default = {"convention": "matmul", "precision": "bf16", "causal": "full", "profile": "korthikanti"}[name]
        if getattr(args, name) != default:
            parts += [f"--{name}", getattr(args, name)]
    if args.no_dropout:
        parts.append("--no-dropout")
    return shlex.join(parts)


def run(args) -> str:
    from ..export.codegen import generate, plan
    from .common import load_any, settings

    dims, options = settings(args.set)
    model, values = load_any(args, dims, options)
    program = plan(model, args.scope or ["model"], quantities=args.quantity, convention=args.convention,
                   precision=args.precision, causal=args.causal, values=values, command=_command(args))
    source = generate(program, args.lang)
    if args.output:
        from ._output import write_output

        write_output(args, lambda tmp: tmp.write_text(source, encoding="utf-8"))
        n = len(program.functions)
        return f"wrote {n} function{'' if n == 1 else 's'} ({args.lang}) to {args.output}"
    return source.rstrip("\n")
