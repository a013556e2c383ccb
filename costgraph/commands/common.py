"""Argument helpers shared by the subcommands: the model, ``--config`` and
``--set`` arguments, reading ``--set`` pairs, and loading a model by name,
``.cg`` path or ``config.json``. Light at import: the engine loads inside."""

from __future__ import annotations

from .. import choices
from ..choices import add_option


def model_arguments(p, model_help: str = "a bundled model name, a .cg file or a config.json",
                    set_help: str = "dimension values (h=768) or model options (bias=false)",
                    optional: bool = False) -> None:
    """Add the positional model and ``--config``/``--set`` to parser ``p``."""
    from ..cli import _model_arguments

    _model_arguments(p, model_help, set_help, optional=optional)


def settings(pairs: list[str]) -> tuple[dict[str, int], dict[str, bool]]:
    """``--set`` pairs → (dimension values, option values); raises CostgraphValueError."""
    from ..cli import _settings

    return _settings(pairs)


def load_any(args, dims: dict, options: dict):
    """(Model, values or None) for ``args.model`` (name, .cg or config.json), ``args.config``,
    and ``args.profile``/``args.no_dropout`` when the parser has them (defaults: korthikanti,
    dropout on)."""
    from ..cli import _load_any

    if not hasattr(args, "profile"):
        args.profile = "korthikanti"
    if not hasattr(args, "no_dropout"):
        args.no_dropout = False
    return _load_any(args, dims, options)


def cost_arguments(p, scope: bool = True) -> None:
    """The conventions of ``costgraph derive``: ``--scope``, ``--convention``, ``--precision``,
    ``--causal``, ``--profile``, ``--no-dropout``."""

    if scope:
        p.add_argument("--scope", default="model", help="model (default), layer, or a group, block or node path")
    add_option(p, choices.CONVENTION, "--convention",
                   help="FLOP convention: matmul (matrix products only; default) or all")
    add_option(p, choices.PRECISION, "--precision", help="bytes per activation element")
    add_option(p, choices.CAUSAL, "--causal",
                   help="attention FLOPs: full square (default), half (area) or exact (pairs)")
    add_option(p, choices.PROFILE, "--profile",
                   help="what is kept for backward (see costgraph derive --help)")
    p.add_argument("--no-dropout", action="store_true", help="no dropout masks")


def costs_of(args, model, scope: str | None = None):
    """``model.costs`` with the conventions of :func:`cost_arguments`."""
    return model.costs(scope or getattr(args, "scope", "model"), convention=args.convention,
                       precision=args.precision, causal=args.causal)


def conventions_line(costs) -> str:
    """One line naming the conventions a result was computed under."""
    return (f"FLOPs: '{costs.convention}' convention (2 per multiply-add), causal '{costs.causal}'; "
            f"bytes: precision '{costs.precision.name}'")


def symbol_named(name: str, *exprs):
    """The SymPy symbol called ``name`` among the free symbols of ``exprs``.

    Raises CostgraphValueError naming the symbols there are."""
    from ..errors import CostgraphValueError

    free = set().union(*(e.free_symbols for e in exprs))
    for x in free:
        if str(x) == name:
            return x
    raise CostgraphValueError(f"the quantity has no symbol {name!r}",
                              hint="its symbols: " + ", ".join(sorted(map(str, free))))


def formula(e) -> dict:
    """A formula in a JSON document: ``expr`` (SymPy/Python syntax), its expression ``tree``
    (:mod:`costgraph.export.exprtree`; schema ``expression.json#/$defs/formula``) and ``latex``."""
    from ..export.exprtree import to_tree
    from ..printing import to_latex, to_python

    return {"expr": to_python(e), "tree": to_tree(e), "latex": to_latex(e)}
