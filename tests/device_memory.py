"""Device memory figures the tests check against, one named constant each with its source (not a literal
repeated per file)."""

#: NVIDIA H100 SXM 80GB as CUDA reports it: 79.22 GiB (torch.cuda.mem_get_info's total, which vLLM logs as
#: total_gpu_memory), floored to whole bytes, int(7922 · 2^30 / 100). Source: vllm-project/vllm PR #10511
#: (github.com/vllm-project/vllm/pull/10511), an H100's log line "total_gpu_memory     79.22GiB"; the entry
#: runtime_memory.toml [visible.h100-sxm] (costgraph.runtime_memory.visible_memory) reads the same figure.
H100_SXM_CUDA = 85_061_827_297

assert H100_SXM_CUDA == 7922 * 2**30 // 100
