"""``costgraph sensitivity``: ∂Q/∂x, the unit step Q(x+1) − Q(x) and the
elasticity (x/Q)·∂Q/∂x of each quantity (:mod:`costgraph.symbolic.sensitivity`)."""

from __future__ import annotations

from .common import cost_arguments, model_arguments


def add_parser(sub) -> None:
    p = sub.add_parser("sensitivity", help="derivatives and elasticities of the costs in one dimension")
    model_arguments(p, set_help="dimension values (numbers at this point) or model options")
    p.add_argument("--wrt", required=True, metavar="SYMBOL", help="the dimension (s, h, b, ...)")
    p.add_argument("--quantity", nargs="+", default=None,
                   help="quantities (default: every one that depends on the dimension)")
    cost_arguments(p)
    p.add_argument("--format", choices=("text", "json"), default="text")


def _number(v) -> str:
    """An exact rational: ``65,536`` or ``12,345/2``."""
    return f"{int(v):,}" if v.is_Integer else f"{int(v.p):,}/{int(v.q):,}"


def run(args) -> str:
    import json

    import sympy

    from ..errors import CostgraphValueError
    from ..export.printing import to_text
    from ..symbolic.sensitivity import sensitivity
    from ..engine.totals import QUANTITIES
    from .common import conventions_line, costs_of, formula, load_any, one_name_per_word, settings, symbol_named

    dims, options = settings(args.set)
    model, values = load_any(args, dims, options)
    costs = costs_of(args, model)
    one_name_per_word("--quantity", args.quantity)
    names = args.quantity or list(QUANTITIES)
    for q in names:
        if q not in QUANTITIES:
            raise CostgraphValueError(f"unknown quantity {q!r}", hint="one of: " + ", ".join(QUANTITIES))
    x = symbol_named(args.wrt, *(costs[q] for q in names))
    rows = []
    for q in names:
        if x not in costs[q].free_symbols:
            if args.quantity:
                raise CostgraphValueError(f"{q} does not depend on {x}")
            continue
        sens = sensitivity(costs[q], x)
        row = {"quantity": q, "derivative": sens.derivative, "step": sens.step, "elasticity": sens.elasticity}
        if values:
            # a Min/Max switching exactly here (s = w) has no derivative: SymPy's Heaviside(0) = 1/2
            # would average the two sides; give both one-sided whole steps instead
            kink = any(c.xreplace(values) == sympy.false for pw in sens.derivative.atoms(sympy.Piecewise)
                       for c in [sympy.Or(*[cond for _, cond in pw.args])])
            row["at"] = {k: None if kink and k != "step" else getattr(sens, k).xreplace(values)
                         for k in ("derivative", "step", "elasticity")}
            row["at"]["step_back"] = sympy.expand(costs[q] - costs[q].xreplace({x: x - 1})).xreplace(values)
            row["differentiable"] = not kink
        rows.append(row)
    if args.format == "json":
        show = formula
        doc = {"model": model.name, "scope": args.scope, "wrt": str(x), "quantities": {
            r["quantity"]: {**{k: show(r[k]) for k in ("derivative", "step", "elasticity")},
                            **({"at": {k: None if v is None else str(v) for k, v in r["at"].items()},
                                "differentiable": r["differentiable"],
                                "elasticity_at": None if r["at"]["elasticity"] is None
                                else float(r["at"]["elasticity"])} if "at" in r else {})}
            for r in rows}}
        return json.dumps(doc, indent=2)
    lines = [f"{model.name}: sensitivity in {x} at scope {args.scope}"]
    for r in rows:
        lines.append(f"  {r['quantity']}")
        lines.append(f"    ∂/∂{x}        {to_text(r['derivative'])}")
        lines.append(f"    step +1      {to_text(r['step'])}")
        lines.append(f"    elasticity   {to_text(r['elasticity'])}")
        if "at" in r:
            at = r["at"]
            if r["differentiable"]:
                lines.append(f"    at the values: ∂/∂{x} = {_number(at['derivative'])}; step = {_number(at['step'])}; "
                             f"elasticity = {float(at['elasticity']):.4f}")
            else:
                lines.append(f"    at the values: no derivative (a min/max switches or a rounded count jumps exactly here); one-sided whole "
                             f"steps: +1 → {_number(at['step'])}, −1 → {_number(at['step_back'])}")
    lines.append(conventions_line(costs))
    return "\n".join(lines)
