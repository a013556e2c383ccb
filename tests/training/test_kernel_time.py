"""The per-kernel step-time model (costgraph.training.kernel_time, kernel_table, kernels.toml):
exact rationals from the data file, the per-device GEMM shapes after Megatron's TP splits, the
dgrad/wgrad GEMMs, memory-bound bytes, the flash kernel, and the flat fallback of a preset
without a table."""

from fractions import Fraction

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.hardware import preset
from costgraph.parallel.layout import Layout
from costgraph.training.kernel_table import (attention_eta, fit_attention, fit_gemm, gemm_eta, gemm_seconds, rated,
                                             kernel_table)
from costgraph.training.kernel_time import kernel_ops, kernel_seconds
from cli_checks import run as _run, refused as _refused

R = sympy.Rational
H100 = preset("h100-sxm")
P = 989_400_000_000_000          # h100-sxm BF16 dense peak (hardware.toml: H100 whitepaper 989.4 TFLOP/s)
P8 = 1_978_900_000_000_000       # h100-sxm FP8 dense peak (hardware.toml: H100 whitepaper 1978.9 TFLOP/s)
BW = 2_800_000_000_000           # kernels.toml [h100-sxm] hbm_bandwidth (measured 2.8 TB/s)


@pytest.fixture(scope="module")
def table():
    return kernel_table(H100)


@pytest.fixture(scope="module")
def llama():
    m = costgraph.load("llama")
    v = m.values("llama-3-8b", s=4096)
    v[m.graph.dims["b"].symbol] = sympy.Integer(1)
    return m, v


def _rows(m, v, table, **layout):
    rows = kernel_ops(m.graph, Layout(**layout), table, {"bf16": P})
    return {r["path"]: {k: (sympy.sympify(x).xreplace(v) if k in ("forward", "backward", "active") else x)
                        for k, x in r.items()} for r in rows}


def test_stored_parameters_are_the_fit_of_the_stored_points(table):
    # kernels.toml keeps the measured points and the parameters fitted to them: refit, round as stored
    assert len(table.gemm_points["bf16"]) == 125   # XLA's sm_90 table: every b = 1 entry, M, N, K in 256 … 4096
    assert len(table.gemm_points["fp8"]) == 6      # DeepGEMM's dense FP8 GEMMs with M = 4096 (H800)
    for dtype, peak in (("bf16", P), ("fp8", P8)):
        e, t0, k0 = fit_gemm(table.gemm_points[dtype], peak)
        assert table.gemm[dtype] == (Fraction(str(round(e, 3))), round(t0), round(k0))
    assert table.gemm == {"bf16": (Fraction("0.797"), 6351, 56), "fp8": (Fraction("0.752"), 17521, 652)}
    for direction, (stored_e, stored_s0) in table.attention.items():
        e, s0 = fit_attention(table.attention_points[direction], P)
        assert stored_e == Fraction(str(round(e, 3))) and stored_s0 == round(s0)
    assert table.attention == {"forward": (Fraction("0.662"), 602), "backward": (Fraction("0.598"), 427)}
    assert table.hbm_bandwidth == BW


def test_gemm_eta_is_the_fitted_closed_form(table):
    M, N, K = sympy.symbols("M N K", positive=True)
    e, t0, k0 = R(797, 1000), R(6351, 10**9), 56
    F = 2 * M * N * K
    assert sympy.simplify(gemm_eta(M, N, K, P, table) - e * F * K / (F * (K + k0) + P * e * t0 * K)) == 0
    # the time of one GEMM is FLOPs / (peak · η), and t0 + F/(P·e)·(1 + k0/K)
    assert sympy.simplify(gemm_seconds(F, K, P, table) - F / (P * gemm_eta(M, N, K, P, table))) == 0
    assert sympy.simplify(gemm_seconds(F, K, P, table) - (t0 + F / (P * e) * (1 + k0 / K))) == 0
    # dgrad (M × K over N) and wgrad (N × K over M) have their own contraction: a short one costs more
    assert gemm_eta(4096, 1024, 8192, P, table) > gemm_eta(4096, 8192, 1024, P, table)
    # the FP8 fit at the FP8 peak (DeepGEMM, H800): 4096 x 7168 x 16384 measured at 1358 TFLOP/s
    eta8 = gemm_eta(4096, 7168, 16384, P8, table, "fp8")
    assert eta8 == R(752, 1000) * 2 * 4096 * 7168 * 16384 * 16384 / (
        2 * 4096 * 7168 * 16384 * (16384 + 652) + P8 * R(752, 1000) * R(17521, 10**9) * 16384)
    assert abs(float(eta8) * P8 / 1e12 - 1358) / 1358 < 0.05
    assert attention_eta(sympy.Integer(4096), "forward", table) == R(662, 1000) * 4096 / (4096 + 602)


def test_linear_shapes_follow_megatron_tp(llama, table):
    m, v = llama
    b, s, h = 1, 4096, 4096
    inter = 14336                 # Llama-3-8B intermediate size
    one = _rows(m, v, table)
    two = _rows(m, v, table, t=2)

    def gemm(mm, n, k, contraction=None):   # at the default --gemm-rate sustained (kernel_table.rated)
        return gemm_seconds(sympy.Integer(2 * mm * n * k), contraction or k, P, rated(table, "sustained"))

    # t = 1: q_proj [b·s, h] · [h, a·d]: M = b·s, N = K = h
    assert one["layers/layer/self_attn/q_proj"]["forward"] == gemm(b * s, h, h)
    # ColumnParallelLinear (gate_proj): N = i/t; RowParallelLinear (down_proj): K = i/t (Megatron)
    assert two["layers/layer/mlp/gate_proj"]["forward"] == gemm(b * s, inter // 2, h)
    assert two["layers/layer/mlp/down_proj"]["forward"] == gemm(b * s, h, inter // 2)
    assert one["layers/layer/mlp/down_proj"]["forward"] == gemm(b * s, h, inter)
    # the backward: the input gradient (contraction N) and the weight gradient (contraction M = b·s),
    # each of the forward's FLOPs
    gate = two["layers/layer/mlp/gate_proj"]
    assert gate["backward"] == gemm(b * s, inter // 2, h, inter // 2) + gemm(b * s, inter // 2, h, b * s)
    assert gate["class"] == "matmul"
    # CP divides the rows: M = b·s/c
    cp = _rows(m, v, table, c=2)
    assert cp["layers/layer/mlp/up_proj"]["forward"] == gemm(b * s // 2, inter, h)


def test_memory_bound_bytes(llama, table):
    m, v = llama
    b, s, h = 1, 4096, 4096
    one = _rows(m, v, table)
    # RMSNorm: reads x [b, s, h] and writes y [b, s, h], 2 bytes each (bf16); backward twice that
    norm = one["layers/layer/input_layernorm"]
    assert norm["class"] == "memory" and norm["forward"] == R(2 * b * s * h * 2, BW)
    assert norm["backward"] == 2 * norm["forward"]
    # the residual add reads two [b, s, h] and writes one
    assert one["layers/layer/add"]["forward"] == R(3 * b * s * h * 2, BW)
    # a view (split_heads) runs no kernel; without SP, TP leaves a norm whole on each device
    assert one["layers/layer/self_attn/split_heads"]["forward"] == 0
    assert _rows(m, v, table, t=2)["layers/layer/input_layernorm"]["forward"] == norm["forward"]
    sp = _rows(m, v, table, t=2, sp=True)["layers/layer/input_layernorm"]
    assert sp["forward"] == norm["forward"] / 2   # SP splits the norm's rows


def test_flash_core_is_one_kernel(llama, table):
    m, v = llama
    b, s, a, d = 1, 4096, 32, 128
    rows = _rows(m, v, table, attention_kernel="fa3")   # the table's own curves (FlashAttention-3's bars)
    qk, pv = rows["layers/layer/self_attn/matmul"], rows["layers/layer/self_attn/matmul_1"]
    assert rows["layers/layer/self_attn/softmax"]["forward"] == 0   # fused
    f = 2 * b * a * s * s * d   # one product's FLOPs over the full square
    kept = sympy.Integer(f) * R(1, 2)   # causal: the kernel computes the kept pairs (area s²/2)
    fwd = kept / (P * attention_eta(sympy.Integer(s), "forward", table))
    assert qk["forward"] == pv["forward"] == fwd and qk["class"] == "attention"
    bwd = 2 * kept / (P * attention_eta(sympy.Integer(s), "backward", table))
    assert pv["backward"] == bwd
    assert qk["backward"] == bwd + kept / (P * attention_eta(sympy.Integer(s), "backward", table))   # QKᵀ recomputed


def test_step_compute_is_the_sum_of_the_classes(llama, table):
    from costgraph.result_fields import quantities
    from costgraph.training.kernel_time import CLASSES
    from costgraph.training.result_parts import ComputeByClass, UserbuffersSMs

    m, v = llama
    r = m.train(Layout(t=2, gpus=8, m=4, sp=True), values=v, hardware="h100-sxm")
    assert r.compute["rate"].kind == "kernels" and r.compute["rate"].model == "kernels"
    by = r.compute["compute_by_class"]
    assert sympy.expand(sum(by.values()) - r.step["compute"]) == 0
    # typed (costgraph.training.result_parts): one field per kernel class, in kernel_time's order, each in seconds
    assert type(by) is ComputeByClass and list(by) == list(CLASSES) and by.matmul == by["matmul"]
    assert {n: q.unit for n, q in quantities(by)} == dict.fromkeys(CLASSES, "s")
    # TP 2 with SP under the megatron overlap: userbuffers leave the overlapped GEMMs 132 − 16 of the H100's 132 SMs
    # (kernels.toml sm_count; Transformer Engine's default num_comm_sm 16: kernel_time.UB_COMM_SMS)
    ub = r.compute.userbuffers_sms
    assert ub == UserbuffersSMs(116, 132) and dict(ub) == {"gemm": 116, "device": 132}
    assert r.to_dict()["step"]["userbuffers_sms"] == {"gemm": 116, "device": 132}
    assert {q.unit for _, q in quantities(ub)} == {"SMs"}
    # full recomputation re-runs the layers' forward kernels: their forward seconds once more
    L1, L2 = Layout(t=2, gpus=8, m=4), Layout(t=2, gpus=8, m=4, recompute="full")
    k1 = kernel_seconds(m.graph, L1, table, {"bf16": P})
    k2 = kernel_seconds(m.graph, L2, table, {"bf16": P})
    rows = kernel_ops(m.graph, L2, table, {"bf16": P})
    extra = 4 * sum(r["active"] * r["forward"] * r["rerun"] for r in rows if r["class"] == "memory")
    assert sympy.expand(k2["memory"] - k1["memory"] - extra) == 0 and extra != 0


def test_cli_names_the_model_and_the_classes(capsys):
    argv = ["train", "llama", "--config", "llama-3-8b", "--set", "b=1", "--gpus", "8", "--tp", "2",
            "--hardware", "h100-sxm"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "rate: per-kernel time model, kernels.toml [h100-sxm] (peaks" in out and "compute by kernel class: matmul" in out
    import json
    assert main([*argv, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    st = doc["step"]
    assert st["time_model"] == "kernels" and st["rate"]["kind"] == "kernels"
    assert sum(x["value"] for x in st["compute_by_class"].values()) == pytest.approx(st["compute"]["value"], rel=1e-12)
    assert main([*argv, "--efficiency", "0.5", "--format", "json"]) == 0
    flat = json.loads(capsys.readouterr().out)["step"]
    assert flat["time_model"] == "flat" and "compute_by_class" not in flat


def test_a_preset_without_a_table_warns_and_runs_flat(llama):
    m, v = llama
    a100 = preset("a100-80gb-sxm")
    assert kernel_table(a100) is None
    r = m.train(Layout(gpus=1), values=v, hardware="a100-80gb-sxm")
    assert r.compute["rate"].kind == "efficiency" and r.compute["rate"].value == R(1, 2)
    assert any("no kernel table for a100-80gb-sxm" in w and "0.5" in w for w in r.warnings)
    hw = r.compute["flops"]["hardware_per_device"]
    assert r.step["compute"] == hw / (a100.peak_flops_bf16 * R(1, 2))   # the flat model, exactly


def test_routed_experts_one_gemm_per_local_expert(table):
    # Mixtral-8x7B (E = 8 experts, k = 2 active): per device E/e local experts, each one GEMM of
    # M·k·e/E rows (perfect balance), launched by Transformer Engine's grouped GEMM on min(4, E/e)
    # streams (TransformerEngine@d0067d0d common/util/multi_stream.cpp num_compute_streams = 4;
    # common/gemm/cublaslt_gemm.cu multi_stream_cublas_gemm: GEMM i on stream i % 4), whose fixed
    # times overlap: per active instance F/(P·e_gemm)·(1 + k0/K) + t0 · E/(e·k) / min(4, E/e)
    m = costgraph.load("mixtral")
    v = m.values("mixtral-8x7b")
    b, s, h, inter = 1, 4096, 4096, 14336
    t0 = R(table.gemm["bf16"][1], 10**9)
    f = 2 * b * s * h * inter
    path = "layers/layer/mlp/experts/expert/up_proj"
    for e, calls, streams in ((1, 4, 4), (4, 1, 2), (8, R(1, 2), 1)):
        row = _rows(m, v, table, e=e, gpus=8)[path]
        st = rated(table, "sustained")   # the default --gemm-rate (kernel_table.rated: t0 kept)
        assert row["forward"] == gemm_seconds(sympy.Integer(f), h, P, st) - t0 + calls * t0 / streams
        assert row["forward"] == calls * gemm_seconds(R(f, 1) / calls, h, P, st, streams=streams)
        assert row["active"] == 2 * 32   # k active copies in each of the l layers


def test_fp8_linears_at_the_fp8_peak(llama, table):
    # an FP8 policy's layer linears run at the FP8 peak with the table's FP8 fit; the head stays BF16
    m, v = llama
    rows = kernel_ops(m.graph, Layout(policy="fp8-delayed"), table, {"bf16": P, "fp8": P8})
    at = {r["path"]: r["forward"].xreplace(v) for r in rows}
    f = 2 * 4096 * 4096 * 4096
    st = rated(table, "sustained")   # the default --gemm-rate: both fits' efficiencies × the table's derate
    assert at["layers/layer/self_attn/q_proj"] == gemm_seconds(sympy.Integer(f), 4096, P8, st, "fp8")
    assert at["lm_head"] == gemm_seconds(sympy.Integer(2 * 4096 * 4096 * 128256), 4096, P, st)
    r = m.train(Layout(gpus=1, policy="fp8-delayed"), values=v, hardware="h100-sxm")
    assert not any("FP8 GEMMs" in w for w in r.warnings)


def test_a_user_table_adds_a_preset(tmp_path, monkeypatch, llama):
    # COSTGRAPH_DATA/kernels.toml adds tables (here h800, a preset without a bundled table, with the
    # h100-sxm numbers as an example); a bundled table is never replaced
    from costgraph.errors import CostgraphValueError

    from importlib.resources import files

    bundled = (files("costgraph.training") / "kernels.toml").read_text(encoding="utf-8")
    h100 = bundled[bundled.index("[h100-sxm]"):bundled.index("\n[", bundled.index("[h100-sxm]"))]
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    no_fp8 = "\n".join(line for line in h100.replace("[h100-sxm]", "[h800]").splitlines()
                        if not line.startswith(("gemm_fp8_", "gemm_sustained_")))
    (tmp_path / "kernels.toml").write_text(no_fp8, encoding="utf-8")
    mine = kernel_table(preset("h800"))
    assert mine is not None and mine.gemm == {"bf16": (Fraction("0.797"), 6351, 56)}
    m, v = llama
    assert m.train(Layout(gpus=1), values=v, hardware="h800").compute["rate"].kind == "kernels"
    # FP8 GEMMs without FP8 points: the BF16 fit at the FP8 peak, and a warning that says so
    r = m.train(Layout(gpus=1, policy="fp8-delayed"), values=v, hardware="h800")
    assert any("FP8 GEMMs at the FP8 peak with the BF16 GEMM fit of kernels.toml [h800]" in w for w in r.warnings)
    (tmp_path / "kernels.toml").write_text(bundled, encoding="utf-8")
    with pytest.raises(CostgraphValueError, match="is a bundled kernel table already"):
        kernel_table(H100)


# --- user kernel tables (COSTGRAPH_DATA) faster than the hardware or malformed, refused (issues 27/29 hostile input) ---


def _user_kernels(tmp_path, monkeypatch, edit):
    """A COSTGRAPH_DATA kernels.toml: the bundled h100-sxm table, renamed h800 (a preset without a
    bundled table) and edited."""
    import pathlib
    import re

    import costgraph.training.kernel_table as kt

    s = (pathlib.Path(kt.__file__).parent / "kernels.toml").read_text()
    start = s.index("[h100-sxm]")
    body = s[start:s.index("\n[", start)].replace("[h100-sxm]", "[h800]", 1)
    edited = body
    for old, new in zip(edit[::2], edit[1::2]):   # (pattern, replacement, ...): each pattern's first match
        edited = re.sub(old, new, edited, count=1, flags=re.M)
    (tmp_path / "kernels.toml").write_text(edited)
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    return edited


H800 = ["train", "gpt", "--config", "gpt2", "--set", "b=4", "--gpus", "8", "--hardware", "h800"]


@pytest.mark.parametrize("edit, words", [
    ((r'^gemm_efficiency = "0.797"', 'gemm_efficiency = "50"'),
     "[h800] gemm_efficiency is above 1 (a kernel faster than the peak"),
    ((r'^attention_forward_efficiency = "0.662"', 'attention_forward_efficiency = "5"'),
     "[h800] attention_forward_efficiency is above 1 (a kernel faster than the peak"),
    ((r'^hbm_bandwidth = 2_800_000_000_000', 'hbm_bandwidth = 99_000_000_000_000_000'),
     "is above the preset's memory bandwidth 3,350,000,000,000 B/s"),
], ids=["gemm-above-peak", "attention-above-peak", "bandwidth-above-hbm"])
def test_a_user_kernel_table_faster_than_the_hardware_is_refused(capsys, tmp_path, monkeypatch, edit, words):
    # a kernel at 50 × the peak, or an HBM bandwidth above hardware.toml's h800 (3.35 TB/s), was timed as given
    _user_kernels(tmp_path, monkeypatch, edit)
    _refused(capsys, H800, words)


# every efficiency's bound is its field's declared maximum (kernel_table.KIND: Field(maximum=1)), refused by
# data_entries at the key's FILE:LINE:COLUMN; the FP8 curves are the fa2 block renamed (its four keys per direction)
_FP8 = tuple(x for d in ("forward", "backward") for f in ("efficiency", "s0", "points", "source")
             for x in (f"^attention_fa2_{d}_{f}", f"attention_fp8_{d}_{f}"))


@pytest.mark.parametrize("edit, key, words", [
    ((r'^gemm_efficiency = "0.797"', 'gemm_efficiency = "1.001"'), "gemm_efficiency",
     "gemm_efficiency is above 1 (a kernel faster than the peak"),
    ((r'^attention_fa2_backward_efficiency = "0.333"', 'attention_fa2_backward_efficiency = "2"'),
     "attention_fa2_backward_efficiency", "attention_fa2_backward_efficiency is above 1 (a kernel faster than the peak"),
    ((r'^attention_fa2_forward_efficiency = "0.354"', 'attention_fa2_forward_efficiency = "1.5"', *_FP8),
     "attention_fp8_forward_efficiency", "attention_fp8_forward_efficiency is above 1 (a kernel faster than the FP8 peak"),
], ids=["gemm", "kernel-curve", "fp8-curve"])
def test_an_efficiency_above_1_is_refused_at_its_key(capsys, tmp_path, monkeypatch, edit, key, words):
    edited = _user_kernels(tmp_path, monkeypatch, edit)
    line = edited[:edited.index(f"\n{key} = ")].count("\n") + 2
    _refused(capsys, H800, f"kernels.toml:{line}:1: [h800] {words}", "hint: at most 1")


@pytest.mark.parametrize("edit, words", [
    ((r'^\[h800\]', '[h800'), "not valid TOML"),
    ((r'^gemm_efficiency = "0.797"', 'gemm_efficiency = 0.797'), "is not a decimal number in a string"),
    ((r'^gemm_points = \[', 'gemm_points = [["a"], '), "gemm_points is not a list of"),
], ids=["syntax", "type", "points"])
def test_a_malformed_user_kernel_table_is_refused_with_a_hint(capsys, tmp_path, monkeypatch, edit, words):
    _user_kernels(tmp_path, monkeypatch, edit)
    _refused(capsys, H800, words, "kernels.toml")


def test_the_loss_is_the_fp32_cross_entropy_at_hbm_bandwidth(llama, table):
    # Megatron-LM@d98e8a64 tensor_parallel/cross_entropy.py (_VocabParallelCrossEntropy, unfused):
    # forward .float() 2 + 4, max 4, -= max 4 + 4, exp 4 + 4, sum 4, div_ 4 + 4 = 38 bytes per logit;
    # backward mul_(grad_output) 4 + 4 and the cast's gradient 4 + 2 = 14 bytes
    m, v = llama
    from costgraph.training.kernel_time import LOSS_PATH

    logits = 1 * 4096 * 128256                       # b · s · V of Llama 3 8B, one device
    row = _rows(m, v, table)[LOSS_PATH]
    assert (row["class"], row["forward"], row["backward"]) == ("memory", R(38 * logits, BW), R(14 * logits, BW))
    # TP splits the vocabulary (vocabulary-parallel logits), CP the sequence
    row = _rows(m, v, table, t=4, c=2, sp=True)[LOSS_PATH]
    assert (row["forward"], row["backward"]) == (R(38 * logits, BW * 8), R(14 * logits, BW * 8))
    assert LOSS_PATH not in _rows(m, v, table, loss=False)   # --no-loss: the loss is not counted


def test_the_fused_loss_is_megatrons_jit_fused_cross_entropy(llama, table, capsys):
    # Megatron-LM@d98e8a64 fusions/fused_cross_entropy.py (--cross-entropy-loss-fusion, impl native), each
    # @jit_fuser function one torch.compile kernel (core/jit.py): calculate_logits_max reads the bf16 logits
    # and writes the fp32 copy, the max in the same pass (2 + 4); calculate_predicted_logits exp(x - max) in
    # place with the row sum (4 + 4); calculate_cross_entropy_loss the softmax div_ in place (4 + 4): 22 bytes
    # per logit; calculate_gradients reads the saved softmax, writes back its in-place mul_ and the bf16
    # gradient (4 + 4 + 2): 10 bytes. The unfused 38 and 14: the test above.
    m, v = llama
    from costgraph.training.kernel_time import LOSS_PATH

    logits = 1 * 4096 * 128256
    row = _rows(m, v, table, cross_entropy="megatron-fused")[LOSS_PATH]
    assert (row["forward"], row["backward"]) == (R(22 * logits, BW), R(10 * logits, BW))
    row = _rows(m, v, table, cross_entropy="megatron-fused", t=4, c=2, sp=True)[LOSS_PATH]
    assert (row["forward"], row["backward"]) == (R(22 * logits, BW * 8), R(10 * logits, BW * 8))
    assert _rows(m, v, table)[LOSS_PATH]["forward"] == R(38 * logits, BW)   # the default (logits): unfused
    _refused(capsys, ["train", "llama", "--config", "llama-3-8b", "--cross-entropy", "tex"], "invalid choice")
    _refused(capsys, ["train", "--params", "7e9", "--cross-entropy", "megatron-fused"], "--cross-entropy needs a model")
    with pytest.raises(costgraph.CostgraphError, match="unknown cross_entropy 'tex'"):
        Layout(cross_entropy="tex").filled()
    # the launch file's --cross-entropy-loss-fusion (examples/launch/train_llama3_8b_h100_fp8.sh l. 98) sets it
    from costgraph.launch import read_launch

    from pathlib import Path

    launch = read_launch(str(Path(__file__).resolve().parents[2] / "examples" / "launch" / "train_llama3_8b_h100_fp8.sh"))
    assert launch.values["cross_entropy"] == "megatron-fused"
    assert launch.origins["cross_entropy"].text == "--cross-entropy-loss-fusion"


def test_the_optimizer_step_runs_once_per_step_at_hbm_bandwidth(llama):
    # Megatron-LM@d98e8a64 optimizer.py::MixedPrecisionOptimizer.step on the distributed optimizer's shard:
    # grad norm (read), clip (read + write) and fused Adam (read) of the shard's gradients: 4·G_s; Adam reads
    # and writes the fp32 master weights and m, v: 2·O; the bf16 weights written: W_s; zero_grad of the
    # whole grad buffer: G. Llama 3 8B (N parameters) on 8 GPUs, ZeRO-1, mixed precision:
    # O = 12·N/8 (master + m + v, sharded), G = 2·N (bf16 gradients, not sharded at ZeRO-1), W = 2·N
    m, v = llama
    from costgraph.training.memory import training_memory
    from costgraph.training.step_kernels import optimizer_seconds

    L = Layout(d=8, zero=1)
    N = sympy.expand(training_memory(m.graph, Layout(d=1, zero=0)).stages[0].memory["weights"] / 2).xreplace(v)
    expected = (2 * 12 * N / 8 + 4 * 2 * N / 8 + 2 * N / 8 + 2 * N) / BW
    assert sympy.sympify(optimizer_seconds(m.graph, L, BW)).xreplace(v) == expected
    # the step time adds it once per step (not per micro-batch, no bubble), on the per-kernel model only
    r = m.train(values=v, hardware="h100-sxm", gpus=8, zero=1, global_batch=32)
    st = {k: sympy.sympify(x).xreplace(v) for k, x in r.step.items() if k != "total"}
    assert st["optimizer"] == expected
    assert float(r.step["total"].xreplace(v)) == pytest.approx(float(
        st["compute"] + st["bubble"] + st["optimizer"] + st["communication_exposed"]
        + st["contention"]), rel=1e-12)
    flat = m.train(values=v, hardware="h100-sxm", gpus=8, zero=1, global_batch=32, efficiency=0.5)
    assert "optimizer" not in flat.step


def test_fp8_quantize_kernels_of_te(llama, table):
    # TransformerEngine@d0067d0d pytorch/csrc/quantizer.cpp: current scaling computes the amax (read 2 B)
    # then casts (read 2 B, write the FP8 row-wise and column-wise copies, 1 B each on Hopper): 6 B per
    # element; delayed scaling has no amax pass: 4 B; fp8_transpose "shared" (Blackwell) one copy: 5 B.
    # Inputs a norm writes (q/k/v, gate/up: TE's LayerNormLinear with_quantized_norm) have no kernel of their own.
    m, v = llama
    h, i, kv = 4096, 14336, 1024                    # Llama 3 8B: hidden, MLP, K/V width (8 heads × 128)
    T = 4096                                        # b · s tokens, one device

    def quantize(policy, **kw):
        rows = kernel_ops(m.graph, Layout(policy=policy, **kw), table, {"bf16": P, "fp8": P8})
        return {r["path"].split(" ")[0].rsplit("/", 1)[-1]: (sympy.sympify(r["forward"]).xreplace(v),
                                                            sympy.sympify(r["backward"]).xreplace(v))
                for r in rows if r["kind"] == "fp8_quantize"}

    q = quantize("fp8-current")
    assert set(q) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    per = R(6, BW)
    assert q["q_proj"] == (0, T * h * per) and q["k_proj"] == (0, T * kv * per)      # forward: fused in the norm
    assert q["o_proj"] == (T * h * per, T * h * per)   # the attention output (a·d = h) and dY [T, h]
    assert q["down_proj"] == (T * i * per, T * h * per)
    assert q["gate_proj"] == (0, T * i * per)
    assert quantize("fp8-delayed")["down_proj"] == (T * i * R(4, BW), T * h * R(4, BW))
    assert quantize("fp8-current", fp8_transpose="shared")["down_proj"] == (T * i * R(5, BW), T * h * R(5, BW))
    assert quantize("fp8-mxfp8")["down_proj"] == (T * i * R(4, BW), T * h * R(4, BW))
    assert quantize("mixed") == {}


def test_step_seconds_are_the_expanded_whole(llama, table):
    """issue 27 item 6 (speed): the step's per-class seconds are built as the forward's plus the backward's
    expansion; each is the very expression SymPy's expand of the whole step sum gives (``m/p`` × Σ active ×
    (forward × (1 + rerun) + backward), the definition), at symbolic degrees and ``m`` as the planner's forms
    derive them, with and without recomputation; ``expand=False`` keeps the unexpanded sum (the same value)."""
    from costgraph.engine.symbols import as_expr, dim
    from costgraph.training.kernel_time import CLASSES, _kernel_ops

    m = llama[0]
    t, p, d, mb = (dim(x) for x in ("N_t", "N_p", "N_d", "N_m"))
    for kw in (dict(t=t, p=p, d=d, m=mb, schedule="1f1b"), dict(t=t, d=d, m=mb, recompute="full", sp=True)):
        L = Layout(**kw).filled()
        rows, _ = _kernel_ops(m.graph, L, table, {"bf16": P})
        per = as_expr(L.m) / as_expr(L.p)
        got = kernel_seconds(m.graph, L, table, {"bf16": P})
        raw = kernel_seconds(m.graph, L, table, {"bf16": P}, expand=False)
        for k in CLASSES:
            whole = per * sympy.Add(*[r["active"] * (r["forward"] * (1 + r["rerun"]) + r["backward"])
                                      for r in rows if r["class"] == k])
            assert sympy.srepr(got[k]) == sympy.srepr(sympy.expand(whole))
            assert raw[k] == whole and sympy.expand(raw[k]) == got[k]
    assert any(r["rerun"] != 0 for r in rows)   # the recomputation's share is in the second layout's sums
