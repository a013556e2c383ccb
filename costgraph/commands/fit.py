"""``costgraph fit MODEL --hardware h100-sxm --gpus 8 [--train|--serve]``: fits or does not fit, as
the exit status (0 fits, 1 does not, 2 a mistake in the input), and the next steps with numbers.
The work is :func:`costgraph.fit` (:mod:`costgraph.verdict`); this module reads the options
(the layout options of ``costgraph train``; the serving options of ``costgraph infer``) and prints
its :class:`~costgraph.verdict.FitResult`."""

from __future__ import annotations

from .. import choices
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
    f.add_argument("--hardware", help="a hardware preset (costgraph hardware): its device memory")
    from ._analysis import train_arguments   # --gpus --tp --pp --zero --recompute ... --memory --reserve

    train_arguments(f)
    from ._analysis import efficiency_profile_argument, lora_arguments

    efficiency_profile_argument(f)   # training: a calibration profile's memory reserve
    lora_arguments(f)   # training: --lora R, --lora-targets, --quantize (QLoRA), as costgraph train
    f.add_argument("--host-memory", metavar="SIZE",
                   help="training with CPU offload: the host memory of one node (2TB, 1.5TiB; default the preset's "
                        "node where published: DGX H100 2 TB); the host memory per node is judged against it")
    from .infer import SCOPES, generate_count, prompt_count

    f.add_argument("--prompt", type=prompt_count, help="serving: prompt tokens per sequence P")
    f.add_argument("--generate", type=generate_count, help="serving: generated tokens per sequence G")
    f.add_argument("--batch", type=int, default=1, help="serving: concurrent sequences per replica (default 1)")
    f.add_argument("--weights", default=None, help="serving: weight dtype (default bf16; a config.json: what it "
                                                   "ships), fp8, int4, awq, ... as costgraph infer")
    f.add_argument("--kv", default=choices.DEFAULT_KV, help="serving: KV cache dtype (default bf16), fp8, int8, ...")
    f.add_argument("--quantized", choices=SCOPES, default=None, help="serving: which weights --weights applies to")
    f.add_argument("--not-quantized", default=None, metavar="NAMES", help="serving: module names kept in 16 bits")
    f.add_argument("--format", choices=("text", "json"), default="text")


#: the serving options and their defaults (any one given asks for --serve)
SERVE_DEFAULTS = {"prompt": None, "generate": None, "batch": 1, "weights": None, "kv": choices.DEFAULT_KV,
                  "quantized": None, "not_quantized": None}


#: the training options of fit beyond the layout's (any one given with --serve is refused)
TRAIN_ONLY = {"lora": None, "quantize": None, "host_memory": None}


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
                 if k not in ("gpus", "memory") and getattr(args, k) != v]
        if given:
            raise CostgraphValueError(f"--{given[0].replace('_', '-')} is a training option",
                                      hint="drop it, or drop --serve (serving takes --tp, --batch, --weights, --kv)")
        weights, quantized, keep, shipped = _weights(args, args.not_quantized)
        if args.efficiency_profile is not None:
            raise CostgraphValueError("--efficiency-profile calibrates training runs", hint="drop it with --serve")
        r = fit(model, mode="serve", hardware=args.hardware, gpus=gpus, values=values, memory=args.memory,
                reserve=args.reserve, prompt=args.prompt, generate=args.generate, batch=args.batch, tp=args.tp,
                weights=weights, kv=args.kv, quantized=quantized, keep=keep)
        if shipped is not None and not args.weights:   # a config.json: where the weights came from
            r.settings["weights from"] = shipped.source
            r.warnings[:0] = list(shipped.warnings)
    else:
        given = [k for k, v in SERVE_DEFAULTS.items() if getattr(args, k) != v]
        if given:
            raise CostgraphValueError(f"--{given[0].replace('_', '-')} is a serving option", hint="add --serve")
        from ._analysis import train_layout

        r = fit(model, mode="train", hardware=args.hardware, gpus=gpus, values=values, memory=args.memory,
                reserve=args.reserve, layout=train_layout(args, args.micro_batches),
                efficiency_profile=args.efficiency_profile, host_memory=args.host_memory)
    return (r.to_json() if args.format == "json" else r.to_text()), r.status
