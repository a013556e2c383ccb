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
    {"id": "vllm PR #10511, Llama-3-8B, H100, TP 1",
     "url": "https://github.com/vllm-project/vllm/pull/10511",
     "quote": "total_gpu_memory 79.22GiB; gpu_memory_utilization 0.90; model weights take 14.96GiB; "
              "non_torch_memory 1.79GiB; PyTorch activation peak memory 1.26GiB; available_kv_cache_memory 53.29GiB",
     "model": ("llama", "llama-3-8b", {}), "tp": 1,
     "checks": [("weights", "14.96", {}),
                ("kv_predicted_memory", 53.29 * GIB, {"memory": "79.22GiB", "non_torch_memory": "1.79GiB"})]},
    {"id": "vllm PR #10511, Llama-3-8B, H100, TP 2",
     "url": "https://github.com/vllm-project/vllm/pull/10511",
     "quote": "model weights take 7.48GiB; non_torch_memory 3.58GiB; PyTorch activation peak memory 1.26GiB",
     "model": ("llama", "llama-3-8b", {}), "tp": 2,
     "checks": [("weights", "7.48", {})]},
    {"id": "vllm issue #10517, Llama-3.1-8B-Instruct, RTX 3090, max_model_len 20000 (V0)",
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
    {"id": "vllm issue #10517, Llama-3.1-8B-Instruct, RTX 3090, max_model_len 29000 (V0)",
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
    {"id": "vllm PR #12126, Llama-3.2-11B-Vision, H100, --enforce-eager (V0)",
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


def run_check(model, values, tp: int, kind: str, logged, extra) -> dict:
    """One check: ``{kind, logged, got, diff, within}`` (``within`` None: not askable, ``extra`` the reason)."""
    from costgraph.inference import infer

    if kind == "not askable":
        return {"kind": kind, "logged": logged, "got": None, "diff": None, "within": None, "reason": extra}
    kw = dict(extra)
    max_len = kw.pop("max_model_len", None)
    rep = infer(model, prompt=max_len - 100 if max_len else 1000, generate=100, batch=1, values=values, t=tp,
                max_model_len=max_len, **kw)
    v = rep.serving["vllm"]
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
            "within": diff is not None and abs(diff) <= tol, "note": v.get("note")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    rows = []
    for log in LOGS:
        model, values = _model(log["model"])
        for kind, logged, extra in log["checks"]:
            rows.append({"log": log["id"], "url": log["url"], **run_check(model, values, log["tp"], kind, logged,
                                                                              extra)})
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
