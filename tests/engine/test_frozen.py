"""Frozen parameters and gradient-free calls in the model language (issue 19).

``param NAME[shape]: frozen`` and a call's ``frozen = true`` (PyTorch's ``requires_grad = False``):
no weight-gradient FLOPs, no gradient, master copy or optimizer state, and nothing kept only for
the weight's gradient (a linear's input); gradients still flow through to the inputs.
``no_grad = true`` on a call (``torch.no_grad()``): no backward FLOPs, nothing kept for backward,
its weights untrained. The same toy model in PyTorch (FlopCounterMode's backward count; the
tensors autograd saves, seen by ``saved_tensors_hooks``, parameters excluded) agrees exactly.
"""

from __future__ import annotations

import pytest

import costgraph
from costgraph.errors import CostgraphError
from costgraph.training import model_states

TOY = """
block proj(x[B, S, H], n) {
  return linear(gelu(x), n, bias = false, name = fc)
}
model t {
  dim b
  dim s
  dim h
  input x[b, s, h]
  param table[s, h]MARK
  y = linear(x + table, h, bias = false, name = first)
  z = linear(y, h, bias = false, name = second, frozen = FROZEN)
  w = proj(y, h, name = side, no_grad = NO_GRAD)
  return z + w
}
"""
V = dict(b=2, s=4, h=8)


def _toy(marked: bool):
    on = "true" if marked else "false"
    # x made with requires_grad=True, as the PyTorch twin below (test_torch_agrees...) makes it
    return costgraph.loads(TOY.replace("MARK", ": frozen" if marked else "").replace("FROZEN", on)
                           .replace("NO_GRAD", on), input_grads=True)


@pytest.fixture(scope="module")
def toys():
    return _toy(True), _toy(False)


def test_marks_freeze_exactly_the_weights_they_cover(toys):
    marked, plain = toys
    assert {w for w, x in marked.graph.weights.items() if x.frozen} == {
        "table/weight", "second/weight", "side/fc/weight"}
    assert not any(x.frozen for x in plain.graph.weights.values())


def test_backward_flops_and_saved_bytes(toys):
    marked, plain = toys
    m, p = marked.costs().evaluate(**V), plain.costs().evaluate(**V)
    b, s, h = V["b"], V["s"], V["h"]
    mm = 2 * b * s * h * h   # one [b, s, h] × [h, h] product
    assert m["flops_forward"] == p["flops_forward"] == 3 * mm
    assert (m["flops_backward_input"], m["flops_backward_weight"]) == (2 * mm, mm)   # first: both; second: input
    assert (p["flops_backward_input"], p["flops_backward_weight"]) == (3 * mm, 3 * mm)
    # bf16: kept are first's input only (second frozen needs no y, side under no_grad keeps nothing)
    assert m["activation_bytes"] == 2 * b * s * h
    assert p["activation_bytes"] == 3 * 2 * b * s * h   # first's input, y, gelu(y)


def test_states_skip_frozen_weights(toys):
    marked, plain = toys
    b, s, h = V["b"], V["s"], V["h"]

    def grads(m):
        g = model_states(m.graph, policy="fp32", optimizer="adam", dp=1)
        return {k: g[k].subs({m.graph.dims[n].symbol: x for n, x in V.items()}) for k in ("weights", "gradients")}

    assert grads(marked) == {"weights": 4 * (s * h + 3 * h * h), "gradients": 4 * h * h}
    assert grads(plain) == {"weights": 4 * (s * h + 3 * h * h), "gradients": 4 * (s * h + 3 * h * h)}


def test_pytorch_agrees_on_the_marked_toy(toys):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    b, s, h = V["b"], V["s"], V["h"]
    torch.manual_seed(0)
    first, second, fc = (torch.nn.Linear(h, h, bias=False, dtype=torch.bfloat16) for _ in range(3))
    table = torch.nn.Parameter(torch.zeros(s, h, dtype=torch.bfloat16), requires_grad=False)
    second.weight.requires_grad_(False)
    params = {t.untyped_storage().data_ptr() for t in (table, first.weight, second.weight, fc.weight)}
    saved = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in params:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = first(x + table)
        z = second(y)
        with torch.no_grad():
            w = fc(torch.nn.functional.gelu(y))
        out = z + w
    counter = FlopCounterMode(display=False)
    with counter:
        out.sum().backward()
    m = toys[0].costs().evaluate(**V)
    assert counter.get_total_flops() == m["flops_backward"]
    assert sum(saved.values()) == m["activation_bytes"]
    assert first.weight.grad is not None and fc.weight.grad is None


@pytest.mark.parametrize("text, words", [
    ("  param table[s, h]: frozn\n", "unknown parameter mark 'frozn'"),
    ("  z = linear(x, h, frozen = 1)\n", "must be true or false"),
])
def test_bad_marks_are_located_errors(text, words):
    src = f"model t {{\n  dim s\n  dim h\n  input x[s, h]\n{text}  return x\n}}\n"
    with pytest.raises(CostgraphError, match=words):
        costgraph.loads(src)


def test_gradient_free_tensors_need_no_input_gradients():
    # a no_grad tower (a repeat, then a view): the trainable projector on its output computes its
    # weight gradient only (LLaVA's frozen tower: tests/models/test_llava.py); x + u needs both again
    m = costgraph.loads("""model t {
  dim b
  dim s
  dim h
  dim l
  input x[b, s, h]
  u = x
  repeat l as layers {
    u = linear(u, h, bias = false, name = fc, no_grad = true)
  }
  v = linear(transpose(transpose(u)), h, bias = false, name = proj)
  return linear(x + v, h, bias = false, name = head)
}
""")
    c = m.costs().evaluate(b=2, s=4, h=8, l=3)
    mm = 2 * 2 * 4 * 8 * 8
    assert c["flops_forward"] == 5 * mm
    assert (c["flops_backward_input"], c["flops_backward_weight"]) == (mm, 2 * mm)   # head: both; proj: weight
    assert c["activation_bytes"] == 2 * (2 * 2 * 4 * 8)   # proj's input and head's input, bf16


# --- issue 30 item 2: one rule for the model's float inputs ---------------------------------------------

SDPA = """model sdpa {
  dim b
  dim a
  dim s
  dim d
  input q[b, a, s, d]
  input k[b, a, s, d]
  input v[b, a, s, d]
  p = softmax(matmul(q, transpose(k)))
  return matmul(p, v)
}
"""


def test_model_inputs_need_no_gradient_unless_said():
    """Scaled dot-product attention over three model inputs had a backward of 12,960 FLOPs at b = 2,
    a = 5, s = 9, d = 4: QKᵀ (two inputs) had none, scores·V had both. One rule now: by default a
    model's float inputs need no gradient (PyTorch's default, requires_grad=False), so nothing
    downstream of them alone has a backward; ``input_grads=True`` (``--input-grads``) is
    ``requires_grad=True`` on each: PyTorch's flop counter gives 25,920 (dQ, dK of QKᵀ and dP, dV of
    scores·V: 4 products of 2·b·a·s²·d = 6,480 each)."""
    from costgraph.cli import main

    v = dict(b=2, a=5, s=9, d=4)
    assert costgraph.loads(SDPA).costs().evaluate(**v)["flops_backward"] == 0
    assert costgraph.loads(SDPA, input_grads=True).costs().evaluate(**v)["flops_backward"] == 4 * 2 * 2 * 5 * 81 * 4
    assert costgraph.loads(SDPA, input_grads=True).costs().evaluate(**v)["flops_backward"] == 25_920
    # a trained weight on an input: its weight gradient only (nn.Linear on data: dW, no dX)
    lin = "model m {\n  dim b\n  dim h\n  input x[b, h]\n  return linear(x, h, bias = false)\n}\n"
    got = costgraph.loads(lin).costs().evaluate(b=2, h=4)
    assert (got["flops_backward_input"], got["flops_backward_weight"]) == (0, 2 * 2 * 4 * 4)
    got = costgraph.loads(lin, input_grads=True).costs().evaluate(b=2, h=4)
    assert (got["flops_backward_input"], got["flops_backward_weight"]) == (2 * 2 * 4 * 4, 2 * 2 * 4 * 4)
    assert main(["derive", "gpt", "--config", "gpt2", "--input-grads"]) == 0   # token ids never need one
    hf = str(__import__("pathlib").Path(__file__).parents[2] / "examples" / "hf" / "gpt2.json")
    assert main(["derive", hf, "--input-grads"]) == 2   # a config.json's model keeps the default: refused, not ignored
