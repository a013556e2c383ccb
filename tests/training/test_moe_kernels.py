"""The MoE token dispatch copies of the per-kernel step time (costgraph.training.moe_kernels): the
bytes of Megatron-LM's MoEAlltoAllTokenDispatcher with --moe-permute-fusion, counted at the source.

Megatron-LM@d98e8a64 megatron/core/transformer/moe/token_dispatcher.py (MoEAlltoAllTokenDispatcher):
``dispatch_preprocess`` → ``moe_utils.permute`` (permutation 1), ``dispatch_postprocess`` →
``sort_chunks_by_idxs`` when ``num_local_experts > 1`` (permutation 2), ``combine_preprocess`` → the
reverse sort, ``combine_postprocess`` → ``moe_utils.unpermute`` without probs. TransformerEngine@d0067d0d
transformer_engine/common/triton/permutation.py: ``_permute_kernel`` loads each token row once
(``inp = tl.load(input_ptr + input_off)``) and stores it once per routed expert
(``for idx in tl.range(n_routed): ... tl.store(output_ptr + output_off, inp)``); ``_unpermute_kernel``
loads the k rows of a token and stores their sum once; ``_sort_chunks_by_map_kernel`` loads and stores
each row once. So per MoE layer and micro-batch, T tokens of width H at a bytes, k experts a token:
forward (T + kT)·H·a + 2·kT·H·a + 2·kT·H·a + (kT + T)·H·a, the backward the same kernels reversed.
"""

import pytest
import sympy

import costgraph
from costgraph.hardware import preset
from costgraph.parallel.layout import Layout
from costgraph.training.kernel_table import kernel_table
from costgraph.training.kernel_time import kernel_ops
from costgraph.training.moe_kernels import permute_bytes

P = 989_400_000_000_000          # h100-sxm BF16 dense peak (hardware.toml: H100 whitepaper 989.4 TFLOP/s)
BW = 2_800_000_000_000           # kernels.toml [h100-sxm] hbm_bandwidth (measured 2.8 TB/s)
PATH = "layers/layer/mlp/experts (moe permute)"


@pytest.fixture(scope="module")
def mixtral():
    m = costgraph.load("mixtral")
    return m, m.values("mixtral-8x7b")     # E = 8, k = 2, h = 4096, l = 32, s = 4096, b = 1


def _row(m, v, **layout):
    rows = kernel_ops(m.graph, Layout(**layout), kernel_table(preset("h100-sxm")), {"bf16": P})
    r = next(r for r in rows if r["path"] == PATH)
    return {k: (sympy.sympify(x).xreplace(v) if k in ("forward", "backward", "active", "rerun") else x)
            for k, x in r.items()}


def test_bytes_of_the_fused_dispatch_as_te_moves_them():
    T, H, a, k = 4096, 4096, 2, 2
    x = T * H * a
    # permute (T + kT), chunk sort 2kT, reverse sort 2kT, unpermute (kT + T) rows of H·a bytes
    assert permute_bytes(x, k, 1, True) == (T + k * T) * H * a + 2 * k * T * H * a + 2 * k * T * H * a \
        + (k * T + T) * H * a
    assert permute_bytes(x, k, 1, False) == 2 * (T + k * T) * H * a   # one local expert: no sort
    assert permute_bytes(x, k, 2, True) == 2 * (T + k * T) * H * a + 4 * 2 * k * T * H * a   # etp gathers rows


@pytest.mark.parametrize("e, sorts", [(1, True), (4, True), (8, False)])
def test_one_row_per_moe_layer_at_hbm_bandwidth(mixtral, e, sorts):
    m, v = mixtral
    T, H, a, k = 4096, 4096, 2, 2
    row = _row(m, v, e=e, gpus=8)
    want = sympy.Rational(2 * (T + k * T) * H * a + (4 * k * T * H * a if sorts else 0), BW)
    assert row["forward"] == row["backward"] == want
    assert row["active"] == 32 and row["class"] == "memory" and row["kind"] == "moe_permute"


def test_sequence_parallel_tokens_and_recompute(mixtral):
    m, v = mixtral
    T, H, a, k = 4096 // 2, 4096, 2, 2            # TP 2 with SP: each device holds s/t tokens
    row = _row(m, v, t=2, sp=True, e=4, gpus=8)
    assert row["forward"] == sympy.Rational(2 * (T + k * T) * H * a + 4 * k * T * H * a, BW)
    assert _row(m, v, e=4, gpus=8, recompute="full")["rerun"] == 1       # the layer's forward again
    assert _row(m, v, e=4, gpus=8, recompute="selective")["rerun"] == 0  # core_attn only


def test_dense_models_have_no_dispatch():
    m = costgraph.load("llama")
    rows = kernel_ops(m.graph, Layout(), kernel_table(preset("h100-sxm")), {"bf16": P})
    assert not [r for r in rows if r["kind"] == "moe_permute"]


def test_train_names_the_dispatch_convention(mixtral):
    m, v = mixtral
    r = m.train(Layout(e=8, gpus=8, m=2), values=v, hardware="h100-sxm")
    assert r.compute["moe_permute"].startswith("te-fused")
    assert "the MoE token dispatch copies (te-fused" in r.to_text()
    dense = costgraph.load("llama")
    assert "MoE token dispatch" not in dense.train(Layout(gpus=1), values=dense.values("llama-3-8b"),
                                                   hardware="h100-sxm").to_text()
