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
    f.add_argument("--prompt", type=prompt_count, required=True,
                   help="prompt tokens per sequence P: a whole number, e.g. 2048, 1e7 or 10**7 (at most 10**15)")
    f.add_argument("--generate", type=generate_count, required=True,
                   help="generated tokens per sequence G: a whole number, e.g. 1000, 1e12 or 10**12 (at most 10**15)")
    f.add_argument("--batch", type=int, default=1, help="concurrent sequences b (default 1)")
    f.add_argument("--tp", type=int, default=1, help="tensor-parallel degree t (default 1)")
    f.add_argument("--weights", default=None, help="weight dtype: bf16 (default; a config.json: what it ships), fp16, "
                                                   "fp8, int8, int4, awq, gptq, gptq-act-order, fp8-per-channel, "
                                                   "fp8-block, mxfp4, nvfp4")
    f.add_argument("--kv", default=choices.DEFAULT_KV, help="KV cache dtype: bf16 (default), fp16, fp8, int8 (per tensor), "
                                                       "int8-per-token-head, q8_0, q4_0")
    f.add_argument("--compute", choices=choices.PEAK_DTYPE.values, help="dtype of the peak (default: the weights')")
    f.add_argument("--page-size", type=page_count, default=16,
                   help="paged KV cache block size k in tokens (default 16, vLLM's): a whole number, e.g. 32, 1e3 "
                        "or 2**10 (at most 10**15)")
    f.add_argument("--reserve", default=None, help="fraction of device memory kept free (default 0.1)")
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
    # serving as runtimes report it (costgraph.inference.capacity, .prefill_modes, .speculative)
    f.add_argument("--gpu-memory-utilization", metavar="U",
                   help=f"share of device memory vLLM uses (default {choices.GPU_MEMORY_UTILIZATION}: "
                        "the same setting as --reserve, = 1 - reserve)")
    f.add_argument("--kv-memory", metavar="SIZE", help="KV cache memory as given to vLLM (kv_cache_memory_bytes) "
                   "or read from its log line 'Available KV cache memory', e.g. 6.51GiB; default: profiled")
    f.add_argument("--max-num-batched-tokens", type=int, metavar="N",
                   help="vLLM's token budget per step (default as vllm serve: 8192 on >= 70 GiB non-A100 "
                        "devices, else 2048); the activation profile's forward")
    f.add_argument("--max-num-seqs", type=int, metavar="N", help="vLLM's sequences per step (default 1024 / 256, "
                                                                 "as --max-num-batched-tokens)")
    f.add_argument("--non-torch-memory", metavar="SIZE",
                   help=f"memory outside PyTorch in vLLM's profile (default {choices.NON_TORCH_MEMORY})")
    f.add_argument("--max-model-len", type=int, metavar="N", help="tokens per request of vLLM's maximum "
                                                                   "concurrency (default P + G); llama.cpp's n_ctx")
    choices.add_option(f, choices.RUNTIME, help="whose start-up KV cache figures to print: " + choices.RUNTIME.help())
    f.add_argument("--shared-prefix", type=int, metavar="S",
                   help="prefix caching: the first S prompt tokens are shared by all sequences")
    f.add_argument("--chunk", type=int, metavar="C", help="chunked prefill: prompts prefilled C tokens a step")
    f.add_argument("--speculative-tokens", type=int, metavar="K", help="speculative decoding: tokens proposed per step")
    f.add_argument("--acceptance", metavar="ALPHA", help="speculative decoding: per-token acceptance rate in [0, 1], e.g. 0.7 or 1/3 (exact)")
    f.add_argument("--draft", metavar="MODEL", help="speculative decoding's draft: a bundled model, .cg file or "
                                                    "config.json, or 'mtp' (the target's MTP heads)")
    f.add_argument("--draft-config", metavar="NAME", help="the draft model's configuration")
    # parallel serving (costgraph.inference.parallel)
    f.add_argument("--ep", type=int, default=1, help="expert-parallel degree e: 1 (default) or --tp")
    f.add_argument("--dp-attention", type=int, default=1,
                   help="attention data-parallel ranks d (SGLang): attention-TP = tp/d, b/d sequences each")
    f.add_argument("--pp", type=int, default=1, help="pipeline stages p (p micro-batches of b in flight)")
    f.add_argument("--tp-overlap", choices=("none", "full"), default="none",
                   help="collectives after the ops (none, default) or hidden under them (full)")
    from ._launch_hook import add_argument as launch_argument

    launch_argument(f, serving=True)   # --launch FILE: a vllm serve or SGLang launch line


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
                      quantized=quantized, keep=keep, **_serving(args, dims, options), **serving_kwargs(args))
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


def _serving(args, dims: dict, options: dict) -> dict:
    """The serving keywords of :meth:`costgraph.Model.infer` from the flags (the draft model
    loaded: ``--draft mtp`` is the target built with ``option mtp``)."""
    from ..errors import CostgraphError, CostgraphValueError
    from ._analysis import inference_model

    out = dict(gpu_memory_utilization=args.gpu_memory_utilization, kv_memory=args.kv_memory,
               max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
               non_torch_memory=args.non_torch_memory, max_model_len=args.max_model_len,
               shared_prefix=args.shared_prefix, chunk=args.chunk, speculative_tokens=args.speculative_tokens,
               acceptance=args.acceptance)
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


def serving_kwargs(args) -> dict:
    """The parallel-serving keyword arguments of ``Model.infer`` (only those not at their default)."""
    got = dict(ep=args.ep, dp_attention=args.dp_attention, pp=args.pp, tp_overlap=args.tp_overlap,
               runtime=getattr(args, "runtime", choices.RUNTIME.default))
    default = {"tp_overlap": "none", "runtime": choices.RUNTIME.default}
    return {k: v for k, v in got.items() if v != default.get(k, 1)}


#: the most generated tokens --generate takes (the closed form takes any; 10^15 is past any serving run)
MAX_GENERATE = 10**15


def prompt_count(text: str) -> int:
    """``--prompt``: read as :func:`generate_count` reads ``--generate`` (``1e7``, ``10**7``), at most
    :data:`MAX_GENERATE`."""
    return generate_count(text, "--prompt")


def page_count(text: str) -> int:
    """``--page-size``: tokens per KV cache block, read as :func:`generate_count` reads ``--generate``
    (``1e3``, ``2**10``), at most :data:`MAX_GENERATE`. vLLM takes any positive block size
    (vllm-project/vllm @ 002f10e, vllm/config/cache.py::CacheConfig.block_size, ``gt=0``); a block
    larger than the cache is not refused: the report says vLLM would not start (no cache blocks)."""
    return generate_count(text, "--page-size")


def generate_count(text: str, flag: str = "--generate") -> int:
    """``--generate``: a positive whole number as ``1000``, ``1_000``, ``1e12``, ``1.5e3`` (when
    whole) or ``10**12`` (exact, no evaluation of the text), at most :data:`MAX_GENERATE`.

    Raises
    ------
    argparse.ArgumentTypeError
        Other text, a number that is not whole or not positive, or one above the limit (exit 2)."""
    import argparse
    import re

    from ..arguments import parse_count
    from ..errors import CostgraphValueError

    power = re.fullmatch(r"\s*([0-9]{1,4})\s*\*\*\s*([0-9]{1,3})\s*", text or "")
    try:
        n = int(power.group(1)) ** int(power.group(2)) if power else parse_count(text, flag)
    except CostgraphValueError as e:
        raise argparse.ArgumentTypeError(f"{e.message} (hint: a positive whole number, e.g. 1000, 1e12 or 10**12)") \
            from None
    if n < 1 or n > MAX_GENERATE:
        raise argparse.ArgumentTypeError(f"{text.strip()} tokens is out of range (hint: between 1 and 10**15; the "
                                         f"closed form takes any size, but no serving run has more)")
    return n
