"""Training FLOPs per iteration, utilization and time (issue 8, items 1-2). Sources per test."""

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.engine.symbols import dim
from costgraph.training.compute import routers, rule_of_thumb_time, training_flops, training_time, utilization
from costgraph.training.memory import Layout

b, s, h, l, V, a = (dim(n) for n in ("b", "s", "h", "l", "V", "a"))
R = sympy.Rational


def _flops(name, **kw):
    layout = Layout(**kw).filled()
    layout.d = 1
    return training_flops(costgraph.load(name).graph, layout)


def test_narayanan_eq_3_full_recompute():
    # Narayanan et al. 2021, Eq. 3: F = 96 B s l h² (1 + s/6h + V/16lh) with activation recomputation
    f = _flops("gpt", recompute="full")
    B = b   # m = d = 1
    assert sympy.expand(f["hardware_per_iteration"] - 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))) == 0
    # without recomputation: 72 B s l h² (1 + s/6h + V/12lh) (ibid. §5.1; Korthikanti et al. 2022 App. A)
    assert sympy.expand(f["model_per_iteration"] - 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (12 * l * h))) == 0
    # Table 1, the 1T-parameter row: h = 25600, l = 128, a = 160, s = 2048, B = 3072, V = 51200
    vals = {h: 25600, l: 128, s: 2048, b: 3072, V: 51200}
    want = 96 * 3072 * 2048 * 128 * 25600**2 * (1 + R(2048, 6 * 25600) + R(51200, 16 * 128 * 25600))
    assert f["hardware_per_iteration"].xreplace(vals) == want


def test_narayanan_training_time_arithmetic():
    # Narayanan et al. 2021 §5.1: GPT-3 175B on 300B tokens, 1024 A100s at 140 TFLOP/s achieved:
    # 8TP/(nX) = 8 · 300e9 · 175e9 / (1024 · 140e12) s ≈ 34 days
    secs = rule_of_thumb_time(175 * 10**9, 300 * 10**9, 1024, 140 * 10**12)
    assert secs == R(5859375, 2) and round(secs / 86400) == 34


def test_seed_examples():
    # seed 003 §3.2: GPT-3 175B, 300B tokens, 1024 A100 at 312 TFLOP/s peak, utilization 0.45: "34 days"
    secs = rule_of_thumb_time(175 * 10**9, 300 * 10**9, 1024, 312 * 10**12 * R(45, 100))
    assert round(secs / 86400) == 34
    # LLaMA-65B, 1.4T tokens, 2048 A100 80GB at the seed's 624 TFLOP/s (the A100's *sparse* figure; the
    # dense peak is 312), utilization 0.3: the arithmetic gives 21.98 days (the seed writes 21)
    secs = rule_of_thumb_time(65 * 10**9, 14 * 10**11, 2048, 624 * 10**12 * R(3, 10))
    assert 21.9 < secs / 86400 < 22.0
    assert 43.9 < rule_of_thumb_time(65 * 10**9, 14 * 10**11, 2048, 312 * 10**12 * R(3, 10)) / 86400 < 44.0


def test_palm_6n_plus_12lhqt_and_its_mfu():
    # PaLM (Chowdhery et al. 2022) App. B: model FLOPs per token = 6N + 12 L H Q T, N the parameters of the
    # matrix products (PaLM has no biases and shares its embedding with the head). From the graph, GPT
    # without biases: per token = 6 (12 l h² + h V) + 12 l a (h/a) s
    f = training_flops(costgraph.load("gpt", options={"bias": False}).graph, Layout().filled())
    assert sympy.expand(f["per_token"] - (6 * (12 * l * h**2 + h * V) + 12 * l * a * (h / a) * s)) == 0
    # PaLM 540B: N = 540.35e9, L = 118, H = 48, Q = 256, T = 2048; 238.3k tokens/s on 6144 TPU v4 chips at
    # 275 TFLOP/s peak: MFU 46.2 %
    per_token = 6 * R(54035, 100) * 10**9 + 12 * 118 * 48 * 256 * 2048
    per_second = {"model_per_iteration": per_token * 238300, "hardware_per_iteration": per_token * 238300}
    mfu = utilization(per_second, devices=6144, peak=275 * 10**12, step_seconds=1)["mfu"]
    assert round(float(mfu), 3) == 0.462


def test_selective_recompute_hardware_flops():
    # Korthikanti et al. 2022: selective recomputation recomputes the attention core; under the matmul
    # convention its forward is QKᵀ: 2 b s² h per layer (TRAINING.md §3: "selective adds the attention
    # core's forward"); model FLOPs are unchanged. Their accounting is now the named convention
    # 'selective-korthikanti'; 'selective' is Megatron's core_attn (tests/training/test_recompute_policies.py)
    f = _flops("gpt", recompute="selective-korthikanti")
    assert sympy.expand(f["hardware_per_iteration"] - f["model_per_iteration"] - 2 * b * s**2 * h * l) == 0
    flash = _flops("gpt", attention="flash")
    assert sympy.expand(flash["hardware_per_iteration"] - f["hardware_per_iteration"]) == 0


def test_router_not_counted_as_megatron():
    # Mixtral: the router is a linear h → E per layer: 2 b s h E forward, twice that backward
    E = dim("E")
    g = costgraph.load("mixtral").graph
    assert routers(g) == {"layers/layer/mlp/gate"}
    with_r = training_flops(g, Layout().filled(), router=True)["model_per_iteration"]
    without = training_flops(g, Layout().filled(), router=False)["model_per_iteration"]
    d = Layout().filled().d
    assert sympy.expand(with_r - without - 6 * b * s * h * E * l * d) == 0


def test_time_from_mfu_and_achieved():
    f = _flops("gpt")
    t = training_time(f, devices=8, peak=312 * 10**12, mfu=R(1, 2), tokens=10**9, price_per_gpu_hour=2)
    assert sympy.expand(t["step_seconds"] - f["model_per_iteration"] / (8 * 312 * 10**12 * R(1, 2))) == 0
    assert sympy.expand(t["cost"] - 2 * t["gpu_hours"]) == 0
    assert sympy.expand(t["train_days"] * 86400 - t["train_seconds"]) == 0


def test_cli_json_sections(capsys):
    assert main(["train", "gpt", "--config", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "8",
                 "--global-batch", "1536", "--recompute", "full", "--achieved", "140e12", "--peak", "312e12",
                 "--tokens", "300e9", "--price", "2", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["plan"]["micro_batches"] == 1536 // 16
    assert set(doc["flops"]) >= {"model_per_iteration", "hardware_per_iteration", "per_token"}
    assert isinstance(doc["flops"]["model_per_iteration"]["value"], int)
    assert set(doc["time"]) >= {"step_seconds", "train_days", "gpu_hours", "cost", "pf_days"}
    assert 34 < doc["time"]["train_days"]["value"] < 35.5
    assert 0 < doc["mfu"]["value"] < doc["hfu"]["value"] == pytest.approx(140 / 312)


@pytest.mark.parametrize("argv, message", [
    (["train", "gpt", "--mfu", "0.5"], "needs a peak"),
    (["train", "gpt", "--mfu", "1.5", "--peak", "1e15"], "fraction"),
    (["train", "gpt", "--mfu", "0.5", "--achieved", "1e14", "--peak", "1e15"], "not both"),
    (["train", "gpt", "--achieved", "fast"], "cannot read --achieved"),
    (["train", "gpt", "--config", "gpt2", "--gpus", "8", "--global-batch", "12"], "not a multiple"),
])
def test_compute_errors(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    # from a second new-user trial
    (["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--achieved", "2e15"],
     "above the peak"),
    (["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--global-batch", "8", "--micro-batches", "4"],
     "not both"),
    (["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--pp", "2", "--schedule", "interleaved",
      "--virtual-stages", "3"], "p·v must divide 32"),
    (["train", "gpt", "--config", "gpt2", "--tokens", "0", "--achieved", "1e14"], "--tokens must be positive"),
    (["train", "gpt", "--config", "gpt2", "--efficiency", "0.3"], "add --hardware"),
    (["train", "gpt", "--config", "gpt2", "--tokens", "1e9"], "need a rate"),
    # trial6: --price without --tokens ran with exit 0 and no cost (price × GPU-hours needs the tokens)
    (["train", "gpt", "--config", "gpt2", "--gpus", "1", "--hardware", "h100-sxm", "--price", "2"],
     "--price needs --tokens"),
    (["plan", "llama", "--config", "llama-3-8b", "--gpus", "1000000000", "--hardware", "h100-sxm",
      "--global-batch", "64"], "up to 1,000,000"),
    (["plan", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--global-batch", "64",
      "--set", "b=2"], "chooses the micro-batch"),
])
def test_more_compute_errors(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_t5_trains_and_moe_shows_active_6n(capsys):
    assert main(["train", "t5", "--config", "t5-small", "--gpus", "8", "--format", "json"]) == 0
    capsys.readouterr()
    # a mixture of experts: 6 × the active parameters beside 6 × all of them (Mixtral-8x7B: 12.9 B of 46.7 B)
    assert main(["train", "mixtral", "--config", "mixtral-8x7b", "--gpus", "8", "--format", "json"]) == 0
    flops = json.loads(capsys.readouterr().out)["flops"]
    assert flops["six_n_active"]["value"] == 6 * 12_879_925_248
    assert flops["six_n"]["value"] == 6 * 46_702_792_704
    # a dense model has no routed-experts line
    assert main(["train", "llama", "--config", "llama-2-7b", "--gpus", "8", "--zero", "3"]) == 0
    assert "routed experts" not in capsys.readouterr().out


def test_step_time_counts_the_traffic_beyond_the_compute():
    """Issue 27: ZeRO-3 gathers longer than the compute are exposed (FSDP prefetch,
    costgraph.training.overlap: the traffic less the (U−1)/U of the compute it runs beside)."""
    from costgraph.hardware import preset
    from costgraph.training.steptime import step_time

    m = costgraph.load("llama")
    vals = m.values("llama-3-70b")
    L = Layout(c=8, zero=3, recompute="selective", m=64, gpus=64)
    st = step_time(m.graph, L, preset("h100-sxm"))
    got = {k: st[k].xreplace(vals) for k in ("compute", "bubble", "optimizer", "communication_overlapped",
                                             "communication_exposed", "contention", "total")}
    fsdp = st["by_kind"]["fsdp"].xreplace(vals)
    assert fsdp > got["compute"]      # FSDP over 64 devices across 8 nodes
    U = 80 + 1                        # units: the 80 layers and the weights outside them
    assert st["overlap"].exposed()["fsdp"].xreplace(vals) == fsdp - sympy.Rational(U - 1, U) * got["compute"]
    # total = compute + bubble + the optimizer step (once per step, after the backward) + exposed traffic
    assert got["total"] == got["compute"] + got["bubble"] + got["optimizer"] + got["communication_exposed"] \
        + got["contention"]   # the compute the hidden part slows (costgraph.training.contention)
    assert got["communication_overlapped"] + got["communication_exposed"] == sum(st["by_kind"].values()).xreplace(vals)


@pytest.mark.parametrize("argv", [
    ["train", "gpt", "--config", "gpt2", "--gpus", "1", "--peak", "0.5"],
    ["train", "gpt", "--config", "gpt2", "--gpus", "1", "--achieved", "0.5"],
    ["infer", "gpt", "--config", "gpt2", "--peak", "0.5", "--bandwidth", "1e12", "--prompt", "10", "--generate", "10"],
])
def test_rates_below_one_flop_per_second_are_refused(argv, capsys):
    """``train ... --peak 0.5`` exited 3 (a complex number from the kernel model's logarithm):
    a rate under 1 FLOP/s is no device and is refused (issue 30 item 2)."""
    from costgraph.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "0.5 FLOP/s is below 1 FLOP/s" in err and "hint:" in err, err
