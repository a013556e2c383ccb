"""``costgraph train --params N``: the model states per device of a bare parameter count
(the ZeRO paper's figures), no model (:func:`costgraph.training.bare_model_states`).
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
    gpus = args.gpus or t * p
    if gpus % (t * p):
        raise CostgraphValueError(f"{gpus} GPUs do not divide into t·p = {t * p}")
    d = gpus // (t * p)
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
