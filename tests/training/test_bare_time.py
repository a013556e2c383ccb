"""A bare parameter count with a rate: the seeds' rule of thumb time = 6·N·D/(n·X), 8·N·D/(n·X)
with full recomputation (../shared/DOMAIN.md §4; Narayanan et al. 2021 §5.1, Eq. 4:
end-to-end time ≈ 8TP/(nX)), from `costgraph train --params N` and the API
(costgraph.training.bare_time.bare_training_time). And a mixture's 6N on the active parameters."""

import json

import pytest
import sympy

from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.training.bare_time import bare_training_time


def test_gpt3_175b_34_days():
    # DOMAIN.md §4: GPT-3 175B, 300B tokens, 1024 A100 (dense BF16 312 TFLOP/s), utilization 0.45,
    # with recomputation → ≈ 34 days. 8·175e9·300e9 / (1024·312e12·0.45) s, exactly:
    r = bare_training_time(175_000_000_000, tokens=300_000_000_000, gpus=1024, hardware="a100-40gb-sxm",
                           mfu="0.45", recompute="full")
    assert r.flops == 8 * 175 * 10**9 * 300 * 10**9 == 420 * 10**21
    assert r.seconds == sympy.Rational(420 * 10**21 * 100, 1024 * 312 * 10**12 * 45)
    assert round(float(r.days), 2) == 33.81
    assert r.hardware == "a100-40gb-sxm" and r.factor == 8


def test_llama_65b_source_arithmetic():
    # DOMAIN.md §4: LLaMA-65B, 1.4T tokens, 2048 GPUs, the source's peak 624 TFLOP/s (the sparse
    # figure) and utilization 0.3 → ≈ 21–22 days (8TP/(nX)).
    r = bare_training_time(65_000_000_000, tokens="1.4e12", gpus=2048, peak="624e12", mfu="0.3", recompute="full")
    assert r.seconds == sympy.Rational(8 * 65 * 10**9 * 14 * 10**11 * 10, 2048 * 624 * 10**12 * 3)
    assert 21 < float(r.days) < 22 and r.hardware is None


def test_six_nd_without_recompute_and_achieved():
    r = bare_training_time(7_000_000_000, tokens=10**12, gpus=64, achieved="400e12")
    assert r.factor == 6 and r.seconds == sympy.Rational(6 * 7 * 10**9 * 10**12, 64 * 400 * 10**12)
    assert r.gpu_hours == 64 * r.seconds / 3600


def test_cli_bare_hardware_alone_checks_memory(capsys):
    # 7e9 parameters, mixed precision + Adam, no ZeRO: 16 bytes each = 112 GB > the H100's 80 GB
    assert main(["train", "--params", "7e9", "--gpus", "8", "--hardware", "h100-sxm"]) == 0
    out = capsys.readouterr().out
    assert "does NOT fit" in out and "training time" not in out


def test_cli_bare_time(capsys):
    assert main(["train", "--params", "175e9", "--tokens", "300e9", "--gpus", "1024", "--hardware",
                 "a100-40gb-sxm", "--mfu", "0.45", "--recompute", "full", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time"]["rule"] == "8·N·D / (n·X)"
    assert doc["time"]["seconds"] == pytest.approx(420e21 / (1024 * 312e12 * 0.45), rel=1e-12)
    assert doc["fits"]["capacity_bytes"] == 40 * 10**9      # the preset's memory: 2.8 TB / device does not fit
    assert doc["fits"]["fits"] is False
    assert main(["train", "--params", "175e9", "--tokens", "300e9", "--gpus", "1024", "--peak", "312e12",
                 "--mfu", "0.45"]) == 0
    out = capsys.readouterr().out
    assert "rule of thumb 6·N·D / (n·X)" in out and "days" in out


@pytest.mark.parametrize("argv, message", [
    (["--recompute", "selective"], "--recompute needs a model"),
    (["--hardware", "h100-sxm", "--tokens", "1e12"], "needs a rate"),
    (["--recompute", "full"], "needs --tokens"),
    (["--mfu", "0.5"], "needs --tokens"),
])
def test_cli_bare_time_refusals(capsys, argv, message):
    assert main(["train", "--params", "7e9", "--gpus", "8", *argv]) == 2
    assert message in capsys.readouterr().err


def test_api_refusals():
    with pytest.raises(CostgraphValueError, match="recompute none"):
        bare_training_time(10, tokens=10, gpus=1, peak=1, mfu=1, recompute="selective")
    with pytest.raises(CostgraphValueError, match="needs a peak"):
        bare_training_time(10, tokens=10, gpus=1, mfu="0.5")


def test_moe_rule_of_thumb_uses_active_parameters(capsys):
    # Mixtral-8x7B: 12,879,925,248 active of 46,702,792,704 (test_training_compute.py)
    assert main(["train", "mixtral", "--config", "mixtral-8x7b", "--gpus", "8", "--zero", "3",
                 "--attention", "flash"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("6N per token"))
    assert "N active, MoE" in line and f"{6 * 12_879_925_248 / 1e9:.2f} GFLOP" in line
    assert "6N, all parameters" in out


# --- a bare count needs devices (issue 16 trial) ---------------------------------------------------------------------

def test_bare_count_needs_devices(capsys):
    # before: --params with --gpus 0 answered for "1 GPUs"
    assert main(["train", "--params", "7e9", "--gpus", "0"]) == 2
    assert "--gpus must be a positive whole number" in capsys.readouterr().err


# --- a bare count of 1e99 parameters prints no float artefacts (issue 18) --------------------------------------------

def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_train_params_1e99_prints_no_float_artefacts(capsys):
    code, out, err = _cli(capsys, "train", "--params", "1e99", "--tokens", "1e12", "--gpus", "8",
                          "--hardware", "h100-sxm", "--mfu", "0.4")
    assert code == 0, err
    assert "(2.000 x 10⁹⁹ bytes)" in out and "(1.600 x 10¹⁰⁰ bytes)" in out and "QB" not in out
    assert "GPU-hours    4.211 x 10⁹³" in out                        # 6·10¹¹¹ / (8 · 9.894e14 · 0.4) / 3600 · 8
    assert "time         1.895 x 10⁹⁶ s = 2.193 x 10⁹¹ days" in out
    assert all(len(tok) < 40 for line in out.splitlines() for tok in line.split() if "," not in tok)
