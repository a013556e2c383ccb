"""The KV cache as SGLang, TensorRT-LLM and llama.cpp size it at start-up (``costgraph infer
--runtime``, :func:`costgraph.inference.roofline.infer`'s ``runtime``, a name of
:data:`costgraph.choices.RUNTIME`; vLLM's is :mod:`costgraph.inference.capacity`). The result is
``rep.serving.runtime``, a typed part (:mod:`costgraph.inference.kv_parts`);
``gpu_memory_utilization``, when given, is the runtime's memory
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
* **TensorRT-LLM** (``tensorrt_llm.llmapi.KvCacheConfig``: ``free_gpu_memory_fraction = 0.9``,
  ``tokens_per_block = 32``; https://nvidia.github.io/TensorRT-LLM/llm-api/reference/KvCacheConfig.html).
  Its PyTorch backend sizes the cache after a profile run of dummy context requests of
  ``max_num_tokens`` tokens (TensorRT-LLM ``tensorrt_llm/_torch/pyexecutor/_util.py::KvCacheCreator.
  estimate_max_tokens`` and ``_cal_max_tokens``: ``available_kv_mem = (total_gpu_memory − peak_memory) ·
  fraction``, ``peak_memory`` = torch's peak (weights + activations) + the memory used outside torch):
  ``free = M − nt − weights − activation``, the activation peak of a forward of
  :data:`TRTLLM_MAX_NUM_TOKENS` tokens as :mod:`costgraph.inference.profile_peak` estimates vLLM's (one
  sampled row); ``kv = floor(fraction · free)``, ``blocks = kv // (cell · 32)``, tokens = ``blocks · 32``.
* **llama.cpp** (ggml-org/llama.cpp ``src/llama-kv-cache.cpp``: one K and one V tensor per
  layer of ``n_ctx`` cells, of ``--cache-type-k/-v``; ggml's type table, ``ggml-common.h``
  @ aca2e6ce: f16 2 B, q8_0 34 B and q4_0 18 B per 32 values, the ``--kv`` dtypes
  ``fp16``/``q8_0``/``q4_0``): ``size = n_ctx · cell`` with ``n_ctx`` = ``--max-model-len``
  (default ``P + G``) for one sequence (``b`` sequences: ``b·n_ctx`` cells in the unified cache);
  llama.cpp pads ``n_ctx`` (to 256 in recent versions): give the padded figure.
"""

from __future__ import annotations

import sympy

from ..choices import RUNTIME, SGLANG_FRACTION
from .exact import exact_value
from .kv_parts import RUNTIME_PARTS, RuntimeKvCache

GIB = 2**30
MIB = 2**20
TRTLLM_FRACTION = sympy.Rational(9, 10)   # KvCacheConfig.free_gpu_memory_fraction
TRTLLM_TOKENS_PER_BLOCK = 32              # KvCacheConfig.tokens_per_block
#: the tokens of TensorRT-LLM's profile run: its default ``max_num_tokens`` (``tensorrt_llm.llmapi``
#: ``BuildConfig.max_num_tokens = 8192``; ``_util.py::KvCacheCreator._create_dummy_context_requests`` fills it)
TRTLLM_MAX_NUM_TOKENS = 8192
# sglang server_args.py::ServerArgs.__post_init__ (2025): mem_fraction_static by tp_size (at least)
SGLANG_FRACTIONS = ((16, "0.79"), (8, "0.81"), (4, "0.85"), (2, "0.87"), (1, "0.88"))
# the --kv dtypes each runtime has a cache type for: llama.cpp's --cache-type-k/-v (ggml f16, bf16,
# q8_0, q4_0 of costgraph's dtypes); ggml's block formats are llama.cpp's alone
LLAMACPP_KV = ("fp16", "bf16", "fp32", "q8_0", "q4_0")
#: ggml's type names (``ggml_type_name``) of those dtypes, as llama.cpp prints them
GGML_NAMES = {"fp16": "f16", "bf16": "bf16", "fp32": "f32", "q8_0": "q8_0", "q4_0": "q4_0"}
GGML_ONLY_KV = ("q8_0", "q4_0")


# sglang server_args.py::ServerArgs._handle_gpu_memory_settings (PR #10975): (MiB below, chunked_prefill_size,
# cuda_graph_max_bs at TP < 4, at TP >= 4) by the GPU's memory in MiB (CUDA devices; NPUs have their own rows)
SGLANG_MEMORY_CLASSES = ((20 * 1024, 2048, 8, 8), (35 * 1024, 2048, 24, 80), (60 * 1024, 4096, 32, 160),
                         (90 * 1024, 8192, 256, 512), (160 * 1024, 8192, 256, 512), (None, 16384, 512, 512))


def sglang_fraction(tp: int, rule: str = "tp", memory=None, pp: int = 1) -> sympy.Rational:
    """SGLang's default ``mem_fraction_static`` (:data:`costgraph.choices.SGLANG_FRACTION`):
    ``rule`` ``tp``: the 2025 table by TP degree (module docstring); ``gpu-memory`` (sglang
    ``server_args.py::ServerArgs._handle_gpu_memory_settings``, PR #10975): ``gpu_mem`` = the
    device's ``memory`` in MiB, ``chunked_prefill_size`` and ``cuda_graph_max_bs`` by its class
    (:data:`SGLANG_MEMORY_CLASSES`), ``reserved = 512 + 1.5 · max(chunked_prefill_size, 2048) + 2 ·
    cuda_graph_max_bs + tp · pp / 8 · 1024`` MiB, at least 10 GiB when ``gpu_mem`` > 60 GiB,
    ``round((gpu_mem − reserved) / gpu_mem, 3)`` (no DP attention, no speculative draft; 0.88
    without a memory, as SGLang)."""
    SGLANG_FRACTION.check(rule)
    if rule == "tp":
        return next(sympy.Rational(f) for n, f in SGLANG_FRACTIONS if tp >= n)
    if memory is None:
        return sympy.Rational(88, 100)
    mib = float(memory) / MIB
    _, chunk, small, large = next(c for c in SGLANG_MEMORY_CLASSES if c[0] is None or mib < c[0])
    reserved = 512 + max(chunk, 2048) * 1.5 + (small if tp < 4 else large) * 2 + tp * pp / 8 * 1024
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return sympy.Rational(str(round((mib - reserved) / mib, 3)))


def cell_bytes(inf, subs: dict) -> int:
    """KV bytes of one token on one device, all layers (SGLang's ``cell_size``)."""
    return int(sympy.ceiling(exact_value(inf.kv_cache_bytes_per_token(), subs)))


def k_v_bytes(inf, subs: dict) -> tuple:
    """``(K, V)``: bytes of one cell (token) on one device, all layers, in the K tensors and the
    V tensors llama.cpp keeps (``k_l`` / ``v_l``, llama-kv-cache.cpp): of each attention's cached
    tensors the first is its K, the others its V (MLA's one latent: all K)."""
    k = v = sympy.Integer(0)
    seen = set()
    for e in inf.kv_entries:
        mod = e.path.rsplit("/", 1)[0]
        b = exact_value(inf._entry_position_bytes(e), subs)
        if mod in seen:
            v += b
        else:
            k += b
            seen.add(mod)
    return k, v


def llamacpp_line(inf, subs: dict, cells: int, kv_name: str) -> str:
    """llama.cpp's start-up line ``KV self size  = %7.2f MiB, K (%s): %7.2f MiB, V (%s): %7.2f MiB``
    (ggml-org/llama.cpp ``src/llama-kv-cache.cpp::llama_kv_cache_unified`` up to b5400, and
    ``llama_new_context_with_model`` before it: ``size_k_bytes() + size_v_bytes()`` over 2²⁰,
    ``ggml_type_name``) for ``cells`` cells of dtype ``kv_name``."""
    k, v = (int(sympy.ceiling(x * cells)) for x in k_v_bytes(inf, subs))
    t = GGML_NAMES.get(kv_name, kv_name)
    return f"KV self size  = {(k + v) / MIB:7.2f} MiB, K ({t}): {k / MIB:7.2f} MiB, V ({t}): {v / MIB:7.2f} MiB"


def runtime_kv(runtime: str, inf, memory, subs: dict, weights: int | None, *, tp: int, non_torch: int,
               fraction=None, n_ctx: int, batch: int, kv_name: str, kv_memory: int | None = None,
               rule: str = SGLANG_FRACTION.default, pp: int = 1) -> RuntimeKvCache:
    """The KV cache ``runtime`` (``sglang``, ``trtllm``, ``llamacpp``) sizes on a device of
    ``memory`` bytes (None: only llama.cpp answers) with ``weights`` loaded per rank: the
    runtime's :class:`~costgraph.inference.kv_parts.RuntimeKvCache` (its figures in bytes and tokens,
    and ``lines``, its log lines as costgraph prints them). ``fraction``: the
    runtime's memory fraction, a Rational (None: its default); ``memory``, ``weights``,
    ``non_torch``: bytes; ``n_ctx``, ``batch``: llama.cpp's context and sequences;
    ``kv_memory``: bytes of the KV pool as given (``--kv-memory``: SGLang's ``rest`` after
    ``mem_fraction_static``, TensorRT-LLM's KV bytes), which replaces the memory sizing; ``rule``:
    SGLang's default fraction (:func:`sglang_fraction`), ``pp`` its pipeline stages."""
    RUNTIME.check(runtime)
    _check_kv(runtime, kv_name)
    cell = cell_bytes(inf, subs)
    out = RUNTIME_PARTS[runtime](runtime=runtime, cell_bytes=cell, non_torch_bytes=non_torch, weight_bytes=weights)
    if runtime == "llamacpp":
        cells = n_ctx * batch
        size = cells * cell
        out.n_ctx, out.cells, out.kv_bytes, out.tokens = n_ctx, cells, size, cells
        out.lines = [llamacpp_line(inf, subs, cells, kv_name)]
        if memory is not None and size + (weights or 0) + non_torch > memory:   # the allocation fails at start-up
            out.lines.append(f"llama.cpp would not start: the KV cache and the weights ({(size + (weights or 0)) / GIB:.2f}"
                                f" GiB) and non-torch memory exceed the device's {int(memory) / GIB:.2f} GiB "
                                "(a smaller --max-model-len, --batch or --kv)")
        return out
    if kv_memory is not None:
        return _given(runtime, out, cell, kv_memory)
    if memory is None or weights is None:
        out.lines = [f"{runtime}: needs the device memory (--hardware or --memory)"]
        return out
    if runtime == "sglang":
        f = fraction if fraction is not None else sglang_fraction(tp, rule, memory, pp)
        total = memory - non_torch
        rest = (total - weights) - total * (1 - f)
        tokens = max(int(sympy.floor(rest / cell)), 0)
        out.mem_fraction_static, out.mem_fraction_rule = str(f), "given" if fraction is not None else rule
        out.total_bytes, out.rest_bytes, out.tokens, out.kv_bytes = total, int(sympy.floor(rest)), tokens, tokens * cell
        out.lines = [f"mem_fraction_static={float(f):g}: total {total / GIB:.2f} GiB (memory - non-torch), after "
                        f"weights {(total - weights) / GIB:.2f} GiB, KV pool {float(rest) / GIB:.2f} GiB",
                        f"max_total_num_tokens={tokens}"]
        if tokens <= 0:
            out.lines.append(_NO_ROOM.format("SGLang", "raise --gpu-memory-utilization (mem_fraction_static)"))
        return out
    from .profile_peak import activation_estimate

    f = fraction if fraction is not None else TRTLLM_FRACTION
    act = activation_estimate(getattr(inf, "full", inf), subs, TRTLLM_MAX_NUM_TOKENS, 1)   # its profile run
    free = memory - non_torch - weights - act
    kv = max(int(sympy.floor(f * free)), 0)
    blocks = max(kv // (cell * TRTLLM_TOKENS_PER_BLOCK), 0)
    tokens = blocks * TRTLLM_TOKENS_PER_BLOCK
    out.free_gpu_memory_fraction, out.activation_bytes, out.free_bytes = str(f), act, free
    out.kv_bytes, out.blocks, out.tokens = kv, blocks, tokens
    out.lines = [f"free_gpu_memory_fraction={float(f):g} of {free / GIB:.2f} GiB free after loading and the "
                    f"profile run (activation peak {act / GIB:.2f} GiB, estimate: {TRTLLM_MAX_NUM_TOKENS:,} tokens): "
                    f"{kv / GIB:.2f} GiB for the paged KV cache",
                    f"Number of tokens per block: {TRTLLM_TOKENS_PER_BLOCK}; max tokens in paged KV cache ({tokens})"]
    if tokens <= 0:
        out.lines.append(_NO_ROOM.format("TensorRT-LLM", "less --non-torch-memory, more --tp or a smaller --kv"))
    return out


def _given(runtime: str, out: RuntimeKvCache, cell: int, kv: int) -> RuntimeKvCache:
    """SGLang's or TensorRT-LLM's token count from a KV pool of ``kv`` bytes as given."""
    if runtime == "sglang":
        tokens = kv // cell
        out.rest_bytes, out.tokens, out.kv_bytes, out.kv_memory_given = kv, tokens, tokens * cell, True
        out.lines = [f"KV pool {kv / GIB:.2f} GiB (given: --kv-memory)", f"max_total_num_tokens={tokens}"]
    else:
        blocks = kv // (cell * TRTLLM_TOKENS_PER_BLOCK)
        tokens = blocks * TRTLLM_TOKENS_PER_BLOCK
        out.kv_bytes, out.blocks, out.tokens, out.kv_memory_given = kv, blocks, tokens, True
        out.lines = [f"{kv / GIB:.2f} GiB for the paged KV cache (given: --kv-memory)",
                        f"Number of tokens per block: {TRTLLM_TOKENS_PER_BLOCK}; max tokens in paged KV cache ({tokens})"]
    if tokens <= 0:   # as vLLM's section says it (it printed 0 tokens and nothing more)
        out.lines.append(f"{'SGLang' if runtime == 'sglang' else 'TensorRT-LLM'} would not start: the --kv-memory "
                            "given holds no KV block (a larger --kv-memory)")
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
