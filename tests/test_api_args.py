"""No internal error from any input (issue 6, item 2): API arguments of the
wrong type and config.json files with values JSON or Python cannot hold
(NaN, Infinity, 1e400, nesting 100,000 deep, 5,000-digit integers) end in
costgraph's own error, naming the argument or located in the file."""

import json
from pathlib import Path

import pytest
import sympy

import costgraph
from costgraph import CostgraphValueError
from costgraph.arguments import shown
from costgraph.cli import main

HF = Path(__file__).resolve().parents[1] / "examples" / "hf"
LLAMA = json.loads((HF / "llama-2-7b.json").read_text())


@pytest.fixture(scope="module")
def gpt_costs(gpt):
    return gpt.costs()


def error(f, *args, **kwargs) -> str:
    with pytest.raises(CostgraphValueError) as e:
        f(*args, **kwargs)
    return str(e.value)


@pytest.mark.parametrize("call, fragments", [
    (lambda: costgraph.loads(None), ["argument 'text' must be a string, got None"]),
    (lambda: costgraph.loads(b"model m {}"), ["argument 'text' must be text (a str), got bytes", "decode"]),
    (lambda: costgraph.loads("model m {}", path=3), ["argument 'path' must be a string, got 3 (int)"]),
    (lambda: costgraph.load(None), ["a model is named by a string or a path"]),
    (lambda: costgraph.load("gpt", options="bias"), ["argument 'options' must be a mapping", "got 'bias' (str)"]),
    (lambda: costgraph.load("gpt", options={1: True}), ["a key of 'options' must be an option name"]),
    (lambda: costgraph.load("gpt", dropout="no"), ["argument 'dropout' must be True or False, got 'no' (str)"]),
    (lambda: costgraph.load("gpt", dropout=None), ["argument 'dropout' must be True or False, got None"]),
    (lambda: costgraph.load("gpt", profile=3), ["argument 'profile' must be a string, got 3 (int)"]),
    (lambda: costgraph.load("gpt", profile=["pytorch"]), ["argument 'profile' must be a string"]),
    (lambda: costgraph.load_hf_config(None), ["argument 'path' must be a string or a path, got None"]),
    (lambda: costgraph.load_hf_config(str(HF / "gpt2.json"), dropout="yes"), ["argument 'dropout' must be True or False"]),
    (lambda: costgraph.from_hf_config(None), ["a config.json holds a JSON object, got None"]),
    (lambda: costgraph.from_hf_config("gpt2"), ["a config.json holds a JSON object, got 'gpt2'"]),
    (lambda: costgraph.from_hf_config(LLAMA, source=None), ["argument 'source' must be a string"]),
    (lambda: costgraph.from_hf_config(LLAMA, profile=None), ["argument 'profile' must be a string"]),
])
def test_wrong_argument_types_name_the_argument(call, fragments):
    with pytest.raises(CostgraphValueError) as e:
        call()
    for f in fragments:
        assert f in str(e.value)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"precision": None}, "argument 'precision' must be a precision name (bf16, fp16, fp32) or a Precision, got None"),
    ({"precision": 2}, "argument 'precision' must be"),
    ({"scope": 3}, "argument 'scope' must be a string, got 3 (int)"),
    ({"scope": None}, "argument 'scope' must be a string"),
    ({"convention": ["all"]}, "argument 'convention' must be a string"),
    ({"causal": True}, "argument 'causal' must be a string"),
])
def test_costs_arguments(gpt, kwargs, fragment):
    assert fragment in error(gpt.costs, **kwargs)


@pytest.mark.parametrize("args, kwargs, fragment", [
    ((), {"config": ["gpt2"]}, "argument 'config' must be a string, got ['gpt2'] (list)"),
    ((3,), {}, "argument 'config' must be a string, got 3 (int)"),
    (("gpt2",), {"h": 2.0}, "'h' must be a positive whole number, got 2.0 (float)"),
    (("gpt2",), {"h": "768"}, "'h' must be a positive whole number, got '768' (str)"),
    (("gpt2",), {"h": True}, "'h' must be a positive whole number, got True (bool)"),
    (("gpt2",), {"h": 10**5000}, "'h' is too large: a whole number of about 5001 digits (at most 100 digits)"),
], ids=["list", "int", "float", "str", "bool", "huge"])
def test_evaluate_and_values_arguments(gpt, gpt_costs, args, kwargs, fragment):
    assert fragment in error(gpt_costs.evaluate, *args, **kwargs)
    assert fragment in error(gpt.values, *args, **kwargs)


def test_path_objects_are_accepted(tmp_path):
    assert costgraph.load_hf_config(HF / "gpt2.json").values["h"] == 768


def _config(tmp_path, text: str) -> str:
    p = tmp_path / "config.json"
    p.write_text(text)
    return str(p)


def _with(value: str) -> str:
    return json.dumps(LLAMA, indent=2).replace('"hidden_size": 4096', f'"hidden_size": {value}')


@pytest.mark.parametrize("value, message", [
    ("1e400", "invalid JSON: 1e400 is too large for a number"),
    ("9" * 5000, "invalid JSON: number too large: it has 5000 digits (at most 100)"),
    ("9" * 4000, "invalid JSON: number too large: it has 4000 digits (at most 100)"),
], ids=["1e400", "5000-digits", "4000-digits"])
def test_json_numbers_python_cannot_hold_are_located(tmp_path, value, message):
    text = _with(value)
    line = next(i for i, l in enumerate(text.splitlines(), 1) if '"hidden_size"' in l)
    msg = error(costgraph.load_hf_config, _config(tmp_path, text))
    assert f"config.json:{line}:18: error: {message}" in msg
    assert len(msg) < 600   # the value is not printed in full


@pytest.mark.parametrize("value, shown", [("Infinity", "inf"), ("-Infinity", "-inf"), ("NaN", "nan")])
def test_json_constants_are_values_refused_as_sizes(tmp_path, value, shown):
    # Python's json and transformers read Infinity/NaN (PretrainedConfig.from_json_file: json.loads); a size
    # that is one is refused by its key
    msg = error(costgraph.load_hf_config, _config(tmp_path, _with(value)))
    assert f"key 'hidden_size' must be a positive whole number, got {shown}" in msg


@pytest.mark.parametrize("key", ["rotary_pct", "num_attention_heads"])
@pytest.mark.parametrize("value", ["Infinity", "NaN", "1e400"])
def test_non_finite_values_of_other_keys(tmp_path, key, value):
    cfg = json.loads((HF / "pythia-1b.json").read_text())
    cfg[key] = "@@"
    path = _config(tmp_path, json.dumps(cfg).replace('"@@"', value))
    msg = error(costgraph.load_hf_config, path)
    assert ("invalid JSON" if value == "1e400" else f"key '{key}' must be a positive") in msg


@pytest.mark.parametrize("value", ["[0.0, Infinity]", "Infinity", "-Infinity", "NaN"])
def test_json_constants_where_no_size_is_read(tmp_path, value):
    # transformers 5.24 configuration_mamba2.py: time_step_limit=(0.0, float("inf")), which
    # PretrainedConfig.to_json_string writes as [0.0, Infinity]; a key no model file reads changes nothing
    cfg = json.loads((HF / "pythia-1b.json").read_text())
    base = costgraph.load_hf_config(str(HF / "pythia-1b.json"))
    cfg["time_step_limit"] = "@@"
    path = _config(tmp_path, json.dumps(cfg).replace('"@@"', value))
    hf = costgraph.load_hf_config(path)
    assert hf.costs().evaluate(**hf.values)["params"] == base.costs().evaluate(**base.values)["params"] \
        == 1_011_781_632


def test_json_nested_100000_deep(tmp_path):
    path = _config(tmp_path, '{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    msg = error(costgraph.load_hf_config, path)
    assert "config.json:1:129: error: JSON nested too deeply (more than 100 levels)" in msg


def test_shallow_nesting_is_fine(tmp_path):
    cfg = dict(LLAMA, rope_scaling={"a": [[[[1]]]]})
    assert costgraph.load_hf_config(_config(tmp_path, json.dumps(cfg))).values["h"] == 4096


@pytest.mark.parametrize("value, fragment", [
    (float("inf"), "key 'hidden_size' must be a positive whole number, got inf"),
    (float("nan"), "key 'hidden_size' must be a positive whole number, got nan"),
    (10**5000, "key 'hidden_size' is too large: a whole number of about 5001 digits"),
    (10**100, "key 'hidden_size' is too large"),
    ([4096], "key 'hidden_size' must be a positive whole number, got [4096]"),
], ids=["inf", "nan", "5001-digits", "101-digits", "list"])
def test_dict_values_python_can_hold(value, fragment):
    assert fragment in error(costgraph.from_hf_config, dict(LLAMA, hidden_size=value))


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e300, -0.5, 10**200],
                         ids=["inf", "nan", "1e300", "negative", "201-digits"])
def test_rotary_fraction_products(value):
    cfg = json.loads((HF / "pythia-1b.json").read_text())
    msg = error(costgraph.from_hf_config, dict(cfg, rotary_pct=value))
    assert "rotary_pct" in msg or "too large" in msg


def test_variant_values_that_are_not_json_are_shown_shortly():
    msg = error(costgraph.from_hf_config, dict(LLAMA, hidden_act={"x" * 1000}))
    assert "hidden_act = {'xxx" in msg and len(msg) < 300


def test_shown_never_fails():
    deep = []
    for _ in range(100_000):
        deep = [deep]
    assert shown(deep) == "a list"
    assert shown(10**5000).startswith("a whole number of about 5001 digits")
    assert "\x00" not in shown("a\x00b") and "\x1b" not in shown("\x1b[31m")


@pytest.mark.parametrize("value", ["Infinity", "NaN", "1e400", "9" * 5000], ids=["inf", "nan", "1e400", "5000-digits"])
def test_cli_exit_status_2(tmp_path, capsys, value):
    assert main(["derive", _config(tmp_path, _with(value))]) == 2
    err = capsys.readouterr().err
    assert ("invalid JSON" in err or "key 'hidden_size' must be a positive whole number" in err) \
        and "internal error" not in err


def test_cli_deep_json_exit_status_2(tmp_path, capsys):
    assert main(["derive", _config(tmp_path, "[" * 100_000 + "]" * 100_000)]) == 2
    assert "nested too deeply" in capsys.readouterr().err


def test_cli_empty_config_name_is_not_ignored(capsys):
    assert main(["derive", "gpt", "--config", ""]) == 2
    assert "has no configuration ''" in capsys.readouterr().err


# --- dimensions named self or config, on the command line and through the API (issue 18) -----------------------------


SELF_MODEL = """model selfdim {
  dim b "batch"
  dim s "seq"
  dim self "hidden"
  dim config "out"
  input x[b, s, self]: act
  return linear(x, config, name = proj)
}
config small { b = 2, s = 8, self = 16, config = 4 }
"""


@pytest.fixture
def self_model(tmp_path):
    path = tmp_path / "selfdim.cg"
    path.write_text(SELF_MODEL)
    return path


def test_dimension_named_self_on_the_command_line(cg, self_model):
    # linear(x, config) on [b, s, self]: params config·self + config = 68, FLOPs 2·b·s·self·config = 2,048
    p = cg("sweep", str(self_model), "--config", "small")
    assert p.returncode == 0, p.stderr
    # backward: the weight gradient only (x is a model input, which needs no gradient: issue 30)
    assert p.stdout.splitlines()[1] == "68,68,2048,2048,0,2048,512,0,0"
    p = cg("derive", str(self_model), "--config", "small")
    assert p.returncode == 0, p.stderr
    p = cg("solve", str(self_model), "--config", "small", "--for", "self", "--budget", "1e6")
    assert p.returncode == 0, p.stderr


def test_dimension_named_self_or_config_through_the_api(self_model):
    import costgraph

    m = costgraph.load(str(self_model))
    c = m.costs("model")
    by_map = c.evaluate(None, {"b": 2, "s": 8, "self": 16, "config": 4})
    assert by_map["params"] == 68 and by_map["flops_forward"] == 2048
    assert c.evaluate("small") == by_map
    assert c.evaluate(b=2, s=8, self=16, config=4) == by_map      # keywords: config is the dimension here
    assert {str(k): int(v) for k, v in m.values("small", {"self": 32}).items()} == \
        {"b": 2, "s": 8, "self": 32, "config": 4}


def test_keyword_config_still_names_the_configuration():
    import costgraph

    assert costgraph.load("gpt").costs().evaluate(config="gpt2")["params"] == 124_439_808   # tests/models/test_gpt.py


def test_load_config_sets_its_sizes_as_the_cli_does():
    # trial finding: load(name, config=...) set the configuration's options only, and .plan then asked for
    # sizes; now its sizes are the model's values when none are given, as `--config gpt2` on the command line
    import costgraph

    m, base = costgraph.load("gpt", config="gpt2"), costgraph.load("gpt")
    gpt2 = base.values("gpt2")
    assert m.values() == gpt2 and m.costs().evaluate()["params"] == 124_439_808   # Radford et al. 2019
    # plan with config= and no values: tests/training/test_planner_fidelity.py (test_divides_told_apart_from_fits)
    assert m.train(gpus=1).to_dict() == base.train(gpus=1, values=gpt2).to_dict()
    assert m.fit(gpus=1, hardware="h100-sxm").to_dict() == base.fit(gpt2, gpus=1, hardware="h100-sxm").to_dict()
    assert base.values() == {}   # without config=: no sizes (gpt.cg gives its dims no defaults)


def test_a_negative_number_is_said_to_be_negative(capsys):
    # found by a hostile trial: `--offload-activations -0.1` was "cannot read '-0.1'" with the hint
    # "a number such as 0.45", though -0.1 is one; a negative value is now named as such
    from costgraph.arguments import parse_rational
    from costgraph.errors import CostgraphValueError

    with pytest.raises(CostgraphValueError, match=r"--mfu '-0.5' is negative") as e:
        parse_rational("-0.5", "--mfu")
    assert e.value.hint == "a number without a minus sign, such as 0.45, 2.5 or 140e12"
    with pytest.raises(CostgraphValueError, match=r"cannot read --mfu '--1'"):   # not a number at all
        parse_rational("--1", "--mfu")
    assert parse_rational(" 0.5 ", "--mfu") == sympy.Rational(1, 2)
    assert main(["train", "gpt", "--config", "gpt2", "--zero", "3", "--offload-activations", "-0.1"]) == 2
    err = capsys.readouterr().err
    assert "--offload-activations '-0.1' is negative" in err and "hint: a number without a minus sign" in err


_NUMBER = ("a finite number: an int, a float, decimal text such as '0.45' or '140e12', a Fraction or a SymPy Rational "
           "(not nan, inf or a bool)")
TRAIN_KW = {"gpus": 8, "hardware": "h100-sxm"}
INFER_KW = {"prompt": 16, "generate": 4}


@pytest.mark.parametrize("method, kwargs, message, hint", [
    ("train", {"mfu": float("nan")}, "--mfu must be a finite number, got nan (float)", _NUMBER),
    ("train", {"tokens": float("inf")}, "--tokens must be a finite number, got inf (float)", _NUMBER),
    ("train", {"peak": True}, "--peak must be a number, got True (bool)", _NUMBER),
    ("train", {"mfu": 1.5}, "--mfu 1.5 is not a fraction in (0, 1]",
     "a share of the peak above 0 and at most 1, e.g. --mfu 0.45 (45 %); in Python a float, a Fraction or text such "
     "as '0.45'"),
    ("train", {"reserve": True}, "--reserve must be a fraction or a size, got True",
     "a fraction of the device memory below 1 (0.1), a size with its unit ('8GiB'), bytes as an int, or 'runtime' "
     "(train, fit, plan)"),
    ("train", {"mfu": 0.5, "achieved": 1e14}, "give --mfu or --achieved, not both",
     "--mfu is a share of the peak (0.45), --achieved the FLOP/s a device reached (400e12): one of them"),
    # was AttributeError ('NoneType' object has no attribute 'xreplace'): an internal error of the API
    ("infer", {"compute_efficiency": None}, "--compute-efficiency must be a number, not None",
     "leave compute_efficiency out (its default is 1), or give " + _NUMBER),
    ("infer", {"pp": float("nan")}, "'--pp' must be a positive whole number, got nan (float)",
     "give --pp a whole number above 0 (e.g. --pp 2; in Python pp=2)"),
    ("infer", {"max_num_seqs": 0}, "'--max-num-seqs' must be a positive whole number, got 0 (int)",
     "give --max-num-seqs a whole number above 0 (e.g. --max-num-seqs 2; in Python max_num_seqs=2)"),
    # was TypeError ("'<=' not supported between instances of 'str' and 'int'"): a global batch's d before the Layout's check
    # text is read as the command line reads a count (arguments.token_count: t="2" is --tp 2)
    ("train", {"t": "x", "global_batch": 8}, "cannot read --tp 'x'", "a whole number, e.g. --tp 2"),
    ("train", {"sp": float("nan")}, "sp must be true or false, got nan", "sp=True or sp=False (a bool)"),
], ids=["mfu-nan", "tokens-inf", "peak-bool", "mfu-above-1", "reserve-bool", "mfu-and-achieved",
        "efficiency-none", "pp-nan", "max-num-seqs-0", "tp-text-with-global-batch", "sp-nan"])
def test_api_numbers_refused_with_what_is_accepted(gpt, method, kwargs, message, hint):
    """Model.train/infer keywords found without a hint (issue 30): each refusal names what the keyword accepts."""
    values = gpt.values("gpt2")
    with pytest.raises(CostgraphValueError) as e:
        getattr(gpt, method)(values=values, **(TRAIN_KW if method == "train" else INFER_KW), **kwargs)
    assert (e.value.message, e.value.hint) == (message, hint)
