"""``costgraph import CONFIG.json | ORG/NAME | MODEL_TYPE | CLASS -o model.cg``: a model file drafted
from the transformers model (needs the ``torch`` extra; :func:`costgraph.drafting.api.draft_model`).
Exit status 0 when the draft's parameters and forward FLOPs equal PyTorch's at both probes, 1 otherwise."""

from __future__ import annotations


def add_parser(sub) -> None:
    from ._output import output_arguments

    p = sub.add_parser("import", help="draft a model file from the transformers model of a config.json "
                                      "(needs the torch extra)",
                       description="Builds the transformers model on the meta device at two probe configurations "
                                   "(every size a product of primes of its own), traces one forward, recognises "
                                   "the blocks (attention, MLP, mixture of experts, norms), folds the layers into "
                                   "a repeat and writes the model file; then compares its parameters and forward "
                                   "FLOPs with PyTorch's at both probes.")
    p.add_argument("model", metavar="SOURCE",
                   help="a config.json, a snapshot folder or Hub id in the local cache, a model_type of the "
                        "installed transformers (llama), or a transformers class (LlamaForCausalLM)")
    p.add_argument("--name", help="the model's name in the file (default: the model_type)")
    p.add_argument("--no-check", action="store_true", help="do not compare with PyTorch")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="json: the draft, its mapping, warnings and checks as one JSON object")
    output_arguments(p, help="write the model file to FILE instead of printing it")


def _checked(draft) -> list[str]:
    """The comparison with PyTorch, as comment lines."""
    lines = []
    for c in draft.checks:
        at = ", ".join(f"{k}={v}" for k, v in c.values.items())
        said = []
        for what, t, g in (("parameters", c.params_torch, c.params_draft),
                           ("forward FLOPs", c.forward_flops_torch, c.forward_flops_draft)):
            said.append(f"{what} exact {t:,}" if t == g else f"{what} torch {t:,} − draft {g:,} = {t - g:+,}")
        if c.forward_flops_counted is not None:
            said.append(f"FlopCounterMode counted {c.forward_flops_counted:,} with every expert on every token: "
                        "compared with k experts per token (the routed-experts convention)")
        lines.append(f"# probe {c.probe + 1} ({at}): {'; '.join(said)}")
    lines.append("# second probe: " + ("the same file" if draft.confirmed else "ANOTHER FILE (see the warnings)"))
    if len(draft.config_params) == 2 and draft.config_params[0] != draft.config_params[1]:
        t, g = draft.config_params
        lines.append(f"# at the config's own sizes: parameters torch {t:,} − draft {g:,} = {t - g:+,}")
    return lines


def run(args) -> tuple[str, int]:
    """The model file (or, with -o, what was written), and 0 when the draft is exact, else 1."""
    import json

    from ..drafting.api import draft_model
    from ..errors import CostgraphValueError

    if args.name is not None and not (args.name.isidentifier() and args.name.isascii()):
        raise CostgraphValueError(f"--name {args.name[:40]!r} is not a model name",
                                  hint="letters, digits and _, not starting with a digit")
    draft = draft_model(args.model, name=args.name, check=not args.no_check)
    status = 0 if draft.exact or (args.no_check and draft.confirmed and not draft.todos) else 1
    if args.format == "json":
        return json.dumps(draft.to_dict(), indent=2), status
    text = draft.text.rstrip("\n") + "\n\n" + "\n".join(_checked(draft)) + "\n"
    if not args.output:
        return text.rstrip("\n"), status
    from ._output import write_output

    write_output(args, lambda tmp: tmp.write_text(text, encoding="utf-8"))
    head = f"wrote {args.output}: model {draft.name} drafted from transformers {draft.torch_class} " \
           f"(model_type {draft.model_type})"
    notes = [f"warning: {w}" for w in draft.warnings]
    return "\n".join([head, *(x[2:] for x in _checked(draft)), *notes]), status
