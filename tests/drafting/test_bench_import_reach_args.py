"""The command line of bench/bench_import_reach.py (trial11): every refusal names the flag, what was expected
and a hint, exit status 2, before any drafting; no traceback (a bad model type was a KeyError, a NaN or negative
--timeout was reported as the model's failure, and --kinds/--help without --mapping base were drafted as types)."""

import importlib.util
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "bench_import_reach.py"


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("transformers")
    spec = importlib.util.spec_from_file_location("bench_import_reach", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _refused(bench, capsys, argv):
    assert bench.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    first, hint = err.splitlines()
    assert hint.startswith("hint: ") and hint.endswith(bench.USAGE)
    return first


def test_parse_args_accepts_the_documented_forms(bench):
    a = bench.parse_args(["--mapping", "base", "vit", "--kinds", "vision"])
    assert (a.mapping, a.types, a.kinds, a.timeout) == ("base", ["vit"], ["vision"], 60.0)
    a = bench.parse_args(["--mapping=base", "--timeout", "1e6"])
    assert (a.mapping, a.types, a.kinds, a.timeout) == ("base", [], list(bench.KIND_NAMES), 1e6)
    a = bench.parse_args(["llama", "gpt2"])
    assert (a.mapping, a.types) == ("causal", ["llama", "gpt2"])
    assert bench.parse_args(["vit"]).types == ["vit"]   # the causal walk drafts any configured type


@pytest.mark.parametrize("argv, first", [
    (["--mapping", "bogus"], "bench_import_reach.py: error: argument --mapping: invalid choice: 'bogus' "
                             "(choose from 'causal', 'base')"),
    (["--mapping="], "bench_import_reach.py: error: argument --mapping: invalid choice: '' "
                     "(choose from 'causal', 'base')"),
    (["--mapping"], "bench_import_reach.py: error: argument --mapping: expected one argument"),
    (["--mapping", "base", "bogus_type"], "bench_import_reach.py: error: MODEL_TYPE: 'bogus_type' is no model type "
                                          "of transformers' AutoModel mapping"),
    (["bogus_type"], "bench_import_reach.py: error: MODEL_TYPE: 'bogus_type' is no model type of transformers' "
                     "CONFIG_MAPPING_NAMES"),
    (["--kinds", "vision"], "bench_import_reach.py: error: --kinds: the causal mapping has no kinds nor per-type "
                            "timeout"),
    (["--help"], "bench_import_reach.py: error: unrecognized arguments: --help"),
    # a timeout setitimer cannot take (NaN, negative, over its range) or no number at all
    *[(["--mapping", "base", "vit", "--timeout", bad], "bench_import_reach.py: error: argument --timeout: expected "
       f"CPU seconds above 0 and at most 1e+06, got '{bad}' (e.g. --timeout 60)")
      for bad in ("nan", "-1", "1e300", "")],
])
def test_refusals(bench, capsys, argv, first):
    assert _refused(bench, capsys, argv) == first
