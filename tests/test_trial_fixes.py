"""Defects a new-user trial found (each an exact message or value, exit status 2, no traceback).

GPT-2 small (openai-community/gpt2 config.json): h 768, a 12, l 12, V 50257, s_max 1024
(DOMAIN.md §1).
"""

import json

import pytest

from costgraph.cli import main

INFER = ["infer", "gpt", "--config", "gpt2", "--hardware", "h100-sxm"]


def _err(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    return err


# 1. infer refuses the TP layouts train refuses (costgraph/training/validity.py check_layout)
def test_infer_refuses_tp_that_splits_an_axis_unevenly(capsys):
    msg = ("error: tensor parallelism t = 5 splits an axis of 2304 (3*h, tensor 'layers/attn/c_attn:0') "
           "unevenly\nhint: t must divide the heads, K/V heads and widths it splits\n")
    assert _err(capsys, [*INFER, "--prompt", "512", "--generate", "128", "--tp", "5"]) == msg
    # the same message as train's (3h = 2304 is not a multiple of 5)
    assert _err(capsys, ["train", "gpt", "--config", "gpt2", "--gpus", "5", "--tp", "5"]) == msg
    assert main([*INFER, "--prompt", "512", "--generate", "128", "--tp", "4"]) == 0   # 12 heads, 768, 2304, 3072 ÷ 4


# 2. a learned position table: P + G > s_max warns, and the longest context is capped at s_max
def test_infer_warns_past_the_position_table_and_caps_the_context(capsys):
    assert main([*INFER, "--prompt", "100000", "--generate", "5"]) == 0
    out = capsys.readouterr().out
    warning = ("P + G = 100,005 positions is longer than s_max = 1,024: the learned position table has "
               "s_max rows, so the model cannot read that many tokens as built")
    assert out.splitlines()[-1] == "warning: " + warning
    assert "  longest context           1,024 tokens per sequence at b = 1 (s_max: the learned position " \
           "table; memory would hold 1,946,368)" in out.splitlines()
    assert main([*INFER, "--prompt", "100000", "--generate", "5", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["warnings"] == [warning]
    # memory alone: whole pages of 16 positions of 4·h·l bytes (K and V in bf16, DOMAIN.md §6) beside the
    # bf16 weights 2·124,439,808 (DOMAIN.md §1), within 0.9 × the H100's 80e9 bytes
    pages = (72_000_000_000 - 2 * 124_439_808) // (16 * 4 * 768 * 12)
    assert doc["max_context"] == 1024 and doc["max_context_memory"] == 16 * pages == 1_946_368
    from costgraph.export import schema as schemas

    assert list(schemas.validator("infer").iter_errors(doc)) == []
    assert main([*INFER, "--prompt", "512", "--generate", "512", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []    # P + G = s_max: no warning


# 4. efficiencies in (0, 1], reserve in [0, 1), the flag's own name
@pytest.mark.parametrize("flag, value, message", [
    ("--compute-efficiency", "0", "error: --compute-efficiency must be a fraction in (0, 1], not 0\n"
     "hint: the share of the peak reached: 1 is the ideal roofline, e.g. 0.45\n"),
    ("--compute-efficiency", "2", "error: --compute-efficiency must be a fraction in (0, 1], not 2\n"
     "hint: the share of the peak reached: 1 is the ideal roofline, e.g. 0.45\n"),
    ("--bandwidth-efficiency", "0", "error: --bandwidth-efficiency must be a fraction in (0, 1], not 0\n"
     "hint: the share of the HBM bandwidth reached: 1 is the ideal roofline, e.g. 0.45\n"),
    ("--reserve", "1", "error: --reserve must be a fraction in [0, 1), not 1\n"
     "hint: the share of device memory kept free: vLLM keeps 0.1\n"),
])
def test_infer_refuses_efficiencies_reserve_and_page_size_out_of_range(capsys, flag, value, message):
    assert _err(capsys, [*INFER, "--prompt", "512", "--generate", "128", flag, value]) == message


def test_infer_refuses_page_size_zero(capsys):
    # since issue 18 --page-size is read as --generate is (1e12, 2**10), by argparse's type: its usage,
    # then the error and the hint line (costgraph.cli_errors)
    err = _err(capsys, [*INFER, "--prompt", "512", "--generate", "128", "--page-size", "0"])
    assert err.startswith("usage: costgraph infer")
    assert err.endswith("costgraph infer: error: argument --page-size: --page-size '0' is not a positive whole number\n"
                        "hint: a positive whole number, e.g. 1000, 1e12 or 10**12; "
                        "costgraph infer --help lists its arguments\n")


S_WARNING = ("warning: s = 4,096 is longer than s_max = 1,024: the learned position table has s_max rows, "
             "so the model cannot read that many tokens as built\n")


def test_sweep_warns_on_stderr_past_the_position_table(capsys):
    assert main(["sweep", "gpt", "--config", "gpt2", "--over", "s=512:4096:x2", "--quantity", "params",
                 "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert err == S_WARNING
    assert out.splitlines()[0] == "s,params" and len(out.splitlines()) == 5     # the rows stay CSV
    assert main(["sweep", "gpt", "--config", "gpt2", "--over", "s=512,1024", "--quantity", "params",
                 "--no-progress"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("phase", ["train", "infer"])
def test_plot_over_s_warns_past_the_position_table(capsys, tmp_path, phase):
    assert main(["plot", "gpt", "--config", "gpt2", "--kind", "memory", "--over", "s=512:4096:x2",
                 "--phase", phase, "-o", str(tmp_path / "m.svg")]) == 0
    assert capsys.readouterr().err == S_WARNING


# 3. sweeps past 2^63: exact in Python integers, refused by name in int64/float64
def _gpt2_forward(s, b=1, l=12, h=768, V=50257):
    """DOMAIN.md §3: l(24bsh² + 4bs²h) + 2bshV ('matmul' convention, full attention)."""
    return l * (24 * b * s * h * h + 4 * b * s * s * h) + 2 * b * s * h * V


def test_sweep_exact_past_int64(capsys):
    assert main(["sweep", "gpt", "--config", "gpt2", "--set", "s=9223372036854775808", "--dtype", "exact",
                 "--quantity", "params", "flops_forward", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["params,flops_forward", f"124439808,{_gpt2_forward(2 ** 63)}"]
    top = 10 ** 33
    assert main(["sweep", "gpt", "--config", "gpt2", "--over", f"s=1:{top}:x2", "--dtype", "exact",
                 "--quantity", "flops_forward", "--format", "json", "--no-progress"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"] == [[2 ** i, _gpt2_forward(2 ** i)] for i in range(top.bit_length())]


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_sweep_refuses_values_past_int64(capsys, dtype):
    err = _err(capsys, ["sweep", "gpt", "--config", "gpt2", "--set", "s=9223372036854775808", "--dtype", dtype,
                        "--no-progress"])
    assert err == (f"error: s = 9223372036854775808 is past the int64 range (at most 2^63 - 1) that --dtype "
                   f"{dtype} evaluates in\nhint: --dtype exact evaluates in Python integers, at any size\n")


# 5. gpt-oss (attention sinks) is decoder-only: infer works, figures from models/gpt_oss.cg's formulas
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


# 6. tensor parallelism splits Mamba's mixer per channel (Megatron-LM megatron/core/ssm/mamba_mixer.py,
# GPT-NeoX megatron/model/mamba/mamba.py ParallelMambaBlock): in_proj and dt_proj column-parallel,
# conv1d, A_log, D and the states per channel (d_inner / t), x_proj and out_proj row-parallel
MAMBA_28B = dict(h=2560, e=2, N=16, R=160, K=4, l=64)     # state-spaces/mamba-2.8b-hf config.json


def test_tp_splits_the_mamba_mixer_per_channel():
    import costgraph
    from costgraph.parallel.tensor import tensor_parallel

    tp = tensor_parallel(costgraph.load("mamba").graph, 2)
    assert tp.column == ["layers/mixer/in_proj", "layers/mixer/dt_proj", "lm_head"]
    assert tp.row == ["layers/mixer/x_proj", "layers/mixer/out_proj"]
    assert {w for w, d in tp.weights.items() if d == 2} == {
        "embeddings/weight", "layers/mixer/in_proj/weight", "layers/mixer/conv1d/weight",
        "layers/mixer/conv1d/bias", "layers/mixer/x_proj/weight", "layers/mixer/dt_proj/weight",
        "layers/mixer/dt_proj/bias", "layers/mixer/ssm/A_log", "layers/mixer/ssm/D",
        "layers/mixer/out_proj/weight"}
    # the inference states [b, D, K] and [b, D, N] split along their channels
    assert tp.split["layers/mixer/conv1d/conv_state"] == 1 and tp.split["layers/mixer/ssm/ssm_state"] == 1


@pytest.mark.parametrize("t", [1, 2])
def test_train_mamba_tp_weights_per_layer(capsys, t):
    c = MAMBA_28B
    assert main(["train", "mamba", "--config", "mamba-2.8b", "--gpus", str(t), "--tp", str(t), "--scope", "layer",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    # models/mamba.cg: 3eh² + eh(K + 2R + 3N + 3) in the mixer, split by t; the RMSNorm's h whole; bf16
    mixer = 3 * c["e"] * c["h"] ** 2 + c["e"] * c["h"] * (c["K"] + 2 * c["R"] + 3 * c["N"] + 3)
    assert doc["memory"]["weights"]["value"] == 2 * (mixer // t + c["h"])


@pytest.mark.parametrize("model, config, state", [
    # l·b·e·h·(K + N) bf16 values (the convolution's last K inputs and the SSM state per channel)
    ("mamba", "mamba-2.8b", 2 * 64 * 2 * 2560 * (4 + 16)),
    # Jamba-v0.1: 28 of its 32 layers are Mamba (attention at layer 4 of every 8), h 4096, e 2, K 4, N 16
    ("jamba", "jamba-v0.1", 2 * 28 * 2 * 4096 * (4 + 16)),
])
def test_infer_tp_splits_the_recurrent_state(capsys, model, config, state):
    for t in (1, 2):
        assert main(["infer", model, "--config", config, "--hardware", "h100-sxm", "--prompt", "512",
                     "--generate", "128", "--tp", str(t), "--format", "json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["state_bytes"]["value"] == state // t


# 7. statements after a return are an error at the first of them, not silently dropped
@pytest.mark.parametrize("where, text, line", [
    ("model", 'model m {\n  dim b "batch"\n  dim s "tokens"\n  dim h "width"\n  input x[b, s, h]\n'
              '  return x\n  y = linear(x, h)\n}\n', 7),
    ("block", 'block f(x[B, S, H]) {\n  return gelu(x)\n  y = linear(x, H)\n}\n'
              'model m {\n  dim b "batch"\n  dim s "tokens"\n  dim h "width"\n  input x[b, s, h]\n'
              '  return f(x)\n}\n', 3),
])
def test_statements_after_return_are_unreachable(tmp_path, capsys, where, text, line):
    path = tmp_path / "m.cg"
    path.write_text(text)
    err = _err(capsys, ["derive", str(path), "--set", "b=1", "s=2", "h=3"])
    assert err == (f"{path}:{line}:3: error: unreachable: statements after return\n"
                   "      y = linear(x, " + ("h" if where == "model" else "H") + ")\n      ^\n"
                   "hint: a block or model ends at its return; move the statements before it, or delete them\n")


# 8. config.json dropout rates are probabilities, checked like the other keys and named with the file
@pytest.mark.parametrize("file, key, value, shown", [
    ("llama-2-7b.json", "attention_dropout", "0.1", "'0.1'"),
    ("llama-2-7b.json", "attention_dropout", -0.1, "-0.1"),
    ("gpt2.json", "attn_pdrop", 1.5, "1.5"),
    ("gpt2.json", "resid_pdrop", True, "True"),
])
def test_hf_config_dropout_rates_are_probabilities(tmp_path, capsys, file, key, value, shown):
    from pathlib import Path

    config = json.loads((Path(__file__).parent.parent / "examples" / "hf" / file).read_text())
    path = tmp_path / file
    path.write_text(json.dumps({**config, key: value}))
    err = _err(capsys, ["derive", str(path)])
    assert err == f"error: {path}: key '{key}' must be a dropout probability, a number in [0, 1), got {shown}\n"
    # the released value passes (GPT-2's 0.1, LLaMA's absent key)
    assert main(["derive", str(Path(__file__).parent.parent / "examples" / "hf" / file)]) == 0


# 9. the header names the causal convention; a FLOP count past the SI prefixes keeps its space
@pytest.mark.parametrize("causal, tail", [
    ("half", ", causal attention products halved; "),
    ("exact", ", causal attention products over the kept pairs (exact); "),
    ("full", "; "),
])
def test_derive_header_names_the_causal_convention(capsys, causal, tail):
    assert main(["derive", "gpt", "--config", "gpt2", "--causal", causal]) == 0
    line = capsys.readouterr().out.splitlines()[2]
    assert line.startswith("FLOPs: 'matmul' convention, 2 FLOPs per multiply-add" + tail)


def test_flops_past_the_largest_si_prefix_keep_a_space():
    from costgraph.numbers import units

    n = _gpt2_forward(2 ** 63)     # 3.136 × 10⁴² FLOP
    assert units.flops(n) == "3.136 x 10⁴² FLOP"
    assert units.with_unit("flops_forward", n) == f"{n:,} FLOP (3.136 x 10⁴² FLOP)"
    assert units.flops(291_648_307_200) == "291.6 GFLOP"


def test_elementwise_activations_follow_the_tensor_parallel_split():
    # Nemotron's MLP is up_proj → relu2 → down_proj (no gate): with t = 2 Megatron splits up_proj by
    # columns and down_proj by rows, so a layer's MLP weights halve: 2·(2 h i)/2 bytes in bf16 = 2 h i.
    # Before relu2 followed its input's split, the MLP was kept whole (4 h i).
    import sympy

    import costgraph
    from costgraph.engine.symbols import dim

    m = costgraph.load("nemotron")
    one = m.train(t=1, scope="layer").stages[0].memory["weights"]
    two = m.train(t=2, scope="layer").stages[0].memory["weights"]
    h, i = dim("h"), dim("i")
    assert sympy.expand(one).coeff(h * i) == 4 and sympy.expand(two).coeff(h * i) == 2


def test_config_json_with_a_byte_order_mark(tmp_path):
    # some editors write a UTF-8 byte-order mark; Python's json refuses it ("decode using utf-8-sig")
    import costgraph

    p = tmp_path / "gpt2.json"
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "examples" / "hf" / "gpt2.json"
    p.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    hf = costgraph.load_hf_config(str(p))
    assert hf.costs().evaluate(**hf.values)["params"] == 124_439_808   # GPT-2 small, tied head


def test_report_repeats_the_inference_warnings(capsys):
    # GPT-2's learned position table has s_max = 1,024 rows: a 2,000 + 100 token request is past it
    from costgraph.cli import main

    assert main(["report", "gpt", "--config", "gpt2", "--format", "md", "--hardware", "h100-sxm",
                 "--prompt", "2000", "--generate", "100"]) == 0
    assert "P + G = 2,100 positions is longer than s_max = 1,024" in capsys.readouterr().out
