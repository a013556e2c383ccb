"""``costgraph train``'s CPU/NVMe offload output and ``--deepspeed-table``: the host and NVMe
bytes of a bare parameter count (``--params``) under ``--offload-optimizer`` /
``--offload-params`` (:func:`costgraph.training.bare.bare_offload`), and DeepSpeed's ZeRO
estimator table (:func:`costgraph.training.bare.deepspeed_document`) for a bare count or a model.
Not a subcommand (the leading ``_`` keeps it out of :func:`costgraph.commands.names`)."""

from __future__ import annotations

from ..errors import CostgraphValueError
from ..option_fields import count_type


def add_arguments(t) -> None:
    """``--deepspeed-table``, ``--gpus-per-node`` and ``--largest-layer-params`` of ``costgraph train``."""
    t.add_argument("--deepspeed-table", action="store_true",
                   help="also print DeepSpeed's ZeRO estimator table (estimate_zero2/zero3_model_states_mem_needs"
                        "_all_cold: every offload row, zero_init 1 and 0) for --zero 2 or 3 and --gpus")
    t.add_argument("--gpus-per-node", type=count_type("--gpus-per-node"), metavar="N",
                   help="GPUs per node for host memory per node and DeepSpeed's table (default: the --hardware "
                        "preset's, else all GPUs on one node)")
    t.add_argument("--largest-layer-params", metavar="N",
                   help="with --params and --deepspeed-table at ZeRO 3: DeepSpeed's largest_layer_params (default 0; "
                        "a model gives its own: its largest module's parameters)")


def _layout(args, d: int):
    from ..parallel.layout import Layout

    return Layout(gpus=d, zero=args.zero, policy=args.precision, optimizer=args.optimizer, hsdp=args.hsdp,
                  offload_optimizer=args.offload_optimizer, offload_params=args.offload_params)


def bare_device(args, per, d: int) -> dict:
    """``weights gradients optimizer total`` that stay on the device for ``per`` parameters a
    device (after TP and PP) and ``d`` data-parallel devices (``--params``)."""
    from ..training.bare import bare_offload

    out = bare_offload(per, _layout(args, d))
    return {"weights": out["weights"], "gradients": out["gradients"], "optimizer": out["optimizer"],
            "total": out["device"]}


def _gpus_per_node(args, gpus: int) -> int:
    if args.gpus_per_node is not None:
        return args.gpus_per_node
    if getattr(args, "hardware", None) is not None:
        from ..hardware import preset

        return min(preset(args.hardware).devices_per_node, gpus)
    return gpus


def bare_extra(args, psi: int) -> dict:
    """The offload and DeepSpeed parts of ``costgraph train --params``: ``offload``
    (host and NVMe bytes per device and per node) and ``deepspeed`` (the table)."""
    import sympy

    from ..arguments import parse_count
    from ..training.bare import bare_offload, deepspeed_document

    if args.offload_activations is not None:
        raise CostgraphValueError("--offload-activations needs a model: --params gives model states only",
                                  hint="name a model (costgraph train llama --config llama-2-7b ...)")
    t, p = args.tp, args.pp
    gpus = args.gpus or t * p
    out = {}
    if args.offload_optimizer != "none" or args.offload_params != "none":
        off = bare_offload(sympy.Rational(psi, t * p), _layout(args, gpus // (t * p)))
        gpn = _gpus_per_node(args, gpus)
        out["offload"] = {"optimizer": args.offload_optimizer, "params": args.offload_params,
                          "gpus_per_node": gpn,
                          **{k: int(sympy.ceiling(off[k])) for k in ("host", "nvme")},
                          **{f"{k}_per_node": int(sympy.ceiling(off[k] * gpn)) for k in ("host", "nvme")}}
    if args.deepspeed_table:
        if args.zero not in (2, 3):
            raise CostgraphValueError("DeepSpeed's estimator tables are for ZeRO 2 and 3", hint="add --zero 2 or --zero 3")
        largest = parse_count(args.largest_layer_params, "--largest-layer-params") \
            if args.largest_layer_params is not None else 0
        out["deepspeed"] = deepspeed_document(psi, stage=args.zero, gpus=gpus, gpus_per_node=_gpus_per_node(args, gpus),
                                              largest_layer_params=largest)
    return out


def model_extra(args, model, values, layout) -> dict:
    """``deepspeed``: DeepSpeed's table for a model (its parameter count, shared weights once, and
    its largest module's parameters) at ``values``."""
    if not args.deepspeed_table:
        return {}
    if args.largest_layer_params is not None:
        raise CostgraphValueError("--largest-layer-params is for --params: a model gives its own")
    if args.zero not in (2, 3):
        raise CostgraphValueError("DeepSpeed's estimator tables are for ZeRO 2 and 3", hint="add --zero 2 or --zero 3")
    from ..training import largest_module_params
    from ..training.bare import deepspeed_document

    P = model.costs("model")["params"].xreplace(values or {})
    L = largest_module_params(model.graph).xreplace(values or {})
    if not (P.is_Integer and L.is_Integer):
        raise CostgraphValueError("--deepspeed-table needs the model's parameter count as a number",
                                  hint="give --config or --set the dimensions")
    gpus = layout.gpus or 1
    return {"deepspeed": deepspeed_document(int(P), stage=args.zero, gpus=gpus,
                                            gpus_per_node=_gpus_per_node(args, gpus), largest_layer_params=int(L))}


def render(args, text: str, extra: dict) -> str:
    """``text`` (the command's output) with ``extra`` added: JSON keys, or text sections."""
    if not extra:
        return text
    if args.format == "json":
        import json

        doc = json.loads(text)
        doc.update(extra)
        return json.dumps(doc, indent=2, ensure_ascii=False)
    from ..numbers import units

    lines = [text]
    off = extra.get("offload")
    if off is not None:
        show = lambda b: units.with_unit("activation_bytes", b)
        lines += ["", f"offload (optimizer {off['optimizer']}, parameters {off['params']}): host memory per device "
                      f"{show(off['host'])}; per node of {off['gpus_per_node']} GPUs {show(off['host_per_node'])}"]
        if off["nvme"]:
            lines.append(f"  NVMe per device {show(off['nvme'])}; per node {show(off['nvme_per_node'])}")
    ds = extra.get("deepspeed")
    if ds is not None:
        lines += ["", f"DeepSpeed's estimator ({ds['source']}; CPU per node, GPU per GPU, GiB printed as GB):",
                  ds["table"]]
    return "\n".join(lines)
