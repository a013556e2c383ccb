"""``costgraph train --params N``: the model states per device of a bare parameter count
(the ZeRO paper's figures), no model (:func:`costgraph.training.bare_model_states`); with
``--tokens``, ``--hardware``/``--peak`` and ``--mfu`` (or ``--achieved``) the training time by
the rule ``6ND/(nX)``, ``8ND/(nX)`` with ``--recompute full``
(:func:`costgraph.training.bare_time.bare_training_time`).
Not a subcommand (the leading ``_`` keeps it out of :func:`costgraph.commands.names`)."""

from __future__ import annotations

from ..arguments import parse_count
from ..errors import CostgraphValueError


def run_bare(args, capacity) -> str:
    """The text or JSON of ``costgraph train --params N`` for the layout options of ``args``;
    ``capacity``: device bytes or None."""
    import json

    import sympy

    from ..numbers import units
    from ..export.exprtree import to_tree
    from ..training import bare_model_states

    psi = parse_count(args.params)
    t, p = args.tp, args.pp
    if args.gpus is not None and args.gpus < 1:
        raise CostgraphValueError(f"--gpus must be a positive whole number, got {args.gpus}", hint="e.g. --gpus 8")
    gpus = args.gpus or t * p
    if gpus % (t * p):
        raise CostgraphValueError(f"{gpus} GPUs do not divide into t·p = {t * p}")
    d = gpus // (t * p)
    timed = _bare_time(args, psi, gpus)
    capacity, memory_from, reserve = _capacity(args, capacity)
    per = sympy.Rational(psi, t * p)
    states = bare_model_states(per, policy=args.precision, optimizer=args.optimizer, zero=args.zero, dp=d,
                               hsdp_group=args.hsdp)
    keys = ("weights", "gradients", "optimizer", "total")
    vals = {k: states[k] for k in keys}
    if args.offload_optimizer != "none" or args.offload_params != "none":   # CPU/NVMe offload: what stays
        from ._offload import bare_device   # on the device (its host and NVMe bytes: commands._offload)

        vals = bare_device(args, per, d)
    if args.format == "json":
        doc = {"params": psi, "plan": {"gpus": gpus, "tp": t, "pp": p, "dp": d, "zero": args.zero,
                                       "precision": args.precision, "optimizer": args.optimizer},
               "memory": {k: {"expr": str(v), "tree": to_tree(v), "value": int(sympy.ceiling(v))}
                          for k, v in vals.items()}}
        if capacity is not None:
            doc["fits"] = {"capacity_bytes": capacity + reserve, "fits": bool(vals["total"] <= capacity),
                           **({"capacity_from": memory_from} if memory_from else {}),
                           **({"reserve_bytes": reserve} if reserve else {})}
        if timed is not None:
            doc["time"] = timed.to_dict()
        return json.dumps(doc, indent=2)
    lines = [f"model states per device for Ψ = {psi:,} parameters: {gpus} GPUs = tp {t} × pp {p} × dp {d}; "
             f"ZeRO {args.zero}; precision '{args.precision}', optimizer '{args.optimizer}'"]
    for k in keys:
        lines.append(f"  {k:<11}{units.with_unit('activation_bytes', int(sympy.ceiling(vals[k])))}")
    if capacity is not None:
        held = f" less a reserve of {units.with_unit('activation_bytes', reserve)} (--reserve)" if reserve else ""
        lines.append(f"device memory {units.with_unit('activation_bytes', capacity + reserve)}"
                     + (f" ({memory_from})" if memory_from else "") + f"{held}: "
                     + ("fits" if vals["total"] <= capacity else "does NOT fit"))
    if timed is not None:
        lines += _time_lines(timed)
    return "\n".join(lines)


def _capacity(args, given):
    """``(usable bytes, the preset figure's source or None, reserve bytes)``: ``given`` (``--memory``) or the
    ``--hardware`` preset's memory under ``--memory-convention`` (:func:`costgraph.runtime_memory.device_memory`,
    as train with a model reads it: 79.22 GiB on an H100 SXM by default), less a ``--reserve`` fraction or size
    (none without it: the states alone against the device); ``(None, None, 0)`` without either."""
    from ..runtime_memory import device_memory

    hw = None
    if args.hardware is not None:
        from ..hardware import preset

        hw = preset(args.hardware)
    seen = device_memory(hw, args.memory_convention, given)
    if seen is None:
        return None, None, 0
    reserve = 0
    if args.reserve is not None:
        from ..training.fit import reserve_bytes

        reserve = reserve_bytes(args.reserve, seen.bytes)
    return seen.bytes - reserve, seen.source if seen.convention != "given" else None, reserve


def _bare_time(args, psi: int, gpus: int):
    """The rule-of-thumb time when a rate or tokens are asked for (None otherwise: --hardware
    alone gives the device memory the states are checked against)."""
    asked = (args.tokens, args.mfu, args.achieved, args.price)
    if all(v is None for v in asked) and args.recompute == "none":
        return None
    from ..training.bare_time import bare_training_time

    return bare_training_time(psi, tokens=args.tokens, gpus=gpus, hardware=args.hardware, peak=args.peak,
                              mfu=args.mfu, achieved=args.achieved, recompute=args.recompute, price=args.price)


def _time_lines(r) -> list[str]:
    """The text of a :class:`~costgraph.training.bare_time.BareTime`."""
    from ..numbers.units import decimal

    rate = (f"achieved {float(r.achieved):.4g} FLOP/s per device" if r.achieved is not None else
            f"peak {float(r.peak):.4g} FLOP/s ({r.hardware or '--peak'}, dense BF16) × MFU {float(r.mfu):g}")
    why = "full recomputation: one more forward" if r.factor == 8 else "forward + backward, no recomputation"
    lines = [f"training time, rule of thumb {r.factor}·N·D / (n·X) ({why}; no attention-score FLOPs; "
             f"for a mixture of experts N must be the active parameters):",
             f"  N = {r.params:,} parameters, D = {float(r.tokens):.4g} tokens, n = {r.gpus} GPUs, X = {rate}",
             f"  FLOPs        {float(r.flops):.4g}",
             f"  time         {decimal(r.seconds, 0)} s = {decimal(r.days)} days",
             f"  GPU-hours    {decimal(r.gpu_hours, 0)}"]
    if r.price is not None:
        lines.append(f"  cost         {decimal(r.gpu_hours * r.price)}")
    return lines
