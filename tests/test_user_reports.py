"""Regressions for what a new user hit trying the README (each a reproduction)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import costgraph
from costgraph.cli import main
from costgraph.language.resources import models_root

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["llama", "mixtral", "deepseek_v3", "qwen3_moe"])
def test_bundled_model_given_by_path(name):
    # models/llama.cg by path used to load std/mlp.cg twice (once by path, once bundled)
    path = Path(str(models_root())) / f"{name}.cg"
    assert costgraph.load(str(path)).costs().params == costgraph.load(name).costs().params


def test_copied_model_folder_loads(tmp_path):
    shutil.copy(ROOT / "models" / "llama.cg", tmp_path)
    shutil.copytree(ROOT / "models" / "std", tmp_path / "std")
    # Llama-2-7B: 6,738,415,616 parameters (config.json)
    assert costgraph.load(str(tmp_path / "llama.cg")).costs().evaluate(config="llama-2-7b")["params"] == 6_738_415_616


def test_repeated_set_flags_accumulate(capsys):
    assert main(["derive", "gpt", "--config", "gpt2", "--set", "s=2048", "--set", "b=4", "--format", "json"]) == 0
    values = json.loads(capsys.readouterr().out)["values"]
    assert values["s"] == 2048 and values["b"] == 4


def test_same_name_twice_in_set_is_an_error(capsys):
    assert main(["derive", "gpt", "--set", "h=768", "h=1024"]) == 2
    assert "gives 'h' twice" in capsys.readouterr().err


@pytest.mark.parametrize("args,message", [
    (["deepseek_v3", "--config", "deepseek-v3", "--set", "k_d=70"], "repeat count of 'moe_layers' is -k_d + l = -9"),
    (["mixtral", "--config", "mixtral-8x7b", "--set", "k=10"], "has 8 copies but 10 active"),
    (["llama", "--config", "llama-2-7b", "--set", "kv=5"], "a/kv = 32/5"),
    (["gemma2", "--config", "gemma-2-9b", "--set", "l=41"], "l/2 = 41/2"),
])
def test_impossible_sizes_are_errors(args, message, capsys):
    assert main(["derive", *args]) == 2
    assert message in capsys.readouterr().err


def test_option_off_keeps_the_bundled_configuration():
    # mistral-7b sets w, which exists only with sliding_window on
    m = costgraph.load("mistral", options={"sliding_window": False})
    assert m.costs().evaluate(config="mistral-7b")["params"] == 7_241_732_096


def test_shared_storage_is_charged_whole_to_its_home_row(capsys):
    # T5's encoder output is one storage kept by every decoder layer's cross-attention.
    # It used to be spread as 1/l_dec per decoder row (value_rational "262144/3"); now it is
    # one row of kind 'storage' at model level, whole: 2 b s h bytes = 2 * 1 * 512 * 512 (t5-small)
    assert main(["derive", "t5", "--config", "t5-small", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    row = doc["breakdown"]["saved:encoder_final_dropout:0"]
    assert row["type"] == "storage" and row["count"] == "1"
    assert row["quantities"]["activation_bytes"]["value"] == 2 * 1 * 512 * 512
    assert "value_rational" not in json.dumps(doc)
    assert doc["breakdown"]["decoder/cross_attention/k"]["quantities"]["activation_bytes"]["value"] == 0
    assert doc["breakdown"]["decoder/cross_attention/k"]["type"] == "op"
    assert doc["breakdown"]["decoder"]["type"] == "repeat"
    assert doc["breakdown"]["decoder/cross_attention"]["type"] == "block"


def test_malformed_model_type_and_non_string_model():
    with pytest.raises(costgraph.CostgraphValueError, match="unsupported model_type"):
        costgraph.from_hf_config({"model_type": ["llama"]})
    with pytest.raises(costgraph.CostgraphValueError, match="no 'model_type' key"):
        costgraph.from_hf_config({})
    with pytest.raises(costgraph.CostgraphValueError, match="not int"):
        costgraph.load(5)


def test_block_cannot_take_an_operator_name():
    with pytest.raises(costgraph.CostgraphSemanticError, match="has the name of an operator"):
        costgraph.loads("block linear(x[H], o) { return x }\nmodel m { dim h\n input x[h]\n return linear(x, h) }")


def test_hf_variants_that_change_costs_are_refused():
    cfg = json.loads((ROOT / "examples" / "hf" / "gpt2.json").read_text())
    cfg["tie_word_embeddings"] = False
    with pytest.raises(costgraph.CostgraphValueError, match="tie_word_embeddings"):
        costgraph.from_hf_config(cfg)
    cfg = json.loads((ROOT / "examples" / "hf" / "llama-2-7b.json").read_text())
    cfg["hidden_act"] = "gelu"
    with pytest.raises(costgraph.CostgraphValueError, match="hidden_act"):
        costgraph.from_hf_config(cfg)


def test_config_flag_with_config_json_is_an_error():
    r = subprocess.run([sys.executable, "-m", "costgraph.cli", "derive", str(ROOT / "examples/hf/gpt2.json"),
                        "--config", "gpt2"], capture_output=True, text=True)
    assert r.returncode == 2 and "a config.json is one already" in r.stderr
