"""Issue 19, positions and attention: ALiBi (BLOOM, MPT) and NoPE layers (SmolLM3).

What the PyTorch tier (tests/models/test_torch_agreement.py: parameters, FLOPs and saved
bytes exactly equal to transformers 5.24 for bloom, mpt and smollm3) cannot see,
because FlopCounterMode counts matrix products only: the elementwise FLOPs of
the ALiBi add and of the rotary positions the NoPE layers omit (the `all`
convention), and the config.json variants the mapping refuses. The torch-only
checks at the end tie the model files' layer patterns and the baddbmm
convention to transformers' modules.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import costgraph
from costgraph.errors import CostgraphValueError

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"


def _attention_model(alibi: bool) -> costgraph.Model:
    text = f"""import "std/attention.cg"
model probe {{
  dim b "batch"
  dim s "sequence"
  dim h "hidden"
  dim a "heads"
  input tokens[b, s]: index
  x = embedding(tokens, 8, h, name = e)
  return gqa_attention(x, a, a, h / a, rotary = false, alibi_bias = {str(alibi).lower()}, name = attn)
}}
"""
    return costgraph.loads(text, path="probe.cg", dropout=False)


VALUES = dict(b=3, s=40, h=64, a=4)


def test_alibi_adds_one_flop_a_score_forward_only():
    # Press et al. 2022: score + m_head · key position. BLOOM's alibi.baddbmm and MPT's `scores + position_bias`
    # add one bias a score: a·b·s² FLOPs forward (`all`), no gradient for the bias, nothing kept.
    with_, without = (_attention_model(x) for x in (True, False))
    for convention, extra in (("all", 4 * 3 * 40 * 40), ("matmul", 0)):
        w = with_.costs(convention=convention).evaluate(**VALUES)
        o = without.costs(convention=convention).evaluate(**VALUES)
        assert w["flops_forward"] - o["flops_forward"] == extra
        assert (w["flops_backward"], w["params"], w["activation_bytes"]) == \
               (o["flops_backward"], o["params"], o["activation_bytes"])


def test_alibi_refuses_a_tensor_without_heads():
    bad = """model probe {
  dim s "sequence"
  input x[s, s]
  return alibi(x)
}
"""
    with pytest.raises(costgraph.CostgraphError, match="alibi adds a bias per head"):
        costgraph.loads(bad, path="probe.cg")


@pytest.mark.parametrize("name, config, heads", [("bloom", "bloom-560m", 16), ("mpt", "mpt-7b", 32)])
def test_bloom_and_mpt_add_the_bias_once_a_score_in_every_layer(name, config, heads):
    # one alibi node in the layer body (repeated l times), a·b·s² FLOPs under `all` (0 under `matmul`)
    m = costgraph.load(name, dropout=False)
    values = m.configs[config]
    nodes = [n for n, d in m.graph.nodes.items() if d.get("kind") == "alibi"]
    assert len(nodes) == 1
    per_layer = m.costs(nodes[0], convention="all").evaluate(**values)["flops_forward"]
    assert per_layer == heads * values["b"] * values["s"] ** 2
    assert m.costs(nodes[0]).evaluate(**values)["flops_forward"] == 0


def test_streaming_llm_sink_tokens_cost_as_a_window_of_w_plus_n():
    # Xiao et al. 2024 (StreamingLLM): n sink tokens + the last w positions; each query meets Min(s, w + n)
    # keys and the cache keeps as many: gqa_attention(window = w + n) (models/std/attention.cg)
    text = """import "std/attention.cg"
model probe {
  dim b "batch"
  dim s "sequence"
  dim h "hidden"
  dim w "recent window"
  dim n "sink tokens"
  input tokens[b, s]: index
  x = embedding(tokens, 8, h, name = e)
  return gqa_attention(x, 4, 4, h / 4, window = w + n, name = attn)
}
"""
    m = costgraph.loads(text, path="probe.cg", dropout=False)
    b, s, h, w, n = 2, 100, 16, 8, 4
    v = m.costs().evaluate(b=b, s=s, h=h, w=w, n=n)
    assert v["kv_cache_bytes"] == 2 * 2 * b * h * (w + n)            # K and V, bf16, w + n positions
    # q/k/v/o projections 4·2·b·s·h², QKᵀ and scores·V 2·2·b·s·(w + n)·h
    assert v["flops_forward"] == 8 * b * s * h * h + 4 * b * s * (w + n) * h


# --------------------------------------------------------------------- NoPE


def test_smollm3_omits_rotary_on_every_fourth_layer():
    # SmolLM3-3B against LLaMA's file with the same sizes (tied, rotary everywhere): the same parameters and
    # matmul FLOPs; under `all` 9 of the 36 layers do not rotate q [b, a, s, d] and k [b, kv, s, d]:
    # 3 FLOPs an element (x·cos + rotate_half(x)·sin) less each, forward and backward.
    smol = costgraph.load("smollm3", dropout=False)
    llama = costgraph.load("llama", dropout=False, options={"tied": True})
    v = dict(smol.configs["smollm3-3b"], b=2, s=4096)
    assert v["l"] == 36
    rope = 3 * 2 * 4096 * 128 * (16 + 4)
    for convention, missing in (("all", 9 * rope), ("matmul", 0)):
        x, y = (m.costs(convention=convention).evaluate(**v) for m in (smol, llama))
        assert y["params"] - x["params"] == 0
        assert y["flops_forward"] - x["flops_forward"] == missing
        assert y["flops_backward"] - x["flops_backward"] == missing


# ------------------------------------------------------------ config.json


def _config(file: str, **changes) -> dict:
    return {**json.loads((HF / file).read_text()), **changes}


@pytest.mark.parametrize("file, changes, message", [
    ("smollm3-3b.json", dict(no_rope_layer_interval=2), "no_rope_layer_interval = 2"),
    ("smollm3-3b.json", dict(no_rope_layers=[1] * 36), "no_rope_layers = "),
    ("smollm3-3b.json", dict(use_sliding_window=True, sliding_window=4096), "use_sliding_window = true"),
    ("bloom-560m.json", dict(apply_residual_connection_post_layernorm=True),
     "apply_residual_connection_post_layernorm = true"),
])
def test_variants_the_model_files_do_not_describe_are_refused(file, changes, message):
    with pytest.raises(CostgraphValueError, match=message):
        costgraph.from_hf_config(_config(file, **changes))


def test_smollm3_release_pattern_is_accepted_when_listed():
    # the list SmolLM3Config derives from no_rope_layer_interval 4: int((j + 1) % 4 != 0)
    listed = [int((j + 1) % 4 != 0) for j in range(36)]
    a = costgraph.from_hf_config(_config("smollm3-3b.json", no_rope_layers=listed))
    assert a.costs().evaluate(**a.values)["params"] == 3_075_098_624


def test_mpt_reads_no_bias_and_expansion_ratio_as_mosaicml():
    # MosaicML's MPT (the checkpoints' remote code) reads both; transformers' MptForCausalLM hard-codes no
    # biases and 4·d_model (so `verify` agrees for the released values only). Biases: Wqkv 3h, out_proj h,
    # up_proj i, down_proj h and β of norm_1, norm_2 per layer, β of norm_f.
    base = costgraph.from_hf_config(_config("mpt-7b.json"))
    h, i, l = 4096, 16384, 32
    assert base.values["i"] == 4 * h
    biased = costgraph.from_hf_config(_config("mpt-7b.json", no_bias=False))
    p = lambda m: m.costs().evaluate(**m.values)["params"]  # noqa: E731
    assert p(biased) - p(base) == l * (3 * h + h + i + h + 2 * h) + h
    wide = costgraph.from_hf_config(_config("mpt-7b.json", expansion_ratio=2))
    assert wide.values["i"] == 2 * h and p(base) - p(wide) == l * 2 * h * (i - 2 * h)


# ------------------------------------------------ against transformers' modules

def test_transformers_smollm3_layers_without_rope_are_the_model_files():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch_probe as probe

    cfg = _config("smollm3-3b.json", hidden_size=64, num_hidden_layers=8, num_attention_heads=4,
                  num_key_value_heads=2, intermediate_size=128, vocab_size=128,
                  bos_token_id=0, eos_token_id=1, pad_token_id=2)
    m = probe.build_model("smollm3", {k: v for k, v in cfg.items() if k != "model_type"})
    # SmolLM3Attention.use_rope = no_rope_layers[layer_idx]; the model file: NoPE where j % 4 == 3
    assert [layer.self_attn.use_rope for layer in m.model.layers] == [0 if j % 4 == 3 else 1 for j in range(8)]


def test_transformers_bloom_baddbmm_is_counted_as_the_product():
    # BLOOM's alibi.baddbmm(Q, Kᵀ, alpha = 1/√d): FlopCounterMode counts 2·(b·a)·s·d·s per layer, the bias add
    # none; costgraph's QKᵀ matmul the same (transformers 5.24 modeling_bloom.py::BloomAttention.forward)
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch_probe as probe

    cfg = _config("bloom-560m.json", hidden_size=64, n_layer=3, n_head=4, vocab_size=128)   # ids 1, 2, 3 fit
    m = probe.build_model("bloom", {k: v for k, v in cfg.items() if k != "model_type"})
    b, s, h, l = 2, 24, 64, 3
    assert probe.flops(m, b, s)["forward_ops"]["aten.baddbmm"] == l * 2 * b * s * s * h
