"""Hugging Face families qwen2_moe and gemma3_text: their released config.json
files (examples/hf/, provenance in SOURCES.md) and bundled model files give
transformers' parameter counts; Gemma 3's 5:1 local/global layer pattern is
compiled, not unrolled; the mapping's layer_types rule and rotary tables
shared per layer kind."""

from __future__ import annotations

from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphError
from costgraph.engine.symbols import dim

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"

# sum(p.numel() for p in model.parameters()) of the transformers 5.24 model built on the meta
# device from the full released config.json (tests/torch_probe.build_meta, param_count):
#   Gemma3ForCausalLM(examples/hf/gemma-3-1b-it.json)      999,885,952
#   Qwen2MoeForCausalLM(examples/hf/qwen2-57b-a14b.json)   57,408,658,944
# Active: Gemma 3 is dense; Qwen2-57B-A14B's name gives its 14B active parameters (top-8 of 64 experts,
# the shared expert, router and attention): 14,249,270,784 counted here.
RELEASED = {
    "gemma-3-1b-it.json": ("gemma3_text", "gemma-3-1b", 999_885_952, 999_885_952),
    "qwen2-57b-a14b.json": ("qwen2_moe", "qwen2-57b-a14b", 57_408_658_944, 14_249_270_784),
}


@pytest.mark.parametrize("file", sorted(RELEASED))
def test_released_config_gives_the_transformers_parameter_count(file):
    model_type, config, params, active = RELEASED[file]
    m = costgraph.load_hf_config(str(HF / file))
    assert m.model_type == model_type
    got = m.costs().evaluate(**m.values)
    assert (got["params"], got["params_active"]) == (params, active)
    # the model file's named configuration is the same model
    named = costgraph.load(model_type).costs().evaluate(config)
    assert (named["params"], named["params_active"]) == (params, active)


def test_qwen1_5_moe_a2_7b_total_and_active():
    # Qwen1.5-MoE-A2.7B: "14.3B parameters in total and 2.7B activated" (Qwen blog, 2024-03-28); exactly,
    # from its config sizes: 14,315,784,192 and 2,689,173,504
    got = costgraph.load("qwen2_moe").costs().evaluate("qwen1.5-moe-a2.7b")
    assert (got["params"], got["params_active"]) == (14_315_784_192, 2_689_173_504)


def test_qwen2_moe_params_formula():
    # per layer: Q/K/V with biases, O; router E·h; E SwiGLU experts 3 h i; shared expert 3 h i_s and its
    # gate h → 1; two RMSNorms. Plus embeddings, final norm and an untied head.
    c = costgraph.load("qwen2_moe").costs()
    h, a, kv, d, i, i_s, E, l, V = (dim(n) for n in ("h", "a", "kv", "d", "i", "i_s", "E", "l", "V"))
    layer = (h * a * d + a * d) + 2 * (h * kv * d + kv * d) + a * d * h + E * h + E * 3 * h * i \
        + 3 * h * i_s + h + 2 * h
    assert sympy.expand(c.params - (l * layer + 2 * V * h + h)) == 0


# --------------------------------------------------------------- Gemma 3's layer pattern

def test_gemma3_graph_has_one_node_per_op_per_layer_kind():
    m = costgraph.load("gemma3_text")
    layer_ops = [p for p, _ in m.graph.ops() if p.startswith("layers/")]
    kinds = {p.split("/")[1] for p in layer_ops}
    assert kinds == {"local", "global"}
    local = [p.removeprefix("layers/local/") for p in layer_ops if p.startswith("layers/local/")]
    glob = [p.removeprefix("layers/global/") for p in layer_ops if p.startswith("layers/global/")]
    assert local == glob and len(local) == len(set(local))        # one node per op and kind: 2 × 32
    assert len(layer_ops) == 2 * len(local) == 64
    l = dim("l")
    for p in layer_ops:
        want = sympy.floor(l / 6) if p.startswith("layers/global/") else l - sympy.floor(l / 6)
        assert sympy.simplify(m.graph.nodes[p]["count"] - want) == 0, p


def unrolled(n: int) -> str:
    """Gemma 3 written out layer by layer: j % 6 == 5 global, the others local."""
    calls = "".join(
        f"  x = gemma3_layer(x, a, kv, d, i, name = layer_{j})\n" if j % 6 == 5 else
        f"  x = gemma3_layer(x, a, kv, d, i, window = w, local = true, name = layer_{j})\n" for j in range(n))
    dims = "".join(f"  dim {x}\n" for x in ("b", "s", "h", "a", "kv", "d", "i", "V", "w"))
    return ('import "gemma3_text.cg"\n\nmodel g3u {\n' + dims + "  input tokens[b, s]: index\n"
            "  x = scale(embedding(tokens, V, h, name = embed_tokens), name = embed_scale)\n" + calls +
            "  x = rmsnorm(x, fp32_scale = true, name = norm)\n"
            "  return linear(x, V, bias = false, tied = embed_tokens, name = lm_head)\n}\n")


SIZES = dict(b=2, s=24, h=64, a=4, kv=2, d=16, i=96, V=101, w=16)    # s > w: the local windows bite
QUANTITIES = ("params", "params_active", "flops_forward", "flops_backward", "activation_bytes",
              "kv_cache_bytes", "kv_cache_bytes_per_token")


# l ≥ 6: with no global layer (l < 6) the global rotary table, a storage made once for the model, is
# still counted (2 · 2 s d bytes, pytorch profile) where transformers makes none; no Gemma 3 has l < 26.
@pytest.mark.parametrize("n", [7, 12, 26])
@pytest.mark.parametrize("profile,convention,causal", [("pytorch", "matmul", "full"),
                                                       ("korthikanti", "all", "half")])
def test_gemma3_totals_equal_the_hand_unrolled_model(n, profile, convention, causal):
    pattern = costgraph.load("gemma3_text", profile=profile)
    got = pattern.costs(convention=convention, causal=causal).evaluate(l=n, **SIZES)
    hand = costgraph.loads(unrolled(n), path=str(Path(__file__).resolve().parents[2] / "models" / "g3u.cg"),
                           profile=profile)
    want = hand.costs(convention=convention, causal=causal).evaluate(**SIZES)
    assert {q: got[q] for q in QUANTITIES} == {q: want[q] for q in QUANTITIES}


def test_gemma3_kv_cache_counts_windows_on_local_layers_only():
    # per sequence: global layers keep s positions, local ones Min(s, w); K and V, kv heads of d, 2 bytes
    c = costgraph.load("gemma3_text").costs()
    v = c.evaluate("gemma-3-1b", s=32768, b=1)
    glob, local = 26 // 6, 26 - 26 // 6
    assert v["kv_cache_bytes"] == 2 * 2 * 1 * 256 * (glob * 32768 + local * 512)


# --------------------------------------------------------------- the mapping

def config(**changes) -> dict:
    import json

    return dict(json.loads((HF / "gemma-3-1b-it.json").read_text()), **changes)


def test_layer_types_matching_the_pattern_are_accepted():
    types = ["full_attention" if (j + 1) % 6 == 0 else "sliding_attention" for j in range(26)]
    m = costgraph.from_hf_config(config(layer_types=types))
    assert m.costs().evaluate(**m.values)["params"] == 999_885_952


@pytest.mark.parametrize("changes,fragment", [
    (dict(layer_types=["sliding_attention", "full_attention"] * 13), "repeated over the 26 layers"),
    (dict(layer_types=["full_attention" if (j + 1) % 6 == 0 else "sliding_attention" for j in range(25)]),
     "repeated over the 26 layers"),
    (dict(sliding_window_pattern=4), "sliding_window_pattern = 4"),
    (dict(use_bidirectional_attention=True), "use_bidirectional_attention"),
    (dict(hidden_activation="silu"), "hidden_activation"),
])
def test_gemma3_variants_are_refused_by_name(changes, fragment):
    with pytest.raises(CostgraphError) as info:
        costgraph.from_hf_config(config(**changes), source="g.json")
    text = str(info.value)
    assert fragment in text and "gemma3_text" in text and "g.json: " in text


def test_gemma3_final_softcap_option_follows_the_config():
    m = costgraph.from_hf_config(config(final_logit_softcapping=30.0), profile="pytorch")
    plain = costgraph.from_hf_config(config(), profile="pytorch")
    assert m.model.graph.options["final_softcap"] and not plain.model.graph.options["final_softcap"]
    values = dict(m.values, b=2, s=64)
    # the tanh output [b, s, V] in bf16 is the one extra tensor kept
    assert (m.costs().evaluate(**values)["activation_bytes"]
            - plain.costs().evaluate(**values)["activation_bytes"]) == 2 * 2 * 64 * 262144


@pytest.mark.parametrize("changes,fragment", [
    (dict(decoder_sparse_step=2), "decoder_sparse_step = 2"),
    (dict(mlp_only_layers=[0]), "mlp_only_layers"),
    (dict(use_sliding_window=True), "use_sliding_window"),
    (dict(layer_types=["full_attention", "sliding_attention"] * 14), "layer_types"),
])
def test_qwen2_moe_variants_are_refused_by_name(changes, fragment):
    import json

    cfg = dict(json.loads((HF / "qwen2-57b-a14b.json").read_text()), **changes)
    with pytest.raises(CostgraphError) as info:
        costgraph.from_hf_config(cfg, source="q.json")
    assert fragment in str(info.value) and "qwen2_moe" in str(info.value)


def test_qwen2_moe_qkv_bias_key():
    import json

    cfg = json.loads((HF / "qwen2-57b-a14b.json").read_text())
    with_bias = costgraph.from_hf_config(cfg)
    without = costgraph.from_hf_config(dict(cfg, qkv_bias=False))
    h, a, kv, d, l = 3584, 28, 4, 128, 28
    assert (with_bias.costs().evaluate(**with_bias.values)["params"]
            - without.costs().evaluate(**without.values)["params"]) == l * (a * d + 2 * kv * d)


# --------------------------------------------------------------- rotary tables shared by name

ROPE = """model m {
  dim b
  dim s
  dim h
  input x[b, s, h]
  BODY
}
"""


@pytest.mark.parametrize("body,pairs", [
    ("return rope(x) + rope(x)", 1),
    ("return rope(x, table = local) + rope(x, table = local)", 1),
    ("return rope(x, table = local) + rope(x, table = global)", 2),
    ("return rope(x) + rope(x, table = global)", 2),
    ("return rope(x, table = own) + rope(x, table = own)", 2),
])
def test_named_rotary_tables_are_one_pair_per_name(body, pairs):
    m = costgraph.loads(ROPE.replace("BODY", body), profile="pytorch", input_grads=True)   # x as a layer receives it
    # each pair: cos and sin [1, s, h] in the compute dtype (2 bytes)
    assert m.costs().evaluate(b=3, s=5, h=8)["activation_bytes"] == pairs * 2 * 2 * 5 * 8
