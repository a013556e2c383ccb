"""The operator graph: nodes, paths, counts, edges, repeat groups, stacks."""

import sympy

import costgraph
from costgraph.ops import REGISTRY


def eq(a, b):
    return sympy.expand(a - b) == 0


def test_nodes_have_path_kind_shapes_location_and_count(gpt, S):
    g = gpt.nx
    n = g.nodes["layers/attn/c_attn"]
    assert n["kind"] == "linear"
    assert n["count"] == S.l
    assert n["loc"].file == "std/attention.cg" and n["loc"].line == 11 and n["loc"].column == 9
    out = gpt.graph.tensors[n["outputs"][0]]
    assert out.shape == (S.b, S.s, 3 * S.h)
    assert g.nodes["lm_head"]["count"] == 1


def test_repeat_group_appears_once_with_its_count(gpt, S):
    paths = [p for p, _ in gpt.graph.ops() if p.endswith("c_attn")]
    assert paths == ["layers/attn/c_attn"]
    grp = gpt.graph.groups["layers"]
    assert grp.count == S.l and grp.carried == ("x",)


def test_edges_carry_tensors(gpt, S):
    g = gpt.nx
    (key, data), = [(k, d) for _, _, k, d in g.out_edges("layers/attn/c_attn", keys=True, data=True)]
    assert data["shape"] == (S.b, S.s, 3 * S.h) and data["role"] == "act"
    # the value carried into the layer comes from the embedding dropout
    assert g.has_edge("drop", "layers/ln_1", key="layers/x@in")
    # the last layer's output feeds the final LayerNorm
    assert "layers/x@out" in {k for _, _, k in g.in_edges("ln_f", keys=True)}


def test_split_views_share_storage(gpt):
    t = gpt.graph.tensors
    views = [t[f"layers/attn/split:{i}"] for i in range(3)]
    assert {v.storage for v in views} == {"layers/attn/c_attn:0"}


def test_node_cost_records(gpt, S):
    c = gpt.nx.nodes["layers/attn/matmul"]["cost"]       # QKᵀ
    assert eq(c.forward.matmul, 2 * S.b * S.s**2 * S.h)
    assert eq(c.backward_input.matmul, 4 * S.b * S.s**2 * S.h)
    assert c.backward_weight.matmul == 0 and c.weights == ()
    head = gpt.nx.nodes["lm_head"]["cost"]
    assert head.weights == () and head.tied == ("wte/weight",)


STACKS = """
model stacks {
  dim b
  dim s
  dim h
  dim l
  dim k "dense layers before the others"
  input x0[b, s, h]
  x = x0
  repeat k as dense {
    x = x + linear(gelu(linear(x, 4 * h)), h)
  }
  repeat l - k as narrow {
    x = x + linear(relu(linear(x, 2 * h, bias = false)), h, bias = false)
    repeat 2 as inner { x = layernorm(x) }
  }
  return x
}
"""


def test_stacks_of_different_groups_and_nested_repeats():
    m = costgraph.loads(STACKS)
    b, s, h, l, k = (m.graph.dims[n].symbol for n in "bshlk")
    # dense: 8h² + 5h; narrow: 4h² (no biases) + 2 LayerNorms × 2h
    assert eq(m.costs().params, k * (8 * h**2 + 5 * h) + (l - k) * (4 * h**2 + 4 * h))
    assert eq(m.costs("dense").flops_forward, 16 * b * s * h**2)
    assert eq(m.costs("narrow").params, 4 * h**2 + 4 * h)
    assert m.nx.nodes["narrow/inner/layernorm"]["count"] == 2 * (l - k)
    assert eq(m.costs("narrow/inner").params, 2 * h)


def test_registry_has_the_required_operators():
    required = {"linear", "matmul", "embedding", "layernorm", "rmsnorm", "softmax", "gelu", "silu",
                "relu", "dropout", "add", "mul", "split", "split_heads", "merge_heads", "transpose"}
    assert required <= set(REGISTRY)


GLU = """
model glu {
  dim b
  dim s
  dim h
  input x[b, s, h]
  return silu(linear(x, h, bias = false, name = gate)) * linear(x, h, bias = false, name = up)
}"""


def test_elementwise_product_of_activations(S):
    # x * y keeps both operands (2 × 2bsh bytes); its backward has two input gradients
    m = costgraph.loads(GLU)
    c = m.costs()
    # x saved once by both linears (one storage): 2bsh; silu input 2bsh; the product keeps the up
    # operand 2bsh, not silu's output: the korthikanti profile keeps what Megatron's fused SwiGLU keeps
    # (Megatron-LM fused_bias_swiglu.py::SwiGLUFunction saves its input only)
    assert eq(c.activation_bytes, 6 * S.b * S.s * S.h)
    # PyTorch autograd on the same code keeps both operands of the product (2 × 2bsh)
    eager = costgraph.loads(GLU, profile="pytorch").costs()
    assert eq(eager.activation_bytes, 8 * S.b * S.s * S.h)
    assert eq(c.flops_forward, 4 * S.b * S.s * S.h**2)
