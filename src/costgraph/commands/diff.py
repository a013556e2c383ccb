"""``costgraph diff A B``: two models, or one model under two configurations —
each quantity's difference B − A as a formula, its value, and the nodes of the
operator graph it comes from (:mod:`costgraph.symbolic.diff`).

A side is a model (bundled name, ``.cg`` file or ``config.json``) with an
optional configuration after ``@``: ``llama@llama-2-7b``. ``--set`` applies
to both sides.
"""

from __future__ import annotations

from .common import cost_arguments, download_argument


def add_parser(sub) -> None:
    p = sub.add_parser("diff", help="the difference of two models or configurations: formulas, numbers, and "
                                    "where in the graph it comes from")
    p.add_argument("a", metavar="A", help="MODEL or MODEL@CONFIG (llama@llama-2-7b)")
    p.add_argument("b", metavar="B", help="MODEL or MODEL@CONFIG")
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="dimension values or options for both sides")
    p.add_argument("--quantity", nargs="+", default=None, help="quantities (default: all)")
    p.add_argument("--top", type=int, default=8, help="nodes shown per quantity (default 8)")
    download_argument(p, revision=False)   # a side that is a Hub id not in the cache: fetch its config.json
    cost_arguments(p)
    p.add_argument("--format", choices=("text", "json"), default="text")


def _side(spec: str, args, dims, options):
    from types import SimpleNamespace

    from .common import load_any

    from ..errors import CostgraphValueError

    model, at, config = spec.partition("@")
    if at and not config:
        raise CostgraphValueError(f"{spec!r} names no configuration after '@'", hint="MODEL@CONFIG, e.g. llama@llama-2-7b")
    ns = SimpleNamespace(model=model, config=config or None, profile=args.profile, no_dropout=args.no_dropout,
                         download=args.download)
    return load_any(ns, dims, options)


def run(args) -> str:
    import json

    from ..numbers import units
    from ..errors import CostgraphValueError
    from ..export.printing import field_order, to_text
    from ..symbolic.diff import diff_costs
    from ..engine.totals import QUANTITIES
    from .common import conventions_line, costs_of, formula, one_name_per_word, settings

    dims, options = settings(args.set)
    if args.top < 0:
        raise CostgraphValueError("--top must be 0 or more")
    one_name_per_word("--quantity", args.quantity)
    names = args.quantity or list(QUANTITIES)
    for q in names:
        if q not in QUANTITIES:
            raise CostgraphValueError(f"unknown quantity {q!r}", hint="one of: " + ", ".join(QUANTITIES))
    ma, va = _side(args.a, args, dims, options)
    mb, vb = _side(args.b, args, dims, options)
    if (va is None) != (vb is None):
        raise CostgraphValueError("give values to both sides or neither",
                                  hint="A@CONFIG and B@CONFIG, or --set for both")
    ca, cb = costs_of(args, ma), costs_of(args, mb)
    diffs = diff_costs(ca, cb, va, vb, names)
    if args.format == "json":
        show = formula
        return json.dumps({"a": args.a, "b": args.b, "scope": args.scope, "quantities": {
            d.quantity: {"delta": show(d.delta), "a": d.a, "b": d.b,
                         "value": None if d.a is None or d.b is None else d.b - d.a,
                         "nodes": [{"path": c.path, "kind": c.kind, "delta": show(c.delta), "value": c.value}
                                   for c in d.changes]} for d in diffs}}, indent=2)
    lines = [f"B − A, A = {args.a}, B = {args.b}, scope {args.scope}"]
    for d in diffs:
        if d.delta == 0 and (d.a is None or d.a == d.b):
            lines.append(f"  {d.quantity}: equal")
            continue
        lines.append(f"  {d.quantity}: " + (to_text(field_order(d.delta, expanded=True)) if d.delta != 0
                                              else "the same formula on both sides; the values differ"))
        if d.a is not None and d.b is not None:
            lines.append(f"    {units.with_unit(d.quantity, d.a)} → {units.with_unit(d.quantity, d.b)}"
                         f"  (B − A = {units.with_unit(d.quantity, d.b - d.a)})")
        for c in d.changes[:args.top]:
            formula = to_text(c.delta) if c.delta != 0 else "same formula"
            tail = f", B − A = {c.value:,}" if c.value is not None else ""
            lines.append(f"    {c.path} ({c.kind}): {formula}{tail}")
        if len(d.changes) > args.top:
            lines.append(f"    … {len(d.changes) - args.top} more nodes (--top)")
    lines.append(conventions_line(ca))
    return "\n".join(lines)
