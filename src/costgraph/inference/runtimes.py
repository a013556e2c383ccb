"""The KV cache as SGLang, TensorRT-LLM and llama.cpp size it at start-up (``costgraph infer
--runtime``, :func:`costgraph.inference.roofline.infer`'s ``runtime``, a name of
:data:`costgraph.choices.RUNTIME`; vLLM's is :mod:`costgraph.inference.capacity`). The result is
``rep.serving["runtime"]``; ``gpu_memory_utilization``, when given, is the runtime's memory
fraction, else its own default. Issue 29 item 3.

Every runtime here takes the weights it loaded (:mod:`costgraph.inference.runtime_weights`),
the device memory ``M`` and the memory outside PyTorch ``nt`` (``--non-torch-memory``: the CUDA
context and communication buffers), and ``cell``: the KV bytes of one token on one device, all
layers (the graph's cached tensors under TP, at the ``--kv`` dtype).

* **SGLang** (sglang @ 01cc04e2, ``python/sglang/srt/model_executor/model_runner.py::
  ModelRunner.profile_max_num_token``): ``total`` = the memory free after the distributed init
  (``M − nt``), ``available`` = the memory free after loading (``total − weights``),
  ``rest = available − total·(1 − mem_fraction_static)``, ``max_total_num_tokens =
  int(rest // cell)``; ``cell = kv_heads/tp · head_dim · layers · 2 · element size`` (MLA:
  ``(kv_lora_rank + qk_rope_head_dim) · layers · element size``), which the graph's cache
  gives. ``mem_fraction_static`` (``--gpu-memory-utilization`` here) defaults by TP degree
  (sglang ``python/sglang/srt/server_args.py::ServerArgs.__post_init__``, the 2025 table:
  0.88 at TP 1, 0.87 at 2, 0.85 at 4, 0.81 at 8, 0.79 at 16; newer versions reserve memory by
  GPU size instead, docs/peers.md).
* **TensorRT-LLM** (``tensorrt_llm.llmapi.KvCacheConfig``: ``free_gpu_memory_fraction = 0.9``
  of the free GPU memory, ``tokens_per_block = 32``; https://nvidia.github.io/TensorRT-LLM/
  llm-api/reference/KvCacheConfig.html and examples/kvcacheconfig.html): ``free = M − nt −
  weights`` (the activation workspace TensorRT-LLM measures is not modelled),
  ``kv = floor(fraction · free)``, ``blocks = kv // (cell · 32)``, tokens = ``blocks · 32``.
* **llama.cpp** (ggml-org/llama.cpp ``src/llama-kv-cache.cpp``: one K and one V tensor per
  layer of ``n_ctx`` cells, of ``--cache-type-k/-v``; ggml's type table, ``ggml-common.h``
  @ aca2e6ce: f16 2 B, q8_0 34 B and q4_0 18 B per 32 values, the ``--kv`` dtypes
  ``fp16``/``q8_0``/``q4_0``): ``size = n_ctx · cell`` with ``n_ctx`` = ``--max-model-len``
  (default ``P + G``) for one sequence (``b`` sequences: ``b·n_ctx`` cells in the unified cache);
  llama.cpp pads ``n_ctx`` (to 256 in recent versions): give the padded figure.
"""

from __future__ import annotations

import sympy

from ..choices import RUNTIME
from .exact import exact_value

GIB = 2**30
MIB = 2**20
TRTLLM_FRACTION = sympy.Rational(9, 10)   # KvCacheConfig.free_gpu_memory_fraction
TRTLLM_TOKENS_PER_BLOCK = 32              # KvCacheConfig.tokens_per_block
# sglang server_args.py::ServerArgs.__post_init__ (2025): mem_fraction_static by tp_size (at least)
SGLANG_FRACTIONS = ((16, "0.79"), (8, "0.81"), (4, "0.85"), (2, "0.87"), (1, "0.88"))
# the --kv dtypes each runtime has a cache type for: llama.cpp's --cache-type-k/-v (ggml f16, bf16,
# q8_0, q4_0 of costgraph's dtypes); ggml's block formats are llama.cpp's alone
LLAMACPP_KV = ("fp16", "bf16", "q8_0", "q4_0")
GGML_ONLY_KV = ("q8_0", "q4_0")


def sglang_fraction(tp: int) -> sympy.Rational:
    """SGLang's default ``mem_fraction_static`` at TP degree ``tp`` (module docstring)."""
    return next(sympy.Rational(f) for n, f in SGLANG_FRACTIONS if tp >= n)


def cell_bytes(inf, subs: dict) -> int:
    """KV bytes of one token on one device, all layers (SGLang's ``cell_size``)."""
    return int(sympy.ceiling(exact_value(inf.kv_cache_bytes_per_token(), subs)))


def runtime_kv(runtime: str, inf, memory, subs: dict, weights: int | None, *, tp: int, non_torch: int,
               fraction=None, n_ctx: int, batch: int, kv_name: str) -> dict:
    """The KV cache ``runtime`` (``sglang``, ``trtllm``, ``llamacpp``) sizes on a device of
    ``memory`` bytes (None: only llama.cpp answers) with ``weights`` loaded per rank: a dict of
    the figures and ``lines`` (its log lines as costgraph prints them). ``fraction``: the
    runtime's memory fraction, a Rational (None: its default); ``memory``, ``weights``,
    ``non_torch``: bytes; ``n_ctx``, ``batch``: llama.cpp's context and sequences."""
    RUNTIME.check(runtime)
    _check_kv(runtime, kv_name)
    cell = cell_bytes(inf, subs)
    out = {"runtime": runtime, "cell_bytes": cell, "non_torch_bytes": non_torch, "weight_bytes": weights}
    if runtime == "llamacpp":
        cells = n_ctx * batch
        size = cells * cell
        out.update(n_ctx=n_ctx, cells=cells, kv_bytes=size, tokens=cells)
        out["lines"] = [f"llama_kv_cache: size = {size / MIB:8.2f} MiB ({cells:6d} cells, {kv_name} K and V): "
                        f"{cell:,} bytes per cell, all layers"]
        if memory is not None and size + (weights or 0) + non_torch > memory:   # the allocation fails at start-up
            out["lines"].append(f"llama.cpp would not start: the KV cache and the weights ({(size + (weights or 0)) / GIB:.2f}"
                                f" GiB) and non-torch memory exceed the device's {int(memory) / GIB:.2f} GiB "
                                "(a smaller --max-model-len, --batch or --kv)")
        return out
    if memory is None or weights is None:
        out.update(tokens=None, lines=[f"{runtime}: needs the device memory (--hardware or --memory)"])
        return out
    if runtime == "sglang":
        f = fraction if fraction is not None else sglang_fraction(tp)
        total = memory - non_torch
        rest = (total - weights) - total * (1 - f)
        tokens = max(int(sympy.floor(rest / cell)), 0)
        out.update(mem_fraction_static=str(f), total_bytes=total, rest_bytes=int(sympy.floor(rest)), tokens=tokens,
                   kv_bytes=tokens * cell)
        out["lines"] = [f"mem_fraction_static={float(f):g}: total {total / GIB:.2f} GiB (memory - non-torch), after "
                        f"weights {(total - weights) / GIB:.2f} GiB, KV pool {float(rest) / GIB:.2f} GiB",
                        f"max_total_num_tokens={tokens}"]
        if tokens <= 0:
            out["lines"].append(_NO_ROOM.format("SGLang", "raise --gpu-memory-utilization (mem_fraction_static)"))
        return out
    f = fraction if fraction is not None else TRTLLM_FRACTION
    free = memory - non_torch - weights
    kv = int(sympy.floor(f * free))
    blocks = max(kv // (cell * TRTLLM_TOKENS_PER_BLOCK), 0)
    tokens = blocks * TRTLLM_TOKENS_PER_BLOCK
    out.update(free_gpu_memory_fraction=str(f), free_bytes=free, kv_bytes=kv, blocks=blocks, tokens=tokens)
    out["lines"] = [f"free_gpu_memory_fraction={float(f):g} of {free / GIB:.2f} GiB free after loading: "
                    f"{kv / GIB:.2f} GiB for the paged KV cache",
                    f"Number of tokens per block: {TRTLLM_TOKENS_PER_BLOCK}; max tokens in paged KV cache ({tokens})"]
    if tokens <= 0:
        out["lines"].append(_NO_ROOM.format("TensorRT-LLM", "less --non-torch-memory, more --tp or a smaller --kv"))
    return out


_NO_ROOM = "{} would not start: no memory is left for one KV block after the weights and non-torch memory ({})"


def _check_kv(runtime: str, kv_name: str) -> None:
    """Refuse a ``--kv`` dtype ``runtime`` has no cache type for (:data:`LLAMACPP_KV`, :data:`GGML_ONLY_KV`)."""
    from ..errors import CostgraphValueError

    if runtime == "llamacpp" and kv_name not in LLAMACPP_KV:
        raise CostgraphValueError(f"--runtime llamacpp has no --kv {kv_name} cache type",
                                  hint="llama.cpp's --cache-type-k/-v: --kv " + ", ".join(LLAMACPP_KV))
    if runtime != "llamacpp" and kv_name in GGML_ONLY_KV:
        raise CostgraphValueError(f"--kv {kv_name} is llama.cpp's block format: --runtime {runtime} has no such cache",
                                  hint="--runtime llamacpp, or --kv fp8 / bf16")
