"""``costgraph hardware``: accelerator presets (dense peaks, HBM, links per
direction), each number with its source (:mod:`costgraph.hardware`)."""

from __future__ import annotations


def add_parser(sub) -> None:
    hw = sub.add_parser("hardware", help="accelerator presets: dense peaks, HBM, links per direction, with sources")
    hw.add_argument("name", nargs="?", help="one preset in full, a source per number (h100-sxm, mi300x, tpu-v5p, ...)")
    hw.add_argument("--format", choices=("text", "json"), default="text")


def run(args) -> str:
    import json

    from .. import hardware   # light: tomllib, no SymPy

    if args.name is None:
        if args.format == "json":
            return json.dumps({"presets": [hardware.to_json(h) for h in hardware.presets().values()]}, indent=2)
        return hardware.format_table()
    one = hardware.preset(args.name)
    return json.dumps(hardware.to_json(one), indent=2) if args.format == "json" else hardware.format_one(one)
