"""``--launch FILE`` (costgraph.launch, commands/_launch_hook.py): the launch files of the projects' own
examples (examples/launch/, each with its source URL and commit) give the same answer as the flags a
reader writes by hand from the same file: the command's JSON (``to_dict()`` of its result) equal, the
``launch`` object aside. The hand-written flags below are read off each file (line numbers in comments).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_checks import same_answer
from costgraph.launch import read_launch
from costgraph.launch.shell import UNSET, arithmetic, commands

EX = Path(__file__).resolve().parents[2] / "examples" / "launch"
GPT3 = str(EX / "train_gpt3_175b_distributed.sh")
LLAMA = str(EX / "train_llama3_8b_h100_fp8.sh")
TITAN = str(EX / "llama3_8b.toml")
DS = str(EX / "ds_config_zero3.json")
VLLM = str(EX / "vllm_serve_gpt2.sh")


def test_megatron_gpt3_175b_script_equals_hand_flags(cg):
    # Megatron-LM @ d98e8a64 examples/gpt3/train_gpt3_175b_distributed.sh: GPT_MODEL_ARGS (l. 28-35)
    # --num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048
    # --max-position-embeddings 2048; TRAINING_ARGS --micro-batch-size 1 --global-batch-size 1536 --fp16
    # (fp16 params, fp32 main grads: policy megatron); MODEL_PARALLEL_ARGS TP 8, PP 16. The vocabulary is
    # its GPT-2 tokenizer's (--vocab-file): 50257, given by hand on both sides; 128 devices (the script's
    # torchrun has one node of 8: a template, noted).
    launch = same_answer(cg, ["train", "--launch", GPT3, "--gpus", "128", "--set", "V=50257"],
                          ["train", "gpt", "--set", "l=96", "h=12288", "a=96", "s=2048", "b=1", "s_max=2048",
                           "bias=true", "V=50257", "--tp", "8", "--pp", "16", "--precision", "megatron",
                           "--global-batch", "1536", "--gpus", "128"])
    assert launch["model"] == "gpt" and launch["options"]["tp"] == 8 and launch["options"]["pp"] == 16
    assert launch["from"]["tp"]["where"].endswith("train_gpt3_175b_distributed.sh:57")
    assert "--lr (" + GPT3 + ":49)" in launch["ignored"] and launch["unknown"] == []
    assert any("cannot hold TP × PP × CP = 128" in n for n in read_launch(GPT3).notes)


def test_megatron_llama3_8b_fp8_script_equals_hand_flags(cg):
    # Megatron-LM @ d98e8a64 examples/llama/train_llama3_8b_h100_fp8.sh: MODEL_ARGS (l. 56-79) are
    # Llama 3 8B (32 layers, 4096, ffn 14336, 32 heads, 8 query groups, kv-channels 128, vocab 128256,
    # untied, RMSNorm, SwiGLU, rope) = config llama-3-8b; seq 8192, micro-batch 1, global 128;
    # --use-distributed-optimizer (ZeRO 1); --fp8-format hybrid with the default recipe delayed,
    # --fp8-param-gather and --grad-reduce-in-bf16: fp8-delayed-bridge; --sequence-parallel with TP 1
    # (Megatron turns it off); torchrun 8 processes on 1 node; --cross-entropy-loss-fusion (l. 98): the fused loss.
    launch = same_answer(cg, ["train", "--launch", LLAMA],
                          ["train", "llama", "--config", "llama-3-8b", "--set", "s=8192", "b=1", "tied=false",
                           "--gpus", "8", "--zero", "1", "--precision", "fp8-delayed-bridge", "--global-batch", "128",
                           "--cross-entropy", "megatron-fused"])
    assert launch["options"]["cross_entropy"] == "megatron-fused"
    from costgraph.model import load

    config = {str(k): int(v) for k, v in load("llama").values("llama-3-8b", {}).items()}
    assert {k: v for k, v in launch["set"].items() if k != "tied"} == \
        {k: config[k] for k in launch["set"] if k != "tied"}


def test_torchtitan_llama3_8b_toml_equals_hand_flags(cg):
    # torchtitan @ 238fa99 torchtitan/models/llama3/train_configs/llama3_8b.toml: [model] llama3 8B,
    # [training] local_batch_size 1, seq_len 8192; [parallelism] dp_shard -1 (all 64 devices of its
    # "preset for 64 A100 GPUs": FSDP, ZeRO 3), TP/PP/CP 1; [activation_checkpoint] selective, op;
    # [optimizer] AdamW; bf16 mixed precision (job_config.py default); torchtitan's conventions as
    # bench/published_layouts.toml's torchtitan rows name them (trial4: the reader left Megatron's defaults):
    # FSDP2's root kept gathered, F.cross_entropy on fp32 logits (train.py loss_fn), torchtitan's overlap.
    launch = same_answer(cg, ["train", "--launch", TITAN, "--gpus", "64"],
                          ["train", "llama", "--config", "llama-3-8b", "--set", "s=8192", "b=1", "--gpus", "64",
                           "--zero", "3", "--recompute", "torchtitan-op", "--optimizer", "adamw",
                           "--precision", "mixed", "--zero3-gathered", "fsdp2", "--cross-entropy", "pytorch",
                           "--overlap", "torchtitan"])
    assert launch["config"] == "llama-3-8b" and launch["options"]["zero"] == 3
    assert sorted(launch["yields"]) == ["cross_entropy", "overlap", "zero3_gathered"]   # a flag given here wins
    r = cg("train", "--launch", TITAN, "--gpus", "64", "--cross-entropy", "megatron")
    assert r.returncode == 0 and "note: --cross-entropy megatron from the command line" in r.stdout


def test_deepspeed_zero3_json_equals_hand_flags(cg):
    # DeepSpeed @ edaa722 examples/sdma_allgather/ds_config_zero3.json: train_micro_batch_size_per_gpu 1,
    # gradient_accumulation_steps 1, AdamW, bf16 enabled (bf16 parameters and gradients, fp32 master and
    # gradient partition, Adam: policy mixed-fp32-grads, DeepSpeed's estimators' 2 + 18), zero_optimization.stage 3;
    # the model from the command line.
    launch = same_answer(cg, ["train", "llama", "--config", "llama-3-8b", "--launch", DS, "--gpus", "8"],
                          ["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--zero", "3", "--set", "b=1",
                           "--micro-batches", "1", "--optimizer", "adamw", "--precision", "mixed-fp32-grads"])
    assert launch["options"]["zero"] == 3 and "steps_per_print (" + DS + ":4)" in launch["ignored"]


def test_vllm_serve_line_equals_hand_flags(cg):
    # vLLM @ f948f41 docs/serving/parallelism_scaling.md: vllm serve gpt2 --tensor-parallel-size 4
    # --pipeline-parallel-size 2 (eight GPUs). The Hub id gpt2 is the bundled gpt --config gpt2.
    launch = same_answer(cg, ["infer", "gpt", "--config", "gpt2", "--launch", VLLM, "--prompt", "512", "--generate",
                               "128", "--hardware", "h100-sxm"],
                          ["infer", "gpt", "--config", "gpt2", "--tp", "4", "--pp", "2", "--prompt", "512",
                           "--generate", "128", "--hardware", "h100-sxm"])
    assert launch["model"] == "gpt2" and launch["options"] == {"tp": 4, "pp": 2, "gpus": 8}
    assert "gpus=8: not an option of infer" in launch["not_used"]


def test_a_serving_line_whose_id_is_a_bundled_configuration_needs_no_model(cg):
    # `vllm serve gpt2` alone was refused ("'gpt2' is a configuration of the model 'gpt'", hint: costgraph derive)
    launch = same_answer(cg, ["infer", "--launch", VLLM, "--prompt", "512", "--generate", "128", "--hardware",
                               "h100-sxm"],
                          ["infer", "gpt", "--config", "gpt2", "--tp", "4", "--pp", "2", "--prompt", "512",
                           "--generate", "128", "--hardware", "h100-sxm"])
    assert launch["model"] == "gpt" and launch["config"] == "gpt2"
    assert launch["notes"] == ["model gpt2: the bundled gpt --config gpt2"]


def test_text_report_names_what_came_from_the_file(cg):
    r = cg("train", "--launch", LLAMA)
    assert r.returncode == 0, r.stderr
    head = r.stdout.split("\n\n")[0]
    assert head.startswith(f"launch: {LLAMA} (Megatron-LM script)")
    assert f"zero 1  <- {LLAMA}:127 (--use-distributed-optimizer)" in head
    assert f"cross_entropy megatron-fused  <- {LLAMA}:98 (--cross-entropy-loss-fusion)" in head
    assert "ignored (no cost): 57:" in head   # --cross-entropy-loss-fusion is read (the loss kernel), not ignored


def test_command_line_that_contradicts_the_file_is_refused(cg):
    r = cg("train", "--launch", LLAMA, "--tp", "2")
    assert r.returncode == 2 and "--tp 2 on the command line" in r.stderr and f"{LLAMA}:118" in r.stderr
    r = cg("train", "--launch", GPT3, "--gpus", "128", "--tp", "1")   # written at the parser's default: given
    assert r.returncode == 2 and "--tp 1 on the command line" in r.stderr and f"{GPT3}:57" in r.stderr
    r = cg("train", "--launch", LLAMA, "--set", "l=30")
    assert r.returncode == 2 and "--set l=30" in r.stderr and "l=32" in r.stderr
    r = cg("train", "gpt", "--launch", LLAMA)
    assert r.returncode == 2 and "is model llama" in r.stderr
    r = cg("infer", "gpt", "--config", "gpt2", "--launch", LLAMA, "--prompt", "1", "--generate", "1")
    assert r.returncode == 2 and "infer reads a vllm serve or SGLang line" in r.stderr
    r = cg("fit", "--serve", "gpt", "--config", "gpt2", "--launch", VLLM, "--prompt", "8", "--generate", "8",
           "--hardware", "h100-sxm")
    assert r.returncode == 2 and "pipeline-parallel-size 2" in r.stderr
    r = cg("plan", "llama", "--hardware", "h100-sxm")   # --gpus and --global-batch: from a file, or required
    assert r.returncode == 2 and "required: --gpus, --global-batch" in r.stderr


def test_the_batch_option_the_file_excludes_is_refused_with_its_line(cg):
    # train's m = B / (b·d): --global-batch and --micro-batches exclude each other; one from the file and the
    # other from the command line names both (it read "give --global-batch or --micro-batches, not both")
    r = cg("train", "--launch", LLAMA, "--micro-batches", "4")
    assert r.returncode == 2 and "--micro-batches 4 on the command line" in r.stderr
    assert f"gives --global-batch 128 ({LLAMA}:83 (--global-batch-size 128))" in r.stderr
    r = cg("train", "llama", "--config", "llama-3-8b", "--launch", DS, "--gpus", "8", "--global-batch", "64")
    assert r.returncode == 2 and "--global-batch 64 on the command line" in r.stderr
    assert f"gives --micro-batches 1 ({DS}:3 (gradient_accumulation_steps = 1))" in r.stderr


def test_torchtitan_pipeline_micro_batches_and_a_global_batch(cg, tmp_path):
    # with PP and global_batch_size both set, the file gave --micro-batches (local / micro) and --global-batch
    # and train refused "give --global-batch or --micro-batches, not both"; torchtitan's step: global / (local·dp)
    # accumulation steps of local / micro micro-batches = global / (micro·dp) = 128 / (2·4) = 16
    f = tmp_path / "job.toml"
    f.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 8\nglobal_batch_size = 128\n'
                 "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 2\n")
    r = cg("train", "--launch", str(f), "--gpus", "8")
    assert r.returncode == 0, r.stderr
    assert "micro-batches in a step m = 16" in r.stdout and "--set b=2" in r.stdout
    f.write_text(f.read_text().replace("global_batch_size = 128\n", ""))
    assert read_launch(str(f), gpus=8).values["micro_batches"] == 4


def test_a_config_that_contradicts_the_file_is_refused(cg):
    # --config llama-3-70b with torchtitan's 8B flavor listed "config llama-3-8b" from the file and ran 70B's sizes
    r = cg("train", "--config", "llama-3-70b", "--launch", TITAN, "--gpus", "8")
    assert r.returncode == 2, r.stdout[:300]
    assert f"--config llama-3-70b on the command line, but {TITAN} is model llama --config llama-3-8b ({TITAN}:21)" \
        in r.stderr
    r = cg("train", "--config", "llama-3-8b", "--launch", TITAN, "--gpus", "8", "--format", "json")
    assert r.returncode == 0 and json.loads(r.stdout)["launch"]["config"] == "llama-3-8b"


def test_a_config_whose_sizes_contradict_a_megatron_script_is_refused(cg, tmp_path):
    # issue 32's last trial: --config gpt2 with the GPT-3 175B script (Megatron-LM @ d98e8a64, GPT_MODEL_ARGS
    # l. 28-35: --num-layers 96 --hidden-size 12288 --num-attention-heads 96) ran the script's sizes over
    # gpt2's silently; the file names no configuration (a Megatron script gives sizes, not a name)
    r = cg("train", "--launch", GPT3, "--config", "gpt2", "--gpus", "1024")
    assert r.returncode == 2 and "hint: drop --config" in r.stderr, (r.returncode, r.stderr)
    assert f"--config gpt2 on the command line contradicts {GPT3}: l=12 against 96 ({GPT3}:30 (--num-layers 96)); " \
           f"h=768 against 12288 ({GPT3}:31 (--hidden-size 12288))" in r.stderr
    r = cg("train", "gpt", "--launch", GPT3, "--config", "gpt2", "--gpus", "1024")   # MODEL given as well
    assert r.returncode == 2 and "contradicts" in r.stderr
    # a configuration the file agrees with gives what the file lacks (the vocabulary: the script's tokenizer's),
    # said; the run's micro-batch (b) from the file over the configuration's, said, as --set does
    f = tmp_path / "gpt3.sh"
    f.write_text(Path(GPT3).read_text().replace("--micro-batch-size 1 ", "--micro-batch-size 2 "))
    r = cg("train", "--launch", str(f), "--config", "gpt3-175b", "--gpus", "1024", "--format", "json")
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["launch"]["notes"]
    assert "V=50257 from --config gpt3-175b (the file gives no --vocab-size)" in notes
    assert f"b=2 from the file over --config gpt3-175b's b=1 ({f}:39 (--micro-batch-size 2))" in notes
    assert not any(n.startswith("V: the file gives no") for n in notes)
    hand = cg("train", "gpt", "--config", "gpt3-175b", "--set", "b=2", "--tp", "8", "--pp", "16", "--precision",
              "megatron", "--global-batch", "1536", "--gpus", "1024", "--format", "json")
    doc = json.loads(r.stdout)
    doc.pop("launch")
    assert doc == json.loads(hand.stdout)


def test_a_config_that_contradicts_a_megatron_scripts_sizes_is_refused(cg):
    # trial4: a Megatron-LM script gives the sizes as --set (no configuration name): --config llama-3-70b beside
    # the 8B script ran the script's sizes and said nothing of the 70B configuration given
    for command in ("train", "fit"):
        r = cg(command, "--config", "llama-3-70b", "--launch", LLAMA, "--hardware", "h100-sxm")
        assert r.returncode == 2, r.stdout[:300]
        assert f"--config llama-3-70b on the command line contradicts {LLAMA}: l=80 against 32" in r.stderr \
            and "hint: drop --config" in r.stderr
    r = cg("train", "--config", "llama-3-8b", "--launch", LLAMA, "--hardware", "h100-sxm")   # the same sizes
    assert r.returncode == 0, r.stderr


def test_a_launcher_template_that_cannot_hold_the_expert_grid_leaves_the_devices_to_gpus(cg):
    # Megatron-LM @ d98e8a64 examples/mixtral/train_mixtral_8x7b_distributed.sh: one node of 8 (SLURM_NNODES
    # defaults to 1), PP 4, EP 8 (ETP = TP 1): 8 devices hold PP 4 but not EP × ETP × PP = 32; they were
    # taken and train refused "expert parallelism e·etp = 8 must divide d·c·t = 2"
    mixtral = str(EX / "train_mixtral_8x7b_distributed.sh")
    launch = read_launch(mixtral)
    assert "gpus" not in launch.values
    assert any("(8 devices) cannot hold EP × ETP × PP = 32" in n for n in launch.notes)
    r = cg("train", "--launch", mixtral, "--set", "V=32000")
    # the file's global batch needs the devices: refused with its line and the launcher's note (trial6: it said
    # only "--global-batch needs --gpus", a flag never given, with no hint)
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"error: the global batch of {mixtral}:71 (--global-batch-size 256) needs the devices of the run; torchrun "
        "--nproc_per_node 8 --nnodes 1 (8 devices) cannot hold EP × ETP × PP = 32",
        "hint: give --gpus N: t × p × c × d devices for a whole data-parallel degree d"]
    assert read_launch(mixtral, gpus=32).values["gpus"] == 8 and "gpus" in read_launch(mixtral, gpus=32).weak


def test_shell_words_arrays_defaults_and_arithmetic():
    s = commands('N=2\nX=${1:-"MOCK"}\nA=(\n  --a 1  # c\n  "--b $N"\n)\nA+=(--c)\n'
                 'W=$(($N*4))\nrun.py ${A[@]} --w $W --x $X --y $7 \\\n  --z "$(date)"\n')
    words = s.commands[-1]
    assert [w for w, _ in words] == ["run.py", "--a", "1", "--b", "2", "--c", "--w", "8", "--x", "MOCK", "--y",
                                     UNSET + "$7" + UNSET, "--z", UNSET + "$(...)" + UNSET]
    assert [line for w, line in words][1:5] == [4, 4, 5, 5]
    assert arithmetic("2*(3+4)-1", {}) == 13 and arithmetic("__import__('os')", {}) is None


def test_unassigned_variable_is_located(tmp_path):
    f = tmp_path / "run.sh"
    f.write_text("torchrun pretrain_gpt.py --num-layers $LAYERS --hidden-size 8\n")
    with pytest.raises(Exception) as e:
        read_launch(str(f))
    assert "$LAYERS, which this file does not assign" in e.value.message and str(e.value.loc) == f"{f}:1:26"


@pytest.mark.parametrize("value, message", [
    ("$(rm -rf /)", "$(...), a command substitution, which is not run"),
    ("`touch pwned`", "$(...), a command substitution, which is not run"),
    ("$((2**62))", "$((...)), arithmetic beyond whole numbers"),
])
def test_an_expansion_no_assignment_gives_is_named_not_run(tmp_path, value, message):
    # the hint read "assign it in the file ((...)=...)", which no shell takes
    f = tmp_path / "run.sh"
    f.write_text(f"torchrun pretrain_gpt.py --num-layers {value} --hidden-size 8\n")
    with pytest.raises(Exception) as e:
        read_launch(str(f))
    assert message in e.value.message and e.value.hint == "write the value: the file is read, never run"
    assert not (tmp_path / "pwned").exists()


def test_deepspeed_bf16_auto_is_not_read_and_bf16_with_fp16_is_refused(tmp_path):
    # "enabled": "auto" (the Hugging Face Trainer's) read as fp32 before; DeepSpeed asserts "bfloat16 and fp16
    # modes cannot be simultaneously enabled" (deepspeedai/DeepSpeed@edaa722 deepspeed/runtime/config.py)
    f = tmp_path / "ds.json"
    f.write_text('{"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}')
    launch = read_launch(str(f))
    assert "precision" not in launch.values and launch.values["zero"] == 2
    assert any(n.startswith('bf16.enabled "auto"') for n in launch.notes)
    f.write_text('{"bf16": {"enabled": true},\n "fp16": {"enabled": true}}')
    with pytest.raises(Exception) as e:
        read_launch(str(f))
    assert "bf16 and fp16 are both enabled" in e.value.message and str(e.value.loc) == f"{f}:2:1"
    f.write_text('{"fp16": {"enabled": true}}')
    assert read_launch(str(f)).values["precision"] == "mixed-fp32-grads"


def test_deepspeed_batch_sizes_that_disagree_are_refused(tmp_path):
    # DeepSpeed asserts train_batch_size == micro × accumulation × world size ("Check batch related parameters",
    # deepspeedai/DeepSpeed@edaa722 deepspeed/runtime/config.py _batch_assertion); trial6: 7 = 2 × 1 × 8 was run
    # with the total dropped unread
    f = tmp_path / "ds.json"
    f.write_text('{"train_micro_batch_size_per_gpu": 2,\n "gradient_accumulation_steps": 1,\n "train_batch_size": 7}')
    for gpus, world in ((8, "--gpus 8"), (None, "any number of devices")):
        with pytest.raises(Exception) as e:
            read_launch(str(f), gpus=gpus)
        assert e.value.message == (f"train_batch_size 7 is not train_micro_batch_size_per_gpu 2 × "
                                   f"gradient_accumulation_steps 1 × {world}, as DeepSpeed asserts")
        assert str(e.value.loc) == f"{f}:3:1" and e.value.hint
    f.write_text('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "train_batch_size": 16}')
    assert read_launch(str(f), gpus=8).values["micro_batches"] == 1
    with pytest.raises(Exception, match="16 is not .* × --gpus 4"):
        read_launch(str(f), gpus=4)
    f.write_text('{"zero_optimization": {"stage": 7}}')
    with pytest.raises(Exception, match="DeepSpeed has stages 0 to 3") as e:
        read_launch(str(f))
    assert e.value.hint


def test_megatron_bf16_with_fp16_is_refused(tmp_path):
    # Megatron-LM @ d98e8a64 megatron/training/arguments.py validate_args: "if args.fp16: assert not args.bf16";
    # trial6: both were read as --bf16 (policy megatron), silently
    f = tmp_path / "args.txt"
    f.write_text("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16 --micro-batch-size 1\n"
                 "--bf16\n--fp16\n")
    with pytest.raises(Exception) as e:
        read_launch(str(f))
    assert e.value.message == "--bf16 and --fp16 are both given: Megatron-LM asserts one at most"
    assert str(e.value.loc) == f"{f}:3:1" and e.value.hint == "keep one of --bf16 and --fp16"


def test_torchtitan_devices_that_do_not_hold_the_grid_get_a_hint(tmp_path):
    # torchtitan @ 238fa99 llama3_8b.toml with TP 3: data_parallel_shard_degree = -1 takes world / (replicate × TP ×
    # PP × CP) (ParallelDims); 8 devices do not divide by 3: refused at the line, now with a hint (trial6: none)
    f = tmp_path / "job.toml"
    f.write_text(Path(TITAN).read_text().replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 3"))
    with pytest.raises(Exception) as e:
        read_launch(str(f), gpus=8)
    assert e.value.message == "--gpus 8 is not a multiple of replicate × TP × PP × CP = 3"
    assert e.value.hint.startswith("a multiple of 3 devices")


def test_unknown_arguments_are_warned_not_taken(tmp_path):
    f = tmp_path / "args.txt"
    f.write_text("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 16 --micro-batch-size 1\n"
                 "--vocab-size 100 --tensor-model-parallel-size 2 --my-new-flag 3 --lr 1e-4\n")
    launch = read_launch(str(f))
    assert launch.model == "gpt" and launch.values["tp"] == 2 and launch.values["precision"] == "fp32"
    assert launch.unknown == [f"--my-new-flag ({f}:2)"] and launch.ignored == [f"--lr ({f}:2)"]


@pytest.mark.parametrize("content, message", [
    (b"\x00\x01binary", "not a text file"),
    (b"\xff\xfe not utf-8", "not UTF-8 text"),
    (b"echo 'unclosed\n", "single quote (') is not closed"),
    (b"echo hello\n", "no Megatron-LM command found"),
    (b"X=ab\n" + b"X=$X$X\n" * 40, "past the size of a launch script"),   # doubling, bounded (shell.MAX_VALUE)
])
def test_hostile_or_foreign_files_are_refused(tmp_path, content, message):
    f = tmp_path / "launch.sh"
    f.write_bytes(content)
    with pytest.raises(Exception) as e:
        read_launch(str(f))
    assert message in str(e.value) and "\x00" not in str(e.value)


@pytest.mark.parametrize("name, content, where", [
    ("job.toml", '[model]\nname = "llama3"\nflavor = "8B"\n[parallelism]\n\n\ntensor_parallel_degree = 2.5\n', 7),
    ("acc.yaml", "distributed_type: MULTI_GPU\n\n\nnum_processes: -8\n", 4),
    ("ds.json", '{"zero_optimization": {\n\n  "stage": 7}}', 3),
])
def test_a_value_after_blank_lines_is_located_at_its_own_line(tmp_path, name, content, where):
    # `^\s*key` began its match on the blank line above (tensor_parallel_degree at 5, num_processes at 2)
    pytest.importorskip("yaml") if name.endswith(".yaml") else None
    f = tmp_path / name
    f.write_text(content)
    with pytest.raises(Exception) as e:
        read_launch(str(f))
    assert e.value.loc.line == where and e.value.loc.source_line.strip(), str(e.value)


def test_a_file_of_many_keys_is_read_once_and_listed_short(cg, tmp_path):
    # each table's line was a search of the whole text: 200,000 tables (4 MB) ran past a minute; the text
    # report printed a warning line for each; over a MiB is refused, as the shell reader's bound
    f = tmp_path / "job.toml"
    f.write_text('[model]\nname = "llama3"\nflavor = "8B"\n' + "".join(f"[t{i}]\nk = {i}\n" for i in range(30000)))
    launch = read_launch(str(f), gpus=8)
    assert len(launch.unknown) == 30000 and launch.unknown[-1] == f"[t29999] ({f}:60002)"
    r = cg("train", "--launch", str(f), "--gpus", "8")
    assert r.returncode == 0, r.stderr
    head = r.stdout.split("\n\n")[0].splitlines()
    assert "  warning: 29,992 more unknown, not taken (--format json lists them)" in head
    assert sum("warning: unknown" in line for line in head) == 8
    f.write_text('[model]\nname = "llama3"\n' + "#" * (1 << 20))
    with pytest.raises(Exception) as e:
        read_launch(str(f), gpus=8)
    assert "holds over 1,048,576 characters, more than a launch file" in str(e.value)


def test_a_link_out_of_its_folder_is_not_read(tmp_path):
    (tmp_path / "run.sh").symlink_to("/etc/passwd")
    with pytest.raises(Exception) as e:
        read_launch(str(tmp_path / "run.sh"))
    assert "leads out of its folder" in str(e.value) and "root:" not in str(e.value)


def test_sglang_line_and_accelerate_yaml(tmp_path):
    # sglang server_args.py names: --tp-size, --mem-fraction-static, --context-length, --kv-cache-dtype,
    # --max-running-requests, --page-size; accelerate's FSDP config keys (accelerate config writes them).
    s = tmp_path / "serve.sh"
    s.write_text("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 2 "
                 "--mem-fraction-static 0.85 --context-length 8192 --kv-cache-dtype fp8_e5m2 "
                 "--max-running-requests 64 --page-size 1 --port 30000\n")
    launch = read_launch(str(s))
    assert launch.kind == "sglang" and launch.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert launch.values == {"tp": 2, "gpus": 2, "max_model_len": 8192, "max_num_seqs": 64, "page": 1,
                             "gpu_memory_utilization": "0.85", "kv": "fp8", "runtime": "sglang"}
    pytest.importorskip("yaml")
    y = tmp_path / "fsdp.yaml"
    y.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
                 "  fsdp_sharding_strategy: HYBRID_SHARD\n  fsdp_offload_params: false\nmixed_precision: bf16\n"
                 "num_machines: 2\nnum_processes: 16\n")
    launch = read_launch(str(y))
    assert launch.values == {"gpus": 16, "precision": "mixed", "zero": 3, "hsdp": 8}


@pytest.mark.parametrize("name, model, bundled, config, differs", [
    # Megatron-LM @ d98e8a64 examples/post_training/modelopt/conf/deepseek-ai/DeepSeek-R1.sh: MODEL_ARGS
    # only (a file of arguments in a variable); DeepSeek-V3's shape (MLA 1536/512/128+64/128, 256 experts
    # top-8 of width 2048, one shared of 2048, [0]*3+[1]*58); its vocabulary is the tokenizer's (V not given)
    ("DeepSeek-R1.sh", "deepseek_v3", "deepseek_v3", "deepseek-v3", {"s", "V", "D"}),
    # Megatron-LM @ d98e8a64 examples/mixtral/train_mixtral_8x7b_distributed.sh: 32 layers, 4096, ffn 14336,
    # 32 heads, 8 groups, 8 experts top-2, untied; vocabulary the tokenizer's
    ("train_mixtral_8x7b_distributed.sh", "llama", "mixtral", "mixtral-8x7b", {"V"}),
])
def test_megatron_model_arguments_are_the_bundled_configuration(name, model, bundled, config, differs):
    from costgraph.model import load

    launch = read_launch(str(EX / name))
    assert launch.model == model
    values = {str(k): int(v) for k, v in load(bundled).values(config, {}).items()}
    assert {k: v for k, v in launch.dims.items() if k not in differs} == \
        {k: v for k, v in values.items() if k not in differs and k in launch.dims}
    assert set(values) - set(launch.dims) <= differs   # every dimension read but those the file leaves out


def test_a_launcher_template_device_count_yields_to_gpus(cg):
    # the Mixtral script's torchrun runs NNODES=${SLURM_NNODES:-"1"} nodes of 8: --gpus replaces it, noted
    r = cg("train", "--launch", str(EX / "train_mixtral_8x7b_distributed.sh"), "--gpus", "64", "--set", "V=32000")
    assert r.returncode == 0, r.stderr
    assert "note: --gpus 64 from the command line" in r.stdout and "64 GPUs = tp 1 × pp 4" in r.stdout


def test_fit_serve_takes_an_sglang_line(cg, tmp_path):
    # SGLang's --mem-fraction-static is the share of memory it uses: fit's --reserve is the rest (0.15)
    f = tmp_path / "serve.sh"
    f.write_text("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 2 "
                 "--mem-fraction-static 0.85 --kv-cache-dtype fp8_e5m2\n")
    common = ["--prompt", "512", "--generate", "128", "--hardware", "h100-sxm"]
    launch = same_answer(cg, ["fit", "--serve", "llama", "--config", "llama-3-8b", "--launch", str(f), *common],
                          ["fit", "--serve", "llama", "--config", "llama-3-8b", "--tp", "2", "--gpus", "2", "--kv", "fp8",
                           "--reserve", "0.15", *common])
    assert launch["options"]["reserve"] == "0.15" and "runtime=sglang: not an option of fit" in launch["not_used"]


def test_megatron_layout_arguments(tmp_path):
    # Megatron-LM @ d98e8a64 arguments.py: virtual stages = layers / (pp · layers per virtual stage) (32 / (4·4));
    # --recompute-modules as given; torchrun 8 × 8 processes hold TP 2 × PP 4; the arguments held in a
    # string variable are split on blanks where it is expanded unquoted, as bash does
    f = tmp_path / "moe.sh"
    f.write_text('ARGS="--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 '
                 '--group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm '
                 '--position-embedding-type rope --untie-embeddings-and-output-weights --disable-bias-linear '
                 '--vocab-size 32000 --num-experts 8 --moe-router-topk 2 --seq-length 4096 --micro-batch-size 1"\n'
                 "PAR=(--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4\n"
                 "     --num-layers-per-virtual-pipeline-stage 4 --expert-model-parallel-size 8 --sequence-parallel\n"
                 "     --pipeline-model-parallel-layout 'Et*8|(t*8|)*2t*8L')\n"
                 "torchrun --nproc_per_node 8 --nnodes 8 pretrain_gpt.py $ARGS ${PAR[@]} --bf16 \\\n"
                 "  --recompute-granularity selective --recompute-modules core_attn mlp\n")
    launch = read_launch(str(f))
    assert (launch.model, launch.dims["E"], launch.dims["k"], launch.options) == ("llama", 8, 2, {"moe": True,
                                                                                                  "tied": False})
    assert {k: launch.values[k] for k in ("tp", "pp", "ep", "sp", "virtual_stages", "schedule", "recompute",
                                          "recompute_modules", "pipeline_layout", "gpus", "precision")} == {
        "tp": 2, "pp": 4, "ep": 8, "sp": True, "virtual_stages": 2, "schedule": "interleaved",
        "recompute": "selective", "recompute_modules": ["core_attn", "mlp"], "pipeline_layout": "Et*8|(t*8|)*2t*8L",
        "gpus": 64, "precision": "megatron"}
    assert launch.origins["virtual_stages"].where == f"{f}:3"


def test_torchtitan_global_batch_that_does_not_divide_is_located(tmp_path):
    # torchtitan @ 238fa99 torchtitan/train.py (Trainer.__init__, "verify batch sizes"): assert global_batch_size %
    # (local_batch_size * batch_degree) == 0; with PP the rule is the local batch's, not the micro-batch's (8 × 4 = 32,
    # where train's own B % (b·d) would accept 96 = 2 × 4 × 12). Refused before at train, without the file's line.
    f = tmp_path / "job.toml"
    f.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 8\nglobal_batch_size = 100\n'
                 "[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_microbatch_size = 2\n")
    with pytest.raises(Exception) as e:
        read_launch(str(f), gpus=8)
    assert e.value.message == ("[training] global_batch_size = 100 is not a multiple of local_batch_size × "
                               "data-parallel degree = 8 × 4 = 32: torchtitan asserts it")
    assert str(e.value.loc) == f"{f}:6:1" and e.value.hint.startswith("global_batch_size = 96 or 128 (")
    f.write_text(f.read_text().replace("= 100", "= 96"))
    assert read_launch(str(f), gpus=8).values["global_batch"] == 96


def test_megatron_global_batch_that_does_not_divide_is_located_once_gpus_is_known(cg, tmp_path):
    # Megatron-LM @ d98e8a64 megatron/core/num_microbatches_calculator.py l. 381: global batch % (micro × DP) == 0;
    # GPT-3 175B's script (TP 8, PP 16, micro 1) on 1024 GPUs: d = 8; 1537 is refused at its line and column
    f = tmp_path / "gpt3.sh"
    f.write_text(Path(GPT3).read_text().replace("--global-batch-size 1536", "--global-batch-size 1537"))
    line = next(n for n, t in enumerate(f.read_text().split("\n"), 1) if "--global-batch-size" in t)
    r = cg("train", "--launch", str(f), "--gpus", "1024")
    assert r.returncode == 2 and r.stderr.splitlines()[0] == (
        f"{f}:{line}:5: error: the global batch 1537 (--global-batch-size 1537) is not a multiple of micro-batch × "
        "data-parallel degree = 1 × 8 = 8 (--gpus 1024 over t·p·c = 128)")
    assert r.stderr.splitlines()[-1] == ("hint: a global batch of 1536 or 1544 (a whole number of micro-batches per "
                                         "data-parallel rank), or other --gpus")


@pytest.mark.parametrize("name, old, new, message", [
    # '²'.isdigit() is true and int('²') fails: each was an internal error (ValueError); a full-width '８' was read as 8
    ("gpt3.sh", "--num-layers 96", "--num-layers ²", "--num-layers must be a positive whole number, got ²"),
    ("gpt3.sh", "--nproc_per_node $GPUS_PER_NODE", "--nproc_per_node ²", None),
    ("gpt3.sh", "GPUS_PER_NODE=8", "GPUS_PER_NODE=８", None),
    ("job.toml", 'selective_ac_option = "op"', 'selective_ac_option = "²"',
     "[activation_checkpoint] mode = selective, selective_ac_option = ²: costgraph has none, full, selective with op "
     "or every N-th block"),
    # an Arabic-Indic 3 was read as 3 by the pattern's \d (the campaign's launch files: '٨' refused without a hint)
    ("DeepSeek-R1.sh", "[0]*3+[1]*58", "[0]*٣+[1]*58", "--moe-layer-freq: the bundled deepseek_v3 takes "
     "([0]*k+[1]*n), k dense layers then n MoE layers, n + k = --num-layers"),
])
def test_digits_of_other_scripts_are_not_numbers(tmp_path, name, old, new, message):
    f = tmp_path / name
    f.write_text(Path(TITAN if name.endswith(".toml") else GPT3 if name == "gpt3.sh" else EX / name).read_text()
                 .replace(old, new))
    assert new in f.read_text()
    if message is None:   # the launcher's device count is not read: the devices are the command line's
        assert "gpus" not in read_launch(str(f)).values
        return
    with pytest.raises(Exception) as e:
        read_launch(str(f), gpus=8)
    assert e.value.message == message and e.value.loc is not None


def test_every_refusal_of_a_launch_reader_has_a_hint():
    """House rule (issue 30: every refusal prints a hint): each ``located(...)`` and ``CostgraphValueError(...)`` of
    costgraph/launch/ passes ``hint=`` (17 did not: the campaign's mutated launch files met one, --moe-layer-freq)."""
    import ast

    import costgraph.launch as launch

    missing = []
    for path in sorted(Path(launch.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("located", "CostgraphValueError") \
                    and not any(k.arg in ("hint", None) for k in node.keywords):
                missing.append(f"{path.name}:{node.lineno}")
    assert not missing, missing


def test_a_serving_lines_share_in_other_digits_is_refused_at_its_line(cg, tmp_path):
    # fit --serve reads --gpu-memory-utilization as its reserve, 1 − U, through Decimal, which reads '０.８５' as 0.85:
    # the serving line's numbers follow the command line's one rule (ASCII digits; costgraph.arguments.ascii_number)
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve gpt2 --gpu-memory-utilization ０.８５ --tensor-parallel-size 4\n")
    r = cg("fit", "--launch", str(f), "--serve", "--hardware", "h100-sxm", "--prompt", "8", "--generate", "8")
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"error: {f}:1: --gpu-memory-utilization '０.８５': '０' (FULLWIDTH DIGIT ZERO) is not an ASCII digit",
        "hint: write numbers with the ASCII digits 0-9: --gpu-memory-utilization 0.85"]


MOE_ARGS = ('--num-layers 4 --hidden-size 1024 --ffn-hidden-size 3584 --num-attention-heads 8 --group-query-attention '
            '--num-query-groups 8 --swiglu --normalization RMSNorm --position-embedding-type rope '
            '--untie-embeddings-and-output-weights --disable-bias-linear --vocab-size 32000 --num-experts 8 '
            '--moe-router-topk 2 --seq-length 1024 --micro-batch-size 1 --bf16 --expert-model-parallel-size 8')


@pytest.mark.parametrize("words, dispatcher, note", [
    # Megatron-LM @ d98e8a64 transformer_config.py: moe_token_dispatcher_type Literal['allgather', 'alltoall',
    # 'flex'] = "allgather"; moe_flex_dispatcher_backend Literal['deepep', 'hybridep', 'ncclep'] = "deepep";
    # __post_init__: moe_enable_deepep (flex only) sets the backend to deepep
    ("--moe-token-dispatcher-type alltoall", "alltoall", None),
    ("--moe-token-dispatcher-type flex", "deepep", None),   # flex's default backend: DeepEP
    ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep", "deepep", None),
    ("--moe-token-dispatcher-type flex --moe-enable-deepep", "deepep", None),
    ("--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep", None,
     "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep: costgraph has no model of its "
     "kernels; the EP dispatch and combine timed as NCCL's all-to-all (--ep-dispatcher alltoall), assumed"),
    ("--moe-token-dispatcher-type allgather", None,
     "--moe-token-dispatcher-type allgather (every token all-gathered across the EP group, reduce-scattered back) "
     "is not modelled; the EP dispatch and combine timed as NCCL's all-to-all (--ep-dispatcher alltoall), assumed"),
    ("", None, "no --moe-token-dispatcher-type: Megatron-LM's default allgather (every token all-gathered across the "
               "EP group, reduce-scattered back) is not modelled; the EP dispatch and combine timed as NCCL's "
               "all-to-all (--ep-dispatcher alltoall), assumed"),
], ids=["alltoall", "flex", "flex-deepep", "enable-deepep", "flex-hybridep", "allgather", "default"])
def test_megatron_token_dispatcher_reads_as_ep_dispatcher(tmp_path, words, dispatcher, note):
    f = tmp_path / "moe.sh"
    f.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {MOE_ARGS} {words}\n")
    launch = read_launch(str(f))
    assert launch.values.get("ep_dispatcher") == dispatcher
    assert (note in launch.notes) if note else not any("dispatch" in n for n in launch.notes)
    if dispatcher:
        assert launch.origins["ep_dispatcher"].where == f"{f}:1"
        assert not any("moe-token-dispatcher-type" in u for u in launch.ignored + launch.unknown)


def test_megatron_mixtral_example_reads_alltoall(cg):
    # Megatron-LM @ d98e8a64 examples/mixtral/train_mixtral_8x7b_distributed.sh l. 57: --moe-token-dispatcher-type
    # alltoall (EP 8, l. 86): the all-to-all dispatcher, read (no longer ignored)
    mixtral = str(EX / "train_mixtral_8x7b_distributed.sh")
    launch = read_launch(mixtral)
    assert launch.values["ep_dispatcher"] == "alltoall"
    assert launch.origins["ep_dispatcher"].where.endswith("train_mixtral_8x7b_distributed.sh:57")


def test_megatron_token_dispatcher_unknown_value_is_located(cg, tmp_path):
    f = tmp_path / "moe.sh"
    f.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {MOE_ARGS}\\\n  --moe-token-dispatcher-type a2a\n")
    r = cg("train", "--launch", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[0] == (f"{f}:2:3: error: --moe-token-dispatcher-type a2a: Megatron-LM takes "
                                        "allgather, alltoall, flex")
    assert r.stderr.splitlines()[-1].startswith("hint: --moe-token-dispatcher-type allgather or alltoall or flex")


def test_megatron_te_cross_entropy_is_refused_with_the_bridge_convention_as_hint(cg, tmp_path):
    # Megatron-LM @ d98e8a64 megatron/training/arguments.py l. 1697-1702: assert not (cross_entropy_loss_fusion and
    # cross_entropy_fusion_impl == 'te'); Megatron-Bridge's performance recipes run it (perf_recipes/_common.py
    # _benchmark_common(cross_entropy_impl="te")): costgraph's --cross-entropy te, named in the hint
    f = tmp_path / "te.sh"
    f.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {MOE_ARGS} \\\n"
                 "  --cross-entropy-loss-fusion --cross-entropy-fusion-impl te\n")
    r = cg("train", "--launch", str(f))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{f}:2:" in r.stderr.splitlines()[0] and "Megatron-LM refuses it" in r.stderr.splitlines()[0]
    assert r.stderr.splitlines()[-1].endswith("a Megatron-Bridge run with Transformer Engine's kernel: costgraph "
                                              "train --cross-entropy te")
