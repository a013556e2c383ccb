"""``costgraph ops``: the operators a model file can call, with their parameters and a
one-line summary and traits each (:func:`costgraph.ops.catalogue`; no SymPy imported)."""

from __future__ import annotations


def add_parser(sub) -> None:
    sub.add_parser("ops", help="operators a model file can call, with their traits")


def run(args=None) -> str:
    return _ops()


def _ops() -> str:
    """``costgraph ops``: each operator's signature, summary and traits (its
    layout under tensor parallelism, its roles), then what the trait names
    mean; read from the ``@op`` declarations without importing SymPy."""
    from ..ops import catalogue
    from ..ops.registry import LAYOUTS, REQUIRED, ROLES, describe_traits

    lines = []
    for spec in catalogue():
        params = ", ".join(p.name if p.default is REQUIRED else f"{p.name}={str(p.default).lower()}"
                           for p in spec.params)
        lines.append(f"{spec.name}({params})\n    {spec.summary}\n    {describe_traits(spec)}")
    lines.append("\nlayouts (how an operator's output is split under --tp):")
    lines += [f"  {name}: {text}" for name, text in LAYOUTS.items()]
    lines.append("roles:")
    lines += [f"  {name}: {text}" for name, text in ROLES.items()]
    return "\n".join(lines)
