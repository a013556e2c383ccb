"""``costgraph infer``: prefill and decode FLOPs and bytes, KV cache and
recurrent state, roofline latency, throughput and capacity on a hardware
preset (:mod:`costgraph.inference`). The preset is optional: bytes and FLOPs
need none; ``--peak``/``--bandwidth``/``--memory``/``--link-bandwidth`` give a
device's figures or replace the preset's (:mod:`costgraph.inference.device`)."""

from __future__ import annotations

from .. import choices
from ..choices import add_option
from .common import model_arguments


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
    # a device without a preset, or a preset's figures replaced (issue 17, item 1)
    f.add_argument("--peak", help="dense peak FLOP/s of the compute dtype (replaces the preset's), e.g. 121e12")
    f.add_argument("--bandwidth", help="HBM bandwidth in B/s (replaces the preset's), e.g. 300e9")
    f.add_argument("--memory", help="device memory: 24GB (10^9 B), 24GiB (2^30 B) or bytes (replaces the preset's)")
    f.add_argument("--link-bandwidth", help="TP all-reduce link, B/s per direction (replaces the preset's; without a "
                                            "preset its latency is taken as 0), e.g. 450e9")


def run(args) -> str:
    from ._analysis import inference_model
    from .common import settings

    dims, options = settings(args.set)
    model, values = inference_model(args.model, args.config, dims, options)
    rep = model.infer(hardware=args.hardware, prompt=args.prompt, generate=args.generate, batch=args.batch,
                      values=values, tp=args.tp, weights=args.weights, kv=args.kv, page=args.page_size,
                      reserve=args.reserve, compute=args.compute, convention=args.convention, causal=args.causal,
                      activations=args.activations, compute_efficiency=args.compute_efficiency,
                      bandwidth_efficiency=args.bandwidth_efficiency,
                      peak=args.peak, bandwidth=args.bandwidth, memory=args.memory, link_bandwidth=args.link_bandwidth)
    return rep.to_json() if args.format == "json" else rep.to_text()
