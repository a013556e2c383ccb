"""Issue 17, item 6: capacity as runtimes report it (vLLM's KV cache size and maximum
concurrency), prefix caching, chunked prefill, speculative decoding.

Sources: vLLM @ 35d5cda1 ``vllm/v1/worker/gpu_worker.py::Worker.determine_available_memory``;
vLLM @ 001cabc1 ``vllm/v1/core/kv_cache_utils.py::get_num_blocks``, ``_report_kv_cache_config``,
``get_max_concurrency_for_kv_cache_config``; vLLM @ bc8282e6 ``vllm/v1/kv_cache_interface.py``
(``FullAttentionSpec``, ``SlidingWindowSpec``, MLA page sizes); vLLM @ 99d7eb5d
``vllm/engine/arg_utils.py::EngineArgs._set_default_args`` (max_num_batched_tokens); Leviathan,
Kalman & Matias 2023, eq. 1 (expected tokens per speculative step).
"""

from __future__ import annotations

import json

import pytest
import sympy

from costgraph import cli
from costgraph.errors import CostgraphValueError
from costgraph.inference import P, infer, load, machine, step_seconds
from costgraph.inference.capacity import activation_estimate, parse_bytes
from costgraph.inference.prefill_modes import chunked_prefill_seconds, sum_piecewise
from costgraph.cli import main
from cli_checks import refused as _refused
from device_memory import H100_SXM_CUDA

GIB = 2**30


@pytest.fixture(scope="module")
def qwen3():
    return load("qwen3")


@pytest.fixture(scope="module")
def llama():
    return load("llama")


def _vllm(rep):
    return rep.serving["vllm"]


# ------------------------------------------------------------------ vLLM logs reproduced

def test_qwen3_14b_log_lmcache_1739(qwen3):
    # https://github.com/LMCache/LMCache/issues/1739 (Qwen3-14B, one GPU, vLLM V1):
    #   Available KV cache memory: 6.51 GiB
    #   GPU KV cache size: 42,656 tokens
    #   Maximum concurrency for 32,768 tokens per request: 1.30x
    # Qwen/Qwen3-14B config.json: hidden 5120, 40 heads, 8 KV heads, head_dim 128, 40 layers,
    # intermediate 17408, vocab 151936; bf16 KV: a layer's page = 16 · 8 · (128 + 128) · 2 = 65,536 B.
    v = qwen3.values("qwen3-8b", h=5120, a=40, kv=8, d=128, i=17408, l=40, V=151936)
    rep = infer(qwen3, hardware="h100-sxm", prompt=32000, generate=768, batch=1, values=v, kv_memory="6.51GiB")
    got = _vllm(rep)
    assert got["available_bytes"] == 6_990_059_274           # ⌊6.51 · 2^30⌋ = ⌊6,990,059,274.24⌋
    assert got["page_bytes"] == 65_536 and got["group_size"] == 40 and got["groups"] == 1
    assert got["num_blocks"] == 6_990_059_274 // 65_536 // 40 == 2666
    assert got["tokens"] == 42_656
    assert got["max_model_len"] == 32_768                     # P + G by default
    assert got["max_concurrency"] == sympy.Rational(2666, 2048)
    assert f"{float(got['max_concurrency']):.2f}" == "1.30"
    # the log's own rounding: any available memory that prints as 6.51 GiB gives 42,640 to 42,688
    lo = infer(qwen3, hardware="h100-sxm", prompt=32000, generate=768, batch=1, values=v, kv_memory="6.505GiB")
    hi = infer(qwen3, hardware="h100-sxm", prompt=32000, generate=768, batch=1, values=v, kv_memory="6.515GiB")
    assert _vllm(lo)["tokens"] <= 42_656 <= _vllm(hi)["tokens"]


def test_qwen3_coder_480b_log_recipes_12():
    # https://github.com/vllm-project/recipes/pull/12 (Qwen3-Coder-480B-A35B-Instruct-FP8, H20,
    # -dp=8: attention unsplit): "(62.00 GiB KV cache is needed ... max seq len (262144) ... the
    # available KV cache memory (48.66 GiB) ... the estimated maximum model length is 205728".
    # config.json: 62 layers, 8 KV heads, head_dim 128, bf16 KV cache (KV in the model dtype).
    m = load("qwen3_moe")
    v = m.values("qwen3-30b-a3b", h=6144, a=96, kv=8, d=128, i=2560, l=62, E=160, k=8)
    rep = infer(m, hardware="h200", prompt=1024, generate=1024, batch=1, values=v, kv_memory="48.66GiB",
                max_model_len=262_144)
    got = _vllm(rep)
    # one request of 262,144 tokens: ⌈262144/16⌉ blocks × page × layers = 62 GiB exactly
    assert got["blocks_per_request"] * got["page_bytes"] * got["group_size"] == 62 * GIB
    # one full-attention group: the longest request that fits is the cache's token count
    assert got["tokens"] == 205_728
    assert got["max_concurrency"] < 1


# ------------------------------------------------------------------ the profiled path

def test_available_memory_as_vllm_profiles_it(llama):
    # requested = total × 0.9, the total as CUDA reports it (vllm @ 35d5cda1 gpu_worker.py::Worker.init_device:
    # requested_memory = total × gpu_memory_utilization; vllm PR #10511 logs an H100's total_gpu_memory as
    # 79.22GiB: runtime_memory.toml [visible.h100-sxm], floored to whole bytes); minus weights, the activation
    # estimate and the non-torch reserve
    v = llama.values("llama-3-8b")
    rep = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=8, values=v)
    got = _vllm(rep)
    assert got["total_bytes"] == int(sympy.Rational("79.22") * GIB) == H100_SXM_CUDA
    assert "[visible.h100-sxm]" in got["total_from"]
    assert got["requested_bytes"] == H100_SXM_CUDA * 9 // 10 == 76_555_644_567
    # issue 29: the weights as vLLM loads them: the parameters, the rotary cos/sin cache (Llama-3-8B's
    # max_position_embeddings 8192 x head 128 x bf16; vllm rotary_embedding/base.py::_compute_cos_sin_cache) and
    # V1's 7 fp32 scalars per attention layer, 512 B each (vllm @ 004a5da0 attention/layer.py; PyTorch's
    # CUDACachingAllocator kMinBlockSize 512)
    rope, scalars = 8192 * 128 * 2, 32 * 7 * 512
    assert got["weight_bytes"] == rep.values["weight_bytes"] + rope + scalars == 16_060_522_496 + rope + scalars
    # H100 (80 GB, not an A100) under `vllm serve`: max_num_batched_tokens 8192, max_num_seqs 1024
    assert (got["max_num_batched_tokens"], got["max_num_seqs"]) == (8192, 1024)
    # the live set at the peak of a forward of 8192 tokens (inference/profile_peak.py): at down_proj vLLM's
    # LlamaMLP still holds gate_up [T, 2i] and the product [T, i], the caller the normalised input and the
    # residual [T, h] each, and down_proj writes [T, h]: (3h + 3i) bf16 values per token
    FORWARD = 8192 * (3 * 4096 + 3 * 14336) * 2
    assert got["forward_activation_bytes"] == FORWARD == 905_969_664
    # V1's profile run also samples min(8192, 1024) rows (vllm @ 000fc94b v1/worker/gpu_model_runner.py
    # _dummy_sampler_run; inference/sampler_peak.toml): 1024 x 128,256 logits x 28 B alive (bf16 logits 2 + fp32
    # copy 4 + sort 4 + int64 indices 8 + masks 2 + softmax 4 + re-sorted 4) beside the hidden states [T, h] and
    # two [R, h]; V1 reads the peak over the whole profile run: the sampler's is the larger
    ACT = (8192 + 2 * 1024) * 4096 * 2 + 1024 * 128256 * 28
    assert got["activation_bytes"] == got["sampler_bytes"] == ACT == 3_761_242_112
    # the non-torch memory vLLM logged on an H100 at TP 1, its newest log in runtime_memory.toml: vllm PR #12126
    # (github.com/vllm-project/vllm/pull/12126) "non_torch_memory takes 0.16GiB", floored to whole bytes
    assert got["non_torch_bytes"] == int(sympy.Rational(16, 100) * GIB) == 171_798_691
    assert "vllm.h100-tp1-pr12126" in got["non_torch_from"]
    avail = 76_555_644_567 - 16_060_522_496 - rope - scalars - ACT - 171_798_691
    assert got["available_bytes"] == avail
    assert got["num_blocks"] == avail // (16 * 4096) // 32 == 26_969
    assert got["tokens"] == 26_969 * 16
    assert got["max_concurrency"] == sympy.Rational(26_969, 40)   # ⌈640/16⌉ blocks per request
    # the capacity line reads the same device as the vLLM block (costgraph.runtime_memory.device_memory, memory
    # convention cuda by default): reserve 0.1 = 1 - utilization 0.9 of the 79.22 GiB CUDA reports on an H100
    # (vllm PR #10511, github.com/vllm-project/vllm/pull/10511: "total_gpu_memory 79.22GiB"), not of the 80 GB printed
    assert rep.settings["capacity_bytes"] == got["requested_bytes"] == 76_555_644_567
    assert rep.settings["device_memory"] == got["total_bytes"] and rep.settings["memory_convention"] == "cuda"
    assert rep.settings["device_memory_from"] == got["total_from"]
    assert "79.22 GiB, as CUDA reports it (memory convention cuda)" in rep.to_text()


def test_memory_convention_one_reading(llama):
    # one function gives a device's memory under a named convention (costgraph.runtime_memory.device_memory):
    # cuda, the total CUDA reports (runtime_memory.toml [visible.h100-sxm]: 79.22 GiB, vllm PR #10511), else the
    # printed figure, named; nominal, the vendor's printed 80 GB (hardware.toml, H100 datasheet 2023)
    from costgraph.runtime_memory import device_memory, training_reserve
    from costgraph.hardware import preset

    cuda, nominal = device_memory(preset("h100-sxm")), device_memory(preset("h100-sxm"), "nominal")
    assert (cuda.bytes, cuda.convention, nominal.bytes, nominal.convention) == \
        (H100_SXM_CUDA, "cuda", 80_000_000_000, "nominal")
    a100 = device_memory(preset("a100-80gb-sxm"))   # no [visible] entry: the printed figure, and the output says so
    assert a100.bytes == 80_000_000_000 and "no [visible.a100-80gb-sxm] entry" in a100.source
    assert device_memory(preset("h100-sxm"), given=123).to_dict() == {"bytes": 123, "convention": "given",
                                                                      "source": "--memory"}
    # --memory wins: a convention other than the default beside it would be ignored, so it is refused (trial7:
    # infer and fit --serve took --memory 80GB --memory-convention nominal and read neither convention)
    with pytest.raises(CostgraphValueError, match="--memory-convention nominal reads a preset's memory"):
        device_memory(preset("h100-sxm"), "nominal", given=123)
    # train's runtime reserve reads the same capacity, in the same words
    r = training_reserve(preset("h100-sxm"), {}, 80_000_000_000, given=False)
    assert (r.capacity, r.capacity_from) == (cuda.bytes, cuda.source)
    with pytest.raises(CostgraphValueError, match="unknown device memory convention") as e:
        device_memory(preset("h100-sxm"), "printed")
    assert "cuda" in e.value.hint and "nominal" in e.value.hint
    # infer under nominal: the capacity line and the vLLM block both on 80 GB
    v = llama.values("llama-3-8b")
    rep = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=8, values=v, memory_convention="nominal")
    got = _vllm(rep)
    assert rep.settings["capacity_bytes"] == got["requested_bytes"] == 72_000_000_000
    assert rep.settings["memory_convention"] == "nominal" and "memory convention nominal" in got["total_from"]


@pytest.mark.parametrize("command", [["infer", "gpt", "--hardware", "h100-sxm"], ["fit", "gpt", "--serve"]])
def test_memory_convention_beside_memory_refused(command, capsys):
    _refused(capsys, command + ["--prompt", "5", "--generate", "2", "--memory", "80GB", "--memory-convention",
                                "nominal"], "error: --memory-convention nominal reads a preset's memory, but --memory "
                                            "gives it", "hint: drop --memory-convention")


def test_vllm_total_given_memory_kept():
    # --memory is what the user says CUDA reports: kept as given (no [visible] entry replaces it)
    from costgraph.inference.capacity import vllm_total
    from costgraph.inference.roofline import machine

    assert vllm_total(machine("h100-sxm", memory="79.22GiB")) == (H100_SXM_CUDA, None)
    assert vllm_total(machine("h100-sxm", memory="80GB")) == (80_000_000_000, None)
    total, words = vllm_total(machine("l40s"))   # no [visible.l40s] entry: the preset's printed memory, named
    assert total == 48_000_000_000 and "no [visible.l40s] entry" in words


def test_activation_estimate_experts_and_windows():
    from costgraph.inference import Inference

    def est(name, config):
        m = load(name)
        inf = Inference(m)
        v = m.values(config)
        return activation_estimate(inf, {k: x for k, x in v.items() if k not in (inf.b, inf.s)}, 8192, 1024)

    # Mixtral (inference/profile_peak.py): vLLM's fused MoE kernel (vllm @ 000d1458
    # vllm/model_executor/layers/fused_moe/fused_moe.py::fused_experts_impl) allocates, for M = min(T, 32768)
    # tokens (VLLM_FUSED_MOE_CHUNK_SIZE, vllm @ 001f69f8 vllm/envs.py), cache13 = M·top_k·max(N, K) and
    # intermediate_cache2 = M·top_k·N/2 in bf16, N = w1.shape[1] = 2i (gate and up), K = h; the sum is written
    # in place (inplace=True) into the normalised input, which the caller holds with the residual [T, h]:
    # 8192 × (2h + 2·(max(2i, h) + i)) bf16 values (394,264,576 when the experts ran on their share k/E)
    T, h, i, k = 8192, 4096, 14336, 2
    assert est("mixtral", "mixtral-8x7b") == (T * 2 * h + T * k * (max(2 * i, h) + 2 * i // 2)) * 2 == 1_543_503_872
    # Qwen3-30B-A3B: h 2048, moe i 768, top-8: max(N, K) = K = h
    T, h, i, k = 8192, 2048, 768, 8
    assert est("qwen3_moe", "qwen3-30b-a3b") == (T * 2 * h + T * k * (max(2 * i, h) + i)) * 2 == 436_207_616
    # beyond the chunk, the buffers stop growing: M = 32768 (fused_experts_impl: M = min(num_tokens, CHUNK_SIZE))
    T = 40000
    m = load("qwen3_moe")
    inf = Inference(m)
    v = {x: y for x, y in m.values("qwen3-30b-a3b").items() if x not in (inf.b, inf.s)}
    assert activation_estimate(inf, v, T, 1024) == (T * 2 * h + 32768 * k * (max(2 * i, h) + i)) * 2
    # Mistral: the windowed scores [a, s, Min(w, n_keys)] are left out as plain scores are; the MLP's live set
    assert est("mistral", "mistral-7b") == 8192 * (3 * 4096 + 3 * 14336) * 2


def test_a100_gets_the_small_token_budget(llama):
    # vllm @ 99d7eb5d EngineArgs._set_default_args: A100s keep 2048 / 256 ("NOTE(Kuntai)")
    v = llama.values("llama-3-8b")
    got = _vllm(infer(llama, hardware="a100-80gb-sxm", prompt=512, generate=128, batch=1, values=v))
    assert (got["max_num_batched_tokens"], got["max_num_seqs"]) == (2048, 256)
    assert got["forward_activation_bytes"] == 2048 * (3 * 4096 + 3 * 14336) * 2   # the live set at down_proj
    # V1's sampler over min(2048, 256) rows (inference/sampler_peak.toml, vllm @ 000fc94b _dummy_sampler_run): 28 B a
    # logit beside [T, h] and two [R, h], the profile's peak
    assert got["activation_bytes"] == (2048 + 2 * 256) * 4096 * 2 + 256 * 128256 * 28 == 940_310_528


def test_utilization_is_one_minus_reserve(llama):
    v = llama.values("llama-3-8b")
    a = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, gpu_memory_utilization="0.8")
    b = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, reserve="0.2")
    # 0.8 of the 79.22 GiB CUDA reports on an H100 (runtime_memory.toml [visible.h100-sxm], vllm PR #10511)
    assert a.settings["capacity_bytes"] == b.settings["capacity_bytes"] == H100_SXM_CUDA * 8 // 10
    # vLLM's requested memory: 0.8 of the total CUDA reports on an H100 (79.22 GiB, runtime_memory.toml)
    assert _vllm(a)["requested_bytes"] == _vllm(b)["requested_bytes"] == H100_SXM_CUDA * 8 // 10 == 68_049_461_837
    assert a.values["max_batch"] == b.values["max_batch"]
    same = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, reserve="0.2",
                 gpu_memory_utilization="0.8")
    assert same.settings["capacity_bytes"] == 68_049_461_837
    with pytest.raises(CostgraphValueError, match="disagree"):
        infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, reserve="0.3",
              gpu_memory_utilization="0.8")
    with pytest.raises(CostgraphValueError, match="gpu-memory-utilization"):
        infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, gpu_memory_utilization="1.5")


def test_sizes_floor_to_bytes():
    assert parse_bytes("6.51GiB", "--kv-memory") == 6_990_059_274
    assert parse_bytes("80GB", "--kv-memory") == 80 * 10**9
    assert parse_bytes("141e9", "--kv-memory") == 141 * 10**9
    with pytest.raises(CostgraphValueError):
        parse_bytes("lots", "--kv-memory")
    with pytest.raises(CostgraphValueError):
        parse_bytes("3 bananas", "--kv-memory")


# ------------------------------------------------------------------ page sizes and groups

def test_sliding_window_blocks_per_request():
    # Mistral-7B: every layer a window of 4096 → one SlidingWindowSpec group; a request holds
    # ⌈min(w - 1 + max_num_batched_tokens, max_model_len) / 16⌉ + 1 blocks (vllm @ bc8282e6)
    m = load("mistral")
    rep = infer(m, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=m.values("mistral-7b"),
                kv_memory="10GiB", max_model_len=32_768)
    got = _vllm(rep)
    assert got["blocks_per_request"] == -(-(4095 + 8192) // 16) + 1 == 769
    assert got["num_blocks"] == 10 * GIB // (16 * 8 * 256 * 2) // 32


def test_hybrid_window_and_full_layers_form_two_groups():
    # Gemma-2-9B: 21 local (window 4096) and 21 global layers, equal pages → 2 groups of 21
    # layers (_get_kv_cache_groups_uniform_page_size); tokens = num_blocks // 2 × 16
    m = load("gemma2")
    rep = infer(m, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=m.values("gemma-2-9b"),
                kv_memory="20GiB", max_model_len=8192)
    got = _vllm(rep)
    page = 16 * 8 * (256 + 256) * 2
    assert (got["groups"], got["group_size"], got["page_bytes"]) == (2, 21, page)
    assert got["num_blocks"] == 20 * GIB // page // 21
    assert got["tokens"] == got["num_blocks"] // 2 * 16
    # full: ⌈8192/16⌉ = 512; sliding: ⌈min(4095 + 8192, 8192)/16⌉ + 1 = 513
    assert got["blocks_per_request"] == 512 + 513


def test_mla_page_is_the_latent_and_rotary_key():
    # vLLM's MLA page: block · (kv_lora_rank + qk_rope_head_dim) · dtype = 16 · 576 · 2
    m = load("deepseek_v3")
    rep = infer(m, hardware="h200", prompt=512, generate=128, batch=1, values=m.values("deepseek-v3"), kv_memory="10GiB",
                t=8)
    assert _vllm(rep)["page_bytes"] == 16 * 576 * 2
    assert _vllm(rep)["group_size"] == 61


def test_recurrent_states_are_not_modelled():
    m = load("mamba")
    got = _vllm(infer(m, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=m.values("mamba-130m")))
    assert got["tokens"] is None and "MambaSpec" in got["note"]


# ------------------------------------------------------------------ prefix caching

def test_prefix_caching_memory_and_prefill(llama):
    v = llama.values("llama-3-8b")
    rep = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=8, values=v, shared_prefix=250)
    pc = rep.serving["prefix_caching"]
    per = 32 * 8 * 128 * 2 * 2                               # bytes per token, all layers
    # only full blocks are shared: ⌊250/16⌋ = 15 blocks once, 640 - 240 = 400 positions each
    assert pc["quantities"]["kv_cache_bytes_paged"][1] == 240 * per + 8 * 400 * per
    m = machine("h100-sxm", "bf16")
    from costgraph.inference import Inference
    inf = Inference(llama)
    subs = {**{k: x for k, x in v.items() if k not in (inf.b, inf.s)}, P: 512}
    first = step_seconds(inf.step(512, 0), m).xreplace({**subs, inf.b: 1})
    rest = step_seconds(inf.step(512 - 250, 250), m).xreplace({**subs, inf.b: 7})
    assert sympy.nsimplify(pc["quantities"]["time_to_first_token"][1] - (first + rest)) == 0
    assert pc["quantities"]["time_to_first_token"][1] < rep.values["time_to_first_token"]
    assert pc["max_batch"] > rep.values["max_batch"]


def test_prefix_refusals(llama):
    v = llama.values("llama-3-8b")
    with pytest.raises(CostgraphValueError, match="shared-prefix"):
        infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, shared_prefix=512)
    m = load("mamba")
    with pytest.raises(CostgraphValueError, match="recurrent"):
        infer(m, hardware="h100-sxm", prompt=512, generate=8, batch=1, values=m.values("mamba-130m"), shared_prefix=8)


# ------------------------------------------------------------------ chunked prefill

def _chunk_loop(inf, m, subs, prompt, chunk):
    total, done = sympy.Integer(0), 0
    while done < prompt:
        q = min(chunk, prompt - done)
        total += step_seconds(inf.step(q, done), m).xreplace(subs)
        done += q
    return total


@pytest.mark.parametrize("name, config", [("llama", "llama-3-8b"), ("mistral", "mistral-7b"),
                                          ("mixtral", "mixtral-8x7b")])
def test_chunked_prefill_closed_form_equals_the_loop(name, config):
    from costgraph.inference import Inference

    mod = load(name)
    inf = Inference(mod)
    m = machine("h100-sxm", "bf16")
    v = mod.values(config)
    subs = {**{k: x for k, x in v.items() if k not in (inf.b, inf.s)}, inf.b: sympy.Integer(2)}
    sec = lambda st: step_seconds(st, m)   # noqa: E731
    for prompt, chunk in ((5000, 512), (9000, 1024), (700, 700), (701, 700)):
        got = chunked_prefill_seconds(inf, sec, subs, prompt, chunk)
        assert sympy.nsimplify(got - _chunk_loop(inf, m, subs, prompt, chunk)) == 0, (name, prompt, chunk)


def test_chunked_prefill_in_the_report_and_bounded(llama):
    import time

    v = llama.values("llama-3-8b")
    rep = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, chunk=512)
    assert rep.serving["chunked_prefill"]["time_to_first_token"] == rep.values["time_to_first_token"]
    t0 = time.perf_counter()
    rep = infer(llama, hardware="h100-sxm", prompt=10_000_000, generate=2, batch=1, values=v, chunk=512)
    assert rep.serving["chunked_prefill"]["chunks"] == 19_532
    assert time.perf_counter() - t0 < 60


def test_sum_piecewise():
    j = sympy.Symbol("j", integer=True)
    e = sympy.Max(3 * j, 10) + sympy.Min(j, 4) * 2 + 1
    assert sum_piecewise(e, j, 0, 20) == sum(e.subs(j, x) for x in range(21))


# ------------------------------------------------------------------ speculative decoding


# ------------------------------------------------------------------ CLI and JSON

BASE = ["infer", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"]


@pytest.mark.parametrize("extra", [["--acceptance", "abc", "--speculative-tokens", "2", "--draft", "llama",
                                    "--draft-config", "llama-2-7b"],
                                   ["--speculative-tokens", "2"],
                                   ["--kv-memory", "plenty"],
                                   ["--shared-prefix", "600"],
                                   ["--chunk", "0"],
                                   ["--gpu-memory-utilization", "0.8", "--reserve", "0.5"]])
def test_cli_refusals_exit_2(extra, capsys):
    assert cli.main(BASE + extra) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_cli_json_serving_block(capsys):
    import jsonschema
    from costgraph.export import schema as schemas

    assert cli.main(BASE + ["--kv-memory", "6.51GiB", "--shared-prefix", "256", "--chunk", "256",
                            "--speculative-tokens", "2", "--acceptance", "0.7", "--draft", "llama",
                            "--draft-config", "llama-2-7b", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    jsonschema.validate(doc, schemas.bundled("infer"))
    s = doc["serving"]
    # the Llama-2-7B drafter's 32 layers (32 K/V heads of 128: 16,384 B a token) are cached beside the target's
    # (8 heads: 4,096 B): both full attention, different pages, so one group whose block holds a page of each of
    # the 64 layers (vllm @ 001cabc1 kv_cache_utils.get_kv_cache_groups: UniformTypeKVCacheSpecs;
    # get_kv_cache_config_from_groups: num_blocks = available // page_size_bytes, the sum of the layers' pages)
    assert s["vllm"]["tokens"] == 6_990_059_274 // (16 * 32 * (4096 + 16_384)) * 16 == 10_656
    assert s["vllm"]["draft_layers"] == 32 and s["vllm"]["one_type"]
    assert s["speculative"]["draft"] == "llama" and s["chunked_prefill"]["chunks"] == 2
    assert cli.main(BASE + ["--kv-memory", "6.51GiB"]) == 0
    text = capsys.readouterr().out
    assert f"GPU KV cache size         {6_990_059_274 // (16 * 131_072) * 16:,} tokens" in text
    assert "Maximum concurrency for 640 tokens per request:" in text


# --- --page-size: read as --generate is, its label within the column; --acceptance as an exact fraction (issue 18) ---

LLAMA = ["infer", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--prompt", "1024", "--generate", "256"]


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_page_size_1e12_label_fits_the_column(capsys):
    code, out, err = _cli(capsys, *LLAMA, "--page-size", "1e12")   # was: "invalid int value: '1e12'"
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("  paged (blocks of"))
    # the label column is 28 characters wide: the label and one space at least, then the formula
    assert row.startswith("  paged (blocks of 1.000 T)   4000000000000 b d kv l ceiling(")
    # 4 bytes x d 128 x kv 8 x l 32 per token, one block of 10^12 tokens per sequence
    assert row.endswith("= 131,072,000,000,000,000 bytes (131.07 PB, 116.42 PiB)")
    # vLLM takes any positive block size (vllm-project/vllm @ 002f10e, vllm/config/cache.py::CacheConfig
    # .block_size gt=0) and then has no block to allocate: the report says so, as vLLM would
    assert "  GPU KV cache size         0 tokens (0 blocks of 4,096,000,000,000,000 bytes per layer" in out
    assert "vLLM would not start: No available memory for the cache blocks" in out


@pytest.mark.parametrize("k, label, bytes_per_block", [("16", "paged (blocks of 16)        ", 64),
                                                       ("2**10", "paged (blocks of 1,024)     ", 4096),
                                                       ("1_048_576", "paged (blocks of 1,048,576) ", 4194304),
                                                       ("12345678", "paged (blocks of 12.35 M)   ", 49382712)])
def test_page_size_labels(k, label, bytes_per_block, capsys):
    """k tokens a block, 4 bytes (K and V in bf16) a token and (d, kv, l) position: 4 k b d kv l."""
    code, out, err = _cli(capsys, *LLAMA, "--page-size", k)
    assert code == 0, err
    assert f"\n  {label}{bytes_per_block} b d kv l ceiling(" in out


def test_page_size_json_exact(capsys):
    code, out, err = _cli(capsys, *LLAMA, "--page-size", "1e12", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["settings"]["page_size"] == 10**12
    assert doc["kv_cache_bytes_paged"]["value"] == 131_072 * 10**12


@pytest.mark.parametrize("k, said", [("0", "not a positive whole number"), ("-3", "cannot read --page-size"),
                                     ("1e16", "out of range"), ("1.5", "--page-size"), ("abc", "cannot read")])
def test_page_size_refused(k, said, capsys):
    code, out, err = _cli(capsys, *LLAMA, "--page-size", k)
    assert code == 2 and "Traceback" not in err and not out
    assert said in err and "\nhint: " in err


# --- serving options under hostile or combined input (issue 17 trial) ------------------------------------------------

LLAMA_512 = ["infer", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"]


def test_reserve_and_utilization_that_disagree_are_refused(capsys):
    # was: --reserve 0.1 (the default's value, given) silently dropped for --gpu-memory-utilization 0.8
    _refused(capsys, LLAMA_512 + ["--gpu-memory-utilization", "0.8", "--reserve", "0.1"], "disagree")
    assert cli.main(LLAMA_512 + ["--gpu-memory-utilization", "0.8", "--reserve", "0.2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["reserve"] == "1/5"
    assert cli.main(LLAMA_512 + ["--gpu-memory-utilization", "0.8", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["reserve"] == "1/5"
    assert cli.main(LLAMA_512 + ["--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["reserve"] == "1/10"


def test_api_reserve_and_utilization_that_disagree_are_refused():
    import costgraph
    from costgraph.errors import CostgraphValueError

    m = costgraph.load("llama")
    v = m.values("llama-3-8b")
    with pytest.raises(CostgraphValueError, match="disagree"):
        m.infer(hardware="h100-sxm", prompt=512, generate=128, values=v, reserve="0.1", gpu_memory_utilization="0.8")
    rep = m.infer(hardware="h100-sxm", prompt=512, generate=128, values=v, gpu_memory_utilization="0.8")
    assert rep.settings["reserve"] == "1/5"


def _json(capsys, argv) -> dict:
    from costgraph.export import schema as schemas

    assert cli.main(argv + ["--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e.message for e in schemas.validator("infer").iter_errors(doc)] == []
    return doc


def test_prefix_caching_without_device_memory(capsys):
    # was: internal error, TypeError '<=' Integer and None (the fit of a device nobody gave)
    argv = LLAMA_512[:4] + ["--prompt", "100", "--generate", "10", "--shared-prefix", "50", "--peak", "1e15",
                        "--bandwidth", "3e12"]
    doc = _json(capsys, argv)
    p = doc["serving"]["prefix_caching"]
    assert p["fits"] is None and p["max_batch"] is None
    assert p["kv_cache_bytes_paged"]["value"] == 7 * 16 * 131_072   # b = 1: ceil(110/16) blocks of 131,072 B/token
    assert cli.main(argv) == 0
    assert "largest batch             — (no device memory)" in capsys.readouterr().out


def test_vllm_would_not_start_is_said(capsys):
    # was: 'Available KV cache memory 0.00 GiB', '0.00x' and nothing else, where vLLM raises
    # (vllm-project/vllm v1/core/kv_cache_utils.py::check_enough_kv_cache_memory)
    argv = LLAMA_512[:4] + ["--prompt", "1024", "--generate", "64"]
    doc = _json(capsys, argv + ["--memory", "1"])
    assert doc["serving"]["vllm"]["tokens"] == 0
    assert doc["serving"]["vllm"]["note"] == "vLLM would not start: No available memory for the cache blocks"
    doc = _json(capsys, argv + ["--hardware", "h100-sxm", "--max-model-len", "1000000"])
    v = doc["serving"]["vllm"]
    # 26,969 (test_available_memory_as_vllm_profiles_it): 0.9 of the 79.22 GiB CUDA reports, less the weights as
    # vLLM V1 loads them (its 2 MiB rotary cos/sin cache, 7 fp32 scalars per attention layer), the live set at the
    # profile run's peak (its sampler's: inference/sampler_peak.py) and the H100's logged non-torch 0.16 GiB
    assert v["num_blocks"] == 26_969 and v["blocks_per_request"] == 62_500
    assert v["note"] == "vLLM would not start: one request of max_model_len 1,000,000 does not fit the KV cache"
    assert _json(capsys, argv + ["--hardware", "h100-sxm"])["serving"]["vllm"]["note"] is None


def test_serving_values_keep_huge_expert_powers_unevaluated(capsys):
    # was: prefix caching on Llama-4-Scout at P = 10^7 (b = 64, S = 5·10^6) ran past 60 s: the
    # serving figures expanded (15/16)^(63·5·10^6) exactly (inference/exact.py::exact_value)
    import sympy

    from costgraph.inference.decode import ExactPow
    from costgraph.inference.exact import exact_value

    k, E, n = sympy.symbols("k E n", positive=True)
    e = 1 - (1 - k / E) ** n
    small = exact_value(e, {k: 1, E: 16, n: 3})
    assert small == 1 - sympy.Rational(15, 16) ** 3
    huge = exact_value(e, {k: 1, E: 16, n: 315 * 10**6})
    assert huge.has(ExactPow) and float(huge) == 1.0
    argv = ["infer", "llama4_text", "--config", "llama-4-scout-17b-16e", "--hardware", "h200", "--prompt", "10000000",
            "--generate", "10", "--batch", "64", "--tp", "8", "--shared-prefix", "5000000"]
    doc = _json(capsys, argv)
    p = doc["serving"]["prefix_caching"]
    assert p["max_batch"] == 2 and p["fits"] is False
    assert 0 < p["time_to_first_token"]["value"] < doc["time_to_first_token"]["value"]


# --- efficiencies, reserve and page size out of range refused (new-user trial) ---------------------------------------

INFER = ["infer", "gpt", "--config", "gpt2", "--hardware", "h100-sxm"]


def _err(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


# efficiencies in (0, 1], reserve in [0, 1), the flag's own name
@pytest.mark.parametrize("flag, value, message", [
    ("--compute-efficiency", "0", "error: --compute-efficiency must be a fraction in (0, 1], not 0\n"
     "hint: the share of the peak reached: 1 is the ideal roofline, e.g. 0.45\n"),
    ("--compute-efficiency", "2", "error: --compute-efficiency must be a fraction in (0, 1], not 2\n"
     "hint: the share of the peak reached: 1 is the ideal roofline, e.g. 0.45\n"),
    ("--bandwidth-efficiency", "0", "error: --bandwidth-efficiency must be a fraction in (0, 1], not 0\n"
     "hint: the share of the HBM bandwidth reached: 1 is the ideal roofline, e.g. 0.45\n"),
])
def test_infer_refuses_efficiencies_reserve_and_page_size_out_of_range(capsys, flag, value, message):
    assert _err(capsys, [*INFER, "--prompt", "512", "--generate", "128", flag, value]) == message


# infer's --reserve is vLLM's 1 - gpu_memory_utilization (vllm/config/cache.py: gpu_memory_utilization 0.9): a
# fraction. Was: "must be a fraction in [0, 1), not 3/2" and "hint: the share of device memory kept free: vLLM
# keeps 0.1" (not what to type), and "a number such as 0.45, 2.5 or 140e12" for text (2.5 is refused)
RESERVE_HINT = ("hint: give the share of each GPU's memory kept free, a fraction below 1: --reserve 0.1 (the default, "
                "vLLM's gpu_memory_utilization 0.9), or --gpu-memory-utilization 0.9; for memory in bytes, --memory "
                "(the device's) or --kv-memory (the KV cache's)\n")


def test_infer_reserve_refused_with_what_to_type(capsys):
    # one run of the command line (exit 2, the message and the hint), the other refusals through the API
    from costgraph.errors import CostgraphValueError
    from costgraph.inference.roofline import serving_reserve

    assert _err(capsys, [*INFER, "--prompt", "512", "--generate", "128", "--reserve=100GB"]) == \
        "error: infer's --reserve is a fraction, not a size: '100GB'\n" + RESERVE_HINT
    for value, message in (("1", "--reserve 1 is not a fraction in [0, 1): it keeps all of the device memory free"),
                           ("1.5", "--reserve 1.5 is not a fraction in [0, 1): it keeps all of the device memory free"),
                           ("abc", "cannot read --reserve 'abc'")):
        with pytest.raises(CostgraphValueError) as e:
            serving_reserve(value)
        assert (e.value.message, "hint: " + e.value.hint + "\n") == (message, RESERVE_HINT)


def test_infer_reserve_reads_exact_fractions():
    from costgraph.inference.roofline import serving_reserve

    assert serving_reserve("1/3") == sympy.Rational(1, 3) and serving_reserve(None) == sympy.Rational(1, 10)
    assert serving_reserve("5e-1") == serving_reserve(0.5) == sympy.Rational(1, 2)


def test_infer_refuses_page_size_zero(capsys):
    # since issue 18 --page-size is read as --generate is (1e12, 2**10), by argparse's type: its usage,
    # then the error and the hint line (costgraph.cli_errors)
    err = _err(capsys, [*INFER, "--prompt", "512", "--generate", "128", "--page-size", "0"])
    assert err.startswith("usage: costgraph infer")
    assert err.endswith("costgraph infer: error: argument --page-size: '0' is not a positive whole number\n"
                        "hint: a positive whole number, e.g. 1000, 1e12 or 10**12; "
                        "costgraph infer --help lists its arguments\n")


def test_a_memory_left_symbolic_is_a_located_no_value():
    """A size nobody gave leaves the memory symbolic: the capacity says which sizes ("no value for
    ...", exit 2), where it compared None with the device's bytes (found by the property tests through
    ``costgraph web qwen3_next_chunked``: exit 3)."""
    import costgraph
    from costgraph.errors import CostgraphValueError

    m = costgraph.load("qwen3_next_chunked")
    with pytest.raises(CostgraphValueError, match="no value for .*hv"):
        m.infer(hardware="h100-sxm", prompt=1, generate=1, batch=1, values=None, kv="bf16")


def test_kv_memory_past_the_device_memory_is_refused(cg):
    # vLLM allocates kv_cache_memory_bytes on each device: 1e99 bytes on an 80 GB H100 printed a KV cache of
    # 2.7e31 tokens; the whole device (79.22 GiB as CUDA reports it, runtime_memory.toml [visible.h100-sxm]:
    # vllm PR #10511's total_gpu_memory) leaves nothing for the weights
    for size in ("1e99", "79.22GiB"):
        r = cg("infer", "gpt", "--config", "gpt2", "--kv-memory", size, "--prompt", "16", "--generate", "4",
               "--hardware", "h100-sxm")
        assert r.returncode == 2 and "is not less than the device memory 85,061,827,297 bytes" in r.stderr, r.stderr
    r = cg("infer", "gpt", "--config", "gpt2", "--kv-memory", "79GB", "--prompt", "16", "--generate", "4",
           "--hardware", "h100-sxm")
    assert r.returncode == 0 and "79,000,000,000 bytes" in r.stdout


def test_a_block_repeated_zero_times_is_no_activation_peak(cg):
    # Gemma 4 with num_kv_shared_layers = 0 (examples/hf/gemma4-text-defaults.json, transformers' defaults): its
    # KV-sharing block has count 0 = active; the routed-expert share 0/0 was NaN and `infer --hardware` exited 3
    # ("internal error: TypeError: Invalid NaN comparison")
    from pathlib import Path

    cfg = str(Path(__file__).resolve().parents[2] / "examples" / "hf" / "gemma4-text-defaults.json")
    r = cg("infer", cfg, "--hardware", "h100-sxm", "--prompt", "4096", "--generate", "512", "--format", "json")
    assert r.returncode == 0, r.stderr
    vllm = json.loads(r.stdout)["serving"]["vllm"]
    assert vllm["activation_bytes"] > 0 and vllm["available_bytes"] > 0


def test_a_request_past_max_model_len_is_warned(cg):
    # vLLM's server refuses a request over max_model_len ("This model's maximum context length is 8 tokens");
    # --max-model-len 8 with P + G = 640 was sized silently
    args = ("infer", "gpt", "--config", "gpt2", "--prompt", "512", "--generate", "128", "--hardware", "h100-sxm")
    r = cg(*args, "--max-model-len", "8")
    assert r.returncode == 0 and "warning: P + G = 640 positions is longer than max_model_len = 8" in r.stdout + r.stderr
    r = cg(*args, "--max-model-len", "640")
    assert r.returncode == 0 and "max_model_len =" not in r.stdout + r.stderr


def test_no_memory_left_is_said_for_a_cache_not_modelled(capsys):
    # Qwen3-Next-80B-A3B at TP 2 on 80 GB: 74.28 GiB of weights per rank against 67.06 GiB requested. vLLM raises
    # "No available memory for the cache blocks" (vllm v1/core/kv_cache_utils.py::check_enough_kv_cache_memory,
    # available_memory <= 0) whatever its hybrid cache's layout; costgraph printed "Available KV cache memory
    # 0.00 GiB" and "not computed: recurrent states ... not modelled" (last session's trial)
    argv = ["infer", "examples/hf/qwen3-next-80b-a3b-instruct.json", "--prompt", "1000", "--generate", "100",
            "--hardware", "h100-sxm", "--tp", "2"]
    v = _json(capsys, argv)["serving"]["vllm"]
    assert v["available_bytes"] == 0 and v["weight_bytes"] > v["requested_bytes"] and v["tokens"] is None
    assert v["note"].startswith("vLLM would not start: No available memory for the cache blocks")
    assert cli.main(argv) == 0
    assert "\n  vLLM would not start: No available memory for the cache blocks" in capsys.readouterr().out
    v = _json(capsys, argv[:-1] + ["4"])["serving"]["vllm"]   # TP 4: memory left; the hybrid cache is not modelled
    assert v["available_bytes"] > 0 and v["note"] == "recurrent states (vLLM's MambaSpec) are not modelled"
