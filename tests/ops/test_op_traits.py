"""Operator traits declared on the operator (issue 15, item 1): every operator
says how it behaves under tensor parallelism (``layout``) and which roles it
plays for the training analyses (``roles``); ``parallel/tensor.py`` dispatches
on the layout, an operator without one warns under ``--tp``, and ``costgraph
ops`` prints the traits."""

import json

import pytest

import costgraph
from costgraph import cli
from costgraph.ops import REGISTRY
from costgraph.ops.registry import LAYOUTS, ROLES, _declared, describe_traits, has_role, op
from costgraph.parallel import tensor
from costgraph.parallel.tensor import tensor_parallel
from costgraph.training.compute import routers
from costgraph.training.lora import quantized_weights

PROBE = """model probe {
  dim b "micro-batch size"
  dim s "sequence length"
  dim h "hidden size"
  input x[b, s, h]
  y = linear(x, 4 * h, name = up)
  return linear(OPNAME(y), h, name = down)
}
config small { b = 1, s = 8, h = 16 }
"""


@pytest.fixture
def probe_op():
    """Register (and afterwards remove) ``probe_unlaid``, an operator with no
    layout trait, and ``probe_follow``, the same rule declaring ``follow``."""

    def rule(c):
        return c.output(c["x"].shape)

    op("probe_unlaid", "a test operator declaring no layout", x="tensor")(rule)
    op("probe_follow", "a test operator that follows its input's split", x="tensor", layout="follow")(rule)
    try:
        yield
    finally:
        for name in ("probe_unlaid", "probe_follow"):
            REGISTRY._specs.pop(name, None)


def _model_file(tmp_path, opname):
    f = tmp_path / f"{opname}.cg"
    f.write_text(PROBE.replace("OPNAME", opname))
    return f


def test_every_registered_operator_declares_a_layout():
    missing = [name for name in REGISTRY if REGISTRY[name].layout is None]
    assert missing == [], f"operators without a layout trait (add layout= to their @op): {missing}"
    assert {REGISTRY[name].layout[0] for name in REGISTRY} <= set(LAYOUTS)
    assert all(set(REGISTRY[name].roles) <= set(ROLES) for name in REGISTRY)


def test_every_layout_name_has_one_rule_in_parallel_tensor():
    assert set(tensor._RULES) == set(LAYOUTS)


def test_traits_read_from_the_source_equal_the_registered_ones():
    declared = _declared()
    assert declared is not None
    assert {s.name: (s.layout, s.roles) for s in declared} == \
        {name: (REGISTRY[name].layout, REGISTRY[name].roles) for name in REGISTRY}


def test_declared_traits_of_some_operators():
    # the sets parallel/tensor.py held before the traits (_FOLLOW, _WHOLE_LAST), and the rules
    follow = {"gelu", "silu", "relu", "softplus", "scale", "dropout", "cache", "zeros", "repeat_kv",
              "sigmoid", "tanh", "square", "relu2", "clamp", "softcap", "cast", "xielu",
              "alibi",   # issue 19: ALiBi follows the scores' head split
              "lightning_attention",   # issue 19: MiniMax's per-head recurrence follows q's head split
              "clamped_glu"}   # gate and up interleaved ([::2], [1::2]): a column split keeps each rank's pairs
    assert {n for n in REGISTRY if REGISTRY[n].layout == ("follow",)} == follow
    assert {n for n in REGISTRY if REGISTRY[n].layout == ("whole_last",)} == {"softmax", "rope"}
    # issue 29: a slice needs its axis whole unless the model says the projection is laid out rank by rank
    assert REGISTRY["slice"].layout == ("slice_last",)
    # issue 29: norms keep a split by heads (QK-norm over the whole projection), else need the axis whole
    assert {n for n in REGISTRY if REGISTRY[n].layout == ("norm_last",)} == {"layernorm", "rmsnorm"}
    assert {n for n in REGISTRY if REGISTRY[n].layout == ("broadcast",)} == {"add", "sub", "mul", "maximum"}
    assert REGISTRY["selective_scan"].layout == ("per_channel", "x", "dt")
    assert REGISTRY["conv1d"].layout == ("per_channel", "x")
    assert REGISTRY["split_heads"].layout == ("view", (-1, -2), (-2, -1))
    assert REGISTRY["merge_heads"].layout == ("view", (-3, -2), (-2, -3), (-1, -2))
    assert REGISTRY["transpose"].layout == ("view", (-1, -2), (-2, -1))
    assert REGISTRY["split"].layout == ("view",)
    assert REGISTRY["concat"].layout == ("join_last",)
    assert (REGISTRY["linear"].layout, REGISTRY["embedding"].layout, REGISTRY["matmul"].layout) == \
        (("column_row",), ("vocab",), ("batched",))
    # the sets analyses held before the roles (issue 31 item 3): grad_only.py's weight-gradient-only
    # inputs, phases.py's _VIEWS, communication.py's _KV_VIEWS, diffusion.py's TIMESTEP_OP
    assert {n: REGISTRY[n].roles for n in REGISTRY if REGISTRY[n].roles} == {
        "linear": ("matrix", "router", "weight_grad_input"), "embedding": ("embedding", "weight_grad_input"),
        "rmsnorm": ("weight_grad_normalized",), "repeat_kv": ("kv_expand", "kv_passthrough"),
        "silu": ("glu_gate", "expert_act"), "gelu": ("glu_gate", "expert_act"), "relu": ("expert_act",),
        "mul": ("expert_act",), "clamped_glu": ("expert_act",),   # recompute.MODULES' moe_act kind list before
        "split": ("view",), "split_heads": ("view",),
        "slice": ("view",), "transpose": ("view", "kv_passthrough"), "cache": ("cache", "view", "kv_passthrough"),
        "sinusoidal": ("timestep",)}
    assert (has_role("linear", "matrix"), has_role("embedding", "matrix"), has_role("param", "matrix")) == \
        (True, False, False)


@pytest.mark.parametrize("kw, message", [
    ({"layout": "sideways"}, "layout 'sideways' is none of"),
    ({"layout": ("per_channel", "y")}, "per_channel names its per-channel tensor arguments"),
    ({"layout": ("view", (-1,))}, "view takes (input axis, output axis) pairs"),
    ({"layout": ("follow", "x")}, "layout 'follow' takes no arguments"),
    ({"layout": "follow", "roles": "tensor"}, "role 'tensor' is none of"),
])
def test_a_bad_trait_is_refused_at_registration(kw, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        op("probe_bad", "a bad declaration", x="tensor", **kw)
    assert "probe_bad" not in REGISTRY._specs


def test_an_operator_without_layout_warns_under_tp_and_names_it(tmp_path, probe_op, capsys):
    f = _model_file(tmp_path, "probe_unlaid")
    model = costgraph.load(str(f))
    tp = tensor_parallel(model.graph, 2)
    # what was assumed: its input needed whole, so `up` (column-parallel otherwise) is replicated;
    # `down` reads a replicated tensor: column-parallel
    assert (tp.column, tp.row, tp.replicated) == (["down"], [], {"up"})
    assert tp.warnings == [
        "operator 'probe_unlaid' (probe_unlaid) declares no tensor-parallel layout: it was assumed to need "
        "its inputs whole (the linears before it kept replicated) and its output replicated; declare layout= "
        "in its @op (see `costgraph ops`)"]
    assert tensor_parallel(model.graph, 1).warnings == []
    # the API result carries it
    assert model.train(t=2, gpus=2).warnings == tp.warnings
    assert model.train(t=1, gpus=1).warnings == []
    # weights per device, bf16: up whole 2(4h² + 4h), down split 2(4h² + h)/2 = 12h² + 9h at h = 16
    h = model.graph.dims["h"].symbol
    assert model.train(t=2, gpus=2).stages[0].memory["weights"] == 12 * h**2 + 9 * h
    # the CLI's text and JSON
    assert cli.main(["train", str(f), "--config", "small", "--tp", "2", "--gpus", "2"]) == 0
    out = capsys.readouterr().out
    assert "warning: operator 'probe_unlaid' (probe_unlaid) declares no tensor-parallel layout" in out
    assert cli.main(["train", str(f), "--config", "small", "--tp", "2", "--gpus", "2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == tp.warnings
    assert cli.main(["train", str(f), "--config", "small"]) == 0
    assert "probe_unlaid" not in capsys.readouterr().out


def test_the_same_operator_declaring_follow_lets_the_split_through(tmp_path, probe_op):
    model = costgraph.load(str(_model_file(tmp_path, "probe_follow")))
    tp = tensor_parallel(model.graph, 2)
    assert (tp.column, tp.row, tp.replicated, tp.warnings) == (["up"], ["down"], set(), [])
    # Megatron's MLP: up column-parallel (weight and bias split), down row-parallel (bias whole):
    # 2(4h² + 4h + 4h²)/2 + 2h = 8h² + 6h bytes of bf16 weights per device
    h = model.graph.dims["h"].symbol
    assert model.train(t=2, gpus=2).stages[0].memory["weights"] == 8 * h**2 + 6 * h


def test_roles_choose_routers_matrices_and_quantized_weights():
    # the router: qwen2_moe.cg's `gate` (h → experts), not its `shared_expert_gate` (h → 1)
    assert routers(costgraph.load("qwen2_moe").graph) == {"layers/layer/mlp/gate"}
    # GPT-2's four linears per layer (the head is tied to wte: it owns no weight)
    assert quantized_weights(costgraph.load("gpt").graph) == {
        "layers/attn/c_attn/weight", "layers/attn/c_proj/weight", "layers/mlp/c_fc/weight", "layers/mlp/c_proj/weight"}


def test_costgraph_ops_prints_the_traits(capsys):
    assert cli.main(["ops"]) == 0
    out = capsys.readouterr().out
    for block in ("gelu(x, keep=none)\n    GELU activation (Hendrycks & Gimpel 2016)\n    layout: follow · roles: glu_gate, expert_act\n",
                  "\n    layout: column_row · roles: matrix, router, weight_grad_input\n",
                  "transpose(x)\n    swap the last two dimensions (view)\n    layout: view (-1→-2, -2→-1) · roles: view, "
                  "kv_passthrough\n",
                  "\n    layout: per_channel (x, dt)\n",
                  "\nlayouts (how an operator's output is split under --tp):\n  follow: ",
                  "\nroles:\n  matrix: "):
        assert block in out, block
    assert out.count("\n    layout: ") == len(REGISTRY)


def test_describe_traits_of_an_undeclared_operator():
    spec = REGISTRY["gelu"].__class__("x", (), None, "s")
    assert describe_traits(spec) == "layout: none declared (under --tp: inputs assumed whole, with a warning)"


@pytest.fixture
def silu_unlaid():
    """``silu`` as if it declared no layout (restored afterwards)."""
    from dataclasses import replace

    spec = REGISTRY["silu"]
    REGISTRY._specs["silu"] = replace(spec, layout=None)
    try:
        yield
    finally:
        REGISTRY._specs["silu"] = spec


def test_a_bundled_model_warns_under_tp_for_inference_and_training(silu_unlaid, capsys):
    # LLaMA's SwiGLU: silu(gate_proj(x)) · up_proj(x); silu needing its input whole keeps gate_proj
    # replicated; the product takes up_proj's split (the whole operand sliced locally): down_proj row-parallel
    graph = costgraph.load("llama").graph
    tp = tensor_parallel(graph, 2)
    assert tp.warnings == [
        "operator 'silu' (layers/layer/mlp/silu) declares no tensor-parallel layout: it was assumed to need its "
        "inputs whole (the linears before it kept replicated) and its output replicated; declare layout= "
        "in its @op (see `costgraph ops`)"]
    assert tp.replicated == {"layers/layer/mlp/gate_proj"}
    assert ("layers/layer/mlp/up_proj" in tp.column, "layers/layer/mlp/down_proj" in tp.row) == (True, True)
    assert cli.main(["infer", "llama", "--config", "llama-2-7b", "--hardware", "h100-sxm", "--prompt", "128",
                     "--generate", "16", "--tp", "2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == tp.warnings
    assert cli.main(["train", "llama", "--config", "llama-2-7b", "--tp", "2", "--gpus", "2"]) == 0
    assert f"\nwarning: {tp.warnings[0]}\n" in capsys.readouterr().out


# --- elementwise activations follow the tensor-parallel split (new-user trial) ---------------------------------------

def test_elementwise_activations_follow_the_tensor_parallel_split():
    # Nemotron's MLP is up_proj → relu2 → down_proj (no gate): with t = 2 Megatron splits up_proj by
    # columns and down_proj by rows, so a layer's MLP weights halve: 2·(2 h i)/2 bytes in bf16 = 2 h i.
    # Before relu2 followed its input's split, the MLP was kept whole (4 h i).
    import sympy

    import costgraph
    from costgraph.engine.symbols import dim

    m = costgraph.load("nemotron")
    one = m.train(t=1, scope="layer").stages[0].memory["weights"]
    two = m.train(t=2, scope="layer").stages[0].memory["weights"]
    h, i = dim("h"), dim("i")
    assert sympy.expand(one).coeff(h * i) == 4 and sympy.expand(two).coeff(h * i) == 2


def test_the_names_read_from_the_text_are_the_declared_operators():
    # `name in REGISTRY` before the rules are imported reads the @op("name", ...) lines of the rule modules
    # (registry.declared_names: a cold derive skips the ast walk); they are exactly the operators the rules
    # declare once imported, and those catalogue() reads with Python's parser
    from costgraph.ops.registry import REGISTRY, _declared, declared_names

    names = declared_names()
    assert names == {s.name for s in _declared()}
    REGISTRY.load()
    assert names == set(REGISTRY)
