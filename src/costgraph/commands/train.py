"""``costgraph train``: training memory per device for a parallel layout (ZeRO,
TP/SP/PP/CP/EP, recomputation) and whether it fits; FLOPs, time and utilization;
communication per device per step (bytes; seconds with ``--hardware``); the
step-time model; Megatron-LM's estimate beside costgraph's. The work is
:meth:`costgraph.Model.train` (:func:`costgraph.training.api.train`); this
module reads the options and renders its :class:`~costgraph.training.result.TrainingResult`.
``--params N`` answers for a bare parameter count (:mod:`costgraph.commands._bare`)."""

from __future__ import annotations

from .. import choices
from ..errors import CostgraphValueError
from ..arguments import parse_count
from ..option_fields import add_arguments, from_namespace
from ..train_options import TrainOptions
from ._analysis import check_lora, lora_arguments, train_arguments, train_layout
from .common import cost_arguments, load_any, model_arguments, settings


def add_parser(sub) -> None:
    t = sub.add_parser("train", help="training memory per device for a parallel layout (ZeRO, TP/SP/PP/CP/EP, "
                                     "recomputation), whether it fits, FLOPs, time and communication")
    model_arguments(t, "a bundled model name, a .cg file or a config.json (or --params N for a bare "
                       "parameter count)", "dimension values (b is the micro-batch) or model options", optional=True)
    t.add_argument("--params", help="a bare parameter count Ψ instead of a model (7.5e9): model states only")
    train_arguments(t)   # the layout options, shared with report and plot
    lora_arguments(t)   # --lora --lora-targets --quantize, shared with fit
    # the options beside the layout, declared once (costgraph.train_options.TrainOptions), in --help's order
    add_arguments(t, TrainOptions, "hardware", "causal")
    cost_arguments(t, scope=False, precision=False, conventions=False)   # --profile --no-dropout --input-grads
    add_arguments(t, TrainOptions, "router", "scope")
    t.add_argument("--format", choices=("text", "json"), default="text")
    add_arguments(t, TrainOptions, "rate_covers")   # to the last field (--memory, --reserve: train_arguments)
    from ._offload import add_arguments as offload_arguments   # --deepspeed-table --gpus-per-node ... (offload)

    offload_arguments(t)
    from ._launch_hook import add_argument as launch_argument

    launch_argument(t)   # --launch FILE: a Megatron-LM script, torchtitan TOML, DeepSpeed JSON, accelerate YAML


def run(args) -> str:
    from ..training.fit import memory_size

    dims, options = settings(args.set)
    capacity = memory_size(args.memory)[0] if args.memory is not None else None   # floored, as --kv-memory
    check_lora(args)
    if args.params is not None:
        _bare_only(args)
        from ._bare import run_bare

        from ._offload import bare_extra, render   # offload's host bytes, DeepSpeed's table

        return render(args, run_bare(args, capacity), bare_extra(args, parse_count(args.params)))
    if args.model is None:
        raise CostgraphValueError("no model given", hint="costgraph train gpt --config gpt2 ..., or --params 7.5e9")
    model, values = load_any(args, dims, options)
    result = model.train(train_layout(args, args.micro_batches), values, from_namespace(TrainOptions, args))
    from ._offload import model_extra, render   # DeepSpeed's estimator table (--deepspeed-table)

    return render(args, result.to_json() if args.format == "json" else result.to_text(),
                  model_extra(args, model, values, result.layout))


def _bare_only(args) -> None:
    """Refuse a model together with ``--params``, and the options only a model has."""
    if args.model is not None:
        raise CostgraphValueError("give a model or --params, not both")
    model_only = [name for name, on in (("--lora", args.lora is not None), ("--quantize", args.quantize),
                                        ("--recompute", args.recompute not in ("none", "full")), ("--sp", args.sp),
                                        ("--micro-batches", args.micro_batches is not None),
                                        ("--cp", args.cp != 1), ("--ep", args.ep != 1),
                                        ("--attention", args.attention != choices.ATTENTION.default), ("--scope", args.scope != "model"),
                                        ("--set", bool(args.set)), ("--config", args.config is not None),
                                        ("--fp8-dot-product-attention", args.fp8_attention),
                                        ("--no-fp8-wgrad", not args.fp8_wgrad),
                                        ("--cross-entropy", args.cross_entropy != choices.CROSS_ENTROPY.default),
                                        ("--recompute-count", args.recompute_count != choices.RECOMPUTE_COUNT.default))
                  if on]
    if model_only:
        raise CostgraphValueError(f"{', '.join(model_only)} {'needs' if len(model_only) == 1 else 'need'} a model: "
                                  "--params gives model states (and, with --tokens and a rate, the 6ND time)",
                                  hint="name a model (costgraph train llama --config llama-2-7b ...)")
