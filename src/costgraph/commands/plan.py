"""``costgraph plan``: the parallel layouts that fit a device, fastest first
(:mod:`costgraph.training.plan`)."""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from ..option_fields import add_arguments, from_namespace
from ..train_options import PlanOptions
from .common import model_arguments


def add_parser(sub) -> None:
    pl = sub.add_parser("plan", help="the parallel layouts that fit a device, fastest first")
    model_arguments(pl, "a bundled model name, a .cg file or a config.json",
                     "dimension values (b is chosen by the planner) or model options")
    # the options, declared once (costgraph.train_options.PlanOptions), in --help's order
    add_arguments(pl, PlanOptions, "gpus", "top")
    pl.add_argument("--no-dropout", action="store_true")
    add_option(pl, choices.PROFILE, "--profile")
    add_arguments(pl, PlanOptions, "reserve", "reserve")
    pl.add_argument("--format", choices=("text", "json"), default="text")
    add_arguments(pl, PlanOptions, "efficiency_profile")   # to the last field
    from ._launch_hook import add_argument as launch_argument

    launch_argument(pl)   # --launch FILE: a Megatron-LM script, torchtitan TOML, DeepSpeed JSON, accelerate YAML


def run(args) -> str:
    from ..errors import CostgraphValueError
    from .common import load_any, settings

    dims, options = settings(args.set)
    args.model = args.model or ""
    model, values = load_any(args, dims, options)
    if values is not None and args.gpus > 0 and args.global_batch > 0 and args.top > 0 and args.gpus <= 10**6 \
            and any(p.startswith("b=") for p in args.set):
        raise CostgraphValueError("plan chooses the micro-batch b itself", hint="leave b out of --set")
    options = from_namespace(PlanOptions, args, command=_train_words(args))
    if args.compare is not None:   # costgraph train's layout flags → the API's layout keywords
        import dataclasses

        options = dataclasses.replace(options, compare=compare_layout(args.compare, args.gpus))
    result = model.plan(values, options)
    return result.to_json() if args.format == "json" else result.to_text()


def _train_words(args) -> str:
    """``costgraph train MODEL [--config C] [--set ...] [--profile P] [--no-dropout]``: the words of
    the plan's command line that name the model, for its ``check`` command."""
    import shlex

    words = ["costgraph", "train", shlex.quote(args.model)] + (["--config", shlex.quote(args.config)] if args.config else [])
    words += ["--set", *map(shlex.quote, args.set)] if args.set else []
    words += ["--profile", args.profile] + (["--no-dropout"] if args.no_dropout else [])
    return " ".join(words)


def compare_layout(text: str, gpus: int) -> dict:
    """``--compare FLAGS``: ``costgraph train``'s layout flags (``--tp 4 --pp 8 --virtual-stages 5 --zero 1 --sp``;
    the micro-batch as ``--set b=N``, default 1; ``--gpus`` plan's, or left out), read by train's own parser
    (:func:`costgraph.commands._analysis.train_arguments`, :func:`~costgraph.commands._analysis.train_layout`), as
    the keywords of :class:`~costgraph.parallel.layout.Layout` that are off their defaults, and ``b``.

    Raises
    ------
    CostgraphValueError
        Words that are no layout flag of train, a value train's parser refuses, ``--set`` of anything but ``b``,
        or ``--gpus`` other than plan's."""
    import argparse
    import dataclasses
    import shlex

    from ..errors import CostgraphValueError
    from ..parallel.layout import Layout
    from ._analysis import train_arguments, train_layout

    hint = 'costgraph train\'s layout flags, e.g. --compare "--tp 4 --pp 8 --zero 1 --sp --set b=1"'
    p = argparse.ArgumentParser(prog="--compare", add_help=False, exit_on_error=False)
    train_arguments(p)
    p.add_argument("--set", nargs="+", default=[])
    try:
        args, unknown = p.parse_known_args(shlex.split(text))
    except (argparse.ArgumentError, ValueError) as e:
        raise CostgraphValueError(f"--compare {text[:60]!r}: {e}", hint=hint) from None
    if unknown:
        raise CostgraphValueError(f"--compare: {' '.join(unknown)[:60]!r} is no layout flag of costgraph train",
                                  hint=hint)
    b = 1
    for pair in args.set:
        name, _, value = pair.partition("=")
        if name != "b":
            raise CostgraphValueError(f"--compare: --set {pair[:40]!r}: only the micro-batch b=N is a layout's",
                                      hint="the model's sizes are plan's own --set")
        if not value.isdigit() or int(value) < 1:
            raise CostgraphValueError(f"--compare: --set {pair[:40]!r}: the micro-batch b must be a positive whole "
                                      f"number", hint='e.g. --compare "--tp 2 --set b=1"')
        b = int(value)
    if args.gpus not in (None, gpus):
        raise CostgraphValueError(f"--compare: --gpus {args.gpus} is not plan's --gpus {gpus}",
                                  hint="leave --gpus out of --compare")
    for name in ("memory", "reserve"):
        if getattr(args, name) is not None:
            raise CostgraphValueError(f"--compare: --{name} is plan's own option", hint=f"give --{name} to plan")
    layout, default = train_layout(args, args.micro_batches), Layout()
    return {**{f.name: getattr(layout, f.name) for f in dataclasses.fields(Layout)
               if f.name != "gpus" and getattr(layout, f.name) != getattr(default, f.name)}, "b": b}
