"""Bad input to the features of issues 27 and 29 (calibrate and --efficiency-profile,
--pipeline-layout, the per-kernel time tables, --runtime): each refused with a located
message, a hint and exit status 2, never a traceback, and never echoing a file's content.

Each test pins one behaviour that a hostile run found wrong (the source of each rule is the
module the message names)."""

from __future__ import annotations

import pytest
import sympy

from costgraph.cli import main

GPT2 = ["train", "gpt", "--config", "gpt2", "--set", "b=4", "--gpus", "8", "--hardware", "h100-sxm"]


def _run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("layout, words", [
    ("E", "the loss L comes once, last"),                     # no layers, no loss: Megatron's validate_layer_layout
    ("Et*11L", "places 11 Transformer layer(s) (t); 'gpt' has 12"),
])
def test_a_one_stage_pipeline_layout_is_checked_against_the_model(capsys, layout, words):
    # one stage means p = 1: the layout's checks ran only for p > 1, so 'E' alone trained GPT-2's 12 layers
    rc, out, err = _run(capsys, GPT2 + ["--pipeline-layout", layout])
    assert rc == 2 and words in err and "hint:" in err and "Traceback" not in err


CALIBRATE = ["calibrate", "gpt", "--config", "gpt2", "--set", "b=4", "--gpus", "8", "--global-batch", "64",
             "--hardware", "h100-sxm"]


def _refused(capsys, argv, *words):
    rc, out, err = _run(capsys, argv)
    assert rc == 2, (rc, out, err)
    assert "hint:" in err and "Traceback" not in err
    for w in words:
        assert w in err, err
    return err


def test_a_measured_memory_above_the_device_memory_is_refused(capsys):
    # 1e30 bytes on an 80 GB H100 (hardware.toml) was taken, the reserve clipped to the device
    _refused(capsys, CALIBRATE + ["--tp", "2", "--measured-step", "0.025", "--measured-memory", "1e30"],
             "is more than the device holds (80,000,000,000 bytes on h100-sxm)")


def test_a_runs_csv_linked_to_a_private_file_does_not_echo_its_first_line(capsys, tmp_path):
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n")
    link = tmp_path / "runs.csv"
    link.symlink_to(secret)
    err = _refused(capsys, CALIBRATE + ["--runs", str(link)], "unknown column (not an option name) (column 1)")
    assert "root:x" not in err and "/bin/bash" not in err


def test_a_runs_csv_column_given_twice_is_refused(capsys, tmp_path):
    # tp and its last spelling won silently (the run calibrated as TP 2)
    f = tmp_path / "runs.csv"
    f.write_text("tp,measured_step,tp\n1,0.03,2\n")
    _refused(capsys, CALIBRATE + ["--runs", str(f)], "column 'tp' appears 2 times (columns 1, 3)")


@pytest.mark.parametrize("text, words", [
    ("tp,measured_step\n1,0.03,7\n", "line 2: 3 cells under 2 columns"),
    ("tp,measured_step\n1," + "9" * 140_000 + "\n", "line 2: not a CSV file"),
    ("tp,measured_step\n" + "1,0.03\n" * 1001, "more than 1000 runs"),
], ids=["extra-cell", "huge-cell", "too-many-rows"])
def test_a_runs_csv_of_the_wrong_shape_is_refused_with_a_hint(capsys, tmp_path, text, words):
    f = tmp_path / "runs.csv"
    f.write_text(text)
    _refused(capsys, CALIBRATE + ["--runs", str(f)], words)


def test_a_runs_csv_not_utf8_says_so_for_a_csv(capsys, tmp_path):
    f = tmp_path / "runs.csv"
    f.write_bytes(b"tp,measured_step\n\xff\xfe,0.03\n")
    err = _refused(capsys, CALIBRATE + ["--runs", str(f)], "is not UTF-8 text", "save the CSV file of runs as UTF-8")
    assert "TOML" not in err


def test_two_runs_of_one_layout_measured_far_apart_are_refused(capsys, tmp_path):
    # the same layout at 0.03 s and 0.06 s: no factor fits both, the fit split the difference (+20%, -40%)
    f = tmp_path / "runs.csv"
    f.write_text("tp,measured_step\n1,0.03\n1,0.06\n")
    _refused(capsys, CALIBRATE + ["--runs", str(f)], "runs 1 and 2 are the same run to the time model",
             "more than 10% apart")
    f.write_text("tp,measured_step\n1,0.03\n1,0.031\n2,0.04\n")   # within run-to-run noise: fitted
    rc, out, err = _run(capsys, CALIBRATE + ["--runs", str(f)])
    assert rc == 0 and "3 runs" in out


@pytest.fixture(scope="module")
def profile_text(tmp_path_factory):
    """A one-run profile of GPT-2, TP 2, on h100-sxm, as calibrate -o writes it."""
    from costgraph.parallel.layout import Layout
    import costgraph
    from costgraph.training.calibration import Measured, calibrate
    from costgraph.training.calibration_file import to_toml

    m = costgraph.load("gpt")
    v = m.values("gpt2", b=4)
    return to_toml(calibrate(m, Measured(Layout(t=2, gpus=8), "0.025", values=v, global_batch=64), "h100-sxm",
                             date="2026-12-06"))


TRAIN_TP2 = GPT2 + ["--tp", "2", "--global-batch", "64"]


def test_a_profile_whose_edited_bounds_reach_below_a_quarter_is_refused(capsys, tmp_path, profile_text):
    # lower = 1e-6 let compute × 0.01 through: a step faster than every kernel at the peak
    import re

    text = re.sub(r'(?m)^lower = "[0-9.]*"', 'lower = "0.000001"', profile_text, count=1)
    text = re.sub(r'(?m)^value = "[0-9.]*"', 'value = "0.01"', text, count=1)
    f = tmp_path / "p.toml"
    f.write_text(text)
    _refused(capsys, TRAIN_TP2 + ["--efficiency-profile", str(f)], "[factor.compute] bounds [1e-06, 4] reach outside "
             "[1/4, 4]", "(line ")


@pytest.mark.parametrize("flag", [["train", "--efficiency-profile"], ["calibrate", "--runs"]])
def test_an_empty_path_is_refused_as_empty_not_as_a_folder(capsys, flag):
    argv = (TRAIN_TP2 if flag[0] == "train" else CALIBRATE) + [flag[1], ""]
    err = _refused(capsys, argv, f"{flag[1]}: the path is empty")
    assert "folder" not in err


def test_calibrate_on_a_config_json_takes_its_sizes(capsys, tmp_path):
    # train reads the sizes from a config.json; calibrate built the runs without them ("no value for V, a, ...")
    import pathlib
    import shutil

    src = pathlib.Path(__file__).parent.parent / "examples" / "hf" / "llama-3.1-8b.json"
    model = tmp_path / "llama.json"
    shutil.copy(src, model)
    argv = ["calibrate", str(model), "--set", "b=1", "s=4096", "--gpus", "8", "--global-batch", "64",
            "--hardware", "h100-sxm", "--measured-step", "5"]
    rc, out, err = _run(capsys, argv)
    assert rc == 0 and "1 run" in out and "step 5 s / 5 s" in out, err
    before = model.read_bytes()
    _refused(capsys, argv + ["-o", str(model), "--force"], "is an input of this command")   # -o onto the model
    assert model.read_bytes() == before


@pytest.mark.parametrize("out, words", [("", "-o is empty"), ("no/such/folder/p.toml", "no folder")])
def test_calibrate_output_that_cannot_be_a_file_is_refused_with_a_hint(capsys, tmp_path, monkeypatch, out, words):
    monkeypatch.chdir(tmp_path)
    _refused(capsys, CALIBRATE + ["--tp", "2", "--measured-step", "0.025", "-o", out], words)


@pytest.fixture(scope="module")
def gpt2_fp8_kernels():
    """GPT-2 (b = 4) and h100-sxm's kernel table with its BF16 and FP8 peaks (hardware.toml)."""
    import costgraph
    from costgraph.hardware import preset
    from costgraph.training.kernel_table import kernel_table

    m = costgraph.load("gpt")
    hw = preset("h100-sxm")
    return m, m.values("gpt2", b=4), kernel_table(hw), {"bf16": hw.peak_flops("bf16"), "fp8": hw.peak_flops("fp8")}


def _classes(gpt2_fp8_kernels, **options):
    from costgraph.parallel.layout import Layout
    from costgraph.training.kernel_time import kernel_seconds

    m, v, table, peaks = gpt2_fp8_kernels
    ks = kernel_seconds(m.graph, Layout(gpus=8, policy="fp8-delayed", **options), table, peaks)
    return {k: e.xreplace(v) for k, e in ks.items()}


def test_fp8_dot_product_attention_runs_the_flash_kernel_at_the_fp8_peak(gpt2_fp8_kernels):
    # --fp8-dot-product-attention left the per-kernel step (the default on h100-sxm) unchanged; the
    # attention products run at the FP8 peak (docs/commands/training.md, FP8 training; TE fp8_dpa) with
    # the same η, so the kernel's seconds scale by P_bf16 / P_fp8 and nothing else moves
    base, dpa = _classes(gpt2_fp8_kernels), _classes(gpt2_fp8_kernels, fp8_attention=True)
    _, _, _, peaks = gpt2_fp8_kernels
    assert dpa["attention"] == base["attention"] * sympy.Rational(peaks["bf16"], peaks["fp8"])
    assert dpa["matmul"] == base["matmul"] and dpa["memory"] == base["memory"]


def test_no_fp8_wgrad_runs_the_weight_gradients_at_the_bf16_fit(gpt2_fp8_kernels):
    # --no-fp8-wgrad: the linears' dW GEMMs in BF16 (TE override_linear_precision); it left the per-kernel
    # step unchanged. On GPT-2's small GEMMs the BF16 fit is the faster one (the FP8 fit's launch and
    # per-K work, kernels.toml gemm_fp8_*), so only the change is asserted; the other classes stay
    base, bf16_w = _classes(gpt2_fp8_kernels), _classes(gpt2_fp8_kernels, fp8_wgrad=False)
    assert bf16_w["matmul"] != base["matmul"]
    assert bf16_w["attention"] == base["attention"] and bf16_w["memory"] == base["memory"]


def _user_kernels(tmp_path, monkeypatch, edit):
    """A COSTGRAPH_DATA kernels.toml: the bundled h100-sxm table, renamed h800 (a preset without a
    bundled table) and edited."""
    import pathlib
    import re

    import costgraph.training.kernel_table as kt

    s = (pathlib.Path(kt.__file__).parent / "kernels.toml").read_text()
    start = s.index("[h100-sxm]")
    body = s[start:s.index("\n[", start)].replace("[h100-sxm]", "[h800]", 1)
    (tmp_path / "kernels.toml").write_text(re.sub(edit[0], edit[1], body, count=1, flags=re.M))
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))


H800 = ["train", "gpt", "--config", "gpt2", "--set", "b=4", "--gpus", "8", "--hardware", "h800"]


@pytest.mark.parametrize("edit, words", [
    ((r'^gemm_efficiency = "0.797"', 'gemm_efficiency = "50"'), "[h800] gemm_efficiency = 50 is above 1"),
    ((r'^attention_forward_efficiency = "0.662"', 'attention_forward_efficiency = "5"'),
     "attention_forward_efficiency = 5 is above 1"),
    ((r'^hbm_bandwidth = 2_800_000_000_000', 'hbm_bandwidth = 99_000_000_000_000_000'),
     "is above the preset's memory bandwidth 3,350,000,000,000 B/s"),
], ids=["gemm-above-peak", "attention-above-peak", "bandwidth-above-hbm"])
def test_a_user_kernel_table_faster_than_the_hardware_is_refused(capsys, tmp_path, monkeypatch, edit, words):
    # a kernel at 50 × the peak, or an HBM bandwidth above hardware.toml's h800 (3.35 TB/s), was timed as given
    _user_kernels(tmp_path, monkeypatch, edit)
    _refused(capsys, H800, words)


@pytest.mark.parametrize("edit, words", [
    ((r'^\[h800\]', '[h800'), "not valid TOML"),
    ((r'^gemm_efficiency = "0.797"', 'gemm_efficiency = 0.797'), "is not a decimal number in a string"),
    ((r'^gemm_points = \[', 'gemm_points = [["a"], '), "gemm_points is not a list of"),
], ids=["syntax", "type", "points"])
def test_a_malformed_user_kernel_table_is_refused_with_a_hint(capsys, tmp_path, monkeypatch, edit, words):
    _user_kernels(tmp_path, monkeypatch, edit)
    _refused(capsys, H800, words, "kernels.toml")


INFER = ["infer", "examples/hf/llama-3.1-8b.json", "--prompt", "1000", "--generate", "100", "--hardware", "h100-sxm"]


@pytest.fixture
def repo_root(monkeypatch):
    import pathlib

    monkeypatch.chdir(pathlib.Path(__file__).parent.parent)


@pytest.mark.parametrize("runtime, kv, words", [
    ("llamacpp", "fp8", "--runtime llamacpp has no --kv fp8 cache type"),      # printed as a llama.cpp log line
    ("llamacpp", "int8", "--runtime llamacpp has no --kv int8 cache type"),
    ("sglang", "q8_0", "--kv q8_0 is llama.cpp's block format: --runtime sglang"),
    ("trtllm", "q4_0", "--kv q4_0 is llama.cpp's block format: --runtime trtllm"),
])
def test_a_kv_dtype_the_runtime_has_no_cache_for_is_refused(capsys, repo_root, runtime, kv, words):
    _refused(capsys, INFER + ["--runtime", runtime, "--kv", kv], words)


def test_non_torch_memory_above_the_device_is_refused(capsys, repo_root):
    # 1000 GiB outside PyTorch on an 80 GB H100: SGLang's pool came out at -829.42 GiB, exit 0
    _refused(capsys, INFER + ["--runtime", "sglang", "--non-torch-memory", "1000GiB"],
             "--non-torch-memory 1,073,741,824,000 bytes is not less than the device memory 80,000,000,000 bytes")


@pytest.mark.parametrize("runtime, extra, words", [
    ("sglang", ["--gpu-memory-utilization", "0.1"], "SGLang would not start"),
    ("trtllm", ["--non-torch-memory", "79GB"], "TensorRT-LLM would not start"),
])
def test_a_runtime_left_without_kv_memory_says_it_would_not_start(capsys, repo_root, runtime, extra, words):
    # as vLLM's section says "vLLM would not start" (costgraph.inference.capacity)
    rc, out, err = _run(capsys, INFER + ["--runtime", runtime, *extra])
    assert rc == 0 and words in out and "tokens" in out


def test_a_runs_csv_row_the_layout_refuses_names_its_run(capsys, tmp_path):
    # the second row's layout was refused without saying which row
    f = tmp_path / "runs.csv"
    f.write_text("pipeline_layout,measured_step\nEt*6|t*6L,0.03\nE,0.03\n")
    _refused(capsys, CALIBRATE + ["--runs", str(f)], "run 2: --pipeline-layout 'E': the loss L comes once")


def test_a_pipeline_layout_of_more_than_1024_stages_is_refused_at_once(capsys):
    # 61,442 stages (within the 65,536 symbols) ran past a minute: every stage is analysed
    from costgraph.errors import CostgraphValueError
    from costgraph.parallel.pipeline_layout import MAX_STAGES, parse_pipeline_layout

    text = "Et*12" + "(|)*4096" * 15 + "|L"
    with pytest.raises(CostgraphValueError, match="the layout lists 61,442 stages: at most 1,024"):
        parse_pipeline_layout(text)
    assert len(parse_pipeline_layout("Et*12" + "(|)*1022" + "|L").stages) == MAX_STAGES == 1024
    _refused(capsys, GPT2 + ["--gpus", "61442", "--pipeline-layout", text], "61,442 stages")


@pytest.mark.parametrize("argv", [
    GPT2 + ["--gpus", "0", "--global-batch", "64"],                                   # train
    CALIBRATE + ["--gpus", "0", "--measured-step", "0.03"],                           # calibrate, command line
], ids=["train", "calibrate"])
def test_zero_gpus_beside_a_global_batch_is_refused_not_an_internal_error(capsys, argv):
    # d = gpus / (t·p·c) was taken before --gpus was checked: ZeroDivisionError, exit 3
    _refused(capsys, argv, "gpus (--gpus) must be a positive whole number, got 0")


def test_a_runs_csv_row_with_zero_gpus_is_refused_with_its_run(capsys, tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("gpus,measured_step\n0,0.03\n")
    _refused(capsys, CALIBRATE + ["--runs", str(f)], "gpus (--gpus) must be a positive whole number, got 0")


def test_calibrate_api_refuses_a_run_without_a_layout_and_takes_one_factor_name():
    # Measured(None, ...) raised AttributeError; fit="compute" was read letter by letter ("unknown factor 'c'")
    import costgraph
    from costgraph.errors import CostgraphValueError
    from costgraph.parallel.layout import Layout
    from costgraph.training.calibration import Measured, calibrate

    m = costgraph.load("gpt")
    v = m.values("gpt2", b=4)
    with pytest.raises(CostgraphValueError, match="run 1: the layout is a NoneType, not a Layout"):
        calibrate(m, Measured(None, "0.03", values=v, global_batch=64), "h100-sxm")
    with pytest.raises(CostgraphValueError) as e:
        calibrate(m, Measured(Layout(gpus=8), "abc", values=v, global_batch=64), "h100-sxm")
    assert e.value.message.count("run 1") == 1
    p = calibrate(m, Measured(Layout(t=2, gpus=8), "0.025", values=v, global_batch=64), "h100-sxm", fit="compute")
    assert [f.name for f in p.factors] == ["compute"]


def test_a_llamacpp_context_beyond_the_device_says_it_would_not_start(capsys, repo_root):
    # 10^14 cells printed a 12.5 TiB cache as if llama.cpp had allocated it
    rc, out, err = _run(capsys, INFER + ["--runtime", "llamacpp", "--max-model-len", "99999999999999"])
    assert rc == 0 and "llama.cpp would not start" in out
    rc, out, err = _run(capsys, INFER + ["--runtime", "llamacpp"])
    assert rc == 0 and "would not start" not in out
