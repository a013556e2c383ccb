"""``costgraph ops``: the operators a model file can call, with their parameters and a
one-line summary and traits each (:func:`costgraph.ops.catalogue`; no SymPy imported)."""

from __future__ import annotations


def add_parser(sub) -> None:
    p = sub.add_parser("ops", help="operators a model file can call, with their traits")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these operators (e.g. clamped_glu); all when none")


def run(args=None) -> str:
    return _ops(getattr(args, "names", None) or ())


def _ops(names=()) -> str:
    """``costgraph ops [NAME ...]``: each operator's signature, summary and traits (its
    layout under tensor parallelism, its roles), then what the trait names
    mean; read from the ``@op`` declarations without importing SymPy. ``names``: only
    those operators; an unknown name is refused with the closest ones."""
    import difflib

    from ..errors import CostgraphValueError
    from ..ops import catalogue
    from ..ops.registry import LAYOUTS, REQUIRED, ROLES, describe_traits

    specs = catalogue()
    known = [spec.name for spec in specs]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            raise CostgraphValueError(f"no operator {name!r}",
                                      hint=(f"did you mean {', '.join(close)}? " if close else "")
                                      + "costgraph ops lists every operator")
    lines = []
    for spec in (s for s in specs if not names or s.name in names):
        params = ", ".join(p.name if p.default is REQUIRED else f"{p.name}={str(p.default).lower()}"
                           for p in spec.params)
        lines.append(f"{spec.name}({params})\n    {spec.summary}\n    {describe_traits(spec)}")
    lines.append("\nlayouts (how an operator's output is split under --tp):")
    lines += [f"  {name}: {text}" for name, text in LAYOUTS.items()]
    lines.append("roles:")
    lines += [f"  {name}: {text}" for name, text in ROLES.items()]
    return "\n".join(lines)
