"""The options of :meth:`costgraph.Model.infer` (``costgraph infer``), declared once (issue 31 item 1).

:class:`InferOptions` is a frozen dataclass, one field per keyword of :func:`costgraph.inference.infer`
(``tp`` its ``t``), as :mod:`costgraph.train_options` declares train's: the field's name is the API
keyword and the JSON name, its :func:`~costgraph.option_fields.option` metadata the flag, help line,
choices, default, unit and check. :meth:`Model.infer` takes ``(values, options, **overrides)``; the
keyword check (an unknown keyword refused with a did-you-mean hint), ``costgraph infer``'s ``argparse``
arguments (:func:`~costgraph.option_fields.add_arguments`; the fields are in ``--help``'s order, keyword
only) and ``costgraph schema infer``'s ``$defs/options`` are generated from the fields. The command line
reads a few values its own way: ``--weights`` and ``--quantized`` default to a config.json's (``cli_default``
None), ``--not-quantized`` is comma-separated text, ``--draft`` a model name the command loads;
``draft_values`` and ``draft_mtp`` are the API's only.

>>> InferOptions(prompt=512, generate=128).page
16

Light at import (the standard library and :mod:`costgraph.choices`); the argument types of
``--prompt``, ``--generate`` and ``--page-size`` are here too (:func:`generate_count`).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import choices
from .option_fields import keywords_checked, option

#: the --quantized scopes (costgraph.inference.quantized.SCOPES, kept here so the parser stays light;
#: tests/test_option_fields.py checks they agree)
SCOPES = ("linear", "linear+head", "all", "experts")



#: the most generated tokens --generate takes (the closed form takes any; 10^15 is past any serving run)
MAX_GENERATE = 10**15


def generate_count(text: str, flag: str = "--generate") -> int:
    """``--generate``: a positive whole number as ``1000``, ``1_000``, ``1e12``, ``1.5e3`` (when
    whole) or ``10**12`` (exact, no evaluation of the text), at most :data:`MAX_GENERATE`.

    Raises
    ------
    argparse.ArgumentTypeError
        Other text, a number that is not whole or not positive, or one above the limit (exit 2)."""
    import argparse
    import re

    from .arguments import NumberFormError, parse_count
    from .errors import CostgraphValueError

    power = re.fullmatch(r"\s*([0-9]{1,4})\s*\*\*\s*([0-9]{1,3})\s*", text or "")
    try:
        n = int(power.group(1)) ** int(power.group(2)) if power else parse_count(text, flag)
    except CostgraphValueError as e:   # arguments.ascii_number's refusals (NumberFormError) keep their own hint
        hint = e.hint if isinstance(e, NumberFormError) else "a positive whole number, e.g. 1000, 1e12 or 10**12"
        message = e.message.removeprefix(f"{flag} ")   # argparse names the flag already ("argument --prompt: ...")
        raise argparse.ArgumentTypeError(f"{message} (hint: {hint})") from None
    if n < 1 or n > MAX_GENERATE:
        raise argparse.ArgumentTypeError(f"{text.strip()} tokens is out of range (hint: between 1 and 10**15; the "
                                         f"closed form takes any size, but no serving run has more)")
    return n


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


@keywords_checked()
@dataclass(frozen=True, kw_only=True)
class InferOptions:
    """The options of inference (:func:`costgraph.inference.infer` documents each), keyword only:
    ``prompt`` and ``generate`` have no default; ``draft`` is a :class:`costgraph.Model` (``draft_values``
    its dimension values; ``draft_mtp``: the target's MTP heads draft). Numbers may be ints, floats or
    text (``"0.1"``, ``"989.4e12"``), read exactly."""

    hardware: object = option("--hardware", "a hardware preset (costgraph hardware) or my.toml[:NAME]; optional: "
                                            "bytes and FLOPs need none, seconds a peak and bandwidth, capacity memory",
                              default=None)
    prompt: int = option("--prompt", "prompt tokens per sequence P: a whole number, e.g. 2048, 1e7 or 10**7 (at most "
                                     "10**15)", unit="tokens", type=prompt_count, required=True)
    generate: int = option("--generate", "generated tokens per sequence G: a whole number, e.g. 1000, 1e12 or 10**12 "
                                         "(at most 10**15)", unit="tokens", type=generate_count,
                           required=True)
    batch: int = option("--batch", "concurrent sequences b (default 1)", default=1, unit="sequences", type=int)
    tp: int = option("--tp", "tensor-parallel degree t (default 1)", default=1, unit="devices", check="whole", type=int)
    weights: str = option("--weights", "weight dtype: bf16 (default; a config.json: what it ships), fp16, fp8, int8, "
                                       "int4, awq, gptq, gptq-act-order, fp8-per-channel, fp8-block, mxfp4, nvfp4",
                          default=choices.DEFAULT_WEIGHTS, cli_default=None)
    kv: str = option("--kv", "KV cache dtype: bf16 (default; fp16 under --runtime llamacpp, llama.cpp's f16), fp16, "
                             "fp8, int8 (per tensor), int8-per-token-head, q8_0, q4_0, fp32", default=None)
    compute: object = option("--compute", "dtype of the peak (default: the weights')", default=None,
                             choices=choices.PEAK_DTYPE.values)
    page: int = option("--page-size", "paged KV cache block size k in tokens (default 16, vLLM's): a whole number, "
                                      "e.g. 32, 1e3 or 2**10 (at most 10**15)", default=16, unit="tokens",
                       check="whole", type=page_count, metavar="PAGE_SIZE")
    reserve: object = option("--reserve", "fraction of device memory kept free (default 0.1)", default=None,
                             unit="fraction")
    activations: bool = option("--activations", "add activation traffic to the bytes of each step", default=False,
                               check="flag", action="store_true")
    compute_efficiency: object = option("--compute-efficiency", "fraction of the peak reached (default 1)", default=1,
                                        unit="fraction", check="number", cli_default="1")
    bandwidth_efficiency: object = option("--bandwidth-efficiency", "fraction of the HBM bandwidth reached (default 1)",
                                          default=1, unit="fraction", check="number", cli_default="1")
    convention: str = option("--convention", "FLOP convention", choices=choices.CONVENTION, check="choice")
    causal: str = option("--causal", "attention FLOPs: full square, half (area) or exact (pairs)",
                         choices=choices.CAUSAL, check="choice")
    peak: object = option("--peak", "dense peak FLOP/s of the compute dtype (replaces the preset's), e.g. 121e12",
                          default=None, unit="FLOP/s")
    bandwidth: object = option("--bandwidth", "HBM bandwidth in B/s (replaces the preset's), e.g. 300e9", default=None,
                               unit="B/s")
    memory: object = option("--memory", "device memory: 24GB (10^9 B), 24GiB (2^30 B) or bytes (replaces the "
                                        "preset's)", default=None, unit="bytes")
    memory_convention: str = option("--memory-convention", "which figure of the preset is the device memory, for the "
                                                           "capacity line and the runtime's KV cache alike: "
                                    + choices.MEMORY_CONVENTION.help(), choices=choices.MEMORY_CONVENTION,
                                    default=None)   # None: cuda; refused with --memory, as any one given
    link_bandwidth: object = option("--link-bandwidth", "TP all-reduce link, B/s per direction (replaces the preset's; "
                                                        "without a preset its latency is taken as 0), e.g. 450e9",
                                    default=None, unit="B/s")
    quantized: str = option("--quantized", "which weights a quantized --weights dtype applies to: linear (default: "
                                           "every linear but the output head and MoE routers), linear+head, all (also "
                                           "embeddings), experts (MoE experts only, as gpt-oss ships MXFP4); a "
                                           "config.json: what it ships", default="linear", choices=SCOPES,
                            cli_default=None)
    keep: tuple = option("--not-quantized", "comma-separated module names kept in 16 bits, as modules_to_not_convert "
                                            "(lm_head, model.layers.*.self_attn); a config.json: its own list",
                         default=(), cli_default=None, metavar="NAMES")
    gpu_memory_utilization: object = option(
        "--gpu-memory-utilization", f"share of device memory vLLM uses (default {choices.GPU_MEMORY_UTILIZATION}: the "
        "same setting as --reserve, = 1 - reserve)", default=None, unit="fraction", metavar="U")
    kv_memory: object = option("--kv-memory", "KV cache memory as given to vLLM (kv_cache_memory_bytes) or read from "
                                              "its log line 'Available KV cache memory', e.g. 6.51GiB; default: "
                                              "profiled", default=None, unit="bytes", metavar="SIZE")
    max_num_batched_tokens: object = option(
        "--max-num-batched-tokens", "vLLM's token budget per step (default as vllm serve: 8192 on >= 70 GiB non-A100 "
        "devices, else 2048); the activation profile's forward", default=None, unit="tokens", check="whole", type=int,
        metavar="N")
    max_num_seqs: object = option("--max-num-seqs", "vLLM's sequences per step (default 1024 / 256, as "
                                                    "--max-num-batched-tokens)", default=None, unit="sequences",
                                  check="whole", type=int, metavar="N")
    non_torch_memory: object = option("--non-torch-memory", "memory outside PyTorch in vLLM's profile (default: vLLM's "
                                                            "logged figure for the device, NCCL's buffers by TP; "
                                                            f"else {choices.NON_TORCH_MEMORY})", default=None, unit="bytes",
                                      metavar="SIZE")
    max_model_len: object = option("--max-model-len", "tokens per request of vLLM's maximum concurrency (default P + "
                                                      "G); llama.cpp's n_ctx", default=None, unit="tokens",
                                   check="whole", type=int, metavar="N")
    runtime: str = option("--runtime", "whose start-up KV cache figures to print: " + choices.RUNTIME.help(),
                          choices=choices.RUNTIME)
    sglang_fraction: str = option("--sglang-fraction", "--runtime sglang without --gpu-memory-utilization: its "
                                  "default mem_fraction_static, " + choices.SGLANG_FRACTION.help(),
                                  choices=choices.SGLANG_FRACTION)
    vllm_engine: str = option("--vllm-engine", "--runtime vllm: which engine's start-up figures (weights as "
                                               "loaded): " + choices.VLLM_ENGINE.help(), choices=choices.VLLM_ENGINE)
    shared_prefix: object = option("--shared-prefix", "prefix caching: the first S prompt tokens are shared by all "
                                                      "sequences", default=None, unit="tokens", type=int, metavar="S")
    chunk: object = option("--chunk", "chunked prefill: prompts prefilled C tokens a step", default=None,
                           unit="tokens", type=int, metavar="C")
    speculative_tokens: object = option("--speculative-tokens", "speculative decoding: tokens proposed per step",
                                        default=None, unit="tokens", type=int, metavar="K")
    acceptance: object = option("--acceptance", "speculative decoding: per-token acceptance rate in [0, 1], e.g. 0.7 "
                                                "or 1/3 (exact)", default=None, unit="fraction", metavar="ALPHA")
    draft: object = option("--draft", "speculative decoding's draft: a bundled model, .cg file or config.json, or "
                                      "'mtp' (the target's MTP heads)", default=None, metavar="MODEL")
    ep: int = option("--ep", "expert-parallel degree e: 1 (default) or --tp", default=1, unit="devices", check="whole",
                     type=int)
    dp_attention: int = option("--dp-attention", "attention data-parallel ranks d (SGLang): attention-TP = tp/d, b/d "
                                                 "sequences each", default=1, unit="ranks", check="whole", type=int)
    pp: int = option("--pp", "pipeline stages p (p micro-batches of b in flight)", default=1, unit="stages",
                     check="whole", type=int)
    tp_overlap: str = option("--tp-overlap", "collectives after the ops (none, default) or hidden under them (full)",
                             default="none", choices=("none", "full"))
    draft_values: object = option(None, "the draft model's dimension values (default: its defaults)", default=None)
    draft_mtp: bool = option(None, "the draft is this model built with option mtp (its MTP heads)", default=False)
