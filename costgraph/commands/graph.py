"""``costgraph graph MODEL [--scope S] --format dot|svg|graphml|json [-o FILE]``:
the operator graph (:mod:`costgraph.export.graph`): nodes with their kind,
output shapes and per-instance formulas, repeat groups and blocks as
clusters labelled with their counts, tied weights and stored tensors
(kept for backward, KV cache) marked."""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from .common import model_arguments


def add_parser(sub) -> None:
    p = sub.add_parser("graph", help="the operator graph as DOT, SVG (Graphviz), GraphML or node-link JSON")
    model_arguments(p)
    p.add_argument("--format", choices=("dot", "svg", "graphml", "json"), default="dot",
                   help="dot (Graphviz text, default), svg (laid out by Graphviz's dot program), graphml "
                        "(attributes as strings), json (NetworkX node-link, formulas with expression trees)")
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--scope", default="model", help="model (default), layer, or the path of a group, block or node")
    add_option(p, choices.CONVENTION, "--convention", help="FLOP convention")
    p.add_argument("--precision", default=choices.PRECISION.default, help="bytes per element (bf16, fp16, fp32)")
    add_option(p, choices.CAUSAL, "--causal",
               help="attention FLOPs: full square, half (area) or exact (pairs)")
    add_option(p, choices.PROFILE, "--profile",
               help="what operators keep for backward")
    p.add_argument("--no-dropout", action="store_true", help="without dropout and its masks")


def run(args) -> str:
    from ..errors import CostgraphValueError
    from ..export.graph import render
    from .common import load_any, settings

    dims, options = settings(args.set)
    model, values = load_any(args, dims, options)
    text = render(model, args.format, args.scope, convention=args.convention, precision=args.precision,
                  causal=args.causal, values=values)
    if args.output is None:
        return text.rstrip("\n")
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise CostgraphValueError(f"cannot write {args.output}: {e.strerror}") from None
    return f"wrote {args.output} ({args.format}, {len(text.encode('utf-8')):,} bytes)"
