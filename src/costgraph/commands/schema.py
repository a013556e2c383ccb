"""``costgraph schema [NAME] [--bundle]``: the JSON Schema (draft 2020-12) of
one of costgraph's JSON documents (:mod:`costgraph.export.schema`); without
NAME, the list of schemas."""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("schema", help="the JSON Schema of a JSON document costgraph writes (derive, train, infer, "
                                      "plan, fit, hardware, graph, sweep, expression, ...)")
    p.add_argument("name", nargs="?", help="the schema: derive, train, infer, plan, fit, hardware, graph, sweep or "
                                           "expression (without: the list)")
    p.add_argument("--bundle", action="store_true",
                   help="embed the schemas it references (expression.json) in its $defs: one self-contained file")


def run(args) -> str:
    import json

    from ..export import schema

    if args.name is None:
        lines = ["JSON Schemas (draft 2020-12) of costgraph's JSON documents; costgraph schema NAME prints one:"]
        for name in schema.names():
            doc = schema.schema(name)
            lines.append(f"  {name:<11} {doc['title']}  ({doc['$id']})")
        return "\n".join(lines)
    doc = schema.bundled(args.name) if args.bundle else schema.schema(args.name)
    return json.dumps(doc, indent=2, ensure_ascii=False)
