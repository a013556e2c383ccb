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
    result = model.plan(values, from_namespace(PlanOptions, args, command=_train_words(args)))
    return result.to_json() if args.format == "json" else result.to_text()


def _train_words(args) -> str:
    """``costgraph train MODEL [--config C] [--set ...] [--profile P] [--no-dropout]``: the words of
    the plan's command line that name the model, for its ``check`` command."""
    import shlex

    words = ["costgraph", "train", shlex.quote(args.model)] + (["--config", shlex.quote(args.config)] if args.config else [])
    words += ["--set", *map(shlex.quote, args.set)] if args.set else []
    words += ["--profile", args.profile] + (["--no-dropout"] if args.no_dropout else [])
    return " ".join(words)
