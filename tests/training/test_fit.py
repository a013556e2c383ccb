"""Issue 20 item 3: ``costgraph.fit`` / ``costgraph fit`` — the verdict and the next steps are
exactly what the training-memory and inference-capacity analyses answer."""

from __future__ import annotations

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.verdict import Step
from tests.device_memory import H100_SXM_CUDA

# meta-llama/Llama-3.1-8B's config.json (the fields costgraph reads)
LLAMA31 = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 128256,
           "max_position_embeddings": 131072, "hidden_act": "silu", "tie_word_embeddings": False,
           "torch_dtype": "bfloat16"}
GIB = 2**30


@pytest.fixture(scope="module")
def llama():
    return costgraph.load(LLAMA31)


@pytest.fixture(scope="module")
def trained(llama):
    """(fit verdict, Model.train) for 8 × H100-SXM, b = 1, s = 4096, ZeRO 0."""
    v = llama.values("hf", s=4096)
    return (costgraph.fit(llama, hardware="h100-sxm", gpus=8, values=v),
            llama.train(values=v, hardware="h100-sxm", gpus=8))


def test_train_verdict_is_the_training_analysis(llama, trained):
    r, t = trained
    peak = int(sympy.ceiling(t.most_loaded().memory["total"].xreplace(t.values)))
    # the runtime reserve (runtime_memory.toml): the H100's 79.22 GiB as CUDA reports it (vllm PR #10511's
    # total_gpu_memory, floored) less the CUDA context (400 MB, pytorch issue #109888), PyTorch's Hopper cuBLAS
    # workspace (4096 x 8 KiB) and cuBLASLt's (1 MiB) (CublasHandlePool.cpp), and NCCL's buffers of the DP 8
    # communicator: 16 channels x (4 MiB Simple + 512 KiB LL + 4,915,200 B LL128) (NCCL src/init.cc)
    cap = int(sympy.Rational(7922, 100) * GIB)
    held = 400_000_000 + 4096 * 8 * 1024 + 1024 * 1024 + 16 * (2**22 + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8)
    assert (cap, held) == (H100_SXM_CUDA, 588_743_680)
    assert (r.fits, r.status, r.need_bytes, r.usable_bytes, r.capacity_bytes) == (False, 1, peak, cap - held, cap)
    # weights 16,060,522,496 + grads as much + Adam 96,363,134,976 + activations, whose loss is Megatron-LM's default
    # cross-entropy, 6 B a logit (148,923,056,128 under the 4 B count before issue 31: 2 · 4096 · 128256 B less)
    assert peak == 149_973_729_280
    assert t.fits["fits"] is False and r.usable_bytes - r.need_bytes == t.fits["headroom_bytes"]
    want = [Step(c["change"], c["options"], peak, c["peak_bytes"], c["fits"]) for c in t.fits["changes"]]
    assert sorted(r.steps, key=lambda s: s.options) == sorted(want, key=lambda s: s.options)
    assert r.steps[0] == Step("ZeRO 1", "--zero 1", peak, 65_655_986_176, True)   # fitting steps first
    # each change typed (costgraph.training.result_parts.FitChange: its peak in bytes), the JSON its fields
    from costgraph.result_fields import quantities
    from costgraph.training.result_parts import FitChange

    zero1 = next(c for c in t.fits.changes if c.options == "--zero 1")
    assert type(zero1) is FitChange and (zero1.peak_bytes, zero1.fits) == (65_655_986_176, True)
    assert {n: q.unit for n, q in quantities(zero1)}["peak_bytes"] == "bytes"
    assert t.to_dict()["fits"]["changes"] == [dict(c) for c in t.fits.changes]
    assert "try --zero 1: 139.67 GiB → 61.15 GiB, fits" in r.to_text()


def test_train_fits_after_the_step(llama):
    r = costgraph.fit(llama, hardware="h100-sxm", gpus=8, values=llama.values("hf", s=4096), zero=1)
    assert (r.fits, r.status, r.need_bytes, r.steps) == (True, 0, 65_655_986_176, [])   # the ZeRO 1 step above


@pytest.fixture(scope="module")
def served(llama):
    return costgraph.fit(llama, mode="serve", hardware="h100-sxm", gpus=8, values=llama.values("hf"),
                         prompt=32768, generate=1024, batch=32)


def test_serve_verdict_is_the_capacity_analysis(llama, served):
    r = served
    # weights 16,060,522,496 bytes (8,030,261,248 bf16 parameters) + KV cache: 32 sequences × 33,792
    # positions × 2 (K, V) · l 32 · kv 8 · d 128 · 2 bytes = 141,733,920,768
    assert r.need_bytes == 16_060_522_496 + 32 * 33_792 * 131_072 == 157_794_443_264
    # the device as infer's capacity line reads it (costgraph.runtime_memory.device_memory, memory convention cuda):
    # the 79.22 GiB CUDA reports on an H100 (runtime_memory.toml [visible.h100-sxm], vllm PR #10511), 0.9 of it usable
    assert (r.fits, r.status, r.usable_bytes, r.capacity_bytes) == (False, 1, 76_555_644_567, H100_SXM_CUDA)
    assert r.settings["device memory from"].startswith("as CUDA reports it (memory convention cuda)")
    v = {k: x for k, x in llama.values("hf").items() if str(k) not in ("b", "s")}
    fp8 = llama.infer(hardware="h100-sxm", prompt=32768, generate=1024, batch=32, values=v, kv="fp8")
    steps = {s.options: s for s in r.steps}
    assert steps["--kv fp8"] == Step("KV cache fp8", "--kv fp8", r.need_bytes, fp8.values["memory_bytes"], False)
    # fp8 per tensor: half the bytes, and an fp32 scale for K and for V of each of the 32 layers
    assert fp8.values["memory_bytes"] == 16_060_522_496 + 141_733_920_768 // 2 + 2 * 32 * 4
    assert fp8.settings["capacity_bytes"] == r.usable_bytes
    assert steps["--tp 4"].fits and not steps["--tp 2"].fits and "--tp 8" not in steps   # doubled until one fits
    base = llama.infer(hardware="h100-sxm", prompt=32768, generate=1024, batch=32, values=v)
    assert steps[f"--batch {base.values['max_batch']}"].fits and base.values["max_batch"] == 13
    assert [s.fits for s in r.steps] == sorted((s.fits for s in r.steps), reverse=True)
    assert "try --kv fp8: 146.96 GiB → 80.96 GiB, does not fit" in r.to_text()
    assert r.settings["weights from"] == "<dict>: torch_dtype bfloat16"


def test_bad_inputs(llama):
    v = llama.values("hf", s=4096)
    for kwargs, match in [(dict(mode="infer"), "neither 'train' nor 'serve'"),
                          (dict(hardware=None), "needs the device memory"),
                          (dict(prompt=8), "serving settings"),
                          (dict(mode="serve"), "--prompt and --generate"),
                          (dict(mode="serve", prompt=8, generate=8, tp=16), "more than --gpus"),
                          (dict(mode="serve", prompt=8, generate=8, zero=1), "not a serving setting"),
                          (dict(gpus=0), "--gpus")]:
        with pytest.raises(CostgraphValueError, match=match):
            costgraph.fit(llama, **{"hardware": "h100-sxm", "gpus": 8, "values": v, **kwargs})
    with pytest.raises(CostgraphValueError, match="every dimension's value"):
        costgraph.fit(costgraph.load("gpt"), hardware="h100-sxm", gpus=8)


def test_cli_exit_status_and_json(tmp_path, capsys, trained):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA31))
    base = ["fit", str(cfg), "--hardware", "h100-sxm", "--gpus", "8", "--set", "s=4096"]
    assert main(base + ["--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["fits"] is False and doc["status"] == 1 and doc["need_bytes"] == trained[0].need_bytes
    assert doc["steps"] == [vars(s) for s in trained[0].steps]
    assert main(base + ["--zero", "1"]) == 0
    assert capsys.readouterr().out.startswith("llama, training on 8 × h100-sxm: fits")
    assert main(base + ["--serve"]) == 2
    assert "--prompt and --generate" in capsys.readouterr().err
    assert main(base + ["--serve", "--prompt", "8", "--generate", "8", "--zero", "1"]) == 2
    assert "--zero is a training option" in capsys.readouterr().err
    assert main(base + ["--kv", "fp8"]) == 2
    assert "--kv is a serving option" in capsys.readouterr().err


def test_memory_below_the_runtime_reserve_refused(tmp_path, capsys):
    # was "the most-loaded device does NOT fit" with "next steps" for a --memory the runtime alone fills: the
    # runtime reserve of TP 2 on an H100 (test_train_verdict_is_the_training_analysis's parts; NCCL's buffers of
    # one TP 2 communicator, NCCL src/init.cc) is 588,743,680 B, more than --memory 100MB
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA31))
    for command in ("train", "fit"):
        assert main([command, str(cfg), "--hardware", "h100-sxm", "--gpus", "2", "--tp", "2", "--memory", "100MB"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert err.startswith("error: the device memory, 100,000,000 bytes, is not more than the runtime reserve of "
                              "588,743,680 bytes (runtime: CUDA context 400.00 MB + cuBLAS workspace 33.55 MB + "
                              "cuBLASLt workspace 1.05 MB + NCCL buffers 154.14 MB)\n")
        assert "hint: --memory is one GPU's whole memory" in err and "--reserve 0" in err


def test_sizes_and_rates_print_significant_digits_of_the_exact_value():
    """fit's GiB column printed float noise past 16 digits (47,159,269,452,095,136.00 GiB) and a rate of
    5e-10 tokens/s printed 0.0 (issue 30 item 2): two decimals where a double holds them and they show
    a digit, else 4 significant digits computed from the exact value."""
    from fractions import Fraction

    from costgraph.numbers.units import fixed, significant
    from costgraph.verdict import gib

    assert gib(65_771_913_216) == "61.25 GiB"                       # unchanged where two decimals are exact
    assert gib(10**40) == "9.313e+30 GiB"                           # 10^40 / 2^30 = 9.3132257461547851...e30
    assert gib(1) == "9.313e-10 GiB"
    assert fixed(Fraction(1, 2 * 10**9), 1) == "5.000e-10" and fixed(0, 1) == "0.0"
    assert fixed(12_345.678, 1) == "12,345.7"
    assert significant(Fraction(2**200, 3)) == "5.356e+59"          # 2^200/3 = 5.35646...e59


def test_infer_rate_below_a_tenth_is_not_zero(capsys):
    """At --peak 1 FLOP/s and 1 B/s, GPT-2 decodes about 4e-9 tokens/s: printed so, not 0.0."""
    assert main(["infer", "gpt", "--config", "gpt2", "--peak", "1", "--bandwidth", "1", "--prompt", "10",
                 "--generate", "10"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("tokens/s"))
    assert "0.0 " not in line and "e-9 in total" in line, line


def test_fit_keeps_train_warnings_but_not_the_step_time_notes():
    # found by a new user's trial: `fit --lora 16` warned "LoRA adapters are not timed per kernel: the flat
    # --efficiency 0.5 of the peak is assumed", and fit on a preset without a kernel table warned of the flat
    # fallback, though fit prints no time; train's own warnings (a LoRA rank above a side) are kept
    gpt = costgraph.load("gpt")
    v = gpt.values("gpt2")
    lora = dict(lora_rank=1024, lora_targets=("c_attn",))
    for hardware, note in (("h100-sxm", "not timed per kernel"), ("a100-80gb-sxm", "no kernel table for a100")):
        t = gpt.train(values=v, hardware=hardware, gpus=1, **lora)
        timed = t.compute["rate"].notes
        assert any(note in w for w in timed) and set(timed) <= set(t.warnings)
        r = costgraph.fit(gpt, hardware=hardware, gpus=1, values=v, **lora)
        assert r.warnings == [w for w in t.warnings if w not in timed]
        assert any("LoRA rank 1024 is above the smaller side of layers/attn/c_attn" in w for w in r.warnings)
        assert "--efficiency" not in r.to_text()


@pytest.mark.parametrize("reserve", ["-1", "nan", "abc", "1.5B"])
def test_an_unreadable_reserve_names_reserve(reserve):
    # found by a hostile trial: `fit --reserve -1` said "cannot read the memory size '-1'" (which size?),
    # with a hint of sizes only, though --reserve also takes a fraction
    from costgraph.training.fit import reserve_bytes

    with pytest.raises(CostgraphValueError, match=f"cannot read --reserve '{reserve}'") as e:
        reserve_bytes(reserve, 80_000_000_000)
    assert e.value.hint == "a fraction of the device memory (0.1) or a size (8GB, 8GiB)"
    assert reserve_bytes("8GB", 80_000_000_000) == 8_000_000_000 and reserve_bytes("0", 80) == 0


def test_train_refuses_a_reserve_no_verdict_uses(capsys):
    # found by a hostile trial: `train --reserve nan` (or 1XB, or 8GB) without --hardware or --memory ran with
    # exit 0, the reserve read by no fit verdict; an unreadable one with a device memory but without the sizes
    # (no --config: formulas only) passed too
    code = main(["train", "gpt", "--config", "gpt2", "--gpus", "1", "--reserve", "8GB"])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines() == [
        "error: --reserve 8GB keeps memory free for the fit verdict, which needs the device memory",
        "hint: give --hardware NAME or --memory 80GB, or drop --reserve"]
    assert main(["train", "gpt", "--gpus", "1", "--memory", "80GB", "--reserve", "nan"]) == 2
    assert capsys.readouterr().err.splitlines()[0] == "error: cannot read --reserve 'nan'"


def test_serving_refuses_the_training_runtime_reserve(capsys):
    # found by a hostile trial: `fit --serve --reserve runtime` (fit --help: "runtime (default ...)", training's)
    # said "cannot read --reserve 'runtime'" with a hint of plain numbers (0.45, 2.5, 140e12)
    code = main(["fit", "llama", "--config", "llama-3-8b", "--serve", "--hardware", "h100-sxm", "--prompt", "1000",
                 "--generate", "100", "--reserve", "runtime"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert err.splitlines()[0] == ("error: --reserve runtime is the training verdict's (the CUDA context, cuBLAS "
                                   "workspaces and NCCL buffers); serving keeps a fraction of the device memory free")
    assert err.splitlines()[-1] == ("hint: leave --reserve out (serving's default 0.1: vLLM's gpu_memory_utilization "
                                    "0.9) or give a fraction, e.g. --reserve 0.05")


@pytest.mark.parametrize("text", ["2", "2.0", "1.5", "5e9", " 80_000 "])
def test_a_reserve_number_without_a_unit_is_refused(text):
    # a bare number is neither a fraction below 1 nor a size (trial: `--reserve 2.0` read as 2 bytes, `1.5`
    # unreadable); an int from the API stays bytes, a size needs its unit
    from costgraph.training.fit import reserve_bytes

    with pytest.raises(CostgraphValueError, match="without a unit") as e:
        reserve_bytes(text, 80_000_000_000)
    assert "8GB" in e.value.hint
    assert reserve_bytes(2_000_000_000, 80_000_000_000) == 2_000_000_000
    assert reserve_bytes("2GB", 80_000_000_000) == 2_000_000_000


@pytest.mark.parametrize("text, hint", [("1e-1", "--reserve 0.1"), ("5e-2", "--reserve 0.05")])
def test_a_reserve_fraction_in_exponent_form_says_so(text, hint):
    # trial 8: `--reserve 1e-1` said "a number without a unit is neither a fraction below 1 nor a size"; it is 0.1
    from costgraph.training.fit import reserve_bytes

    with pytest.raises(CostgraphValueError, match="a fraction is written as a decimal") as e:
        reserve_bytes(text, 80_000_000_000)
    assert e.value.hint == hint


def test_lora_that_does_not_fit_lists_the_single_changes(llama):
    # found by trial 8: `fit llama --config llama-3-70b --gpus 8 --lora 16 --quantize nf4` (158.96 GiB of 78.67)
    # offered only "--zero 3 --recompute full --gpus 1" (three changes, two of them no help), though
    # --recompute full alone fits at 57.67 GiB: train's verdict listed no change for a LoRA layout
    v = llama.values("hf", s=8192)
    r = costgraph.fit(llama, memory="40GB", gpus=8, values=v, lora_rank=16)
    assert not r.fits
    steps = {s.options: s for s in r.steps}
    full = llama.train(values=v, memory="40GB", gpus=8, lora_rank=16, recompute="full")
    assert steps["--recompute full"].after_bytes == -(-full.most_loaded().memory["total"].xreplace(v) // 1)
    assert steps["--recompute full"].fits is full.fits["fits"] is True
    assert {"--tp 2", "--pp 2"} <= set(steps)
