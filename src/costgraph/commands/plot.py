"""``costgraph plot MODEL --kind memory|flops|roofline -o FILE.png|FILE.svg``
(matplotlib; :mod:`costgraph.export.plots`).

* ``memory``: memory per device as stacked bars by part across a sweep
  (``--over s=1024:8192:x2`` or ``--over b=1,2,4,8``; default: the values
  given): training (weights, gradients, optimizer states, activations; layout
  options as ``costgraph train``) or, with ``--phase infer``, inference
  (weights and KV cache, ``--weights``/``--kv`` dtypes); the device memory of
  ``--memory`` or ``--hardware`` as a line.
* ``flops``: forward FLOPs by block at the values given.
* ``roofline``: the ``--hardware`` preset's roof with the prefill and decode
  steps of ``--prompt``/``--generate``/``--batch`` (as ``costgraph infer``).

Examples::

    costgraph plot llama --config llama-3-8b --kind memory --over s=1024:16384:x2 --gpus 8 --zero 1 -o mem.png
    costgraph plot gpt --config gpt2 --kind flops -o flops.svg
    costgraph plot llama --config llama-3-8b --kind roofline --hardware h100-sxm --prompt 512 --generate 128 -o roof.svg
"""

from __future__ import annotations


def add_parser(sub) -> None:
    from ._output import output_arguments
    from ._analysis import infer_arguments, train_arguments
    from .common import cost_arguments
    from .common import model_arguments

    p = sub.add_parser("plot", help="plots (PNG or SVG): memory per device by part over a sweep, FLOPs by "
                                    "block, roofline with prefill and decode")
    model_arguments(p)
    p.add_argument("--kind", choices=("memory", "flops", "roofline"), required=True)
    output_arguments(p, required=True, help="FILE.png or FILE.svg (- writes SVG text)")
    p.add_argument("--over", metavar="NAME=VALUES",
                   help="memory: the swept dimension, e.g. s=1024:16384:x2, b=1,2,4,8 (default: the values given)")
    p.add_argument("--phase", choices=("train", "infer"), default="train",
                   help="memory: training (weights, gradients, optimizer, activations; default) or inference "
                        "(weights, KV cache)")
    p.add_argument("--unit", choices=("GB", "GiB"), default="GB", help="memory: GB (10^9 bytes) or GiB (2^30)")
    p.add_argument("--hardware", help="a hardware preset: device memory (memory), peak and bandwidth (roofline)")
    cost_arguments(p, scope=False, precision=False)
    train_arguments(p)
    infer_arguments(p)


def _name(args, model) -> str:
    """The model's name for a title, with its configuration: ``llama (llama-3-8b)``."""
    return model.name + (f" ({args.config})" if args.config else "")


def _values(model, values):
    from ..errors import CostgraphValueError

    if values is None:
        raise CostgraphValueError("a plot needs numbers: give the model's sizes",
                                  hint="--config NAME or --set h=... l=...")
    return values


def _sweep(args, model, values):
    from ._analysis import parse_over

    if args.over is not None:
        import sys

        from ..export.text_report import sweep_warnings

        symbol, points = parse_over(args.over)
        for w in sweep_warnings(values, {symbol: points}):
            print(f"warning: {w}", file=sys.stderr)
        return symbol, points
    symbol = "b" if "b" in model.graph.dims else next(iter(model.symbols))
    if model.graph.dims[symbol].symbol not in values:   # no --over and no value to plot at
        from ..errors import no_value

        raise no_value(d.name for d in model.graph.dims.values() if d.derived is None and d.symbol not in values)
    return symbol, [int(values[model.graph.dims[symbol].symbol])]


def _memory(args):
    from ..export import plots
    from ._analysis import capacity, load, training

    cap = capacity(args)
    if args.phase == "train":
        model, values = load(args)
        values = _values(model, values)
        symbol, points = _sweep(args, model, values)
        _, result = training(args, model, values)
        data = plots.memory_sweep_train(model, result, values, symbol, points, cap, name=_name(args, model))
    else:
        from ..inference import Inference
        from ..inference import load as infer_load, load_hf_config
        from .common import settings

        dims, options = settings(args.set)
        if args.model.endswith(".json"):
            hf = load_hf_config(args.model, profile=args.profile)
            model, values = hf.model, hf.model.values(None, {**hf.values, **dims})
        else:
            model = infer_load(args.model, options=options, profile=args.profile)
            values = model.values(args.config, dims) if (dims or args.config is not None) else None
        values = _values(model, values)
        symbol, points = _sweep(args, model, values)
        inf = Inference(model, weights=args.weights, kv=args.kv, t=args.tp, convention=args.convention,
                        causal=args.causal)
        data = plots.memory_sweep_infer(inf, values, symbol, points, cap, name=_name(args, model))
    return plots.memory_figure(data, args.unit)


def _flops(args):
    from ..choices import activation_precision
    from ..export import plots
    from ._analysis import load

    model, values = load(args)
    costs = model.costs("model", convention=args.convention, causal=args.causal,
                        precision=activation_precision(args.precision))
    return plots.flops_figure(plots.flops_share(costs, _values(model, values), name=_name(args, model)))


def _roofline(args):
    from ..errors import CostgraphValueError
    from ..export import plots
    from ._analysis import infer_given, inference

    if not infer_given(args):
        raise CostgraphValueError("--kind roofline needs an inference setting",
                                  hint="--hardware h100-sxm --prompt 512 --generate 128 [--batch 8]")
    model, rep = inference(args)
    return plots.roofline_figure(plots.roofline(rep, name=_name(args, model)))


def run(args) -> str:
    from pathlib import Path

    from ..errors import CostgraphValueError
    from ..export import plots

    if getattr(args, "reserve", None) is not None:   # trial6: taken (even 'nan') and drawn nowhere
        raise CostgraphValueError("--reserve is the fit verdict's: no plot reads it (memory's line is the whole "
                                  "device memory)",
                                  hint="drop --reserve, or see the verdict with costgraph train/fit --reserve")
    suffix = ".svg" if args.output is None else Path(args.output).suffix.lower()   # -o -: SVG text on stdout
    if suffix not in plots.FORMATS:
        raise CostgraphValueError(f"cannot tell the picture format of {args.output!r}",
                                  hint="name the file .png or .svg")
    if args.kind != "memory" and (args.over is not None or args.phase != "train"):
        raise CostgraphValueError("--over and --phase are for --kind memory")
    from ..optional import need

    need("matplotlib", "plot", "costgraph plot")   # before any work: names the extra when missing
    fig = {"memory": _memory, "flops": _flops, "roofline": _roofline}[args.kind](args)
    if args.output is None:
        return plots.svg_text(fig).rstrip("\n")
    from ._output import write_output

    path = write_output(args, lambda tmp: plots.save(fig, tmp))
    return f"wrote {path} ({args.kind}, {path.stat().st_size:,} bytes)"
