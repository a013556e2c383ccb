"""Serving start-up logs against ``costgraph infer`` (issue 29, "done when").

Run:  python bench/bench_serving_logs.py [--json]

Each entry is a public start-up log (quoted below with its URL) and the checks it allows:

* ``weights``: vLLM's "Model loading took X GiB" / "model weights take X GiB" against
  ``infer``'s weights as the runtime loads them (``runtime_weights``), printed at the log's
  rounding: within tolerance when the two prints are equal.
* ``kv_given``: "GPU KV cache size: N tokens" (V1) or "# GPU blocks: N" x block size (V0)
  from the log's own KV memory (``--kv-memory``): within 2 %.
* ``kv_predicted``: the KV memory or tokens predicted from the GPU's memory (``--memory`` the
  log's ``total_gpu_memory``, ``--non-torch-memory`` the log's figure where it prints one):
  within 5 %.
* ``not askable``: what ``infer`` cannot ask, with the reason named in docs/peers.md ("Why our
  numbers differ", vLLM's logs).

A vLLM log with ``"engine": "v0"`` is checked with ``--vllm-engine v0`` (vLLM V0 logs of late 2024:
no attention scalars beside the parameters, costgraph/inference/runtime_weights.py); the rest with V1.

A log with ``"runtime"`` (``sglang``, ``trtllm``, ``llamacpp``: ``infer --runtime``) is checked
against ``serving["runtime"]`` (costgraph/inference/runtimes.py): ``kv_given`` SGLang's
``max_total_num_tokens`` or TensorRT-LLM's "max tokens in paged KV cache" from the KV pool the log
prints (``--kv-memory``), ``kv_predicted`` from the memory the log says was free before loading;
``kv_line`` llama.cpp's ``KV self size`` MiB for the log's ``n_ctx`` and cache type, to its rounding.

Prints one row per check and the summary: within tolerance, outside, not askable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # the checkout's costgraph, not an installed one

GIB = 2**30

# Each log: its URL, the lines quoted, the model (a bundled model and configuration, or a config.json) with
# values changed, the run's settings (infer keywords) and its checks: (kind, logged, extra infer keywords).
LOGS = [
    {"id": "vllm PR #10511, Llama-3-8B, H100, TP 1", "engine": "v0",
     "url": "https://github.com/vllm-project/vllm/pull/10511",
     "quote": "total_gpu_memory 79.22GiB; gpu_memory_utilization 0.90; model weights take 14.96GiB; "
              "non_torch_memory 1.79GiB; PyTorch activation peak memory 1.26GiB; available_kv_cache_memory 53.29GiB",
     "model": ("llama", "llama-3-8b", {}), "tp": 1,
     "checks": [("weights", "14.96", {}),
                ("kv_predicted_memory", 53.29 * GIB, {"memory": "79.22GiB", "non_torch_memory": "1.79GiB"})]},
    {"id": "vllm PR #10511, Llama-3-8B, H100, TP 2", "engine": "v0",
     "url": "https://github.com/vllm-project/vllm/pull/10511",
     "quote": "model weights take 7.48GiB; non_torch_memory 3.58GiB; PyTorch activation peak memory 1.26GiB",
     "model": ("llama", "llama-3-8b", {}), "tp": 2,
     "checks": [("weights", "7.48", {})]},
    {"id": "vllm issue #10517, Llama-3.1-8B-Instruct, RTX 3090, max_model_len 20000 (V0)", "engine": "v0",
     "url": "https://github.com/vllm-project/vllm/issues/10517",
     "quote": "Loading model weights took 14.9888 GB; total_gpu_memory=23.58GiB peak_torch_memory=17.06GiB "
              "non_torch_memory=0.35GiB kv_cache_size=3.81GiB gpu_memory_utilization=0.90; # GPU blocks: 1952; "
              "Maximum concurrency for 20000 tokens per request: 1.56x",
     "model": ("examples/hf/llama-3.1-8b.json", None, {}), "tp": 1,
     "checks": [("weights", "14.9888", {}),
                ("kv_given", 1952 * 16, {"kv_memory": "3.81GiB", "max_model_len": 20000}),
                ("kv_predicted", 1952 * 16, {"memory": "23.58GiB", "non_torch_memory": "0.35GiB",
                                             "max_model_len": 20000, "max_num_batched_tokens": 20000,
                                             "max_num_seqs": 256})]},
    {"id": "vllm issue #10517, Llama-3.1-8B-Instruct, RTX 3090, max_model_len 29000 (V0)", "engine": "v0",
     "url": "https://github.com/vllm-project/vllm/issues/10517",
     "quote": "peak_torch_memory=17.98GiB non_torch_memory=0.35GiB kv_cache_size=2.89GiB; # GPU blocks: 1478",
     "model": ("examples/hf/llama-3.1-8b.json", None, {}), "tp": 1,
     "checks": [("kv_given", 1478 * 16, {"kv_memory": "2.89GiB", "max_model_len": 29000}),
                ("kv_predicted", 1478 * 16, {"memory": "23.58GiB", "non_torch_memory": "0.35GiB",
                                             "max_model_len": 29000, "max_num_batched_tokens": 29000,
                                             "max_num_seqs": 256})]},
    {"id": "vllm PR #17122, Llama-3.1-8B-Instruct, L40S (V1)",
     "url": "https://github.com/vllm-project/vllm/pull/17122",
     "quote": "Model loading took 14.9889 GiB; GPU KV cache size: 158,656 tokens; "
              "Maximum concurrency for 32,768 tokens per request: 4.84x",
     "model": ("examples/hf/llama-3.1-8b.json", None, {}), "tp": 1,
     "checks": [("weights", "14.9889", {}),
                ("not askable", 158_656, "the log prints neither the GPU's total memory nor the KV memory it "
                                         "sized the cache from (the L40S preset's 48 GB is not total_gpu_memory)")]},
    {"id": "vllm PR #12126, Llama-3.2-11B-Vision, H100, --enforce-eager (V0)", "engine": "v0",
     "url": "https://github.com/vllm-project/vllm/pull/12126",
     "quote": "model weights take 19.86GiB; non_torch_memory takes 0.16GiB; PyTorch activation peak memory takes "
              "36.63GiB; the rest of the memory reserved for KV Cache is 14.65GiB; # CUDA blocks: 6001",
     "model": ("mllama", "llama-3.2-11b-vision", {}), "tp": 1,
     "checks": [("weights", "19.86", {}),
                ("not askable", 6001 * 16, "V0's encoder-decoder cache: cross-attention blocks per request "
                                           "(vLLM's CrossAttentionSpec) are not modelled")]},
    {"id": "LMCache issue #1739, Qwen3-14B, one GPU (V1)",
     "url": "https://github.com/LMCache/LMCache/issues/1739",
     "quote": "Available KV cache memory: 6.51 GiB; GPU KV cache size: 42,656 tokens; "
              "Maximum concurrency for 32,768 tokens per request: 1.30x",
     "model": ("qwen3", "qwen3-8b", {"h": 5120, "a": 40, "kv": 8, "d": 128, "i": 17408, "l": 40, "V": 151936}),
     "tp": 1,
     "checks": [("kv_given", 42_656, {"kv_memory": "6.51GiB", "max_model_len": 32768})]},
    {"id": "vllm recipes PR #12, Qwen3-Coder-480B-A35B-Instruct-FP8, H20, -dp 8 (V1)",
     "url": "https://github.com/vllm-project/recipes/pull/12",
     "quote": "the available KV cache memory (48.66 GiB) ... the estimated maximum model length is 205728",
     "model": ("qwen3_moe", "qwen3-30b-a3b", {"h": 6144, "a": 96, "kv": 8, "d": 128, "i": 2560, "l": 62,
                                              "E": 160, "k": 8}), "tp": 1,
     "checks": [("kv_given", 205_728, {"kv_memory": "48.66GiB", "max_model_len": 262_144})]},
    {"id": "vllm issue #21348, Qwen3-235B-A22B-FP8, 4 x H100, TP 4 (V1)",
     "url": "https://github.com/vllm-project/vllm/issues/21348",
     "quote": "Available KV cache memory: 8.11 GiB; GPU KV cache size: 178,880 tokens",
     "model": ("qwen3_moe", "qwen3-30b-a3b", {"h": 4096, "a": 64, "kv": 4, "d": 128, "i": 1536, "l": 94,
                                              "E": 128, "k": 8}), "tp": 4,
     "checks": [("kv_given", 178_880, {"kv_memory": "8.11GiB"})]},
    # ---- SGLang (python/sglang/srt/model_executor/model_runner.py::profile_max_num_token: rest = available after
    # loading - total (1 - mem_fraction_static), "GB" in its logs is 2^30 B; tokens = rest // cell)
    {"id": "SGLang 0.4.3.post4, QwQ-32B, 4 x L4, TP 4, mem_fraction_static 0.85",
     "url": "https://github.com/didier-durand/llms-in-clouds/blob/main/docs/sglang.md",
     "quote": "server_args=ServerArgs(... mem_fraction_static=0.85, ... tp_size=4 ...); Load weight begin. avail "
              "mem=21.63 GB; Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 GB, mem "
              "usage=15.54 GB.; KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB; "
              "max_total_num_tokens=46611",
     "model": ("qwen2", "qwen2-7b", {"h": 5120, "a": 40, "kv": 8, "d": 128, "i": 27648, "l": 64, "s": 131072}),
     "tp": 4, "runtime": "sglang",
     "checks": [("kv_given", 46_611, {"kv_memory": "2.8455GiB"}),       # 6.09 - 21.63 x (1 - 0.85) GB
                ("kv_predicted", 46_611, {"memory": "21.63GiB", "non_torch_memory": "0", "sglang_fraction": "tp"})]},
    {"id": "SGLang (2025-03), Meta-Llama-3.1-8B-Instruct, one 80 GB GPU, TP 1, default mem_fraction_static (0.88)",
     "url": "https://github.com/sgl-project/sglang/pull/4760",
     "quote": "Using Meta-Llama-3.1-8B-Instruct: Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail "
              "mem=63.48 GB, mem usage=15.11 GB.; KV Cache is allocated. #tokens: 442750, K size: 27.02 GB, V size: "
              "27.02 GB",
     "model": ("examples/hf/llama-3.1-8b.json", None, {}), "tp": 1, "runtime": "sglang",
     "checks": [("kv_given", 442_750, {"kv_memory": "54.0492GiB"}),     # 63.48 - (63.48 + 15.11) x (1 - 0.88) GB
                ("kv_predicted", 442_750, {"memory": "78.59GiB", "non_torch_memory": "0",   # free before loading
                                           "sglang_fraction": "tp"})]},     # SGLang 0.4's table (before PR #10975)
    {"id": "SGLang, Qwen3-235B-A22B-FP8, 4 x H100, TP 4, --mem-fraction-static 0.93",
     "url": "https://github.com/vllm-project/vllm/issues/21348",
     "quote": "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB",
     "model": ("qwen3_moe", "qwen3-30b-a3b", {"h": 4096, "a": 64, "kv": 4, "d": 128, "i": 1536, "l": 94,
                                              "E": 128, "k": 8}), "tp": 4, "runtime": "sglang",
     "checks": [("kv_given", 367_404, {"kv_memory": "16.46GiB"})]},
    # ---- TensorRT-LLM (cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp: "[MemUsageChange] Allocated %0.2f GiB for
    # max tokens in paged KV cache (%d)", blocks of tokens_per_block 32)
    {"id": "TensorRT-LLM 1.1.0rc3, gpt-oss-20b, GB10, trtllm-serve, kv_cache_config.max_tokens",
     "url": "https://forums.developer.nvidia.com/t/tensorrt-llm-pytorch-memory-fraction-automatically-limited-to-0-14-"
            "despite-kv-cache-configuration/354807",
     "quote": "max_tokens is set by kv_cache_config.max_tokens: 4128; [MemUsageChange] Allocated 0.19 GiB for max "
              "tokens in paged KV cache (4128).",
     "model": ("gpt_oss", "gpt-oss-20b", {}), "tp": 1, "runtime": "trtllm",
     "checks": [("kv_given", 4128, {"kv_memory": "0.19GiB"})]},
    # ---- llama.cpp ("KV self size  = %7.2f MiB, K (%s): %7.2f MiB, V (%s): %7.2f MiB", src/llama-kv-cache.cpp)
    {"id": "llama.cpp b4462, Qwen2.5-Coder-32B-Instruct q8_0, 2 x RTX 3090 Ti, -c 32768, --cache-type-k/v q8_0",
     "url": "https://github.com/ggml-org/llama.cpp/issues/11200",
     "quote": "llama_kv_cache_init: kv_size = 32768, offload = 1, type_k = 'q8_0', type_v = 'q8_0', n_layer = 64; "
              "KV self size  = 4352.00 MiB, K (q8_0): 2176.00 MiB, V (q8_0): 2176.00 MiB",
     "model": ("qwen2", "qwen2-7b", {"h": 5120, "a": 40, "kv": 8, "d": 128, "i": 27648, "l": 64}), "tp": 1,
     "runtime": "llamacpp", "checks": [("kv_line", "4352.00", {"kv": "q8_0", "max_model_len": 32768})]},
    {"id": "llama-cpp-python (f32 KV, before f16_kv), LLaMA-33B (alpaca ggml q4_1), n_ctx 512",
     "url": "https://github.com/abetlen/llama-cpp-python/issues/66",
     "quote": "n_ctx = 512, n_embd = 6656, n_head = 52, n_layer = 60; llama_init_from_file: kv self size  = "
              "1560.00 MB",
     "model": ("llama", "llama-2-7b", {"h": 6656, "a": 52, "kv": 52, "d": 128, "i": 17920, "l": 60, "V": 32000}),
     "tp": 1, "runtime": "llamacpp", "checks": [("kv_line", "1560.00", {"kv": "fp32", "max_model_len": 512})]},
]


def _model(spec):
    """(model, values) of a log's model: a bundled model and configuration with values changed, or a config.json."""
    from costgraph.commands._analysis import inference_model
    from costgraph.inference import load

    name, config, changes = spec
    if name.endswith(".json"):
        return inference_model(str(ROOT / name), None, {}, {})
    m = load(name)
    return m, m.values(config, **changes)


def run_check(model, values, tp: int, kind: str, logged, extra, runtime: str = "vllm", engine: str = "v1") -> dict:
    """One check: ``{kind, logged, got, diff, within}`` (``within`` None: not askable, ``extra`` the reason)."""
    from costgraph.inference import infer

    if kind == "not askable":
        return {"kind": kind, "logged": logged, "got": None, "diff": None, "within": None, "reason": extra}
    kw = dict(extra)
    max_len = kw.pop("max_model_len", None)
    rep = infer(model, prompt=max_len - 100 if max_len else 1000, generate=100, batch=1, values=values, t=tp,
                max_model_len=max_len, runtime=runtime, vllm_engine=engine, **kw)
    v = rep.serving["vllm" if runtime == "vllm" else "runtime"]
    if kind == "kv_line":   # llama.cpp's "KV self size  = X MiB": the MiB to the print's two decimals
        got = v["lines"][0].split("=")[1].split("MiB")[0].strip()
        return {"kind": kind, "logged": logged, "got": got, "diff": None, "within": got == logged}
    if kind == "weights":
        got = f"{rep.runtime_weights.bytes / GIB:.{len(logged.split('.')[1])}f}"
        return {"kind": kind, "logged": logged, "got": got, "diff": None, "within": got == logged}
    if kind == "kv_predicted_memory":
        got = v["available_bytes"]
        tol = 0.05
    else:
        got = v["tokens"]
        tol = 0.02 if kind == "kv_given" else 0.05
    diff = None if got is None else got / logged - 1
    return {"kind": kind, "logged": logged, "got": got, "diff": diff,
            "within": diff is not None and abs(diff) <= tol, "note": v.get("note") or " / ".join(v.get("lines", []))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    rows = []
    for log in LOGS:
        model, values = _model(log["model"])
        for kind, logged, extra in log["checks"]:
            rows.append({"log": log["id"], "url": log["url"], **run_check(model, values, log["tp"], kind, logged,
                                                                              extra, log.get("runtime", "vllm"),
                                                                              log.get("engine", "v1"))})
    within = sum(r["within"] is True for r in rows)
    outside = [r for r in rows if r["within"] is False]
    asked = [r for r in rows if r["within"] is None]
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        for r in rows:
            verdict = "not askable" if r["within"] is None else "within" if r["within"] else "OUTSIDE"
            got = r["got"] if r["within"] is not None else r.get("reason")
            diff = "" if r["diff"] is None else f" ({r['diff']:+.2%})"
            print(f"{verdict:<12} {r['kind']:<20} logged {r['logged']}, costgraph {got}{diff}  [{r['log']}]")
        print(f"\n{within} of {len(rows)} checks within tolerance, {len(outside)} outside, {len(asked)} not askable "
              f"({within / max(len(rows) - len(asked), 1):.0%} of those asked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
