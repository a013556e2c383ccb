"""One step-time model (issue 16 item 4) and FP8 precision policies as Transformer Engine runs
them (item 3). Exact values; sources per test.

FLOPs of GPT (no recomputation): 72 B s l h² (1 + s/6h + V/12lh) (Narayanan et al. 2021 §5.1;
tests/training/test_training_compute.py): the layers' linears 72 B s l h², the attention core 12 B s² l h,
the head 6 B s h V."""

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.engine.symbols import dim
from costgraph.errors import CostgraphValueError
from costgraph.hardware import preset
from costgraph.training.data import recipe
from costgraph.training.fp8 import weight_buffers

R = sympy.Rational
b, s, h, l, V = (dim(n) for n in ("b", "s", "h", "l", "V"))


@pytest.fixture(scope="module")
def gpt():
    m = costgraph.load("gpt")
    return m, m.values("gpt2")


def _gpt_flops(vals, B=None):
    """(layers' linears, the rest): FLOPs per iteration of GPT-2 small for B sequences."""
    B = vals[b] if B is None else B
    lin = 72 * B * vals[s] * vals[l] * vals[h] ** 2
    rest = 12 * B * vals[s] ** 2 * vals[l] * vals[h] + 6 * B * vals[s] * vals[h] * vals[V]
    return lin, rest


def _step(model, vals, **kw):
    r = model.train(values=vals, attention="eager", **kw)
    return {k: sympy.sympify(v).xreplace(vals) for k, v in r.step.items()}, r


# ---------------------------------------------------------------- item 4: one step time

def test_each_rate_gives_the_exact_step(gpt):
    m, v = gpt
    F = sum(_gpt_flops(v))
    P = 10**15
    # --peak alone: the default efficiency 1/2 of it; no preset, so no communication
    st, r = _step(m, v, gpus=1, peak=P)
    assert st["total"] == st["compute"] == R(F, P // 2) and st["bubble"] == 0
    assert r.compute["rate"].kind == "efficiency" and r.to_dict()["step"]["hardware"] is None
    # --efficiency e of --peak P
    st, _ = _step(m, v, gpus=1, peak=P, efficiency="0.4")
    assert st["total"] == F / (P * R(2, 5))
    # --mfu u: model FLOPs / (peak × u) (PaLM App. B, the seeds' MFU)
    st, r = _step(m, v, gpus=1, peak=P, mfu="0.4")
    assert st["total"] == F / (P * R(2, 5)) and r.compute["mfu"].xreplace(v) == R(2, 5)
    # --achieved X: hardware FLOPs / X (Narayanan §5.1)
    st, r = _step(m, v, gpus=1, achieved="4e14", peak=P)
    assert st["total"] == R(F, 4 * 10**14) and r.compute["hfu"] == R(2, 5)
    # the time section derives from the same step
    assert r.compute["time"]["step_seconds"].xreplace(v) == st["total"]


def test_rates_agree_and_differ_where_they_should(gpt):
    m, v = gpt
    P = 10**15
    steps = [_step(m, v, gpus=1, peak=P, **kw)[0]["total"] for kw in
             ({"efficiency": "0.5"}, {"mfu": "0.5"}, {"achieved": "5e14"})]
    assert steps[0] == steps[1] == steps[2]   # no recomputation: model = hardware FLOPs
    # full recomputation: --mfu counts model FLOPs, --efficiency and --achieved hardware FLOPs
    # (one more forward of the layers: 96 B s l h²(1 + s/6h) + 6 B s h V, Narayanan Eq. 3)
    F_model = sum(_gpt_flops(v))
    F_hw = 96 * v[s] * v[l] * v[h] ** 2 * (1 + R(v[s], 6 * v[h])) + 6 * v[s] * v[h] * v[V]
    eff, mfu, ach = (_step(m, v, gpus=1, peak=P, recompute="full", **kw)[0]["total"] for kw in
                     ({"efficiency": "0.5"}, {"mfu": "0.5"}, {"achieved": "5e14"}))
    assert eff == ach == F_hw / (P * R(1, 2)) and mfu == F_model / (P * R(1, 2))


def test_peak_overrides_the_preset_and_the_step_follows(gpt):
    m, v = gpt
    F = sum(_gpt_flops(v))
    # the flat model asked for: h100-sxm has a kernel table, whose model is the default
    st, r = _step(m, v, gpus=1, hardware="h100-sxm", efficiency="0.5")
    assert st["compute"] == R(F, 494_700_000_000_000)              # 989.4 TFLOP/s × 1/2 (hardware.toml)
    st2, r2 = _step(m, v, gpus=1, hardware="h100-sxm", peak="500e12")   # another peak: the flat default
    assert st2["compute"] == R(F, 250 * 10**12)                     # --peak changes the step, not only the time
    assert r2.compute["time"]["step_seconds"].xreplace(v) == st2["total"]


def test_bubble_and_rate_covers(gpt):
    # p = 2, m = 4: bubble = compute × (p − 1)/(v·m) = compute / 4 when the rate covers the compute
    # (Narayanan et al. 2021 §2.2); a rate measured over whole steps already holds it
    m, v = gpt
    P = 10**15
    on_step = _step(m, v, gpus=2, p=2, m=4, peak=P, mfu="0.5")[0]
    on_compute = _step(m, v, gpus=2, p=2, m=4, peak=P, mfu="0.5", rate_covers="compute")[0]
    F = sum(_gpt_flops(v, B=4)) / 2    # per device: B = b·m·d = 4 sequences over 2 devices
    assert on_step["total"] == on_step["compute"] == F / (P * R(1, 2)) and on_step["bubble"] == 0
    assert on_compute["bubble"] == on_compute["compute"] / 4
    assert on_compute["total"] == R(5, 4) * on_step["total"]


@pytest.mark.parametrize("kw, message", [
    ({"mfu": "0.4", "efficiency": "0.5", "peak": "1e15"}, "give one rate, not --mfu and --efficiency"),
    ({"achieved": "1e14", "efficiency": "0.5"}, "give one rate"),
    ({"efficiency": "0.5", "rate_covers": "step", "peak": "1e15"}, "covers the compute"),
    ({"mfu": "0.5", "peak": "1e15", "rate_covers": "kernels"}, "unknown --rate-covers"),
    ({"policy": "fp8-delayed", "peak": "1e15"}, "add --hardware"),
    ({"policy": "fp8-current", "hardware": "a100-80gb-sxm"}, "no fp8 peak"),
])
def test_rate_errors(gpt, kw, message):
    m, v = gpt
    with pytest.raises(CostgraphValueError, match=message):
        m.train(values=v, gpus=1, attention="eager", **kw)


def test_cli_shows_one_step_and_names_the_rate(capsys):
    argv = ["train", "llama", "--config", "llama-3-8b", "--set", "b=1", "s=8192", "--gpus", "8", "--zero", "3",
            "--hardware", "h100-sxm", "--attention", "flash"]
    assert main([*argv, "--mfu", "0.4"]) == 0
    out = capsys.readouterr().out
    assert "step time (s)" not in out and out.count("step time model on h100-sxm") == 1
    assert "rate: --mfu 0.4" in out and "MFU                                 40.00%" in out
    assert main([*argv, "--mfu", "0.4", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["time"]["step_seconds"] == doc["step"]["total"]
    assert doc["step"]["rate"] == {"kind": "mfu", "value": 0.4, "covers": "step",
                                   "peaks": {"bf16": 989_400_000_000_000}}
    assert doc["step"]["efficiency"] is None
    assert main([*argv, "--mfu", "0.4", "--efficiency", "0.5"]) == 2
    assert "give one rate" in capsys.readouterr().err


# ---------------------------------------------------------------- item 3: FP8

def test_fp8_matmuls_at_the_fp8_peak(gpt):
    # the layers' linears at the FP8 peak, the attention core and the head at the BF16 peak
    # (H100 SXM whitepaper: 1978.9 and 989.4 TFLOP/s dense; hardware.toml)
    m, v = gpt
    lin, rest = _gpt_flops(v)
    P8, P = 1_978_900_000_000_000, 989_400_000_000_000
    for pol in ("fp8-delayed", "fp8-current", "fp8-blockwise"):
        st, r = _step(m, v, gpus=1, hardware="h100-sxm", policy=pol, efficiency="0.5")
        assert st["compute"] == lin / (P8 * R(1, 2)) + rest / (P * R(1, 2))
        assert r.compute["rate"].peaks == {"bf16": P, "fp8": P8}
    bf16 = _step(m, v, gpus=1, hardware="h100-sxm", policy="megatron", efficiency="0.5")[0]["compute"]
    assert bf16 == (lin + rest) / (P * R(1, 2))
    # --mfu u: the model FLOPs of each precision at u of its peak; --achieved: one rate for all
    st = _step(m, v, gpus=1, hardware="h100-sxm", policy="fp8-delayed", mfu="0.5")[0]
    assert st["total"] == lin / (P8 * R(1, 2)) + rest / (P * R(1, 2))
    st = _step(m, v, gpus=1, hardware="h100-sxm", policy="fp8-delayed", achieved="5e14")[0]
    assert st["total"] == R(lin + rest, 5 * 10**14)


def test_fp8_buffers_of_one_linear_by_hand():
    # One TE Linear of 4096 → 4096 (weight [out, in] = [4096, 4096]), TE @ d0067d0d:
    # - pytorch/module/linear.py: the FP8 weight cached in _fp8_workspaces["weight"]: uint8 [4096, 4096]
    # - pytorch/tensor/float8_tensor.py::Float8CurrentScalingQuantizer.inner_tensor_specs: _transpose uint8
    #   [4096, 4096] (Hopper; none on Blackwell+), _scale_inv float32 (1,)
    # - pytorch/module/base.py::set_meta_tensor: 3 forward + 2 backward quantizers (num_gemms = 1);
    #   pytorch/quantization.py::DelayedScalingRecipeState: scale float32 [n], amax_history float32 [1024, n]
    n = 4096 * 4096
    delayed = weight_buffers(recipe("delayed"), 4096, 4096)
    assert delayed == {"fp8 weight copy": n, "fp8 weight transpose": n, "fp8 scales": 4,
                       "fp8 amax history": (3 * 4 + 1024 * 3 * 4) + (2 * 4 + 1024 * 2 * 4)}
    assert sum(delayed.values()) == 33_574_936
    assert weight_buffers(recipe("current"), 4096, 4096, "shared") == {
        "fp8 weight copy": n, "fp8 weight transpose": 0, "fp8 scales": 4, "fp8 amax history": 0}
    # float8_blockwise_tensor.py::get_scale_shape, 2-D (128 x 128) weight blocks, fp32:
    # rowwise (ceil(M/128), up4(ceil(K/128))), columnwise (ceil(K/128), up4(ceil(M/128)))
    blk = weight_buffers(recipe("blockwise"), 1000, 300)
    assert blk["fp8 scales"] == 4 * (8 * 4 + 3 * 8) and blk["fp8 weight transpose"] == 300_000
    # mxfp8_tensor.py::get_scale_shape: rowwise [up128(M), up4(K // 32)], columnwise [up4(M // 32), up128(K)], uint8
    mx = weight_buffers(recipe("mxfp8"), 1000, 300)
    assert mx["fp8 scales"] == 1024 * 12 + 32 * 384
    assert weight_buffers(recipe("mxfp8"), 1000, 300, "shared")["fp8 weight transpose"] == 300_000


def test_fp8_memory_of_gpt_per_stage(gpt, capsys):
    # GPT's layers: c_attn h→3h, c_proj h→h, c_fc h→4h, c_proj 4h→h: 12h² weights a layer, split by t
    m, v = gpt
    r = m.train(values=v, gpus=2, t=2, attention="eager", policy="fp8-delayed")
    mem = {k: sympy.sympify(x).xreplace(v) for k, x in r.stages[0].memory.items()}
    lay = v[l] * 12 * v[h] ** 2 / 2
    assert mem["fp8 weight copy"] == mem["fp8 weight transpose"] == lay
    assert mem["fp8 scales"] == 4 * 4 * v[l] and mem["fp8 amax history"] == 4 * v[l] * 20_500
    assert mem["total"] - mem["fp8"] == sum(mem[k] for k in ("weights", "gradients", "optimizer", "activations"))
    # the model states are Megatron's (bf16 param, fp32 main grad, fp32 master and Adam: 18 bytes)
    meg = m.train(values=v, gpus=2, t=2, attention="eager", policy="megatron").stages[0].memory
    assert all(sympy.expand(meg[k] - r.stages[0].memory[k]) == 0 for k in ("weights", "gradients", "optimizer"))
    # Blackwell+: one buffer for both usages
    shared = m.train(values=v, gpus=2, t=2, attention="eager", policy="fp8-current", fp8_transpose="shared")
    assert shared.stages[0].memory["fp8 weight transpose"] == 0
    # the CLI names every part, the JSON too
    argv = ["train", "gpt", "--config", "gpt2", "--gpus", "2", "--tp", "2", "--precision", "fp8-delayed",
            "--attention", "eager"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert all(p in out for p in ("fp8 weight copy", "fp8 weight transpose", "fp8 scales", "fp8 amax history"))
    assert main([*argv, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["memory"]["fp8"]["fp8 amax history"]["value"] == 4 * 12 * 20_500


def test_fp8_policy_names_a_known_recipe(tmp_path, monkeypatch):
    (tmp_path / "policies.toml").write_text(
        '[my-fp8]\ndescription = "x"\nsource = "test"\nfp8 = "nope"\n'
        'weights = 2\ngradients = 4\ngrad_copy = 0\nmaster = 4\nstate = 4\n')
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    from costgraph.training.data import policies

    with pytest.raises(CostgraphValueError, match="not an FP8 recipe"):
        policies()


@pytest.mark.parametrize("extra", [
    ["--precision", "fp8-delayed", "--hardware", "h100-sxm", "--mfu", "0.4", "--tokens", "1e9"],
    ["--precision", "fp8-mxfp8", "--hardware", "b200", "--fp8-transpose", "shared"],
    ["--peak", "1e15", "--pp", "2", "--gpus", "4"],
    ["--achieved", "1e14"],
])
def test_documents_follow_the_schema(capsys, extra):
    from costgraph.export import schema as schemas

    argv = ["train", "gpt", "--config", "gpt2", "--attention", "eager", *extra]
    if "--gpus" not in extra:
        argv += ["--gpus", "2", "--tp", "2"]
    assert main([*argv, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in schemas.validator("train").iter_errors(doc)]
    assert errors == []
    assert doc["time"]["step_seconds"] == doc["step"]["total"]


def test_fp8_saved_inputs_of_gpt_by_hand(gpt):
    # TE @ d0067d0d pytorch/module/linear.py: the input of each FP8 linear is saved for the weight
    # gradient in FP8, column-wise only (inputmat.update_usage(rowwise_usage=False,
    # columnwise_usage=True)), 1 byte an element + one fp32 scale_inv (float8_tensor.py).
    # GPT, t = 2 with SP, per layer and device: c_attn's input (ln_1's output, h, split by SP),
    # c_proj's (the attention output, h, split by TP), c_fc's (ln_2's output, h, SP), the MLP c_proj's
    # (4h, TP): 7/2 b s h FP8 bytes + 4 scales of 4 bytes. Only these linears keep those tensors, so
    # their bf16 copies go (−2 bytes an element): activations change by −7/2 b s h + 16 per layer.
    # Flash attention keeps its output O itself: the FP8 copy of c_proj's input comes on top (+b s h/2).
    m, v = gpt
    def mem(policy, attention):
        r = m.train(gpus=2, t=2, sp=True, policy=policy, attention=attention)
        return r.stages[0].memory
    for attention, change in (("eager", -R(7, 2) * b * s * h * l + 16 * l),
                              ("flash", -R(5, 2) * b * s * h * l + 16 * l)):
        fp8, bf16 = mem("fp8-current", attention), mem("megatron", attention)
        assert sympy.expand(fp8["activations"] - bf16["activations"] - change) == 0
        assert sympy.expand(fp8["fp8 saved inputs"] - (R(7, 2) * b * s * h * l + 16 * l)) == 0
        assert sympy.expand(fp8["total"] - bf16["total"] - change - fp8["fp8"]) == 0
    # full recomputation keeps each layer's input only: no FP8 copies are saved
    full = m.train(gpus=2, t=2, sp=True, policy="fp8-current", attention="eager", recompute="full")
    assert full.stages[0].memory["fp8 saved inputs"] == 0
