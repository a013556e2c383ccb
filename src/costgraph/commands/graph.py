"""``costgraph graph MODEL [--scope S] --format dot|svg|graphml|json [-o FILE]``:
the operator graph (:mod:`costgraph.export.graph`): nodes with their kind,
output shapes and per-instance formulas, repeat groups and blocks as
clusters labelled with their counts, tied weights and stored tensors
(kept for backward, KV cache) marked."""

from __future__ import annotations

from .common import cost_arguments, model_arguments


def add_parser(sub) -> None:
    from ._output import output_arguments

    p = sub.add_parser("graph", help="the operator graph as DOT, SVG (Graphviz), GraphML or node-link JSON")
    model_arguments(p)
    p.add_argument("--format", choices=("dot", "svg", "graphml", "json"), default="dot",
                   help="dot (Graphviz text, default), svg (laid out by Graphviz's dot program), graphml "
                        "(attributes as strings), json (NetworkX node-link, formulas with expression trees)")
    output_arguments(p, help="write to FILE instead of standard output")
    cost_arguments(p)   # --scope --convention --precision --causal --profile --no-dropout


def run(args) -> str:
    from ..export.graph import render
    from .common import load_any, settings

    if args.format in ("dot", "svg"):   # written by the Graphviz bindings: name the extra before any work
        from ..optional import need

        need("graphviz", "graph", f"costgraph graph --format {args.format}")
    dims, options = settings(args.set)
    model, values = load_any(args, dims, options)
    text = render(model, args.format, args.scope, convention=args.convention, precision=args.precision,
                  causal=args.causal, values=values)
    if args.output is None:
        return text.rstrip("\n")
    from ._output import write_output

    write_output(args, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    return f"wrote {args.output} ({args.format}, {len(text.encode('utf-8')):,} bytes)"
