"""LoRA and QLoRA training FLOPs (issue 16 item 10): a frozen base computes no weight gradients;
adapters add their forward and both gradients; QLoRA's dequantization under the 'all' convention.
Conventions: costgraph.training.lora_flops."""

import json

import sympy

import costgraph
from costgraph.cli import main
from costgraph.engine.graph import numel
from costgraph.engine.symbols import dim
from costgraph.training.compute import training_flops
from costgraph.training.lora import lora, quantized_weights
from costgraph.training.lora_flops import adapter_flops
from costgraph.training.memory import Layout

LLAMA = costgraph.load("llama")
b, s, h, l, a, d, kv, i, V = (dim(n) for n in ("b", "s", "h", "l", "a", "d", "kv", "i", "V"))


def _flops(convention="matmul", **kw):
    L = Layout(m=1, attention="eager", **kw).filled()
    L.d = 1
    return training_flops(LLAMA.graph, L, convention=convention)


def test_full_fine_tuning_unchanged():
    # 6N-style: forward 2, input gradients 2, weight gradients 2 per weight of the matmuls, and the
    # attention's two products of activations (QKᵀ, probs·V: 4 s a d forward, twice that backward)
    linear = 2 * h * a * d + 2 * h * kv * d + 3 * h * i   # q, o; k, v; gate, up, down, per layer
    f = _flops()
    assert sympy.expand(f["per_token"] - (6 * (l * linear + h * V) + 12 * l * s * a * d)) == 0


def test_lora_llama_2_7b_q_v_r16():
    # the frozen base: forward + input gradients only, 4 per matmul weight instead of 6 (the attention's
    # products of activations keep both gradients); adapters on q_proj (h → a·d) and v_proj (h → kv·d):
    # 2 r (in + out) forward per token each, twice that backward (input and weight gradients)
    r = 16
    linear = 2 * h * a * d + 2 * h * kv * d + 3 * h * i
    base = 4 * (l * linear + h * V) + 12 * l * s * a * d
    adapters = 3 * 2 * r * l * ((h + a * d) + (h + kv * d))
    f = _flops(lora_rank=r, lora_targets=("q_proj", "v_proj"))
    assert sympy.expand(f["per_token"] - (base + adapters)) == 0
    assert f["hardware_per_iteration"] == f["model_per_iteration"]   # no recompute, no dequantization
    v = LLAMA.values(config="llama-2-7b")
    per_token = f["per_token"].xreplace(v)
    full = _flops()["per_token"].xreplace(v)
    # llama-2-7b, s = 4096: 46,084,915,200 FLOPs per token fully fine-tuned; 32,921,092,096 with LoRA
    assert (full, per_token) == (46084915200, 32921092096)
    assert adapters.xreplace(v) == 50331648 and f["lora"]["trainable_parameters"].xreplace(v) == 4194304 * 2
    assert f["four_n"].xreplace(v) == 4 * 6738415616


def test_lora_recompute_reruns_the_adapters():
    # full recompute re-runs each layer's forward, the adapters' too (2 r (in + out) per token each)
    r = dim("r")
    f = _flops(lora_rank=r, recompute="full")
    plain = _flops(recompute="full")
    adapters_fwd = 2 * r * l * ((h + a * d) + (h + kv * d)) * b * s
    base_fwd = plain["hardware_per_iteration"] - plain["model_per_iteration"]
    assert sympy.expand(f["hardware_per_iteration"] - f["model_per_iteration"] - base_fwd - adapters_fwd) == 0


def test_qlora_dequantization():
    # bitsandbytes dequantizes each nf4 weight once in the forward and once in the backward: 2 FLOPs per
    # element per micro-batch under 'all' (hardware FLOPs only); the matmul convention leaves it out
    g = LLAMA.graph
    weights = sum(g.weights[w].count * numel(g.weights[w].shape) for w in quantized_weights(g))
    all_ = _flops("all", lora_rank=16, quantization="nf4")
    assert sympy.expand(all_["hardware_per_iteration"] - all_["model_per_iteration"] - 2 * weights) == 0
    mm = _flops(lora_rank=16, quantization="nf4")
    assert mm["hardware_per_iteration"] == mm["model_per_iteration"] == _flops(lora_rank=16)["model_per_iteration"]
    assert "dequantization" in all_["lora"] and all_["lora"]["quantization"] == "nf4"
    # typed (costgraph.training.result_parts.LoraCompute): QLoRA's two fields are keys only with a quantized base
    from costgraph.training.lora_flops import DEQUANT
    from costgraph.training.result_parts import LoraCompute

    assert type(all_["lora"]) is LoraCompute and all_["lora"].dequantization == DEQUANT
    assert "quantization" not in _flops(lora_rank=16)["lora"] and _flops(lora_rank=16)["lora"].quantization is None
    # the 'all' convention also counts the adapters' α/r scaling and addition: 2·out forward, out backward
    lo = lora(LLAMA.graph, rank=16)
    mm, al = adapter_flops(lo, "matmul"), adapter_flops(lo, "all")
    q = "layers/layer/self_attn/q_proj"
    assert sympy.expand(al[q]["forward"] - mm[q]["forward"] - 2 * a * d * l * b * s) == 0
    assert sympy.expand(al[q]["backward"] - mm[q]["backward"] - a * d * l * b * s) == 0


def test_cli_states_lora(capsys):
    argv = ["train", "llama", "--config", "llama-2-7b", "--lora", "16", "--gpus", "8", "--attention", "eager"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "LoRA on: rank 16, targets q_proj, v_proj (64 linears), 8,388,608 trainable parameters" in out
    assert "model FLOPs (for MFU): trainable-aware" in out
    assert main(argv + ["--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["lora"]["trainable_parameters"]["value"] == 8388608
    # the JSON's lora section is LoraCompute's fields present, in their order (no QLoRA: no quantization keys)
    assert list(doc["lora"]) == ["rank", "targets", "trainable_parameters", "adapted_linears", "model_flops"]
    assert doc["lora"]["rank"]["value"] == 16 and [t.rsplit("/", 1)[-1] for t in doc["lora"]["targets"]] == ["q_proj", "v_proj"]
    assert doc["flops"]["per_token"]["value"] == 32921092096
