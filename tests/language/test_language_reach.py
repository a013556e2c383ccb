"""The language reach that hand-written files missed (issue 28 item 3, item 4's first bullet).

Each construct is checked on a small model written here, with the count PyTorch (or transformers)
gives written out beside it and its source named; and every model file shown in docs/language.md
builds. Cheap: no torch (the torch tier of these constructs is tests/models/test_torch_agreement.py,
tests/models/test_hybrids_torch.py and tests/models/test_attn_variants.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.engine.symbols import dim
from costgraph.errors import CostgraphError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "language.md"


def _values(model, **values):
    return model.costs().evaluate(**values)


# ------------------------------------------------------------------ a padded causal convolution

CONV = """
model conv_demo {
  dim b "sequences"
  dim s "tokens"
  dim c "channels"
  dim K "kernel width"
  option padded = true
  input x[b, s, c]
  return silu(conv1d(x, K, padded = padded, name = conv1d))
}
"""


@pytest.fixture(scope="module")
def conv():
    # x as the layer inside Mamba receives it: an activation that needs its gradient (requires_grad=True)
    return costgraph.loads(CONV, input_grads=True), costgraph.loads(CONV, options={"padded": False}, input_grads=True)


def test_padded_conv1d_counts_the_positions_pytorch_computes(conv):
    padded, kernel = conv
    b, s, c, K = (dim(x) for x in "b s c K".split())
    # transformers 5.24 modeling_mamba.py causal_conv1d_fn: F.conv1d(x, w, padding = K − 1, groups = C)[..., :S]
    # computes S + K − 1 positions; torch.utils.flop_counter conv_flop_count: 2·B·C_out·(C_in/groups)·K per
    # output position, as much for each gradient
    f, every = padded.costs(), padded.costs(convention="all")
    assert sympy.expand(f.flops_forward - 2 * b * (s + K - 1) * c * K) == 0
    assert sympy.expand(f.flops_backward - 4 * b * (s + K - 1) * c * K) == 0
    # the kernel (padded = false) computes the S positions it outputs
    assert sympy.expand(kernel.costs().flops_forward - 2 * b * s * c * K) == 0
    # the bias add per computed position (under `all`), beside SiLU's count
    silu = every.flops_forward - f.flops_forward - b * (s + K - 1) * c
    assert sympy.expand(silu - (kernel.costs(convention="all").flops_forward - kernel.costs().flops_forward
                                - b * s * c)) == 0


def test_padded_conv1d_output_keeps_the_padded_storage(conv):
    padded, kernel = conv
    v = dict(b=2, s=16, c=8, K=4)
    # SiluBackward0 keeps the conv output, a view of the [b, c, s + K − 1] result: bf16, 2 bytes an element,
    # + the conv's input x [b, s, c] (ConvolutionBackward0)
    assert _values(padded, **v)["activation_bytes"] == 2 * 2 * 8 * (16 + 3) + 2 * 2 * 16 * 8
    assert _values(kernel, **v)["activation_bytes"] == 2 * 2 * 16 * 8 * 2


def test_bundled_mamba_equals_flopcountermode_at_128_tokens():
    # `FlopCounterMode` on transformers 5.24 MambaForCausalLM (state-spaces/mamba-130m-hf config, meta, b = 1,
    # s = 128): 33,026,310,144 forward FLOPs (issue 28; tests/models/test_torch_agreement.py measures the tiny config)
    m = costgraph.load("mamba")
    assert m.costs().evaluate(config="mamba-130m", s=128)["flops_forward"] == 33_026_310_144
    kernel = costgraph.load("mamba", options={"conv_padded": False})
    # 24 mixers × 2·(K − 1)·D·K fewer: the causal_conv1d kernel's S positions
    assert kernel.costs().evaluate(config="mamba-130m", s=128)["flops_forward"] == \
        33_026_310_144 - 24 * 2 * 3 * 1536 * 4


def test_inference_counts_the_kernel_positions():
    from costgraph.inference import Inference, load as load_for_inference
    m = load_for_inference("mamba")
    inf = Inference(m)
    v = {**m.values("mamba-130m"), inf.b: 1}
    # a decoded token: causal_conv1d_update computes one position, 2·D·K per block, whatever conv_padded
    per_token = 24 * (2 * 768 * 2 * 1536 + 2 * 1536 * 4 + 2 * 1536 * (48 + 32) + 2 * 48 * 1536 + 2 * 1536 * 16
                      + 2 * 1536 * 768) + 2 * 768 * 50280
    assert inf.decode().flops.xreplace(v) == per_token


# ------------------------------------------------------------------ the docs' examples build

def _doc_models() -> list[str]:
    text = DOCS.read_text()
    return [b for b in re.findall(r"```\n(.*?)```", text, re.S)
            if b.lstrip().startswith(("model ", "block ")) and "\nmodel " in "\n" + b]


@pytest.mark.parametrize("i", range(len(_doc_models())))
def test_docs_models_build(i):
    try:
        costgraph.loads(_doc_models()[i], path=str(DOCS))
    except CostgraphError as e:   # pragma: no cover - the message names the line
        pytest.fail(f"docs/language.md model {i}: {e}")


# ------------------------------------------------------------------ a tied linear's bias

TIED = """
model tied {{
  dim b
  dim s
  dim h
  dim V
  input tokens[b, s]: index
  x = embedding(tokens, V, h, name = wte)
  q = linear(x, h{src}, name = query)
  r = linear(q, h{again}, tied = query, name = again)
  return linear(r, V{head}, tied = wte, name = lm_head)
}}
"""


def _tied(src="", again="", head=", bias = false"):
    return costgraph.loads(TIED.format(src=src, again=again, head=head))


def test_tied_linear_follows_its_sources_bias():
    h, V, b, s = (dim(x) for x in "h V b s".split())
    # DeBERTa (transformers 5.24 modeling_deberta_v2.py DisentangledSelfAttention): with share_att_key the
    # relative table goes through the same query_proj/key_proj modules: weight and bias counted once
    m = _tied()
    assert sympy.expand(m.costs().params - (V * h + h * h + h)) == 0
    # its add is counted at each call: two bias adds of b·s·h under `all`
    every, mm = m.costs(convention="all"), m.costs()
    assert sympy.expand(every.flops_forward - mm.flops_forward - 2 * b * s * h) == 0
    # a source without a bias: none to follow
    none = _tied(src=", bias = false")
    assert sympy.expand(none.costs().params - (V * h + h * h)) == 0
    assert sympy.expand(none.costs(convention="all").flops_forward - none.costs().flops_forward) == 0


def test_tied_linear_bias_written():
    h, V = dim("h"), dim("V")
    # bias = true: its own [out] (BertLMPredictionHead: decoder.weight tied, self.bias [V] its own)
    own = _tied(again=", bias = true", head=", bias = true")
    assert sympy.expand(own.costs().params - (V * h + h * h + h + h + V)) == 0
    off = _tied(again=", bias = false")
    assert sympy.expand(off.costs().params - (V * h + h * h + h)) == 0


def test_tied_to_an_embedding_must_say():
    with pytest.raises(CostgraphError) as e:
        _tied(head="")
    msg = str(e.value)
    assert msg.startswith("<string>:11:10: error: linear 'lm_head'")   # located at the head's call
    assert "tied to an embedding ('wte'), which has no bias to follow" in msg
    assert "bias = false" in msg and "bias = true" in msg


# ------------------------------------------------------------------ index lists in conditions

LISTED = """
model listed {{
  dim b
  dim s
  dim h
  dim l
  input x[b, s, h]
  repeat l as layers[j] {{
    if {cond} {{
      x = x + linear(x, h, name = special)
    }} else {{
      x = x + linear(x, h, bias = false, name = plain)
    }}
  }}
  return x
}}
"""


@pytest.mark.parametrize("cond, listed", [
    ("j in [2, 5, 8, 10]", lambda j, l: j in (2, 5, 8, 10)),
    ("j not in [2, 5, 8, 10]", lambda j, l: j not in (2, 5, 8, 10)),
    ("j in [10, 2, 2, 5]", lambda j, l: j in (2, 5, 10)),              # order and repeats do not matter
    ("j in [0, l - 1]", lambda j, l: j in (0, l - 1)),                  # dimensions: may coincide (l = 1)
    ("j % 4 in [1, 3]", lambda j, l: j % 4 in (1, 3)),
    ("j in [1, 3] or j % 6 == 5", lambda j, l: j in (1, 3) or j % 6 == 5),
    ("not (j in [0, 4]) and j < 7", lambda j, l: j not in (0, 4) and j < 7),
])
def test_index_lists_count_the_listed_layers(cond, listed):
    m = costgraph.loads(LISTED.format(cond=cond))
    params = m.costs().params
    h, l = dim("h"), dim("l")
    # one bias [h] per layer that takes the branch: the exact count, written out layer by layer
    for n in range(1, 15):
        assert params.xreplace({h: 1, l: n}) - n == sum(1 for j in range(n) if listed(j, n)), (cond, n)
    # built once per branch, not unrolled
    assert sum(1 for p in m.graph.nodes if p.endswith(("special", "plain"))) == 2


def test_index_list_of_distinct_numbers_is_a_sum():
    m = costgraph.loads(LISTED.format(cond="j in [2, 5, 8, 10]"))
    h, l = dim("h"), dim("l")
    # distinct listed layers add up: no inclusion-exclusion terms
    expected = h * l * h + h * sum(sympy.Max(0, sympy.Min(v + 1, l) - v) for v in (2, 5, 8, 10))
    assert sympy.simplify(m.costs().params - expected) == 0


@pytest.mark.parametrize("cond, fragment", [
    ("j in [2, h / 3]", "not provably a whole number"),
    ("h in [2, 3]", "'in' tests a repeat's index"),
    ("j % 4 in [1, h]", "not whole numbers"),
])
def test_index_list_refusals_are_located(cond, fragment):
    with pytest.raises(CostgraphError) as e:
        costgraph.loads(LISTED.format(cond=cond))
    assert fragment in str(e.value) and str(e.value).startswith("<string>:")


def test_in_is_a_keyword_in_syntax_errors():
    with pytest.raises(CostgraphError) as e:
        costgraph.loads(LISTED.format(cond="j in 2, 5]"))
    assert "expected '['" in str(e.value)


# ------------------------------------------------------------------ strided lengths: floor

W2V = """
model feature_encoder {
  dim b
  dim L
  dim c
  input audio[b, 1, L]
  x = gelu(dense_conv1d(audio, c, kernel = 10, stride = 5, bias = false, name = conv0))
  x = gelu(dense_conv1d(x, c, kernel = 3, stride = 2, bias = false, name = conv1))
  x = gelu(dense_conv1d(x, c, kernel = 3, stride = 2, bias = false, name = conv2))
  return gelu(dense_conv1d(x, c, kernel = 2, stride = 2, bias = false, name = conv3))
}
"""
W2V_LAYERS = ((10, 5), (3, 2), (3, 2), (2, 2))   # wav2vec2-base's conv_kernel / conv_stride, first four


def _w2v_forward(b, L, c) -> int:
    """Forward FLOPs of the stack as torch.utils.flop_counter counts Conv1d: 2·b·c_out·c_in·k per output
    position; the length after each layer floor((n − k)/stride) + 1 (torch.nn.Conv1d, padding 0)."""
    total, n, cin = 0, L, 1
    for k, stride in W2V_LAYERS:
        n = (n - k) // stride + 1
        total += 2 * b * c * cin * k * n
        cin = c
    return total


@pytest.fixture(scope="module")
def w2v():
    return costgraph.loads(W2V)


@pytest.mark.parametrize("L", [16000, 16001, 16003, 400, 12345])
def test_strided_lengths_round_down(w2v, L):
    got = w2v.costs().evaluate(b=2, L=L, c=8)
    assert got["flops_forward"] == _w2v_forward(2, L, 8)


def test_strided_lengths_print_floors(w2v):
    L = dim("L")
    out = w2v.graph.tensors[w2v.graph.nodes["conv0"]["outputs"][0]].shape[-1]
    assert out == sympy.floor(L / 5) - 1            # floor((L − 10)/5) + 1


def test_strided_lengths_equal_flopcountermode(w2v):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    c = 8
    layers, cin = [], 1
    for k, stride in W2V_LAYERS:
        layers += [torch.nn.Conv1d(cin, c, k, stride, bias=False), torch.nn.GELU()]
        cin = c
    net = torch.nn.Sequential(*layers)
    for L in (16001, 12345):
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            net(torch.zeros(2, 1, L))
        assert counter.get_total_flops() == w2v.costs().evaluate(b=2, L=L, c=c)["flops_forward"]


# ------------------------------------------------------------------ closed forms read simply

EVEN = """
model even {
  dim b
  dim s
  dim h
  dim l
  input x[b, s, h]
  repeat l as layers[i] {
    if i % 2 == 0 {
      x = x + linear(x, h, name = even)
    }
  }
  return x
}
"""


def test_a_layer_pattern_prints_by_the_layers_that_take_it():
    from costgraph.export.printing import to_latex, to_text
    c = costgraph.loads(EVEN).costs()
    # i % 2 == 0 holds for floor((l + 1)/2) of 0 … l − 1 (language/patterns.py); weight h² + bias h each
    assert to_text(c.grouped("params")) == "(h^2 + h) floor((l + 1)/2)"
    assert to_text(c.grouped("flops_forward")) == "2 b s h^2 floor((l + 1)/2)"
    assert to_latex(c.grouped("params")) == \
        r"\left(h^{2} + h\right) \left\lfloor{\frac{l + 1}{2}}\right\rfloor"
    # the same value
    h, l = dim("h"), dim("l")
    assert sympy.expand(c.grouped("params") - (h**2 + h) * sympy.floor((l + 1) / 2)) == 0


def test_uniform_and_pattern_terms_apart():
    from costgraph.export.printing import to_text
    c = costgraph.load("gemma3_text").costs()
    text = to_text(c.grouped("flops_forward"))
    # every layer's terms by l, the global layers' difference by floor(l/6): no `/l` left
    assert "/l" not in text and "floor(l/6)" in text and text.startswith("l (")
    assert sympy.expand(c.grouped("flops_forward") - c["flops_forward"]) == 0


# ------------------------------------------------------------------ buffers

ROUTER = """
model router_demo {
  dim b
  dim s
  dim h
  dim E
  input x[b, s, h]
  param e_score_correction_bias[E]: buffer(fp32)
  return linear(x, E, bias = false, name = gate)
}
"""


def test_a_buffer_is_not_a_parameter_but_takes_memory():
    from costgraph.engine.totals import buffers
    from costgraph.inference import Inference, load as load_for_inference  # noqa: F401
    from costgraph.training import model_states
    m = costgraph.loads(ROUTER)
    h, E = dim("h"), dim("E")
    assert sympy.expand(m.costs().params - h * E) == 0          # model.parameters(): the gate's weight only
    assert buffers(m.graph) == {"e_score_correction_bias/weight": (E, "fp32")}
    # training: weights' bytes include it (fp32: 4 bytes), no gradient or optimizer state for it
    st = model_states(m.graph, policy="mixed", optimizer="adam", zero=0, dp=1)
    assert sympy.expand(st["weights"] - (2 * h * E + 4 * E)) == 0
    assert sympy.expand(st["gradients"] - 2 * h * E) == 0


def test_deepseek_v3_counts_as_transformers():
    # transformers 5.24 DeepseekV3ForCausalLM: sum(numel of parameters()) on meta; the 58 MoE layers'
    # e_score_correction_bias [256] are nn.Buffer (modeling_deepseek_v3.py DeepseekV3TopkRouter)
    m = costgraph.load("deepseek_v3")
    assert m.costs().evaluate(config="deepseek-v3")["params"] == 671_026_419_200 - 58 * 256 == 671_026_404_352


def test_derive_lists_buffers(capsys):
    from costgraph.cli import main
    assert main(["derive", "deepseek_v3", "--config", "deepseek-v3"]) == 0
    out = capsys.readouterr().out
    assert "buffers, not parameters (as transformers counts them): e_score_correction_bias l E - E k_d " \
           "elements (fp32) = 14,848 elements, 59,392 bytes" in out


@pytest.mark.parametrize("mark, fragment", [(": buffer(int8)", "a dtype follows 'buffer' only"),
                                            (": frozen(fp32)", "a dtype follows 'buffer' only"),
                                            (": bufer", "unknown parameter mark 'bufer'")])
def test_buffer_marks_refused_with_a_hint(mark, fragment):
    with pytest.raises(CostgraphError) as e:
        costgraph.loads(ROUTER.replace(": buffer(fp32)", mark))
    assert fragment in str(e.value) and str(e.value).startswith("<string>:8:")


# ------------------------------------------------------------------ a weight multiplied across the batch

SHARED_W = """
model shared_weight {
  dim b
  dim s
  dim h
  dim d
  input x[b, s, h]
  param w[h, d]
  return matmul(x, w)
}
"""


def test_a_parameter_broadcast_over_the_batch():
    m = costgraph.loads(SHARED_W)
    b, s, h, d = (dim(x) for x in "b s h d".split())
    c = m.costs()
    # torch.matmul([b, s, h], [h, d]): 2·b·s·h·d forward; dX and dW (summed over b·s rows) as much each
    assert sympy.expand(c.params - h * d) == 0
    assert sympy.expand(c.flops_forward - 2 * b * s * h * d) == 0
    assert sympy.expand(c.flops_backward_input - 2 * b * s * h * d) == 0
    assert sympy.expand(c.flops_backward_weight - 2 * b * s * h * d) == 0
    # frozen: no weight gradient
    frozen = costgraph.loads(SHARED_W.replace("param w[h, d]", "param w[h, d]: frozen"))
    assert frozen.costs().flops_backward_weight == 0


def test_a_parameter_broadcast_equals_flopcountermode():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    v = dict(b=2, s=5, h=8, d=3)
    x = torch.zeros(2, 5, 8, requires_grad=True)
    w = torch.nn.Parameter(torch.zeros(8, 3))
    counter = FlopCounterMode(display=False)
    with counter:
        torch.matmul(x, w).sum().backward()
    got = costgraph.loads(SHARED_W).costs().evaluate(**v)
    assert counter.get_total_flops() == got["flops_forward"] + got["flops_backward"]


def test_batch_axes_that_do_not_broadcast_are_refused():
    with pytest.raises(CostgraphError, match="matmul batch dimensions differ"):
        costgraph.loads(SHARED_W.replace("param w[h, d]", "param w[s, h, d]").replace("x[b, s, h]", "x[b, h, s, h]"))


# ------------------------------------------------------------------ one module called from several places

SHARED_BLOCK = """
block mlp(x[B, S, H], w) {
  return linear(gelu(linear(x, w, name = up)), H, name = down)
}
model zamba_like {
  dim b
  dim s
  dim h
  dim l
  input x[b, s, h]
  x = x + mlp(x, 4 * h, name = shared_block)
  repeat l as layers {
    x = x + linear(x, h, name = own)
    x = x + mlp(x, CALL, name = again)
  }
  return x
}
"""


def test_a_shared_block_counts_weights_once_and_compute_per_call():
    # Zamba2 (transformers 5.24 modeling_zamba2.py): one Zamba2AttentionDecoderLayer module called from
    # several hybrid layers; model.parameters() holds it once, each call runs its products
    m = costgraph.loads(SHARED_BLOCK.replace("CALL", "4 * h, reuse = shared_block"))
    b, s, h, l = (dim(x) for x in "b s h l".split())
    c = m.costs()
    assert sympy.expand(c.params - (8 * h**2 + 5 * h + l * (h**2 + h))) == 0
    assert sympy.expand(c.flops_forward - (16 * b * s * h**2 * (l + 1) + 2 * l * b * s * h**2)) == 0
    # activations per call: the shared block's kept tensors (x, gelu's input, down's input) each time
    own = costgraph.loads(SHARED_BLOCK.replace("CALL", "4 * h"))
    assert sympy.expand(own.costs().activation_bytes - c.activation_bytes) == 0
    assert sympy.expand(own.costs().params - c.params - l * (8 * h**2 + 5 * h)) == 0


SHARED_ADAPTED = """
block mlp(x[B, S, H], w, r) {
  y = linear(x, w, name = up) + linear(linear(x, r, bias = false, name = a, own = OWN), w, bias = false, name = b,
                                       own = OWN)
  return linear(gelu(y), H, name = down)
}
model zamba2_like {
  dim b
  dim s
  dim h
  dim l
  dim r
  input x[b, s, h]
  x = x + mlp(x, 4 * h, r, name = shared_block)
  repeat l as layers {
    x = x + mlp(x, 4 * h, r, reuse = shared_block, name = again)
  }
  return x
}
"""


def test_own_weights_inside_a_shared_block_are_each_calls():
    # Zamba2 (transformers 5.24 modeling_zamba2.py Zamba2MLP.forward): the shared block's gate_up_proj plus
    # gate_up_proj_adapter_list[layer](x), an adapter (Linear(h, r), Linear(r, 2i), no bias) of each call's own:
    # own = true builds them per call (l + 1 adapters), the rest once; FLOPs per call either way
    b, s, h, l, r = (dim(x) for x in "b s h l r".split())
    own, shared = (costgraph.loads(SHARED_ADAPTED.replace("OWN", v)).costs() for v in ("true", "false"))
    block = 8 * h**2 + 5 * h                 # up [h, 4h] + 4h and down [4h, h] + h
    adapter = h * r + r * 4 * h
    assert sympy.expand(own.params - (block + (l + 1) * adapter)) == 0
    assert sympy.expand(shared.params - (block + adapter)) == 0
    assert sympy.expand(own.flops_forward - shared.flops_forward) == 0
    assert sympy.expand(own.flops_forward - (l + 1) * (16 * b * s * h**2 + 2 * b * s * (h * r + r * 4 * h))) == 0


@pytest.mark.parametrize("call, fragment", [
    ("4 * h, reuse = nowhere", "no block instance named 'nowhere'"),
    ("2 * h, reuse = shared_block", "this call needs"),
])
def test_shared_block_refusals(call, fragment):
    with pytest.raises(CostgraphError) as e:
        costgraph.loads(SHARED_BLOCK.replace("CALL", call))
    assert fragment in str(e.value)


ONE_GROUP = """
model one_group {
  dim b
  dim s
  dim h
  input x[b, s, h]
  repeat 1 as layers {
    x = x + linear(x, h, name = proj)
  }
  return linear(x, h, name = out)
}
"""


def test_a_group_of_one_instance_prints_without_a_count():
    # session 45 trial: ALBERT's shared layer (num_hidden_groups 1) printed as "1 (4 h^2 + 2 h i + ...)" beside
    # its other terms: a count of 1 is no count, its terms join the rest (like terms merged)
    from costgraph.export.printing import to_text
    c = costgraph.loads(ONE_GROUP).costs()
    assert to_text(c.grouped("params")) == "2 h^2 + 2 h"
    assert to_text(c.grouped("flops_forward")) == "4 b s h^2"
    assert sympy.expand(c.grouped("params") - c["params"]) == 0
