"""Activation memory per device under TP, SP, selective and full recomputation
and flash attention, derived from the graph (issue 7, items 3 and 4).

Source: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", Table 2 (activation memory per Transformer layer, bytes,
16-bit activations and 1-byte dropout masks) — all six rows, symbolically — and
their Table 3 configurations (s = 2048, t = 8, micro-batch 1).
"""

import pytest
import sympy

import costgraph
from costgraph.engine.activations import activation_bytes, attention_cores
from costgraph.parallel.tensor import tensor_parallel
from costgraph.engine.precision import precision
from costgraph.engine.symbols import dim
from costgraph.engine.totals import breakdown, resolve_scope
from costgraph.engine.totals import resolve_scope
import json
from costgraph.cli import main

b, s, h, a, t = (dim(n) for n in ("b", "s", "h", "a", "t"))

TABLE_2 = {   # row: (settings, bytes per layer)
    "no parallelism": (dict(), s * b * h * (34 + 5 * a * s / h)),
    "tensor parallel (baseline)": (dict(t=t), s * b * h * (10 + 24 / t + 5 * a * s / (h * t))),
    "tensor + sequence parallel": (dict(t=t, sp=True), s * b * h * (34 / t + 5 * a * s / (h * t))),
    "tensor parallel + selective recompute": (dict(t=t, recompute="selective"), s * b * h * (10 + 24 / t)),
    "tensor + sequence parallel + selective recompute": (dict(t=t, sp=True, recompute="selective"),
                                                         s * b * h * 34 / t),
    "full activation recompute": (dict(recompute="full"), 2 * s * b * h),
}

# Table 3: (heads, hidden, layers); t = 8, s = 2048; b = 1
TABLE_3 = {"22B": (64, 6144, 48), "175B": (96, 12288, 96), "530B": (128, 20480, 105), "1T": (160, 25600, 128)}


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


@pytest.mark.parametrize("row", TABLE_2)
def test_korthikanti_table_2(gpt, row):
    settings, want = TABLE_2[row]
    got = activation_bytes(gpt.graph, resolve_scope(gpt.graph, "layer"), precision("bf16"), **settings)
    assert sympy.expand(got - want) == 0
    for name, (heads, hidden, layers) in TABLE_3.items():
        vals = {a: heads, h: hidden, s: 2048, b: 1, t: 8}
        assert got.xreplace(vals) == want.xreplace(vals)
        assert got.xreplace(vals).is_integer


def test_table_3_numbers_gpt3_175b(gpt):
    # GPT-3 175B, t = 8, s = 2048, b = 1: TP + SP + selective keeps 34 s b h / t per layer
    # = 34 · 2048 · 12288 / 8 = 106,954,752 bytes; × 96 layers = 10,267,656,192 bytes
    got = activation_bytes(gpt.graph, resolve_scope(gpt.graph, "layers"), precision("bf16"), t=8, sp=True,
                           recompute="selective")
    assert got.xreplace({s: 2048, b: 1, h: 12288, a: 96}) == 106_954_752
    assert 96 * 106_954_752 == 10_267_656_192


def test_full_recompute_at_model_scope_adds_one_live_layer(gpt):
    # each of the l layers keeps its input (2 s b h); one layer's activations (34 s b h + 5 a s^2 b)
    # are live again while it is recomputed; outside the layers: 5 b s h + 8 b s + 8 s (see README)
    l = dim("l")
    got = activation_bytes(gpt.graph, resolve_scope(gpt.graph, "model"), precision("bf16"), recompute="full")
    want = 2 * s * b * h * l + (34 * s * b * h + 5 * a * s**2 * b) + 5 * b * s * h + 8 * b * s + 8 * s
    assert sympy.expand(got - want) == 0


def test_flash_attention_keeps_no_square_and_an_fp32_logsumexp_per_row(gpt):
    # no s×s tensor (5 a s² b gone); 4 bytes per (b, head, query) row: 4 b a s
    got = activation_bytes(gpt.graph, resolve_scope(gpt.graph, "layer"), precision("bf16"), attention="flash")
    assert sympy.expand(got - (34 * s * b * h + 4 * b * a * s)) == 0


def test_tp_layout_is_derived_from_the_graph():
    # GPT: Megatron's layout (Shoeybi et al. 2019 Fig. 3): c_attn, c_fc column-parallel,
    # both c_proj row-parallel, the word embedding vocabulary-parallel, positions replicated
    g = costgraph.load("gpt").graph
    tp = tensor_parallel(g, t)
    assert tp.column == ["layers/attn/c_attn", "layers/mlp/c_fc", "lm_head"]
    assert tp.row == ["layers/attn/c_proj", "layers/mlp/c_proj"]
    assert tp.vocab == ["wte"] and "wpe/weight" not in tp.weights
    assert tp.weight_divisor("layers/attn/c_proj/bias") == 1 and tp.weight_divisor("layers/attn/c_attn/bias") == t
    # DeepSeek-V3's MLA: the down-projections feed norms, so they stay whole (as Megatron's MLA);
    # the up-projections are column-parallel; the MoE router feeds a softmax: replicated
    ds = tensor_parallel(costgraph.load("deepseek_v3").graph, t)
    assert {"moe_layers/self_attn/q_a_proj", "moe_layers/self_attn/kv_a_proj_with_mqa",
            "moe_layers/mlp/routed/gate"} <= ds.replicated
    assert {"moe_layers/self_attn/q_b_proj", "moe_layers/self_attn/kv_b_proj"} <= set(ds.column)
    assert "moe_layers/self_attn/o_proj" in ds.row


def test_every_bundled_model_gets_a_layout():
    from costgraph.language.resources import bundled_model_names
    for name in bundled_model_names():
        g = costgraph.load(name).graph
        tp = tensor_parallel(g, t, sp=True)
        # Mamba has no attention; its out_proj stays whole (parallel/tensor.py has no rule that
        # splits conv1d or selective_scan per channel, so their inputs are gathered)
        attention = any(d["kind"] == "matmul" for _, d in g.ops())
        assert tp.column and (tp.row or not attention), name
        assert len(attention_cores(g)) >= int(attention), name


def test_the_language_can_keep_a_linear_whole():
    # `tp = false` on a linear: replicated under TP, its output whole (no other count changes)
    src = '''
    model m {
      dim b
      dim s
      dim h
      input x[b, s, h]
      y = linear(linear(x, 4 * h, name = up, tp = false), h, name = down)
      return y
    }
    '''
    g = costgraph.loads(src).graph
    tp = tensor_parallel(g, t)
    # up stays whole, so down reads a whole tensor: column-parallel (its output, the model's, split)
    assert tp.column == ["down"] and tp.row == [] and "up/weight" not in tp.weights
    g2 = costgraph.loads(src.replace(", tp = false", "")).graph
    tp2 = tensor_parallel(g2, t)
    assert tp2.column == ["up"] and tp2.row == ["down"]
    assert costgraph.loads(src).costs().params == costgraph.loads(src.replace(", tp = false", "")).costs().params


# --- Llama (GQA, SwiGLU): what fused kernels keep --------------------------------------------

@pytest.fixture(scope="module")
def llama():
    return costgraph.load("llama")


def _llama_layer(model, **kw):
    return activation_bytes(model.graph, resolve_scope(model.graph, "layer"), precision("bf16"), **kw)


def test_flash_attention_keeps_k_and_v_with_their_grouped_heads(llama):
    # FlashAttention 2+ (flash_attn_func: k, v of nheads_k heads; Dao 2023 §3) and TE's
    # DotProductAttention(num_gqa_groups) read K and V unexpanded: repeat_kv's copy is never
    # made, so what the core keeps of K and V is 2 b s kv d bytes each, not 2 b s a d.
    # Eager attention (the HF code) materializes repeat_kv and keeps the expanded copies.
    kv, d, i = dim("kv"), dim("d"), dim("i")
    eager = _llama_layer(llama)
    flash = _llama_layer(llama, attention="flash")
    # the layer under flash, term by term (korthikanti profile, bf16, no TP):
    #   two RMSNorm inputs 2 b s h each, q_proj/gate_proj inputs 2 b s h each (k/v/up share them),
    #   Q 2 b s a d, K and V 2 b s kv d each, the attention output 2 b s a d (o_proj's input),
    #   the fp32 log-sum-exp 4 b a s, SwiGLU 6 b s i (Megatron's fused unit: gate and up outputs
    #   4 b s i, down_proj's input 2 b s i)
    want = 8 * b * s * h + 4 * b * s * a * d + 4 * b * s * kv * d + 4 * b * a * s + 6 * b * s * i
    assert sympy.expand(flash - want) == 0
    # eager keeps the expanded K (QKᵀ's operand) and V (scores·V's operand) at a heads
    assert sympy.expand(eager - flash).coeff(b * s * a * d) == 4


def test_fused_swiglu_keeps_the_gate_input_not_the_activation_output(llama):
    # Megatron-LM @ d98e8a64 megatron/core/fusions/fused_bias_swiglu.py::SwiGLUFunction.forward
    # saves only its input (the fc1 output, gate and up: 4 b s i bytes) and recomputes silu;
    # PyTorch autograd on HF's act(gate) * up keeps silu's input, and both operands of the
    # product: 6 b s i, plus down_proj's input 2 b s i in both.
    i = dim("i")
    pytorch = costgraph.load("llama", profile="pytorch")
    swiglu = {}
    for name, m in (("korthikanti", llama), ("pytorch", pytorch)):
        rows = {r["path"]: r["activation_bytes"] for r in
                breakdown(m.graph, resolve_scope(m.graph, "layer"), "matmul", precision("bf16"), leaves_only=True)}
        swiglu[name] = sympy.expand(sum(v for p, v in rows.items() if "mlp/" in p and "proj" not in p))
    assert swiglu["korthikanti"] == 4 * b * s * i   # silu keeps gate (2), the product keeps up (2)
    assert swiglu["pytorch"] == 6 * b * s * i       # silu keeps gate, the product keeps silu(gate) and up


# --- a shared storage charged whole to its home row (a new user's README run) ----------------------------------------

def test_shared_storage_is_charged_whole_to_its_home_row(capsys):
    # T5's encoder output is one storage kept by every decoder layer's cross-attention.
    # It used to be spread as 1/l_dec per decoder row (value_rational "262144/3"); now it is
    # one row of kind 'storage' at model level, whole: 2 b s h bytes = 2 * 1 * 512 * 512 (t5-small)
    assert main(["derive", "t5", "--config", "t5-small", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = doc["breakdown"]["saved:encoder_final_dropout:0"]
    assert row["type"] == "storage" and row["count"] == "1"
    assert row["quantities"]["activation_bytes"]["value"] == 2 * 1 * 512 * 512
    assert "value_rational" not in json.dumps(doc)
    assert doc["breakdown"]["decoder/cross_attention/k"]["quantities"]["activation_bytes"]["value"] == 0
    assert doc["breakdown"]["decoder/cross_attention/k"]["type"] == "op"
    assert doc["breakdown"]["decoder"]["type"] == "repeat"
    assert doc["breakdown"]["decoder/cross_attention"]["type"] == "block"
