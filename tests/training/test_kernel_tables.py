"""The per-preset kernel tables of kernels.toml beyond the H100 (h200, b200, gb200, gb300): each stored
number against the kernel-level benchmark it was read from, the stored parameters as the fit of
the stored points, the flat fallback with its warning where no table exists, and the overlap
model's forward/backward compute taken from the per-kernel seconds."""

from fractions import Fraction

import pytest
import sympy

import costgraph
from costgraph.hardware import preset
from costgraph.parallel.layout import Layout
from costgraph.training.kernel_table import (attention_eta, fit_attention, fit_gemm, fit_memory, gemm_eta, kernel_table,
                                             memory_seconds)
from costgraph.training.kernel_time import CLASSES, kernel_ops, kernel_seconds
from costgraph.training.overlap import split_compute
from costgraph.training.rate import step_rate
from costgraph.training.steptime import kernel_rate, step_time

T = 10**12


@pytest.fixture(scope="module")
def llama():
    m = costgraph.load("llama")
    v = m.values("llama-3-8b", s=4096)
    v[m.graph.dims["b"].symbol] = sympy.Integer(1)
    return m, v


def _refit(table, peaks):
    """The stored parameters equal the fit of the stored points, rounded as kernels.toml stores them."""
    for dtype, (e, t0, k0) in table.gemm.items():
        fe, ft0, fk0 = fit_gemm(table.gemm_points[dtype], peaks[dtype])
        assert (e, t0, k0) == (Fraction(str(round(fe, 3))), round(ft0), round(fk0)), dtype
    for direction, (e, s0) in table.attention.items():
        fe, fs0 = fit_attention(table.attention_points[direction], peaks["bf16"])
        assert (e, s0) == (Fraction(str(round(fe, 3))), round(fs0)), direction
    for direction, (e, s0) in (table.attention_fp8 or {}).items():   # the FP8 attention curves, at the FP8 peak
        fe, fs0 = fit_attention(table.attention_fp8_points[direction], peaks["fp8"])
        assert (e, s0) == (Fraction(str(round(fe, 3))), round(fs0)), direction
    if table.memory_points:   # hbm_bandwidth to 0.1 GB/s, memory_launch_ns to 1 ns
        bw, t0 = fit_memory(table.memory_points)
        assert (table.hbm_bandwidth, table.memory_launch_ns) == (round(bw, -8), round(t0))


def _norm_points(gbps):
    """cudnn-frontend benchmark/norms's 14 rms_norm rows (N, C) in CSV order with their fwd_gbps, as
    [bytes, B/s]: bytes as benchmark_single_norm.py compute_bandwidth_bytes counts an rms_norm forward in
    bf16, (N·C + C)·2 read + N·C·2 + N·4 (the fp32 inverse variance) written."""
    nc = [(16384, 4096), (8192, 8192), (4096, 16384), (8192, 5120), (8192, 4096), (4096, 6144), (4096, 8192),
          (2048, 4096), (131072, 128), (8192, 128), (8192, 5120), (4096, 2048), (131072, 128), (16384, 128)]
    return tuple(((n * c + c) * 2 + n * c * 2 + n * 4, int(Fraction(g) * 10**9)) for (n, c), g in zip(nc, gbps))


def test_b200_gemms_are_xla_sm_100_b200_table():
    b200 = preset("b200")
    t = kernel_table(b200)
    # OpenXLA xla/service/gpu/model/matmul_interpolator_data.h @ e97611c4 (PR #36518), key sm_100_B200,
    # b = 1: the 125 (M, N, K) of 256 ... 4096, bf16xbf16->bf16 and f8e4m3fnxf8e4m3fn->bf16 FLOP/s as printed
    pts = {p[:3]: p[3] for p in t.gemm_points["bf16"]}
    assert len(pts) == 125 and len(t.gemm_points["fp8"]) == 125
    assert pts[(4096, 4096, 4096)] == 1_416_867_213_789_406
    assert pts[(4096, 1024, 4096)] == 1_204_928_403_983_728
    assert pts[(256, 256, 256)] == 6_765_006_451_612
    fp8 = {p[:3]: p[3] for p in t.gemm_points["fp8"]}
    assert fp8[(4096, 4096, 4096)] == 2_764_981_863_158_106
    # fitted at the B200's peaks (hardware.toml: 2.25 PF BF16, 4.5 PF FP8 dense)
    _refit(t, {"bf16": b200.peak_flops_bf16, "fp8": b200.peak_flops_fp8})
    assert t.gemm == {"bf16": (Fraction("0.658"), 6056, 78), "fp8": (Fraction("0.703"), 5937, 272)}
    # the fitted closed form at XLA's largest shape: 1365 TFLOP/s against the measured 1416.9 (-3.6 %)
    eta = gemm_eta(4096, 4096, 4096, b200.peak_flops_bf16, t)
    assert abs(float(eta) * b200.peak_flops_bf16 / 1_416_867_213_789_406 - 1) < 0.04


def test_h200_attention_and_bandwidth_are_cudnn_h200_measurements():
    h200 = preset("h200")
    t = kernel_table(h200)
    # NVIDIA cudnn-frontend @ 3929da2e, benchmark/sdpa_benchmark_training/results/h200_919_only_cudnn/
    # llama3.1_20260227_034703.csv: cudnn, bfloat16, top_left, deterministic_bwd False, fwd_tflops / bwd_tflops
    assert t.attention_points["forward"] == ((2048, 484 * T), (4096, 591 * T), (8192, 644 * T), (16384, 673 * T),
                                             (32768, 688 * T))
    assert t.attention_points["backward"] == ((2048, 370 * T), (4096, 474 * T), (8192, 541 * T),
                                              (16384, 579 * T), (32768, 581 * T))
    # benchmark/norms/results/h200/all_models_20260227_035147.csv: every cudnn bfloat16 rms_norm row, fwd_gbps
    assert t.memory_points == _norm_points(["3708.1", "3770.9", "3845.2", "3762.0", "3790.3", "3461.6", "3311.3",
                                            "3351.7", "3202.5", "1435.9", "3770.2", "3228.4", "3187.7", "1957.0"])
    assert (t.hbm_bandwidth, t.memory_launch_ns) == (3_816_800_000_000, 1904)
    # the fit at the llama3-70b row (N = C = 8192: 268,484,608 B in 71.2 µs, 3770.9 GB/s): 72.2 µs, +1.4 %
    assert abs(float(memory_seconds(268_484_608, t)) * 3_770_900_000_000 / 268_484_608 - 1) < 0.015
    _refit(t, {"bf16": h200.peak_flops_bf16, "fp8": h200.peak_flops_fp8})
    assert t.attention == {"forward": (Fraction("0.722"), 940), "backward": (Fraction("0.627"), 1341)}
    # XLA keys every sm_90 device to one GEMM table: the H200's GEMMs are the H100 SXM's
    assert t.gemm == kernel_table(preset("h100-sxm")).gemm and t.gemm_points == kernel_table(preset("h100-sxm")).gemm_points
    # the fitted η at the measured 16k point: 675.6 TFLOP/s against cuDNN's 673
    fwd = attention_eta(sympy.Integer(16384), "forward", t) * h200.peak_flops_bf16
    assert fwd == Fraction("0.722") * 16384 / (16384 + 940) * 989_400_000_000_000
    assert abs(float(fwd) / (673 * T) - 1) < 0.01


# One row per Blackwell preset measured by cudnn-frontend @ 3929da2e (cuDNN 9.22): the llama3.1 SDPA benchmark's
# cudnn, bfloat16, top_left, batch 2, deterministic_bwd False rows (the tflops column of the fwd and bwd rows) and
# the benchmark/norms rms_norm rows (fwd_gbps), each preset against its own files:
#   gb200: benchmark/sdpa_benchmark_training/results/llama3.1/gb200/llama3.1_20260424_100750.csv,
#          benchmark/norms/results/gb200/all_models_20260226_180237.csv (cudnn-frontend @ afa9f7c0)
#   gb300: benchmark/sdpa_benchmark_training/results/llama3.1/gb300/llama3.1_20260424_100757.csv,
#          benchmark/norms/results/gb300/all_models_20260226_190305.csv (the 14 distinct rows: the file prints
#          its llama3-8b row twice)
BLACKWELL = [
    ("gb200",
     {2048: 1097, 4096: 1408, 8192: 1574, 16384: 1708, 32768: 1622},
     {2048: 885, 4096: 1148, 8192: 1332, 16384: 1328, 32768: 1226},
     ["6424.6", "5997.4", "6119.7", "5986.8", "5843.7", "5848.7", "5934.0", "3773.7", "4168.5", "1234.6", "6000.5",
      "4790.9", "4112.0", "1860.6"],
     (6_553_500_000_000, 2968), {"forward": (Fraction("0.711"), 1196), "backward": (Fraction("0.558"), 1043)}),
    ("gb300",
     {2048: 1373, 4096: 1703, 8192: 1856, 16384: 1915, 32768: 1953},
     {2048: 967, 4096: 1248, 8192: 1435, 16384: 1507, 32768: 1490},
     ["6459.5", "5962.9", "6079.4", "5979.9", "5968.1", "5959.5", "5976.0", "3856.9", "4235.8", "1223.2", "6105.0",
      "4662.5", "4269.8", "1873.8"],
     (6_616_600_000_000, 2996), {"forward": (Fraction("0.816"), 941), "backward": (Fraction("0.645"), 1296)}),
]


@pytest.mark.parametrize("name, forward, backward, gbps, memory, curves", BLACKWELL, ids=[r[0] for r in BLACKWELL])
def test_blackwell_attention_and_bandwidth_are_their_own_cudnn_measurements(name, forward, backward, gbps, memory,
                                                                             curves):
    hw = preset(name)
    t = kernel_table(hw)
    assert dict(t.attention_points["forward"]) == {s: v * T for s, v in forward.items()}
    assert dict(t.attention_points["backward"]) == {s: v * T for s, v in backward.items()}
    assert t.memory_points == _norm_points(gbps)
    assert (t.hbm_bandwidth, t.memory_launch_ns) == memory
    assert t.attention == curves
    _refit(t, {"bf16": hw.peak_flops_bf16, "fp8": hw.peak_flops_fp8})
    # the fitted η at the measured 8k forward point: within 2 % of cuDNN's
    fwd = attention_eta(sympy.Integer(8192), "forward", t) * hw.peak_flops_bf16
    assert abs(float(fwd) / (forward[8192] * T) - 1) < 0.02


def test_blackwell_tables_share_one_copy_of_each_measurement():
    # The GEMM points are XLA's B200 table (none for the GB200 or Blackwell Ultra), stored in [b200]; the
    # attention, FP8 attention and RMSNorm rows measured on the GB200, stored in [gb200]; each table fitted at
    # its own peaks (the GB300's equal the GB200's: hardware.toml)
    b, g2, g3 = (kernel_table(preset(n)) for n in ("b200", "gb200", "gb300"))
    assert g2.gemm_points == g3.gemm_points == b.gemm_points
    assert g2.gemm == g3.gemm == {"bf16": (Fraction("0.592"), 6056, 78), "fp8": (Fraction("0.633"), 5937, 272)}
    assert (preset("gb300").peak_flops_bf16, preset("gb300").peak_flops_fp8) == (
        preset("gb200").peak_flops_bf16, preset("gb200").peak_flops_fp8)
    assert b.attention_points == g2.attention_points and b.attention_fp8_points == g2.attention_fp8_points
    assert b.memory_points == g2.memory_points and (b.hbm_bandwidth, b.memory_launch_ns) == (6_553_500_000_000, 2968)
    assert b.attention == {"forward": (Fraction("0.79"), 1196), "backward": (Fraction("0.62"), 1043)}


def test_a_sliding_window_core_runs_at_the_curve_of_its_window():
    # a banded flash core meets Min(s/c, w) keys per query: its η is the curve's at S = w, not at S = s.
    # The check (not fitted): cudnn-frontend @ 3929da2e, benchmark/sdpa_benchmark_training/results/gpt_oss/gb200/
    # gpt_oss_20260424_100011.csv (GB200, cuDNN, bfloat16, top_left, head dim 64, sliding_window_size 128,
    # batch 2, deterministic_bwd False): fwd 153, 161, 165, 167 TFLOP/s at s = 2k, 4k, 8k, 16k; bwd 176, 182, 187, 188.
    # The GB200 curves at S = 128 (Llama 3.1's head dim 128, causal, no window): 171.9 and 152.5 TFLOP/s; at S = 4096
    # they would give 1,376 and 1,111 (8 and 6 times the measured rates)
    gb = preset("gb200")
    t = kernel_table(gb)
    P = gb.peak_flops_bf16
    fwd, bwd = (float(attention_eta(sympy.Integer(128), d, t)) * P / T for d in ("forward", "backward"))
    assert all(abs(fwd / x - 1) < 0.13 for x in (153, 161, 165, 167))
    assert all(abs(bwd / x - 1) < 0.2 for x in (176, 182, 187, 188))
    m = costgraph.load("gpt_oss")
    v = m.values("gpt-oss-20b", s=4096)
    v[m.graph.dims["b"].symbol] = sympy.Integer(1)
    rows = {r["path"]: r for r in kernel_ops(m.graph, Layout(), t, {"bf16": P})}
    a, d, s, w = 64, 64, 4096, 128                      # gpt-oss-20b: 64 query heads of 64, window 128
    pairs = w * (s - w) + Fraction(w * w, 2)            # the kept (query, key) pairs of the band, as an area
    f = 2 * a * d * pairs                               # QKᵀ's FLOPs over them (b = 1)
    sliding = sympy.sympify(rows["layers/sliding/self_attn/matmul"]["forward"]).xreplace(v)
    assert sliding == f / (P * Fraction("0.711") * Fraction(w, w + 1196))
    full = sympy.sympify(rows["layers/full/self_attn/matmul"]["forward"]).xreplace(v)
    assert full == 2 * a * d * Fraction(s * s, 2) / (P * Fraction("0.711") * Fraction(s, s + 1196))


def test_fp8_attention_runs_on_cudnn_fp8_curves(llama):
    # cudnn-frontend @ 3929da2e, benchmark/sdpa_benchmark_training/results/llama3.1/gb200/llama3.1_20260424_100750.csv
    # (GB200, cuDNN 9.22): cudnn, fp8, top_left, batch 2, deterministic_bwd False, tflops of the fwd and bwd rows
    gb, b2 = preset("gb200"), preset("b200")
    t = kernel_table(gb)
    assert dict(t.attention_fp8_points["forward"]) == {2048: 1420 * T, 4096: 1805 * T, 8192: 2047 * T, 16384: 2154 * T,
                                                       32768: 2197 * T}
    assert dict(t.attention_fp8_points["backward"]) == {2048: 831 * T, 4096: 1178 * T, 8192: 1454 * T,
                                                        16384: 1632 * T, 32768: 1687 * T}
    assert t.attention_fp8 == {"forward": (Fraction("0.464"), 1255), "backward": (Fraction("0.372"), 2462)}
    # the B200 takes the GB200's FP8 rows at its own FP8 peak (4.5 PF); GB300's are its own (results/llama3.1/gb300/)
    b = kernel_table(b2)
    assert b.attention_fp8_points == t.attention_fp8_points and b.attention_fp8["forward"] == (Fraction("0.516"), 1255)
    _refit(b, {"bf16": b2.peak_flops_bf16, "fp8": b2.peak_flops_fp8})
    assert kernel_table(preset("gb300")).attention_fp8 == {"forward": (Fraction("0.662"), 1362),
                                                           "backward": (Fraction("0.478"), 3033)}
    # --fp8-dot-product-attention: QKᵀ of Llama-3-8B (s = 4096, b = 1, causal: the kept half) at the FP8 peak on
    # the FP8 curves; the BF16 kernel at the BF16 peak otherwise
    m, v = llama
    a, d, s = 32, 128, 4096
    f = 2 * a * d * Fraction(s * s, 2)
    peaks = {"bf16": gb.peak_flops_bf16, "fp8": gb.peak_flops_fp8}
    path = "layers/layer/self_attn/matmul"
    for fp8_attention, peak, (e, s0) in ((True, gb.peak_flops_fp8, (Fraction("0.464"), 1255)),
                                         (False, gb.peak_flops_bf16, (Fraction("0.711"), 1196))):
        L = Layout(policy="fp8-current", fp8_attention=fp8_attention)
        rows = {r["path"]: r for r in kernel_ops(m.graph, L, t, peaks)}
        fwd = sympy.sympify(rows[path]["forward"]).xreplace(v)
        assert fwd == f / (peak * e * Fraction(s, s + s0)), fp8_attention


@pytest.mark.parametrize("name", ["a100-80gb-sxm", "mi300x", "h100-pcie"])
def test_presets_without_a_table_keep_the_flat_fallback_and_its_warning(name):
    hw = preset(name)
    assert kernel_table(hw) is None and kernel_rate(hw, {"bf16": hw.peak_flops_bf16}) is None
    rate = step_rate(hw, "mixed", peak=hw.peak_flops_bf16)
    assert rate.kind == "efficiency" and rate.value == Fraction(1, 2)
    assert rate.notes == (f"no kernel table for {name} (training/kernels.toml): the flat --efficiency 0.5 of the "
                          "peak is assumed for every kernel (--gemm-rate, a setting of the per-kernel model, does not "
                          "apply)",)


@pytest.mark.parametrize("name", ["h200", "b200", "gb200", "gb300"])
def test_presets_with_a_table_run_per_kernel(name):
    hw = preset(name)
    rate = step_rate(hw, "mixed", peak=hw.peak_flops_bf16)
    assert rate.kind == "kernels" and rate.table.preset == name and rate.notes == ()


def test_overlap_forward_is_the_forward_kernels_seconds(llama):
    # under the per-kernel model the overlap rules hide communication behind the forward kernels'
    # seconds and the rest (backward kernels, recomputation), not behind a FLOP ratio of the compute
    m, v = llama
    hw = preset("h100-sxm")
    rate = kernel_rate(hw, {"bf16": hw.peak_flops_bf16})
    L = Layout(t=2, d=4, gpus=8, m=4, zero=3, sp=True, recompute="full").filled()
    st = step_time(m.graph, L, hw, rate=rate)
    fwd = kernel_seconds(m.graph, L, rate.table, rate.peaks, phase="forward")
    bwd = kernel_seconds(m.graph, L, rate.table, rate.peaks, phase="backward")
    step = kernel_seconds(m.graph, L, rate.table, rate.peaks)
    for k in CLASSES:
        assert sympy.expand(fwd[k] + bwd[k] - step[k]) == 0
    ov = st["overlap"]
    assert sympy.expand(ov.forward - sum(fwd.values())) == 0
    assert sympy.expand(ov.forward + ov.backward - st["compute"]) == 0
    # the recomputation runs inside the backward: full recompute re-runs every layer's forward kernels
    rows = kernel_ops(m.graph, L, rate.table, rate.peaks)
    per = sympy.Rational(4, 1)   # m / p
    rerun = per * sum(r["active"] * r["forward"] * r["rerun"] for r in rows)
    plain = kernel_seconds(m.graph, Layout(t=2, d=4, gpus=8, m=4, zero=3, sp=True).filled(), rate.table, rate.peaks,
                           phase="backward")
    assert sympy.expand(sum(bwd.values()) - sum(plain.values()) - rerun) == 0 and rerun != 0
    # the FLOP ratio (the flat model's split) gives another forward: the two models differ here
    ratio, _ = split_compute(st["compute"], st_flops(m, L))
    assert float(ratio.xreplace(v)) != pytest.approx(float(ov.forward.xreplace(v)), rel=1e-3)
    # with a forward given, split_compute returns it and the rest
    assert split_compute(sympy.Integer(10), {}, sympy.Integer(3)) == (3, 7)


def st_flops(m, L):
    from costgraph.training.compute import training_flops

    return training_flops(m.graph, L)


def test_memory_bound_kernels_pay_the_fixed_time_once_each_way(llama):
    # on gb200 (memory_points: cuDNN's measured RMSNorm kernels) each memory-bound kernel takes
    # t_m + bytes/B_hbm, one kernel forward and one backward; the loss's kernels (6 forward, 2 backward:
    # cross_entropy.toml [logits] forward_kernels, backward_kernels) each pay t_m too; h100-sxm has no memory_points: no fixed time
    m, v = llama
    b, s, h, V = 1, 4096, 4096, 128256
    t = kernel_table(preset("gb200"))
    tm, bw = Fraction(2968, 10**9), 6_553_500_000_000
    rows = {r["path"]: r for r in kernel_ops(m.graph, Layout(), t, {"bf16": preset("gb200").peak_flops_bf16})}
    norm = rows["layers/layer/input_layernorm"]
    assert sympy.sympify(norm["forward"]).xreplace(v) == tm + Fraction(2 * b * s * h * 2, bw)
    assert sympy.sympify(norm["backward"]).xreplace(v) == tm + 2 * Fraction(2 * b * s * h * 2, bw)
    loss = rows["(loss: fp32 cross-entropy)"]
    assert sympy.sympify(loss["forward"]).xreplace(v) == 6 * tm + Fraction(38 * b * s * V, bw)
    assert sympy.sympify(loss["backward"]).xreplace(v) == 2 * tm + Fraction(14 * b * s * V, bw)
    assert kernel_table(preset("h100-sxm")).memory_launch_ns == 0


def _bundled_with(*edits):
    """The bundled kernels.toml, each (pattern, replacement) applied once (re.M), parsed and its refs checked as
    datafiles.bundled checks them, then its points resolved (training/kernel_points.py)."""
    import re
    from importlib.resources import files

    from costgraph import datafiles
    from costgraph.training import kernel_points
    from costgraph.training.kernel_table import SCHEMA

    text = (files("costgraph.training") / "kernels.toml").read_text(encoding="utf-8")
    for pattern, replacement in edits:
        text, n = re.subn(pattern, replacement, text, count=1, flags=re.M | re.S)
        assert n == 1, pattern
    data = datafiles.parse(text, "kernels.toml", SCHEMA)
    datafiles.check_refs(data.entries, SCHEMA.entries)
    return kernel_points.resolve(data.entries)


H100_GEMM_POINTS = r"^gemm_points = \[\n.*?\n\]\n"     # [h100-sxm]'s, the first table's


@pytest.mark.parametrize("edits, words", [
    ([(H100_GEMM_POINTS, ""), (r'^(\[h100-sxm\]\ndescription = .*?\n)', r'\1points_from = "h200"\n')],
     r"5[0-9]:1: \[h100-sxm\] points_from runs in a cycle for gemm_points \(h100-sxm → h200 → h100-sxm\)"),
    ([(r'^points_from = "h100-sxm"', 'points_from = "h300"')],
     r"2[0-9][0-9]:1: \[h200\] points_from = 'h300' names no other kernel table"),
    ([(H100_GEMM_POINTS, "")], r"5[0-9]:1: \[h100-sxm\] has no gemm_points"),
    ([(r'^(attention_head_dim = 128 .*?\n)', r'\1memory_points = [[1024, 1000]]\n')],
     r"2[0-9][0-9]:1: \[h100-sxm\] gives memory_points without memory_launch_ns"),
], ids=["cycle", "unknown-preset", "no-points", "points-without-parameters"])
def test_points_from_refusals_name_the_table_and_line(edits, words):
    from costgraph.errors import CostgraphValueError

    with pytest.raises(CostgraphValueError, match=r"kernels\.toml:" + words):
        _bundled_with(*edits)


def test_points_from_resolves_along_a_chain_and_by_kernel():
    held = _bundled_with()
    # gb300 → gb200 → b200 (XLA's B200 table); b200's attention rows are gb200's; h200's FlashAttention-3 rows are
    # h100-sxm's main curves (its attention_kernel is fa3), its FlashAttention-2 rows h100-sxm's attention_fa2_*
    assert {k: (e.name, key) for k, (e, key) in held["gb300"].items() if k.startswith("gemm")} == {
        "gemm_points": ("b200", "gemm_points"), "gemm_fp8_points": ("b200", "gemm_fp8_points"),
        "gemm_sustained_points": ("gb200", "gemm_sustained_points")}   # Azure's GB200 rows (--gemm-rate)
    assert (held["b200"]["attention_forward_points"][0].name, held["gb300"]["attention_forward_points"][0].name) == (
        "gb200", "gb300")
    assert [(e.name, key) for e, key in (held["h200"]["attention_fa3_forward_points"],
                                         held["h200"]["attention_fa2_backward_points"])] == [
        ("h100-sxm", "attention_forward_points"), ("h100-sxm", "attention_fa2_backward_points")]
