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
    # parallel serving (costgraph.inference.parallel)
    f.add_argument("--ep", type=int, default=1, help="expert-parallel degree e: 1 (default) or --tp")
    f.add_argument("--dp-attention", type=int, default=1,
                   help="attention data-parallel ranks d (SGLang): attention-TP = tp/d, b/d sequences each")
    f.add_argument("--pp", type=int, default=1, help="pipeline stages p (p micro-batches of b in flight)")
    f.add_argument("--tp-overlap", choices=("none", "full"), default="none",
                   help="collectives after the ops (none, default) or hidden under them (full)")


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
                      **serving_kwargs(args))
    return rep.to_json() if args.format == "json" else rep.to_text()


def serving_kwargs(args) -> dict:
    """The parallel-serving keyword arguments of ``Model.infer`` (only those not at their default)."""
    got = dict(ep=args.ep, dp_attention=args.dp_attention, pp=args.pp, tp_overlap=args.tp_overlap)
    return {k: v for k, v in got.items() if v != ("none" if k == "tp_overlap" else 1)}
