"""Whisper (issue 19): ``models/whisper.cg``, its ``config.json`` import and
agreement with transformers 5.24's ``WhisperForConditionalGeneration`` /
``WhisperModel`` (models/whisper/modeling_whisper.py) on the meta device.

Presets: openai/whisper-tiny, -base and -large-v3 config.json (dims as the
model file's comment lists them). whisper-tiny's 37,760,640 parameters are
``sum(p.numel())`` of WhisperForConditionalGeneration built from
``WhisperConfig()`` (its defaults are whisper-tiny's dims), counting the
encoder's sinusoidal table (an nn.Embedding with requires_grad False) and the
tied proj_out once. KV cache convention: transformers' EncoderDecoderCache, per
decoder layer K and V of self-attention ``[b, a, t, h/a]`` and of
cross-attention ``[b, a, e, h/a]`` (computed once from the encoder output).
"""

from __future__ import annotations

import json

import pytest
import sympy

import costgraph
from costgraph.cli import main

TINY = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper", "activation_function": "gelu",
        "d_model": 384, "encoder_attention_heads": 6, "decoder_attention_heads": 6, "encoder_ffn_dim": 1536,
        "decoder_ffn_dim": 1536, "encoder_layers": 4, "decoder_layers": 4, "vocab_size": 51865, "num_mel_bins": 80,
        "max_source_positions": 1500, "max_target_positions": 448, "dropout": 0.0, "attention_dropout": 0.0,
        "activation_dropout": 0.0, "scale_embedding": False, "tie_word_embeddings": True}
# a small config (pad/bos/eos ids inside the vocabulary; decoder MLP width differs from the encoder's)
SMALL = {"model_type": "whisper", "d_model": 64, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
         "encoder_ffn_dim": 128, "decoder_ffn_dim": 96, "encoder_layers": 2, "decoder_layers": 2,
         "vocab_size": 1000, "num_mel_bins": 80, "max_source_positions": 1500, "max_target_positions": 448,
         "pad_token_id": 1, "bos_token_id": 1, "eos_token_id": 1, "decoder_start_token_id": 1}
TINY_PARAMS = 37_760_640
SYM = {n: sympy.Symbol(n, positive=True, integer=True)
       for n in ("b", "mel", "e", "t", "t_max", "h", "a", "a_dec", "f", "f_dec", "l_enc", "l_dec", "V")}


def test_parameters_in_the_fields_terms():
    """Stem 3·mel·h + h + 3h² + h; positions e·h (encoder, frozen) and t_max·h; per encoder layer
    4h² + 3h (k without bias) + 2hf + f + h + 4h (two LayerNorms); per decoder layer twice the
    attention, three LayerNorms; two final LayerNorms; V·h tied."""
    s = SYM
    h, f, fd = s["h"], s["f"], s["f_dec"]
    attn = 4 * h ** 2 + 3 * h
    want = (3 * s["mel"] * h + h + 3 * h ** 2 + h + s["e"] * h + s["t_max"] * h + s["V"] * h
            + s["l_enc"] * (attn + 2 * h * f + f + h + 4 * h)
            + s["l_dec"] * (2 * attn + 2 * h * fd + fd + h + 6 * h) + 4 * h)
    m = costgraph.load("whisper")
    assert sympy.expand(m.costs().params - want) == 0


def test_kv_cache_is_encoder_decoder_caches():
    """EncoderDecoderCache in bf16: l_dec · 2 (K, V) · 2 B · b · h · (t + e)."""
    s = SYM
    m = costgraph.load("whisper")
    want = s["l_dec"] * 2 * 2 * s["b"] * s["h"] * (s["t"] + s["e"])
    assert sympy.expand(m.costs().kv_cache_bytes - want) == 0


def test_encoder_length_is_half_the_frames():
    """conv2 (kernel 3, stride 2, padding 1): ⌊(2e + 2 − 3)/2⌋ + 1 = e, exactly (3000 → 1500)."""
    from costgraph.ops.vision import _out_size

    class C:
        kind = "dense_conv1d"

        def fail(self, *a, **k):
            raise AssertionError(a)

    e = SYM["e"]
    assert _out_size(C(), 2 * e, 3, 2, 1) == e
    assert _out_size(C(), 3000, 3, 2, 1) == 1500


def test_import_of_whisper_tiny():
    hf = costgraph.from_hf_config(TINY, source="whisper-tiny")
    assert hf.values == dict(mel=80, e=1500, t=448, t_max=448, h=384, a=6, a_dec=6, f=1536, l_enc=4, f_dec=1536,
                             l_dec=4, V=51865, b=1)
    assert hf.model.graph.options["head"] is True
    got = hf.costs("model", convention="matmul").evaluate(**hf.values)
    assert got["params"] == TINY_PARAMS
    assert got["kv_cache_bytes"] == 4 * 2 * 2 * 384 * (448 + 1500)
    m = costgraph.load("whisper")
    assert m.costs().evaluate(**m.configs["whisper-tiny"])["params"] == TINY_PARAMS


@pytest.mark.parametrize("changes", [{"activation_function": "relu"}, {"scale_embedding": True},
                                     {"tie_word_embeddings": False}])
def test_import_refuses_what_the_model_file_does_not_describe(changes):
    from costgraph.errors import CostgraphError

    with pytest.raises(CostgraphError):
        costgraph.from_hf_config({**TINY, **changes}, source="x")


@pytest.mark.parametrize("cmd, text", [(["derive", "whisper", "--config", "whisper-tiny"], "37,760,640"),
                                       (["train", "whisper", "--config", "whisper-large-v3"],
                                        "training memory per device")])
def test_cli_runs(cmd, text, capsys):
    assert main(cmd) == 0
    assert text in capsys.readouterr().out


def test_infer_runs_with_caches_of_two_lengths(capsys):
    """Issue 19 (i19phase): the decode phase of an encoder-decoder, the cross-attention K/V cached
    once per request at e positions beside the self-attention cache growing with P + G
    (exact figures: tests/inference/test_infer_phases.py). whisper-tiny: 4·h·l_dec·(P + G + e) = 6,144 ·
    (4 + 8 + 1500) bytes at b = 1."""
    assert main(["infer", "whisper", "--config", "whisper-tiny", "--prompt", "4", "--generate", "8",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kv_cache_bytes"]["value"] == 6_144 * (4 + 8 + 1500)


# ------------------------------------------------------------ PyTorch tier

def _hf(cls_name, config, b=2, t=7):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    from costgraph.torch_measure import meta_forward

    cfg = transformers.WhisperConfig(**{k: v for k, v in config.items() if k not in ("model_type", "architectures")})
    with torch.device("meta"):
        model = getattr(transformers, cls_name)._from_config(cfg, attn_implementation="eager", dtype=torch.bfloat16)
    model.train(False)
    params = sum(p.numel() for p in model.parameters())
    feats = torch.zeros(b, cfg.num_mel_bins, 2 * cfg.max_source_positions, dtype=torch.bfloat16, device="meta")
    ids = torch.zeros(b, t, dtype=torch.long, device="meta")
    with meta_forward(), FlopCounterMode(display=False) as fc:
        out = model(input_features=feats, decoder_input_ids=ids, use_cache=True)
    cache = out.past_key_values
    kv = 0
    for sub in (cache.self_attention_cache, cache.cross_attention_cache):
        for layer in sub.layers:
            kv += sum(x.numel() * x.element_size() for x in (layer.keys, layer.values))
    return params, fc.get_total_flops(), kv


@pytest.mark.parametrize("cls_name", ["WhisperForConditionalGeneration", "WhisperModel"])
def test_exact_against_transformers(cls_name):
    """Parameters = sum(p.numel()), forward FLOPs = FlopCounterMode, KV cache = the bytes of the
    EncoderDecoderCache transformers fills (bf16, b = 2, t = 7 decoder tokens, e = 1500)."""
    params, flops, kv = _hf(cls_name, SMALL)
    config = {**SMALL, "architectures": [cls_name]}
    hf = costgraph.from_hf_config(config, source="small")
    assert hf.model.graph.options["head"] is (cls_name == "WhisperForConditionalGeneration")
    got = hf.costs("model", convention="matmul").evaluate(**{**hf.values, "b": 2, "t": 7})
    assert (got["params"], got["flops_forward"], got["kv_cache_bytes"]) == (params, flops, kv)


@pytest.mark.parametrize("preset", ["whisper-tiny", "whisper-base", "whisper-large-v3"])
def test_presets_parameters_against_transformers(preset):
    """Each bundled preset's parameter count is sum(p.numel()) of WhisperForConditionalGeneration
    built on meta from the same dims (tiny: 37,760,640)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    m = costgraph.load("whisper")
    v = m.configs[preset]
    cfg = transformers.WhisperConfig(
        d_model=v["h"], encoder_attention_heads=v["a"], decoder_attention_heads=v["a_dec"], encoder_ffn_dim=v["f"],
        decoder_ffn_dim=v["f_dec"], encoder_layers=v["l_enc"], decoder_layers=v["l_dec"], vocab_size=v["V"],
        num_mel_bins=v["mel"], max_source_positions=v["e"], max_target_positions=v["t_max"])
    with torch.device("meta"):
        model = transformers.WhisperForConditionalGeneration(cfg)
    want = sum(p.numel() for p in model.parameters())
    assert m.costs().evaluate(**v)["params"] == want
    if preset == "whisper-tiny":
        assert want == TINY_PARAMS
    # the sinusoidal table is declared `: frozen` (WhisperEncoder.__init__: requires_grad_(False)):
    # gradients (fp32, 4 B each) for exactly the parameters that require grad
    from costgraph.training import model_states
    grads = model_states(m.graph, policy="fp32", optimizer="sgd", dp=1)["gradients"]
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == want - v["e"] * v["h"]
    assert grads.subs({m.graph.dims[k].symbol: x for k, x in v.items() if k in m.graph.dims}) == 4 * trainable


@pytest.mark.parametrize("arch, fwd", [("WhisperForConditionalGeneration", [1_535_164_416, 3_087_220_736]),
                                       ("WhisperModel", [1_534_140_416, 3_083_124_736])])
def test_verify_against_transformers_exact(tmp_path, arch, fwd):
    """``costgraph verify`` builds the class ``architectures`` names from input_features
    [b, 80, 3000] and decoder_input_ids [b, s] (costgraph.torch_speech): parameters, forward and
    backward FLOPs and saved bytes all exact (the sinusoidal table kept frozen, as transformers
    leaves it). Forward FLOPs as FlopCounterMode counts them at 1×8 and 2×16."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    path = tmp_path / "whisper.json"
    path.write_text(json.dumps({**SMALL, "architectures": [arch]}))
    v = verify(str(path), shapes=[(1, 8), (2, 16)])
    assert v.torch_class == f"{arch}FromFeatures"
    got = {q.name: q for q in v.quantities}
    assert got["parameters"].torch == [375_488]
    assert got["forward FLOPs"].torch == fwd
    # EncoderDecoderCache: l_dec · 2 (K, V) · 2 B · b · h · (s + e), e = 1500 (i19phase: compared, not skipped)
    assert got["KV cache bytes"].torch == [2 * 2 * 2 * 1 * 64 * (8 + 1500), 2 * 2 * 2 * 2 * 64 * (16 + 1500)]
    assert v.exact, [(q.name, q.diffs) for q in v.quantities]


# --- infer past the decoder's position table warns (issue 19 trial) --------------------------------------------------

def run(argv, capsys):
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


def test_whisper_infer_says_what_to_do(capsys):
    # since i19phase infer models whisper's two caches; P + G past the decoder's table of t_max = 448
    # rows warns, as s past s_max does for GPT-2
    status, out, err = run(["infer", "whisper", "--config", "whisper-tiny", "--hardware", "h100-sxm",
                            "--prompt", "1024", "--generate", "128"], capsys)
    assert status == 0, err
    assert "P + G = 1,152 positions is longer than t_max = 448" in out + err
