"""``costgraph plan``: the parallel layouts that fit a device, fastest first
(:mod:`costgraph.training.plan`)."""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from .common import model_arguments


def add_parser(sub) -> None:
    pl = sub.add_parser("plan", help="the parallel layouts that fit a device, fastest first")
    model_arguments(pl, "a bundled model name, a .cg file or a config.json",
                     "dimension values (b is chosen by the planner) or model options")
    pl.add_argument("--gpus", type=int, required=True, help="devices in all")
    pl.add_argument("--hardware", required=True, help="a hardware preset (costgraph hardware)")
    pl.add_argument("--global-batch", type=int, required=True, help="sequences per step")
    pl.add_argument("--tokens", help="training tokens D: days to train for the best layouts")
    pl.add_argument("--efficiency", default=None, help=f"a flat fraction of the peak every compute kernel reaches (default: the per-kernel time model on a preset with a kernel table, else {choices.DEFAULT_EFFICIENCY})")
    pl.add_argument("--memory", help="device memory instead of the preset's (80GB, 80GiB)")
    pl.add_argument("--precision", default=choices.DEFAULT_POLICY, help=f"precision policy (default {choices.DEFAULT_POLICY})")
    pl.add_argument("--optimizer", default=choices.DEFAULT_OPTIMIZER,
                    help=f"optimizer (default {choices.DEFAULT_OPTIMIZER}; costgraph train --help lists them)")
    add_option(pl, choices.ATTENTION, "--attention")
    add_option(pl, choices.OVERLAP, "--overlap",
               help="how communication overlaps computation (costgraph.training.overlap): " + choices.OVERLAP.help())
    pl.add_argument("--pipeline-layout", dest="pipeline_layout", metavar="LAYOUT",
                    help="only layouts with this Megatron-LM --pipeline-model-parallel-layout (e.g. Et*4|(t*4|)*14tmL): "
                         "pp and the virtual stages from its stages, as costgraph train takes it")
    pl.add_argument("--allow-fp8", action="store_true",
                    help="search the FP8 precision policies too (a preset with an FP8 peak)")
    pl.add_argument("--allow-offload", action="store_true",
                    help="search optimizer and parameter offload (CPU, NVMe) too")
    pl.add_argument("--exhaustive", action="store_true",
                    help="search Megatron's recompute modules, method and layer counts, and a MoE's --ep-overlap and "
                         "--route-nodes too (each value derives its own closed forms: slower)")
    pl.add_argument("--top", type=int, default=10, help="how many layouts to show (default 10)")
    pl.add_argument("--no-dropout", action="store_true")
    add_option(pl, choices.PROFILE, "--profile")
    pl.add_argument("--reserve", default=None, help="memory kept free on each device: a fraction of it (0.1) or a "
                                                    f"size (8GB); default {choices.DEFAULT_RESERVE}")
    pl.add_argument("--format", choices=("text", "json"), default="text")
    from ._analysis import efficiency_profile_argument

    efficiency_profile_argument(pl)   # a calibration profile (costgraph calibrate)
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
    result = model.plan(values, gpus=args.gpus, hardware=args.hardware, global_batch=args.global_batch,
                        tokens=args.tokens, efficiency=args.efficiency, memory=args.memory, precision=args.precision,
                        optimizer=args.optimizer, attention=args.attention, top=args.top, reserve=args.reserve,
                        overlap=args.overlap, pipeline_layout=args.pipeline_layout, allow_fp8=args.allow_fp8,
                        allow_offload=args.allow_offload, exhaustive=args.exhaustive,
                        command=_train_words(args), efficiency_profile=args.efficiency_profile)
    return result.to_json() if args.format == "json" else result.to_text()


def _train_words(args) -> str:
    """``costgraph train MODEL [--config C] [--set ...] [--profile P] [--no-dropout]``: the words of
    the plan's command line that name the model, for its ``check`` command."""
    import shlex

    words = ["costgraph", "train", shlex.quote(args.model)] + (["--config", shlex.quote(args.config)] if args.config else [])
    words += ["--set", *map(shlex.quote, args.set)] if args.set else []
    words += ["--profile", args.profile] + (["--no-dropout"] if args.no_dropout else [])
    return " ".join(words)
