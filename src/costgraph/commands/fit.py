"""``costgraph fit MODEL --hardware h100-sxm --gpus 8 [--train|--serve]``: fits or does not fit, as
the exit status (0 fits, 1 does not, 2 a mistake in the input), and the next steps with numbers.
The work is :func:`costgraph.fit` (:mod:`costgraph.verdict`); this module reads the options
(the layout options of ``costgraph train``; the serving options of ``costgraph infer``) and prints
its :class:`~costgraph.verdict.FitResult`."""

from __future__ import annotations

from ..fit_options import FitOptions
from ..layout_options import LayoutOptions
from ..option_fields import add_arguments, cli_defaults, flag_of
from .common import model_arguments


def add_parser(sub) -> None:
    f = sub.add_parser("fit", help="does it fit? training or serving on --gpus devices of --hardware: exit 0 "
                                   "fits, 1 does not; the next steps with numbers")
    model_arguments(f, "a bundled model name, a .cg file, a config.json, a snapshot folder or a Hub id "
                       "(org/name[@revision], from the local Hugging Face cache)",
                    "dimension values (training: b the micro-batch, s the sequence) or model options")
    mode = f.add_mutually_exclusive_group()
    mode.add_argument("--train", action="store_true", help="training (the default): the peak of the most-loaded "
                                                           "device, as costgraph train")
    mode.add_argument("--serve", action="store_true", help="serving: weights + paged KV cache per device, as "
                                                           "costgraph infer (needs --prompt and --generate)")
    add_arguments(f, FitOptions, "hardware", "hardware")   # declared once (costgraph.fit_options.FitOptions)
    from ._analysis import train_arguments   # --gpus --tp --pp --zero --recompute ... --memory --reserve

    train_arguments(f, timed=False)   # fit prints no step time: no --link-rate
    from ._analysis import efficiency_profile_argument, lora_arguments

    efficiency_profile_argument(f)   # training: a calibration profile's memory reserve
    lora_arguments(f)   # training: --lora R, --lora-targets, --quantize (QLoRA), as costgraph train
    add_arguments(f, FitOptions, "host_memory")   # to the last field: --host-memory, the serving options
    f.add_argument("--format", choices=("text", "json"), default="text")
    from ._launch_hook import add_argument as launch_argument

    launch_argument(f)   # --launch FILE: a training launch file, or with --serve a vllm serve / SGLang line


#: the serving options and their defaults (any one given asks for --serve)
SERVE_DEFAULTS = cli_defaults(FitOptions, "serve")


#: the training options of fit beyond the layout's (any one given with --serve is refused)
TRAIN_ONLY = {**cli_defaults(LayoutOptions, "lora"), **cli_defaults(FitOptions, "train")}


def run(args):
    from ..errors import CostgraphValueError
    from ..verdict import fit
    from ._analysis import check_lora
    from .common import load_any, settings

    check_lora(args)

    dims, options = settings(args.set)
    model, values = load_any(args, dims, options)
    gpus = 1 if args.gpus is None else args.gpus
    if args.serve:
        from ._analysis import TRAIN_DEFAULTS
        from .infer import _weights

        given = [k for k, v in {**TRAIN_DEFAULTS, **TRAIN_ONLY}.items()
                 if k not in ("gpus", "memory") and getattr(args, k, v) != v]
        if given:
            raise CostgraphValueError(f"{flag_of((FitOptions, LayoutOptions), given[0])} is a training option",
                                      hint="drop it, or drop --serve (serving takes --tp, --batch, --weights, --kv)")
        weights, quantized, keep, shipped = _weights(args, args.keep)
        if args.efficiency_profile is not None:
            raise CostgraphValueError("--efficiency-profile calibrates training runs", hint="drop it with --serve")
        r = fit(model, values, FitOptions(mode="serve", hardware=args.hardware, gpus=gpus, memory=args.memory,
                                          reserve=args.reserve, prompt=args.prompt, generate=args.generate,
                                          batch=args.batch, tp=args.tp, weights=weights, kv=args.kv,
                                          quantized=quantized, keep=keep, memory_convention=args.memory_convention))
        if shipped is not None and not args.weights:   # a config.json: where the weights came from
            r.settings["weights from"] = shipped.source
            r.warnings[:0] = list(shipped.warnings)
    else:
        given = [k for k, v in SERVE_DEFAULTS.items() if getattr(args, k) != v]
        if given:
            raise CostgraphValueError(f"{flag_of(FitOptions, given[0])} is a serving option", hint="add --serve")
        from ._analysis import train_layout

        r = fit(model, values, FitOptions(hardware=args.hardware, gpus=gpus, memory=args.memory, reserve=args.reserve,
                                          efficiency_profile=args.efficiency_profile, host_memory=args.host_memory,
                                          memory_convention=args.memory_convention),
                train_layout(args, args.micro_batches))
    return (r.to_json() if args.format == "json" else r.to_text()), r.status
