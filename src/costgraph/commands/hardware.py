"""``costgraph hardware``: accelerator presets (dense peaks, HBM, links per
direction), each number with its source (:mod:`costgraph.hardware`)."""

from __future__ import annotations


def add_parser(sub) -> None:
    hw = sub.add_parser("hardware", help="accelerator presets: dense peaks, HBM, links per direction, with sources")
    hw.add_argument("name", nargs="?", help="one preset in full, a source per number (h100-sxm, mi300x, tpu-v5p, ...); "
                                            "'list' or none: the table of every preset")
    hw.add_argument("--format", choices=("text", "json"), default="text")
    hw.add_argument("--json", action="store_const", dest="format", const="json", help="the same as --format json")


def run(args) -> str:
    import json

    from .. import hardware   # light: tomllib, no SymPy

    if args.name is None or args.name == "list":   # 'list' as `costgraph list` lists the models (no preset has the name)
        every = hardware.preset_list()
        return json.dumps(every.to_dict(), indent=2) if args.format == "json" else str(every)
    one = hardware.preset(args.name)
    return json.dumps(hardware.to_json(one), indent=2) if args.format == "json" else hardware.format_one(one)
