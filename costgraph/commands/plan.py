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
    pl.add_argument("--efficiency", default=choices.DEFAULT_EFFICIENCY, help="fraction of the peak compute reaches (default 0.5)")
    pl.add_argument("--memory", help="device memory instead of the preset's (80GB, 80GiB)")
    pl.add_argument("--precision", default=choices.DEFAULT_POLICY, help="precision policy (default mixed)")
    pl.add_argument("--optimizer", default=choices.DEFAULT_OPTIMIZER)
    add_option(pl, choices.ATTENTION, "--attention")
    pl.add_argument("--top", type=int, default=10, help="how many layouts to show (default 10)")
    pl.add_argument("--no-dropout", action="store_true")
    add_option(pl, choices.PROFILE, "--profile")
    pl.add_argument("--format", choices=("text", "json"), default="text")


def run(args) -> str:
    import json

    from ..cli import _load_any, _parse_rational, _settings
    from ..errors import CostgraphValueError
    from ..hardware import preset
    from ..training.fit import parse_size
    from ..training.plan import plan

    dims, options = _settings(args.set)
    args.model = args.model or ""
    model, values = _load_any(args, dims, options)
    if values is None:
        raise CostgraphValueError("plan needs the model's sizes", hint="give --config NAME or --set h=... l=...")
    if args.gpus <= 0 or args.global_batch <= 0 or args.top <= 0:
        raise CostgraphValueError("--gpus, --global-batch and --top must be positive")
    if args.gpus > 10**6:
        raise CostgraphValueError(f"--gpus {args.gpus:,}: the planner searches up to 1,000,000 devices")
    if any(p.startswith("b=") for p in args.set):
        raise CostgraphValueError("plan chooses the micro-batch b itself", hint="leave b out of --set")
    hw = preset(args.hardware)
    capacity = parse_size(args.memory) if args.memory is not None else hw.memory_bytes
    efficiency = _parse_rational(args.efficiency, "--efficiency")
    if not 0 < efficiency <= 1:
        raise CostgraphValueError(f"--efficiency {args.efficiency} is not a fraction in (0, 1]")
    free = sorted(d.name for d in model.graph.dims.values()
                  if d.derived is None and d.symbol not in values and d.name != "b")
    if free:
        raise CostgraphValueError(f"no value for {', '.join(free)}", hint="give them with --set or --config")
    result = plan(model, values, gpus=args.gpus, hardware=hw, global_batch=args.global_batch, capacity=capacity,
                  efficiency=efficiency, attention=args.attention, policy=args.precision, optimizer=args.optimizer,
                  top=args.top)
    tokens = _parse_rational(args.tokens, "--tokens") if args.tokens is not None else None
    seq = int(values[model.graph.dims["s"].symbol]) if "s" in model.graph.dims else 1
    rows = []
    for c in result.layouts:
        row = c.as_dict()
        if tokens is not None:
            row["train_days"] = float(tokens / (args.global_batch * seq)) * c.step_seconds / 86400
        rows.append(row)
    if args.format == "json":
        return json.dumps({"model": model.name, "gpus": args.gpus, "hardware": hw.key, "global_batch": args.global_batch,
                           "capacity_bytes": capacity, "efficiency": float(efficiency), "considered": result.considered,
                           "refused": result.refused, "layouts": rows}, indent=2)
    from .. import units

    out = [f"{model.name}: layouts on {args.gpus} × {hw.name}, global batch {args.global_batch} sequences; "
           f"device memory {units.with_unit('activation_bytes', capacity)}; compute at {float(efficiency):.0%} of "
           f"{hw.peak_flops_bf16 / 1e12:g} TFLOP/s (BF16 dense)",
           f"{result.considered:,} layouts considered; {len(rows)} shown, fastest first "
           f"(memory of the most-loaded device; step time = max(compute + bubble, DP/ZeRO traffic) + exposed TP/CP/EP/PP communication)", ""]
    from ..tables import table

    heads = ["tp", "pp", "dp", "cp", "ep", "zero", "recompute", "sp", "b", "m", "memory GB", "step s", "MFU"]
    cells = [[r["tp"], r["pp"], r["dp"], r["cp"], r["ep"], r["zero"], r["recompute"], "yes" if r["sp"] else "no",
              r["micro_batch"], r["micro_batches"], f"{r['memory_bytes'] / 1e9:.2f}", f"{r['step_seconds']:.3f}",
              f"{r['mfu']:.1%}"] + ([f"{r['train_days']:.1f}"] if tokens is not None else []) for r in rows]
    if tokens is not None:
        heads.append("days")
    right = ["right"] * len(heads)
    right[6] = right[7] = "left"
    out += table(cells, heads, align=right) if rows else []
    if not rows:
        out.append("  (none fits)")
    out += ["", "refused: " + "; ".join(f"{n:,} {why}" for why, n in result.refused.items() if n),
            "check one with: costgraph train ... --tp T --pp P --cp C --ep E --zero Z --recompute R [--sp] "
            f"--set b=B --micro-batches M --gpus {args.gpus} --hardware {hw.key} --attention {args.attention} "
            f"--precision {args.precision} --optimizer {args.optimizer}"
            + (f" --memory {args.memory}" if args.memory else "") + (" --no-dropout" if args.no_dropout else "")]
    return "\n".join(out)
