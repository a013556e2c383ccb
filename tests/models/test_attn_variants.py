"""Attention variants of issue 19: DeepSeek-V3.2's sparse attention (the lightning indexer).

Sources: transformers 5.24 ``models/deepseek_v32/modular_deepseek_v32.py`` (DeepseekV32Indexer,
DeepseekV32Attention: MLA whose mask keeps each query's ``index_topk`` best keys) and
``configuration_deepseek_v32.py``; models/deepseek_v32.cg; costgraph/ops/sparse_attention.py.

Conventions (named, both tested): option ``sparse`` (on) counts the MLA attention over the
``Min(s, index_topk)`` keys the indexer keeps (what DSA's kernels compute); ``sparse = false`` the
dense masked square transformers' eager/SDPA path computes (what FlopCounterMode counts there). The
indexer's own products run over every key in both. The indexer runs under ``torch.no_grad`` in
transformers (no backward); the model file calls it with ``no_grad = true`` (option ``indexer_grad``
off), so the measured backward equals costgraph's; ``indexer_grad = true`` counts it trained
(DeepSeek-V3.2 §2.1.1: its backward, twice its products, on top).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from costgraph.inference import Inference, load as load_for_inference
from costgraph.language.hf_config import from_hf_config, load_hf_config
from costgraph.errors import CostgraphValueError
import costgraph
from costgraph.cli import main

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"

# ------------------------------------------------------------------ DeepSeek-V3.2

#: a small DeepSeek-V3.2: 1 dense + 2 MoE layers, index_topk 8 (below the s = 16 point)
V32 = dict(model_type="deepseek_v32", vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
           num_hidden_layers=3, first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4,
           q_lora_rank=48, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=24,
           n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=1, n_group=1, topk_group=1,
           index_n_heads=4, index_head_dim=16, index_topk=8, max_position_embeddings=256,
           bos_token_id=0, eos_token_id=1, pad_token_id=2)
D = dict(V=128, h=64, i=96, i_e=32, l=3, k_d=1, a=4, r_q=48, r_kv=32, d_n=16, d_r=8, d_v=24, E=8, k=2, hi=4, di=16,
         t_k=8)


def _v32_params() -> int:
    """DeepseekV32ForCausalLM's parameters module by module; the routers' e_score_correction_bias is a
    buffer (in transformers and in costgraph: deepseek_v3 likewise), not counted."""
    V, h, i, i_e, l, k_d, a, r_q, r_kv, d_n, d_r, d_v, E, hi, di = (
        D[x] for x in "V h i i_e l k_d a r_q r_kv d_n d_r d_v E hi di".split())
    mla = h * r_q + r_q + r_q * a * (d_n + d_r) + h * (r_kv + d_r) + r_kv + r_kv * a * (d_n + d_v) + a * d_v * h
    indexer = r_q * hi * di + h * di + 2 * di + h * hi          # wq_b, wk, k_norm (LayerNorm, bias), weights_proj
    moe = h * E + E * 3 * h * i_e + 3 * h * i_e                  # router, experts, one shared expert
    layer = mla + indexer + 2 * h
    return l * layer + k_d * 3 * h * i + (l - k_d) * moe + 2 * V * h + h


def _v32_indexer_forward(b, s) -> int:
    """The indexer's matrix products per layer: wq_b, wk, weights_proj and the scores over all s keys."""
    h, r_q, hi, di = D["h"], D["r_q"], D["hi"], D["di"]
    t = b * s
    return 2 * t * (r_q * hi * di + h * di + h * hi) + 2 * b * s * s * hi * (di + 1)


def _v32_forward(b, s, sparse=True) -> int:
    """Forward FLOPs ('matmul') at [b, s], written out; sparse: Min(s, t_k) keys a query."""
    V, h, i, i_e, l, k_d, a, r_q, r_kv, d_n, d_r, d_v, E, k = (
        D[x] for x in "V h i i_e l k_d a r_q r_kv d_n d_r d_v E k".split())
    t = b * s
    keys = min(s, D["t_k"]) if sparse else s
    mla = 2 * t * (h * r_q + r_q * a * (d_n + d_r) + h * (r_kv + d_r) + r_kv * a * (d_n + d_v) + a * d_v * h) \
        + 2 * t * keys * a * (d_n + d_r + d_v)
    moe = 2 * t * h * E + k * 6 * t * h * i_e + 6 * t * h * i_e
    return l * (mla + _v32_indexer_forward(b, s)) + k_d * 6 * t * h * i + (l - k_d) * moe + 2 * t * h * V


def _v32(**options):
    return from_hf_config(dict(V32), options=options or None)


def _v32_values(b, s, **options):
    m = _v32(**options)
    return m.costs().evaluate(**{**m.values, "b": b, "s": s})


def test_v32_parameters_written_out():
    assert _v32_params() == 224_784
    assert _v32_values(1, 8)["params"] == 224_784


@pytest.mark.parametrize("b, s", [(1, 8), (2, 16), (1, 100)])
@pytest.mark.parametrize("sparse", [True, False])
def test_v32_forward_flops_written_out(b, s, sparse):
    assert _v32_values(b, s, sparse=sparse)["flops_forward"] == _v32_forward(b, s, sparse)


def test_v32_released_config():
    # DeepSeek-V3's 671,026,404,352 (transformers' count: the routers' buffers apart; tests of deepseek_v3,
    # models/deepseek_v3.cg) plus 61 indexers of
    # 1536·64·128 + 7168·128 + 2·128 + 7168·64 = 13,959,424 parameters
    hf = load_hf_config(str(HF / "deepseek-v3.2.json"))
    v3 = load_hf_config(str(HF / "deepseek-v3.json"))
    p, p3 = hf.costs().evaluate(**hf.values)["params"], v3.costs().evaluate(**v3.values)["params"]
    assert p3 == 671_026_404_352
    assert p == p3 + 61 * 13_959_424 == 671_877_929_216
    # the MTP depth (num_nextn_predict_layers 1) is an option, off as transformers builds none
    mtp = load_hf_config(str(HF / "deepseek-v3.2.json"), options={"mtp": True})
    assert mtp.costs().evaluate(**mtp.values)["params"] > p


def test_v32_inference_cache_and_sparse_decode():
    m = load_for_inference("deepseek_v32")
    inf = Inference(m)
    v = {**m.values("deepseek-v3.2"), inf.b: 1}
    # per token and layer: MLA's latent and rotary key (512 + 64) and the indexer's key (128), bf16
    assert inf.kv_cache_bytes_per_token().xreplace(v) == 61 * (512 + 64 + 128) * 2 == 85_888
    assert inf.state_bytes().xreplace(v) == 0

    def op(step, name):
        return sum(o.flops.xreplace(v) for o in step.ops if o.path.endswith(name))

    d1, d2 = inf.step(1, 10_000), inf.step(1, 20_000)
    # past index_topk (2048) keys the attention's QKᵀ and PV stop growing; the indexer scores every key
    assert op(d1, "self_attn/matmul") == op(d2, "self_attn/matmul") == 61 * 2 * 128 * (128 + 64) * 2048
    assert op(d2, "lightning_index") - op(d1, "lightning_index") == 61 * 2 * 64 * (128 + 1) * 10_000
    # decode reads every indexer key (the indexer scores them all) but only the top-k latent entries the
    # attention gathers (vLLM's FlashMLA sparse decode reads the index_topk = 2048 selected entries of
    # the latent cache, all of which stay stored): n = 20,000 cached positions, q = 1
    latent, index = (512 + 64) * 2, 128 * 2
    assert d2.kv_read.xreplace(v) == 61 * (min(20_000, 2048) * latent + 20_000 * index) == 456_237_056
    assert inf.step(1, 1000).kv_read.xreplace(v) == 61 * 1000 * (latent + index)   # fewer than 2048: all


def test_v32_fp8_indexer_cache():
    # option indexer_fp8: the indexer's key cache as vLLM keeps it, FP8 values and one fp32 scale per 128
    # (vllm/model_executor/models/deepseek_v2.py Indexer: head_dim + head_dim // quant_block_size * 4 = 132
    # bytes a token, DeepseekV32IndexerCache: MLAAttentionSpec(num_kv_heads=1, head_size=132, dtype=uint8))
    m = load_for_inference("deepseek_v32", options={"indexer_fp8": True})
    inf = Inference(m)
    v = {**m.values("deepseek-v3.2"), inf.b: 1}
    assert inf.kv_cache_bytes_per_token().xreplace(v) == 61 * ((512 + 64) * 2 + 128 + 4) == 78_324
    assert inf.step(1, 20_000).kv_read.xreplace(v) == 61 * (2048 * 1152 + 20_000 * 132)


# ------------------------------------------------------------------ PyTorch tier


@pytest.fixture(scope="module")
def v32_torch():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph import torch_measure as tm
    return tm, tm.build_meta("deepseek_v32", {k: v for k, v in V32.items() if k != "model_type"})


def test_v32_parameters_equal_transformers_on_meta(v32_torch):
    tm, model = v32_torch
    assert type(model).__name__ == "DeepseekV32ForCausalLM"
    bias = sum(x.numel() for n, x in model.named_buffers() if n.endswith("e_score_correction_bias"))
    assert bias == (D["l"] - D["k_d"]) * D["E"]
    assert tm.param_count(model) == _v32_params()
    # costgraph lists the same buffers apart, in fp32 (_keep_in_fp32_modules_strict)
    from costgraph.engine.totals import buffers
    hf = _v32()
    assert [(n.subs(hf.model.values(None, hf.values)), dtype) for n, dtype in buffers(hf.model.graph).values()] == [(bias, "fp32")]


@pytest.mark.parametrize("b, s", [(1, 8), (2, 16)])
def test_v32_flops_equal_flopcountermode(v32_torch, b, s):
    # transformers computes the dense masked square: sparse = false everywhere, and the default
    # (sparse) too while s ≤ index_topk (8); the indexer has no backward there (torch.no_grad)
    tm, model = v32_torch
    measured = tm.flops(model, b, s)
    dense = _v32_values(b, s, sparse=False)
    assert measured["forward"] == dense["flops_forward"] == _v32_forward(b, s, sparse=False)
    assert measured["backward"] == dense["flops_backward"]
    # option indexer_grad (DeepSeek-V3.2 §2.1.1: the indexer trained): its backward, twice its products, on top
    trained = _v32_values(b, s, sparse=False, indexer_grad=True)["flops_backward"]
    assert trained == measured["backward"] + 2 * D["l"] * _v32_indexer_forward(b, s)
    assert (_v32_values(b, s)["flops_forward"] == measured["forward"]) == (s <= D["t_k"])


def test_v32_gradients_only_for_what_torch_differentiates(v32_torch):
    # no_grad = true on the indexer: its weights get no gradient (transformers' torch.no_grad leaves
    # their .grad None after backward); model_states counts fp32 gradients for exactly the others
    torch = pytest.importorskip("torch")
    from costgraph.training import model_states
    tm, model = v32_torch
    with torch.enable_grad(), tm.meta_forward():
        model(**tm.make_inputs(model, 1, 8)).logits.sum().backward()
    got = sum(p.numel() for p in model.parameters() if p.grad is not None)
    model.zero_grad(set_to_none=True)
    indexer = sum(p.numel() for n, p in model.named_parameters() if ".indexer." in n)
    assert indexer > 0 and got == tm.param_count(model) - indexer
    # the routers' e_score_correction_bias: a buffer in transformers and here, no gradient
    for trained, want in ((False, got), (True, got + indexer)):
        m = _v32(indexer_grad=trained)
        g = m.model.graph
        grads = model_states(g, policy="fp32", optimizer="sgd", dp=1)["gradients"]
        assert grads.subs({g.dims[k].symbol: x for k, x in m.values.items() if k in g.dims}) == 4 * want


def test_v32_kv_cache_equals_the_dynamic_cache(v32_torch):
    # DynamicIndexedLayer: keys (the latent), values (the rotary key) and indexer_keys, per layer
    tm, model = v32_torch
    m = _v32()
    per_token = D["l"] * (D["r_kv"] + D["d_r"] + D["di"])
    got = tm.kv_cache_bytes(model, 2, 8)
    assert got == 2 * 8 * per_token * 2
    assert m.costs().evaluate(**{**m.values, "b": 2, "s": 8})["kv_cache_bytes"] == got


# ------------------------------------------------------------------ Kimi Linear
# Sources: transformers 5.24 models/kimi_linear/modeling_kimi_linear.py (KimiLinearDeltaAttention,
# KimiLinearForgetGate, KimiLinearAttention, chunk_kimi_delta_attention) and configuration_kimi_linear.py;
# models/kimi_linear.cg; costgraph/ops/linear_attention_kda.py. The delta rule's FLOPs: textbook
# 6·T·hl·dl² by default, option chunked_flops = FlopCounterMode's count of the chunked torch fallback.

#: a small Kimi Linear: 4 layers, layer 0 dense + KDA, layer 2 MLA (full_attn_layers are 1-based), MoE after
KIMI = dict(model_type="kimi_linear", vocab_size=128, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
            num_hidden_layers=4, first_k_dense_replace=1, num_attention_heads=4, num_key_value_heads=4,
            q_lora_rank=None, kv_lora_rank=32, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=24,
            num_experts=8, num_experts_per_token=2, num_shared_experts=1,
            linear_attn_config={"num_heads": 2, "head_dim": 16, "short_conv_kernel_size": 4,
                                "full_attn_layers": [3], "kda_layers": [1, 2, 4]},
            model_max_length=512, bos_token_id=0, eos_token_id=1, pad_token_id=2, tie_word_embeddings=False)
KD = dict(V=128, h=64, i=96, i_e=32, l=4, k_d=1, n_f=1, a=4, r_kv=32, d_n=16, d_r=8, d_v=24, E=8, k=2, hl=2, dl=16,
          K=4)
KDA_LAYERS = KD["l"] - KD["n_f"]
CONV = 3 * KD["hl"] * KD["dl"]                      # conv1d channels: q, k, v


def _kimi_params() -> int:
    """KimiLinearForCausalLM's parameters module by module (the routers' e_score_correction_bias buffers apart)."""
    V, h, i, i_e, l, k_d, n_f, a, r_kv, d_n, d_r, d_v, E, hl, dl, K = (
        KD[x] for x in "V h i i_e l k_d n_f a r_kv d_n d_r d_v E hl dl K".split())
    kda = (3 * h * hl * dl + CONV * K + h * dl + dl * hl * dl + hl * dl + hl   # q/k/v, conv1d, forget gate
           + h * hl + h * dl + dl * hl * dl + dl + hl * dl * h)                # b_proj, g_a/g_b, o_norm, o_proj
    mla = h * a * (d_n + d_r) + h * (r_kv + d_r) + r_kv + r_kv * a * (d_n + d_v) + a * d_v * h
    moe = h * E + E * 3 * h * i_e + 3 * h * i_e
    return KDA_LAYERS * kda + n_f * mla + k_d * 3 * h * i + (l - k_d) * moe + l * 2 * h + 2 * V * h + h


def _kimi_core(b, s, chunked) -> int:
    hl, dl = KD["hl"], KD["dl"]
    if not chunked:
        return 6 * b * s * hl * dl * dl
    padded = -(-s // 64) * 64
    return b * hl * padded * (6 * 64 * dl + 6 * dl * dl)


def _kimi_forward(b, s, chunked=False) -> int:
    V, h, i, i_e, l, k_d, n_f, a, r_kv, d_n, d_r, d_v, E, k, hl, dl, K = (
        KD[x] for x in "V h i i_e l k_d n_f a r_kv d_n d_r d_v E k hl dl K".split())
    t = b * s
    # the convolution padded as transformers' causal_conv1d_fn fallback runs it (option conv_padded, the
    # default): F.conv1d(padding = K − 1)[..., :s] computes s + K − 1 positions per channel
    kda = 2 * t * (3 * h * hl * dl + 2 * (h * dl + dl * hl * dl) + h * hl + hl * dl * h) \
        + 2 * b * (s + K - 1) * CONV * K + _kimi_core(b, s, chunked)
    mla = 2 * t * (h * a * (d_n + d_r) + h * (r_kv + d_r) + r_kv * a * (d_n + d_v) + a * d_v * h) \
        + 2 * b * s * s * a * (d_n + d_r + d_v)
    moe = 2 * t * h * E + k * 6 * t * h * i_e + 6 * t * h * i_e
    return KDA_LAYERS * kda + n_f * mla + k_d * 6 * t * h * i + (l - k_d) * moe + 2 * t * h * V


def _kimi(**options):
    return from_hf_config(dict(KIMI), options=options or None)


def _kimi_values(b, s, **options):
    m = _kimi(**options)
    return m.costs().evaluate(**{**m.values, "b": b, "s": s})


def test_kimi_parameters_written_out():
    assert _kimi_params() == 258_294
    assert _kimi_values(1, 8)["params"] == 258_294


@pytest.mark.parametrize("b, s", [(1, 16), (2, 100)])
@pytest.mark.parametrize("chunked", [False, True])
def test_kimi_forward_flops_written_out(b, s, chunked):
    values = _kimi_values(b, s, chunked_flops=True) if chunked else _kimi_values(b, s)
    assert values["flops_forward"] == _kimi_forward(b, s, chunked)


def test_kimi_layer_kinds_from_either_config_form():
    # the checkpoint's linear_attn_config, or transformers' own keys (a config saved by KimiLinearConfig)
    lac = KIMI["linear_attn_config"]
    own = {k: v for k, v in KIMI.items() if k != "linear_attn_config"}
    own.update(linear_num_heads=lac["num_heads"], linear_head_dim=lac["head_dim"],
               linear_conv_kernel_dim=lac["short_conv_kernel_size"],
               layer_types=["linear_attention", "linear_attention", "full_attention", "linear_attention"])
    hf = from_hf_config(own)
    assert hf.costs().evaluate(**hf.values)["params"] == _kimi_params()
    assert {x: hf.values[x] for x in ("n_f", "hl", "dl", "K")} == {"n_f": 1, "hl": 2, "dl": 16, "K": 4}
    from costgraph.errors import CostgraphValueError
    with pytest.raises(CostgraphValueError, match="layer_types"):
        from_hf_config({k: v for k, v in own.items() if k != "layer_types"})
    with pytest.raises(CostgraphValueError, match="q_lora_rank"):
        from_hf_config({**KIMI, "q_lora_rank": 16})


def test_kimi_released_config_and_inference_state():
    hf = load_hf_config(str(HF / "kimi-linear-48b-a3b-instruct.json"))
    v = hf.costs().evaluate(**hf.values)
    assert (v["params"], v["params_active"]) == (49_122_675_072, 3_484_453_248)
    m = load_for_inference("kimi_linear")
    inf = Inference(m)
    vals = {**m.values("kimi-linear-48b-a3b"), inf.b: 1}
    # 7 MLA layers: latent + shared key (512 + 64), bf16; 20 KDA layers: the fp32 state [32, 128, 128]
    # and the convolution's state [3·32·128, 4] in bf16
    assert inf.kv_cache_bytes_per_token().xreplace(vals) == 7 * (512 + 64) * 2 == 8_064
    assert inf.state_bytes().xreplace(vals) == 20 * (32 * 128 * 128 * 4 + 3 * 32 * 128 * 4 * 2) == 43_909_120


@pytest.fixture(scope="module")
def kimi_torch():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph import torch_measure as tm
    return tm, tm.build_meta("kimi_linear", {k: v for k, v in KIMI.items() if k != "model_type"})


def test_kimi_parameters_equal_transformers_on_meta(kimi_torch):
    tm, model = kimi_torch
    assert type(model).__name__ == "KimiLinearForCausalLM"
    assert model.config.layer_types == ["linear_attention", "linear_attention", "full_attention", "linear_attention"]
    bias = sum(x.numel() for n, x in model.named_buffers() if n.endswith("e_score_correction_bias"))
    assert bias == (KD["l"] - KD["k_d"]) * KD["E"]
    assert tm.param_count(model) == _kimi_params()


def _forward_flops(tm, model, b, s) -> int:
    """FlopCounterMode's forward count alone (no_grad: the chunked fallback's loops are not recorded for a
    backward), the routed experts' aten._grouped_mm counted by torch_measure's formula."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False, custom_mapping=tm.grouped_mm_flops_mapping())
    with torch.no_grad(), tm.meta_forward(), counter:
        model(**tm.make_inputs(model, b, s))
    return int(counter.get_total_flops())


@pytest.mark.parametrize("b, s", [(1, 16), (2, 100)])
def test_kimi_forward_flops_equal_flopcountermode(kimi_torch, b, s):
    # transformers' causal_conv1d_fn fallback pads both sides (padding K − 1) and keeps the first s
    # outputs: FlopCounterMode counts 2·b·(s + K − 1)·C·K per KDA layer, as conv1d(padded = true) does
    tm, model = kimi_torch
    measured = _forward_flops(tm, model, b, s)
    assert measured == _kimi_values(b, s, chunked_flops=True)["flops_forward"] == _kimi_forward(b, s, True)
    padding = KDA_LAYERS * 2 * b * (KD["K"] - 1) * CONV * KD["K"]   # conv_padded = false: the kernel's s
    assert measured - _kimi_values(b, s, chunked_flops=True, conv_padded=False)["flops_forward"] == padding


def test_kimi_cache_equals_the_runtime_cache(kimi_torch):
    # MLA layers (DynamicLayer): keys = the latent, values = the shared key part, per token; KDA layers
    # (LinearAttentionLayer): conv_states [b, 3·hl·dl, K] in bf16 and the fp32 recurrent_states [b, hl, dl, dl]
    import torch
    from transformers import DynamicCache
    tm, model = kimi_torch
    b, s = 2, 8
    model.train(False)
    try:
        cache = DynamicCache(config=model.config)
        with torch.no_grad(), tm.meta_forward():
            model(input_ids=torch.zeros((b, s), dtype=torch.long, device="meta"), cache=cache, use_cache=True)
    finally:
        model.train(True)

    def nbytes(states):
        return sum(t.numel() * t.element_size() for t in (states.values() if isinstance(states, dict) else states)
                   if t is not None and hasattr(t, "numel"))

    state = sum(nbytes(layer.conv_states) + nbytes(layer.recurrent_states) for layer in cache.layers
                if hasattr(layer, "recurrent_states"))
    per_token = KD["n_f"] * (KD["r_kv"] + KD["d_r"]) * 2
    assert tm.kv_cache_bytes(model, b, s) == b * s * per_token
    assert state == b * KDA_LAYERS * (KD["hl"] * KD["dl"] ** 2 * 4 + CONV * KD["K"] * 2)
    v = _kimi_values(b, s)
    assert v["kv_cache_bytes_per_token"] == per_token
    assert v["kv_cache_bytes"] == b * s * per_token + state


# ------------------------------------------------------------------ MiniMax (lightning attention)
# Sources: transformers 5.24 models/minimax/modeling_minimax.py (MiniMaxLightningAttention, MiniMaxCache)
# and configuration_minimax.py; models/minimax.cg; costgraph/ops/linear_attention_lightning.py. The
# lightning core's FLOPs: textbook 4·T·a·d² by default, option chunked_flops = the blockwise form
# transformers computes (what FlopCounterMode counts).

#: a small MiniMax: 3 lightning layers then a softmax layer, head size 24 ≠ h/a, block_size 16
MINIMAX = dict(model_type="minimax", vocab_size=128, hidden_size=64, intermediate_size=48, num_hidden_layers=4,
               num_attention_heads=4, num_key_value_heads=2, head_dim=24, num_local_experts=4, num_experts_per_tok=2,
               block_size=16, max_position_embeddings=512, bos_token_id=0, eos_token_id=1, pad_token_id=2,
               layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"])
MD = dict(V=128, h=64, i=48, l=4, n_f=1, a=4, kv=2, d=24, E=4, k=2, C=16)


def _minimax_params() -> int:
    V, h, i, l, n_f, a, kv, d, E = (MD[x] for x in "V h i l n_f a kv d E".split())
    lightning = h * 3 * a * d + a * d + h * a * d + a * d * h      # qkv_proj, norm, output_gate, out_proj
    full = h * a * d + 2 * h * kv * d + a * d * h
    return (l - n_f) * lightning + n_f * full + l * (2 * h + h * E + E * 3 * h * i) + 2 * V * h + h


def _minimax_forward(b, s, chunked=False) -> int:
    V, h, i, l, n_f, a, kv, d, E, k, C = (MD[x] for x in "V h i l n_f a kv d E k C".split())
    t = b * s
    core = b * a * (4 * d * ((s // C) * C * C + (s % C) ** 2) + 4 * s * d * d) if chunked else 4 * t * a * d * d
    lightning = 2 * t * h * 5 * a * d + core
    full = 2 * t * h * (2 * a * d + 2 * kv * d) + 4 * b * s * s * a * d
    return (l - n_f) * lightning + n_f * full + l * (2 * t * h * E + k * 6 * t * h * i) + 2 * t * h * V


def _minimax_values(b, s, **options):
    m = from_hf_config(dict(MINIMAX), options=options or None)
    return m.costs().evaluate(**{**m.values, "b": b, "s": s})


def test_minimax_parameters_written_out():
    assert _minimax_params() == 276_320
    assert _minimax_values(1, 8)["params"] == 276_320


@pytest.mark.parametrize("b, s", [(1, 16), (2, 40)])
@pytest.mark.parametrize("chunked", [False, True])
def test_minimax_forward_flops_written_out(b, s, chunked):
    values = _minimax_values(b, s, chunked_flops=True) if chunked else _minimax_values(b, s)
    assert values["flops_forward"] == _minimax_forward(b, s, chunked)


def test_minimax_layer_kinds_and_released_sizes():
    # MiniMaxConfig's default layer_types: layer j softmax when j is even, ⌈l/2⌉ of them
    default = from_hf_config({k: v for k, v in MINIMAX.items() if k != "layer_types"} | {"num_hidden_layers": 5})
    assert default.values["n_f"] == 3
    # MiniMax-Text-01 (examples/hf/minimax-text-01.json): 456B parameters as published; transformers 5.24 on meta
    hf = load_hf_config(str(HF / "minimax-text-01.json"))
    v = hf.costs().evaluate(**hf.values)
    assert (v["params"], v["params_active"]) == (456_089_655_296, 48_403_306_496)
    assert hf.values["n_f"] == 10
    # per token: 10 softmax layers' K and V (8 heads of 128, bf16); per sequence: 70 states [64, 128, 128], bf16
    assert v["kv_cache_bytes_per_token"] == 10 * 2 * 8 * 128 * 2
    m = load_for_inference("minimax")
    inf = Inference(m)
    vals = {**m.values("minimax-text-01"), inf.b: 1}
    assert inf.state_bytes().xreplace(vals) == 70 * 64 * 128 * 128 * 2 == 146_800_640


@pytest.fixture(scope="module")
def minimax_torch():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph import torch_measure as tm
    return tm, tm.build_meta("minimax", {k: v for k, v in MINIMAX.items() if k != "model_type"})


def test_minimax_parameters_equal_transformers_on_meta(minimax_torch):
    tm, model = minimax_torch
    assert type(model).__name__ == "MiniMaxForCausalLM"
    assert tm.param_count(model) == _minimax_params()     # the decay tables are buffers, not parameters


@pytest.mark.parametrize("b, s", [(1, 16), (2, 40)])
def test_minimax_forward_flops_equal_flopcountermode(minimax_torch, b, s):
    # s = 40: two whole blocks of 16 and one of 8
    tm, model = minimax_torch
    measured = _forward_flops(tm, model, b, s)
    assert measured == _minimax_values(b, s, chunked_flops=True)["flops_forward"] == _minimax_forward(b, s, True)


def test_minimax_cache_equals_minimax_cache(minimax_torch):
    # MiniMaxCache: the softmax layers' keys and values, the lightning layers' linear_cache [b, a, d, d]
    import torch
    from transformers.models.minimax.modeling_minimax import MiniMaxCache
    tm, model = minimax_torch
    b, s = 2, 8
    model.train(False)
    try:
        cache = MiniMaxCache()
        with torch.no_grad(), tm.meta_forward():
            model(input_ids=torch.zeros((b, s), dtype=torch.long, device="meta"), cache=cache, use_cache=True)
    finally:
        model.train(True)
    kv = sum(t.numel() * t.element_size() for layer in cache.layers
             for t in (getattr(layer, "keys", None), getattr(layer, "values", None)) if hasattr(t, "numel"))
    state = sum(t.numel() * t.element_size() for t in cache.linear_cache if hasattr(t, "numel"))
    per_token = MD["n_f"] * 2 * MD["kv"] * MD["d"] * 2
    assert kv == b * s * per_token
    assert state == b * (MD["l"] - MD["n_f"]) * MD["a"] * MD["d"] ** 2 * 2
    v = _minimax_values(b, s)
    assert (v["kv_cache_bytes_per_token"], v["kv_cache_bytes"]) == (per_token, b * s * per_token + state)


# --- rope's r at most h/a, located at the rope call (issue 18) -------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_set_r_above_head_size_refused(capsys):
    """pythia-160m: h/a = 768/12 = 64 entries per head; r may be at most 64."""
    code, out, err = _cli(capsys, "derive", "gpt_neox", "--config", "pythia-160m", "--set", "r=100000")
    assert code == 2 and "Traceback" not in err
    # the location of the first rope call in models/std/attention.cg (line:column of `rope(`)
    lines = (ROOT / "models" / "std" / "attention.cg").read_text().splitlines()
    line = next(i for i, t in enumerate(lines, 1) if "q = rope(q" in t)
    assert f"std/attention.cg:{line}:9" in err and "rotates r entries of a last dimension of h/a (at most h/a)" in err
    assert "-99935" in err and "hint:" in err          # 64 - 100000 + 1
    code, _, err = _cli(capsys, "derive", "gpt_neox", "--config", "pythia-160m", "--set", "r=65")
    assert code == 2 and "rotates r entries" in err


def test_set_r_at_head_size_accepted(capsys):
    m = costgraph.load("gpt_neox")
    assert m.costs().evaluate("pythia-160m", r=64)["params"] == 162_322_944
    with pytest.raises(CostgraphValueError, match="rotates r entries"):
        m.costs().evaluate("pythia-160m", r=65)
