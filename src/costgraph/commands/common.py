"""Argument helpers shared by the subcommands: the model, ``--config`` and
``--set`` arguments, reading ``--set`` pairs, and loading a model by name,
``.cg`` path or ``config.json``. Light at import: the engine loads inside."""

from __future__ import annotations

import re

from .. import choices
from ..choices import add_option
from ..errors import CostgraphValueError


_SETTING = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([0-9][0-9_]*(?:\.[0-9]+)?(?:[eE][0-9]+)?|true|false)$")


def model_arguments(p, model_help: str = "a bundled model name, a .cg file, a config.json, a snapshot folder or a "
                                         "Hub id (org/name[@revision], from the local Hugging Face cache)",
                    set_help: str = "dimension values (h=768) or model options (bias=false)",
                    optional: bool = False) -> None:
    """Add the positional model and ``--config``/``--set`` to parser ``p``."""
    p.add_argument("model", nargs="?" if optional else None, help=model_help)
    p.add_argument("--config", help="a named configuration of the model file")
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE", help=set_help)
    download_argument(p)


def download_argument(p, revision: bool = True) -> None:
    """``--download``: a Hub id not in the local cache has its config.json fetched (that file only);
    ``--revision REV`` (as ``hf download`` spells it; ``revision``: offer it) the same as ``org/name@REV``."""
    p.add_argument("--download", action="store_true",
                   help="MODEL a Hub id (org/name[@revision]) not in the local Hugging Face cache: fetch its "
                        "config.json (only that file; needs the extra 'hub'; HF_HUB_OFFLINE respected)")
    if revision:
        p.add_argument("--revision", metavar="REV",
                       help="MODEL a Hub id at this branch, tag or commit hash (the same as org/name@REV)")


def shown_model(args) -> str:
    """MODEL as a command line that regenerates an output names it: as the user wrote it (``-`` for
    standard input, a Hub id, a bundled name, a path), a config.json path by its file name; never the
    temporary file standard input was saved in nor the cache path a Hub id resolved to."""
    import os

    given = getattr(args, "model_given", None) or args.model
    return os.path.basename(given) if given.endswith(".json") else given


def missing_hint(args) -> str | None:
    """The hint of a ``no value for`` refusal (:data:`costgraph.errors.MISSING_HINT`) when MODEL is a ``.cg`` file
    (one ``costgraph import`` wrote, or the user's) run without ``--config``: the file's own configurations
    (``--config imported``), which ``costgraph list`` does not show; None otherwise (a bundled name, a
    config.json, ``--config`` given, a file that does not load)."""
    import os

    from ..errors import CostgraphError
    from ..hints import listing

    path = getattr(args, "model", None)
    if (not isinstance(path, str) or getattr(args, "config", None) is not None or not path.endswith(".cg")
            or not os.path.isfile(path)):
        return None
    from ..model import load

    try:
        configs = list(load(path).configs)
    except CostgraphError:
        return None
    from ._stdin import STDIN_NAME

    shown = STDIN_NAME if shown_model(args) == "-" else shown_model(args)   # MODEL '-': as its other messages
    if not configs:
        return f"give the model's sizes with --set NAME=VALUE ({shown} declares no configuration)"
    return (f"give the model's sizes with --config {configs[0]} or --set NAME=VALUE ({shown}'s configuration"
            f"{'s' if len(configs) > 1 else ''}: {listing(configs)})")


def resolve_models(args) -> None:
    """Replace a Hub id or a snapshot folder in ``args.model`` (and ``args.draft``) by the path of its
    config.json (:func:`costgraph.language.hf_hub.config_path`; ``args.download`` allows fetching it),
    so every command reads it as a config.json. Light: huggingface_hub is imported for a Hub id only, and
    :mod:`costgraph.language.hf_hub` not at all for a bundled name (no ``/``, no ``.json``, no folder)."""
    import os

    if getattr(args, "revision", None) is not None and isinstance(getattr(args, "model", None), str):
        from ..language.hf_hub import with_revision

        args.model = with_revision(args.model, args.revision)
        args.model_given, args.revision = args.model, None   # once: regenerate lines name org/name@REV
    for attr in ("model", "draft"):
        v = getattr(args, attr, None)
        if isinstance(v, str) and v and ("/" in v or v.endswith(".json") or os.path.isdir(v)):
            from ..language.hf_hub import config_path   # a Hub id has a '/' (hf_hub.HUB_ID)

            path = config_path(v, download=bool(getattr(args, "download", False)))
            if path is not None:
                setattr(args, attr, path)


def settings(pairs: list[str]) -> tuple[dict[str, int], dict[str, bool]]:
    """``--set`` pairs → (dimension values, option values). A number is written as the count flags take it
    (``b=1024``, ``b=1_024``, ``b=1e9``, ``b=7.5e9``: :func:`~costgraph.arguments.parse_count`).

    Raises
    ------
    CostgraphValueError
        A pair not ``NAME=VALUE`` with a whole number or true/false, a number not above 0 or fractional, or a
        name given twice (each naming ``--set`` and the pair)."""
    from ..language.limits import check_number

    dims, options = {}, {}
    from ..arguments import ascii_number, parse_count

    for pair in pairs:
        ascii_number(pair, "--set", pair=True)
        m = _SETTING.match(pair)
        if not m:
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=-[0-9]", pair[:60]):
                raise CostgraphValueError(f"--set {pair[:40]!r}: a dimension is a positive whole number",
                                          hint=f"a dimension counts something: --set {pair.split('=')[0]}=1, 2, 3, ...")
            raise CostgraphValueError(f"cannot read --set {pair!r}",
                                      hint="write NAME=VALUE with a whole number (h=768) or true/false (bias=false)")
        name, value = m.groups()
        if name in dims or name in options:
            raise CostgraphValueError(f"--set gives '{name}' twice", hint="give each name once")
        if value in ("true", "false"):
            options[name] = value == "true"
        else:
            if any(c in value for c in ".eE"):   # 1e9, 7.5e9: whole numbers as --params and --tokens read them
                value = str(parse_count(value, f"--set {name}", example=f"{name}=1e9 or {name}=1000000000"))
            dims[name] = check_number(value, error=_set_error(pair))
            if dims[name] == 0:   # the API's own check (Model.values) names the dimension, not the flag
                raise CostgraphValueError(f"--set {pair[:40]!r}: a dimension is a positive whole number",
                                          hint=f"a dimension counts something: --set {name}=1, 2, 3, ...")
    return dims, options


def one_name_per_word(flag: str, words: list | None, note: str = "") -> None:
    """A flag of several names (``--large s h``, ``--quantity params flops_forward``) given a list in one
    word (``--large s,h``): refused, saying how the command line writes it (``note`` after the example).

    Raises CostgraphValueError naming the flag and the word."""
    for word in words or ():
        parts = [w for w in re.split(r"[,;\s]+", word) if w]
        if len(parts) > 1:
            shown = word if len(word) <= 40 else word[:37] + "..."
            raise CostgraphValueError(f"{flag} {shown!r}: one name per word, not a list in one word",
                                      hint=f"write them apart, separated by spaces: {flag} {' '.join(parts[:6])}{note}")


def _set_error(pair: str):
    shown = pair if len(pair) <= 40 else pair[:36] + "..."
    def error(message: str, loc=None):
        return CostgraphValueError(f"cannot read --set {shown!r}: {message}")
    return error


def load_any(args, dims: dict, options: dict):
    """(Model, values or None) for ``args.model`` (name, .cg or config.json), ``args.config``,
    and ``args.profile``/``args.no_dropout`` when the parser has them (defaults: korthikanti,
    dropout on).

    Raises
    ------
    CostgraphValueError
        Options or ``--config`` given with a config.json; any error of loading the model."""
    from ..model import load

    if not hasattr(args, "profile"):
        args.profile = choices.PROFILE.default
    if not hasattr(args, "no_dropout"):
        args.no_dropout = False
    profile, no_dropout = args.profile, args.no_dropout
    resolve_models(args)   # diff's sides come here directly
    if args.model.endswith(".json"):
        from ..language.hf_config import load_hf_config

        if options:
            raise CostgraphValueError("options come from the config.json; --set takes dimensions here")
        if args.config:
            raise CostgraphValueError("--config names a configuration of a model file; a config.json is one already")
        refuse_input_grads(args)
        hf = load_hf_config(args.model, profile=profile, dropout=False if no_dropout else None)
        return hf.model, hf.model.values(None, {**hf.values, **dims})
    model = load(args.model, dropout=not no_dropout, options=options, profile=profile, config=args.config,
                 input_grads=getattr(args, "input_grads", False))
    return model, (model.values(args.config, dims) if (dims or args.config is not None) else None)


def refuse_input_grads(args) -> None:
    """``--input-grads`` with a config.json: refused (a config.json's model keeps the default)."""
    if getattr(args, "input_grads", False):
        raise CostgraphValueError("--input-grads applies to a model file; a config.json's model keeps the default "
                                  "(its inputs need no gradient)",
                                  hint="leave out --input-grads, or give a model file (a bundled name such as gpt, "
                                       "or a .cg path)")


#: the two names of LaTeX output: ``derive --format latex`` and ``report --format tex`` each accept both
LATEX_NAMES = ("latex", "tex")


def latex_named(canonical: str):
    """The argparse ``type`` of a ``--format`` whose LaTeX choice is ``canonical`` (``latex`` or
    ``tex``): the other name of :data:`LATEX_NAMES` is read as it (issue 30); anything else as given,
    for argparse's choices to check."""
    def read(text: str) -> str:
        return canonical if text in LATEX_NAMES else text
    read.__name__ = "format"
    return read


def cost_arguments(p, scope: bool = True, precision: bool = True, conventions: bool = True) -> None:
    """The conventions of ``costgraph derive``: ``--scope``, ``--convention``, ``--precision``,
    ``--causal``, ``--profile``, ``--no-dropout`` (the one place they are declared; ``scope`` and
    ``precision`` False for a command that declares its own, e.g. ``--precision`` as a training
    precision policy in ``report`` and ``plot``; ``conventions`` False where an options dataclass
    declares ``--convention`` and ``--causal``: :class:`costgraph.train_options.TrainOptions`)."""

    if scope:
        p.add_argument("--scope", default="model", help="model (default), layer, or a group, block or node path")
    if conventions:
        add_option(p, choices.CONVENTION, "--convention",
                   help="FLOP convention: matmul (matrix products only; default) or all")
    if precision:
        add_option(p, choices.PRECISION, "--precision",
                   help="bytes per element of activations (bf16: 2; masks 1 byte)")
    if conventions:
        add_option(p, choices.CAUSAL, "--causal",
                   help="attention FLOPs over the full s×s square (default), the causal mask's kept pairs as an "
                        "area (half) or whole pairs (exact)")
    add_option(p, choices.PROFILE, "--profile",
               help="what is kept for backward: Korthikanti et al. 2022 (default) or what PyTorch "
                    "autograd keeps in Hugging Face's eager bf16 code")
    p.add_argument("--no-dropout", action="store_true", help="train without dropout: no dropout masks")
    p.add_argument("--input-grads", action="store_true",
                   help="the model's float inputs need gradients (requires_grad=True); default: they do not, "
                        "as PyTorch's data loaders yield them")


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
    from ..export.printing import to_latex, to_python

    return {"expr": to_python(e), "tree": to_tree(e), "latex": to_latex(e)}
