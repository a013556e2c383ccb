"""Inference: KV cache in any dtype, prefill/decode steps, roofline, capacity (issue 9).

Sources of the figures: DOMAIN.md §6 (the seed's GPT-3 KV cache 4blh(s+n)), §8 (Llama-2-70B
GQA cache 1,280 MiB; MLA caches kv_lora_rank + qk_rope_head_dim = 512 + 64 values per token
per layer); configs in models/*.cg (published config.json values); H100 SXM from hardware.toml.
"""

import sympy
import pytest

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.inference import G, P, Inference, infer, load, machine, step_seconds
from costgraph.inference.roofline import compute_bound_batch
import subprocess
from costgraph import cli
import json
import re
from costgraph.cli import main
from tests.device_memory import H100_SXM_CUDA


def _vals(model, config, **over):
    return model.values(config, **over)


@pytest.fixture(scope="module")
def llama():
    return load("llama")


def test_gpt3_kv_cache_of_the_seed():
    # DOMAIN.md §6: 4 b l h (s + n) bytes, b = 64, s = 512, n = 32 → 164,282,499,072
    m = load("gpt")
    inf = Inference(m)
    v = _vals(m, "gpt3-175b", b=64)
    e = inf.kv_cache_bytes(P + G)
    assert e.xreplace({**v, P: 512, G: 32}) == 164_282_499_072
    h, l, b = (m.graph.dims[x].symbol for x in "hlb")
    assert sympy.expand(e - 4 * b * l * h * (P + G)) == 0


def test_llama2_70b_gqa_cache(llama):
    # DOMAIN.md §8: 8 KV heads of 128, 80 layers, 4,096 tokens, bf16 = 1,280 MiB
    inf = Inference(llama)
    v = _vals(llama, "llama-2-70b", b=1)
    assert inf.kv_cache_bytes(4096).xreplace(v) == 1_342_177_280 == 1280 * 2**20


def test_llama3_70b_int8_and_fp8_kv(llama):
    v = _vals(llama, "llama-3-70b", b=1)
    bf16 = Inference(llama).kv_cache_bytes(4096).xreplace(v)
    int8 = Inference(llama, kv="int8").kv_cache_bytes(4096).xreplace(v)
    per_token_head = Inference(llama, kv="int8-per-token-head").kv_cache_bytes(4096).xreplace(v)
    fp8 = Inference(llama, kv="fp8").kv_cache_bytes(4096).xreplace(v)
    assert bf16 == 1_342_177_280
    # issue 17: --kv int8 is per-tensor, as TensorRT-LLM's INT8 KV cache (one fp32 kv_cache_scaling_factor per
    # layer, K and V; vllm @ 190900b9 quantization/kv_cache.py::BaseKVCacheMethod keeps scalar k_scale, v_scale):
    # 1 byte per element + 4 B per cached tensor (K and V of 80 layers). Until issue 17: 681,574,400 (below).
    assert int8 == bf16 / 2 + 160 * 4 == 671_089_280
    # int8-per-token-head (the old int8; LMDeploy kv_quant): + one fp16 scale per token per KV head:
    # 2 (K, V) · 80 layers · 8 heads · 2 B per token
    assert per_token_head == bf16 / 2 + 4096 * 2 * 80 * 8 * 2 == 681_574_400
    # fp8: one fp32 scale per cached tensor (K and V of 80 layers)
    assert fp8 == bf16 / 2 + 160 * 4 == 671_089_280


def test_mla_caches_its_latent():
    # DeepSeek-V3: (kv_lora_rank 512 + qk_rope_head_dim 64) · 61 layers · 2 bytes per token
    m = load("deepseek_v3")
    inf = Inference(m)
    assert inf.kv_cache_bytes_per_token().xreplace(_vals(m, "deepseek-v3")) == (512 + 64) * 61 * 2 == 70_272


def test_sliding_window_and_hybrid_caches():
    m = load("mistral")
    v = _vals(m, "mistral-7b", b=1)     # w = 4096
    per = 2 * 32 * 8 * 128 * 2
    inf = Inference(m)
    assert inf.kv_cache_bytes(8192).xreplace(v) == per * 4096
    assert inf.kv_cache_bytes(1000).xreplace(v) == per * 1000
    g = load("gemma2")                    # 42 layers: 21 local (w = 4096), 21 global
    gv = _vals(g, "gemma-2-9b", b=1)
    per_layer = 2 * 8 * 256 * 2
    assert Inference(g).kv_cache_bytes(8192).xreplace(gv) == 21 * per_layer * (4096 + 8192)


def test_paged_rounding(llama):
    inf = Inference(llama)
    v = _vals(llama, "llama-3-8b", b=1)
    per = inf.kv_cache_bytes_per_token().xreplace(v)
    assert inf.kv_cache_bytes(17, page=16).xreplace(v) == 32 * per
    assert inf.kv_cache_bytes(16, page=16).xreplace(v) == 16 * per


@pytest.mark.parametrize("name", ["gpt", "llama", "mistral", "mixtral", "qwen3_moe", "gemma2", "falcon",
                                  "gpt_neox", "opt", "deepseek_v3"])
@pytest.mark.parametrize("convention", ["matmul", "all"])
def test_prefill_is_derive_at_q_equal_s(name, convention):
    # the split key axis changes nothing when q = s and n = 0: prefill = derive's forward pass
    m = load(name)
    inf = Inference(m, convention=convention)
    ref = costgraph.load(name, dropout=False).costs(convention=convention)
    assert sympy.expand(inf.prefill(inf.s).flops - ref.flops_forward) == 0
    assert sympy.expand(inf.kv_cache_bytes() - ref.kv_cache_bytes) == 0


def test_decode_attention_spans_the_cache():
    # GPT: a decode step at n cached positions: 24 b h^2 l + 2 b h V + 4 b h l (n + 1)
    m = load("gpt")
    inf = Inference(m)
    n = sympy.Symbol("n", integer=True, nonnegative=True)
    b, h, l, V = (m.graph.dims[x].symbol for x in ("b", "h", "l", "V"))
    assert sympy.expand(inf.step(1, n).flops - (24 * b * h**2 * l + 2 * b * h * V + 4 * b * h * l * (n + 1))) == 0
    half = Inference(m, causal="half").step(1, n).flops
    assert sympy.expand(half - (24 * b * h**2 * l + 2 * b * h * V + 4 * b * h * l * (n + sympy.Rational(1, 2)))) == 0


def test_moe_reads_expected_distinct_experts():
    m = load("mixtral")
    inf = Inference(m)
    v = _vals(m, "mixtral-8x7b")
    one = inf.step(1, 100).weight_bytes.xreplace({**v, inf.b: 1})
    assert one == 2 * 12_879_925_248           # one token reads k = 2 experts: the active parameters
    big = inf.step(1, 100).weight_bytes.xreplace({**v, inf.b: 4096})
    assert abs(big - 2 * 46_702_792_704) < 1   # (3/4)^4096 of an expert left unread
    k, E = m.graph.dims["k"].symbol, m.graph.dims["E"].symbol
    assert (1 - k / E) ** inf.b in inf.step(1, 100).weight_bytes.atoms(sympy.Pow) or \
        any(isinstance(a, sympy.Pow) and a.exp == inf.b for a in inf.step(1, 100).weight_bytes.atoms(sympy.Pow))


def test_llama2_7b_decode_is_memory_bound(llama):
    inf = Inference(llama)
    v = {**_vals(llama, "llama-2-7b", b=1), P: 512, G: 2}
    hw = machine("h100-sxm", "bf16")
    dec = inf.decode()
    t = step_seconds(dec, hw).xreplace(v)
    assert t == dec.bytes.xreplace(v) / 3_350_000_000_000     # every op on the bandwidth roof
    w = dec.weight_bytes.xreplace(v)
    assert w == 13_476_831_232 and t > w / 3_350_000_000_000
    assert float(t / (w / 3_350_000_000_000)) < 1.04          # ≈ weight bytes / bandwidth


def test_compute_bound_batch_is_exact(llama):
    inf = Inference(llama)
    b = inf.b
    v = {k: x for k, x in {**_vals(llama, "llama-3-8b"), P: 64, G: 2}.items() if k != b}
    hw = machine("h100-sxm", "bf16")
    dec = inf.decode()
    root, whole = compute_bound_batch(dec, hw, b, v)
    gap = (dec.flops / hw.peak - dec.bytes / hw.bandwidth).xreplace(v)
    r = root.xreplace(v)
    assert r.is_Rational and gap.xreplace({b: r}) == 0
    assert gap.xreplace({b: whole}) >= 0 > gap.xreplace({b: whole - 1})
    assert whole == 379
    # the closed form W·peak / (F₁·BW − K₁·peak): weight bytes W, FLOPs F₁ and KV bytes K₁ per sequence
    W = dec.weight_bytes.xreplace(v)
    F1 = sympy.cancel(dec.flops.xreplace(v) / b)
    K1 = sympy.cancel((dec.kv_read + dec.kv_written).xreplace(v) / b)
    assert r == W * hw.peak / (F1 * hw.bandwidth - K1 * hw.peak)


def test_tp_divides_weights(llama):
    v = _vals(llama, "llama-2-7b")
    one = Inference(llama).weight_memory().xreplace(v)
    two = Inference(llama, t=2).weight_memory().xreplace(v)
    norms = (2 * 32 + 1) * 4096 * 2                          # RMSNorm scales stay whole
    assert two == (one - norms) / 2 + norms
    s2 = Inference(llama, t=2).decode()
    # o_proj and down_proj of every layer, and the vocabulary-parallel embedding
    assert sorted(a.path for a in s2.allreduce) == ["embed_tokens", "layers/layer/mlp/down_proj",
                                                    "layers/layer/self_attn/o_proj"]


def test_int4_weights_awq_layout(llama):
    # one [4096, 4096] linear: 4 bits per weight + (16-bit scale + 4-bit zero) per 128 inputs per output
    inf = Inference(llama, weights="int4")
    wid = "layers/layer/self_attn/q_proj/weight"
    v = _vals(llama, "llama-2-7b")
    assert inf.weight_copy_bytes(wid).xreplace(v) == 4096 * 4096 // 2 + 4096 * 32 * 20 // 8


def test_infer_report_and_capacity(llama):
    rep = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=8, values=_vals(llama, "llama-2-7b"))
    v = rep.values
    assert v["kv_cache_bytes"] == 8 * 640 * 524_288
    cap = 76_555_644_567   # 0.9 x 79.22 GiB as CUDA reports it (runtime_memory.toml [visible.h100-sxm])
    w = v["weight_bytes"]
    per_seq = 640 * 524_288
    assert v["max_batch"] == (cap - w) // per_seq
    assert v["time_to_first_token"] > v["time_per_output_token"] > 0
    assert v["tokens_per_second"] == 8 / v["time_per_output_token_mean"]


def test_refuses_encoder_decoder_and_plain_graphs():
    with pytest.raises(CostgraphValueError, match="decoder-only"):
        load("t5")
    with pytest.raises(CostgraphValueError, match="key axis"):
        Inference(costgraph.load("llama"))


# ---------------------------------------------------------------- PyTorch agreement

TINY = {
    "llama": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=128, max_position_embeddings=256,
                  tie_word_embeddings=False),
    "gpt2": dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=128, n_positions=64, n_ctx=64,
                 activation_function="gelu_pytorch_tanh"),
}


@pytest.mark.parametrize("family", sorted(TINY))
def test_torch_prefill_decode_and_cache(family):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import warnings

    from torch.utils.flop_counter import FlopCounterMode

    from costgraph.inference import split_keys

    cfgd = TINY[family]
    cfg = transformers.AutoConfig.for_model(**cfgd)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16).eval()
    b, prompt = 2, 12
    ids = torch.randint(0, 128, (b, prompt))
    cache = transformers.DynamicCache(config=cfg)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with FlopCounterMode(display=False) as f_pre:
            out = model(input_ids=ids, past_key_values=cache, use_cache=True)
        with FlopCounterMode(display=False) as f_dec:
            model(input_ids=out.logits[:, -1:].argmax(-1), past_key_values=cache, use_cache=True)
    cache_bytes = sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    with split_keys():
        hf = costgraph.from_hf_config(cfgd)
    inf = Inference(hf.model)
    v = {**hf.model.values(**hf.values), inf.b: b}
    assert inf.prefill(prompt).flops.xreplace(v) == f_pre.get_total_flops()
    assert inf.step(1, prompt).flops.xreplace(v) == f_dec.get_total_flops()
    assert inf.kv_cache_bytes(prompt + 1).xreplace(v) == cache_bytes


def test_windowed_causal_half_prefill_equals_derive():
    # a sliding window under --causal half: the inference prefill (q = P, n = 0) counts the same
    # pairs as derive's band (costgraph.engine.totals.causal_share), not half the band
    from costgraph.inference import Inference, load as inference_load

    m = costgraph.load("mistral")
    vals = m.values("mistral-7b", s=8192)
    want = m.costs(causal="half").evaluate(**{str(k): int(v) for k, v in vals.items()})["flops_forward"]
    inf = Inference(inference_load("mistral"), causal="half")
    step = inf.prefill(8192)
    got = step.flops.xreplace({k: v for k, v in vals.items() if str(k) != "s"})
    assert got.xreplace({sym: 1 for sym in got.free_symbols if str(sym) == "b"}) == want


# ---------------------------------------------------------------- recurrent state (Mamba, Jamba)

# mamba-130m (models/mamba.cg; state-spaces/mamba-130m-hf config.json): h 768, D = e·h = 1536,
# N 16, R 48, K 4, l 24, V 50280; transformers' parameter count 129,135,360 (tests/models/test_mamba.py)
_M130 = dict(h=768, D=1536, N=16, R=48, K=4, l=24, V=50280)


def test_mamba_decode_reads_weights_and_a_fixed_state():
    m = load("mamba")
    inf = Inference(m)
    h, D, N, R, K, l, V = (_M130[x] for x in ("h", "D", "N", "R", "K", "l", "V"))
    v = {**_vals(m, "mamba-130m"), inf.b: 1}
    # the state per sequence (Gu & Dao 2023 §3.4 / Hugging Face's MambaCache): each block's
    # convolution state [D, K] and SSM state [D, N], bf16
    state = l * (D * K + D * N) * 2
    assert state == 1_474_560
    assert inf.kv_cache_bytes(P + G).xreplace(v) == inf.state_bytes().xreplace(v) == state
    assert inf.kv_cache_bytes_per_token() == 0
    weights = 2 * 129_135_360            # bf16, the tied head read once
    assert inf.weight_memory().xreplace(v) == weights
    # a decode step reads every weight and the whole state and writes the state back, whatever n
    for n in (5, 100, 10_000):
        dec = inf.step(1, n)
        assert dec.kv_read.xreplace(v) == dec.kv_written.xreplace(v) == state
        assert dec.bytes.xreplace(v) == weights + 2 * state == 261_219_840
    # FLOPs per token ('matmul'): per block in_proj 2·h·2D, conv1d 2·D·K, x_proj 2·D·(R + 2N),
    # dt_proj 2·R·D, the scan's y = C·h 2·D·N, out_proj 2·D·h (costgraph/ops/ssm.py); the head 2·h·V
    per_token = l * (2 * h * 2 * D + 2 * D * K + 2 * D * (R + 2 * N) + 2 * R * D + 2 * D * N + 2 * D * h) + 2 * h * V
    assert inf.decode().flops.xreplace(v) == per_token == 258_011_136
    # the prefill starts from zeros: no state read, the state written once; q tokens cost q times one
    pre = inf.prefill(512)
    assert pre.kv_read == 0 and pre.kv_written.xreplace(v) == state
    assert pre.flops.xreplace(v) == 512 * per_token


def test_state_ignores_the_kv_dtype_and_scales_with_the_batch():
    m = load("mamba")
    v = _vals(m, "mamba-130m")
    b = Inference(m).b
    bf16 = Inference(m).kv_cache_bytes(P + G).xreplace({**v, b: 8})
    assert Inference(m, kv="fp8").kv_cache_bytes(P + G).xreplace({**v, b: 8}) == bf16 == 8 * 1_474_560


def test_jamba_mixes_a_growing_kv_cache_and_fixed_states():
    m = load("jamba")
    inf = Inference(m)
    v = {**_vals(m, "jamba-v0.1"), inf.b: 1}
    # Jamba-v0.1: attention in layers j % 8 == 4 of 32 (4 layers), K and V of 8 heads of 128, bf16;
    # Mamba in the other 28, states [D, K] + [D, N] with D = 2·4096
    per_token = 4 * 2 * 8 * 128 * 2
    state = 28 * 8192 * (4 + 16) * 2
    assert inf.kv_cache_bytes_per_token().xreplace(v) == per_token == 16_384
    assert inf.state_bytes().xreplace(v) == state == 9_175_040
    assert inf.kv_cache_bytes(4096).xreplace(v) == 4096 * per_token + state
    for n in (100, 4096):
        dec = inf.step(1, n)
        assert dec.kv_read.xreplace(v) == n * per_token + state
        assert dec.kv_written.xreplace(v) == per_token + state


def test_infer_report_of_a_state_only_model():
    m = load("mamba")
    rep = infer(m, hardware="h100-sxm", prompt=512, generate=128, batch=4, values=_vals(m, "mamba-130m"))
    v = rep.values
    assert v["state_bytes"] == v["kv_cache_bytes"] == 4 * 1_474_560
    assert v["max_context"] is None and v["context_unbounded"] is True
    # capacity: weights + b states ≤ 0.9 x 79.22 GiB (h100-sxm as CUDA reports it, reserve 0.1)
    assert v["max_batch"] == (76_555_644_567 - 2 * 129_135_360) // 1_474_560


# --- no sizes: the missing ones named, exit 2, no traceback (issue 18) -----------------------------------------------

HINT = "--config NAME or --set NAME=VALUE"


def _refused(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "this is a bug" not in p.stderr, p.stderr
    return p.stderr


def test_infer_without_sizes_names_them(cg):
    err = _refused(cg("infer", "mixtral", "--hardware", "h100-sxm", "--prompt", "16", "--generate", "16"))
    assert "error: no value for E, V, a, d, h, i, k, kv, l\n" in err and HINT in err


def test_a_huge_tp_is_named_as_tp(cg):
    # trial4: infer --tp 10^21 said "gpus is over 1,000,000", a flag infer has not
    err = _refused(cg("infer", "llama", "--config", "llama-3-8b", "--prompt", "16", "--generate", "16", "--tp",
                      str(10**21)))
    assert "error: --tp 1,000,000,000,000,000,000,000: at most 1,000,000 devices" in err and "gpus" not in err


@pytest.mark.parametrize("kw, message", [(dict(kv=["fp8"]), "unknown KV cache dtype ['fp8']"),
                                         (dict(weights=["fp8"], compute="bf16"), "unknown weight dtype ['fp8']")])
def test_a_dtype_of_the_wrong_type_is_refused(kw, message):
    # trial4: Model.infer(kv=["fp8"]) raised TypeError (unhashable type: 'list')
    import costgraph
    from costgraph.errors import CostgraphValueError

    m = costgraph.load("llama")
    with pytest.raises(CostgraphValueError, match=re.escape(message)):
        m.infer(m.values("llama-3-8b"), prompt=16, generate=16, **kw)


# --- --prompt and the API's generate read as --generate is (issue 17 trial) ------------------------------------------

LLAMA = ["infer", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"]


def test_api_reads_generate_as_the_cli_does(capsys):
    # was: Model.infer(generate="1e12") refused ("must be a positive whole number, not '1e12'")
    import costgraph

    m = costgraph.load("llama")
    v = m.values("llama-3-8b")
    assert cli.main(LLAMA[:6] + ["--prompt", "100", "--generate", "1e12", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for g in ("1e12", 1e12, 10**12):
        rep = m.infer(hardware="h100-sxm", prompt=100, generate=g, values=v)
        assert json.loads(json.dumps(rep.to_dict())) == doc


def test_prompt_read_as_generate_is(capsys):
    # was: --prompt 1e7 refused ('invalid int value') while --generate 1e7 was read; --prompt 10**22 accepted
    base = LLAMA[:6] + ["--generate", "2", "--format", "json"]
    assert cli.main(base + ["--prompt", "1e7"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert cli.main(base + ["--prompt", "10**7"]) == 0
    assert json.loads(capsys.readouterr().out) == a and a["settings"]["prompt"] == 10**7
    assert cli.main(base + ["--prompt", "10**16"]) == 2
    assert "out of range" in capsys.readouterr().err


# --- past a learned position table: a warning, the context capped (new-user trial) -----------------------------------

INFER = ["infer", "gpt", "--config", "gpt2", "--hardware", "h100-sxm"]


# a learned position table: P + G > s_max warns, and the longest context is capped at s_max
def test_infer_warns_past_the_position_table_and_caps_the_context(capsys):
    assert main([*INFER, "--prompt", "100000", "--generate", "5"]) == 0
    out = capsys.readouterr().out
    warning = ("P + G = 100,005 positions is longer than s_max = 1,024: the learned position table has "
               "s_max rows, so the model cannot read that many tokens as built")
    assert out.splitlines()[-1] == "warning: " + warning
    assert "  longest context           1,024 tokens per sequence at b = 1 (s_max: the learned position " \
           "table; memory would hold 2,069,952)" in out.splitlines()
    assert main([*INFER, "--prompt", "100000", "--generate", "5", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["warnings"] == [warning]
    # memory alone: whole pages of 16 positions of 4·h·l bytes (K and V in bf16, DOMAIN.md §6) beside the
    # bf16 weights 2·124,439,808 (DOMAIN.md §1), within 0.9 × the H100's 79.22 GiB as CUDA reports it
    # (85,061,827,297 B: runtime_memory.toml [visible.h100-sxm], vllm PR #10511)
    pages = (H100_SXM_CUDA * 9 // 10 - 2 * 124_439_808) // (16 * 4 * 768 * 12)
    assert doc["max_context"] == 1024 and doc["max_context_memory"] == 16 * pages == 2_069_952
    from costgraph.export import schema as schemas

    assert list(schemas.validator("infer").iter_errors(doc)) == []
    assert main([*INFER, "--prompt", "512", "--generate", "512", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []    # P + G = s_max: no warning
