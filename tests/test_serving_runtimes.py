"""Serving numbers as the runtimes print them at start-up (issue 29).

1. The K/V cache under TP when a norm covers the whole K projection (OLMo 2/3, MiniMax-M2): vLLM
   still splits the K cache by heads. vllm @ 52e9d6f2, vllm/model_executor/models/olmo2.py::
   Olmo2Attention: ``num_kv_heads = max(1, total_num_kv_heads // tp_size)`` given to ``Attention``,
   ``_apply_qk_norm`` all-gathers Q and K, normalises them whole and keeps the rank's slice;
   vllm @ d29a69a5, vllm/model_executor/layers/mamba/linear_attn.py::MiniMaxText01RMSNormTP.forward_qk
   (MiniMax-M2's q_norm/k_norm, models/minimax_m2.py @ 01d99586): each rank's variance all-reduced,
   weight hidden_size / tp per rank. Per token per device: 2 (K, V) · layers · kv/tp · head_dim · 2 B.
"""

import pytest
import sympy

from costgraph.commands._analysis import inference_model
from costgraph.inference import infer

# allenai/OLMo-2-1124-13B config.json (examples/hf/olmo-2-1124-13b.json): 40 layers, 40 K/V heads of 128
OLMO_L, OLMO_KV, OLMO_D = 40, 40, 128
# MiniMaxAI/MiniMax-M2 config.json (examples/hf/minimax_m2-defaults.json): 62 layers, 8 K/V heads of 128
MM2_L, MM2_KV, MM2_D = 62, 8, 128


def _report(path, tp, prompt=1000, generate=100, **kw):
    model, values = inference_model(path, None, {}, {})
    return infer(model, prompt=prompt, generate=generate, batch=1, values=values, t=tp, **kw)


@pytest.fixture(scope="module")
def olmo_tp2():
    return _report("examples/hf/olmo-2-1124-13b.json", 2)


def test_olmo2_kv_cache_split_by_heads_under_tp(olmo_tp2):
    per = 2 * OLMO_L * (OLMO_KV // 2) * OLMO_D * 2
    assert olmo_tp2.values["kv_cache_bytes_per_token"] == per == 409_600   # was 614,400 (K kept whole)


def test_minimax_m2_kv_cache_split_by_heads_under_tp():
    r = _report("examples/hf/minimax_m2-defaults.json", 2)
    assert r.values["kv_cache_bytes_per_token"] == 2 * MM2_L * (MM2_KV // 2) * MM2_D * 2 == 126_976   # was 190,464


def test_split_norm_all_reduce_named(olmo_tp2):
    # one all-reduce per QK-norm of one fp32 sum of squares per token: 2 per layer, b·P·4 bytes each
    assert any("norms over a projection split by heads" in n for n in olmo_tp2.notes)
    from costgraph.inference.phases import Inference

    model, values = inference_model("examples/hf/olmo-2-1124-13b.json", None, {}, {})
    inf = Inference(model, t=2)
    assert sorted(p.rsplit("/", 1)[-1] for p in inf.tp.split_norms) == ["k_norm", "q_norm"]
    step = inf.prefill(1000)
    norms = [a for a in step.allreduce if a.path in inf.tp.split_norms]
    b = next(s for s in model.graph.dims.values() if s.symbol.name == "b").symbol
    assert [(a.calls.xreplace(values), a.bytes.xreplace({**values, b: 1})) for a in norms] == [(40, 4000)] * 2


def test_mla_latent_cache_stays_whole_under_tp():
    # DeepSeek-V3 (examples/hf/deepseek-v3.json): kv_lora_rank 512 + qk_rope_head_dim 64 per layer, 61 layers;
    # vLLM's MLA keeps the latent on every rank (the down-projection before kv_a_layernorm is replicated):
    # the norm's reader is a slice, not a split into heads
    r1, r8 = (_report("examples/hf/deepseek-v3.json", t) for t in (1, 8))
    assert r1.values["kv_cache_bytes_per_token"] == r8.values["kv_cache_bytes_per_token"] == 61 * 576 * 2
