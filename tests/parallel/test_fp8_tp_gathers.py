"""The sequence-parallel all-gathers of FP8 linears move FP8 data under Transformer Engine's recipes
(fp8.toml ``tp_all_gather = "fp8"``).

Source: TransformerEngine @ d0067d0d (the mirror's HEAD, SOURCES.md):
* transformer_engine/pytorch/module/layernorm_linear.py (LayerNormLinear._forward): with SP and FP8,
  ``ln_out = quantizer(ln_out)`` and then ``gather_along_first_dim(ln_out, tp_group, quantizer=quantizer)`` (or
  ``fill_userbuffers_buffer_for_all_gather``); its backward gathers ``ln_out`` again with the input quantizer;
* transformer_engine/pytorch/module/base.py::grad_output_preprocess: a row-parallel linear under SP gathers
  ``grad_output`` with its quantizer;
* transformer_engine/pytorch/distributed.py::_all_gather_fp8 (delayed and current scaling): ``_data`` only, one
  byte an element (the output takes the input's ``_scale_inv``); ``_all_gather_mxfp8``: data and the E8M0
  scales, one byte per 32 values;
* transformer_engine/pytorch/module/base.py::initialize_ub: "AllGather buffers use fp8 when using fp8 recipe"
  (``fp8_buf`` for the layers of ``layers_all_gather_overlap``).
The output head (Megatron's plain ColumnParallelLinear) and the embedding stay at the activations' bytes, as do
every reduce-scatter; torchao's float8 (torchtitan) gathers only the forward inputs in FP8."""

import pytest
import sympy

import costgraph
from costgraph.parallel.communication import communication
from costgraph.parallel.layout import Layout


@pytest.fixture(scope="module")
def llama():
    return costgraph.load("llama", config="llama-3-8b")


def _gathers(model, policy):
    tp = communication(model.graph, Layout(t=4, sp=True, gpus=8, policy=policy), sp_backward_gather=True)["tp"]
    return {(t.what.split(": ", 1)[0], t.what.rsplit("(", 1)[-1], "again" in t.what, t.op): t.dtype_bytes
            for t in tp.parts}


@pytest.mark.parametrize("policy, fp8_bytes", [
    ("fp8-current-bridge", sympy.Integer(1)),        # _all_gather_fp8: _data only
    ("fp8-delayed", sympy.Integer(1)),
    ("fp8-mxfp8-bridge", sympy.Rational(33, 32)),    # data + one E8M0 scale per 32 values
])
def test_te_recipes_gather_fp8(llama, policy, fp8_bytes):
    bf16, fp8 = _gathers(llama, "mixed"), _gathers(llama, policy)
    assert bf16.keys() == fp8.keys()
    ln = "layers/layer/input_layernorm:0"
    assert fp8[(ln, "forward)", False, "all-gather")] == fp8_bytes           # qkv_fprop
    assert fp8[(ln, "backward)", True, "all-gather")] == fp8_bytes           # the wgrad re-gather (qkv_dgrad bulk)
    assert fp8[("layers/layer/mlp/down_proj", "backward)", False, "all-gather")] == fp8_bytes   # fc2_dgrad
    assert fp8[(ln, "backward)", False, "reduce-scatter")] == 2              # reduce-scatters stay BF16
    assert fp8[("norm:0", "forward)", False, "all-gather")] == 2             # the head is no FP8 linear
    assert fp8[("embed_tokens", "backward)", False, "all-gather")] == 2
    changed = {k for k in fp8 if fp8[k] != bf16[k] and k[1] != "step)"}   # (the weight gradients: the policy's)
    assert changed and all(k[3] == "all-gather" and fp8[k] == fp8_bytes and bf16[k] == 2 for k in changed)


def test_torchao_gathers_the_forward_input_in_fp8(llama):
    """torchao @ eab345c torchao/float8/float8_tensor_parallel.py::PrepareFloat8ModuleInput ("the float8 cast
    happens before the all-gather (i.e. Shard -> Replicate)"), which torchtitan's parallelize_llama applies to the
    attention's and the feed-forward's inputs under float8: those gathers at 1 byte, every other at 2."""
    bf16, ao = _gathers(llama, "mixed"), _gathers(llama, "fp8-torchao")
    changed = {k for k in ao if ao[k] != bf16[k] and k[1] != "step)"}
    assert changed == {("layers/layer/input_layernorm:0", "forward)", False, "all-gather"),
                       ("layers/layer/post_attention_layernorm:0", "forward)", False, "all-gather")}
    assert all(ao[k] == 1 for k in changed)
