"""FP8 buffers as Transformer Engine keeps them (costgraph.training.fp8): the weight transpose of
per-tensor scaling, decided per GPU as TE decides it (issue 27, the GB200 rows judged not to fit).

Source: TransformerEngine @ d0067d0d ``pytorch/utils.py::is_non_tn_fp8_gemm_supported``
(``(10, 0) <= capability < (12, 0) or capability >= (13, 0)``) and
``pytorch/tensor/float8_tensor.py::Float8CurrentScalingQuantizer.inner_tensor_specs`` (a ``_transpose``
buffer, uint8, only where non-TN FP8 GEMMs are not supported)."""

import pytest
import sympy

import costgraph
from costgraph.hardware import preset
from costgraph.training.fp8 import resolved_transpose, transpose_for

# Llama-3-8B's FP8 linears per layer, [out, in] (q, k, v, o; gate, up, down), 1 byte an element:
# 4096·4096 + 2·1024·4096 + 4096·4096 + 3·14336·4096 = 218,103,808; × 32 layers
LLAMA3_8B_LINEARS = 32 * (4096 * 4096 + 2 * 1024 * 4096 + 4096 * 4096 + 3 * 14336 * 4096)


@pytest.fixture(scope="module")
def llama():
    m = costgraph.load("llama")
    return m, m.values("llama-3-8b")


@pytest.mark.parametrize("key, expected", [
    ("h100-sxm", "separate"), ("h200", "separate"), ("l40s", "separate"),   # sm_90, sm_89
    ("rtx-5090", "separate"),                                               # sm_120: (12, 0) is excluded
    ("b200", "shared"), ("gb200", "shared"), ("gb300", "shared"),           # sm_100, sm_103
    ("mi300x", "separate"),                                                 # no compute capability
])
def test_transpose_as_te_decides_it(key, expected):
    assert transpose_for(preset(key)) == expected


def test_transpose_without_a_preset_is_hoppers():
    from costgraph.parallel.layout import Layout

    assert transpose_for(None) == "separate"
    assert resolved_transpose(Layout(), None) == "separate"
    assert resolved_transpose(Layout(fp8_transpose="shared"), None) == "shared"   # a named value stays


def test_a_layout_meets_its_preset_once():
    """``on_hardware``: the one place train and the calculator page resolve a layout on a preset: ``auto``
    becomes TE's transpose there, a named value stays, a recipe the GPU cannot run is refused (TE @ d0067d0d
    ``pytorch/quantization.py::check_recipe_support``: MXFP8 needs Blackwell, compute capability 10.0)."""
    from costgraph.errors import CostgraphValueError
    from costgraph.parallel.layout import Layout
    from costgraph.training.fp8 import on_hardware

    assert on_hardware(Layout(policy="fp8-delayed"), preset("b200")).fp8_transpose == "shared"
    assert on_hardware(Layout(policy="fp8-delayed"), preset("h100-sxm")).fp8_transpose == "separate"
    assert on_hardware(Layout(policy="fp8-delayed"), None).fp8_transpose == "separate"
    named = Layout(policy="fp8-delayed", fp8_transpose="separate")
    assert on_hardware(named, preset("b200")) is named
    with pytest.raises(CostgraphValueError, match="mxfp8"):
        on_hardware(Layout(policy="fp8-mxfp8"), preset("h100-sxm"))


@pytest.mark.parametrize("hardware, transpose", [("h100-sxm", LLAMA3_8B_LINEARS), ("gb200", 0)])
def test_train_keeps_the_transpose_the_gpu_needs(llama, hardware, transpose):
    m, v = llama
    r = m.train(values=v, gpus=8, zero=1, policy="fp8-current-bridge", hardware=hardware)
    assert r.memory.layout.fp8_transpose == ("separate" if transpose else "shared")
    assert sympy.sympify(r.most_loaded().memory["fp8 weight transpose"]).xreplace(v) == transpose


def test_a_named_transpose_wins_over_the_preset(llama):
    m, v = llama
    r = m.train(values=v, gpus=8, zero=1, policy="fp8-current-bridge", hardware="gb200", fp8_transpose="separate")
    assert r.most_loaded().memory["fp8 weight transpose"].xreplace(v) == LLAMA3_8B_LINEARS


# torchao's Float8Linear (torchtitan's float8; ao @ eab345c torchao/float8/float8_linear.py): the weight is cast
# at each forward and saved for the backward (ctx.save_for_backward(input_fp8, weight_fp8_t), a transposed view):
# 1 byte a linear weight element per micro-batch in flight, no transpose buffer, none under full recomputation.
# With force_recompute_fp8_weight_in_bwd (checkpoint.checkpoint(self.cast_weight_to_float8_t, ...)) none is kept.
@pytest.mark.parametrize("policy, recompute, copy", [("fp8-torchao", "none", LLAMA3_8B_LINEARS),
                                                     ("fp8-torchao", "full", 0),
                                                     ("fp8-torchao-recompute-weight", "none", 0)])
def test_torchao_weight_saved_with_the_activations(llama, policy, recompute, copy):
    m, v = llama
    r = m.train(values=v, gpus=8, zero=3, policy=policy, recompute=recompute, hardware="h100-sxm")
    mem = r.most_loaded().memory
    assert mem["fp8 weight copy"].xreplace(v) == copy
    assert mem["fp8 weight transpose"].xreplace(v) == 0


def test_torchao_weight_copies_per_micro_batch_in_flight(llama):
    m, v = llama
    # 1F1B on 2 stages: the first holds 2 micro-batches in flight, each with its own saved FP8 weights
    r = m.train(values=v, gpus=8, p=2, m=4, zero=1, policy="fp8-torchao", hardware="h100-sxm")
    first = r.memory.stages[0]
    assert first.in_flight == 2
    assert first.memory["fp8 weight copy"].xreplace(v) == 2 * LLAMA3_8B_LINEARS // 2   # half the layers, twice


# The GPUs each TE recipe runs on: TransformerEngine @ d0067d0d pytorch/quantization.py::check_recipe_support
# (_compute_fp8_support: 8.9 or higher; _compute_fp8_block_scaling_support: 9.0 or higher;
# _compute_mxfp8_support: 10.0 or higher, "not supported on 12.0+ architectures yet"). trial4: MXFP8 on an
# H100 was accepted by train, fit and plan, and plan --allow-fp8 listed fp8-mxfp8 rows on h100-sxm.
@pytest.mark.parametrize("policy, key, runs", [
    ("fp8-mxfp8", "h100-sxm", False), ("fp8-mxfp8-bridge", "h200", False), ("fp8-mxfp8", "rtx-5090", False),
    ("fp8-mxfp8", "b200", True), ("fp8-mxfp8", "gb300", True),
    ("fp8-blockwise", "l40s", False), ("fp8-blockwise", "h100-sxm", True),
    ("fp8-delayed", "l40s", True), ("fp8-current", "rtx-5090", True),
    ("fp8-mxfp8", "mi300x", True),   # no compute capability: not checked
])
def test_a_recipe_runs_where_te_runs_it(policy, key, runs):
    from costgraph.errors import CostgraphValueError
    from costgraph.training.fp8 import check_supported

    if runs:
        check_supported(policy, preset(key))
    else:
        with pytest.raises(CostgraphValueError, match="needs compute capability") as e:
            check_supported(policy, preset(key))
        assert e.value.hint.startswith("--precision ") and "mxfp8" not in e.value.hint.split(",")[0]


def test_train_plan_and_fit_refuse_mxfp8_on_hopper(llama, capsys):
    from costgraph.cli import main
    from costgraph.training.plan_variants import space_facts

    m, v = llama
    with pytest.raises(costgraph.errors.CostgraphValueError, match="'mxfp8' needs compute capability 10.0 up to 12.0"):
        m.train(values=v, gpus=8, zero=1, policy="fp8-mxfp8", hardware="h100-sxm")
    argv = ["--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm", "--precision", "fp8-mxfp8"]
    assert main(["plan", "llama", *argv, "--global-batch", "64"]) == 2
    assert main(["fit", "llama", *argv]) == 2
    assert "h100-sxm has 9.0" in capsys.readouterr().err
    searched = space_facts(m.graph, v, preset("h100-sxm"), 8, "flash")["fp8_policies"]   # plan --allow-fp8
    assert "fp8-delayed" in searched and not [p for p in searched if "mxfp8" in p]
    assert "fp8-mxfp8" in space_facts(m.graph, v, preset("b200"), 8, "flash")["fp8_policies"]
