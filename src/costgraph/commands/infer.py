"""``costgraph infer``: prefill and decode FLOPs and bytes, KV cache and
recurrent state, roofline latency, throughput and capacity on a hardware
preset (:mod:`costgraph.inference`). The preset is optional: bytes and FLOPs
need none; ``--peak``/``--bandwidth``/``--memory``/``--link-bandwidth`` give a
device's figures or replace the preset's (:mod:`costgraph.inference.device`)."""

from __future__ import annotations

from .. import choices
from ..infer_options import (MAX_GENERATE, SCOPES, InferOptions, generate_count, page_count,  # noqa: F401 (fit, sweep)
                             prompt_count)
from ..option_fields import add_arguments, from_namespace
from .common import model_arguments


def add_parser(sub) -> None:
    f = sub.add_parser("infer", help="inference: prefill and decode FLOPs and bytes, KV cache, roofline latency, "
                                     "throughput and capacity on a hardware preset")
    model_arguments(f, "a bundled model name, a .cg file or a config.json (decoder-only)",
                     "dimension values or model options (b and s are set by --batch, --prompt, --generate)")
    # the options, declared once (costgraph.infer_options.InferOptions), in --help's order
    add_arguments(f, InferOptions, "hardware", "causal")
    f.add_argument("--format", choices=("text", "json"), default="text")
    add_arguments(f, InferOptions, "peak", "draft")
    f.add_argument("--draft-config", metavar="NAME", help="the draft model's configuration")
    add_arguments(f, InferOptions, "ep")   # to the last field
    from ._launch_hook import add_argument as launch_argument

    launch_argument(f, serving=True)   # --launch FILE: a vllm serve or SGLang launch line


def run(args) -> str:
    from ._analysis import inference_model
    from .common import settings

    dims, options = settings(args.set)
    model, values = inference_model(args.model, args.config, dims, options)
    weights, quantized, keep, shipped = _weights(args, args.keep)
    opts = from_namespace(InferOptions, args, weights=weights, quantized=quantized, keep=keep,
                          **_draft(args, dims, options))
    rep = model.infer(values, opts)
    if shipped is not None:   # a config.json: where the weight dtype came from, what was assumed
        rep.settings.weights_source = "--weights" if args.weights else shipped.source
        rep.warnings += [] if args.weights else list(shipped.warnings)
    return rep.to_json() if args.format == "json" else rep.to_text()


def _weights(args, not_quantized):
    """``(weights, quantized, keep, shipped)``: the weight dtype and which weights it applies to. An
    explicit ``--weights`` wins; else a config.json's ``quantization_config``/``torch_dtype``
    (:mod:`costgraph.language.hf_quant`: its scope and ``modules_to_not_convert`` too); else bf16
    (an unquantized float16 checkpoint too: the same bytes, bf16's peak).
    ``--quantized`` and ``--not-quantized`` (its text ``not_quantized``) override the scope and the kept modules."""
    from dataclasses import replace

    from ..inference.dtypes import derived_weight_dtype
    from ..inference.quantized import keep_names

    shipped = None
    if args.model.endswith(".json"):
        from ..language.hf_config import read_config
        from ..language.hf_quant import shipped as read_shipped

        shipped = read_shipped(read_config(args.model), args.model)
    from_config = shipped is not None and not args.weights
    weights = args.weights or (derived_weight_dtype(shipped.weights, shipped.fields) if from_config
                               else choices.DEFAULT_WEIGHTS)
    if from_config and not weights.quantized and weights.name != choices.DEFAULT_WEIGHTS:
        # an unquantized fp16 checkpoint: the same bytes as bf16; bf16's peak kept (a TPU has no fp16 peak)
        weights = choices.DEFAULT_WEIGHTS
        shipped = replace(shipped, source=shipped.source + " (16-bit weights, figures as bf16: --weights fp16 "
                                                           "for the fp16 peak)")
    quantized = args.quantized or (shipped.quantized if from_config else "linear")
    keep = keep_names(not_quantized) if not_quantized is not None else (shipped.keep if from_config else ())
    return weights, quantized, keep, shipped


def _draft(args, dims: dict, options: dict) -> dict:
    """The draft of speculative decoding (``--draft``, ``--draft-config``) as :meth:`costgraph.Model.infer`
    takes it: the draft model loaded (``--draft mtp`` is the target built with ``option mtp``)."""
    from ..errors import CostgraphError, CostgraphValueError
    from ._analysis import inference_model

    out = {}
    if args.draft_config is not None and args.draft in (None, "mtp"):
        raise CostgraphValueError(f"--draft-config {args.draft_config} names a configuration of --draft MODEL",
                                  hint="give --draft MODEL too (--draft mtp uses the target's configuration)")
    if args.draft == "mtp":
        try:
            model, values = inference_model(args.model, args.config, dims, {**options, "mtp": True})
        except CostgraphError as e:   # the target loaded without it: what failed is the option
            raise CostgraphValueError(f"--draft mtp: model '{args.model}' has no multi-token-prediction heads "
                                      "('option mtp')", hint="a model with 'option mtp' (deepseek_v3), or "
                                                             "--draft MODEL") from e
        out.update(draft=model, draft_values=values, draft_mtp=True)
    elif args.draft is not None:
        model, values = inference_model(args.draft, args.draft_config, {}, {})
        out.update(draft=model, draft_values=values)
    return out
