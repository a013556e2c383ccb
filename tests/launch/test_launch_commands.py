"""``--launch FILE`` through ``plan`` and ``fit`` (issue 32 item 1: train, plan and fit take it) and an
accelerate FSDP YAML through ``train``: the same answer as the flags a reader writes by hand from the same
file, the command's JSON equal, the ``launch`` object aside (as tests/launch/test_launch.py checks train's
and infer's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_checks import same_answer

DS = str(Path(__file__).resolve().parents[2] / "examples" / "launch" / "ds_config_zero3.json")


def test_plan_takes_a_megatron_argument_list(cg, tmp_path):
    # `plan --launch FILE` (issue 32 item 1: train, plan and fit): the model, the global batch and the
    # precision from the file (Megatron-LM @ d98e8a64 arguments.py: --bf16 keeps fp32 main params and grads,
    # policy megatron); the layout (TP 2, micro-batch 1) is what plan searches, listed as not used
    f = tmp_path / "args.txt"
    f.write_text("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16 --max-position-embeddings 16\n"
                 "--micro-batch-size 1 --global-batch-size 8 --vocab-size 128 --bf16 --tensor-model-parallel-size 2\n")
    common = ["--gpus", "8", "--hardware", "h100-sxm", "--top", "3"]
    launch = same_answer(cg, ["plan", "--launch", str(f), *common],
                          ["plan", "gpt", "--set", "l=2", "h=64", "a=4", "V=128", "s=16", "s_max=16", "bias=true",
                           "--global-batch", "8", "--precision", "megatron", *common])
    assert launch["from"]["global_batch"]["where"] == f"{f}:2" and launch["options"]["precision"] == "megatron"
    assert "tp=2: plan searches the layout" in launch["not_used"]


def test_fit_takes_a_deepspeed_json_and_train_an_accelerate_yaml(cg, tmp_path):
    # fit --launch (issue 32 item 1): DeepSpeed @ edaa722 examples/sdma_allgather/ds_config_zero3.json as in
    # test_deepspeed_zero3_json_equals_hand_flags; accelerate's FSDP config (the keys `accelerate config` writes:
    # HYBRID_SHARD shards within a node of num_processes / num_machines = 8 devices, bf16 mixed precision)
    # through train, as the flags a reader writes from it
    launch = same_answer(cg, ["fit", "llama", "--config", "llama-3-8b", "--launch", DS, "--gpus", "8",
                               "--hardware", "h100-sxm"],
                          ["fit", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm",
                           "--zero", "3", "--set", "b=1", "--micro-batches", "1", "--optimizer", "adamw",
                           "--precision", "mixed-fp32-grads"])
    assert launch["options"]["zero"] == 3
    pytest.importorskip("yaml")
    y = tmp_path / "fsdp.yaml"
    y.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
                 "  fsdp_sharding_strategy: HYBRID_SHARD\n  fsdp_offload_params: false\nmixed_precision: bf16\n"
                 "num_machines: 2\nnum_processes: 16\n")
    launch = same_answer(cg, ["train", "llama", "--config", "llama-3-8b", "--launch", str(y)],
                          ["train", "llama", "--config", "llama-3-8b", "--gpus", "16", "--precision", "mixed",
                           "--zero", "3", "--hsdp", "8"])
    assert launch["from"]["hsdp"]["where"].startswith(f"{y}:")
