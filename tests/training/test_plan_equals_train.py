"""plan = train (issue 27 item 1) for dense models and layer patterns: every row `costgraph plan` lists is
accepted by `costgraph train` run with the row's own check command — parsed by the real CLI parser and run
through the API `costgraph train` calls (the train_check fixture of tests/conftest.py) — with the same memory
of the most-loaded device (bytes, exact) and the same step time; a layout train would refuse is never listed.
Llama 3, Gemma 3's layer pattern and Jamba's (attention, Mamba and MoE layers) at several device counts, reserves, conventions, an FP8 policy
(searched on an H100, given on a B200) and a pipeline layout text; the mixtures of experts are in test_plan_equals_train_moe.py, the harness in
tests/plan_train_cases.py."""

import pytest

from plan_train_cases import case_id, every_row_is_train, plan_case

# (model, config, sizes, devices, global batch, device memory[, plan keywords]): a model's cases side by side:
# the planner's forms of a model and settings are derived once (training/plan.py's forms_of, a cache of the last
# few), and a layout text or a device count that leaves them alike derives nothing again
CASES = [
    ("llama", "llama-3-8b", {"s": 2048}, 8, 64, None),
    ("llama", "llama-3-8b", {"s": 2048}, 6, 48, None),
    # a fraction of the device memory and a size (--reserve), on the memory CUDA reports (79.22 GiB on an H100 SXM,
    # vllm PR #10511: runtime_memory.toml [visible.h100-sxm]) and on the printed 80 GB (--memory-convention nominal):
    # the planner's capacity is train's under each (the llama cases' closed forms, derived once)
    ("llama", "llama-3-8b", {"s": 2048}, 8, 64, None, {"reserve": "0.1"}),
    ("llama", "llama-3-8b", {"s": 2048}, 8, 64, None, {"reserve": "8GB", "memory_convention": "nominal"}),
    ("gemma3_text", "gemma-3-1b", {"s": 1024}, 4, 16, None),
    ("jamba", "jamba-v0.1", {"s": 1024}, 8, 16, "1000GB"),   # memory raised: the rule under test is plan = train
    # the new options (issue 27 items 2 and 3): an FP8 policy searched (--allow-fp8: the first FP8 policy only,
    # to keep the test cheap; its rows are the fastest at s = 4096: at s = 1024 TE's quantize kernels and the
    # 262k-vocabulary loss leave Gemma 3 1B's BF16 rows first), Megatron's pipeline layout text as the candidate
    ("gemma3_text", "gemma-3-1b", {"s": 4096}, 4, 16, None, {"allow_fp8": True}),
    # ... with torchtitan's cross-entropy (plan --cross-entropy: a layout field, in the check command), its
    # collectives at the line rates (plan --link-rate line: a convention, not searched, in the check command)
    ("gemma3_text", "gemma-3-1b", {"s": 1024}, 4, 16, None,
     {"pipeline_layout": "Et*7|t*6|t*6|t*7L", "cross_entropy": "pytorch", "link_rate": "line"}),
    # an FP8 policy on Blackwell (issue 27 item 1, found on the GB200 Llama-3.1-405B row of
    # bench/published_layouts.toml): train resolves --fp8-transpose auto on the preset (training.fp8.on_hardware:
    # 'shared' on a B200, compute capability 10.0, as Transformer Engine @ d0067d0d pytorch/utils.py
    # is_non_tn_fp8_gemm_supported decides it), so plan must too: it derived 'separate' (a second FP8 copy of
    # the linear weights and its transposes' time: before the fix its first row, TP 1 ZeRO-2 b 8, was listed at
    # 122,374,210,944 B and 0.40807 s where train gives 115,394,889,088 B and 0.40315 s)
    ("llama", "llama-3-8b", {"s": 2048}, 8, 64, None, {"hardware": "b200", "precision": "fp8-current"}),
    # torchtitan's attention kernel given to plan (plan --attention-kernel: a layout field, in the check command);
    # its per-op SAC rows against train: tests/training/test_plan.py::test_plan_searches_torchtitan_sac
    ("gpt", "gpt2", {"s": 2048}, 1, 8, "6GB", {"attention_kernel": "fa2"}),
]


@pytest.fixture(scope="module", params=CASES, ids=case_id)
def planned(request):
    return plan_case(request.param)


def test_every_row_is_train(planned, train_check):
    every_row_is_train(planned, train_check)
