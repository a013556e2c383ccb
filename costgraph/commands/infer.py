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
    f.add_argument("--generate", type=generate_count, required=True,
                   help="generated tokens per sequence G: a whole number, e.g. 1000, 1e12 or 10**12 (at most 10**15)")
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


def run(args) -> str:
    from ._analysis import inference_model
    from .common import settings

    dims, options = settings(args.set)
    model, values = inference_model(args.model, args.config, dims, options)
    rep = model.infer(hardware=args.hardware, prompt=args.prompt, generate=args.generate, batch=args.batch,
                      values=values, tp=args.tp, weights=args.weights, kv=args.kv, page=args.page_size,
                      reserve=args.reserve, compute=args.compute, convention=args.convention, causal=args.causal,
                      activations=args.activations, compute_efficiency=args.compute_efficiency,
                      bandwidth_efficiency=args.bandwidth_efficiency)
    return rep.to_json() if args.format == "json" else rep.to_text()


#: the most generated tokens --generate takes (the closed form takes any; 10^15 is past any serving run)
MAX_GENERATE = 10**15


def generate_count(text: str) -> int:
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
        n = int(power.group(1)) ** int(power.group(2)) if power else parse_count(text, "--generate")
    except CostgraphValueError as e:
        raise argparse.ArgumentTypeError(f"{e.message} (hint: a positive whole number, e.g. 1000, 1e12 or 10**12)") \
            from None
    if n < 1 or n > MAX_GENERATE:
        raise argparse.ArgumentTypeError(f"{text.strip()} tokens is out of range (hint: between 1 and 10**15; the "
                                         f"closed form takes any G, but no serving run generates more)")
    return n
