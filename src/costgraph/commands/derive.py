"""``costgraph derive``: the closed-form parameters, FLOPs and activation memory of a
model (a bundled name, a ``.cg`` file or a Hugging Face ``config.json``), and numbers
with units when given values (:meth:`costgraph.Model.costs`)."""

from __future__ import annotations

from .. import choices
from ..errors import CostgraphValueError
from .common import cost_arguments, download_argument, latex_named, refuse_input_grads, settings


def add_parser(sub) -> None:
    d = sub.add_parser("derive", help="closed-form parameters, FLOPs and activation memory of a model")
    d.add_argument("model", help="a bundled model name (gpt), a path to a .cg file, "
                                 "or a Hugging Face config.json")
    d.add_argument("--scope", default="model",
                   help="model (default), layer, or the path of a repeat group, block or node")
    d.add_argument("--format", choices=("text", "latex", "json"), default="text", type=latex_named("latex"),
                   help="text (default), latex (or tex) or json")
    d.add_argument("--set", nargs="+", action="extend", default=[], metavar="NAME=VALUE",
                   help="dimension values (h=768) or model options (bias=false)")
    d.add_argument("--config", help="a named configuration of the model file (gpt2, gpt3-175b, ...)")
    download_argument(d)   # a Hub id not in the cache: fetch its config.json
    cost_arguments(d, scope=False)   # --convention --precision --causal --profile --no-dropout
    d.add_argument("--attention", choices=choices.ATTENTION.values, default=choices.DERIVE_ATTENTION,
                   help="attention kernel of the activation memory: eager (the default here: Korthikanti et al. "
                        "2022's 34bsh + 5bs^2a per layer keeps the s x s scores) or flash (a fused kernel keeps only "
                        "the output and an fp32 log-sum-exp per row; train and plan default to it)")
    d.add_argument("--breakdown", action="store_true", help="text format: also print the per-node breakdown")
    d.add_argument("--no-breakdown", action="store_true", help="JSON format: leave the breakdown out")


def run(args) -> str:
    from ..model import load
    from ..export.text_report import to_json, to_latex_doc, to_text_doc

    dims, options = settings(args.set)
    note = None
    if args.model.endswith(".json"):
        from ..language.hf_config import load_hf_config

        if options:
            raise CostgraphValueError("options come from the config.json; --set takes dimensions here",
                                      hint="e.g. --set s=2048 b=8")
        if args.config:
            raise CostgraphValueError("--config names a configuration of a model file; a config.json is one already")
        refuse_input_grads(args)
        hf = load_hf_config(args.model, profile=args.profile, dropout=False if args.no_dropout else None)
        model = hf.model
        values = model.values(args.config, {**hf.values, **dims})
        on = [k for k, v in model.graph.options.items() if v is True]
        note = (f"from {args.model}: model_type {hf.model_type} → model '{model.name}'"
                + (f" with {', '.join(on)}" if on else "") + (f", {hf.origin}" if hf.origin else ""))
    else:
        model = load(args.model, dropout=not args.no_dropout, options=options, profile=args.profile,
                     config=args.config, input_grads=args.input_grads)
        values = model.values(args.config, dims) if (dims or args.config is not None) else None
    costs = model.costs(args.scope, convention=args.convention, precision=args.precision, causal=args.causal)
    if args.attention != choices.DERIVE_ATTENTION:
        costs = with_attention(costs, args.attention)
        note = "; ".join(filter(None, [note, f"attention {args.attention}: activation bytes of the fused kernel "
                                              "(the breakdown's rows are the graph's, eager)"]))
    note = "\n".join(filter(None, [note, buffers_note(model, values)]))
    if args.format == "json":
        return to_json(costs, values, breakdown=not args.no_breakdown)
    if args.format == "latex":
        return to_latex_doc(costs)
    return to_text_doc(costs, values, breakdown=args.breakdown, note=note)


def with_attention(costs, attention: str):
    """``costs`` with its activation bytes those of the ``attention`` kernel
    (:func:`costgraph.engine.activations.activation_bytes` over the same scope and precision; the
    per-node breakdown stays the graph's, eager's)."""
    import dataclasses

    from ..engine.activations import activation_bytes

    act = activation_bytes(costs.model.graph, costs._scope, costs.precision, attention=attention)
    return dataclasses.replace(costs, quantities={**costs.quantities, "activation_bytes": act})


def buffers_note(model, values) -> str | None:
    """One line naming the model's buffers (:func:`costgraph.engine.totals.buffers`): not parameters,
    their elements and bytes (at ``values`` when given; the weights' dtype: bf16)."""
    from ..engine.totals import buffers
    from ..export.printing import field_order, to_text

    found = buffers(model.graph)
    if not found:
        return None
    parts = []
    for wid, (n, dtype) in found.items():
        size = 4 if dtype == "fp32" else 2
        part = f"{wid.rsplit('/', 2)[-2]} {to_text(field_order(n))} elements ({dtype or 'bf16'})"
        if values is not None:
            count = int(n.subs(values))
            part += f" = {count:,} elements, {count * size:,} bytes"
        parts.append(part)
    return "buffers, not parameters (as transformers counts them): " + "; ".join(parts)
