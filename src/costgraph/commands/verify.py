"""``costgraph verify``: a model's costs against PyTorch on the transformers
model of a config.json (needs the ``torch`` extra; :mod:`costgraph.verify`).
Exit status 0 when every quantity is exact, 1 otherwise."""

from __future__ import annotations

import re


def add_parser(sub) -> None:
    v = sub.add_parser("verify", help="compare a model's costs with PyTorch on the transformers model of a "
                                      "config.json (needs the torch extra)")
    v.add_argument("model", nargs="?", help="a bundled model name or a .cg file (default: the model "
                                            "the config's model_type maps to)")
    v.add_argument("--hf", required=True, metavar="CONFIG.json", help="a Hugging Face config.json")
    v.add_argument("--shape", nargs="+", action="extend", default=[], metavar="BxS",
                   help="(b, s) shapes to compare at (default 1x16 2x32 3x8; two fit a difference "
                        "α·b·s + β·b·s², a third checks it)")
    v.add_argument("--no-kv", action="store_true", help="skip the KV cache comparison")


def run(args) -> tuple[str, int]:
    """``costgraph verify``: the report, and 0 when every quantity is exact, else 1."""
    from ..arguments import ascii_number
    from ..errors import CostgraphValueError
    from ..verify import SHAPES, require, to_text, verify

    shapes = []
    for spec in args.shape:
        ascii_number(spec.replace("×", "x"), "--shape")
        m = re.fullmatch(r"([1-9][0-9]{0,3})[xX×]([1-9][0-9]{0,5})", spec)
        if not m:
            raise CostgraphValueError(f"cannot read --shape {spec[:40]!r}", hint="write BxS, e.g. 2x32")
        shapes.append((int(m.group(1)), int(m.group(2))))
    require()   # before any work: says how to install the torch extra
    v = verify(args.hf, args.model, shapes or SHAPES, kv=not args.no_kv)
    return to_text(v), 0 if v.exact else 1
