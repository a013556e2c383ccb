"""Options of the FP8 policies (issue 27 item 7): Transformer Engine's FP8 dot-product attention
(``fp8_dpa``; ``--fp8-dot-product-attention``), BF16 weight gradients (Megatron-LM's
``--no-fp8-wgrad``), and delayed scaling refusing the moe_act and layernorm recompute modules as
Megatron-LM does. Exact values on GPT-2 small; sources per test (TE @ d0067d0d, Megatron-LM @
d98e8a64, TE v1.13 for the weight-gradient override).

FLOPs of GPT per iteration (no recomputation; tests/training/test_fp8_steptime.py): the layers' linears
72 B s l h² (a third of it, 24 B s l h², their weight gradients), the attention products
12 B s² l h (forward 4 B s² l h), the head 6 B s h V."""

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.engine.symbols import dim
from costgraph.errors import CostgraphValueError
from costgraph.training.fp8_options import MEGATRON_DELAYED_MESSAGE, recompute_refusal

R = sympy.Rational
b, s, h, l, V, a = (dim(n) for n in ("b", "s", "h", "l", "V", "a"))
P8, P = 1_978_900_000_000_000, 989_400_000_000_000   # H100 SXM dense FP8 and BF16 (hardware.toml)


@pytest.fixture(scope="module")
def gpt():
    m = costgraph.load("gpt")
    return m, m.values("gpt2")


def _compute(m, v, **kw):
    # the flat model (one efficiency for every kernel): these tests check which FLOPs run at which peak;
    # the per-kernel model's FP8 kernels: the end of this file, tests/training/test_kernel_time.py
    r = m.train(values=v, gpus=1, hardware="h100-sxm", efficiency="0.5", **kw)
    return sympy.sympify(r.step["compute"]).xreplace(v)


def _mem(m, v=None, **kw):
    return m.train(values=v, gpus=1, **kw).stages[0].memory


def test_fp8_attention_runs_the_attention_products_at_the_fp8_peak(gpt):
    # TE backends.py FusedAttnFunc: with fp8_dpa the fused kernel runs in FP8, forward and backward
    # (NVTE_FP8_DPA_BWD defaults to 1), the kernel's recompute of QKᵀ (2 B s² l h) included
    m, v = gpt
    B, S, H, L, VV = (v[x] for x in (b, s, h, l, V))
    lin, core, head = 72 * B * S * L * H**2, 12 * B * S**2 * L * H, 6 * B * S * H * VV
    again = 2 * B * S**2 * L * H   # flash recomputes QKᵀ in its backward (hardware FLOPs)
    half = R(1, 2)
    assert _compute(m, v, policy="fp8-delayed") == lin / (P8 * half) + (core + again + head) / (P * half)
    for pol in ("fp8-delayed", "fp8-current"):
        assert _compute(m, v, policy=pol, fp8_attention=True) == \
            (lin + core + again) / (P8 * half) + head / (P * half)


def test_no_fp8_wgrad_runs_weight_gradients_in_bf16(gpt):
    # Megatron fp8_utils.py::get_fp8_recipe: TEDelayedScaling(override_linear_precision=(False, False,
    # not config.fp8_wgrad)); TE v1.13 linear.py: the wgrad GEMM in high precision. dW = dYᵀ·X has the
    # forward's shape: a third of the linears' FLOPs (24 B s l h²) moves to the BF16 peak
    m, v = gpt
    B, S, H, L, VV = (v[x] for x in (b, s, h, l, V))
    lin, rest = 72 * B * S * L * H**2, 12 * B * S**2 * L * H + 6 * B * S * H * VV
    half = R(1, 2)
    assert _compute(m, v, policy="fp8-delayed", attention="eager", fp8_wgrad=False) == \
        R(2, 3) * lin / (P8 * half) + (R(1, 3) * lin + rest) / (P * half)


def test_fp8_attention_memory_by_hand(gpt):
    # GPT, one device, flash. TE utils.py::get_attention_quantizers: Q, K, V row-wise only (per-tensor
    # scaling): 1 byte an element + one fp32 scale_inv each. GPT's Q, K, V are views of c_attn's output
    # [b, s, 3h], kept only by the attention: its 6 b s h bf16 bytes go, 3 b s h + 12 come.
    # Delayed: O saved in FP8 too (fp8_tensors = (q_fp8, k_fp8, v_fp8, out_fp8)): + b s h + 4, and the
    # kernel no longer keeps O in bf16: the output projection keeps its own FP8 copy only (−2 b s h).
    # Current scaling keeps O in F16 (NVTE_DPA_FP8CS_O_in_F16 defaults to "1").
    m, _ = gpt
    for pol, change, saved in (("fp8-delayed", -4 * b * s * h + 16, 4 * b * s * h + 16),
                               ("fp8-current", -3 * b * s * h + 12, 3 * b * s * h + 12)):
        base, dpa = _mem(m, policy=pol), _mem(m, policy=pol, fp8_attention=True)
        assert sympy.expand(dpa["activations"] - base["activations"] - l * change) == 0
        assert sympy.expand(dpa["fp8 attention saved"] - l * saved) == 0
        assert sympy.expand(dpa["total"] - base["total"] - l * change) == 0
        assert "fp8 attention saved" not in base


def test_fp8_attention_memory_mxfp8_by_hand(gpt):
    # MXFP8 (combine_and_quantize's fast path): Q and K row- and column-wise, V row-wise; one E8M0 byte
    # per 32 values (mxfp8_tensor.py::get_scale_shape: row-wise [up128(M), up4(K/32)], column-wise
    # [up4(M/32), up128(K)]); O kept in F16 (out_f16). GPT-2: b 1, s 1024, h 768, a 12 (d 64), l 12.
    # Per layer and tensor M = b·a·s = 12288 rows of K = d = 64: data 786,432 bytes a copy, 5 copies;
    # row-wise scales 12288 × 4 = 49,152 (3 copies), column-wise 384 × 128 = 49,152 (2 copies).
    m, v = gpt
    per_layer = 5 * 786_432 + 5 * 49_152
    dpa = _mem(m, v, policy="fp8-mxfp8", fp8_attention=True)
    assert dpa["fp8 attention saved"].xreplace(v) == 12 * per_layer == 50_135_040


def test_no_fp8_wgrad_keeps_the_bf16_inputs(gpt):
    # TE v1.13 module/linear.py: with the wgrad override the linear saves inputmat_no_fp8 (its
    # high-precision input), not the FP8 transpose: no FP8 copies, the bf16 inputs stay. With FP8
    # weight gradients (tests/training/test_fp8_steptime.py) flash GPT changes activations by −5 b s h + 16 a layer.
    m, _ = gpt
    fp8, off = _mem(m, policy="fp8-delayed"), _mem(m, policy="fp8-delayed", fp8_wgrad=False)
    assert off["fp8 saved inputs"] == 0
    assert sympy.expand(off["activations"] - fp8["activations"] - l * (5 * b * s * h - 16)) == 0


def test_checkpointed_core_keeps_its_bf16_inputs(gpt):
    # Megatron's selective core_attn checkpoints the core around its BF16 Q, K, V: FP8 attention changes
    # the compute, not what is kept; full recomputation keeps each layer's input only
    m, _ = gpt
    for recompute in ("selective", "full"):
        kw = dict(policy="fp8-delayed", recompute=recompute)
        base, dpa = _mem(m, **kw), _mem(m, fp8_attention=True, **kw)
        assert sympy.expand(dpa["activations"] - base["activations"]) == 0 and dpa["fp8 attention saved"] == 0


@pytest.mark.parametrize("kw, message", [
    (dict(policy="mixed", fp8_attention=True), "--fp8-dot-product-attention is an option of the FP8 policies"),
    (dict(policy="megatron", fp8_wgrad=False), "--no-fp8-wgrad is an option of the FP8 policies"),
    # TE recipe/__init__.py Float8BlockScaling.__post_init__: assert not self.fp8_dpa and not self.fp8_mha
    (dict(policy="fp8-blockwise", fp8_attention=True), "'blockwise' recipe has no FP8 attention"),
    # torchao @ eab345c float8: Float8Linear swaps nn.Linear only (fp8.toml [torchao-tensorwise] fp8_dpa); trial4:
    # the message gave TE Float8BlockScaling's assert as torchao's reason
    (dict(policy="fp8-torchao", fp8_attention=True), r"'torchao-tensorwise' recipe has no FP8 attention \(torchao's"),
    # TE recipe docstring: "FP8 DPA currently is only supported in the FusedAttention backend"
    (dict(policy="fp8-delayed", fp8_attention=True, attention="eager"), "fused attention kernel"),
    (dict(policy="fp8-current", fp8_attention=True, recompute="torchtitan-op"), "torchtitan's"),
    # Megatron fp8_utils.py: only TEDelayedScaling gets override_linear_precision
    (dict(policy="fp8-current", fp8_wgrad=False), "applies it to the delayed recipe only"),
    (dict(policy="fp8-mxfp8", fp8_wgrad=False), "applies it to the delayed recipe only"),
    (dict(policy="fp8-delayed", fp8_attention="yes"), "fp8_attention must be true or false"),
])
def test_refusals(gpt, kw, message):
    m, _ = gpt
    with pytest.raises(CostgraphValueError, match=message) as e:
        m.train(gpus=1, **kw)
    assert e.value.hint or "true or false" in message   # a wrong type: the message says what is allowed


def test_delayed_scaling_refuses_moe_act_and_layernorm_recompute():
    # Megatron-LM @ d98e8a64 transformer_config.py, TransformerConfig.__post_init__:
    #   if self.fp8: if "moe_act" in self.recompute_modules or "layernorm" in self.recompute_modules:
    #       if self.fp8_recipe == 'delayed': raise ValueError("Delayed scaling does not support moe_act
    #       and layernorm recompute for fp8.")
    assert MEGATRON_DELAYED_MESSAGE == "Delayed scaling does not support moe_act and layernorm recompute for fp8."
    assert recompute_refusal("fp8-delayed", "selective", ("core_attn", "layernorm")) is not None
    assert MEGATRON_DELAYED_MESSAGE in recompute_refusal("fp8-delayed", "selective", ("moe_act",))
    assert recompute_refusal("fp8-delayed", "selective", ("core_attn", "mlp")) is None
    for pol in ("fp8-current", "fp8-blockwise", "fp8-mxfp8", "mixed"):   # other recipes run them (TE ≥ 2.6)
        assert recompute_refusal(pol, "selective", ("moe_act", "layernorm")) is None
    mixtral = costgraph.load("mixtral")
    with pytest.raises(CostgraphValueError, match="cannot recompute module moe_act") as e:
        mixtral.train(gpus=1, policy="fp8-delayed", recompute="selective", recompute_modules=("moe_act",))
    assert "fp8-current" in e.value.hint
    mixtral.train(gpus=1, policy="fp8-current", recompute="selective", recompute_modules=("moe_act",))


def test_cli_flags_name_the_options_in_text_json_and_fit(capsys):
    from costgraph.export import schema as schemas

    argv = ["train", "gpt", "--config", "gpt2", "--gpus", "2", "--tp", "2", "--hardware", "h100-sxm",
            "--precision", "fp8-delayed", "--fp8-dot-product-attention", "--no-fp8-wgrad"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "FP8 options: dot-product attention in FP8 (--fp8-dot-product-attention); weight gradients in BF16 " \
           "(--no-fp8-wgrad)" in out and "fp8 attention saved (in activations)" in out
    assert main([*argv, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["plan"]["fp8_attention"], doc["plan"]["fp8_wgrad"]) == (True, False)
    assert doc["memory"]["fp8"]["fp8 attention saved"]["value"] > 0
    assert [e.message for e in schemas.validator("train").iter_errors(doc)] == []
    assert main(["train", "gpt", "--config", "gpt2", "--precision", "fp8-delayed", "--recompute", "selective",
                 "--recompute-modules", "layernorm"]) == 2
    assert MEGATRON_DELAYED_MESSAGE in capsys.readouterr().err
    assert main(["fit", "gpt", "--config", "gpt2", "--hardware", "h100-sxm", "--precision", "fp8-current",
                 "--fp8-dot-product-attention"]) == 0
    assert "FP8 attention on, weight gradients FP8 (default)" in capsys.readouterr().out
    # a bare parameter count has no attention or linears to run in FP8: refused, not ignored
    assert main(["train", "--params", "7e9", "--precision", "fp8-delayed", "--no-fp8-wgrad"]) == 2
    assert "--no-fp8-wgrad needs a model" in capsys.readouterr().err


def test_fp8_parameters_of_megatron_bridge_perf_recipes():
    # Megatron-Bridge @ 067f987: bf16_with_fp8_current_scaling_mixed sets fp8_param_gather = True
    # (each FP8 linear's weight is its FP8 tensor, no bf16 copy) and _perf_precision sets
    # grad_reduce_in_fp32 = False (Megatron-LM param_and_grad_buffer.py: the gradient buffer in
    # the parameters' dtype). Llama-3-70B as Bridge's 64-GPU H100 recipe lays it out: TP 4 x PP 8
    # (v = 5), dp 2, ZeRO 1; a middle stage holds 10 layers. By hand, per layer: linears
    # q, o 8192^2 each, k, v 8192*1024 each, MLP 3*8192*28672 = 855,638,016 elements (/4 under
    # TP: 213,909,504); two RMSNorms 2*8192 (replicated).
    m = costgraph.load("llama")
    v = m.values(config="llama-3-70b", s=8192)
    kw = dict(gpus=64, t=4, p=8, v=5, schedule="interleaved", sp=True, zero=1, m=128)
    bridge = m.train(values=v, policy="fp8-current-bridge", **kw).stages[1].memory
    plain = m.train(values=v, policy="fp8-current", **kw).stages[1].memory
    linears, norms = 10 * 213_909_504, 10 * 2 * 8192
    ev = lambda x: int(x.xreplace(v)) if isinstance(x, sympy.Basic) else int(x)   # noqa: E731
    assert ev(bridge["weights"]) == linears * 1 + norms * 2          # FP8 linears, bf16 norms
    assert ev(bridge["gradients"]) == (linears + norms) * 2          # bf16 main gradients
    assert ev(bridge["fp8 weight copy"]) == 0                        # the weight is the FP8 copy
    assert ev(bridge["fp8 weight transpose"]) == linears            # Hopper: the transpose stays
    assert ev(plain["weights"]) == (linears + norms) * 2            # bf16 weights ...
    assert ev(plain["fp8 weight copy"]) == linears                  # ... and their FP8 copy
    assert ev(plain["gradients"]) == (linears + norms) * 4          # fp32 main gradients


# --- FP8 attention and BF16 weight gradients under the per-kernel step (issues 27/29 hostile input) ------------------

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


def test_an_fp8_policy_over_a_quantized_base_is_refused(gpt, capsys):
    # found by a hostile trial: `fit --lora 8 --quantize nf4 --precision fp8-current-bridge` counted FP8
    # weight transposes (6.98 GB for Llama-3-8B) of an nf4 base that bitsandbytes dequantizes to bf16
    # (QLoRA, Dettmers et al. 2023 §3): no stack runs FP8 GEMMs over it
    m, v = gpt
    for policy in ("fp8-current-bridge", "fp8-delayed"):
        with pytest.raises(CostgraphValueError, match=f"--quantize nf4: a quantized base runs its own kernels, "
                                                      f"not the FP8 GEMMs of precision '{policy}'") as e:
            m.train(values=v, gpus=1, policy=policy, lora_rank=8, lora_targets=("c_attn",), quantization="nf4")
        assert e.value.hint == "--precision mixed (QLoRA computes in bf16), or drop --quantize"
    assert m.train(values=v, gpus=1, lora_rank=8, lora_targets=("c_attn",), quantization="nf4").fits is None


def test_torchao_names_no_transpose_buffer(capsys):
    # torchao @ eab345c float8_linear.py: the weight cast each forward, saved as a transposed view, no buffer
    # (fp8.toml [torchao-tensorwise]); trial4: the FP8 options line said "weight transpose separate" beside a
    # 0-byte fp8 weight transpose
    assert main(["train", "gpt", "--config", "gpt2", "--hardware", "h100-sxm", "--precision", "fp8-torchao"]) == 0
    out = capsys.readouterr().out
    assert "weight transpose none (torchao's Float8Linear keeps no transpose buffer)" in out
    assert "fp8 weight transpose               0" in out
