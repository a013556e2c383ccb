"""The one loader of the sourced data tables (costgraph/datafiles.py): every bundled
table loads with a source per number; user tables (COSTGRAPH_DATA, --hardware FILE.toml)
are validated by the same loader, under the limits of a config.json, and usable end to end.

Figures: gpt2 (models/gpt.cg, config gpt2) trained on 1 GPU with mixed precision and Adam
keeps 3,379,603,456 bytes (its loss Megatron-LM's default cross-entropy, 6 B a logit;
3,276,677,120 under the 4 B `--cross-entropy logits` count, 2 · 1024 · 50257 less) and takes 874,944,921,600 FLOP per iteration (the same figures
`costgraph train gpt --config gpt2 --gpus 1 --hardware h100-sxm` prints against the H100's
80 GB and 989.4 TFLOP/s); the user device below has 4 GB and 874.9449216 PFLOP/s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest
import sympy

from costgraph import datafiles, hardware
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.inference import dtypes
from costgraph.training import data, lora, megatron
from costgraph.training.bare import PSI, bare_model_states

ROOT = Path(__file__).resolve().parent.parent
GPT2_STATES_AND_ACTIVATIONS = 3_379_603_456          # `costgraph train gpt --config gpt2 --gpus 1 --attention eager`, total bytes
GPT2_FLOPS = 874_944_921_600                          # model FLOPs per iteration, same command

NUMBERS = "\n".join(f"{k} = {v}  # source: test datasheet, table 1" for k, v in (
    ("peak_flops_bf16", 2 * GPT2_FLOPS * 1000), ("peak_flops_fp16", 0), ("peak_flops_fp8", 0),
    ("peak_flops_tf32", 0), ("peak_flops_fp32", 0), ("memory_bytes", 4_000_000_000),
    ("memory_bandwidth", 1_000_000_000_000), ("scale_up_bandwidth", 100_000_000_000), ("scale_up_domain", 4),
    ("scale_out_bandwidth", 10_000_000_000), ("devices_per_node", 4), ("latency_scale_up_ns", 1_000),
    ("latency_scale_out_ns", 5_000)))
GPU = f'[my-gpu]\nname = "My GPU"\nvendor = "Me"\n{NUMBERS}\n'


def _gpu(name: str) -> str:
    return GPU.replace("[my-gpu]", f"[{name}]")


def _run(args, capsys):
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _train_json(hw: str, capsys) -> dict:
    code, out, err = _run(["train", "gpt", "--config", "gpt2", "--gpus", "1", "--hardware", hw, "--attention", "eager",
                           "--reserve", "0", "--format", "json"], capsys)
    assert code == 0, err
    return json.loads(out)


# ---------------------------------------------------------------- bundled tables

SCHEMAS = (hardware.SCHEMA, data.POLICIES, data.OPTIMIZERS, lora.QUANTIZATION, dtypes.SCHEMA,
           __import__("costgraph.symbolic.optimal", fromlist=["x"]).SCALING_LAWS, megatron.MEGATRON_ARGS,
           __import__("costgraph.language.hf_config", fromlist=["x"]).HF_MAPPING,
           __import__("costgraph.training.kernel_table", fromlist=["x"]).SCHEMA,
           __import__("costgraph.training.cross_entropy", fromlist=["x"]).SCHEMA,
           __import__("costgraph.runtime_memory", fromlist=["x"]).SCHEMA,
           __import__("costgraph.training.contention", fromlist=["x"]).SCHEMA)


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.file)
def test_every_bundled_table_loads_with_a_source_per_number(schema):
    ds = datafiles.bundled(schema)
    kinds = [(schema.entries, ds.entries)] if schema.entries else []
    kinds += [(kind, ds.groups[g]) for g, kind in schema.groups]
    kinds += [(kind, {name: ds.records[name]}) for name, kind in schema.records]
    assert sum(len(e) for _, e in kinds) > 0
    for kind, entries in kinds:
        for name, entry in entries.items():
            numbers = [f.name for f in kind.fields if f.type in datafiles.NUMBER_TYPES and f.name in entry]
            assert set(entry.sources) == set(numbers), (schema.file, name)
            assert all(len(s) > 10 for s in entry.sources.values()), (schema.file, name)
    assert ds.top.sources.keys() == ds.top.values.keys()


def test_bundled_values_are_the_files():
    # a figure of each table, as its file states it
    assert hardware.bundled_presets()["h100-sxm"].peak_flops_bf16 == 989_400_000_000_000
    assert data.policies()["megatron"].gradients == 4 and data.policies()["mixed"].master == 4
    adam8 = data.optimizers()["adam-8bit"]
    assert (adam8.block_size, adam8.block_stat_bytes, adam8.min_quantized_numel) == (256, 4, 4096)
    assert data.optimizers()["muon"].rest == "adamw" and data.optimizers()["muon"].matrix_states == 1
    assert lora.quant_scheme("nf4-double").bytes_per_param == sympy.Rational(2113, 4096)
    assert dtypes.unquantized_bits() == 16 and dtypes.weight_dtype("int4").group_size == 128
    assert dtypes.weight_dtypes() == ("bf16", "fp16", "fp8", "int8", "int4", "awq", "gptq", "gptq-act-order",
                                      "fp8-per-channel", "fp8-block", "mxfp4", "nvfp4")
    # issue 17: int8 KV is per-tensor (TensorRT-LLM); the per-token-head layout has its own name
    assert dtypes.kv_dtype("int8").tensor_stat_bits == 32 and dtypes.kv_dtype("int8").vector_stat_bits == 0
    assert dtypes.kv_dtype("int8-per-token-head").vector_stat_bits == 16
    from costgraph.symbolic.optimal import constants
    c = constants()
    assert c["chinchilla"] == {"E": Fraction("1.69"), "A": Fraction("406.4"), "B": Fraction("410.7"),
                               "alpha": Fraction("0.34"), "beta": Fraction("0.28")} and c["ratio"] == 20
    assert megatron._families()["mistral"] == {"like": "llama"}
    from costgraph.language.hf_config import mapping
    assert mapping()["gpt2"]["dims"]["h"] == "n_embd"


def test_user_files_are_the_schemas_that_allow_them():
    assert set(datafiles.USER_FILES) == {s.file for s in SCHEMAS if s.user}
    from costgraph.language import hf_config
    assert datafiles.MAX_BYTES == hf_config.MAX_JSON_BYTES


def test_the_loader_imports_no_sympy():
    code = "import sys, costgraph.datafiles, costgraph.hardware; assert 'sympy' not in sys.modules"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_docs_preset_list_is_the_file():
    text = (ROOT / "docs" / "data-files.md").read_text(encoding="utf-8")
    section = text.split("## Hardware presets", 1)[1].split("\n## ", 1)[0]
    listed = re.search(r"Presets: ([^.]+)\.", section).group(1)
    assert [p.strip() for p in listed.split(",")] == list(hardware.bundled_presets())


# ---------------------------------------------------------------- COSTGRAPH_DATA

def test_costgraph_data_adds_a_preset_to_train_and_hardware(tmp_path, monkeypatch, capsys):
    (tmp_path / "hardware.toml").write_text(GPU)
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    code, out, _ = _run(["hardware"], capsys)
    assert code == 0 and "my-gpu" in out and "h100-sxm" in out
    code, out, _ = _run(["hardware", "my-gpu", "--format", "json"], capsys)
    one = json.loads(out)
    assert one["memory_bytes"] == 4_000_000_000 and one["peak_flops_bf16"] == 1_749_889_843_200_000
    assert one["sources"]["memory_bytes"] == "test datasheet, table 1"
    d = _train_json("my-gpu", capsys)
    assert d["fits"]["capacity_bytes"] == 4_000_000_000
    assert d["fits"]["headroom_bytes"] == 4_000_000_000 - GPT2_STATES_AND_ACTIVATIONS == 620_396_544
    # compute at the default efficiency 1/2 of the peak: 874,944,921,600 FLOP / 874.9449216 PFLOP/s = 1 ms
    assert d["step"]["compute"]["value"] == 0.001 and d["step"]["efficiency"] == 0.5
    # the bundled presets are still there, and unchanged
    assert hardware.preset("h100-sxm").memory_bytes == 80_000_000_000
    monkeypatch.delenv("COSTGRAPH_DATA")
    assert "my-gpu" not in hardware.presets()


def test_costgraph_data_adds_optimizers_policies_and_dtypes(tmp_path, monkeypatch):
    (tmp_path / "optimizers.toml").write_text(
        '[adam-3]\ndescription = "three states"\nsource = "a test"\nstates = 3\n'
        '[muon-sgd]\ndescription = "Muon, SGD elsewhere"\nsource = "a test"\nstates = 0\nmatrix_states = 1\n'
        'rest = "sgd-momentum"\n')
    (tmp_path / "policies.toml").write_text(
        '[all-8]\ndescription = "8 bytes each"\nsource = "a test"\n'
        "weights = 8\ngradients = 8\ngrad_copy = 0\nmaster = 0\nstate = 8\n")
    (tmp_path / "dtypes.toml").write_text(
        '[weights.int2]\ndescription = "2-bit"\nsource = "a test"\nelement_bits = 2\n'
        "group_size = 64\ngroup_stat_bits = 16\n")
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    # 8 Ψ weights + 8 Ψ gradients + 3 states × 8 Ψ
    s = bare_model_states(policy="all-8", optimizer="adam-3")
    assert (s["weights"], s["gradients"], s["optimizer"]) == (8 * PSI, 8 * PSI, 24 * PSI)
    assert dtypes.weight_dtypes()[-1] == "int2"
    assert data.optimizer("muon-sgd").rest == "sgd-momentum"          # a user entry may name a bundled one
    # [4096, 4096]: 2 bits each + 16 bits per group of 64 → 4096·4096/4 + 4096·64·2 bytes
    assert dtypes.weight_dtype("int2").bytes((4096, 4096)) == 4_194_304 + 524_288


def test_a_user_entry_never_replaces_a_bundled_one(tmp_path, monkeypatch, capsys):
    (tmp_path / "hardware.toml").write_text(_gpu("h100-sxm"))
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    code, _, err = _run(["hardware"], capsys)
    assert code == 2
    assert f"{tmp_path / 'hardware.toml'}:1:1: [h100-sxm] is a bundled hardware preset already" in err
    (tmp_path / "hardware.toml").write_text(_gpu("h100sxm"))   # the bundled h100-sxm without its dash
    code, _, err = _run(["hardware"], capsys)
    assert code == 2 and "[h100sxm] is not a preset name" in err


@pytest.mark.parametrize("name", ["H100SXM", "", "\u00fcn\u00ef", "--help", "x.toml", "a" * 65, "my gpu"])
def test_a_user_entry_name_is_a_name_one_can_type(tmp_path, monkeypatch, capsys, name):
    # found by a new user's trial: [""], ["--help"] and non-ASCII names were accepted, and a name ending in .toml
    # could never be asked for (--hardware reads it as a file); the name is not repeated in the message
    (tmp_path / "hardware.toml").write_text(_gpu('"' + name + '"'))   # a quoted TOML key
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    code, _, err = _run(["hardware"], capsys)
    assert code == 2 and "hardware.toml:1:1: a table name is not a name" in err
    assert not name or name not in err.split("hint:")[0].split("hardware.toml")[-1]


def test_costgraph_data_folder_checks(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path / "nowhere"))
    code, _, err = _run(["hardware"], capsys)
    assert code == 2 and "COSTGRAPH_DATA=" in err and "is not a folder" in err
    (tmp_path / "hardwares.toml").write_text(GPU)
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    code, _, err = _run(["hardware"], capsys)
    assert code == 2 and "hardwares.toml, which is no costgraph data file" in err
    (tmp_path / "hardwares.toml").unlink()
    (tmp_path / "dtypes.toml").write_text("unquantized_bits = 8  # source: mine\n")
    with pytest.raises(CostgraphValueError, match="unquantized_bits is set by the bundled dtypes.toml only"):
        dtypes.unquantized_bits()


# ---------------------------------------------------------------- errors: file, entry, key; exit 2

BAD = [
    (GPU.replace("memory_bytes = 4000000000  # source: test datasheet, table 1", "memory_bytes = 4000000000"),
     ":9:1: [my-gpu] memory_bytes has no '# source: ...' comment on its line and the entry no source string"),
    (GPU.replace("memory_bytes = 4000000000", "memory_bytes = 4.5e9"),
     ":9:1: [my-gpu] memory_bytes (a float) is not a non-negative integer"),
    (GPU.replace("memory_bytes = 4000000000", 'memory_bytes = "SECRET-VALUE"'),
     ":9:1: [my-gpu] memory_bytes (a string) is not a non-negative integer"),
    (GPU.replace("memory_bytes = 4000000000", "memory_bytes = -4000000000"),
     ":9:1: [my-gpu] memory_bytes (an integer) is not a non-negative integer"),
    (GPU.replace("memory_bandwidth = 1000000000000", "memory_bandwidth = 0"),
     ":10:1: [my-gpu] memory_bandwidth must be positive"),
    (GPU + "memory_byte = 3  # source: a\n",
     ":17:1: [my-gpu] has unknown key memory_byte"),
    (GPU.replace('vendor = "Me"\n', ""), ":1:1: [my-gpu] is missing vendor"),
    (GPU.replace('name = "My GPU"', "name = 7"), ":2:1: [my-gpu] name (an integer) is not a non-empty string"),
    # a TOML syntax error is located too (tomllib's "(at line L, column C)" or "(at end of document)", Python 3.11
    # tomllib/_parser.py coord_repr): line 1, column 8 is the newline where the header's ']' is missing
    ("[my-gpu\n", ":1:8: not valid TOML: Expected ']' at the end of a table declaration"),
    # a key without its value: line 9 (memory_bytes), column 18, the comment found where the value should start
    (GPU.replace("memory_bytes = 4000000000", "memory_bytes = "), ":9:18: not valid TOML: Invalid value"),
    # a key given twice: tomllib knows it after the value (line 17, column 17: after "memory_bytes = 3")
    (GPU + "memory_bytes = 3  # source: a", ":17:17: not valid TOML: Cannot overwrite a value"),
    # a key where a table was meant: located at the key (it named the file alone)
    ("x = 1\n" + GPU, ":1:1: 'x' is not a table"),
]


@pytest.mark.parametrize("text,message", BAD, ids=range(len(BAD)))
def test_user_file_errors_name_file_entry_key_and_exit_2(tmp_path, monkeypatch, capsys, text, message):
    path = tmp_path / "hardware.toml"
    path.write_text(text)
    code, _, err = _run(["train", "gpt", "--config", "gpt2", "--gpus", "1", "--hardware", str(path)], capsys)
    assert code == 2 and f"{path}{message}" in err, err
    assert "Traceback" not in err and "SECRET" not in err and "4.5" not in err
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    code, _, err2 = _run(["hardware"], capsys)
    assert code == 2 and f"{path}{message}" in err2, err2


def test_bundled_table_errors_show_the_value():
    text = GPU.replace("memory_bytes = 4000000000", "memory_bytes = 4.5e9")
    with pytest.raises(CostgraphValueError) as e:
        hardware.parse(text, "t.toml")
    assert "t.toml:9:1: [my-gpu] memory_bytes = 4500000000.0 is not a non-negative integer" in str(e.value)


def test_optimizer_checks_in_the_loader():
    def parse(body):
        return datafiles.parse('[o]\ndescription = "d"\nsource = "s"\n' + body, "o.toml", data.OPTIMIZERS)

    assert parse("states = 2\n").entries["o"]["states"] == 2
    with pytest.raises(CostgraphValueError, match=r"o.toml:5:1: \[o\] gives block_size without block_stat_bytes"):
        parse("states = 2\nblock_size = 64\n")
    with pytest.raises(CostgraphValueError, match=r"o.toml:5:1: \[o\] block_size = 0 must be positive"):
        parse("states = 2\nblock_size = 0\nblock_stat_bytes = 4\n")
    with pytest.raises(CostgraphValueError, match=r"o.toml:5:1: \[o\] factored = 1 must be true or false"):
        parse("states = 2\nfactored = 1\n")
    with pytest.raises(CostgraphValueError, match=r"\[o\] rest = 'adamw' names no other optimizer"):
        datafiles.check_refs(parse("states = 0\nmatrix_states = 1\nrest = 'adamw'\n").entries, data.OPTIMIZER)
    # which weights are matrices is declared on the operators (the 'matrix' role), not in a table
    with pytest.raises(CostgraphValueError, match=r"\[o\] has unknown key matrix_kinds"):
        parse("states = 0\nmatrix_states = 1\nmatrix_kinds = ['linear']\nrest = 'adamw'\n")


def test_quantization_bytes_per_param_is_checked(tmp_path, monkeypatch):
    (tmp_path / "quantization.toml").write_text(
        '[q3]\ndescription = "3-bit"\nsource = "a test"\nelement_bits = 3\n'
        "bytes_per_param = { numerator = 1, denominator = 2 }\n")
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))
    with pytest.raises(CostgraphValueError, match=r"quantization.toml:5:1: \[q3\] bytes_per_param disagrees with its "
                                                  r"fields"):
        lora.quant_schemes()
    (tmp_path / "quantization.toml").write_text(
        '[q3]\ndescription = "3-bit"\nsource = "a test"\nelement_bits = 3\n'
        "bytes_per_param = { numerator = 3, denominator = 8 }\n")
    assert lora.quant_scheme("q3").bytes_per_param == sympy.Rational(3, 8)


# ---------------------------------------------------------------- --hardware FILE.toml

def test_hardware_path_end_to_end(tmp_path, capsys):
    one = tmp_path / "my-gpu.toml"
    one.write_text(GPU)
    d = _train_json(str(one), capsys)
    assert d["fits"]["capacity_bytes"] == 4_000_000_000 and d["fits"]["headroom_bytes"] == 620_396_544
    assert d["step"]["compute"]["value"] == 0.001
    code, out, _ = _run(["hardware", str(one)], capsys)
    assert code == 0 and out.startswith(f"{one}:my-gpu: My GPU (Me)") and "4 GB = 3.73 GiB" in out
    assert out.count("source: test datasheet, table 1") == 13
    hw = hardware.preset(str(one))
    assert hw.key == f"{one}:my-gpu" and hardware.preset(hw.key) == hw     # a suggested --hardware KEY resolves

    two = tmp_path / "two.toml"
    two.write_text(GPU + "\n" + _gpu("half-gpu").replace("memory_bytes = 4000000000", "memory_bytes = 2000000000"))
    assert _train_json(f"{two}:half-gpu", capsys)["fits"]["capacity_bytes"] == 2_000_000_000
    code, _, err = _run(["hardware", str(two)], capsys)
    assert code == 2 and f"{two} holds 2 presets: my-gpu, half-gpu" in err and f"--hardware {two}:my-gpu" in err
    code, _, err = _run(["hardware", f"{two}:other"], capsys)
    assert code == 2 and f"{two} has no preset 'other'" in err


def test_hardware_path_limits(tmp_path, monkeypatch, capsys):
    code, _, err = _run(["hardware", str(tmp_path / "missing.toml")], capsys)
    assert code == 2 and "no such file" in err
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    code, _, err = _run(["hardware", str(folder)], capsys)
    assert code == 2 and "is a folder" in err
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "pipe.toml"
        os.mkfifo(fifo)
        code, _, err = _run(["hardware", str(fifo)], capsys)
        assert code == 2 and "is not a regular file" in err
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe[x]\n")
    code, _, err = _run(["hardware", str(binary)], capsys)
    assert code == 2 and "is not UTF-8 text" in err
    big = tmp_path / "big.toml"
    big.write_text(GPU)
    monkeypatch.setattr(datafiles, "MAX_BYTES", 100)
    code, _, err = _run(["hardware", str(big)], capsys)
    assert code == 2 and "is too large" in err and "over 100 bytes" in err


def test_scan_reads_sources_and_lines():
    sources, lines = datafiles.scan("top = 1  # source: a\n [t.u]\nk = 2  # source: b\n#   more\n  j = 3\n")
    assert sources == {((), "top"): "a", (("t", "u"), "k"): "b more"}
    # (line, column): a key's column, a header's '['
    assert lines == {((), "top"): (1, 1), (("t", "u"), ""): (2, 2), (("t", "u"), "k"): (3, 1), (("t", "u"), "j"): (5, 3)}


def test_hf_mapping_like_and_defaults(monkeypatch):
    """``like`` merges dims and options key by key (own keys win), never takes ``model``, and chains; the
    default dims fill what no entry gives, ``s`` is an entry's own ``s_max``; ``allowed`` pairs are the
    leading ``unsupported`` rules; a cycle, an unknown base and a malformed pair are refused, located at
    their line (costgraph/language/hf_mapping.py)."""
    from costgraph.language import hf_config, hf_mapping
    from costgraph import datafiles

    m = hf_config.mapping()
    # mixtral is written `like = "mistral"` plus its expert counts: it reads mistral's keys
    assert m["mixtral"]["dims"]["h"] == m["mistral"]["dims"]["h"] == "hidden_size"
    assert m["mixtral"]["dims"]["E"] == "num_local_experts" and "E" not in m["mistral"]["dims"]
    assert (m["mixtral"]["model"], m["mistral"]["model"]) == ("mixtral", "mistral")
    assert m["gpt2"]["dims"]["b"] == {"value": 1} and m["gpt2"]["dims"]["l"] == "n_layer"
    assert m["llama"]["dims"]["V"] == "vocab_size"
    # a chain: cohere → smollm3 → llama; cohere's own rules replace smollm3's
    assert m["cohere"]["dims"]["kv"] == m["llama"]["dims"]["kv"] and m["cohere"]["options"]["tied"]["default"] is True
    assert m["cohere"]["unsupported"] == [{"key": "hidden_act", "allowed": ["silu"]}]
    # GPT2Config's n_positions is both the context length and the sequence (gpt2 writes s_max only)
    assert m["gpt2"]["dims"]["s"] == m["gpt2"]["dims"]["s_max"] == "n_positions"
    # clip is like siglip with its own s_max (77): its s is its own, not siglip's (64)
    assert m["clip"]["dims"]["s"]["default"] == 77 and m["siglip"]["dims"]["s"]["default"] == 64
    # allowed pairs first, then the unsupported rules, in the file's order
    assert m["smollm3"]["unsupported"][3:6] == [
        {"key": "use_sliding_window", "allowed": [False]}, {"key": "no_rope_layer_interval", "allowed": [4]},
        {"key": "no_rope_layers", "cycle": [1, 1, 1, 0], "length": "num_hidden_layers"}]
    assert {"key": "mlp_only_layers", "allowed": [[]]} in m["qwen3_moe"]["unsupported"]
    assert {"key": "q_lora_rank", "allowed": []} in m["kimi_linear"]["unsupported"]

    def refused(text, match, refs=False):
        data = datafiles.parse(text, "m.toml", hf_config.HF_MAPPING)
        with pytest.raises(CostgraphValueError, match=match):
            if refs:   # as datafiles.bundled checks every ref field
                datafiles.check_refs(data.entries, hf_config.HF_MAPPING.entries)
            hf_mapping.resolve_entries(data.entries)

    refused('[one]\nlike = "two"\n\n[two]\nlike = "one"\ndims.h = "hidden_size"\n',
            r"m\.toml:5:1: \[two\] like = 'one' runs in a cycle \(one → two → one\)")
    refused('[one]\nlike = "nothing"\ndims.h = "hidden_size"\n',
            r"m\.toml:2:1: \[one\] like = 'nothing' names no other model_type", refs=True)
    refused('[one]\ndims.h = "h"\nallowed = [["hidden_act", "silu"], "mlp_bias"]\n',
            r"m\.toml:3:1: \[one\] allowed holds an item that is not \[KEY, VALUE, \.\.\.\]")

def test_hf_mapping_format_is_documented():
    """hf_mapping.toml documents its format on docs/data-files.md (not in the file's header): every key the
    file uses outside the names of dims and options (an entry's keys, a SPEC's keys, an ``unsupported`` or
    ``layer_indices`` rule's keys) is named there in backticks, so the page cannot fall behind the file."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "data-files.md").read_text(encoding="utf-8")
    page = doc[doc.index("## config.json mappings"):]
    data = tomllib.loads((root / "src" / "costgraph" / "hf_mapping.toml").read_text(encoding="utf-8"))
    used: set[str] = set()

    def spec_keys(spec):
        if isinstance(spec, dict):
            used.update(spec)
            for v in spec.values():
                spec_keys(v)
        elif isinstance(spec, list):
            for v in spec:
                spec_keys(v)

    for entry in data.values():
        used.update(k for k in entry if k not in ("dims", "options"))
        for k, v in entry.items():
            if k in ("dims", "options"):
                for spec in v.values():
                    spec_keys(spec)
            elif k in ("unsupported", "layer_indices"):
                spec_keys(v)
    assert {"like", "model", "key", "default", "quotient", "unsupported", "allowed"} <= used, used
    missing = sorted(k for k in used if not re.search(rf"`[^`]*\b{re.escape(k)}\b[^`]*`", page))
    assert not missing, f"keys hf_mapping.toml uses that docs/data-files.md does not name: {missing}"
