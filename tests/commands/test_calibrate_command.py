"""`costgraph calibrate` and `--efficiency-profile` under bad input (costgraph/commands/calibrate.py: the --runs CSV,
-o; costgraph/training/calibration_profile.py: an edited profile's bounds; costgraph.training.calibration.calibrate
through the API): each refused with a located message, a hint and exit status 2, never echoing a file's content."""

import pytest

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.parallel.layout import Layout
from costgraph.training.calibration import Measured, calibrate
from costgraph.training.calibration_file import to_toml
from cli_checks import run as _run, refused as _refused


TRAIN_GPT2 = ["train", "gpt", "--config", "gpt2", "--set", "b=4", "--gpus", "8", "--hardware", "h100-sxm"]


CALIBRATE = ["calibrate", "gpt", "--config", "gpt2", "--set", "b=4", "--gpus", "8", "--global-batch", "64",
             "--hardware", "h100-sxm"]


def test_a_measured_memory_above_the_device_memory_is_refused(capsys):
    # 1e30 bytes on an 80 GB H100 (hardware.toml) was taken, the reserve clipped to the device; the device memory is
    # train's: the 79.22 GiB CUDA reports on an H100 SXM (memory convention cuda; vllm PR #10511's total_gpu_memory)
    _refused(capsys, CALIBRATE + ["--tp", "2", "--measured-step", "0.025", "--measured-memory", "1e30"],
             "is more than the device holds (85,061,827,297 bytes on h100-sxm)")


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


TRAIN_TP2 = TRAIN_GPT2 + ["--tp", "2", "--global-batch", "64"]


def test_a_profile_whose_edited_bounds_reach_below_a_quarter_is_refused(capsys, tmp_path, profile_text):
    # lower = 1e-6 let compute × 0.01 through: a step faster than every kernel at the peak
    import re

    text = re.sub(r'(?m)^lower = "[0-9.]*"', 'lower = "0.000001"', profile_text, count=1)
    text = re.sub(r'(?m)^value = "[0-9.]*"', 'value = "0.01"', text, count=1)
    f = tmp_path / "p.toml"
    f.write_text(text)
    _refused(capsys, TRAIN_TP2 + ["--efficiency-profile", str(f)], "[factor.compute] bounds [1e-06, 4] reach outside "
             "[1/4, 4]", "p.toml:14:1: [factor.compute]")


@pytest.mark.parametrize("flag", [["train", "--efficiency-profile"], ["calibrate", "--runs"]])
def test_an_empty_path_is_refused_as_empty_not_as_a_folder(capsys, flag):
    argv = (TRAIN_TP2 if flag[0] == "train" else CALIBRATE) + [flag[1], ""]
    err = _refused(capsys, argv, f"{flag[1]}: the path is empty")
    assert "folder" not in err


def test_calibrate_on_a_config_json_takes_its_sizes(capsys, tmp_path):
    # train reads the sizes from a config.json; calibrate built the runs without them ("no value for V, a, ...")
    import pathlib
    import shutil

    src = pathlib.Path(__file__).parents[2] / "examples" / "hf" / "llama-3.1-8b.json"
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


def test_a_runs_csv_row_the_layout_refuses_names_its_run(capsys, tmp_path):
    # the second row's layout was refused without saying which row
    f = tmp_path / "runs.csv"
    f.write_text("pipeline_layout,measured_step\nEt*6|t*6L,0.03\nE,0.03\n")
    _refused(capsys, CALIBRATE + ["--runs", str(f)], "run 2: --pipeline-layout 'E': the loss L comes once")


def _gpus(argv: list, n: str) -> list:
    """``argv`` with its --gpus value replaced (a repeated --gpus is refused: cli_errors.Parser)."""
    return [n if k and argv[k - 1] == "--gpus" else w for k, w in enumerate(argv)]


@pytest.mark.parametrize("argv", [
    _gpus(TRAIN_GPT2, "0") + ["--global-batch", "64"],                                   # train
    _gpus(CALIBRATE, "0") + ["--measured-step", "0.03"],                           # calibrate, command line
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
