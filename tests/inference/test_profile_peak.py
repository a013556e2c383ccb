"""vLLM's profile-run activation peak as the live set at one operator (costgraph/inference/profile_peak.py).

vllm-project/vllm issue #10517 (https://github.com/vllm-project/vllm/issues/10517), V0 engine (v0.6.4),
meta-llama/Llama-3.1-8B-Instruct on an RTX 3090, --max-model-len 20000 / 29000 (max_num_batched_tokens =
max_model_len, max_num_seqs 256), gpu_memory_utilization 0.90:
  "Loading model weights took 14.9888 GB"
  "total_gpu_memory=23.58GiB ... peak_torch_memory=17.06GiB ... non_torch_memory=0.35GiB kv_cache_size=3.81GiB"
  "# GPU blocks: 1952"                                  (max_model_len 20000)
  "peak_torch_memory=17.98GiB ... kv_cache_size=2.89GiB; # GPU blocks: 1478"   (max_model_len 29000)
peak_torch_memory less the weights is the activation peak: 2.07 and 2.99 GiB, 110.7 kB per token either way.
vLLM's LlamaMLP.forward (vllm @ e06c9ba2 vllm/model_executor/models/llama.py): gate_up = gate_up_proj(x);
x = act_fn(gate_up); x = down_proj(x): at down_proj gate_up [T, 2i], the product [T, i] and the output [T, h]
are alive with the caller's normalised input and residual [T, h]: (3h + 3i) bf16 values per token.
"""

import pytest
import sympy

from costgraph.commands._analysis import inference_model
from costgraph.inference import infer
from costgraph.inference.capacity import activation_estimate

GIB = 2**30
H, I, KV, D, L = 4096, 14336, 8, 128, 32          # examples/hf/llama-3.1-8b.json
PER_TOKEN = (3 * H + 3 * I) * 2                     # 110,592 B
WEIGHTS = 16_094_076_928                            # as vLLM V0 loads them (tests/inference/test_serving_runtimes.py): 14.9888 GiB


@pytest.fixture(scope="module")
def llama31():
    return inference_model("examples/hf/llama-3.1-8b.json", None, {}, {})


def _v0(llama31, tokens):
    model, values = llama31
    # vllm issue #10517 ran vLLM 0.6.4's V0 engine (--vllm-engine v0: no attention scalars in the weights)
    rep = infer(model, prompt=tokens - 100, generate=100, batch=1, values=values, memory="23.58GiB",
                non_torch_memory="0.35GiB", max_model_len=tokens, max_num_batched_tokens=tokens, max_num_seqs=256,
                vllm_engine="v0")
    return rep.serving["vllm"]


@pytest.mark.parametrize("tokens, logged_peak, logged_blocks", [(20000, "17.06", 1952), (29000, "17.98", 1478)])
def test_v0_long_prefill_profile_peak(llama31, tokens, logged_peak, logged_blocks):
    v = _v0(llama31, tokens)
    assert v["engine"] == "v0" and v["weight_bytes"] == WEIGHTS   # V0: no attention scalars
    assert v["activation_bytes"] == tokens * PER_TOKEN
    # peak_torch_memory = weights + activation peak, printed %.2f GiB: within the print's last digit
    assert abs((WEIGHTS + v["activation_bytes"]) / GIB - float(logged_peak)) <= 0.0125
    # the blocks follow: total x 0.9 - weights - peak - non-torch, pages of 16 tokens x 131,072 B
    avail = int(sympy.floor(sympy.Rational(2358, 100) * GIB)) * 9 // 10 - WEIGHTS - tokens * PER_TOKEN \
        - int(0.35 * GIB)
    assert v["available_bytes"] == avail
    assert v["num_blocks"] == avail // (16 * 2 * L * KV * D * 2)
    assert abs(v["num_blocks"] / logged_blocks - 1) < 0.005     # was +12% and +23% with one operator's tensors


def test_the_peak_is_the_mlp_live_set_not_one_operator(llama31):
    # one operator's inputs and outputs (the product: gate, up in, one out) would be 3i values per token
    from costgraph.inference.phases import Inference

    model, values = llama31
    inf = Inference(model)
    subs = {k: x for k, x in values.items() if k not in (inf.b, inf.s)}
    assert activation_estimate(inf, subs, 8192, 1024) == 8192 * PER_TOKEN
    assert activation_estimate(inf, subs, 8192, 1024) > 8192 * 3 * I * 2
    # under TP 2 every [T, i] tensor is split and the [T, h] ones are whole (row-parallel output all-reduced)
    inf2 = Inference(model, t=2)
    assert activation_estimate(inf2, subs, 8192, 1024) == 8192 * (3 * H + 3 * I // 2) * 2


def test_the_output_head_over_the_sampled_rows(llama31):
    # a forward of 64 tokens: the head's logits [min(seqs, T), V] dominate; seqs = 1 leaves the MLP's live set
    from costgraph.inference.phases import Inference

    model, values = llama31
    inf = Inference(model)
    subs = {k: x for k, x in values.items() if k not in (inf.b, inf.s)}
    V = 128256
    assert activation_estimate(inf, subs, 64, 64) == 64 * (H + V) * 2
    assert activation_estimate(inf, subs, 64, 1) == 64 * PER_TOKEN


def test_v0_sampler_buffers_in_the_profile_run(llama31):
    # vLLM V0's profile run samples max_num_seqs (256: vllm @ 001999d2 arg_utils.py EngineArgs.__post_init__) rows
    # with top_p 0.99, top_k V - 1 (vllm @ 00f5ff34 worker/model_runner.py::profile_run); at the end of its
    # sampler's _apply_top_k_top_p (vllm @ 00f5ff34 model_executor/layers/sampler.py) alive per logit: the model
    # runner's bf16 logits 2, the fp32 copy 4, sort values 4 and int64 indices 8, top-k mask 1, top-p softmax 4
    # and cumsum 4, top-p mask 1, the re-sorted empty_like 4 = 32 B; beside them the last hidden states [T, h]
    from costgraph.inference.phases import Inference
    from costgraph.inference.sampler_peak import sampler_peak

    model, values = llama31
    inf = Inference(model)
    subs = {k: x for k, x in values.items() if k not in (inf.b, inf.s)}
    V = 128256
    sp = sampler_peak(inf, subs, 8192, 256)
    assert (sp["rows"], sp["vocab"], sp["per_logit"]) == (256, V, 32)
    assert sp["bytes"] == 8192 * H * 2 + 256 * V * 32 == 1_117_782_016
    assert sampler_peak(inf, subs, 100, 256)["rows"] == 100          # no more rows than tokens
    # a typed part (issue 31 item 2): each figure a field with its unit, the JSON its present keys
    from costgraph.inference.kv_parts import SamplerPeak
    from costgraph.result_fields import quantities

    assert isinstance(sp, SamplerPeak) and sp.bytes == sp["bytes"] and sp.hidden_bytes == 8192 * H * 2
    assert {n: f.unit for n, f in quantities(SamplerPeak)} == {
        "bytes": "bytes", "rows": "rows", "vocab": "logits", "per_logit": "bytes", "hidden_bytes": "bytes"}
    # vllm PR #10511 (github.com/vllm-project/vllm/pull/10511), V0, Meta-Llama-3-8B on an H100 (the same widths
    # and vocabulary): "PyTorch activation peak memory 1.26GiB", "available_kv_cache_memory 53.29GiB"; the
    # forward of 8192 tokens alone is 0.84 GiB, the sampler 1.04: the profile's peak is the larger
    rep = infer(model, prompt=512, generate=128, batch=1, values=values, memory="79.22GiB",
                non_torch_memory="1.79GiB", max_model_len=8192, vllm_engine="v0")
    v = rep.serving["vllm"]
    assert (v["max_num_seqs"], v["forward_activation_bytes"]) == (256, 8192 * PER_TOKEN)
    assert v["activation_bytes"] == v["sampler_bytes"] == sp["bytes"]
    assert abs(v["available_bytes"] / (53.29 * GIB) - 1) < 0.005   # +0.41% (+0.78% with the forward alone)
    assert "the sampler 1.04 GiB (256 rows x 128,256 logits x 32 B" in rep.to_text()
    # the long prefills of vllm issue #10517 (20,000 tokens): the forward's 2.06 GiB stays the peak
    assert _v0(llama31, 20000)["activation_bytes"] == 20000 * PER_TOKEN


def test_v1_sampler_buffers_in_the_profile_run(llama31):
    # vLLM V1's profile run (vllm @ 000fc94b v1/worker/gpu_model_runner.py::profile_run, _dummy_run,
    # _dummy_sampler_run): R = min(max_num_batched_tokens, max_num_seqs) requests, their logits sampled with
    # top_k V - 1 and top_p 0.9; alive at the end of apply_top_k_top_p (vllm @ 3babc05a
    # v1/sample/ops/topk_topp_sampler.py; the fp32 copy from vllm @ 3e342658 v1/sample/sampler.py) per logit:
    # the bf16 logits 2, the fp32 copy 4, sort values 4 and int64 indices 8, top-k mask 1, top-p softmax 4 (its
    # cumsum written into it: out=probs_sort), top-p mask 1, the re-sorted scatter 4 = 28 B; beside them the
    # hidden states [T, h], the gathered last ones [R, h] and their rand_like [R, h]
    from costgraph.inference.phases import Inference
    from costgraph.inference.sampler_peak import sampler_peak

    model, values = llama31
    inf = Inference(model)
    subs = {k: x for k, x in values.items() if k not in (inf.b, inf.s)}
    V = 128256
    sp = sampler_peak(inf, subs, 8192, 1024, "v1")
    assert (sp["rows"], sp["vocab"], sp["per_logit"]) == (1024, V, 28)
    assert sp["hidden_bytes"] == (8192 + 2 * 1024) * H * 2
    assert sp["bytes"] == (8192 + 2 * 1024) * H * 2 + 1024 * V * 28 == 3_761_242_112
    # infer's V1 default on an H100 (max_num_seqs 1024 for an 80 GB GPU that is not an A100: vllm
    # arg_utils.py EngineArgs get_batch_defaults, OPENAI_API_SERVER): the sampler is the profile's peak (V1 reads
    # allocated_bytes.all.peak after the whole profile_run, v1/worker/gpu_worker.py determine_available_memory)
    rep = infer(model, prompt=512, generate=128, batch=1, values=values, hardware="h100-sxm", max_model_len=8192)
    v = rep.serving["vllm"]
    assert (v["engine"], v["max_num_seqs"], v["forward_activation_bytes"]) == ("v1", 1024, 8192 * PER_TOKEN)
    assert v["activation_bytes"] == v["sampler_bytes"] == sp["bytes"]
    assert "the sampler 3.50 GiB (1,024 rows x 128,256 logits x 28 B" in rep.to_text()
