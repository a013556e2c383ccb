"""``costgraph solve``: the largest (or smallest) value of a dimension such that
a quantity stays within a budget — exact over the integers, and in closed
form when the quantity is quadratic or linear in it
(:mod:`costgraph.symbolic.solve`)."""

from __future__ import annotations

from .common import cost_arguments, model_arguments

TRAIN_PARTS = ("total", "weights", "gradients", "optimizer", "activations")


def add_parser(sub) -> None:
    p = sub.add_parser("solve", help="the largest (or smallest) value of a dimension that keeps a quantity "
                                     "within a budget, exact and in closed form")
    model_arguments(p, set_help="values of every dimension but the solved one, or model options")
    p.add_argument("--for", dest="symbol", required=True, metavar="SYMBOL", help="the dimension solved for (s, b, ...)")
    p.add_argument("--quantity", default="activation_bytes",
                   help="a quantity of derive (activation_bytes, kv_cache_bytes, params, flops_forward, ...) or, "
                        "with --train, a part of training memory per device: " + ", ".join(TRAIN_PARTS))
    p.add_argument("--budget", required=True,
                   help="bytes (80GB = 10^9 B, 80GiB = 2^30 B) or a count (1e23 FLOPs, 7e9 parameters)")
    p.add_argument("--smallest", action="store_true",
                   help="the smallest value instead (for a quantity that falls as the dimension grows, e.g. "
                        "memory per device against N_d under ZeRO-3)")
    cost_arguments(p)
    t = p.add_argument_group("training memory (with --train; per device, every pipeline stage must fit)")
    t.add_argument("--train", action="store_true", help="solve training memory per device")
    t.add_argument("--gpus", type=int, help="devices (default: the data-parallel degree stays the symbol N_d)")
    t.add_argument("--tp", type=int, default=1)
    t.add_argument("--pp", type=int, default=1)
    t.add_argument("--cp", type=int, default=1)
    t.add_argument("--sp", action="store_true")
    t.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0)
    t.add_argument("--recompute", choices=("none", "selective", "full"), default="none")
    t.add_argument("--attention", choices=("eager", "flash"), default="eager")
    t.add_argument("--policy", default="mixed", help="precision policy (default mixed)")
    t.add_argument("--optimizer", default="adam")
    p.add_argument("--format", choices=("text", "json"), default="text")


def _budget(text: str, is_bytes: bool) -> int:
    from ..cli import _parse_count
    from ..training.fit import parse_size

    return parse_size(text) if is_bytes else _parse_count(text)


def run(args) -> str:
    import json

    from .. import units
    from ..errors import CostgraphValueError
    from ..printing import to_text
    from ..symbolic.solve import BUDGET, solve_budget
    from .common import costs_of, formula, load_any, settings, symbol_named

    dims, options = settings(args.set)
    if args.symbol in dims:
        raise CostgraphValueError(f"--set gives {args.symbol}, the dimension solved for",
                                  hint=f"leave {args.symbol} out of --set")
    model, values = load_any(args, dims, options)
    if values is None:
        values = {}
    if args.train:
        if args.quantity not in TRAIN_PARTS:
            raise CostgraphValueError(f"training memory has no part {args.quantity!r}",
                                      hint="one of: " + ", ".join(TRAIN_PARTS))
        mem = model.train(t=args.tp, p=args.pp, c=args.cp, sp=args.sp, zero=args.zero, recompute=args.recompute,
                          attention=args.attention, policy=args.policy, optimizer=args.optimizer, gpus=args.gpus,
                          precision=args.precision)
        exprs = [(st.name, st.memory[args.quantity]) for st in mem.stages]
        is_bytes, unit_q = True, "activation_bytes"
    else:
        from ..totals import QUANTITIES

        if args.quantity not in QUANTITIES:
            raise CostgraphValueError(f"unknown quantity {args.quantity!r}", hint="one of: " + ", ".join(QUANTITIES))
        costs = costs_of(args, model)
        exprs = [(args.scope, costs[args.quantity])]
        is_bytes, unit_q = args.quantity.endswith("bytes") or args.quantity.endswith("per_token"), args.quantity
    budget = _budget(args.budget, is_bytes)
    x = symbol_named(args.symbol, *(e for _, e in exprs))
    direction = "smallest" if args.smallest else "largest"
    given = {k: v for k, v in values.items() if k != x}
    sols = [(name, solve_budget(e, x, given, budget, direction=direction)) for name, e in exprs]
    # every stage must fit: the binding stage gives the answer (None: that stage never fits)
    if direction == "largest":
        name, sol = min(sols, key=lambda it: (it[1].value is not None, it[1].value or 0))
    else:
        name, sol = max(sols, key=lambda it: (it[1].value is None, it[1].value or 0))
    what = f"training memory '{args.quantity}' per device" if args.train else f"{args.quantity} at scope {args.scope}"
    if args.format == "json":
        doc = {"model": model.name, "quantity": args.quantity, "train": args.train, "symbol": str(x),
               "direction": direction, "budget": budget, "value": sol.value, "unbounded": sol.unbounded,
               "monotone": sol.monotone, "binding_stage": name if args.train else None,
               "at_value": sol.at, "beyond": sol.beyond,
               "closed_form": None if sol.closed_form is None else
               {**formula(sol.closed_form), "budget_symbol": str(BUDGET)},
               "values": {str(k): int(v) for k, v in given.items()}}
        return json.dumps(doc, indent=2)
    lines = [f"{model.name}: the {direction} {x} with {what} ≤ {units.with_unit(unit_q, budget)}"]
    if sol.value is None:
        if direction == "largest":
            lines.append(f"  none: even {x} = 1 is over the budget ({units.with_unit(unit_q, sol.beyond)})")
        else:
            lines.append(f"  none up to {x} = 2^62, where it is still {units.with_unit(unit_q, sol.beyond)}: "
                         f"the part that does not shrink with {x} is over the budget")
    else:
        lines.append(f"  {x} = {sol.value:,}" + ("  (the search bound 2^62; larger values fit too)" if sol.unbounded else ""))
        lines.append(f"  at {x} = {sol.value:,}: {units.with_unit(unit_q, sol.at)}")
        if sol.beyond is not None:
            nxt = sol.value + 1 if direction == "largest" else sol.value - 1
            lines.append(f"  at {x} = {nxt:,}: {units.with_unit(unit_q, sol.beyond)}  (over the budget)")
    if args.train and len(sols) > 1:
        lines.append(f"  binding stage: {name}")
    lines.append(f"  exact over the integers; monotone in {x}: {sol.monotone}"
                 + ((" (a polynomial with non-negative coefficients in " + (str(x) if direction == "largest"
                     else f"1/{x}") + ")") if sol.monotone == "proven" else " (not proven: checked at the answer only)"))
    if sol.closed_form is not None:
        lines.append(f"closed form ({x} = ⌊·⌋ of this, M the budget):")
        lines.append(f"  {x}_max = {to_text(sol.closed_form)}")
    if not args.train:
        from .common import conventions_line

        lines.append(conventions_line(costs))
    return "\n".join(lines)
