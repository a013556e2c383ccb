"""``costgraph infer``: prefill and decode FLOPs and bytes, KV cache and
recurrent state, roofline latency, throughput and capacity on a hardware
preset (:mod:`costgraph.inference`)."""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from .common import model_arguments


def add_parser(sub) -> None:
    f = sub.add_parser("infer", help="inference: prefill and decode FLOPs and bytes, KV cache, roofline latency, "
                                     "throughput and capacity on a hardware preset")
    model_arguments(f, "a bundled model name, a .cg file or a config.json (decoder-only)",
                     "dimension values or model options (b and s are set by --batch, --prompt, --generate)")
    f.add_argument("--hardware", required=True, help="a hardware preset (costgraph hardware)")
    f.add_argument("--prompt", type=int, required=True, help="prompt tokens per sequence P")
    f.add_argument("--generate", type=int, required=True, help="generated tokens per sequence G")
    f.add_argument("--batch", type=int, default=1, help="concurrent sequences b (default 1)")
    f.add_argument("--tp", type=int, default=1, help="tensor-parallel degree t (default 1)")
    f.add_argument("--weights", default=choices.DEFAULT_WEIGHTS, help="weight dtype: bf16 (default), fp16, fp8, int8, int4")
    f.add_argument("--kv", default=choices.DEFAULT_KV, help="KV cache dtype: bf16 (default), fp16, fp8, int8")
    f.add_argument("--compute", choices=choices.PEAK_DTYPE.values, help="dtype of the peak (default: the weights')")
    f.add_argument("--page-size", type=int, default=16, help="paged KV cache block size k (default 16, vLLM's)")
    f.add_argument("--reserve", default="0.1", help="fraction of device memory kept free (default 0.1)")
    f.add_argument("--activations", action="store_true", help="add activation traffic to the bytes of each step")
    f.add_argument("--compute-efficiency", default="1", help="fraction of the peak reached (default 1)")
    f.add_argument("--bandwidth-efficiency", default="1", help="fraction of the HBM bandwidth reached (default 1)")
    add_option(f, choices.CONVENTION, "--convention", help="FLOP convention")
    add_option(f, choices.CAUSAL, "--causal", help="attention FLOPs: full square, half (area) or exact (pairs)")
    f.add_argument("--format", choices=("text", "json"), default="text")
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
                                                                   "concurrency (default P + G)")
    f.add_argument("--shared-prefix", type=int, metavar="S",
                   help="prefix caching: the first S prompt tokens are shared by all sequences")
    f.add_argument("--chunk", type=int, metavar="C", help="chunked prefill: prompts prefilled C tokens a step")
    f.add_argument("--speculative-tokens", type=int, metavar="K", help="speculative decoding: tokens proposed per step")
    f.add_argument("--acceptance", metavar="ALPHA", help="speculative decoding: per-token acceptance rate in [0, 1]")
    f.add_argument("--draft", metavar="MODEL", help="speculative decoding's draft: a bundled model, .cg file or "
                                                    "config.json, or 'mtp' (the target's MTP heads)")
    f.add_argument("--draft-config", metavar="NAME", help="the draft model's configuration")


def run(args) -> str:
    from ._analysis import inference_model
    from .common import settings

    dims, options = settings(args.set)
    model, values = inference_model(args.model, args.config, dims, options)
    rep = model.infer(hardware=args.hardware, prompt=args.prompt, generate=args.generate, batch=args.batch,
                      values=values, tp=args.tp, weights=args.weights, kv=args.kv, page=args.page_size,
                      reserve=args.reserve, compute=args.compute, convention=args.convention, causal=args.causal,
                      activations=args.activations, compute_efficiency=args.compute_efficiency,
                      bandwidth_efficiency=args.bandwidth_efficiency, **_serving(args, dims, options))
    return rep.to_json() if args.format == "json" else rep.to_text()


def _serving(args, dims: dict, options: dict) -> dict:
    """The serving keywords of :meth:`costgraph.Model.infer` from the flags (the draft model
    loaded: ``--draft mtp`` is the target built with ``option mtp``)."""
    from ._analysis import inference_model

    out = dict(gpu_memory_utilization=args.gpu_memory_utilization, kv_memory=args.kv_memory,
               max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
               non_torch_memory=args.non_torch_memory, max_model_len=args.max_model_len,
               shared_prefix=args.shared_prefix, chunk=args.chunk, speculative_tokens=args.speculative_tokens,
               acceptance=args.acceptance)
    if args.draft == "mtp":
        model, values = inference_model(args.model, args.config, dims, {**options, "mtp": True})
        out.update(draft=model, draft_values=values, draft_mtp=True)
    elif args.draft is not None:
        model, values = inference_model(args.draft, args.draft_config, {}, {})
        out.update(draft=model, draft_values=values)
    return out
