"""Argument helpers shared by the subcommands: the model, ``--config`` and
``--set`` arguments, reading ``--set`` pairs, and loading a model by name,
``.cg`` path or ``config.json``. Light at import: the engine loads inside."""

from __future__ import annotations


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
