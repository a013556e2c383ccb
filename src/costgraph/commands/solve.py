"""``costgraph solve``: the largest (or smallest) value of a dimension such that
a quantity stays within a budget — exact over the integers, and in closed
form when the quantity is quadratic or linear in it
(:mod:`costgraph.symbolic.solve`)."""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from ..errors import CostgraphValueError
from ..option_fields import count_type
from .common import cost_arguments, model_arguments

TRAIN_PARTS = ("total", "weights", "gradients", "optimizer", "activations")


def add_parser(sub) -> None:
    p = sub.add_parser("solve", help="the largest (or smallest) value of a dimension that keeps a quantity "
                                     "within a budget, exact and in closed form")
    model_arguments(p, set_help="values of every dimension but the solved one, or model options")
    p.add_argument("--for", dest="symbol", required=True, metavar="SYMBOL", help="the dimension solved for (s, b, ...)")
    p.add_argument("--quantity", default=None,
                   help="a quantity of derive (default activation_bytes; kv_cache_bytes, params, flops_forward, ...) "
                        "or, with --train, a part of training memory per device (default total): "
                        + ", ".join(TRAIN_PARTS))
    p.add_argument("--budget", required=True,
                   help="bytes (80GB = 10^9 B, 80GiB = 2^30 B) or a count (1e23 FLOPs, 7e9 parameters)")
    p.add_argument("--smallest", action="store_true",
                   help="the smallest value instead (for a quantity that falls as the dimension grows, e.g. "
                        "memory per device against N_d under ZeRO-3)")
    cost_arguments(p)
    t = p.add_argument_group("training memory (with --train; per device, every pipeline stage must fit)")
    t.add_argument("--train", action="store_true", help="solve training memory per device")
    # the layout's counts, read as its API reads them (Layout(t="2"), 1e3: option_fields.count_type)
    t.add_argument("--gpus", type=count_type("--gpus"),
                   help="devices (default: the data-parallel degree stays the symbol N_d)")
    for flag in ("--tp", "--pp", "--cp"):
        t.add_argument(flag, type=count_type(flag), default=1)
    t.add_argument("--sp", action="store_true")
    add_option(t, choices.ZERO_STAGE, "--zero")
    add_option(t, choices.RECOMPUTE, "--recompute")
    add_option(t, choices.ATTENTION, "--attention")
    t.add_argument("--policy", default=choices.DEFAULT_POLICY, help="precision policy (default mixed)")
    t.add_argument("--optimizer", default=choices.DEFAULT_OPTIMIZER)
    p.add_argument("--format", choices=("text", "json"), default="text")


def _budget(text: str, is_bytes: bool) -> int:
    from ..arguments import parse_count
    from ..training.fit import parse_size

    return parse_size(text) if is_bytes else parse_count(text, "--budget")


def _validity(model, values: dict, x, layout):
    """``(valid(n), refusals)``: whether ``x = n`` is a size the model can have (every shape whole:
    ``h/a``, ``a/kv``; :meth:`Model.values`) and, with a layout, one it can be split into
    (:func:`costgraph.training.validity.check_layout`); the messages of the refusals seen."""
    from ..errors import CostgraphValueError

    ints = {str(k): int(v) for k, v in values.items()}
    is_dim = str(x) in model.graph.dims
    refusals: list[str] = []

    def valid(n: int) -> bool:
        try:
            vals = model.values(None, {**ints, str(x): n}) if is_dim else dict(values)
            if layout is not None:
                from ..training.validity import check_layout

                check_layout(model.graph, layout, {**vals, x: n} if not is_dim else vals)
            return True
        except CostgraphValueError as e:
            refusals.append(str(e).splitlines()[0].removeprefix("error: "))
            return False

    return valid, refusals


def _candidates(model, values: dict, x) -> list[int] | None:
    """Every value the dimension ``x`` can take when a size divides by it (``a/kv`` whole: kv divides
    a), ascending (:func:`costgraph.symbolic.solve.divisor_candidates` over the model's sizes, the
    other dimensions at ``values`` or their defaults); None when no size bounds it so."""
    from ..symbolic.solve import divisor_candidates

    dims = model.graph.dims
    if str(x) not in dims:
        return None
    ints = {d.name: d.default for d in dims.values() if d.default is not None and d.derived is None}
    ints.update({str(k): int(v) for k, v in values.items()})
    given = {dims[k].symbol: v for k, v in ints.items() if k in dims and k != str(x)}
    return divisor_candidates([e for e, *_ in model._sizes()], dims[str(x)].symbol, given)


def _warnings(model, values: dict, x, sol) -> list[str]:
    """A sequence longer than a learned position table: the model cannot read it as built."""
    if str(x) != "s" or sol.value is None:
        return []
    smax = next((int(v) for k, v in values.items() if str(k) == "s_max"), None)
    if smax is not None and sol.value > smax:
        return [f"s = {sol.value:,} is longer than s_max = {smax:,}: the learned position table has s_max rows, "
                "so the model cannot read that many tokens as built (--set s_max=... to grow it)"]
    return []


def run(args) -> str:
    import json

    from ..symbolic.solve import solve_budget
    from .common import load_any, settings, symbol_named

    dims, options = settings(args.set)
    if args.symbol in dims:
        raise CostgraphValueError(f"--set gives {args.symbol}, the dimension solved for",
                                  hint=f"leave {args.symbol} out of --set")
    if not args.train:
        _refuse_training_flags(args)
    model, values = load_any(args, dims, options)
    if values is None:
        values = {}
    if args.train:
        _refuse_layout(args, model, values)
    exprs, is_bytes, unit_q, layout, costs = _expressions(args, model)
    budget = _budget(args.budget, is_bytes)
    x = symbol_named(args.symbol, *(e for _, e in exprs))
    direction = "smallest" if args.smallest else "largest"
    given = {k: v for k, v in values.items() if k != x}
    valid, refusal = _validity(model, values, x, layout)
    candidates = _candidates(model, values, x)
    sols = [(name, solve_budget(e, x, given, budget, direction=direction, valid=valid, candidates=candidates))
            for name, e in exprs]
    # every stage must fit: the binding stage gives the answer (None: that stage never fits)
    if direction == "largest":
        name, sol = min(sols, key=lambda it: (it[1].value is not None, it[1].value or 0))
    else:
        name, sol = max(sols, key=lambda it: (it[1].value is None, it[1].value or 0))
    if sol.value is None and sol.boundary is not None and refusal:
        raise CostgraphValueError(f"no valid {x} near {sol.boundary:,}, where the budget binds: {refusal[-1]}",
                                  hint="sizes must divide evenly (heads, widths, the layout's splits)")
    if args.format == "json":
        return json.dumps(_document(args, model, values, x, direction, budget, name, sol, given), indent=2)
    lines = _text(args, model, x, direction, budget, unit_q, sol)
    if args.train and len(sols) > 1:
        lines.append(f"  binding stage: {name}")
    lines += _closing(args, model, values, x, direction, sol, costs)
    return "\n".join(lines)


def _refuse_layout(args, model, values: dict) -> None:
    """Refuse, before deriving the memory, a layout the model cannot be split into whatever the
    solved dimension is: :func:`costgraph.training.validity.check_layout` at the given sizes
    without it (a rule over a size that involves it is left to the search, which checks each
    value). The message is the rule's, as the search would end with it."""
    from ..parallel.layout import Layout
    from ..training.validity import check_layout

    layout = Layout(t=args.tp, p=args.pp, c=args.cp, sp=args.sp, zero=args.zero, recompute=args.recompute,
                    attention=args.attention, policy=args.policy, optimizer=args.optimizer, gpus=args.gpus,
                    precision=args.precision).filled()
    given = {k: v for k, v in values.items() if str(k) != args.symbol}
    try:
        check_layout(model.graph, layout, given)
    except CostgraphValueError as e:
        raise CostgraphValueError(f"no valid {args.symbol}: {str(e).splitlines()[0].removeprefix('error: ')}",
                                  hint="sizes must divide evenly (heads, widths, the layout's splits)") from None


def _refuse_training_flags(args) -> None:
    """Training options given without ``--train`` are an error (each at its default otherwise)."""
    given = [f for f, on in (("--gpus", args.gpus is not None), ("--tp", args.tp != 1), ("--pp", args.pp != 1),
                             ("--cp", args.cp != 1), ("--sp", args.sp), ("--zero", args.zero != choices.ZERO_STAGE.default),
                             ("--recompute", args.recompute != choices.RECOMPUTE.default),
                             ("--attention", args.attention != choices.ATTENTION.default),
                             ("--policy", args.policy != choices.DEFAULT_POLICY),
                             ("--optimizer", args.optimizer != choices.DEFAULT_OPTIMIZER)) if on]
    if given:
        raise CostgraphValueError(f"{', '.join(given)} {'is a training option' if len(given) == 1 else 'are training options'}: "
                                  "add --train", hint="costgraph solve ... --train --quantity total ...")


def _expressions(args, model):
    """The formulas solved: ``(name, expression)`` per pipeline stage with ``--train``, else the
    quantity at the scope; with whether they are bytes, the unit's quantity, the layout and the costs."""
    if args.train:
        if args.quantity is None:
            args.quantity = "total"
        if args.quantity not in TRAIN_PARTS:
            raise CostgraphValueError(f"training memory has no part {args.quantity!r}",
                                      hint="one of: " + ", ".join(TRAIN_PARTS))
        mem = model.train(t=args.tp, p=args.pp, c=args.cp, sp=args.sp, zero=args.zero, recompute=args.recompute,
                          attention=args.attention, policy=args.policy, optimizer=args.optimizer, gpus=args.gpus,
                          precision=args.precision)
        return [(st.name, st.memory[args.quantity]) for st in mem.stages], True, "activation_bytes", mem.layout, None
    from ..engine.totals import QUANTITIES
    from .common import costs_of

    if args.quantity is None:
        args.quantity = "activation_bytes"
    if args.quantity not in QUANTITIES:
        raise CostgraphValueError(f"unknown quantity {args.quantity!r}", hint="one of: " + ", ".join(QUANTITIES))
    costs = costs_of(args, model)
    is_bytes = args.quantity.endswith("bytes") or args.quantity.endswith("per_token")
    return [(args.scope, costs[args.quantity])], is_bytes, args.quantity, None, costs


def _document(args, model, values, x, direction, budget, name, sol, given) -> dict:
    """The JSON document (schema ``solve``)."""
    from ..symbolic.solve import BUDGET
    from .common import formula

    return {"model": model.name, "quantity": args.quantity, "train": args.train, "symbol": str(x),
            "direction": direction, "budget": budget, "value": sol.value, "unbounded": sol.unbounded,
            "monotone": sol.monotone, "binding_stage": name if args.train else None,
            "at_value": sol.at, "beyond": sol.beyond, "boundary": sol.boundary,
            "warnings": _warnings(model, values, x, sol),
            "closed_form": None if sol.closed_form is None else
            {**formula(sol.closed_form), "budget_symbol": str(BUDGET)},
            "values": {str(k): int(v) for k, v in given.items()}}


def _text(args, model, x, direction, budget, unit_q, sol) -> list[str]:
    """The answer's lines: the value, the quantity at it and just past it."""
    from ..numbers import units

    what = f"training memory '{args.quantity}' per device" if args.train else f"{args.quantity} at scope {args.scope}"
    lines = [f"{model.name}: the {direction} {x} with {what} ≤ {units.with_unit(unit_q, budget)}"]
    if sol.value is None:
        if direction == "largest":
            lines.append(f"  none: even {x} = 1 is over the budget ({units.with_unit(unit_q, sol.beyond)})")
        else:
            lines.append(f"  none up to {x} = 2^62, where it is still {units.with_unit(unit_q, sol.beyond)}: "
                         f"the part that does not shrink with {x} is over the budget")
        return lines
    lines.append(f"  {x} = {sol.value:,}" + ("  (the search bound 2^62; larger values fit too)" if sol.unbounded else "")
                 + (f"  (the largest valid size: the budget binds at {sol.boundary:,}, not a valid {x})"
                    if sol.boundary is not None and direction == "largest" else
                    f"  (the smallest valid size: the budget binds at {sol.boundary:,}, not a valid {x})"
                    if sol.boundary is not None else ""))
    lines.append(f"  at {x} = {sol.value:,}: {units.with_unit(unit_q, sol.at)}")
    if sol.beyond is not None:
        edge = sol.boundary if sol.boundary is not None else sol.value
        nxt = edge + 1 if direction == "largest" else edge - 1
        lines.append(f"  at {x} = {nxt:,}: {units.with_unit(unit_q, sol.beyond)}  (over the budget)")
    return lines


def _closing(args, model, values, x, direction, sol, costs) -> list[str]:
    """Monotonicity, the closed form, warnings and (derive quantities) the conventions line."""
    from ..export.printing import to_text

    lines = [f"  exact over the integers; monotone in {x}: {sol.monotone}"
             + ((" (a polynomial with non-negative coefficients in " + (str(x) if direction == "largest"
                 else f"1/{x}") + ")") if sol.monotone == "proven" else " (not proven: checked at the answer only)")]
    if sol.closed_form is not None:
        lines.append(f"closed form (the largest real {x} within the budget M; its floor is the budget's boundary):")
        lines.append(f"  {x} ≤ {to_text(sol.closed_form)}")
    lines += [f"warning: {w}" for w in _warnings(model, values, x, sol)]
    if not args.train:
        from .common import conventions_line

        lines.append(conventions_line(costs))
    return lines
