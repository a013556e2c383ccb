"""``costgraph optimal``: compute-optimal model size and training tokens for a
FLOP budget, from the model's own formulas, scaling one dimension
(:mod:`costgraph.symbolic.optimal`): ``--rule tokens-per-param`` (D = 20 N,
Hoffmann et al. 2022) or ``--rule chinchilla`` (their fitted loss)."""

from __future__ import annotations

from .common import cost_arguments, model_arguments


def add_parser(sub) -> None:
    p = sub.add_parser("optimal", help="compute-optimal size and tokens for a FLOP budget (Chinchilla), scaling "
                                       "one dimension of the model")
    model_arguments(p, set_help="values of the other dimensions (b and s: the training sequence) or options")
    p.add_argument("--flops", required=True, help="training FLOP budget C (e.g. 5.76e23)")
    p.add_argument("--scale", default="l", metavar="SYMBOL", help="the dimension scaled (default l, depth)")
    p.add_argument("--rule", choices=("tokens-per-param", "chinchilla"), default="tokens-per-param",
                   help="D = r·N (default, r = 20) or the minimum of Chinchilla's fitted loss")
    p.add_argument("--ratio", type=int, help="tokens per parameter for --rule tokens-per-param (default 20)")
    cost_arguments(p, scope=False)
    p.add_argument("--format", choices=("text", "json"), default="text")


def run(args) -> str:
    import json

    from ..numbers import units
    from ..arguments import parse_count
    from ..errors import CostgraphValueError
    from ..symbolic.optimal import chinchilla_closed_form, constants, optimal
    from .common import conventions_line, costs_of, load_any, settings, symbol_named

    dims, options = settings(args.set)
    if args.scale in dims:
        raise CostgraphValueError(f"--set gives {args.scale}, the scaled dimension", hint=f"leave {args.scale} out")
    if args.ratio is not None and args.rule != "tokens-per-param":
        raise CostgraphValueError("--ratio belongs to --rule tokens-per-param")
    budget = parse_count(args.flops, "--flops")
    model, values = load_any(args, dims, options)
    costs = costs_of(args, model, "model")
    x = symbol_named(args.scale, costs["params"])
    from .solve import _candidates, _validity

    valid, _ = _validity(model, values or {}, x, None)
    opt = optimal(costs, values or {}, x, budget, rule=args.rule, ratio=args.ratio, valid=valid,
                  candidates=_candidates(model, values or {}, x))
    n6, d6 = chinchilla_closed_form(float(budget))
    c = constants()
    if args.format == "json":
        return json.dumps({"model": model.name, "rule": opt.rule, "budget_flops": budget, "scaled": str(x),
                           "value": opt.value, "params": opt.params, "tokens": opt.tokens, "flops": opt.flops,
                           "flops_per_token": str(opt.flops_per_token), "loss": opt.loss,
                           "ratio": (args.ratio or c["ratio"]) if opt.rule == "tokens-per-param" else None,
                           "chinchilla_6ND": {"params": n6, "tokens": d6, "source": c["chinchilla_source"]}},
                          indent=2)
    rule = (f"D = {args.ratio or c['ratio']}·N ({c['ratio_source']})" if opt.rule == "tokens-per-param"
            else f"minimum of L = E + A/N^α + B/D^β ({c['chinchilla_source']})")
    lines = [f"{model.name}: compute-optimal {x} for C = {units.flops(budget)} ({budget:,} FLOP), rule: {rule}",
             f"  {x} = {opt.value:,} (the other dimensions as given)",
             f"  N = {units.with_unit('params', opt.params)} parameters",
             f"  D = {opt.tokens:,} tokens ({opt.tokens / opt.params:.1f} per parameter)",
             f"  training FLOPs per token F = {float(opt.flops_per_token):,.0f} (= {float(opt.flops_per_token) / opt.params:.3f}·N; "
             "forward + backward of the model's formulas)",
             f"  spent D·F = {units.flops(opt.flops)} of the budget"]
    if opt.loss is not None:
        lines.append(f"  fitted loss L = {opt.loss:.4f}")
    lines.append(f"  for comparison, Chinchilla's closed form with C = 6ND (Hoffmann et al. 2022, Eq. 4, Approach 3 "
                 f"constants): N = {units.count(round(n6))}, D = {units.count(round(d6))}")
    lines.append(conventions_line(costs))
    return "\n".join(lines)
