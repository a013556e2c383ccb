"""The options of :meth:`costgraph.Model.infer` (``costgraph infer``), declared once (issue 31 item 1).

:class:`InferOptions` is a frozen dataclass, one field per keyword of :func:`costgraph.inference.infer`
(``tp`` its ``t``), as :mod:`costgraph.train_options` declares train's: the field's name is the API
keyword and the JSON name, its :func:`~costgraph.option_fields.option` metadata the flag, help line,
choices, default, unit and check. :meth:`Model.infer` takes ``(values, options, **overrides)``; the
keyword check (an unknown keyword refused with a did-you-mean hint) and ``costgraph schema infer``'s
``$defs/options`` are generated from the fields. The command line's values differ from the API's for
a few (``--weights``/``--quantized``: a config.json's when not given; ``--not-quantized`` text; ``--draft``
a model name, loaded by the command): ``costgraph infer``'s ``argparse`` list is its own still, and
``tests/test_option_fields.py`` checks that its flags and help lines are these.

>>> InferOptions(prompt=512, generate=128).page
16

Light at import (the standard library and :mod:`costgraph.choices`).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import choices
from .option_fields import option

#: the quantization scopes (costgraph.inference.quantized.SCOPES; tests/test_option_fields.py checks they agree)
SCOPES = ("linear", "linear+head", "all", "experts")


@dataclass(frozen=True)
class InferOptions:
    """The options of inference (:func:`costgraph.inference.infer` documents each): ``prompt`` and
    ``generate`` have no default; ``draft`` is a :class:`costgraph.Model` (``draft_values`` its
    dimension values; ``draft_mtp``: the target's MTP heads draft). Numbers may be ints, floats or text
    (``"0.1"``, ``"989.4e12"``), read exactly."""

    prompt: int = option("--prompt", "prompt tokens per sequence P: a whole number, e.g. 2048, 1e7 or 10**7 (at most "
                                     "10**15)", unit="tokens")
    generate: int = option("--generate", "generated tokens per sequence G: a whole number, e.g. 1000, 1e12 or 10**12 "
                                         "(at most 10**15)", unit="tokens")
    hardware: object = option("--hardware", "a hardware preset (costgraph hardware) or my.toml[:NAME]; optional: "
                                            "bytes and FLOPs need none, seconds a peak and bandwidth, capacity memory",
                              default=None)
    batch: int = option("--batch", "concurrent sequences b (default 1)", default=1, unit="sequences")
    tp: int = option("--tp", "tensor-parallel degree t (default 1)", default=1, unit="devices", check="whole")
    weights: str = option("--weights", "weight dtype: bf16 (default; a config.json: what it ships), fp16, fp8, int8, "
                                       "int4, awq, gptq, gptq-act-order, fp8-per-channel, fp8-block, mxfp4, nvfp4",
                          default=choices.DEFAULT_WEIGHTS)
    kv: str = option("--kv", "KV cache dtype: bf16 (default), fp16, fp8, int8 (per tensor), int8-per-token-head, "
                             "q8_0, q4_0", default=choices.DEFAULT_KV)
    compute: object = option("--compute", "dtype of the peak (default: the weights')", default=None,
                             choices=choices.PEAK_DTYPE.values)
    page: int = option("--page-size", "paged KV cache block size k in tokens (default 16, vLLM's): a whole number, "
                                      "e.g. 32, 1e3 or 2**10 (at most 10**15)", default=16, unit="tokens")
    reserve: object = option("--reserve", "fraction of device memory kept free (default 0.1)", default=None,
                             unit="fraction")
    activations: bool = option("--activations", "add activation traffic to the bytes of each step", default=False)
    compute_efficiency: object = option("--compute-efficiency", "fraction of the peak reached (default 1)", default=1,
                                        unit="fraction")
    bandwidth_efficiency: object = option("--bandwidth-efficiency", "fraction of the HBM bandwidth reached (default 1)",
                                          default=1, unit="fraction")
    convention: str = option("--convention", "FLOP convention", choices=choices.CONVENTION, check="choice")
    causal: str = option("--causal", "attention FLOPs: full square, half (area) or exact (pairs)",
                         choices=choices.CAUSAL, check="choice")
    peak: object = option("--peak", "dense peak FLOP/s of the compute dtype (replaces the preset's), e.g. 121e12",
                          default=None, unit="FLOP/s")
    bandwidth: object = option("--bandwidth", "HBM bandwidth in B/s (replaces the preset's), e.g. 300e9", default=None,
                               unit="B/s")
    memory: object = option("--memory", "device memory: 24GB (10^9 B), 24GiB (2^30 B) or bytes (replaces the "
                                        "preset's)", default=None, unit="bytes")
    link_bandwidth: object = option("--link-bandwidth", "TP all-reduce link, B/s per direction (replaces the preset's; "
                                                        "without a preset its latency is taken as 0), e.g. 450e9",
                                    default=None, unit="B/s")
    quantized: str = option("--quantized", "which weights a quantized --weights dtype applies to: linear (default: "
                                           "every linear but the output head and MoE routers), linear+head, all (also "
                                           "embeddings), experts (MoE experts only, as gpt-oss ships MXFP4); a "
                                           "config.json: what it ships", default="linear", choices=SCOPES)
    keep: tuple = option("--not-quantized", "comma-separated module names kept in 16 bits, as modules_to_not_convert "
                                            "(lm_head, model.layers.*.self_attn); a config.json: its own list",
                         default=())
    gpu_memory_utilization: object = option(
        "--gpu-memory-utilization", f"share of device memory vLLM uses (default {choices.GPU_MEMORY_UTILIZATION}: the "
        "same setting as --reserve, = 1 - reserve)", default=None, unit="fraction")
    kv_memory: object = option("--kv-memory", "KV cache memory as given to vLLM (kv_cache_memory_bytes) or read from "
                                              "its log line 'Available KV cache memory', e.g. 6.51GiB; default: "
                                              "profiled", default=None, unit="bytes")
    max_num_batched_tokens: object = option(
        "--max-num-batched-tokens", "vLLM's token budget per step (default as vllm serve: 8192 on >= 70 GiB non-A100 "
        "devices, else 2048); the activation profile's forward", default=None, unit="tokens")
    max_num_seqs: object = option("--max-num-seqs", "vLLM's sequences per step (default 1024 / 256, as "
                                                    "--max-num-batched-tokens)", default=None, unit="sequences")
    non_torch_memory: object = option("--non-torch-memory", "memory outside PyTorch in vLLM's profile (default "
                                                            f"{choices.NON_TORCH_MEMORY})", default=None, unit="bytes")
    max_model_len: object = option("--max-model-len", "tokens per request of vLLM's maximum concurrency (default P + "
                                                      "G); llama.cpp's n_ctx", default=None, unit="tokens")
    runtime: str = option("--runtime", "whose start-up KV cache figures to print: " + choices.RUNTIME.help(),
                          choices=choices.RUNTIME)
    shared_prefix: object = option("--shared-prefix", "prefix caching: the first S prompt tokens are shared by all "
                                                      "sequences", default=None, unit="tokens")
    chunk: object = option("--chunk", "chunked prefill: prompts prefilled C tokens a step", default=None,
                           unit="tokens")
    speculative_tokens: object = option("--speculative-tokens", "speculative decoding: tokens proposed per step",
                                        default=None, unit="tokens")
    acceptance: object = option("--acceptance", "speculative decoding: per-token acceptance rate in [0, 1], e.g. 0.7 "
                                                "or 1/3 (exact)", default=None, unit="fraction")
    draft: object = option("--draft", "speculative decoding's draft: a bundled model, .cg file or config.json, or "
                                      "'mtp' (the target's MTP heads)", default=None)
    draft_values: object = option(None, "the draft model's dimension values (default: its defaults)", default=None)
    draft_mtp: bool = option(None, "the draft is this model built with option mtp (its MTP heads)", default=False)
    ep: int = option("--ep", "expert-parallel degree e: 1 (default) or --tp", default=1, unit="devices")
    dp_attention: int = option("--dp-attention", "attention data-parallel ranks d (SGLang): attention-TP = tp/d, b/d "
                                                 "sequences each", default=1, unit="ranks")
    pp: int = option("--pp", "pipeline stages p (p micro-batches of b in flight)", default=1, unit="stages")
    tp_overlap: str = option("--tp-overlap", "collectives after the ops (none, default) or hidden under them (full)",
                             default="none", choices=("none", "full"))
