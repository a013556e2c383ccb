"""Parallel serving (issue 17 item 4): TP wider than the K/V heads, EP, DP attention, PP,
TP overlap — exact bytes per device, each rule's source in a comment.

Configurations: models/llama.cg ``llama-3-70b`` (h 8192, 64 heads, 8 K/V heads of 128, i 28672,
80 layers, V 128256), models/deepseek_v3.cg ``deepseek-v3`` (61 layers, 3 dense, 256 routed
experts of width 2048, top-8, MLA cache 512 + 64 per token per layer).
"""

import sympy
import pytest

from costgraph.errors import CostgraphValueError
from costgraph.inference import G, P, Inference, load, machine, step_seconds
from costgraph.inference.parallel import Serving, ServingInference, serving_inference
from costgraph.inference.roofline import comm_seconds, infer
from costgraph.inference.phases import Step
from costgraph.hardware import preset
from costgraph.engine.graph import ZERO
from costgraph import cli
import json
from costgraph.cli import main

H, A, KV, D, I, L, V = 8192, 64, 8, 128, 28672, 80, 128256   # Llama-3-70B config.json


@pytest.fixture(scope="module")
def llama():
    return load("llama")


@pytest.fixture(scope="module")
def dsv3():
    return load("deepseek_v3")


def _v(model, config, **over):
    return model.values(config, **over)


def _at(e, values, **extra):
    return sympy.sympify(e).xreplace({**values, **extra})


def _llama_layer_bytes(t, kv_per_device):
    """bf16 bytes of one Llama layer on one device: q, o split t ways, K/V heads kv_per_device,
    MLP split t ways, two norms whole."""
    attn = 2 * H * (A // t) * D + 2 * H * kv_per_device * D
    return 2 * (attn + 3 * H * I // t + 2 * H)


# ---------------------------------------------------------------- (a) TP wider than the K/V heads

def test_llama3_70b_tp16_replicates_kv_heads_as_vllm(llama):
    # vllm @ 0036d38d, vllm/model_executor/layers/linear.py::QKVParallelLinear.__init__: tp_size >=
    # total_num_kv_heads → num_kv_heads = 1, num_kv_head_replicas = tp_size // total_num_kv_heads
    # (divide() asserts it is whole). Llama-3-70B at TP 16: 64/16 = 4 query heads and 1 K/V head
    # (2 replicas of each of the 8) per device.
    v = _v(llama, "llama-3-70b", b=1)
    rep = infer(llama, hardware="h100-sxm", prompt=1000, generate=100, batch=1, values=v, t=16)
    # KV cache: 1 K + 1 V head of 128, bf16, 80 layers = 40,960 bytes per token per device
    assert rep.values["kv_cache_bytes_per_token"] == 2 * 1 * D * 2 * L == 40_960
    assert rep.values["kv_cache_bytes"] == 40_960 * 1100
    # weights: q, o and the MLP ÷ 16; k, v one head (h × 128) each; norms whole; embedding and
    # head vocabulary-parallel ÷ 16; final norm whole
    weights = L * _llama_layer_bytes(16, 1) + 2 * (2 * V * H // 16 + H)
    assert rep.values["weight_bytes"] == weights == 8_989_458_432
    # decode at n = P + G − 2 = 1098 cached: every weight once, 1098 positions read, one written
    assert rep.values["decode.weight_bytes"] == weights
    assert rep.values["decode.kv_read_bytes"] == 40_960 * 1098
    assert rep.values["decode.bytes"] == weights + 40_960 * 1099


def test_kv_heads_not_dividing_tp_refused(llama):
    # vLLM's divide(tp_size, total_num_kv_heads) asserts: 8 K/V heads at TP 32 replicate 4 times
    # (whole), at TP 12 no layout exists (64 query heads do not divide either) — refused
    v = _v(llama, "llama-3-70b", b=1)
    with pytest.raises(CostgraphValueError):
        infer(llama, hardware="h100-sxm", prompt=8, generate=8, batch=1, values=v, t=12)


# ---------------------------------------------------------------- (b) expert parallelism

def _routed_bytes():
    # 58 MoE layers × 256 experts × (gate, up, down: 3 × 7168 × 2048) × 2 bytes (bf16)
    return 58 * 256 * 3 * 7168 * 2048 * 2


def test_deepseek_v3_ep8_dp8_weights_kv_alltoall(dsv3):
    # SGLang @ 2aa2e2d0 python/sglang/srt/layers/dp_attention.py::compute_dp_attention_world_info:
    # attention-TP = tp/dp = 1, each DP rank its own batch; DeepSeek-V3 report §3.4: every op but
    # the routed experts with the DP rank, the routed experts spread over EP 8 (32 per device)
    v = _v(dsv3, "deepseek-v3", b=64)
    rep = infer(dsv3, hardware="h200", prompt=1000, generate=100, batch=64, values=v, t=8, ep=8, dp_attention=8)
    whole = Inference(dsv3).weight_memory().xreplace(v)
    assert rep.values["weight_bytes"] == whole - _routed_bytes() + _routed_bytes() // 8
    # KV cache: the DP rank's 64/8 = 8 sequences, the MLA latent 512 + 64 per layer, bf16, 61 layers
    assert rep.values["kv_cache_bytes_per_token"] == (512 + 64) * 2 * 61 == 70_272
    assert rep.values["kv_cache_bytes"] == 8 * 1100 * 70_272
    # dispatch + combine per MoE layer: the device's 64/8 tokens' 8 copies of 7168 bf16 values
    # (training's ep_time convention), 58 MoE layers
    assert rep.values["decode.all_to_all_bytes"] == 2 * 58 * (64 * 8 * 7168 * 2 // 8)
    assert rep.values["experts_per_device"] == 32
    # expected distinct experts read per device, uniform routing over the 64 tokens of the step
    assert rep.quantities["decode.distinct_experts_read_per_device"].xreplace(v) == \
        32 * (1 - (1 - sympy.Rational(8, 256)) ** 64)
    # the seconds of the all-to-alls: (e−1)/e of each buffer at the NVLink line rate; latency NCCL's
    # p2p rounds, training's rule (parallel/ep_time.py::latency_rounds): EP 8 inside one 8-GPU NVLink
    # domain runs its 7 peers in ⌈7/8⌉ = 1 round — NCCL @ 5067397c src/enqueue.cc batches up to
    # NCCL_MAX_DEV_WORK_P2P_PER_BATCH = 8 p2p operations per channel (src/include/device.h) — where the
    # ring convention charged e − 1 = 7 steps
    m = machine("h200", "bf16", 8)
    size = sympy.Integer(64 * 8 * 7168 * 2 // 8)
    wire = sympy.Rational(7, 8) * size / m.beta
    ring = 2 * 58 * (7 * m.alpha + wire)        # before: the ring's e − 1 latency steps
    a2a = 2 * 58 * (1 * m.alpha + wire)         # now: one p2p round
    assert m.alpha == sympy.Rational(preset("h200").latency_scale_up_ns, 10**9)
    assert rep.values["decode.communication_seconds"] == a2a
    assert ring - rep.values["decode.communication_seconds"] == 2 * 58 * 6 * m.alpha


def test_ep_refusals(dsv3, llama):
    v = _v(dsv3, "deepseek-v3", b=8)
    for kw, needle in ((dict(t=8, ep=4), "must equal"), (dict(t=3, ep=3), "does not divide the 256"),
                       (dict(t=8, dp_attention=3), "does not divide --tp"),
                       (dict(t=8, dp_attention=8, ep=8, batch=4), "does not split")):
        batch = kw.pop("batch", 8)
        with pytest.raises(CostgraphValueError, match=needle) as e:
            infer(dsv3, hardware="h200", prompt=8, generate=8, batch=batch, values=v, **kw)
        assert e.value.hint
    with pytest.raises(CostgraphValueError, match="no routed experts"):
        infer(llama, hardware="h100-sxm", prompt=8, generate=8, batch=2, values=_v(llama, "llama-3-70b"),
              t=2, ep=2)
    with pytest.raises(CostgraphValueError, match="tp-overlap"):
        infer(llama, hardware="h100-sxm", prompt=8, generate=8, batch=2, values=_v(llama, "llama-3-70b"),
              t=2, tp_overlap="some")


# ---------------------------------------------------------------- (c) DP attention, dense model

def test_llama3_70b_dp_attention_4_of_tp8(llama):
    # SGLang dp_attention.py: attention sharded attn-TP = 8/4 = 2 ways, replicated 4 times; the MLP
    # on the full TP 8 group. K/V heads 8/2 = 4 per device; each rank's b/4 = 2 sequences
    v = _v(llama, "llama-3-70b", b=8)
    rep = infer(llama, hardware="h100-sxm", prompt=1000, generate=100, batch=8, values=v, t=8, dp_attention=4)
    layer = 2 * (2 * H * (A // 2) * D + 2 * H * (KV // 2) * D + 3 * H * I // 8 + 2 * H)
    # embedding, final norm and head with the DP rank (attention-TP 2)
    assert rep.values["weight_bytes"] == L * layer + 2 * (2 * V * H // 2 + H) == 28_276_441_088
    assert rep.values["kv_cache_bytes_per_token"] == 2 * 4 * D * 2 * L
    assert rep.values["kv_cache_bytes"] == 2 * 1100 * 2 * 4 * D * 2 * L
    # decode: SGLang DpPaddingMode.get_dp_padding_mode picks MAX_LEN when 2·sum ≥ max·dp (equal ranks):
    # per layer one all-gather before the MLP and one reduce-scatter after it, of all 8 tokens' h
    si = serving_inference(llama, Serving(8, 1, 4, 1), v)
    dec = si.decode()
    gathers = [c for c in dec.collectives if c.kind in ("all-gather", "reduce-scatter")]
    assert sorted(c.kind for c in gathers) == ["all-gather", "reduce-scatter"]
    assert all(c.group == 8 and _at(c.calls, v) == L and _at(c.bytes, v) == 8 * H * 2 for c in gathers)
    # the attention's o_proj all-reduce stays over attention-TP 2, of the rank's 2 tokens
    o = next(c for c in dec.collectives if c.path.endswith("self_attn/o_proj"))
    assert (o.kind, o.group, _at(o.bytes, v)) == ("all-reduce", 2, 2 * H * 2)
    # prefill (an extend batch): SUM_LEN, two all-reduces of the zero-padded buffer per layer
    pre = si.prefill()
    assert sorted(c.kind for c in pre.collectives if c.group == 8) == ["all-reduce", "all-reduce"]


# ---------------------------------------------------------------- (d) pipeline stages

def test_llama3_70b_pp4_most_loaded_stage(llama):
    # Megatron-LM get_num_layers_to_build (parallel/layer_split.py): 80 layers / 4 = 20 per stage;
    # the last stage holds the final norm and the head (V × h > the first stage's embedding, equal
    # here: untied V × h each, the norm tips it)
    v = _v(llama, "llama-3-70b", b=1)
    rep = infer(llama, hardware="h100-sxm", prompt=1000, generate=100, batch=1, values=v, pp=4)
    assert rep.values["weight_bytes"] == 20 * _llama_layer_bytes(1, KV) + 2 * (V * H + H)
    # KV per device: its 20 layers, for 4 micro-batches of b = 1 in flight (vLLM runs p batches)
    per_token = 2 * KV * D * 2 * 20
    assert rep.values["kv_cache_bytes_per_token"] == per_token
    assert rep.values["kv_cache_bytes"] == 4 * 1100 * per_token
    # decode latency: the whole model's step + 3 sends of b·h bf16 activations (point-to-point)
    plain = Inference(llama)
    m = machine("h100-sxm", "bf16", 1)
    send = 3 * (m.alpha + sympy.Integer(H * 2) / m.beta)
    base = step_seconds(plain.decode(), m, 1).xreplace({**v, P: 1000, G: 100})
    assert sympy.simplify(rep.values["time_per_output_token"] - (base + send)) == 0
    assert rep.values["decode.send_recv_bytes"] == 3 * H * 2
    # throughput: p·b tokens per max(step, p × slowest stage)
    slow = rep.values["decode.slowest_stage_seconds"]
    mean = rep.values["time_per_output_token_mean"]
    assert rep.values["tokens_per_second"] == 4 / max(mean, 4 * slow)
    with pytest.raises(CostgraphValueError, match="cannot share"):
        infer(llama, hardware="h100-sxm", prompt=8, generate=8, batch=1, values=v, pp=3)


# ---------------------------------------------------------------- (e) TP overlap

def test_tp_overlap_full_is_the_max_of_ops_and_collectives(llama):
    v = _v(llama, "llama-3-70b", b=1)
    none = infer(llama, hardware="h100-sxm", prompt=1000, generate=100, batch=1, values=v, t=8)
    full = infer(llama, hardware="h100-sxm", prompt=1000, generate=100, batch=1, values=v, t=8,
                 tp_overlap="full")
    for phase in ("prefill", "decode"):
        comm = none.values[f"{phase}.communication_seconds"]
        ops = none.values[f"{phase}.seconds"] - comm
        assert full.values[f"{phase}.seconds"] == max(ops, comm)
        assert full.values[f"{phase}.communication_seconds"] == comm
    assert full.values["weight_bytes"] == none.values["weight_bytes"]


def test_trivial_layout_is_plain_inference(llama):
    # t = e = d = p = 1: the same analysis object as before (every figure unchanged)
    v = _v(llama, "llama-3-70b", b=1)
    inf = serving_inference(llama, Serving(), v)
    assert type(inf) is Inference
    one = infer(llama, hardware="h100-sxm", prompt=64, generate=8, batch=2, values=v)
    same = infer(llama, hardware="h100-sxm", prompt=64, generate=8, batch=2, values=v, ep=1, dp_attention=1,
                 pp=1, tp_overlap="none")
    assert one.values == same.values and one.settings == same.settings
    assert isinstance(ServingInference(llama, Serving(tp_overlap="full"), v).decode().overlap, str)


# ---------------------------------------------------------------- CLI and JSON

def test_cli_serving_flags_json_and_refusals(capsys):
    import json

    from costgraph.cli import main
    from costgraph.export.schema import validator

    argv = ["infer", "deepseek_v3", "--config", "deepseek-v3", "--hardware", "h200", "--prompt", "128",
            "--generate", "4", "--batch", "16", "--tp", "8", "--ep", "8", "--dp-attention", "8", "--weights", "fp8",
            "--format", "json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    validator("infer").validate(doc)
    assert (doc["settings"]["ep"], doc["settings"]["dp_attention"], doc["settings"]["devices"]) == (8, 8, 8)
    # 2 × 58 MoE layers × 16/8 tokens × 8 copies × 7168 bf16 values
    assert doc["parallel"]["decode.all_to_all_bytes"]["value"] == 2 * 58 * 2 * 8 * 7168 * 2
    assert main(argv[:-2] + ["--pp", "7"]) == 2
    assert "--pp dividing the 61 layers" in capsys.readouterr().err


def test_moe_all_reduce_once_per_layer_under_tp():
    # vllm fused_moe/layer.py::FusedMoE.forward: `if self.reduce_results and (self.tp_size > 1 or
    # self.ep_size > 1): final_hidden_states = tensor_model_parallel_all_reduce(final_hidden_states)`
    # — one all-reduce of the combined [tokens, h] output per MoE layer, not one per active expert
    m = load("mixtral")
    v = _v(m, "mixtral-8x7b", b=4)
    dec = Inference(m, t=2).decode()
    ar = {a.path: a for a in dec.allreduce}
    experts = ar["layers/layer/mlp/experts/expert/down_proj"]
    assert experts.calls.xreplace(v) == 32
    assert experts.bytes.xreplace(v) == 4 * 4096 * 2     # b tokens × h, bf16
    assert ar["layers/layer/self_attn/o_proj"].calls.xreplace(v) == 32


def test_each_collective_on_the_link_its_group_crosses(dsv3):
    # parallel/placement.py::link (training's rule): consecutive ranks inside one scale-up domain
    # (8 on an HGX H100) use NVLink, else the NIC. TP 16 with DP attention 4: attention-TP 4
    # stays in a node, the EP 16 all-to-all leaves it
    hw = preset("h100-sxm")
    up = (sympy.Rational(hw.latency_scale_up_ns, 10**9), sympy.Integer(hw.scale_up_bandwidth))
    out = (sympy.Rational(hw.latency_scale_out_ns, 10**9), sympy.Integer(hw.scale_out_bandwidth))
    v = _v(dsv3, "deepseek-v3", b=16)
    si = ServingInference(dsv3, Serving(16, 16, 4, 1), v, hardware="h100-sxm")
    colls = si.decode().collectives
    links = {(c.kind, c.group): c.link for c in colls}
    assert links[("all-reduce", 4)] == up
    assert links[("all-to-all", 16)] == out
    # the EP 16 all-to-all across two nodes: one round of the NIC's latency per call (NCCL @ 5067397c
    # src/graph/paths.cc::ncclTopoComputeP2pChannels fits all the peers in a single round;
    # parallel/ep_time.py::alltoall_latency, training's rule), not the ring's 15 steps; the all-reduce
    # keeps the ring's 2(t − 1) steps (Collective.latency None)
    a2a = [c for c in colls if c.kind == "all-to-all"]
    assert len(a2a) == 2 and all(c.latency == out[0] for c in a2a)
    assert all(c.latency is None for c in colls if c.kind != "all-to-all")
    step = Step(sympy.Integer(1), sympy.Integer(0), ZERO, ZERO, ZERO, ZERO, ZERO, False, collectives=a2a[:1])
    size = a2a[0].bytes
    assert comm_seconds(step, machine("h100-sxm", "bf16", 16), 16) == \
        a2a[0].calls * (out[0] + sympy.Rational(15, 16) * size / out[1])


def test_deepseek_v3_prefill_layout_of_the_report(dsv3):
    # DeepSeek-V3 report §3.4.1 (prefilling): 32 GPUs, attention TP 4 with DP 8, MoE EP 32:
    # --tp 32 --dp-attention 8 --ep 32. Attention side = Inference at TP 4 (the MLA latent cache is
    # not split by heads: each attention-TP rank keeps the whole latent of its rank's sequences)
    v = _v(dsv3, "deepseek-v3", b=32)
    rep = infer(dsv3, hardware="h100-sxm", prompt=256, generate=2, batch=32, values=v, t=32, ep=32,
                dp_attention=8)
    at4 = Inference(dsv3, t=4).weight_memory().xreplace(v)
    assert rep.values["weight_bytes"] == at4 - _routed_bytes() // 4 + _routed_bytes() // 32
    assert rep.values["experts_per_device"] == 8
    assert rep.values["kv_cache_bytes"] == 4 * 258 * 70_272          # 32/8 sequences of P + G
    # dispatch + combine: 32 sequences × 256 prompt tokens over 32 devices, 8 copies of 7168 bf16
    assert rep.values["prefill.all_to_all_bytes"] == 2 * 58 * (32 * 256 * 8 * 7168 * 2 // 32)
    # the decode layout (EP 320 over 256 routed experts + redundant and shared ones) is refused
    with pytest.raises(CostgraphValueError, match="does not divide the 256"):
        infer(dsv3, hardware="h100-sxm", prompt=8, generate=2, batch=80, values=v, t=320, ep=320,
              dp_attention=80)


# --- a parallel layout without a device or a link: no seconds, said so (issue 17 trial) ------------------------------

MIXTRAL = ["infer", "mixtral", "--config", "mixtral-8x7b", "--prompt", "100", "--generate", "10"]


def _json(capsys, argv) -> dict:
    from costgraph.export import schema as schemas

    assert cli.main(argv + ["--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e.message for e in schemas.validator("infer").iter_errors(doc)] == []
    return doc


def test_parallel_layout_without_a_device(capsys):
    # was: internal error, KeyError 'tokens_per_second' (EP / DP attention with no seconds)
    doc = _json(capsys, MIXTRAL + ["--tp", "8", "--ep", "8", "--dp-attention", "8", "--batch", "8"])
    assert doc["settings"]["ep"] == 8 and doc["parallel"]["experts_per_device"]["value"] == 1
    assert doc["time_per_output_token"]["value"] is None
    # a rate but no link: the EP all-to-all has no seconds, said so
    doc = _json(capsys, MIXTRAL + ["--tp", "8", "--ep", "8", "--peak", "1e15", "--bandwidth", "4.8e12"])
    assert doc["time_per_output_token"]["value"] is None


def test_pipeline_without_a_link_has_no_seconds(capsys):
    # was: internal error, TypeError One * None (the stages' sends on a link nobody gave)
    doc = _json(capsys, MIXTRAL + ["--pp", "4", "--peak", "1e15", "--bandwidth", "4.8e12"])
    assert "pipeline stages' sends need a link" in doc["time_per_output_token"]["absent"]
    doc = _json(capsys, MIXTRAL + ["--pp", "4", "--peak", "1e15", "--bandwidth", "4.8e12", "--link-bandwidth", "50e9"])
    assert doc["time_per_output_token"]["value"] is not None


# --- infer refuses the TP layouts train refuses (new-user trial) -----------------------------------------------------

INFER = ["infer", "gpt", "--config", "gpt2", "--hardware", "h100-sxm"]


def _err(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


# infer refuses the TP layouts train refuses (costgraph/training/validity.py check_layout)
def test_infer_refuses_tp_that_splits_an_axis_unevenly(capsys):
    msg = ("error: tensor parallelism t = 5 splits an axis of 2304 (3*h, tensor 'layers/attn/c_attn:0') "
           "unevenly\nhint: t must divide the heads, K/V heads and widths it splits\n")
    assert _err(capsys, [*INFER, "--prompt", "512", "--generate", "128", "--tp", "5"]) == msg
    # the same message as train's (3h = 2304 is not a multiple of 5)
    assert _err(capsys, ["train", "gpt", "--config", "gpt2", "--gpus", "5", "--tp", "5"]) == msg
    assert main([*INFER, "--prompt", "512", "--generate", "128", "--tp", "4"]) == 0   # 12 heads, 768, 2304, 3072 ÷ 4
