"""``rg_lru`` (costgraph/ops/recurrent.py), Griffin's RG-LRU: parameters, FLOPs, what it keeps and its
decode state, exact; against transformers 5.24's ``RecurrentGemmaRglru``
(``models/recurrent_gemma/modeling_recurrent_gemma.py``) under ``FlopCounterMode`` when torch and
transformers are installed."""

from __future__ import annotations

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphError

b, s, w, n = sympy.symbols("b s w n", positive=True, integer=True)

SRC = """model m {
  dim b
  dim s
  dim w
  dim n
  input x[b, s, w]
  return rg_lru(x, n, name = rg_lru)
}
"""


@pytest.fixture(scope="module")
def lru():
    return costgraph.loads(SRC, path="m.cg", input_grads=True)


def test_parameters_and_products_written_out(lru):
    # RecurrentGemmaRglru.__init__: recurrent_param [W], two gates [n, W/n, W/n] and their biases [n, W/n]
    c = lru.costs("model", convention="matmul")
    assert sympy.simplify(c.params - (w + 2 * n * (w / n) ** 2 + 2 * n * (w / n))) == 0
    # two torch.baddbmm over n heads of (b·s × W/n)·(W/n × W/n): 2·2·n·b·s·(W/n)²; backward as much per side
    assert sympy.simplify(c.flops_forward - 4 * b * s * w ** 2 / n) == 0
    assert sympy.simplify(c.flops_backward_input - 4 * b * s * w ** 2 / n) == 0
    assert sympy.simplify(c.flops_backward_weight - 4 * b * s * w ** 2 / n) == 0


def test_all_convention_adds_the_elementwise_recurrence(lru):
    from costgraph.ops.recurrent import RG_LRU_PER_ELEMENT
    c = lru.costs("model", convention="all")
    assert sympy.simplify(c.flops_forward - (4 * b * s * w ** 2 / n + 22 * b * s * w + 3 * w)) == 0
    assert RG_LRU_PER_ELEMENT == 22


def test_state_is_fp32_per_sequence_whatever_the_tokens(lru):
    # transformers' _setup_cache: recurrent_states zeros((batch, lru_width), dtype=torch.float32)
    c = lru.costs("model")
    assert c.kv_cache_bytes_per_token == 0
    assert c.evaluate(b=3, s=10, w=8, n=2)["kv_cache_bytes"] == c.evaluate(b=3, s=4096, w=8, n=2)["kv_cache_bytes"] \
        == 3 * 8 * 4


def test_keeps_the_input_gates_and_states(lru):
    # x, the input gate, the recurrence gate and the states: four [b, s, w] in bf16
    assert lru.costs("model").evaluate(b=2, s=6, w=8, n=2)["activation_bytes"] == 4 * 2 * 6 * 8 * 2


def test_trait_splits_per_channel():
    from costgraph.ops.registry import REGISTRY
    assert REGISTRY["rg_lru"].layout == ("per_channel", "x")


def test_refuses_a_tensor_not_b_s_w():
    with pytest.raises(CostgraphError, match=r"rg_lru needs x \[B, S, W\]"):
        costgraph.loads(SRC.replace("input x[b, s, w]", "input x[b, w]"), path="m.cg")


def test_against_transformers_rglru(lru):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import RecurrentGemmaConfig
    from transformers.models.recurrent_gemma.modeling_recurrent_gemma import RecurrentGemmaRglru

    for B, S, W, H in ((2, 6, 8, 2), (3, 5, 12, 3)):
        module = RecurrentGemmaRglru(RecurrentGemmaConfig(hidden_size=W, lru_width=W, num_attention_heads=H))
        for p in module.parameters():
            torch.nn.init.normal_(p)
        x = torch.randn(B, S, W, requires_grad=True)
        with FlopCounterMode(display=False) as fc:
            y = module(x, torch.arange(S)[None].expand(B, S))
            fwd = fc.get_total_flops()
            y.sum().backward()
        want = lru.costs("model", convention="matmul").evaluate(b=B, s=S, w=W, n=H)
        assert sum(p.numel() for p in module.parameters()) == want["params"]
        assert (fwd, fc.get_total_flops() - fwd) == (
            want["flops_forward"], want["flops_backward_input"] + want["flops_backward_weight"])
