"""``costgraph leading``: the leading terms of each quantity when some
dimensions dominate (``--large h`` for h ≫ the rest; ``--large s h`` for
s ≫ h ≫ the rest) and the relative size of what is dropped
(:mod:`costgraph.symbolic.leading`)."""

from __future__ import annotations

from .common import cost_arguments, model_arguments


def add_parser(sub) -> None:
    p = sub.add_parser("leading", help="leading terms of the costs when some dimensions dominate (h ≫ s)")
    model_arguments(p, set_help="dimension values substituted first, or model options")
    p.add_argument("--large", nargs="+", required=True, metavar="SYMBOL",
                   help="dominant dimensions, most dominant first (h, or s h)")
    p.add_argument("--quantity", nargs="+", default=None, help="quantities (default: all)")
    cost_arguments(p)
    p.add_argument("--format", choices=("text", "json"), default="text")


def run(args) -> str:
    import json

    import sympy

    from ..errors import CostgraphValueError
    from ..export.printing import field_order, to_text
    from ..symbolic.leading import leading
    from ..engine.totals import QUANTITIES
    from .common import conventions_line, costs_of, formula, load_any, one_name_per_word, settings, symbol_named

    one_name_per_word("--large", args.large, " (the most dominant first)")
    one_name_per_word("--quantity", args.quantity)
    dims, options = settings(args.set)
    model, _ = load_any(args, {}, options)
    costs = costs_of(args, model)
    names = args.quantity or list(QUANTITIES)
    for q in names:
        if q not in QUANTITIES:
            raise CostgraphValueError(f"unknown quantity {q!r}", hint="one of: " + ", ".join(QUANTITIES))
    given = {symbol_named(k, *(costs[q] for q in names)): v for k, v in dims.items()}
    exprs = {q: costs[q].xreplace({k: sympy.Integer(v) for k, v in given.items()}) for q in names}
    order = [symbol_named(n, *exprs.values()) for n in args.large]
    out = {}
    for q in names:
        if exprs[q] == 0:
            continue
        out[q] = leading(exprs[q], order)
    if args.format == "json":
        return json.dumps({"model": model.name, "scope": args.scope, "large": args.large, "quantities": {
            q: {"lead": formula(r.lead), "rest": formula(r.rest), "ratio": formula(r.ratio)}
            for q, r in out.items()}}, indent=2)
    lines = [f"{model.name}: leading terms at scope {args.scope} when " + " ≫ ".join(args.large) + " ≫ the rest"]
    width = max(len(q) for q in out) + 2 if out else 0
    for q, r in out.items():
        lines.append(f"  {q:<{width}}{to_text(field_order(r.lead, expanded=True))}")
        if r.rest != 0:
            lines.append(f"  {'':<{width}}dropped / kept = {to_text(r.ratio)}")
    lines.append(conventions_line(costs))
    return "\n".join(lines)

