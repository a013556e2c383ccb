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
from ._analysis import check_lora, efficiency_profile_argument, lora_arguments, train_arguments, train_layout
from .common import cost_arguments, load_any, model_arguments, settings


def add_parser(sub) -> None:
    t = sub.add_parser("train", help="training memory per device for a parallel layout (ZeRO, TP/SP/PP/CP/EP, "
                                     "recomputation), whether it fits, FLOPs, time and communication")
    model_arguments(t, "a bundled model name, a .cg file or a config.json (or --params N for a bare "
                       "parameter count)", "dimension values (b is the micro-batch) or model options", optional=True)
    t.add_argument("--params", help="a bare parameter count Ψ instead of a model (7.5e9): model states only")
    train_arguments(t)   # the layout options, shared with report and plot
    lora_arguments(t)   # --lora --lora-targets --quantize, shared with fit
    t.add_argument("--hardware", help="a hardware preset (costgraph hardware lists them): peak FLOP/s and "
                                      "device memory")
    t.add_argument("--peak", help="peak FLOP/s per device (instead of a preset's dense BF16 peak, or without one), "
                                  "e.g. 989.4e12; FP8 policies take the preset's FP8 peak for their linears")
    t.add_argument("--mfu", help="assumed model FLOPs utilization, e.g. 0.45: gives step time and training time")
    t.add_argument("--achieved", help="achieved (hardware) FLOP/s per device, e.g. 140e12 (Narayanan §5.1)")
    t.add_argument("--tokens", help="training tokens D, e.g. 300e9: days, GPU-hours, PF-days")
    t.add_argument("--price", help="price per GPU-hour (any currency), e.g. 2.5")
    t.add_argument("--global-batch", type=int, help="sequences per step: sets m = B / (b·d)")
    t.add_argument("--efficiency", default=None,
                   help="a flat fraction of each peak every compute kernel reaches in the step time (default: the "
                        "per-kernel time model on a preset with a kernel table, else "
                        f"{choices.DEFAULT_EFFICIENCY} with a peak; one rate: --mfu, --achieved or --efficiency)")
    efficiency_profile_argument(t)   # a calibration profile (costgraph calibrate)
    cost_arguments(t, scope=False, precision=False)   # --convention --causal --profile --no-dropout
    t.add_argument("--no-router", action="store_true", help="leave out MoE router FLOPs (as Megatron-LM)")
    t.add_argument("--megatron", action="store_true",
                   help="also show Megatron-LM's theoretical_memory_usage.py estimate beside costgraph's first stage")
    t.add_argument("--scope", choices=("model", "layer"), default="model")
    t.add_argument("--format", choices=("text", "json"), default="text")
    t.add_argument("--rate-covers", choices=("step", "compute"), default=None,
                   help="what --mfu/--achieved cover: step (default: whole steps, bubble and communication "
                        "inside, as PaLM and Narayanan measure them) or compute (kernels; bubble and "
                        "communication added)")
    from ._offload import add_arguments   # --deepspeed-table --gpus-per-node --largest-layer-params (offload)

    add_arguments(t)
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
    result = model.train(train_layout(args, args.micro_batches), values=values, hardware=args.hardware,
                         tokens=args.tokens, mfu=args.mfu, achieved=args.achieved, peak=args.peak, price=args.price,
                         global_batch=args.global_batch, memory=args.memory, efficiency=args.efficiency,
                         megatron=args.megatron, scope=args.scope, convention=args.convention, causal=args.causal,
                         router=not args.no_router, reserve=args.reserve, rate_covers=args.rate_covers,
                         efficiency_profile=args.efficiency_profile)
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
                                        ("--recompute-count", args.recompute_count != choices.RECOMPUTE_COUNT.default))
                  if on]
    if model_only:
        raise CostgraphValueError(f"{', '.join(model_only)} {'needs' if len(model_only) == 1 else 'need'} a model: "
                                  "--params gives model states (and, with --tokens and a rate, the 6ND time)",
                                  hint="name a model (costgraph train llama --config llama-2-7b ...)")
