"""Linear-attention / state-space hybrids (issue 19): Qwen3-Next.

Sources: transformers 5.24 ``models/qwen3_next/modeling_qwen3_next.py`` (Qwen3NextForCausalLM,
Qwen3NextGatedDeltaNet, ``torch_chunk_gated_delta_rule``) and ``configuration_qwen3_next.py``;
models/qwen3_next.cg; costgraph/ops/linear_attention.py.

Conventions (named, both tested): the delta rule's FLOPs are by default the textbook count of its
recurrent form, ``6·T·hv·dk·dv`` per linear layer (state read, rank-one update, output); option
``chunked_flops`` reproduces what ``FlopCounterMode`` counts in transformers' chunked torch fallback
(the CPU path without flash-linear-attention: chunks of 64, the sequence padded to a multiple of 64,
``linalg.solve_triangular`` uncounted). The torch tier (parameters on meta, forward FLOPs) is skipped
without torch and transformers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.inference import Inference, load as load_for_inference
from costgraph.language.hf_config import from_hf_config

HF = Path(__file__).resolve().parents[1] / "examples" / "hf"
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
    linear = 2 * t * h * (2 * hk * dk + 2 * hv * dv + 2 * hv) + 2 * t * CONV * K + _core(b, s, chunked) \
        + 2 * t * hv * dv * h
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


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "costgraph.cli", *args], capture_output=True, text=True, timeout=600)


def test_derive_train_infer_run_on_the_released_config():
    r = _cli("derive", str(Q3N))
    assert r.returncode == 0, r.stderr
    assert "79,674,391,296" in r.stdout
    r = _cli("train", str(Q3N), "--set", "s=4096", "--format", "json")
    assert r.returncode == 0, r.stderr
    r = _cli("infer", str(Q3N), "--prompt", "1000", "--generate", "100", "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    r2 = _cli("infer", str(Q3N), "--prompt", "100000", "--generate", "100", "--format", "json")
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
    # outputs: FlopCounterMode counts 2·b·(s + K − 1)·C·K per linear layer, costgraph the s kept ones
    tm, model = torch_model
    measured = tm.flops(model, b, s)["forward"]         # routed experts' aten._grouped_mm counted
    conv_padding = LINEAR * 2 * b * (T["K"] - 1) * CONV * T["K"]
    hf = _tiny(chunked_flops=True)
    ours = hf.costs().evaluate(**{**hf.values, "b": b, "s": s})["flops_forward"]
    assert measured == ours + conv_padding == _tiny_forward(b, s, True) + conv_padding
    # the textbook count differs by the chunked fallback's extra products only
    text = _tiny().costs().evaluate(**{**_tiny().values, "b": b, "s": s})["flops_forward"]
    assert ours - text == LINEAR * (_core(b, s, True) - _core(b, s, False))


def test_verify_agrees_under_the_chunked_convention(torch_model, tmp_path):
    # `costgraph verify qwen3_next_chunked --hf tiny.json`: parameters exact; forward FLOPs exact up to
    # the convolution's padding (transformers' causal_conv1d_fn fallback, above); the KV cache differs by
    # the linear layers' states exactly: torch_measure.kv_cache_bytes reads the cache layers' keys and
    # values only, not conv_states / recurrent_states (constant in s, b states per batch)
    from costgraph.verify import verify
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY))
    shapes = ((1, 16), (2, 100))
    v = verify(str(path), model="qwen3_next_chunked", shapes=shapes)
    q = {x.name: x for x in v.quantities}
    assert q["parameters"].exact and q["parameters"].torch == [257_376]
    assert q["forward FLOPs"].diffs == [LINEAR * 2 * b * (T["K"] - 1) * CONV * T["K"] for b, _ in shapes]
    state = LINEAR * (T["hv"] * T["dk"] * T["dv"] + CONV * T["K"]) * 2
    assert q["KV cache bytes"].diffs == [-b * state for b, _ in shapes]
    assert q["KV cache bytes"].torch == [b * s * FULL * 2 * T["kv"] * T["d"] * 2 for b, s in shapes]
