"""The attention kernel of a flash core (--attention-kernel, costgraph.choices.ATTENTION_KERNEL): each
kernel's curves in kernels.toml are the fit of the bars its source prints, the flash kernel's seconds
are the hand formula with the chosen kernel's curve, the default is cuDNN's fused attention (what
Transformer Engine runs on Hopper), and a kernel a table has no curves of is refused with a hint."""

import json
from fractions import Fraction

import pytest
import sympy

import costgraph
from costgraph.choices import ATTENTION_KERNEL
from costgraph.hardware import preset
from costgraph.parallel.layout import Layout
from costgraph.training.kernel_table import attention_curves, attention_eta, fit_attention, kernel_table
from costgraph.training.kernel_time import kernel_ops
from cli_checks import refused, run

R = sympy.Rational
T = 10**12
P = 989_400_000_000_000   # h100-sxm and h200 BF16 dense peak (hardware.toml: 989.4 TFLOP/s)
S = (512, 1024, 2048, 4096, 8192, 16384)
# Shah et al. 2024, FlashAttention-3 (arXiv:2407.08608), H100 80GB SXM5, BF16, head dim 128: Figure 5
# (forward, causal) and Figure 6 (backward), the bars of each kernel in TFLOPS/s at S = 512 ... 16k
BARS = {"fa3": ((292, 423, 521, 579, 602, 616), (316, 424, 501, 542, 559, 561)),
        "cudnn": ((315, 410, 484, 518, 529, 539), (305, 408, 465, 499, 518, 516)),
        "fa2": ((191, 260, 298, 319, 333, 335), (214, 260, 291, 310, 318, 322))}


@pytest.fixture(scope="module")
def h100():
    return kernel_table(preset("h100-sxm"))


@pytest.fixture(scope="module")
def llama():
    m = costgraph.load("llama")
    v = m.values("llama-3-8b", s=8192)
    v[m.graph.dims["b"].symbol] = sympy.Integer(1)
    return m, v


def test_the_default_is_transformer_engines_fused_attention():
    # TE @ d0067d0d dot_product_attention/utils.py: FlashAttention is disabled "to give FusedAttention
    # preference on Hopper+" (cuDNN) when both are eligible: what Megatron-Core runs. The default is auto:
    # cudnn where a flash core runs, nothing under eager (a kernel given there is refused: test_layout_checks)
    assert ATTENTION_KERNEL.default == "auto" and ATTENTION_KERNEL.values == ("auto", "cudnn", "fa3", "fa2")
    assert Layout().attention_kernel == "auto" and Layout().filled().resolved("attention_kernel") == "cudnn"
    assert Layout(attention="eager").filled().resolved("attention_kernel") is None


def test_h100_curves_are_the_fit_of_the_papers_bars(h100):
    assert h100.attention_kernel == "fa3"   # attention_forward/backward_* are FlashAttention-3's bars
    for kernel, (fwd, bwd) in BARS.items():
        pts = h100.attention_kernel_points[kernel]
        assert pts["forward"] == tuple((s, x * T) for s, x in zip(S, fwd))
        assert pts["backward"] == tuple((s, x * T) for s, x in zip(S, bwd))
        for direction in ("forward", "backward"):
            e, s0 = fit_attention(pts[direction], P)
            assert attention_curves(h100, kernel)[direction] == (Fraction(str(round(e, 3))), round(s0))
    assert attention_curves(h100, "cudnn") == {"forward": (Fraction("0.567"), 387), "backward": (Fraction("0.548"), 376)}
    assert attention_curves(h100, "fa2") == {"forward": (Fraction("0.354"), 402), "backward": (Fraction("0.333"), 274)}
    # FlashAttention-2's backward is slower than its forward at long keys, and both near half of FA3's
    assert attention_eta(16384, "forward", h100, "fa2") / attention_eta(16384, "forward", h100, "fa3") < R(6, 10)


def test_h200_takes_the_h100_bars_for_fa2_and_fa3(h100):
    h200 = kernel_table(preset("h200"))
    assert h200.attention_kernel == "cudnn"   # its own curves: cudnn-frontend's H200 benchmark
    assert attention_curves(h200, "fa2") == attention_curves(h100, "fa2")
    assert attention_curves(h200, "fa3") == attention_curves(h100, "fa3")


@pytest.mark.parametrize("kernel", ["cudnn", "fa3", "fa2"])
def test_flash_seconds_follow_the_chosen_curve(llama, h100, kernel):
    m, v = llama
    b, s, a, d = 1, 8192, 32, 128
    rows = kernel_ops(m.graph, Layout(attention_kernel=kernel), h100, {"bf16": P})
    rows = {r["path"]: r for r in rows}
    qk, pv = rows["layers/layer/self_attn/matmul"], rows["layers/layer/self_attn/matmul_1"]
    (fe, fs0), (be, bs0) = (attention_curves(h100, kernel)[k] for k in ("forward", "backward"))
    kept = R(2 * b * a * s * s * d, 2)   # one product's FLOPs over the causal mask's kept pairs
    fwd = kept / (P * R(fe) * s / (s + fs0))
    bwd = 2 * kept / (P * R(be) * s / (s + bs0))
    assert sympy.sympify(qk["forward"]).xreplace(v) == fwd
    assert sympy.sympify(pv["backward"]).xreplace(v) == bwd
    assert sympy.sympify(qk["backward"]).xreplace(v) == bwd + kept / (P * R(be) * s / (s + bs0))


def test_fa2_is_slower_than_the_default_by_its_bars(llama):
    m, v = llama
    cls = {k: m.train(Layout(gpus=8, m=1, attention_kernel=k), values=v, hardware="h100-sxm")
           .compute["compute_by_class"]["attention"] for k in ("cudnn", "fa2")}
    ratio = sympy.sympify(cls["fa2"]).xreplace(v) / sympy.sympify(cls["cudnn"]).xreplace(v)
    # forward 529/333 and backward 518/318 TFLOP/s at 8k (the bars): about 1.6 times the seconds
    assert R(15, 10) < ratio < R(17, 10)


def test_the_output_names_the_kernel(capsys):
    args = ["train", "llama", "--config", "llama-3-8b", "--set", "b=1", "s=4096", "--gpus", "8",
            "--hardware", "h100-sxm"]
    rc, out, _ = run(capsys, *args)
    assert rc == 0 and "attention kernel: cudnn (default) (cuDNN's fused attention" in out
    rc, out, _ = run(capsys, *args, "--attention-kernel", "fa2")
    assert "attention kernel: fa2 (FlashAttention-2 as PyTorch's scaled_dot_product_attention runs it" in out
    rc, out, _ = run(capsys, *args, "--attention-kernel", "fa3", "--format", "json")
    doc = json.loads(out)
    assert doc["step"]["attention_kernel"] == "fa3" and doc["plan"]["attention_kernel"] == "fa3"


def test_a_kernel_the_table_lacks_is_refused(capsys):
    refused(capsys, ["train", "llama", "--config", "llama-3-8b", "--set", "b=1", "s=4096", "--gpus", "8",
                     "--hardware", "b200", "--attention-kernel", "fa2"],
            "kernels.toml [b200] has no curves of the attention kernel 'fa2'", "hint: --attention-kernel cudnn")
    refused(capsys, ["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm",
                     "--attention-kernel", "fa4"], "fa4")
