"""``costgraph hardware``: accelerator presets (dense peaks, HBM, links per
direction), each number with its source (:mod:`costgraph.hardware`).

``costgraph hardware`` or ``hardware list``: the table of every preset; ``hardware NAME`` or
``hardware show NAME``: one preset in full (``show`` as ``list``: a verb some users type first)."""

from __future__ import annotations

import argparse

#: the words ``costgraph hardware`` takes before a preset (no preset has either name)
VERBS = ("list", "show")


def add_parser(sub) -> None:
    hw = sub.add_parser("hardware", help="accelerator presets: dense peaks, HBM, links per direction, with sources")
    hw.add_argument("name", nargs="?", help="one preset in full, a source per number (h100-sxm, mi300x, tpu-v5p, ...; "
                                            "'show NAME' the same); 'list' or none: the table of every preset")
    hw.add_argument("preset", nargs="?", help=argparse.SUPPRESS)   # show NAME's NAME (documented in name's help)
    hw.add_argument("--format", choices=("text", "json"), default="text")
    hw.add_argument("--json", action="store_const", dest="format", const="json", help="the same as --format json")


def chosen(name: str | None, preset: str | None) -> str | None:
    """The preset ``costgraph hardware`` shows in full from its words (``NAME``, ``show NAME``); None for
    the table (none, ``list``).

    Raises
    ------
    CostgraphValueError
        ``show`` without a name; a second word after ``list`` or after a preset's name."""
    from ..errors import CostgraphValueError

    if name == "show":
        if preset is None:
            raise CostgraphValueError("costgraph hardware show needs a preset's name",
                                      hint="e.g. costgraph hardware show h100-sxm; costgraph hardware lists them")
        return preset
    if preset is not None:
        said = "costgraph hardware list takes no name" if name == "list" else \
            f"costgraph hardware takes one preset's name, not {name!r} and {preset!r}"
        raise CostgraphValueError(said, hint=f"costgraph hardware {preset} (or show {preset}) shows one preset; "
                                             "costgraph hardware list: the table")
    return None if name in (None, "list") else name   # 'list' as `costgraph list` lists the models


def run(args) -> str:
    import json

    from .. import hardware   # light: tomllib, no SymPy

    name = chosen(args.name, args.preset)
    if name is None:
        every = hardware.preset_list()
        return json.dumps(every.to_dict(), indent=2) if args.format == "json" else str(every)
    from ..runtime_memory import visible_figure   # the memory CUDA reports, beside the printed figure

    one = hardware.preset(name)
    seen = visible_figure(one.key)
    return json.dumps(hardware.to_json(one, seen), indent=2) if args.format == "json" else \
        hardware.format_one(one, seen)
