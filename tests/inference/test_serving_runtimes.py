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
from costgraph.cli import main
from cli_checks import run as _run, refused as _refused
from device_memory import H100_SXM_CUDA

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


# 2. Weights as vLLM loads them ("Model loading took X GiB"): the rank's parameters, the vocabulary padded
# to a multiple of 64 then split (vllm @ 7f5d141a, vllm/model_executor/layers/vocab_parallel_embedding.py:
# DEFAULT_VOCAB_PADDING_SIZE = 64, pad_vocab_size, num_embeddings_per_partition = divide(padded, tp)) and the
# rotary cos/sin cache [max_position_embeddings, rotary_dim] in the model dtype, one per get_rope key
# (vllm @ 072d10a0, vllm/model_executor/layers/rotary_embedding/base.py::_compute_cos_sin_cache, cache.to(dtype);
# rotary_embedding/__init__.py::get_rope @ 926c71f6, _ROPE_DICT). meta-llama/Llama-3.1-8B config.json
# (examples/hf/llama-3.1-8b.json): h 4096, 32 heads, 8 K/V heads of 128, i 14336, 32 layers, V 128256 (a
# multiple of 64: no padding), max_position_embeddings 131072, bf16.
H, A, KV, D, I, L, V, MAXPOS = 4096, 32, 8, 128, 14336, 32, 128256, 131072


def _llama31_vllm_weights(tp):
    layer = (H * A * D + 2 * H * KV * D + A * D * H + 3 * H * I) // tp + 2 * H   # QKV, o, gate_up, down ÷ tp; 2 norms
    params = L * layer + 2 * V * H // tp + H                                  # embed, lm_head ÷ tp; final norm
    return 2 * params + MAXPOS * D * 2                                        # bf16; cos_sin_cache bf16


# vLLM V1 (the default --vllm-engine): each attention layer also creates 7 fp32 scalars on the GPU (vllm @ 004a5da0
# vllm/attention/layer.py: set_default_quant_scales registers _k_scale, _v_scale, _q_scale, _prob_scale;
# Attention.__init__ q_range, k_range, v_range), each a 512-byte block of PyTorch's caching allocator
# (c10/cuda/CUDACachingAllocator.cpp kMinBlockSize = 512); V0 as of v0.6.4 kept the scales as Python floats
SCALARS = L * 7 * 512


@pytest.mark.parametrize("tp", [1, 2])
def test_llama31_8b_weights_as_vllm_loads_them(tp):
    rw = _report("examples/hf/llama-3.1-8b.json", tp).runtime_weights
    assert rw.bytes == _llama31_vllm_weights(tp) + SCALARS == {1: 16_094_191_616, 2: 8_064_196_608}[tp]
    terms = {t.name: t.bytes for t in rw.terms}
    assert terms["rotary cos/sin cache"] == 32 * 2**20            # 32 MiB for every Llama-3.1 run
    assert terms["vocabulary padding"] == 0
    assert terms["attention scalars"] == 114_688
    assert rw.checkpoint_bytes == 16_060_522_496                   # 8,030,261,248 parameters x 2 B
    # vLLM V1's log for Llama-3.1-8B on an L40S (vllm-project/vllm PR #17122): "Model loading took 14.9889 GiB"
    assert f"{rw.bytes / 2**30:.4f}" == {1: "14.9889", 2: "7.5104"}[tp]


def test_llama31_8b_weights_as_vllm_v0_loads_them():
    # vLLM V0's log for Llama-3.1-8B on one RTX 3090 (vllm-project/vllm issue #10517, vllm 0.6.4): "Loading model
    # weights took 14.9888 GB" (GiB, 4 decimals): no attention scalars (self._k_scale = 1.0, a Python float)
    rw = _report("examples/hf/llama-3.1-8b.json", 1, vllm_engine="v0").runtime_weights
    assert rw.bytes == _llama31_vllm_weights(1) == 16_094_076_928
    assert "attention scalars" not in {t.name for t in rw.terms}
    assert f"{rw.bytes / 2**30:.4f}" == "14.9888"


def test_vllm_engine_refused_with_hint():
    from costgraph.errors import CostgraphValueError

    with pytest.raises(CostgraphValueError) as e:   # checked before the analysis: no model needed
        infer(None, prompt=10, generate=2, batch=1, vllm_engine="v2")
    assert "v2" in str(e.value) and "v1" in (e.value.hint or "")


def test_vocabulary_padded_to_64_per_rank():
    # GPT-2 (V 50257, h 768, tied head: one table): padded to 50304, 47 rows of 768 bf16 values more
    from costgraph.inference import load
    from costgraph.inference.phases import Inference
    from costgraph.inference.runtime_weights import vocab_padding_bytes

    m = load("gpt", config="gpt2")
    values = m.values("gpt2")
    assert vocab_padding_bytes(Inference(m), values) == 47 * 768 * 2
    assert vocab_padding_bytes(Inference(m, t=2), values) == 47 * 768 * 2 // 2


# 3. The KV cache as each runtime sizes it (costgraph/inference/runtimes.py). Llama-3.1-8B on the h100-sxm preset
# (79.22 GiB = 85,061,827,297 B as CUDA reports it, infer's default memory convention: runtime_memory.toml
# [visible.h100-sxm], vllm PR #10511), the default non-torch memory 0.35 GiB, weights as vLLM loads them (TP 1).
M, NT = H100_SXM_CUDA, int(0.35 * 2**30)
CELL = 2 * L * KV * D * 2          # K and V, 32 layers, 8 heads of 128, bf16: 131,072 B per token
W1 = _llama31_vllm_weights(1)


def _runtime(runtime, *args, tp=1, **kw):
    from costgraph import cli
    import contextlib, io, json

    out = io.StringIO()
    argv = ["infer", "examples/hf/llama-3.1-8b.json", "--prompt", "1000", "--generate", "100", "--format", "json",
            "--runtime", runtime, "--tp", str(tp), *args]
    with contextlib.redirect_stdout(out):
        assert cli.main(argv) == 0
    return json.loads(out.getvalue())


def test_sglang_max_total_num_tokens():
    # sglang @ 01cc04e2 model_runner.py::profile_max_num_token: rest = available - total (1 - f),
    # max_total_num_tokens = int(rest // cell); total = memory free after init (M - NT), available = total - W;
    # f = mem_fraction_static 0.88 at TP 1 (server_args.py, the 2025 TP table: --sglang-fraction tp)
    doc = _runtime("sglang", "--hardware", "h100-sxm", "--sglang-fraction", "tp")
    rt = doc["serving"]["runtime"]
    total = M - NT
    rest = sympy.Rational(88, 100) * total - W1
    assert rt["cell_bytes"] == CELL
    assert rt["tokens"] == int(rest // CELL) == 445_782
    assert doc["settings"]["runtime"] == "sglang"
    # --gpu-memory-utilization is the runtime's fraction when given
    assert _runtime("sglang", "--hardware", "h100-sxm", "--gpu-memory-utilization", "0.8")["serving"]["runtime"][
        "tokens"] == int((sympy.Rational(8, 10) * total - W1) // CELL)


def test_sglang_default_fraction_by_gpu_memory():
    # sgl-project/sglang PR #10975, server_args.py::ServerArgs._handle_gpu_memory_settings: gpu_mem in MiB; below
    # 90 GiB chunked_prefill_size 8192, cuda_graph_max_bs 256 at TP < 4; reserved = 512 + 8192 x 1.5 + 256 x 2 +
    # tp / 8 x 1024 = 13,440 MiB (at least 10 GiB above 60 GiB); f = round((gpu_mem - reserved) / gpu_mem, 3)
    from costgraph.inference.runtimes import sglang_fraction

    mib = M / 2**20                                                  # the h100-sxm preset: 81,121.3 MiB
    assert sglang_fraction(1, "gpu-memory", M) == sympy.Rational(str(round((mib - 13440) / mib, 3))) == \
        sympy.Rational(834, 1000)
    rt = _runtime("sglang", "--hardware", "h100-sxm")["serving"]["runtime"]   # the default rule
    assert rt["mem_fraction_rule"] == "gpu-memory" and rt["mem_fraction_static"] == "417/500"
    assert rt["tokens"] == int((sympy.Rational(834, 1000) * (M - NT) - W1) // CELL) == 416_061
    # a 24 GB card (L4, 23,034 MiB): chunked_prefill_size 2048, cuda_graph_max_bs 24 at TP 1, 80 at TP 4
    l4 = 23_034 * 2**20
    assert sglang_fraction(1, "gpu-memory", l4) == sympy.Rational(str(round((23_034 - 512 - 3072 - 48 - 128) / 23_034, 3)))
    assert sglang_fraction(4, "gpu-memory", l4) == sympy.Rational(str(round((23_034 - 512 - 3072 - 160 - 512) / 23_034, 3)))
    # above 60 GiB at least 10 GiB reserved; 141 GB (H200 class): 8192 / 256 -> 13,440 MiB
    assert sglang_fraction(8, "gpu-memory", 141 * 10**9) == sympy.Rational(
        str(round((141e9 / 2**20 - (512 + 12288 + 1024 + 1024)) / (141e9 / 2**20), 3)))
    # the 2025 table stays one flag away; an unknown rule is refused with the choices
    assert sglang_fraction(4, "tp") == sympy.Rational(85, 100)


def test_trtllm_free_gpu_memory_fraction():
    # KvCacheConfig: free_gpu_memory_fraction 0.9, tokens_per_block 32, of what is left after the weights and the
    # profile run of max_num_tokens 8192 (TensorRT-LLM tensorrt_llm/_torch/pyexecutor/_util.py::KvCacheCreator.
    # _cal_max_tokens: available_kv_mem = (total_gpu_memory - peak_memory) * fraction, peak = torch's peak + the
    # memory outside torch): Llama's live set at down_proj, (3h + 3i) bf16 values a token (test_profile_peak.py)
    rt = _runtime("trtllm", "--hardware", "h100-sxm")["serving"]["runtime"]
    act = 8192 * (3 * 4096 + 3 * 14336) * 2
    assert rt["activation_bytes"] == act == 905_969_664
    kv = int(sympy.floor(sympy.Rational(9, 10) * (M - NT - W1 - act)))
    assert rt["kv_bytes"] == kv
    assert rt["tokens"] == kv // (CELL * 32) * 32 == 464_736


@pytest.mark.parametrize("kv, per_value", [("fp16", sympy.Integer(2)), ("q8_0", sympy.Rational(34, 32)),
                                           ("q4_0", sympy.Rational(18, 32))])
def test_llamacpp_kv_types(kv, per_value):
    # ggml-common.h @ aca2e6ce: block_q8_0 = fp16 d + 32 int8 (34 B / 32 values), block_q4_0 = fp16 d + 16 B
    # (18 B / 32 values); f16 2 B. One K and one V of n_ctx cells per layer (llama-kv-cache.cpp).
    rt = _runtime("llamacpp", "--kv", kv, "--max-model-len", "4096")["serving"]["runtime"]
    cell = 2 * L * KV * D * per_value
    assert rt["cell_bytes"] == cell and rt["kv_bytes"] == 4096 * cell
    assert rt["kv_bytes"] == {"fp16": 536_870_912, "q8_0": 285_212_672, "q4_0": 150_994_944}[kv]


def test_memory_floored_as_kv_memory():
    # --memory 23.58GiB (a size a log prints rounded) is floored to whole bytes, as --kv-memory, and said so
    doc = _runtime("vllm", "--memory", "23.58GiB")
    assert doc["settings"]["device_memory"] == 25_318_832_209 == int(sympy.Rational(2358, 100) * 2**30)
    assert "floored" in doc["settings"]["figures_from"]["device_memory"]


def test_unknown_runtime_refused_by_the_api():
    from costgraph.errors import CostgraphValueError

    model, values = inference_model("examples/hf/llama-3.1-8b.json", None, {}, {})
    with pytest.raises(CostgraphValueError, match="unknown serving runtime 'tgi'"):
        infer(model, prompt=10, generate=2, batch=1, values=values, runtime="tgi")


@pytest.mark.parametrize("tp, logged", [(1, "14.96"), (2, "7.48")])
def test_llama3_8b_weights_as_logged(tp, logged):
    # vllm-project/vllm PR #10511 (H100, vllm serve meta-llama/Meta-Llama-3-8B [-tp 2]): "model weights take
    # 14.96GiB" / "7.48GiB"; the bundled llama-3-8b (s = max_position_embeddings 8192: a 2 MiB rotary table)
    from costgraph.inference import load

    m = load("llama")
    rw = infer(m, prompt=10, generate=2, batch=1, values=m.values("llama-3-8b"), t=tp).runtime_weights
    assert f"{rw.bytes / 2**30:.2f}" == logged
    assert {t.name: t.bytes for t in rw.terms}["rotary cos/sin cache"] == 8192 * 128 * 2


def test_split_norm_all_reduce_in_training_communication():
    # training under TP: each QK-norm split by heads all-reduces one fp32 per token forward and one backward
    # (the gradient's per-token sum): 2 norms x 2 x 4 B = 16 B per token per layer beside the row-parallel traffic
    import costgraph

    m = costgraph.load("olmo2")
    r = m.train(t=2, gpus=2, attention="flash", values=m.values("olmo-2-1b"))
    tp = r.communication["tp"]["bytes"]
    b, s, l, h = (m.graph.dims[n].symbol for n in ("b", "s", "l", "h"))
    assert sympy.expand(tp).coeff(b * l * s).subs(h, 0) == 16


# --- --runtime under hostile input: refused, or said not to start (issue 29 hostile input) ---------------------------


INFER = ["infer", "examples/hf/llama-3.1-8b.json", "--prompt", "1000", "--generate", "100", "--hardware", "h100-sxm"]


@pytest.fixture
def repo_root(monkeypatch):
    import pathlib

    monkeypatch.chdir(pathlib.Path(__file__).parents[2])


@pytest.mark.parametrize("runtime, kv, words", [
    ("llamacpp", "fp8", "--runtime llamacpp has no --kv fp8 cache type"),      # printed as a llama.cpp log line
    ("llamacpp", "int8", "--runtime llamacpp has no --kv int8 cache type"),
    ("sglang", "q8_0", "--kv q8_0 is llama.cpp's block format: --runtime sglang"),
    ("trtllm", "q4_0", "--kv q4_0 is llama.cpp's block format: --runtime trtllm"),
])
def test_a_kv_dtype_the_runtime_has_no_cache_for_is_refused(capsys, repo_root, runtime, kv, words):
    _refused(capsys, INFER + ["--runtime", runtime, "--kv", kv], words)


@pytest.mark.parametrize("runtime", ["sglang", "trtllm", "llamacpp"])
def test_a_vllm_engine_under_another_runtime_is_refused(capsys, repo_root, runtime):
    # trial 8: --vllm-engine v0 --runtime sglang ran, the engine ignored without a word (as --sglang-fraction
    # under --runtime vllm is refused)
    _refused(capsys, INFER + ["--runtime", runtime, "--vllm-engine", "v0"],
             f"--vllm-engine v0 picks vLLM's engine; --runtime {runtime} is not vLLM", "hint: add --runtime vllm")


def test_non_torch_memory_above_the_device_is_refused(capsys, repo_root):
    # 1000 GiB outside PyTorch on an 80 GB H100: SGLang's pool came out at -829.42 GiB, exit 0
    _refused(capsys, INFER + ["--runtime", "sglang", "--non-torch-memory", "1000GiB"],
             "--non-torch-memory 1,073,741,824,000 bytes is not less than the device memory 85,061,827,297 bytes")


@pytest.mark.parametrize("runtime, words", [("sglang", "SGLang would not start: the --kv-memory given holds no KV block"),
                                            ("trtllm", "TensorRT-LLM would not start: the --kv-memory given holds no")])
def test_a_kv_memory_of_no_block_says_it_would_not_start(capsys, repo_root, runtime, words):
    # trial4: --kv-memory 0 printed 0 tokens and nothing more (vLLM's section says it would not start)
    rc, out, err = _run(capsys, INFER + ["--runtime", runtime, "--kv-memory", "0"])
    assert rc == 0 and words in out


def test_a_kv_memory_above_the_device_is_refused_for_every_runtime(capsys, repo_root):
    # trial4: under --runtime trtllm the hint spoke of vLLM's log and vLLM's profile
    err = _refused(capsys, INFER + ["--runtime", "trtllm", "--kv-memory", "1e99"], "is not less than the device memory",
                   "as the runtime's start-up log reports it")
    assert "vLLM" not in err


def test_kv_memory_is_refused_for_llamacpp(capsys, repo_root):
    # trial4: llama.cpp sizes its cache by n_ctx cells (llama-context: n_ctx x n_seq), not a memory budget;
    # --kv-memory 10GiB was ignored without a word
    _refused(capsys, INFER + ["--runtime", "llamacpp", "--kv-memory", "10GiB"],
             "llama.cpp allocates n_ctx cells per sequence, not a memory budget", "--max-model-len N")
    # and SGLang's default fraction rule without SGLang (ignored as well)
    _refused(capsys, INFER + ["--sglang-fraction", "tp"], "--sglang-fraction tp is SGLang's default "
             "mem_fraction_static; --runtime vllm has none", "add --runtime sglang")


@pytest.mark.parametrize("runtime, extra, words", [
    ("sglang", ["--gpu-memory-utilization", "0.1"], "SGLang would not start"),
    ("trtllm", ["--non-torch-memory", "79GB"], "TensorRT-LLM would not start"),
])
def test_a_runtime_left_without_kv_memory_says_it_would_not_start(capsys, repo_root, runtime, extra, words):
    # as vLLM's section says "vLLM would not start" (costgraph.inference.capacity)
    rc, out, err = _run(capsys, INFER + ["--runtime", runtime, *extra])
    assert rc == 0 and words in out and "tokens" in out


def test_a_llamacpp_context_beyond_the_device_says_it_would_not_start(capsys, repo_root):
    # 10^14 cells printed a 12.5 TiB cache as if llama.cpp had allocated it
    rc, out, err = _run(capsys, INFER + ["--runtime", "llamacpp", "--max-model-len", "99999999999999"])
    assert rc == 0 and "llama.cpp would not start" in out
    rc, out, err = _run(capsys, INFER + ["--runtime", "llamacpp"])
    assert rc == 0 and "would not start" not in out


# --- recurrent states under TP (issue 29 item 4): heads split across ranks as vLLM splits them --------------------
# MiniMax-Text-01 (examples/hf/minimax-text-01.json: 70 lightning layers of 64 heads of 128): vLLM's
# MiniMaxText01LinearAttention keeps a state of (num_heads // tp, head_dim, head_dim) per sequence and layer
# (vllm @ d29a69a5 vllm/model_executor/layers/mamba/linear_attn.py: get_state_shape ->
# MambaStateShapeCalculator.linear_attention_state_shape(num_heads, tp_size, head_dim); qkv viewed as
# (tokens, tp_heads, 3·head_dim), q, k, v split per head; MiniMaxText01RMSNormTP over the rank's heads).
# In the activation dtype (bf16) here.
@pytest.mark.parametrize("tp", [1, 2])
def test_minimax_lightning_state_split_by_heads(tp):
    r = _report("examples/hf/minimax-text-01.json", tp)
    assert r.values["state_bytes"] == 70 * (64 // tp) * 128 * 128 * 2 == {1: 146_800_640, 2: 73_400_320}[tp]
    assert r.values["kv_cache_bytes_per_token"] == 2 * 10 * (8 // tp) * 128 * 2   # 10 softmax layers, 8 K/V heads


# Kimi-Linear-48B-A3B (examples/hf/kimi-linear-48b-a3b-instruct.json: 20 KDA layers of 32 heads of 128, short
# convolutions of 4): vLLM's KimiDeltaAttention holds num_heads // tp heads per rank, q/k/v, their convolutions,
# f_b_proj and b_proj column-parallel, f_a_proj and g_a_proj replicated (vllm @ 1d03ed8f
# vllm/model_executor/layers/kda.py: local_num_heads = divide(num_heads, tp_size)); the fp32 recurrent state
# [32/tp, 128, 128] and the convolution's 4 positions of 3·32·128/tp channels (bf16) per layer. MLA's latent
# stays whole on every rank (7 layers x 576 values).
@pytest.mark.parametrize("tp", [1, 2])
def test_kimi_linear_kda_state_split_by_heads(tp):
    r = _report("examples/hf/kimi-linear-48b-a3b-instruct.json", tp)
    per_layer = (32 // tp) * 128 * 128 * 4 + 4 * 3 * (32 // tp) * 128 * 2
    assert r.values["state_bytes"] == 20 * per_layer == {1: 43_909_120, 2: 21_954_560}[tp]
    assert r.values["kv_cache_bytes_per_token"] == 7 * 576 * 2


# --- llama.cpp's "KV self size" line, and SGLang / TensorRT-LLM from a KV pool as given (issue 29 items 1-2) --------
# ggml-org/llama.cpp src/llama-kv-cache.cpp (up to b5400): LLAMA_LOG_INFO("%s: KV self size  = %7.2f MiB, K (%s):
# %7.2f MiB, V (%s): %7.2f MiB\n", ..., (k + v) / 2^20, ggml_type_name(type_k), k / 2^20, ...)


def test_llamacpp_kv_self_size_line_qwen25_coder_32b_q8_0():
    # ggml-org/llama.cpp issue #11200 (b4462, -c 32768 --cache-type-k q8_0 --cache-type-v q8_0,
    # qwen2.5-coder:32b-instruct-q8_0: 64 layers, 8 K/V heads of 128): "kv_size = 32768 ... n_layer = 64",
    # "KV self size  = 4352.00 MiB, K (q8_0): 2176.00 MiB, V (q8_0): 2176.00 MiB"
    from costgraph.inference import load

    m = load("qwen2")
    v = m.values("qwen2-7b", h=5120, a=40, kv=8, d=128, i=27648, l=64)
    rt = infer(m, prompt=100, generate=10, batch=1, values=v, runtime="llamacpp", kv="q8_0",
               max_model_len=32768).serving["runtime"]
    assert rt["lines"][0] == "KV self size  = 4352.00 MiB, K (q8_0): 2176.00 MiB, V (q8_0): 2176.00 MiB"
    assert rt["kv_bytes"] == rt.kv_bytes == 32768 * 64 * 2 * 8 * 128 * 34 // 32
    assert type(rt).__name__ == "LlamacppKvCache" and (rt.n_ctx, rt.cells, rt.tokens) == (32768, 32768, 32768)


def test_llamacpp_f32_cache_llama_33b():
    # abetlen/llama-cpp-python issue #66: LLaMA-33B (n_embd 6656, n_head 52, n_layer 60) at n_ctx 512 with the
    # f32 cache of its early default: "kv self size  = 1560.00 MB" (MiB: buf.size / 1024 / 1024)
    from costgraph.inference import load

    m = load("llama")
    v = m.values("llama-2-7b", h=6656, a=52, kv=52, d=128, i=17920, l=60, V=32000)
    rt = infer(m, prompt=100, generate=10, batch=1, values=v, runtime="llamacpp", kv="fp32",
               max_model_len=512).serving["runtime"]
    assert rt["kv_bytes"] == 2 * 512 * 60 * 6656 * 4 == 1560 * 2**20
    assert rt["lines"][0].startswith("KV self size  = 1560.00 MiB, K (f32):  780.00 MiB")


def test_sglang_tokens_from_the_logged_pool():
    # sgl-project/sglang PR #4760 (Meta-Llama-3.1-8B-Instruct): "Load weight end ... avail mem=63.48 GB, mem
    # usage=15.11 GB"; "#tokens: 442750, K size: 27.02 GB"; mem_fraction_static 0.88 at TP 1: rest = 63.48 -
    # 78.59 x 0.12 GiB; max_total_num_tokens = rest // 131,072 (model_runner.py::profile_max_num_token)
    rest = int(sympy.Rational(540492, 10000) * 2**30)
    rt = _runtime("sglang", "--kv-memory", "54.0492GiB")["serving"]["runtime"]
    assert rt["tokens"] == rest // CELL == 442_771
    assert abs(rt["tokens"] / 442_750 - 1) < 0.001


def test_sglang_predicted_from_the_free_memory():
    # the same log: total = 78.59 GB free before loading (--memory, no non-torch memory), the weights as loaded;
    # the SGLang of March 2025: the TP table's 0.88
    rt = _runtime("sglang", "--memory", "78.59GiB", "--non-torch-memory", "0", "--sglang-fraction", "tp")["serving"][
        "runtime"]
    total = int(sympy.Rational(7859, 100) * 2**30)
    assert rt["tokens"] == int((sympy.Rational(88, 100) * total - W1) // CELL) == 443_764
    assert abs(rt["tokens"] / 442_750 - 1) < 0.005


def test_trtllm_tokens_from_the_logged_allocation():
    # NVIDIA developer forum (TensorRT-LLM 1.1.0rc3, gpt-oss-20b): "Allocated 0.19 GiB for max tokens in paged KV
    # cache (4128)"; 24 layers x 8 K/V heads of 64, bf16: 49,152 B a token; blocks of 32 tokens
    from costgraph.inference import load

    m = load("gpt_oss")
    rt = infer(m, prompt=100, generate=10, batch=1, values=m.values("gpt-oss-20b"), runtime="trtllm",
               kv_memory="0.19GiB").serving["runtime"]
    assert rt["cell_bytes"] == 24 * 8 * 64 * 2 * 2 == 49_152
    assert rt["tokens"] == int(sympy.Rational(19, 100) * 2**30) // (49_152 * 32) * 32 == 4128
    # the typed part (costgraph.inference.kv_parts): given the pool, no sizing figures are keys
    assert type(rt).__name__ == "TrtllmKvCache" and rt.kv_memory_given and rt.blocks * 32 == rt.tokens
    assert "free_bytes" not in rt and rt.free_bytes is None and list(rt)[-1] == "lines"


# Qwen3-Next-80B-A3B (examples/hf/qwen3-next-80b-a3b-instruct.json: 48 layers, 36 gated DeltaNet layers of 16 key
# heads and 32 value heads of 128, convolution width 4; 12 full-attention layers of 2 K/V heads of 256). vLLM's
# gated DeltaNet makes in_proj_qkvz one column-parallel linear grouped per key head (vllm/model_executor/models/
# qwen3_next.py @ 002d6073: gqa_interleaved_layout=True; fix_query_key_value_ordering views the rank's output as
# [T, num_k_heads / tp, ...]), so each rank holds num_v_heads / tp recurrent states [128, 128] and conv_dim / tp
# convolution channels (conv_dim = 2·16·128 + 32·128 = 8192; MambaStateShapeCalculator.gated_delta_net_state_shape:
# (divide(conv_dim, tp), ...), (divide(num_v_heads, tp), head_k_dim, head_v_dim)). costgraph keeps the state in
# the activation dtype (bf16) and K positions of the convolution, as for Kimi Linear above.
@pytest.fixture
def checkout_models(monkeypatch):
    """The checkout's models/ (the grouped slice of models/qwen3_next.cg), whatever install is imported."""
    import pathlib
    import costgraph.language.resources as res

    monkeypatch.setattr(res, "models_root", lambda: pathlib.Path(__file__).resolve().parents[2] / "models")


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_qwen3_next_deltanet_state_split_by_heads(checkout_models, tp):
    r = _report("examples/hf/qwen3-next-80b-a3b-instruct.json", tp)
    per_layer = (32 // tp) * 128 * 128 * 2 + 4 * (8192 // tp) * 2
    assert r.values["state_bytes"] == 36 * per_layer == {1: 40_108_032, 2: 20_054_016, 4: 10_027_008}[tp]
    # the full-attention layers' K/V: 2 heads split at TP 2, one replicated per device at TP 4
    assert r.values["kv_cache_bytes_per_token"] == 2 * 12 * max(2 // tp, 1) * 256 * 2
    assert not r.warnings


def test_unknown_sglang_fraction_rule_refused_by_the_api():
    from costgraph.errors import CostgraphValueError

    model, values = inference_model("examples/hf/llama-3.1-8b.json", None, {}, {})
    with pytest.raises(CostgraphValueError, match="mem_fraction_static 'table'"):
        infer(model, prompt=10, generate=2, batch=1, values=values, runtime="sglang", sglang_fraction="table")


def test_llamacpp_default_cache_type_is_f16(capsys, repo_root):
    # llama.cpp's KV cache type defaults to f16 (ggml-org/llama.cpp common/common.h, common_params:
    # cache_type_k = GGML_TYPE_F16, cache_type_v = GGML_TYPE_F16): without --kv, `--runtime llamacpp` prints
    # "K (f16)" (it printed bf16, a type llama.cpp uses only when asked); other runtimes keep bf16
    rt = _runtime("llamacpp", "--max-model-len", "4096")
    assert rt["settings"]["kv"] == "fp16"
    assert "K (f16):" in rt["serving"]["runtime"]["lines"][0] and "bf16" not in rt["serving"]["runtime"]["lines"][0]
    assert _runtime("llamacpp", "--kv", "bf16", "--max-model-len", "4096")["settings"]["kv"] == "bf16"   # as given
    assert _runtime("sglang")["settings"]["kv"] == "bf16"
