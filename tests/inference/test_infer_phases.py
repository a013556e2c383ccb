"""Inference on models whose parts run at different rates (issue 19, i19phase).

What runs once per request (costgraph/inference/request.py) is read from the graph: the
operators computed from model inputs but from no token (role ``index``). They run in the
prefill step only; the K/V they cache keep a fixed length.

Sources of the closed forms below:
* transformers 5.24 ``models/whisper/modeling_whisper.py::WhisperAttention.forward``: a
  cross-attention layer projects K/V from the encoder's output once and stores them in
  ``EncoderDecoderCache.cross_attention_cache``; while ``cache.is_updated[layer_idx]`` later steps
  read them back (no k_proj/v_proj); ``WhisperDecoder`` runs self-attention over its growing
  ``self_attention_cache``; ``generate`` runs the encoder once (``encoder_outputs``).
* ``cache_utils.py::EncoderDecoderCache``: a self-attention and a cross-attention cache, each K and
  V ``[b, heads, len, h/heads]`` per decoder layer (measured below on a small torch model).
* ``models/llava/modeling_llava.py::LlavaForConditionalGeneration``: the vision tower and the
  projector run only when ``pixel_values`` is given, which ``prepare_inputs_for_generation``
  passes on the first step only.
Convention: ``matmul`` FLOPs (2 per multiply-add), attention ``full`` (q·(n + q) pairs), bf16.
"""

from __future__ import annotations

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.inference import load
from costgraph.inference.phases import G, P, Inference, split_keys

S = {n: sympy.Symbol(n, positive=True, integer=True)
     for n in ("b", "mel", "e", "t", "t_max", "h", "a_dec", "f", "f_dec", "l_enc", "l_dec", "V",
               "a", "kv", "d", "i", "l")}


@pytest.fixture(scope="module")
def whisper():
    return Inference(load("whisper"))


def test_whisper_splits_encoder_and_cross_kv_from_the_decoder(whisper):
    assert whisper.s == S["t"]
    assert [e.path for e in whisper.kv_entries] == ["decoder/self_attn/k_cache", "decoder/self_attn/v_cache"]
    assert [e.path for e in whisper.fixed] == ["decoder/encoder_attn/k_cache", "decoder/encoder_attn/v_cache"]
    assert {"conv1", "conv2", "encoder/mlp/fc1", "encoder_layer_norm", "decoder/encoder_attn/k_proj",
            "decoder/encoder_attn/v_proj", "embed_positions"} <= whisper.once
    assert not any(p.startswith(("decoder/self_attn", "decoder/mlp")) or p == "decoder/encoder_attn/q_proj"
                   for p in whisper.once)


def test_whisper_prefill_flops(whisper):
    """Prefill of P decoder tokens: the encoder over e = frames/2 positions (conv1: 2·3·mel·h per
    output over 2e frames; conv2: 2·3·h·h over e; per layer 4 projections 8eh², QKᵀ and PV 4e²h,
    MLP 4ehf), the cross K/V once (4eh² per decoder layer), the decoder over P (12Ph² projections,
    4P²h self-attention, 4Peh cross-attention, 4Phf_dec MLP per layer) and the head 2PhV."""
    b, e, h, mel, V = S["b"], S["e"], S["h"], S["mel"], S["V"]
    le, ld, f, fd = S["l_enc"], S["l_dec"], S["f"], S["f_dec"]
    encoder = 12 * e * mel * h + 6 * e * h**2 + le * (8 * e * h**2 + 4 * e**2 * h + 4 * e * h * f)
    cross_kv = ld * 4 * e * h**2
    decoder = ld * (12 * P * h**2 + 4 * P**2 * h + 4 * P * e * h + 4 * P * h * fd) + 2 * P * h * V
    assert sympy.expand(whisper.prefill().flops - b * (encoder + cross_kv + decoder)) == 0


def test_whisper_decode_flops_count_only_the_decoder(whisper):
    """A decode step (q = 1, n cached): self-attention 8h² + 4h(n + 1), cross-attention q and out 4h²
    and 4eh over the fixed cache, MLP 4hf_dec per layer, the head 2hV; no encoder, no cross k/v."""
    b, e, h, V, ld, fd = S["b"], S["e"], S["h"], S["V"], S["l_dec"], S["f_dec"]
    n = sympy.Symbol("n_", integer=True, nonnegative=True)
    want = b * (ld * (12 * h**2 + 4 * h * (n + 1) + 4 * e * h + 4 * h * fd) + 2 * h * V)
    assert sympy.expand(whisper.step(1, n).flops - want) == 0
    assert sympy.expand(whisper.decode().flops - want.subs(n, P + G - 2)) == 0


def test_whisper_cache_bytes_self_plus_cross(whisper):
    """EncoderDecoderCache in bf16: self 2·2·b·h·l_dec per position (P + G), cross the same per
    encoder position (e), written by the prefill and read whole by every decode step."""
    b, e, h, ld = S["b"], S["e"], S["h"], S["l_dec"]
    per = 4 * b * h * ld
    assert sympy.expand(whisper.kv_cache_bytes(P + G) - per * (P + G + e)) == 0
    assert sympy.expand(whisper.fixed_bytes() - per * e) == 0
    assert whisper.kv_cache_bytes_per_token() == 4 * h * ld
    pre, dec = whisper.prefill(), whisper.decode()
    assert pre.kv_read == 0 and sympy.expand(pre.kv_written - per * (P + e)) == 0
    assert sympy.expand(dec.kv_read - per * (P + G - 2 + e)) == 0 and sympy.expand(dec.kv_written - per) == 0


def test_whisper_decode_reads_only_the_decoder_weights(whisper):
    """bf16 bytes a decode step reads: per decoder layer self q/k/v/out (4h², biases 3h), cross q/out
    (2h², 2h), MLP (2h·f_dec, f_dec + h), three LayerNorms (6h); the tied table V·h, the position
    table t_max·h (read whole), the final LayerNorm 2h. Not the encoder, nor cross k_proj/v_proj."""
    h, V, ld, fd, tm = S["h"], S["V"], S["l_dec"], S["f_dec"], S["t_max"]
    layer = 6 * h**2 + 12 * h + 2 * h * fd + fd
    want = 2 * (ld * layer + V * h + tm * h + 2 * h)
    assert sympy.expand(whisper.decode().weight_bytes - want) == 0


def test_whisper_capacity_counts_both_caches(capsys):
    """whisper-tiny on an H100 (79.22 GiB as CUDA reports it, reserve 0.1: 76,555,644,567 bytes): each sequence
    holds paged blocks of 16 for its P + G = 5 positions (1 block) and its e = 1500 cross positions (94 blocks),
    64·h·l_dec = 98,304 bytes a block: (76,555,644,567 − 75,521,280 weight bytes) // (98,304 · 95) = 8,189."""
    assert main(["infer", "whisper", "--config", "whisper-tiny", "--hardware", "h100-sxm", "--prompt", "4",
                 "--generate", "1", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["weight_bytes"]["value"] == 75_521_280
    assert doc["max_batch"] == (76_555_644_567 - 75_521_280) // (98_304 * 95) == 8_189
    assert "CrossAttentionSpec" in doc["serving"]["vllm"]["note"]
    assert doc["warnings"] == []


@pytest.fixture(scope="module")
def small_whisper():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.torch_speech import build_speech

    config = {"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"], "d_model": 64,
              "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 128,
              "decoder_ffn_dim": 96, "encoder_layers": 2, "decoder_layers": 3, "vocab_size": 1000,
              "num_mel_bins": 16, "max_source_positions": 30, "max_target_positions": 40, "pad_token_id": 1,
              "bos_token_id": 1, "eos_token_id": 1, "decoder_start_token_id": 1}
    return torch, build_speech(torch, "whisper", config, train=False)


@pytest.mark.parametrize("b, s", [(1, 5), (3, 9)])
def test_measured_encoder_decoder_cache(small_whisper, whisper, b, s):
    """The EncoderDecoderCache a forward of WhisperForConditionalGeneration fills (bf16, 3 decoder
    layers, h = 64, e = max_source_positions = 30): self-attention at s positions, cross at e."""
    from costgraph.torch_speech import encoder_decoder_cache_bytes

    torch, model = small_whisper
    got = encoder_decoder_cache_bytes(torch, model, b, s)
    values = {S["b"]: b, S["h"]: 64, S["l_dec"]: 3, S["e"]: 30, S["a_dec"]: 4}
    assert got["self"] == (whisper.kv_cache_bytes(s) - whisper.fixed_bytes()).xreplace(values) == 4 * b * 64 * 3 * s
    assert got["cross"] == whisper.fixed_bytes().xreplace(values) == 4 * b * 64 * 3 * 30
    assert got["total"] == whisper.kv_cache_bytes(s).xreplace(values)


def test_llava_vision_tower_runs_at_prefill_only():
    """LLaVA's decode step is its Llama decoder's alone: q/o 2·h·a·d each, k/v 2·h·kv·d each,
    QKᵀ and PV 4·a·d·(n + 1), SwiGLU MLP 6·h·i per layer, the head 2hV; the prefill keeps the tower."""
    inf = Inference(load("llava"))
    assert not inf.fixed and "embeddings/patch_embedding" in inf.once and "multi_modal_projector/linear_2" in inf.once
    b, h, a, kv, d, i, l, V = (S[k] for k in ("b", "h", "a", "kv", "d", "i", "l", "V"))
    n = sympy.Symbol("n_", integer=True, nonnegative=True)
    want = b * (l * (4 * h * a * d + 4 * h * kv * d + 4 * a * d * (n + 1) + 6 * h * i) + 2 * h * V)
    assert sympy.expand(inf.step(1, n).flops - want) == 0
    # the prefill is the whole forward at s = P (derive's matmul FLOPs, the tower included)
    m = costgraph.load("llava", dropout=False)
    s = m.graph.dims["s"].symbol
    assert sympy.expand(inf.prefill().flops - m.costs().flops_forward.xreplace({s: P})) == 0
    assert "vision_layers/layer/mlp/fc1" not in {o.path for o in inf.decode().ops}


PROBE = """
model probe {
  dim b "batch"
  dim s "tokens"
  dim m "memory positions"
  dim h "width"
  input memory[b, m, h]
  input tokens[b, s]: index
  x = embedding(tokens, 50, h, name = embed)
  y = gelu(linear(memory, h, name = enc))
  q = split_heads(linear(x, h, name = q_proj), 2)
  k = cache(split_heads(linear(y, h, name = k_proj), 2), name = k_cache)
  v = cache(split_heads(linear(y, h, name = v_proj), 2), name = v_cache)
  return linear(merge_heads(matmul(softmax(matmul(q, transpose(k))), v)), h, name = out)
}
"""


def test_any_model_written_in_the_language_gets_the_split():
    """A cross-attention probe with no Whisper name in it: `enc`, k/v over the memory run once; the
    decode step is the q and out projections 4h², QKᵀ and PV 4·m·h over the fixed cache."""
    with split_keys():
        inf = Inference(costgraph.loads(PROBE, path="probe.cg", dropout=False))
    b, m, h = (sympy.Symbol(x, positive=True, integer=True) for x in ("b", "m", "h"))
    assert inf.once >= {"enc", "gelu", "k_proj", "v_proj"} and [e.path for e in inf.fixed] == ["k_cache", "v_cache"]
    assert sympy.expand(inf.decode().flops - b * (4 * h**2 + 4 * m * h)) == 0
    assert sympy.expand(inf.prefill().flops - b * (6 * m * h**2 + 4 * P * h**2 + 4 * P * m * h)) == 0
    assert sympy.expand(inf.kv_cache_bytes(P + G) - 2 * 2 * b * m * h) == 0


def test_decoder_only_models_have_no_per_request_part():
    inf = Inference(load("gpt"))
    assert inf.once == set() and inf.fixed == []


def test_shared_prefix_refused_with_a_per_request_part(whisper):
    """Prefix caching shares per-position KV blocks; an encoder runs on each request's own audio."""
    from costgraph.errors import CostgraphValueError
    from costgraph.inference.prefill_modes import check_prefix

    with pytest.raises(CostgraphValueError, match="once per request"):
        check_prefix(whisper, 2, 8)


# --- gpt-oss (attention sinks): prefill and decode from models/gpt_oss.cg (new-user trial) ---------------------------

# gpt-oss (attention sinks) is decoder-only: infer works, figures from models/gpt_oss.cg's formulas
OSS = dict(h=2880, a=64, kv=8, d=64, i=2880, E=32, k=4, w=128, l=24, V=201088)   # gpt-oss-20b config.json


def _oss_layer_linear_flops(c):
    """Per token, 'matmul': q/k/v/o projections, the router, k of E experts (gate_up h→2i, down i→h)."""
    return (2 * c["h"] * c["a"] * c["d"] * 2 + 2 * 2 * c["h"] * c["kv"] * c["d"] + 2 * c["h"] * c["E"]
            + c["k"] * (2 * c["h"] * 2 * c["i"] + 2 * c["i"] * c["h"]))


def test_gpt_oss_infer_prefill_and_decode():
    from costgraph.inference import Inference, infer, load

    c = OSS
    m = load("gpt_oss")
    rep = infer(m, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=m.values("gpt-oss-20b"))
    v = rep.values
    half = c["l"] // 2            # even layers sliding (window w), odd layers full
    P, n = 512, 512 + 128 - 2     # decode: the last step, n cached positions
    head = 2 * c["h"] * c["V"]
    # QKᵀ and scores·V, 2·a·d per query-key pair each, over n + q keys (Min(·, w) in the sliding layers)
    prefill = c["l"] * _oss_layer_linear_flops(c) * P + 4 * c["a"] * c["d"] * P * half * (P + min(P, c["w"])) \
        + head * P
    decode = c["l"] * _oss_layer_linear_flops(c) + 4 * c["a"] * c["d"] * half * (n + 1 + min(n + 1, c["w"])) + head
    assert v["prefill.flops"] == prefill == 3_758_138_327_040
    assert v["decode.flops"] == decode == 7_365_083_136
    # parameters: attention with biases and a sinks entries, two RMSNorms, router with bias, E experts
    attn = 2 * c["h"] * c["a"] * c["d"] + c["a"] * c["d"] + 2 * (c["h"] * c["kv"] * c["d"] + c["kv"] * c["d"]) \
        + c["h"] + c["a"]
    expert = 3 * c["h"] * c["i"] + 2 * c["i"] + c["h"]
    rest = c["l"] * (attn + 2 * c["h"] + c["h"] * c["E"] + c["E"]) + 2 * c["V"] * c["h"] + c["h"]
    assert rest + c["l"] * c["E"] * expert == 20_914_757_184      # the model card's 20.91B (test_hf_families_c)
    # bf16 weights: all of them in memory; a one-token decode step reads k of the E experts of each layer
    assert v["weight_bytes"] == 2 * (rest + c["l"] * c["E"] * expert)
    assert v["decode.weight_bytes"] == 2 * (rest + c["l"] * c["k"] * expert)
    # K and V, kv heads of d in bf16 per position; the sliding layers keep Min(·, w) positions
    per = 2 * 2 * c["kv"] * c["d"]
    assert v["kv_cache_bytes"] == half * per * ((P + 128) + min(P + 128, c["w"]))
    assert v["decode.kv_read_bytes"] == half * per * (n + min(n, c["w"]))
    # the sinks add one column to every query row of the softmax ('all': 5 FLOPs an element)
    step = Inference(m, convention="all").decode()
    ops = {o.path: o.flops.xreplace(m.values("gpt-oss-20b")).xreplace(
        {sym: val for sym, val in rep.subs.items() if str(sym) in ("P", "G", "b")}) for o in step.ops}
    assert ops["layers/full/self_attn/sinks_softmax/softmax"] == 5 * c["a"] * (n + 1 + 1) * half
    assert ops["layers/sliding/self_attn/sinks_softmax/softmax"] == 5 * c["a"] * (min(n + 1, c["w"]) + 1) * half


def test_gpt_oss_infer_cli(capsys):
    assert main(["infer", "gpt_oss", "--config", "gpt-oss-20b", "--hardware", "h100-sxm", "--prompt", "512",
                 "--generate", "128", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["decode"]["flops"]["value"] == 7_365_083_136 and doc["warnings"] == []
