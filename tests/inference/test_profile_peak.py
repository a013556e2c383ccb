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
