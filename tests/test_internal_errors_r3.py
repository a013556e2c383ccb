"""Issue 18, internal errors round three: each run that ended in "this is a bug"
(exit 3) now ends in a clear message and exit 2 (or a right answer); no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

HINT = "--config NAME or --set NAME=VALUE"


def _cg(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "costgraph.cli", *argv], capture_output=True, text=True,
                          timeout=timeout)


def _refused(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "this is a bug" not in p.stderr, p.stderr
    return p.stderr


def test_infer_without_sizes_names_them():
    err = _refused(_cg("infer", "mixtral", "--hardware", "h100-sxm", "--prompt", "16", "--generate", "16"))
    assert "error: no value for E, V, a, d, h, i, k, kv, l\n" in err and HINT in err


def test_plot_memory_without_sizes_names_them(tmp_path):
    err = _refused(_cg("plot", "gpt", "--set", "s=16", "--kind", "memory", "-o", str(tmp_path / "m.svg")))
    assert "error: no value for V, a, b, h, l, s_max\n" in err and HINT in err
    assert not (tmp_path / "m.svg").exists()


def test_plot_flops_without_sizes_names_them(tmp_path):
    err = _refused(_cg("plot", "gpt", "--set", "s=16", "--kind", "flops", "-o", str(tmp_path / "f.svg")))
    assert "error: no value for b, h, l\n" in err and HINT in err


# Gemma-3-1B (models/gemma3_text.cg, config gemma-3-1b: d = 256, kv = 1, w = 512, s = 32768, b = 1):
# a local layer caches 2·2 bytes·d·kv·min(s, w) = 524,288 B, a global one 2·2·d·kv·s = 33,554,432 B;
# floor(l/6) of the l layers are global.
def test_sensitivity_in_a_rounded_layer_count():
    import json

    p = _cg("sensitivity", "gemma3_text", "--config", "gemma-3-1b", "--wrt", "l", "--quantity", "kv_cache_bytes",
            "--format", "json")
    assert p.returncode == 0, p.stderr
    q = json.loads(p.stdout)["quantities"]["kv_cache_bytes"]
    # l = 26: 26/6 not whole, floor(l/6) locally constant: ∂/∂l is one local layer's bytes
    assert q["at"] == {"derivative": "524288", "step": "524288", "elasticity": "13/139", "step_back": "524288"}
    assert q["differentiable"] is True


def test_sensitivity_where_the_rounded_count_jumps():
    p = _cg("sensitivity", "gemma3_text", "--config", "gemma-3-1b", "--set", "l=24", "--wrt", "l",
            "--quantity", "kv_cache_bytes")
    assert p.returncode == 0, p.stderr
    # l = 24 → 25 adds a local layer; 24 → 23 removes a global one (floor(23/6) = 3)
    assert "no derivative (a min/max switches or a rounded count jumps exactly here); one-sided whole steps: " \
           "+1 → 524,288, −1 → 33,554,432" in p.stdout


@pytest.mark.parametrize("model", ["gpt_oss", "jamba", "llama4_text"])
def test_sensitivity_in_l_of_pattern_models(model):
    p = _cg("sensitivity", model, "--wrt", "l")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Piecewise((0, Ne(l, " in p.stdout


def test_sensitivity_rounded_derivative_exact():
    import sympy

    from costgraph.symbolic.sensitivity import sensitivity

    l, k = sympy.symbols("l k", positive=True, integer=True)
    sens = sensitivity(7 * l + 5 * sympy.floor(l / 6) + 3 * sympy.ceiling(l / 4) + sympy.Mod(l, 5), l)
    assert sens.derivative.xreplace({l: sympy.Integer(26)}) == 8      # 7 + 0 + 0 + 1
    assert sens.derivative.xreplace({l: sympy.Integer(24)}) is sympy.nan   # 24/6 whole: no derivative
    assert sens.step.xreplace({l: sympy.Integer(29)}) == 7 + 5 + 0 - 4   # 29 → 30: floor 4 → 5, Mod 4 → 0


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


def test_dimension_named_self_on_the_command_line(self_model):
    # linear(x, config) on [b, s, self]: params config·self + config = 68, FLOPs 2·b·s·self·config = 2,048
    p = _cg("sweep", str(self_model), "--config", "small")
    assert p.returncode == 0, p.stderr
    # backward: the weight gradient only (x is a model input, which needs no gradient: issue 30)
    assert p.stdout.splitlines()[1] == "68,68,2048,2048,0,2048,512,0,0"
    p = _cg("derive", str(self_model), "--config", "small")
    assert p.returncode == 0, p.stderr
    p = _cg("solve", str(self_model), "--config", "small", "--for", "self", "--budget", "1e6")
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

    assert costgraph.load("gpt").costs().evaluate(config="gpt2")["params"] == 124_439_808   # tests/test_gpt.py


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [["list"], ["derive", "gpt", "--config", "gpt2"]])
def test_stdout_full(argv):
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "costgraph.cli", *argv], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr == "costgraph: cannot write the output to stdout: No space left on device\n"


def test_stdout_closed():
    p = subprocess.run([sys.executable, "-m", "costgraph.cli", "list"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=300, pass_fds=(),
                       preexec_fn=lambda: __import__("os").close(1))
    assert p.returncode == 2, p.stderr
    assert p.stderr == "costgraph: cannot write the output: stdout is closed\n"


def test_reader_gone_is_exit_1_without_a_message():
    # EPIPE: the conventional status 1 (Python's documented SIGPIPE idiom), nothing on stderr
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "costgraph.cli", "list"], stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    finally:
        os.close(w)
    assert p.returncode == 1 and p.stderr == "", p.stderr
