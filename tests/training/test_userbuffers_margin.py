"""Userbuffers' SM margin (costgraph.training.kernel_time.userbuffers_margin): under the megatron overlap
with SP and TP ≥ 2, Transformer Engine's default userbuffers run the pipeline (row-parallel forward) and
bulk (column-parallel dgrad and wgrad) GEMMs on the SMs the communication kernel leaves:
TransformerEngine @ d0067d0d module/base.py::initialize_ub (num_sm 16, set_sm_margin for every method
but ring_exchange) and comm_gemm_overlap.cpp (``_math_sms = sm_count - num_comm_sm``); 132 SMs on an
H100 SXM5 (H100 whitepaper)."""

import pytest
import sympy

import costgraph
from costgraph.hardware import preset
from costgraph.parallel.layout import Layout
from costgraph.training.kernel_table import gemm_seconds, kernel_table, rated
from costgraph.training.kernel_time import kernel_ops, userbuffers_margin

R = sympy.Rational
P = 989_400_000_000_000   # h100-sxm BF16 dense peak (hardware.toml)


@pytest.fixture(scope="module")
def setup():
    m = costgraph.load("llama")
    v = m.values("llama-3-8b", s=4096)
    v[m.graph.dims["b"].symbol] = sympy.Integer(1)
    return m, v, kernel_table(preset("h100-sxm"))


def _rows(m, v, table, **layout):
    return {r["path"]: {k: sympy.sympify(r[k]).xreplace(v) for k in ("forward", "backward")}
            for r in kernel_ops(m.graph, Layout(**layout), table, {"bf16": P})}


def test_the_margin_is_132_over_116(setup):
    _, _, table = setup
    assert table.sm_count == 132
    assert userbuffers_margin(Layout(t=2, sp=True).filled(), table) == R(132, 116)
    assert userbuffers_margin(Layout(t=2).filled(), table) == 1                          # no SP: no userbuffers
    assert userbuffers_margin(Layout(t=2, sp=True, overlap="torchtitan").filled(), table) == 1


def test_the_overlapped_gemms_run_on_116_sms(setup):
    m, v, table = setup
    s, h, i = 4096, 4096, 14336   # Llama-3-8B, b = 1, t = 2

    def gemm(mm, n, k, contraction):
        return gemm_seconds(sympy.Integer(2 * mm * n * k), contraction, P, rated(table, "sustained"))   # the default --gemm-rate

    ub = _rows(m, v, table, t=2, sp=True)
    plain = _rows(m, v, table, t=2, sp=True, overlap="none")
    # down_proj (RowParallelLinear, fc2_fprop: pipeline): its forward on 116 of 132 SMs, its backward not
    down = ub["layers/layer/mlp/down_proj"]
    assert down["forward"] == gemm(s, h, i // 2, i // 2) * R(132, 116)
    assert down["backward"] == plain["layers/layer/mlp/down_proj"]["backward"]
    # up_proj (ColumnParallelLinear, fc1_dgrad / fc1_wgrad: bulk): dgrad and wgrad on 116 SMs, forward not
    up = ub["layers/layer/mlp/up_proj"]
    assert up["forward"] == gemm(s, i // 2, h, h)
    assert up["backward"] == (gemm(s, i // 2, h, i // 2) + gemm(s, i // 2, h, s)) * R(132, 116)
    # the output layer is no TE module: never margined
    assert ub["lm_head"] == plain["lm_head"]
