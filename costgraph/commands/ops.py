"""``costgraph ops``: the operators a model file can call, with their parameters and a
one-line summary each (:func:`costgraph.ops.catalogue`; no SymPy imported)."""

from __future__ import annotations


def add_parser(sub) -> None:
    sub.add_parser("ops", help="operators a model file can call")


def run(args=None) -> str:
    return _ops()


def _ops() -> str:
    from ..ops import catalogue
    from ..ops.registry import REQUIRED

    lines = []
    for spec in catalogue():
        params = ", ".join(p.name if p.default is REQUIRED else f"{p.name}={str(p.default).lower()}"
                           for p in spec.params)
        lines.append(f"{spec.name}({params})\n    {spec.summary}")
    return "\n".join(lines)
