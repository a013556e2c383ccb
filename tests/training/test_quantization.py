"""Quantization as shipped (issue 17, item 5): weight layouts (AWQ, GPTQ, FP8 per-tensor, per-channel and
block-wise, MXFP4, NVFP4), which weights are quantized (--quantized, modules_to_not_convert), a config.json's
quantization_config / torch_dtype, and KV cache layouts (int8 per tensor, per token-head, llama.cpp q8_0/q4_0).

Sources are named beside each figure; SOURCES.md §10 gives the repositories and commits.
"""

import json
from pathlib import Path

import pytest
import sympy

from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.inference import Inference, load
from costgraph.inference.dtypes import derived_weight_dtype, kv_dtype, weight_dtype
from costgraph.inference.quantized import kept_by, quantized_weights, routers
from costgraph.language.hf_quant import shipped

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
ARGS = ["--hardware", "h100-sxm", "--prompt", "16", "--generate", "4", "--format", "json"]
# transformers 5.24.0 on meta (tests/models/test_hf_families_c.py): gpt-oss parameter counts
GPT_OSS_120B_PARAMS = 116_829_156_672
GPT_OSS_20B_PARAMS = 20_914_757_184


#: what `infer ARGV` printed, by its arguments: gpt-oss-120b.json's shipped layout is read by two tests
#: (test_gpt_oss_120b_checkpoint_bytes, test_explicit_weights_win_and_quantized_override), ~2.5 s of CPU a run
_PRINTED: dict = {}


def _infer(capsys, *argv):
    """``infer ARGV`` (with :data:`ARGS`) run once for the module, its JSON document (a new one each call)."""
    if argv not in _PRINTED:
        assert main(["infer", *argv, *ARGS]) == 0
        _PRINTED[argv] = capsys.readouterr().out
    return json.loads(_PRINTED[argv])


def _ceil(x, b=128):
    return -(-x // b)


# ---------------------------------------------------------------- one weight in each layout

@pytest.mark.parametrize("name, expected", [
    # vllm @ 92d756e9 awq.py::AWQLinearMethod.create_weights: qweight int32 [in, out/8], qzeros int32
    # [in/128, out/8], scales fp16 [in/128, out]
    ("awq", 4096 * 4096 // 8 * 4 + 4096 // 128 * 4096 // 8 * 4 + 4096 // 128 * 4096 * 2),
    ("int4", 4096 * 4096 // 8 * 4 + 4096 // 128 * 4096 // 8 * 4 + 4096 // 128 * 4096 * 2),   # the old name
    # vllm @ e5dd90be gptq.py::GPTQLinearMethod.create_weights: qweight int32 [in/8, out], qzeros, scales as AWQ;
    # act-order keeps g_idx int32 [in]
    ("gptq", 4096 // 8 * 4096 * 4 + 4096 // 128 * 4096 // 8 * 4 + 4096 // 128 * 4096 * 2),
    ("gptq-act-order", 4096 // 8 * 4096 * 4 + 4096 // 128 * 4096 // 8 * 4 + 4096 // 128 * 4096 * 2 + 4096 * 4),
    ("fp8", 4096 * 4096 + 4),                              # one fp32 weight_scale per tensor
    ("fp8-per-channel", 4096 * 4096 + 4096 * 4),           # fp32 weight_scale [out, 1]
    ("fp8-block", 4096 * 4096 + 32 * 32 * 4),              # fp32 weight_scale_inv [out/128, in/128]
    # gpt-oss weights.py: .blocks 16 B per 32 values, .scales one byte per 32 values
    ("mxfp4", 4096 * 4096 // 32 * 16 + 4096 * 4096 // 32),
    # vLLM ModelOptNvFp4LinearMethod.create_weights: weight uint8 [out, in/2], weight_scale fp8 [out, in/16],
    # weight_scale_2 and input_scale fp32 per tensor
    ("nvfp4", 4096 * 4096 // 2 + 4096 * 4096 // 16 + 4 + 4),
])
def test_one_linear_in_each_layout(name, expected):
    assert weight_dtype(name).bytes((sympy.Integer(4096), sympy.Integer(4096))) == expected


def test_block_scales_round_up():
    # DeepSeek-V3 kv_a_proj_with_mqa [576, 7168]: weight_scale_inv [ceil(576/128), 7168/128] = [5, 56]
    # (deepseek-ai/DeepSeek-V3 @ 1ea5a1a7 inference/model.py::Linear.__init__: (out + 127) // 128)
    assert weight_dtype("fp8-block").bytes((sympy.Integer(576), sympy.Integer(7168))) == 576 * 7168 + 5 * 56 * 4
    # a checkpoint's own block and group sizes
    assert derived_weight_dtype("fp8-block", {"group_rows": 64, "group_size": 64}).bytes(
        (sympy.Integer(576), sympy.Integer(7168))) == 576 * 7168 + 9 * 112 * 4
    awq64 = derived_weight_dtype("awq", {"group_size": 64})
    assert awq64.name == "awq (group_size 64)"
    assert awq64.bytes((sympy.Integer(4096), sympy.Integer(4096))) == 4096 * 4096 // 2 + 4096 * 64 * 20 // 8
    with pytest.raises(CostgraphValueError, match="not one of the layout's"):
        derived_weight_dtype("awq", {"groups": 64})


# ---------------------------------------------------------------- which weights

def test_routers_stay_16_bit_and_the_scopes():
    m = load("mixtral")
    assert routers(m) == {"layers/layer/mlp/gate"}
    lin = quantized_weights(m)
    assert "layers/layer/mlp/gate/weight" not in lin and "lm_head/weight" not in lin
    assert quantized_weights(m, "linear+head") == lin | {"lm_head/weight"}
    assert quantized_weights(m, "all") == lin | {"lm_head/weight", "embed_tokens/weight"}
    assert quantized_weights(m, "experts") == {w for w in lin if "/experts/" in w}
    assert quantized_weights(m, keep=["model.layers.*.self_attn"]) == {w for w in lin if "self_attn" not in w}
    assert kept_by(m, ["lm_head", "vision_tower"])[1] == ["vision_tower"]
    with pytest.raises(CostgraphValueError, match="scope"):
        quantized_weights(m, "heads")


def test_scope_changes_weight_bytes_exactly():
    # Llama-2-7B under AWQ: the head [32000, 4096] at 16 bits, or in the AWQ layout with --quantized linear+head
    m = load("llama")
    v = m.values("llama-2-7b", b=1)
    base = Inference(m, weights="awq").weight_memory().xreplace(v)
    head = Inference(m, weights="awq", quantized="linear+head").weight_memory().xreplace(v)
    awq_head = 32000 * 4096 // 2 + 32000 * 32 * 20 // 8
    assert base - head == 32000 * 4096 * 2 - awq_head
    both = Inference(m, weights="awq", quantized="all").weight_memory().xreplace(v)
    assert head - both == 32000 * 4096 * 2 - awq_head        # the embedding table [32000, 4096] as well
    # bf16: no weight is quantized whatever the scope
    assert Inference(m, quantized="all").weight_memory() == Inference(m).weight_memory()


# ---------------------------------------------------------------- checkpoints as shipped

def test_gpt_oss_120b_checkpoint_bytes(capsys):
    # gpt-oss @ 7a9ea757 weights.py: MXFP4 only on the MoE mlp1/mlp2 weights (4.25 bits), all else bf16.
    # mlp1 [E, 2i, h], mlp2 [E, h, i], h = i = 2880, E = 128, 36 layers
    experts = 36 * 128 * (2 * 2880 * 2880 + 2880 * 2880)
    expected = experts * 17 // 32 + (GPT_OSS_120B_PARAMS - experts) * 2
    doc = _infer(capsys, str(HF / "gpt-oss-120b.json"))
    assert doc["settings"]["weights"] == "mxfp4" and doc["settings"]["quantized"] == "experts"
    assert "quantization_config mxfp4" in doc["settings"]["weights_source"]
    assert doc["weight_bytes"]["value"] == expected == 65_248_815_744
    # the gpt-oss model card (arXiv 2508.10925, Table 1): checkpoint size 60.8 GiB
    assert round(expected / 2**30, 1) == 60.8


def test_gpt_oss_20b_checkpoint_bytes(tmp_path, capsys):
    cfg = json.loads((HF / "gpt-oss-120b.json").read_text())
    cfg.update(num_hidden_layers=24, num_local_experts=32, layer_types=cfg["layer_types"][:24])
    path = tmp_path / "gpt-oss-20b.json"
    path.write_text(json.dumps(cfg))
    experts = 24 * 32 * 3 * 2880 * 2880
    doc = _infer(capsys, str(path))
    assert doc["weight_bytes"]["value"] == experts * 17 // 32 + (GPT_OSS_20B_PARAMS - experts) * 2 == 13_761_264_768
    assert round(doc["weight_bytes"]["value"] / 2**30, 1) == 12.8         # model card: 12.8 GiB


def test_deepseek_v3_fp8_block_checkpoint_bytes(capsys):
    # config.json quantization_config: fp8, weight_block_size [128, 128]. Every Linear of the main model in FP8
    # with fp32 scale_inv [ceil(out/128), ceil(in/128)]; embeddings, head, norms and the router Gate (a plain
    # parameter, not a Linear: deepseek-ai/DeepSeek-V3 @ 1ea5a1a7 inference/model.py::Gate) in bf16
    h, l, kd, i, ie, E, V = 7168, 61, 3, 18432, 2048, 256, 129280
    a, dn, dr, dv, rq, rkv = 128, 128, 64, 128, 1536, 512

    def fp8(o, n):
        return o * n + 4 * _ceil(o) * _ceil(n)
    attn = [(rq, h), (a * (dn + dr), rq), (rkv + dr, h), (a * (dn + dv), rkv), (h, a * dv)]
    mlp = lambda width: [(width, h), (width, h), (h, width)]   # noqa: E731
    fp8_bytes = l * sum(fp8(*s) for s in attn) + kd * sum(fp8(*s) for s in mlp(i)) + \
        (l - kd) * (E + 1) * sum(fp8(*s) for s in mlp(ie))
    bf16 = 2 * V * h + l * (2 * h + rq + rkv) + h + (l - kd) * E * h
    fp32 = (l - kd) * E   # the routers' e_score_correction_bias: fp32 in the checkpoint (Gate.bias, float32)
    params = l * sum(o * n for o, n in attn) + kd * 3 * i * h + (l - kd) * (E + 1) * 3 * ie * h + bf16 + fp32
    assert params == 671_026_419_200                  # DeepSeek-V3 README: 671B main-model parameters
    doc = _infer(capsys, str(HF / "deepseek-v3.json"))
    assert doc["settings"]["weights"] == "fp8-block" and doc["settings"]["compute"] == "fp8"
    assert doc["weight_bytes"]["value"] == fp8_bytes + 2 * bf16 + 4 * fp32 == 673_150_611_808


def test_awq_llama_3_8b(capsys):
    # AWQ Llama-3-8B (vLLM AWQLinearMethod shapes per linear; embed_tokens, lm_head and norms in fp16)
    h, i, l, V, kvw = 4096, 14336, 32, 128256, 1024

    def awq(o, n):
        return n * o // 8 * 4 + n // 128 * o // 8 * 4 + n // 128 * o * 2
    linears = [(h, h), (kvw, h), (kvw, h), (h, h), (i, h), (i, h), (h, i)]
    expected = l * sum(awq(*s) for s in linears) + 2 * (2 * V * h + 2 * l * h + h)
    doc = _infer(capsys, str(HF / "llama-3-8b.json"), "--weights", "awq")
    assert doc["settings"]["weights_source"] == "--weights"
    assert doc["weight_bytes"]["value"] == expected == 5_727_854_592        # 5.73 GB


def test_explicit_weights_win_and_quantized_override(capsys):
    doc = _infer(capsys, str(HF / "gpt-oss-120b.json"), "--weights", "bf16")
    assert doc["settings"]["weights"] == "bf16" and doc["weight_bytes"]["value"] == 2 * GPT_OSS_120B_PARAMS
    # MXFP4 on every linear but the head and routers (no modules_to_not_convert: --weights was given)
    lin = _infer(capsys, str(HF / "gpt-oss-120b.json"), "--weights", "mxfp4")["weight_bytes"]["value"]
    ship = _infer(capsys, str(HF / "gpt-oss-120b.json"))["weight_bytes"]["value"]
    attn = 36 * (2880 * 4096 + 2 * 2880 * 512 + 4096 * 2880)      # q, k, v, o weights
    assert ship - lin == attn * 2 - attn * 17 // 32
    kept = _infer(capsys, str(HF / "gpt-oss-120b.json"), "--weights", "mxfp4", "--not-quantized", "self_attn")
    assert kept["weight_bytes"]["value"] == ship


# ---------------------------------------------------------------- config.json reading

@pytest.mark.parametrize("q, weights, fields", [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}, "awq", {}),
    ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True}, "awq", {"group_size": 64}),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": False}, "awq", {"group_stat_bits": 16}),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False}, "gptq", {}),
    ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": True}, "gptq-act-order", {}),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "gptq", {"element_bits": 8, "group_stat_bits": 24}),
    ({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}, "fp8-block", {}),
    ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "fp8", {}),
    ({"quant_method": "fp8", "activation_scheme": "static"}, "fp8", {"tensor_stat_bits": 64}),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "ignore": ["lm_head"]}, "nvfp4", {}),
    ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {
        "num_bits": 8, "type": "float", "strategy": "channel"}}}}, "fp8-per-channel", {}),
])
def test_quantization_config(q, weights, fields):
    got = shipped({"torch_dtype": "bfloat16", "quantization_config": q}, "c.json")
    assert (got.weights, got.fields, got.quantized, got.warnings) == (weights, fields, "linear", ())


def test_torch_dtype_and_unknown_methods():
    assert shipped({"torch_dtype": "float16"}).weights == "fp16"
    assert shipped({"torch_dtype": "bfloat16"}).weights == "bf16"
    # vLLM _get_and_verify_dtype, dtype auto: a float32 checkpoint is served in 16 bits
    assert shipped({"torch_dtype": "float32"}).weights == "bf16"
    gpt_oss = shipped(json.loads((HF / "gpt-oss-120b.json").read_text()))
    assert (gpt_oss.weights, gpt_oss.quantized) == ("mxfp4", "experts")
    assert gpt_oss.keep == ("model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head")
    bnb = shipped({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "bitsandbytes"}}, "c.json")
    assert bnb.weights == "bf16" and "not a layout costgraph describes" in bnb.warnings[0]
    from costgraph.language.hf_config import load_hf_config
    assert load_hf_config(str(HF / "deepseek-v3.json")).shipped().weights == "fp8-block"
    odd = shipped({"torch_dtype": "float64"}, "c.json")         # warned, not refused (derive reads it too)
    assert odd.weights == "bf16" and "float64" in odd.warnings[0]
    for bad in ({"quantization_config": [1]}, {"quantization_config": {"quant_method": "awq", "bits": "4"}},
                {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128]}},
                {"quantization_config": {"quant_method": "awq", "modules_to_not_convert": "lm_head"}}):
        with pytest.raises(CostgraphValueError):
            shipped(bad, "c.json")


def test_unknown_method_warns_in_the_output(tmp_path, capsys):
    cfg = json.loads((HF / "llama-3-8b.json").read_text())
    cfg["quantization_config"] = {"quant_method": "hqq"}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    doc = _infer(capsys, str(path))
    assert doc["settings"]["weights"] == "bf16"
    assert any("quant_method 'hqq'" in w and "unquantized bf16" in w for w in doc["warnings"])


def test_bad_config_exits_2(tmp_path, capsys):
    cfg = json.loads((HF / "llama-3-8b.json").read_text())
    cfg["quantization_config"] = {"quant_method": "gptq", "bits": 4, "group_size": 0}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["infer", str(path), *ARGS]) == 2
    assert "group_size" in capsys.readouterr().err


# ---------------------------------------------------------------- KV cache layouts

def test_kv_block_layouts_llama_3_8b():
    # Llama-3-8B: 32 layers, 8 K/V heads of 128 → 2 · 32 · 1024 values per token
    m = load("llama")
    v = m.values("llama-3-8b", b=1)
    per_token = {name: Inference(m, kv=name).kv_cache_bytes_per_token().xreplace(v)
                 for name in ("bf16", "q8_0", "q4_0", "int8", "int8-per-token-head")}
    # llama.cpp @ aca2e6ce ggml-common.h: block_q8_0 34 B and block_q4_0 18 B per 32 values
    assert per_token["q8_0"] == 2 * 32 * 1024 // 32 * 34 == 69_632
    assert per_token["q4_0"] == 2 * 32 * 1024 // 32 * 18 == 36_864
    assert per_token["int8"] == 2 * 32 * 1024                      # + 4 B per layer's K and V, not per token
    assert per_token["int8-per-token-head"] == 2 * 32 * 1024 + 2 * 32 * 8 * 2
    # llama.cpp's log at -c 8192 --cache-type-k q8_0 --cache-type-v q8_0: K (q8_0) 272.00 MiB, V 272.00 MiB
    assert Inference(m, kv="q8_0").kv_cache_bytes(8192).xreplace(v) == 544 * 2**20
    assert (kv_dtype("q8_0").block_size, kv_dtype("q8_0").block_stat_bits) == (32, 16)


def test_docs_formats_table_is_the_file():
    import re

    from costgraph.inference.dtypes import weight_dtypes

    text = (Path(__file__).resolve().parents[2] / "docs" / "commands" / "inference.md").read_text(encoding="utf-8")
    section = text.split("### Quantization as shipped", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    named = [n for row in rows for n in re.findall(r"`([^`]+)`", row) if not n.startswith("--")]
    assert sorted(named) == sorted(weight_dtypes())


def test_unquantized_fp16_checkpoint_keeps_bf16_figures(capsys):
    # torch_dtype float16 (Llama-2-7B): 16-bit weights, the bf16 peak kept, so a TPU (no fp16 peak) still answers
    doc = _infer(capsys, str(HF / "llama-2-7b.json"))
    assert doc["settings"]["weights"] == "bf16" and "torch_dtype float16" in doc["settings"]["weights_source"]
    assert main(["infer", str(HF / "llama-2-7b.json"), *ARGS[:1], "tpu-v5e", *ARGS[2:]]) == 0
    capsys.readouterr()
