"""Linear-attention / state-space hybrids (issue 19): Qwen3-Next and Falcon-H1.

Sources: transformers 5.24 ``models/qwen3_next/modeling_qwen3_next.py`` (Qwen3NextForCausalLM,
Qwen3NextGatedDeltaNet, ``torch_chunk_gated_delta_rule``) and ``configuration_qwen3_next.py``;
models/qwen3_next.cg; costgraph/ops/linear_attention.py.

Conventions (named, both tested): the delta rule's FLOPs are by default the textbook count of its
recurrent form, ``6·T·hv·dk·dv`` per linear layer (state read, rank-one update, output); option
``chunked_flops`` reproduces what ``FlopCounterMode`` counts in transformers' chunked torch fallback
(the CPU path without flash-linear-attention: chunks of 64, the sequence padded to a multiple of 64,
``linalg.solve_triangular`` uncounted). Falcon-H1's Mamba-2 scan likewise: textbook ``2·T·di·N``
(the recurrent form's state-by-C product), option ``chunked_flops`` = transformers'
``mamba2_chunk_scan`` fallback (modeling_falcon_h1.py). The torch tier (parameters on meta, forward FLOPs) is skipped
without torch and transformers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.inference import Inference, load as load_for_inference
from costgraph.language.hf_config import from_hf_config

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
Q3N = HF / "qwen3-next-80b-a3b-instruct.json"

#: a small Qwen3-Next: 4 layers (3 gated-DeltaNet, layer 3 full attention), hv = 2·hk, dk ≠ dv
TINY = dict(model_type="qwen3_next", vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32, linear_conv_kernel_dim=4,
            linear_key_head_dim=16, linear_value_head_dim=24, linear_num_key_heads=2, linear_num_value_heads=4,
            moe_intermediate_size=32, shared_expert_intermediate_size=48, num_experts_per_tok=2, num_experts=4,
            max_position_embeddings=512, tie_word_embeddings=False)
T = dict(V=128, h=64, l=4, a=4, kv=2, d=32, K=4, dk=16, dv=24, hk=2, hv=4, i=32, i_s=48, k=2, E=4)
LINEAR, FULL = 3, 1                       # layers j % 4 != 3 and j % 4 == 3 of 0 … 3
CONV = 2 * T["hk"] * T["dk"] + T["hv"] * T["dv"]       # conv1d channels: q, k, v


def _tiny_params() -> int:
    """Qwen3NextForCausalLM's parameters written out module by module (modeling_qwen3_next.py)."""
    V, h, a, kv, d, K, dk, dv, hk, hv, i, i_s, E = (T[x] for x in "V h a kv d K dk dv hk hv i i_s E".split())
    linear = (h * (2 * hk * dk + 2 * hv * dv) + h * 2 * hv + CONV * K   # in_proj_qkvz, in_proj_ba, conv1d
              + 2 * hv + dv + hv * dv * h)                               # A_log, dt_bias, norm, out_proj
    full = h * 2 * a * d + 2 * h * kv * d + a * d * h + 2 * d            # q_proj (with gate), k, v, o, q/k norms
    layer = 2 * h + E * h + E * 3 * h * i + 3 * h * i_s + h              # norms, router, experts, shared + gate
    return LINEAR * linear + FULL * full + 4 * layer + 2 * V * h + h


def _core(b, s, chunked):
    """The delta rule's counted products per linear layer (costgraph/ops/linear_attention.py)."""
    hv, dk, dv = T["hv"], T["dk"], T["dv"]
    if not chunked:
        return 6 * b * s * hv * dk * dv
    padded = -(-s // 64) * 64
    return b * hv * padded * (4 * 64 * dk + 2 * 64 * dv + 6 * dk * dv)


def _tiny_forward(b, s, chunked) -> int:
    """Forward FLOPs ('matmul') of TINY at [b, s], written out; attention's QKᵀ and PV counted full."""
    V, h, a, kv, d, K, dk, dv, hk, hv, i, i_s, E, k = (T[x] for x in "V h a kv d K dk dv hk hv i i_s E k".split())
    t = b * s
    # the convolution as transformers' causal_conv1d_fn fallback computes it (option conv_padded, the
    # default): F.conv1d(padding = K − 1)[..., :s], s + K − 1 positions per channel
    linear = 2 * t * h * (2 * hk * dk + 2 * hv * dv + 2 * hv) + 2 * b * (s + K - 1) * CONV * K \
        + _core(b, s, chunked) + 2 * t * hv * dv * h
    full = 2 * t * h * (2 * a * d + 2 * kv * d) + 4 * b * s * s * a * d + 2 * t * a * d * h
    moe = 2 * t * h * E + k * 6 * t * h * i + 6 * t * h * i_s + 2 * t * h
    return LINEAR * linear + FULL * full + 4 * moe + 2 * t * h * V


def _tiny(**options):
    return from_hf_config(dict(TINY), options=options or None)


# ------------------------------------------------------------------ costgraph alone


def test_tiny_parameters_written_out():
    assert _tiny_params() == 257_376
    hf = _tiny()
    assert hf.costs().evaluate(**hf.values)["params"] == 257_376


@pytest.mark.parametrize("b, s", [(1, 16), (2, 100), (1, 64)])
@pytest.mark.parametrize("chunked", [False, True])
def test_tiny_forward_flops_written_out(b, s, chunked):
    hf = _tiny(chunked_flops=True) if chunked else _tiny()
    got = hf.costs().evaluate(**{**hf.values, "b": b, "s": s})["flops_forward"]
    assert got == _tiny_forward(b, s, chunked)


def test_released_config_parameters():
    # 79,674,391,296: the total quoted for Qwen3-Coder-Next (the same architecture and sizes) in public
    # code, as published on its model page (examples/hf/SOURCES.md); active 3,874,929,408 likewise
    from costgraph.language.hf_config import load_hf_config
    hf = load_hf_config(str(Q3N))
    v = hf.costs().evaluate(**hf.values)
    assert v["params"] == 79_674_391_296
    assert v["params_active"] == 3_874_929_408


def test_bundled_config_matches_the_json():
    m = costgraph.load("qwen3_next")
    hf = from_hf_config(json.loads(Q3N.read_text()))
    assert m.costs().evaluate(config="qwen3-next-80b-a3b")["params"] == hf.costs().evaluate(**hf.values)["params"]


def test_inference_state_is_constant_in_the_prompt_length():
    m = load_for_inference("qwen3_next")
    inf = Inference(m)
    v = {**m.values("qwen3-next-80b-a3b"), inf.b: 1}
    # 36 gated-DeltaNet layers: state [hv, dk, dv] = [32, 128, 128] and conv state [2·16·128 + 32·128, 4],
    # bf16; 12 full-attention layers: K and V of 2 heads of 256, bf16
    state = 36 * (32 * 128 * 128 + (2 * 16 * 128 + 32 * 128) * 4) * 2
    per_token = 12 * 2 * 2 * 256 * 2
    assert state == 40_108_032 and per_token == 24_576
    assert inf.state_bytes().xreplace(v) == state
    assert inf.kv_cache_bytes_per_token().xreplace(v) == per_token
    for n in (100, 4096, 262_144):
        assert inf.kv_cache_bytes(n).xreplace(v) == n * per_token + state
        dec = inf.step(1, n)
        assert dec.kv_read.xreplace(v) == n * per_token + state
        assert dec.kv_written.xreplace(v) == per_token + state
    # a decoded token's delta rule: 6·hv·dk·dv per linear layer, whatever n (textbook, recurrent form)
    core = 6 * 32 * 128 * 128
    d1, d2 = inf.step(1, 100).flops.xreplace(v), inf.step(1, 10_100).flops.xreplace(v)
    # only the 12 full layers' QKᵀ and PV grow with n: 4·a·d per cached position
    assert d2 - d1 == 12 * 4 * 16 * 256 * 10_000
    assert core == 3_145_728


@pytest.mark.parametrize("key, value", [("full_attention_interval", 2), ("decoder_sparse_step", 2),
                                        ("mlp_only_layers", [0]), ("num_experts", 0), ("hidden_act", "gelu"),
                                        ("attention_bias", True), ("partial_rotary_factor", 0.5),
                                        ("layer_types", ["linear_attention", "full_attention"] * 2)])
def test_variants_the_model_file_does_not_describe_are_refused(key, value):
    with pytest.raises(CostgraphValueError, match=key):
        from_hf_config({**TINY, key: value})


def test_derive_train_infer_run_on_the_released_config(cg):
    r = cg("derive", str(Q3N))
    assert r.returncode == 0, r.stderr
    assert "79,674,391,296" in r.stdout
    r = cg("train", str(Q3N), "--set", "s=4096", "--format", "json")
    assert r.returncode == 0, r.stderr
    r = cg("infer", str(Q3N), "--prompt", "1000", "--generate", "100", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    r2 = cg("infer", str(Q3N), "--prompt", "100000", "--generate", "100", "--format", "json")
    out2 = json.loads(r2.stdout)
    assert out["state_bytes"]["value"] == out2["state_bytes"]["value"] == 40_108_032
    assert out2["kv_cache_bytes"]["value"] - out["kv_cache_bytes"]["value"] == 99_000 * 24_576


# ------------------------------------------------------------------ PyTorch tier


@pytest.fixture(scope="module")
def torch_model():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph import torch_measure as tm
    return tm, tm.build_meta("qwen3_next", {k: v for k, v in TINY.items() if k != "model_type"})


def test_parameters_equal_transformers_on_meta(torch_model):
    tm, model = torch_model
    assert tm.param_count(model) == _tiny_params() == 257_376


@pytest.mark.parametrize("b, s", [(1, 16), (2, 100)])
def test_forward_flops_equal_flopcountermode(torch_model, b, s):
    # transformers' causal_conv1d_fn fallback pads both sides (padding K − 1) and keeps the first s
    # outputs: FlopCounterMode counts 2·b·(s + K − 1)·C·K per linear layer, as costgraph's conv1d with
    # padded = true (option conv_padded, the default): no correction
    tm, model = torch_model
    measured = tm.flops(model, b, s)["forward"]         # routed experts' aten._grouped_mm counted
    hf = _tiny(chunked_flops=True)
    ours = hf.costs().evaluate(**{**hf.values, "b": b, "s": s})["flops_forward"]
    assert measured == ours == _tiny_forward(b, s, True)
    # conv_padded = false: the causal_conv1d kernel's s positions
    kernel = _tiny(chunked_flops=True, conv_padded=False)
    assert ours - kernel.costs().evaluate(**{**kernel.values, "b": b, "s": s})["flops_forward"] == \
        LINEAR * 2 * b * (T["K"] - 1) * CONV * T["K"]
    # the textbook count differs by the chunked fallback's extra products only
    text = _tiny().costs().evaluate(**{**_tiny().values, "b": b, "s": s})["flops_forward"]
    assert ours - text == LINEAR * (_core(b, s, True) - _core(b, s, False))


def test_verify_agrees_under_the_chunked_convention(torch_model, tmp_path):
    # `costgraph verify qwen3_next_chunked --hf tiny.json`: parameters and forward FLOPs exact (the
    # convolution padded as transformers' causal_conv1d_fn fallback runs it, above); the KV cache differs by
    # the linear layers' states exactly: torch_measure.kv_cache_bytes reads the cache layers' keys and
    # values only, not conv_states / recurrent_states (constant in s, b states per batch)
    from costgraph.verify import verify
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    shapes = ((1, 16), (2, 100))
    v = verify(str(path), model="qwen3_next_chunked", shapes=shapes)
    q = {x.name: x for x in v.quantities}
    assert q["parameters"].exact and q["parameters"].torch == [257_376]
    assert q["forward FLOPs"].exact and q["forward FLOPs"].diffs == [0, 0]
    state = LINEAR * (T["hv"] * T["dk"] * T["dv"] + CONV * T["K"]) * 2
    assert q["KV cache bytes"].diffs == [-b * state for b, _ in shapes]
    assert q["KV cache bytes"].torch == [b * s * FULL * 2 * T["kv"] * T["d"] * 2 for b, s in shapes]


# ------------------------------------------------------------------ Falcon-H1

#: a small Falcon-H1: 2 layers, Mamba-2 with 6 heads of 16 in 2 groups, state 8, chunk 16, gated RMSNorm
FH1 = dict(model_type="falcon_h1", vocab_size=128, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
           num_attention_heads=4, num_key_value_heads=2, head_dim=16, mamba_d_ssm=96, mamba_n_heads=6,
           mamba_n_groups=2, mamba_d_state=8, mamba_d_conv=4, mamba_chunk_size=16, max_position_embeddings=512,
           mamba_rms_norm=True)
F = dict(V=128, h=64, l=2, a=4, kv=2, d=16, i=96, di=96, hm=6, G=2, N=8, K=4, C=16)
FCONV = F["di"] + 2 * F["G"] * F["N"]                 # conv1d channels: x, B, C
FH1_DEFAULTS = HF / "falcon-h1-config-defaults.json"


def _fh1_params(norm=True) -> int:
    """FalconH1ForCausalLM's parameters written out module by module (modeling_falcon_h1.py)."""
    V, h, l, a, kv, d, i, di, hm, G, N, K = (F[x] for x in "V h l a kv d i di hm G N K".split())
    mamba = h * (2 * di + 2 * G * N + hm) + FCONV * K + FCONV + 3 * hm + (di if norm else 0) + di * h
    attn = h * a * d + 2 * h * kv * d + a * d * h
    return l * (mamba + attn + 3 * h * i + 2 * h) + 2 * V * h + h


def _fh1_scan(b, s, chunked):
    di, hm, N, C = F["di"], F["hm"], F["N"], F["C"]
    if not chunked:
        return 2 * b * s * di * N
    c = -(-s // C)
    return 2 * b * hm * c * C * C * (N + di // hm) + 4 * b * c * C * di * N + 2 * b * (c + 1) ** 2 * di * N


def _fh1_forward(b, s, chunked) -> int:
    V, h, l, a, kv, d, i, di, hm, G, N, K = (F[x] for x in "V h l a kv d i di hm G N K".split())
    t = b * s
    mamba = 2 * t * h * (2 * di + 2 * G * N + hm) + 2 * b * (s + K - 1) * FCONV * K + _fh1_scan(b, s, chunked) \
        + 2 * t * di * h   # the convolution padded (option conv_padded), as for Qwen3-Next above
    attn = 2 * t * h * (2 * a * d + 2 * kv * d) + 4 * b * s * s * a * d
    return l * (mamba + attn + 6 * t * h * i) + 2 * t * h * V


def _fh1(**options):
    return from_hf_config(dict(FH1), options=options or None)


def test_fh1_parameters_written_out():
    assert _fh1_params() == 121_380 and _fh1_params(norm=False) == 121_380 - 2 * 96
    hf = _fh1()
    assert hf.costs().evaluate(**hf.values)["params"] == 121_380
    plain = from_hf_config({**FH1, "mamba_rms_norm": False})
    assert plain.costs().evaluate(**plain.values)["params"] == 121_380 - 2 * 96


@pytest.mark.parametrize("b, s", [(1, 16), (2, 40), (1, 5)])
@pytest.mark.parametrize("chunked", [False, True])
def test_fh1_forward_flops_written_out(b, s, chunked):
    hf = _fh1(chunked_flops=True) if chunked else _fh1()
    assert hf.costs().evaluate(**{**hf.values, "b": b, "s": s})["flops_forward"] == _fh1_forward(b, s, chunked)


def test_fh1_defaults_example_parameters():
    # FalconH1Config's defaults (examples/hf/SOURCES.md); transformers 5.24 on meta gives the same
    from costgraph.language.hf_config import load_hf_config
    hf = load_hf_config(str(FH1_DEFAULTS))
    assert hf.costs().evaluate(**hf.values)["params"] == 8_514_961_408
    assert costgraph.load("falcon_h1").costs().evaluate(config="falcon-h1-defaults")["params"] == 8_514_961_408


def test_fh1_inference_state_is_constant_in_the_prompt_length():
    m = load_for_inference("falcon_h1")
    inf = Inference(m)
    v = {**m.values("falcon-h1-defaults"), inf.b: 1}
    # every one of the 32 layers: SSM state [hm, di/hm, N] = [128, 8, 256] and conv state [di + 2·G·N, K]
    # = [1536, 4], bf16; and K, V of 8 heads of 128 per position, bf16
    state = 32 * (1024 * 256 + (1024 + 2 * 256) * 4) * 2
    per_token = 32 * 2 * 8 * 128 * 2
    assert state == 17_170_432 and per_token == 131_072
    assert inf.state_bytes().xreplace(v) == state
    for n in (100, 8192):
        assert inf.kv_cache_bytes(n).xreplace(v) == n * per_token + state
        dec = inf.step(1, n)
        assert dec.kv_read.xreplace(v) == n * per_token + state
        assert dec.kv_written.xreplace(v) == per_token + state


@pytest.mark.parametrize("key, value", [("hidden_act", "gelu"), ("attention_bias", True), ("mlp_bias", True),
                                        ("projectors_bias", True), ("mamba_conv_bias", False),
                                        ("mamba_proj_bias", True)])
def test_fh1_variants_the_model_file_does_not_describe_are_refused(key, value):
    with pytest.raises(CostgraphValueError, match=key):
        from_hf_config({**FH1, key: value})


def test_fh1_derive_train_infer_run_on_the_defaults(cg):
    r = cg("derive", str(FH1_DEFAULTS))
    assert r.returncode == 0, r.stderr
    assert "8,514,961,408" in r.stdout
    r = cg("train", str(FH1_DEFAULTS), "--format", "json")
    assert r.returncode == 0, r.stderr
    outs = [json.loads(cg("infer", str(FH1_DEFAULTS), "--prompt", str(p), "--generate", "100",
                            "--format", "json").stdout) for p in (1000, 8000)]
    assert outs[0]["state_bytes"]["value"] == outs[1]["state_bytes"]["value"] == 17_170_432
    assert outs[1]["kv_cache_bytes"]["value"] - outs[0]["kv_cache_bytes"]["value"] == 7000 * 131_072


@pytest.fixture(scope="module")
def fh1_torch():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph import torch_measure as tm
    return tm, tm.build_meta("falcon_h1", {k: v for k, v in FH1.items() if k != "model_type"})


def test_fh1_parameters_equal_transformers_on_meta(fh1_torch):
    tm, model = fh1_torch
    assert tm.param_count(model) == _fh1_params() == 121_380


@pytest.mark.parametrize("b, s", [(1, 16), (2, 40)])
def test_fh1_forward_flops_equal_flopcountermode(fh1_torch, b, s):
    # the convolution padded as the causal_conv1d_fn fallback runs it (as for Qwen3-Next above): exact
    tm, model = fh1_torch
    measured = tm.flops(model, b, s)["forward"]
    hf = _fh1(chunked_flops=True)
    ours = hf.costs().evaluate(**{**hf.values, "b": b, "s": s})["flops_forward"]
    assert measured == ours == _fh1_forward(b, s, True)


def test_fh1_verify_agrees_under_the_chunked_convention(fh1_torch, tmp_path):
    from costgraph.verify import verify
    path = tmp_path / "config.json"
    path.write_text(json.dumps(FH1))
    shapes = ((1, 16), (2, 40))
    v = verify(str(path), model="falcon_h1_chunked", shapes=shapes)
    q = {x.name: x for x in v.quantities}
    assert q["parameters"].exact and q["parameters"].torch == [121_380]
    assert q["forward FLOPs"].exact and q["forward FLOPs"].diffs == [0, 0]   # the convolution padded, as torch
    # torch_measure.kv_cache_bytes reads keys and values only, not the Mamba layers' states
    state = F["l"] * (F["di"] * F["N"] + FCONV * F["K"]) * 2
    assert q["KV cache bytes"].diffs == [-b * state for b, _ in shapes]


# ------------------------------------------------------------------ Granite 4.0 hybrid (granitemoehybrid)

#: a small Granite 4 hybrid: layers mamba, mamba, mamba, attention; Mamba-2 8 heads of 16 in 2 groups, state 8
GR = dict(model_type="granitemoehybrid", vocab_size=128, hidden_size=64, intermediate_size=32, num_hidden_layers=4,
          num_attention_heads=4, num_key_value_heads=2, mamba_n_heads=8, mamba_n_groups=2, mamba_d_state=8,
          mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=16, max_position_embeddings=512, num_local_experts=4,
          num_experts_per_tok=2, shared_intermediate_size=48, position_embedding_type="rope",
          layer_types=["mamba", "mamba", "mamba", "attention"])
GCONV = 128 + 2 * 2 * 8                              # conv1d channels: x (di = 2·64), B, C
GR_DEFAULTS = HF / "granitemoehybrid-config-defaults.json"


def _gr_params() -> int:
    """GraniteMoeHybridForCausalLM's parameters written out (modeling_granitemoehybrid.py)."""
    h, di, hm, ng, N, K, a, kv, d, i, i_s, E, V = 64, 128, 8, 2, 8, 4, 4, 2, 16, 32, 48, 4, 128
    mamba = h * (2 * di + 2 * ng * N + hm) + GCONV * K + GCONV + 3 * hm + di + di * h
    attn = h * a * d + 2 * h * kv * d + a * d * h
    ffn = E * h + E * 3 * h * i + 3 * h * i_s + 2 * h
    return 3 * mamba + attn + 4 * ffn + 2 * V * h + h


def test_gr_parameters_written_out():
    assert _gr_params() == 249_704
    hf = from_hf_config(dict(GR))
    assert hf.values["la"] == 1
    assert hf.costs().evaluate(**hf.values)["params"] == 249_704


def test_gr_defaults_example_parameters():
    # GraniteMoeHybridConfig's defaults + a written layer_types (examples/hf/SOURCES.md); transformers on meta
    from costgraph.language.hf_config import load_hf_config
    v = load_hf_config(str(GR_DEFAULTS)).costs().evaluate(**load_hf_config(str(GR_DEFAULTS)).values)
    assert (v["params"], v["params_active"]) == (38_311_240_704, 12_340_110_336)


def test_gr_inference_state_is_constant_in_the_prompt_length():
    m = load_for_inference("granitemoehybrid")
    inf = Inference(m)
    v = {**m.values("granite-hybrid-defaults"), inf.b: 1}
    # 24 Mamba-2 layers: state [128, 64, 256] (di·N) and conv state [8192 + 2·256, 4], bf16;
    # 8 attention layers: K, V of 32 heads of 128, bf16
    state = 24 * (8192 * 256 + (8192 + 512) * 4) * 2
    per_token = 8 * 2 * 32 * 128 * 2
    assert state == 102_334_464 and per_token == 131_072
    assert inf.state_bytes().xreplace(v) == state
    for n in (100, 2048):
        assert inf.kv_cache_bytes(n).xreplace(v) == n * per_token + state
        assert inf.step(1, n).kv_read.xreplace(v) == n * per_token + state


@pytest.mark.parametrize("key, value", [("hidden_act", "gelu"), ("attention_bias", True), ("mamba_conv_bias", False),
                                        ("mamba_proj_bias", True), ("num_local_experts", 0),
                                        ("layer_types", ["mamba", "mlp", "mamba", "attention"])])
def test_gr_variants_the_model_file_does_not_describe_are_refused(key, value):
    with pytest.raises(CostgraphValueError, match=key):
        from_hf_config({**GR, key: value})


def test_gr_derive_train_infer_run(cg):
    r = cg("derive", str(GR_DEFAULTS))
    assert r.returncode == 0, r.stderr
    assert "38,311,240,704" in r.stdout
    assert cg("train", str(GR_DEFAULTS), "--format", "json").returncode == 0
    outs = [json.loads(cg("infer", str(GR_DEFAULTS), "--prompt", str(p), "--generate", "10",
                            "--format", "json").stdout) for p in (100, 2000)]
    assert outs[0]["state_bytes"]["value"] == outs[1]["state_bytes"]["value"] == 102_334_464


@pytest.fixture(scope="module")
def gr_torch():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph import torch_measure as tm
    return tm, tm.build_meta("granitemoehybrid", {k: v for k, v in GR.items() if k != "model_type"})


def test_gr_parameters_equal_transformers_on_meta(gr_torch):
    tm, model = gr_torch
    assert tm.param_count(model) == _gr_params() == 249_704


@pytest.mark.parametrize("b, s", [(1, 16), (2, 40)])
def test_gr_forward_flops_equal_flopcountermode(gr_torch, b, s):
    # chunked convention, the convolution padded (option conv_padded, the default); routed experts' grouped_mm
    # counted
    tm, model = gr_torch
    measured = tm.flops(model, b, s)["forward"]
    hf = from_hf_config(dict(GR), options={"chunked_flops": True})
    ours = hf.costs().evaluate(**{**hf.values, "b": b, "s": s})["flops_forward"]
    assert measured == ours
    kernel = from_hf_config(dict(GR), options={"chunked_flops": True, "conv_padded": False})
    assert ours - kernel.costs().evaluate(**{**kernel.values, "b": b, "s": s})["flops_forward"] == \
        3 * 2 * b * 3 * GCONV * 4   # the 3 Mamba-2 layers' K − 1 = 3 extra positions
    text = from_hf_config(dict(GR))
    c = -(-s // 16)
    chunked = 2 * b * 8 * c * 16 * 16 * (8 + 16) + 4 * b * c * 16 * 128 * 8 + 2 * b * (c + 1) ** 2 * 128 * 8
    assert ours - text.costs().evaluate(**{**text.values, "b": b, "s": s})["flops_forward"] == \
        3 * (chunked - 2 * b * s * 128 * 8)
