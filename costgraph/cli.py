"""The ``costgraph`` command (argparse, from the standard library).

``costgraph derive MODEL`` prints the closed-form costs of a bundled model
(``gpt``) or a ``.cg`` file, and numbers with units when given values::

    costgraph derive gpt --scope layer --format latex
    costgraph derive gpt --config gpt2
    costgraph derive gpt --scope model --set h=768 l=12 a=12 V=50257 s=1024 s_max=1024 b=1 --format json

``costgraph list`` names the bundled models and their configurations;
``costgraph ops`` lists the operators a model file can call.

A mistake in the input prints a located message and exits with status 2,
with no traceback.

``--help``, ``--version``, ``list`` and ``ops`` do not import SymPy (nor
NetworkX): this module imports only light modules at the top, and ``derive``
imports the engine when it runs.
"""

from __future__ import annotations

import argparse
import re
import sys

from . import choices
from .choices import add_option
from . import __version__
from .errors import CostgraphError, CostgraphValueError

_SETTING = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=([0-9][0-9_]*|true|false)$")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="costgraph", description="Symbolic cost models of Transformer architectures.")
    p.add_argument("--version", action="version", version=f"costgraph {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("derive", help="closed-form parameters, FLOPs and activation memory of a model")
    d.add_argument("model", help="a bundled model name (gpt), a path to a .cg file, "
                                 "or a Hugging Face config.json")
    d.add_argument("--scope", default="model",
                   help="model (default), layer, or the path of a repeat group, block or node")
    d.add_argument("--format", choices=("text", "latex", "json"), default="text")
    d.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="dimension values (h=768) or model options (bias=false)")
    d.add_argument("--config", help="a named configuration of the model file (gpt2, gpt3-175b, ...)")
    add_option(d, choices.CONVENTION, "--convention",
                   help="FLOP convention: matmul (matrix products only; default) or all")
    add_option(d, choices.PRECISION, "--precision",
                   help="bytes per element of activations (bf16: 2; masks 1 byte)")
    add_option(d, choices.CAUSAL, "--causal",
                   help="attention FLOPs over the full s×s square (default), the causal mask's kept pairs as an area (half) or whole pairs (exact)")
    d.add_argument("--no-dropout", action="store_true", help="train without dropout: no dropout masks")
    add_option(d, choices.PROFILE, "--profile",
                   help="what is kept for backward: Korthikanti et al. 2022 (default) or what PyTorch "
                        "autograd keeps in Hugging Face's eager bf16 code")
    d.add_argument("--breakdown", action="store_true", help="text format: also print the per-node breakdown")
    d.add_argument("--no-breakdown", action="store_true", help="JSON format: leave the breakdown out")
    _train_parser(sub)
    from . import commands

    for name in commands.names():
        commands.module(name).add_parser(sub)
    sub.add_parser("list", help="bundled models and their configurations")
    sub.add_parser("ops", help="operators a model file can call")
    return p


def _model_arguments(p, model_help: str, set_help: str, optional: bool = False) -> None:
    """The model, ``--config`` and ``--set`` arguments shared by train, plan and infer."""
    p.add_argument("model", nargs="?" if optional else None, help=model_help)
    p.add_argument("--config", help="a named configuration of the model file")
    p.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE", help=set_help)


def _train_parser(sub) -> None:
    t = sub.add_parser("train", help="training memory per device for a parallel layout (ZeRO, TP/SP/PP/CP/EP, "
                                     "recomputation), and whether it fits")
    _model_arguments(t, "a bundled model name, a .cg file or a config.json (or --params N for a bare "
                        "parameter count)", "dimension values (b is the micro-batch) or model options", optional=True)
    t.add_argument("--params", help="a bare parameter count Ψ instead of a model (7.5e9): model states only")
    from .commands._analysis import train_arguments

    train_arguments(t)   # the layout options, shared with report and plot
    t.add_argument("--lora", type=int, metavar="R", help="LoRA adapters of rank R; the base is frozen")
    t.add_argument("--lora-targets", nargs="+", default=list(choices.DEFAULT_LORA_TARGETS), metavar="NAME",
                   help="linears to adapt: node names, path globs, or all-linear (default q_proj v_proj)")
    t.add_argument("--quantize", choices=("nf4", "nf4-double", "int8"),
                   help="QLoRA: the frozen base's linear weights quantized (bitsandbytes layouts)")
    t.add_argument("--hardware", help="a hardware preset (costgraph hardware lists them): peak FLOP/s and "
                                      "device memory")
    t.add_argument("--peak", help="peak FLOP/s per device (instead of a preset's dense BF16 peak), e.g. 989.4e12")
    t.add_argument("--mfu", help="assumed model FLOPs utilization, e.g. 0.45: gives step time and training time")
    t.add_argument("--achieved", help="achieved (hardware) FLOP/s per device, e.g. 140e12 (Narayanan §5.1)")
    t.add_argument("--tokens", help="training tokens D, e.g. 300e9: days, GPU-hours, PF-days")
    t.add_argument("--price", help="price per GPU-hour (any currency), e.g. 2.5")
    t.add_argument("--global-batch", type=int, help="sequences per step: sets m = B / (b·d)")
    t.add_argument("--efficiency", default=choices.DEFAULT_EFFICIENCY, help="with --hardware: the fraction of the peak the compute "
                                                        "kernels reach in the step-time model (default 0.5)")
    add_option(t, choices.CONVENTION, "--convention", help="FLOP convention")
    add_option(t, choices.CAUSAL, "--causal", help="attention FLOPs: full square, half (area) or exact (pairs)")
    t.add_argument("--no-router", action="store_true", help="leave out MoE router FLOPs (as Megatron-LM)")
    t.add_argument("--megatron", action="store_true",
                   help="also show Megatron-LM's theoretical_memory_usage.py estimate beside costgraph's first stage")
    t.add_argument("--no-dropout", action="store_true", help="train without dropout")
    add_option(t, choices.PROFILE, "--profile")
    t.add_argument("--scope", choices=("model", "layer"), default="model")
    t.add_argument("--format", choices=("text", "json"), default="text")


def _settings(pairs: list[str]) -> tuple[dict[str, int], dict[str, bool]]:
    from .parser import check_number

    dims, options = {}, {}
    for pair in pairs:
        m = _SETTING.match(pair)
        if not m:
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=-[0-9]", pair[:60]):
                raise CostgraphValueError(f"--set {pair[:40]!r}: a dimension is a positive whole number",
                                          hint="a dimension counts something: 1, 2, 3, ...")
            raise CostgraphValueError(f"cannot read --set {pair!r}",
                                      hint="write NAME=VALUE with a whole number (h=768) or true/false (bias=false)")
        name, value = m.groups()
        if name in dims or name in options:
            raise CostgraphValueError(f"--set gives '{name}' twice", hint="give each name once")
        if value in ("true", "false"):
            options[name] = value == "true"
        else:
            dims[name] = check_number(value, error=_set_error(pair))
    return dims, options


def _set_error(pair: str):
    shown = pair if len(pair) <= 40 else pair[:36] + "..."
    def error(message: str, loc=None):
        return CostgraphValueError(f"cannot read --set {shown!r}: {message}")
    return error


def _derive(args) -> str:
    from .model import load
    from .report import to_json, to_latex_doc, to_text_doc

    dims, options = _settings(args.set)
    note = None
    if args.model.endswith(".json"):
        from .hf_config import load_hf_config

        if options:
            raise CostgraphValueError("options come from the config.json; --set takes dimensions here",
                                      hint="e.g. --set s=2048 b=8")
        if args.config:
            raise CostgraphValueError("--config names a configuration of a model file; a config.json is one already")
        hf = load_hf_config(args.model, profile=args.profile, dropout=False if args.no_dropout else None)
        model = hf.model
        values = model.values(args.config, **{**hf.values, **dims})
        on = [k for k, v in model.graph.options.items() if v is True]
        note = (f"from {args.model}: model_type {hf.model_type} → model '{model.name}'"
                + (f" with {', '.join(on)}" if on else ""))
    else:
        model = load(args.model, dropout=not args.no_dropout, options=options, profile=args.profile,
                     config=args.config)
        values = model.values(args.config, **dims) if (dims or args.config is not None) else None
    costs = model.costs(args.scope, convention=args.convention, precision=args.precision, causal=args.causal)
    if args.format == "json":
        return to_json(costs, values, breakdown=not args.no_breakdown)
    if args.format == "latex":
        return to_latex_doc(costs)
    return to_text_doc(costs, values, breakdown=args.breakdown, note=note)


def _load_any(args, dims, options):
    """A model by name, .cg path or config.json, and its values (None when none given)."""
    from .model import load

    if args.model.endswith(".json"):
        from .hf_config import load_hf_config

        if options:
            raise CostgraphValueError("options come from the config.json; --set takes dimensions here")
        if args.config:
            raise CostgraphValueError("--config names a configuration of a model file; a config.json is one already")
        hf = load_hf_config(args.model, profile=args.profile,
                            dropout=False if getattr(args, "no_dropout", False) else None)
        return hf.model, hf.model.values(None, **{**hf.values, **dims})
    model = load(args.model, dropout=not args.no_dropout, options=options, profile=args.profile, config=args.config)
    return model, (model.values(args.config, **dims) if (dims or args.config is not None) else None)


def _train(args) -> str:
    from .training.fit import parse_size
    from .training.report import to_json_doc as train_json, to_text_doc as train_text

    dims, options = _settings(args.set)
    capacity = parse_size(args.memory) if args.memory is not None else None
    if args.lora_targets != ["q_proj", "v_proj"] and args.lora is None:
        raise CostgraphValueError("--lora-targets names where LoRA adapters go: it needs --lora R")
    if args.params is not None:
        if args.model is not None:
            raise CostgraphValueError("give a model or --params, not both")
        model_only = [name for name, on in (("--lora", args.lora is not None), ("--quantize", args.quantize),
                                            ("--recompute", args.recompute != "none"), ("--sp", args.sp),
                                            ("--micro-batches", args.micro_batches is not None),
                                            ("--cp", args.cp != 1), ("--ep", args.ep != 1),
                                            ("--attention", args.attention != "eager"), ("--scope", args.scope != "model"),
                                            ("--set", bool(args.set)), ("--config", args.config is not None),
                                            ("--hardware", args.hardware is not None)) if on]
        if model_only:
            raise CostgraphValueError(f"{', '.join(model_only)} {'needs' if len(model_only) == 1 else 'need'} a model: "
                                      "--params gives model states only",
                                      hint="name a model (costgraph train llama --config llama-2-7b ...)")
        return _train_bare(args, capacity)
    if args.model is None:
        raise CostgraphValueError("no model given", hint="costgraph train gpt --config gpt2 ..., or --params 7.5e9")
    model, values = _load_any(args, dims, options)
    hardware = None
    if args.hardware is not None:
        from .hardware import preset

        hardware = preset(args.hardware)
        if capacity is None:
            capacity = hardware.memory_bytes
    micro_batches = args.micro_batches
    if args.global_batch is not None:
        if args.micro_batches is not None:
            raise CostgraphValueError("give --global-batch or --micro-batches, not both",
                                      hint="the global batch sets m = B / (b·d)")
        micro_batches = _micro_batches(args, model, values)
    layout = train_layout(args, micro_batches)
    if values is not None:
        from .training.validity import check_layout

        check_layout(model.graph, layout.filled(), values)
    result = model.train(layout=layout, scope=args.scope)
    extra = {"profile": args.profile, "dropout": not args.no_dropout, "memory": capacity, "lora": args.lora,
             "lora_targets": args.lora_targets if args.lora else None, "quantization": args.quantize}
    fits = training_fits(model, result, values, capacity, args.scope)
    compute = _compute(args, model, layout, hardware) if args.scope == "model" else None
    from .report import warnings as value_warnings

    notes = value_warnings(None, values) + result.warnings
    beside = None
    if args.megatron:
        from .training.megatron import megatron_beside

        beside = megatron_beside(model, values, layout)
    if args.format == "json":
        return train_json(model, result, values, args.scope, extra, fits, beside, compute, notes)
    return train_text(model, result, values, args.scope, extra, fits, beside, compute, notes)


def train_layout(args, micro_batches=None):
    """The :class:`~costgraph.training.memory.Layout` of ``costgraph train``'s layout options in
    ``args`` (``tp pp cp ep etp gpus sp zero schedule virtual_stages recompute attention precision
    optimizer hsdp no_loss lora lora_targets quantize``); ``micro_batches``: m, None for the
    default (p). Shared with ``costgraph report`` and ``costgraph plot``."""
    from .training.memory import Layout

    pol = args.precision
    return Layout(t=args.tp, p=args.pp, c=args.cp, e=args.ep, etp=args.etp, gpus=args.gpus, sp=args.sp,
                  zero=args.zero, m=micro_batches, schedule=args.schedule, v=args.virtual_stages,
                  recompute=args.recompute, attention=args.attention, policy=pol, optimizer=args.optimizer,
                  precision="fp32" if pol == "fp32" else "bf16", hsdp=args.hsdp, loss=not args.no_loss,
                  lora_rank=args.lora, quantization=args.quantize,
                  lora_targets=args.lora_targets[0] if args.lora_targets == ["all-linear"] else tuple(args.lora_targets))


def training_fits(model, result, values, capacity, scope: str = "model") -> dict | None:
    """The fit verdict of ``costgraph train --memory``: ``{capacity_bytes, fits, headroom_bytes,
    largest_b, largest_s}`` for the most-loaded device of ``result`` (a TrainingMemory), or None
    without a capacity or without every value. Shared with ``costgraph report``."""
    import sympy

    from .training.fit import largest_fitting

    if capacity is None or values is None:
        return None
    total = result.most_loaded(values).memory["total"]
    if not total.free_symbols <= set(values):
        return None
    used = int(sympy.ceiling(total.xreplace(values)))
    fits = {"capacity_bytes": capacity, "fits": used <= capacity, "headroom_bytes": capacity - used}
    worst = [st.memory["total"] for st in result.stages]
    for name in ("b", "s"):   # the largest micro-batch, and the longest sequence, that fit
        info = model.graph.dims.get(name)
        if info is not None and info.derived is None and scope == "model":
            best = [largest_fitting(e, info.symbol, values, capacity) for e in worst]
            fits[f"largest_{name}"] = None if None in best else min(best)
    return fits


def _micro_batches(args, model, values) -> int:
    """``m`` from ``--global-batch B``: B = b·m·d sequences per step."""
    if values is None or "b" not in model.graph.dims or model.graph.dims["b"].symbol not in values:
        raise CostgraphValueError("--global-batch needs the micro-batch b", hint="give --config or --set b=N")
    if args.gpus is None:
        raise CostgraphValueError("--global-batch needs --gpus (to know the data-parallel degree)")
    b = int(values[model.graph.dims["b"].symbol])
    per = args.tp * args.pp * args.cp
    if per <= 0 or args.gpus % per:
        raise CostgraphValueError(f"{args.gpus} GPUs do not divide into t·p·c = {per}")
    d = args.gpus // per
    if args.global_batch <= 0 or args.global_batch % (b * d):
        raise CostgraphValueError(f"the global batch {args.global_batch} is not a multiple of b·d = {b}·{d}",
                                  hint="B = b × m × d sequences per step")
    return args.global_batch // (b * d)


def _compute(args, model, layout, hardware):
    """FLOPs, time and utilization sections (costgraph.training.compute)."""
    from .training.compute import compute_summary

    peak = _parse_rational(args.peak, "--peak") if args.peak is not None else (
        hardware.peak_flops_bf16 if hardware is not None else None)
    mfu = _parse_rational(args.mfu, "--mfu") if args.mfu is not None else None
    achieved = _parse_rational(args.achieved, "--achieved") if args.achieved is not None else None
    if mfu is not None and achieved is not None:
        raise CostgraphValueError("give --mfu or --achieved, not both")
    if mfu is not None and not 0 < mfu <= 1:
        raise CostgraphValueError(f"--mfu {args.mfu} is not a fraction in (0, 1]")
    if mfu is not None and peak is None:
        raise CostgraphValueError("--mfu needs a peak: --hardware NAME or --peak FLOPS")
    for name, v in (("--achieved", achieved), ("--peak", peak)):
        if v is not None and v <= 0:
            raise CostgraphValueError(f"{name} must be positive")
    if achieved is not None and peak is not None and achieved > peak:
        raise CostgraphValueError(f"--achieved {args.achieved} FLOP/s is above the peak ({float(peak):.4g} FLOP/s)",
                                  hint="achieved FLOP/s per device cannot pass the dense peak")
    tokens = _parse_rational(args.tokens, "--tokens") if args.tokens is not None else None
    price = _parse_rational(args.price, "--price") if args.price is not None else None
    for name, v in (("--tokens", tokens), ("--price", price)):
        if v is not None and v <= 0:
            raise CostgraphValueError(f"{name} must be positive")
    if (tokens is not None or price is not None) and mfu is None and achieved is None:
        raise CostgraphValueError("--tokens and --price need a rate: --mfu (with a peak) or --achieved")
    if args.efficiency != "0.5" and hardware is None:
        raise CostgraphValueError("--efficiency is for the step-time model on a hardware preset: add --hardware")
    out = compute_summary(model.graph, layout.filled(), peak=peak, mfu=mfu, achieved=achieved, tokens=tokens,
                          price=price, convention=args.convention, causal=args.causal, router=not args.no_router)
    if hardware is not None:
        from .parallel.communication import communication

        efficiency = _parse_rational(args.efficiency, "--efficiency")
        if not 0 < efficiency <= 1:
            raise CostgraphValueError(f"--efficiency {args.efficiency} is not a fraction in (0, 1]")
        if layout.lora_rank is None:
            from .training.steptime import step_time

            cols = communication(model.graph, layout.filled())
            st = step_time(model.graph, layout, hardware, efficiency=efficiency)
            out["communication"] = {k: {"bytes": c.bytes, "seconds": st["by_kind"][k], "op": c.op, "group": c.group}
                                    for k, c in cols.items()}
            out["step"] = {k: v for k, v in st.items() if k != "by_kind"}
            out["efficiency"] = efficiency
    return out


def _parse_rational(text: str, what: str):
    """``0.45``, ``140e12``, ``2.5`` → an exact SymPy Rational (never evaluated as code)."""
    import sympy

    m = re.fullmatch(r"\s*([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]{1,2}))?\s*", text or "")
    if not m or len(text) > 40:
        raise CostgraphValueError(f"cannot read {what} {text[:40]!r}", hint="a number such as 0.45, 2.5 or 140e12")
    frac = m.group(2) or ""
    return sympy.Rational(int(m.group(1) + frac), 10 ** len(frac)) * sympy.Rational(10) ** int(m.group(3) or 0)


def _train_bare(args, capacity) -> str:
    import json

    import sympy

    from . import units
    from .export.exprtree import to_tree
    from .training import bare_model_states

    psi = _parse_count(args.params)
    t, p = args.tp, args.pp
    gpus = args.gpus or t * p
    if gpus % (t * p):
        raise CostgraphValueError(f"{gpus} GPUs do not divide into t·p = {t * p}")
    d = gpus // (t * p)
    per = sympy.Rational(psi, t * p)
    states = bare_model_states(per, policy=args.precision, optimizer=args.optimizer, zero=args.zero, dp=d,
                               hsdp_group=args.hsdp)
    keys = ("weights", "gradients", "optimizer", "total")
    vals = {k: states[k] for k in keys}
    if args.format == "json":
        doc = {"params": psi, "plan": {"gpus": gpus, "tp": t, "pp": p, "dp": d, "zero": args.zero,
                                       "precision": args.precision, "optimizer": args.optimizer},
               "memory": {k: {"expr": str(v), "tree": to_tree(v), "value": int(sympy.ceiling(v))}
                          for k, v in vals.items()}}
        if capacity is not None:
            doc["fits"] = {"capacity_bytes": capacity, "fits": bool(vals["total"] <= capacity)}
        return json.dumps(doc, indent=2)
    lines = [f"model states per device for Ψ = {psi:,} parameters: {gpus} GPUs = tp {t} × pp {p} × dp {d}; "
             f"ZeRO {args.zero}; precision '{args.precision}', optimizer '{args.optimizer}'"]
    for k in keys:
        lines.append(f"  {k:<11}{units.with_unit('activation_bytes', int(sympy.ceiling(vals[k])))}")
    if capacity is not None:
        lines.append(f"device memory {units.with_unit('activation_bytes', capacity)}: "
                     + ("fits" if vals["total"] <= capacity else "does NOT fit"))
    return "\n".join(lines)


def _parse_count(text: str, flag: str = "--params") -> int:
    """``7.5e9`` or ``7_500_000_000`` → 7500000000 (a positive whole number); errors name ``flag``."""
    m = re.fullmatch(r"\s*([0-9][0-9_]*)(?:\.([0-9]+))?(?:[eE]([0-9]{1,2}))?\s*", text or "")
    if not m:
        raise CostgraphValueError(f"cannot read {flag} {text[:40]!r}", hint="a whole number, e.g. 7.5e9 or 7500000000")
    whole, frac, exp = m.group(1).replace("_", ""), m.group(2) or "", int(m.group(3) or 0)
    if len(whole) + len(frac) > 30:
        raise CostgraphValueError(f"{flag} is too large")
    num, den = int(whole + frac) * 10 ** exp, 10 ** len(frac)
    if num % den or num == 0:
        raise CostgraphValueError(f"{flag} {text!r} is not a positive whole number")
    return num // den


def _list() -> str:
    """The bundled models and the configurations each file defines, read from
    its syntax tree (parsing needs no SymPy; building would). Parsing them all
    takes longer than the rest of the command, so the answer is kept in the
    user's cache folder, keyed by a hash of the grammar and the files."""
    import hashlib

    from .resources import MODEL_SUFFIX, bundled_model, bundled_model_names, grammar_text

    texts = {name: bundled_model(name).read_text(encoding="utf-8") for name in bundled_model_names()}
    key = hashlib.sha256("\0".join([__version__, grammar_text(), *(f"{n}\0{t}" for n, t in texts.items())])
                         .encode("utf-8", "surrogatepass")).hexdigest()
    cache = _cache_file("list", key)
    if cache is not None:
        try:
            return cache.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):   # not there yet, or unreadable: parse
            pass
    return _list_parsed(texts, MODEL_SUFFIX, cache)


def _list_parsed(texts: dict[str, str], suffix: str, cache) -> str:
    from .parser import parse

    lines = []
    for name, text in texts.items():
        tree = parse(text, f"{name}{suffix}")
        lines.append(f"{name}: configurations {', '.join(c.name for c in tree.configs) or '(none)'}")
    out = "\n".join(lines)
    if cache is not None:
        import os

        try:   # write whole or not at all: another process may read it meanwhile
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
            tmp.write_text(out, encoding="utf-8")
            os.replace(tmp, cache)
        except OSError:
            pass
    return out


def _cache_file(kind: str, key: str):
    """``$XDG_CACHE_HOME/costgraph/<kind>-<key>`` (default ``~/.cache``), or None
    when there is no such folder to use (``COSTGRAPH_NO_CACHE=1`` turns it off)."""
    import os
    from pathlib import Path

    if os.environ.get("COSTGRAPH_NO_CACHE"):
        return None
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home != "~" else "")
    if not os.path.isabs(base):
        return None
    return Path(base) / "costgraph" / f"{kind}-{key}"


def _ops() -> str:
    """``costgraph ops``: each operator's signature, summary and traits (its
    layout under tensor parallelism, its roles), then what the trait names
    mean; read from the ``@op`` declarations without importing SymPy."""
    from .ops import catalogue
    from .ops.registry import LAYOUTS, REQUIRED, ROLES, describe_traits

    lines = []
    for spec in catalogue():
        params = ", ".join(p.name if p.default is REQUIRED else f"{p.name}={str(p.default).lower()}"
                           for p in spec.params)
        lines.append(f"{spec.name}({params})\n    {spec.summary}\n    {describe_traits(spec)}")
    lines.append("\nlayouts (how an operator's output is split under --tp):")
    lines += [f"  {name}: {text}" for name, text in LAYOUTS.items()]
    lines.append("roles:")
    lines += [f"  {name}: {text}" for name, text in ROLES.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``costgraph`` console script; returns the exit status:
    0, or 2 for a mistake in the input (the located message is on stderr; no
    traceback), 3 for a bug in costgraph itself, 130 when interrupted."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:   # argparse has printed usage (status 2), --help or --version (0)
        return e.code if isinstance(e.code, int) else 2
    try:
        if args.command == "derive":
            out = _derive(args)
        elif args.command == "train":
            out = _train(args)
        elif args.command == "list":
            out = _list()
        elif args.command == "ops":
            out = _ops()
        else:   # a subcommand of costgraph.commands
            from . import commands

            out = commands.module(args.command).run(args)
            if isinstance(out, tuple):
                out, status = out
                print(out)
                return status
    except CostgraphError as e:
        print(e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:   # a bug, not the user's mistake: say so, without a traceback
        print(f"costgraph: internal error: {type(e).__name__}: {e}\n"
              "this is a bug in costgraph; please report it with the command that caused it", file=sys.stderr)
        return 3
    try:
        print(out)
    except BrokenPipeError:
        pass
    return 0


def run() -> None:
    """Console-script wrapper: exit with :func:`main`'s status."""
    sys.exit(main())


if __name__ == "__main__":
    run()
