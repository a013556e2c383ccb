"""``costgraph infer``: prefill and decode FLOPs and bytes, KV cache and
recurrent state, roofline latency, throughput and capacity on a hardware
preset (:mod:`costgraph.inference`). The preset is optional: bytes and FLOPs
need none; ``--peak``/``--bandwidth``/``--memory``/``--link-bandwidth`` give a
device's figures or replace the preset's (:mod:`costgraph.inference.device`)."""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from .common import model_arguments

#: the --quantized scopes (costgraph.inference.quantized.SCOPES; kept here so the parser stays light)
SCOPES = ("linear", "linear+head", "all", "experts")


def add_parser(sub) -> None:
    f = sub.add_parser("infer", help="inference: prefill and decode FLOPs and bytes, KV cache, roofline latency, "
                                     "throughput and capacity on a hardware preset")
    model_arguments(f, "a bundled model name, a .cg file or a config.json (decoder-only)",
                     "dimension values or model options (b and s are set by --batch, --prompt, --generate)")
    f.add_argument("--hardware", help="a hardware preset (costgraph hardware) or my.toml[:NAME]; optional: "
                                      "bytes and FLOPs need none, seconds a peak and bandwidth, capacity memory")
    f.add_argument("--prompt", type=int, required=True, help="prompt tokens per sequence P")
    f.add_argument("--generate", type=int, required=True, help="generated tokens per sequence G")
    f.add_argument("--batch", type=int, default=1, help="concurrent sequences b (default 1)")
    f.add_argument("--tp", type=int, default=1, help="tensor-parallel degree t (default 1)")
    f.add_argument("--weights", default=None, help="weight dtype: bf16 (default; a config.json: what it ships), fp16, "
                                                   "fp8, int8, int4, awq, gptq, gptq-act-order, fp8-per-channel, "
                                                   "fp8-block, mxfp4, nvfp4")
    f.add_argument("--kv", default=choices.DEFAULT_KV, help="KV cache dtype: bf16 (default), fp16, fp8, int8 (per tensor), "
                                                       "int8-per-token-head, q8_0, q4_0")
    f.add_argument("--compute", choices=choices.PEAK_DTYPE.values, help="dtype of the peak (default: the weights')")
    f.add_argument("--page-size", type=int, default=16, help="paged KV cache block size k (default 16, vLLM's)")
    f.add_argument("--reserve", default="0.1", help="fraction of device memory kept free (default 0.1)")
    f.add_argument("--activations", action="store_true", help="add activation traffic to the bytes of each step")
    f.add_argument("--compute-efficiency", default="1", help="fraction of the peak reached (default 1)")
    f.add_argument("--bandwidth-efficiency", default="1", help="fraction of the HBM bandwidth reached (default 1)")
    add_option(f, choices.CONVENTION, "--convention", help="FLOP convention")
    add_option(f, choices.CAUSAL, "--causal", help="attention FLOPs: full square, half (area) or exact (pairs)")
    f.add_argument("--format", choices=("text", "json"), default="text")
    # a device without a preset, or a preset's figures replaced (issue 17, item 1)
    f.add_argument("--peak", help="dense peak FLOP/s of the compute dtype (replaces the preset's), e.g. 121e12")
    f.add_argument("--bandwidth", help="HBM bandwidth in B/s (replaces the preset's), e.g. 300e9")
    f.add_argument("--memory", help="device memory: 24GB (10^9 B), 24GiB (2^30 B) or bytes (replaces the preset's)")
    f.add_argument("--link-bandwidth", help="TP all-reduce link, B/s per direction (replaces the preset's; without a "
                                            "preset its latency is taken as 0), e.g. 450e9")
    # quantization as shipped (issue 17 item 5): which weights a quantized --weights applies to
    f.add_argument("--quantized", choices=SCOPES, default=None,
                   help="which weights a quantized --weights dtype applies to: linear (default: every linear but the "
                        "output head and MoE routers), linear+head, all (also embeddings), experts (MoE experts only, "
                        "as gpt-oss ships MXFP4); a config.json: what it ships")
    f.add_argument("--not-quantized", default=None, metavar="NAMES",
                   help="comma-separated module names kept in 16 bits, as modules_to_not_convert "
                        "(lm_head, model.layers.*.self_attn); a config.json: its own list")


def run(args) -> str:
    from ._analysis import inference_model
    from .common import settings

    dims, options = settings(args.set)
    model, values = inference_model(args.model, args.config, dims, options)
    weights, quantized, keep, shipped = _weights(args)
    rep = model.infer(hardware=args.hardware, prompt=args.prompt, generate=args.generate, batch=args.batch,
                      values=values, tp=args.tp, weights=weights, kv=args.kv, page=args.page_size,
                      reserve=args.reserve, compute=args.compute, convention=args.convention, causal=args.causal,
                      activations=args.activations, compute_efficiency=args.compute_efficiency,
                      bandwidth_efficiency=args.bandwidth_efficiency,
                      peak=args.peak, bandwidth=args.bandwidth, memory=args.memory, link_bandwidth=args.link_bandwidth,
                      quantized=quantized, keep=keep)
    if shipped is not None:   # a config.json: where the weight dtype came from, what was assumed
        rep.settings["weights_source"] = "--weights" if args.weights else shipped.source
        rep.warnings += [] if args.weights else list(shipped.warnings)
    return rep.to_json() if args.format == "json" else rep.to_text()


def _weights(args):
    """``(weights, quantized, keep, shipped)``: the weight dtype and which weights it applies to. An
    explicit ``--weights`` wins; else a config.json's ``quantization_config``/``torch_dtype``
    (:mod:`costgraph.language.hf_quant`: its scope and ``modules_to_not_convert`` too); else bf16
    (an unquantized float16 checkpoint too: the same bytes, bf16's peak).
    ``--quantized`` and ``--not-quantized`` override the scope and the kept modules."""
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
    keep = keep_names(args.not_quantized) if args.not_quantized is not None else (shipped.keep if from_config else ())
    return weights, quantized, keep, shipped
