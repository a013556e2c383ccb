"""`costgraph codegen`: the generated Python, NumPy, C and JavaScript agree
exactly with costgraph's own exact evaluation (`Costs.evaluate`) on a grid
of points, for bundled models (GPT-2, Llama 2, Mixtral, Gemma 2 with its
windowed Min terms under causal half, DeepSeek-V3 with two stacks), a
layer-pattern model (floor counts) and a model whose formulas have
fractions (h/2, Min(h/3, w)). C is compiled with `cc`, JavaScript run
with `node`."""

from __future__ import annotations

import importlib.util
import itertools
import json
import shutil
import subprocess

import numpy as np
import pytest

import costgraph
from costgraph.cli import main
from costgraph.export.codegen import generate, plan
from costgraph.numbers.integer_form import exact_parts

# a Gemma-3-like pattern: every third layer global, the rest local; the first k layers dense
PATTERN = """
model pat {
  dim b "micro-batch size"
  dim s "sequence length"
  dim h "hidden size"
  dim a "attention heads"
  dim w "window"
  dim l "layers"
  dim k "leading dense layers"
  input x[b, s, h]
  repeat l as layers[i] {
    if i % 3 == 2 {
      x = x + linear(x, h, bias = false, name = global_proj)
    } else {
      y = linear(x, min(s, w), bias = false, name = local_in)
      x = x + linear(y, h, bias = false, name = local_out)
    }
    if i < k { x = x + linear(x, h, name = dense) }
  }
  return x
}
"""

# fractions: h/2 and Min(h/3, w) give h^2/2 and 3 h Min(h/3, w)/2, whole only at valid sizes
FRACTIONS = """
model frac {
  dim b "batch"
  dim s "tokens"
  dim h "width"
  dim w "cap"
  input x[b, s, h]
  y = linear(x, h / 2, name = down)
  z = linear(y, min(h / 3, w), bias = false, name = mix)
  return linear(z, h, name = up)
}
"""

# dimension names that are keywords of C (int) and JavaScript (in)
KEYWORDS = """
model kw {
  dim b "batch"
  dim int "input width"
  dim in "output width"
  input x[b, int]
  return linear(x, in, name = up)
}
"""


def _grid(base: dict, **axes) -> list[dict]:
    keys = list(axes)
    return [{**base, **dict(zip(keys, combo))} for combo in itertools.product(*axes.values())]


def _case(name, model, scopes, causal, points):
    return pytest.param(model, scopes, causal, points, id=name)


CASES = [
    ("gpt", lambda: costgraph.load("gpt"), ["model", "layer", "layers/attn"], "full",
     _grid(costgraph.load("gpt")._int_values("gpt2", {}), b=(1, 3), s=(7, 1024))),
    ("llama", lambda: costgraph.load("llama"), ["model", "layer"], "exact",
     _grid(costgraph.load("llama")._int_values("llama-2-7b", {}), b=(1, 5), s=(4096, 333))),
    ("mixtral", lambda: costgraph.load("mixtral"), ["model"], "half",
     _grid(costgraph.load("mixtral")._int_values("mixtral-8x7b", {}), b=(1, 2), s=(2048, 32768))),
    # s below, at and above the window w = 4096: both branches of Min(s, w)
    ("gemma2", lambda: costgraph.load("gemma2"), ["model", "layer"], "half",
     _grid(costgraph.load("gemma2")._int_values("gemma-2-9b", {}), b=(1, 3), s=(1001, 4096, 8192))),
    ("deepseek_v3", lambda: costgraph.load("deepseek_v3"), ["model", "moe_layers"], "full",
     _grid(costgraph.load("deepseek_v3")._int_values("deepseek-v3", {}), b=(1,), s=(512, 4096))),
    ("pattern", lambda: costgraph.loads(PATTERN, path="pat.cg"), ["model", "layers/global_proj"], "full",
     _grid(dict(b=2, s=16, h=8, a=2, w=4), l=(1, 6, 7, 62), k=(1, 5))),
    ("fractions", lambda: costgraph.loads(FRACTIONS, path="frac.cg"), ["model"], "full",
     _grid(dict(b=2, s=5), h=(6, 12, 30), w=(1, 3, 17))),
    ("keywords", lambda: costgraph.loads(KEYWORDS, path="kw.cg"), ["model"], "full",
     _grid(dict(b=2), int=(3, 1000), **{"in": (5,)})),
]


@pytest.fixture(scope="module", params=[c[0] for c in CASES])
def case(request):
    name, make, scopes, causal, points = next(c for c in CASES if c[0] == request.param)
    model = make()
    prog = plan(model, scopes, causal=causal, command=f"test {name}")
    want = {scope: [model.costs(scope, causal=causal).evaluate(**p) for p in points] for scope in scopes}
    return name, model, prog, points, want


def _expected(prog, want, points):
    """[(function name, its args at each point, exact value at each point)]"""
    out = []
    for f in prog.functions:
        out.append((f, [{a: p[a] for a in f.args} for p in points],
                    [w[f.quantity] for w in want[f.scope]]))
    return out


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_exact_parts_rewrites_fractions_min_and_floors():
    from costgraph.engine.symbols import dim
    import sympy

    s, w, h, l, a = (dim(n) for n in "s w h l a".split())
    # s w − w²/2 (causal half under a window): one division by 2 at the end
    assert exact_parts(s * w - w ** 2 / 2) == (2 * s * w - w ** 2, 2)
    # 3 Min(s, w/2)/4 + h/6 = (4 h + 9 Min(2 s, w)) / 24
    num, den = exact_parts(3 * sympy.Min(s, w / 2) / 4 + h / 6)
    assert den == 24 and sympy.expand(num - (4 * h + 9 * sympy.Min(2 * s, w))) == 0
    # floor, ceiling and Mod become floor divisions of integers
    from costgraph.numbers.evaluator import cg_floordiv
    assert exact_parts(sympy.ceiling(l / 4)) == (-cg_floordiv(-l, 4), 1)
    assert exact_parts(sympy.Mod(l, 3)) == (l - 3 * cg_floordiv(l, 3), 1)
    # a symbolic, positive denominator: Min(s/3, h/a) = Min(3h, a s) / (3a)
    num, den = exact_parts(sympy.Min(s / 3, h / a))
    assert den == 3 * a and num == sympy.Min(3 * h, a * s)
    with pytest.raises(costgraph.CostgraphValueError, match="power"):
        exact_parts(sympy.sqrt(h))


def test_python(case, tmp_path):
    name, model, prog, points, want = case
    path = tmp_path / f"{name}_cost.py"
    path.write_text(generate(prog, "python"))
    mod = _import(path, f"{name}_cost")
    names = prog.arg_names("python")
    for f, args, values in _expected(prog, want, points):
        fn = getattr(mod, f.name)
        args = [{names[k]: v for k, v in a.items()} for a in args]
        assert [fn(**a) for a in args] == values, f.name
        assert type(fn(**args[0])) is int
        assert mod.FUNCTIONS[(f.scope, f.quantity)] is fn
        assert f.formula.split(" ")[0] in fn.__doc__      # the formula is in the docstring
    # the module says what every symbol means
    for d, meaning in model.symbols.items():
        assert f"{d}: {meaning}" in mod.__doc__


def test_numpy(case, tmp_path):
    from costgraph.export.codegen_python import _bound

    name, model, prog, points, want = case
    path = tmp_path / f"{name}_np.py"
    path.write_text(generate(prog, "numpy"))
    mod = _import(path, f"{name}_np")
    names = prog.arg_names("numpy")
    for f, args, values in _expected(prog, want, points):
        fn = getattr(mod, f.name)
        arrays = {names[a]: np.array([p[a] for p in args], dtype=np.int64) for a in f.args}
        shape = (len(points),) if f.args else ()      # a constant (no arguments) is a 0-d array
        got = fn(**arrays, dtype="int64")
        assert got.dtype == np.int64 and got.shape == shape, f.name
        assert np.broadcast_to(got, (len(points),)).tolist() == values, f.name
        got = np.broadcast_to(fn(**arrays), (len(points),))
        assert got.dtype == np.float64
        for i, (p, v) in enumerate(zip(args, values)):
            # exact wherever every intermediate stays below 2^53 (whole floats)
            if int(_bound(f.num).xreplace({s: p[str(s)] for s in f.num.free_symbols})) < 2 ** 53:
                assert got[i] == v, (f.name, p)
            else:
                assert abs(got[i] - v) <= 1e-12 * abs(v), (f.name, p)


def test_numpy_broadcasts_like_compile():
    model = costgraph.load("llama")
    costs = model.costs()
    mod = _numpy_module(model, costs)
    b = np.arange(1, 9)[:, None]
    s = np.array([512, 2048, 4096])
    got = mod.model_activation_bytes(b=b, s=s, dtype="int64")
    want = costs.compile("llama-2-70b", dtype="int64")(b=b, s=s)["activation_bytes"]
    assert got.shape == (8, 3) and np.array_equal(got, want)
    # Llama-2-70B's backward FLOPs pass 2^63 at b = 4096, s = 131072 (README): refused, not wrapped
    with pytest.raises(OverflowError, match="int64"):
        mod.model_flops_backward(b=4096, s=131072, dtype="int64")
    with pytest.raises(ValueError, match="positive"):
        mod.model_params(h=0)


def _numpy_module(model, costs, tmp=None):
    import tempfile
    from pathlib import Path

    prog = plan(model, ["model"], values=model.values("llama-2-70b"))
    d = Path(tempfile.mkdtemp())
    (d / "llama_np.py").write_text(generate(prog, "numpy"))
    return _import(d / "llama_np.py", "llama_np")


def _c_main(prog, header, calls) -> str:
    lines = ["#include <stdio.h>", f'#include "{header}"', "int main(void) {", "    char buf[64];",
             "    cg_int v;", "    int st;"]
    for fname, args in calls:
        argv = ", ".join([f"CG_C({x})" for x in args] + ["&v"])
        lines.append(f"    v = 0; st = {prog.ident}_{fname}({argv});")
        lines.append(f'    printf("{fname} %d %s\\n", st, st ? "-" : cg_to_decimal(v, buf));')
    lines += ["    return 0;", "}"]
    return "\n".join(lines) + "\n"


def _run_c(tmp_path, prog, calls, int128=False) -> list[tuple[str, int, str]]:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "cost.h").write_text(generate(prog, "c"))
    (tmp_path / "main.c").write_text(_c_main(prog, "cost.h", calls))
    exe = tmp_path / ("main128" if int128 else "main")
    cmd = [cc, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(tmp_path / "main.c")]
    if int128:
        cmd.insert(1, "-DCOSTGRAPH_INT128")
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return [(n, int(st), v) for n, st, v in (line.split() for line in out.splitlines())]


def test_c(case, tmp_path):
    from costgraph.export.codegen_python import _bound

    name, model, prog, points, want = case
    calls, expected, bounds = [], [], []
    for f, args, values in _expected(prog, want, points):
        for a, v in zip(args, values):
            calls.append((f.name, [a[x] for x in f.args]))
            expected.append((f.name, 0, str(v)))
            subs = {x: a[str(x)] for x in f.num.free_symbols | f.den.free_symbols}
            bounds.append(int((_bound(f.num) + _bound(f.den)).xreplace(subs)))
    got = _run_c(tmp_path, prog, calls)
    assert len(got) == len(expected)
    # int64: exact, or CG_OVERFLOW (1) only where some intermediate can pass 2^63 - never a wrong value
    for g, e, bound in zip(got, expected, bounds):
        assert g == e or (g == (e[0], 1, "-") and bound >= 2 ** 63), (g, e)


def test_c_int128_and_statuses(tmp_path):
    model = costgraph.load("llama")
    prog = plan(model, ["model"], values=model.values("llama-2-70b"))
    vals = model._int_values("llama-2-70b", {"b": 4096, "s": 131072})
    want = model.costs().evaluate(**vals)["flops_backward"]
    assert want > 2 ** 63   # README: Llama-2-70B's backward FLOPs pass 2^63 here
    f = next(f for f in prog.functions if f.quantity == "flops_backward")
    call = [(f.name, [vals[a] for a in f.args])]
    assert _run_c(tmp_path, prog, call) == [(f.name, 1, "-")]             # CG_OVERFLOW in int64
    assert _run_c(tmp_path, prog, call, int128=True) == [(f.name, 0, str(want))]
    # a dimension that is not positive: CG_BAD_ARGUMENT (4)
    bad = [(f.name, [0 if a == "b" else vals[a] for a in f.args])]
    assert _run_c(tmp_path, prog, bad) == [(f.name, 4, "-")]


def test_fractions_refused_when_not_whole(tmp_path):
    model = costgraph.loads(FRACTIONS, path="frac.cg")
    prog = plan(model, ["model"])
    f = next(f for f in prog.functions if f.quantity == "params")
    assert f.den == 2     # h^2/2 + ...: one division by 2 at the end
    # h = 7: h/2 is no whole size, and params = (49 + 7·Min(7, 3w) + 21)/2 is a fraction
    assert _run_c(tmp_path, prog, [(f.name, [7, 1])]) == [(f.name, 2, "-")]   # CG_NOT_WHOLE
    (tmp_path / "frac_py.py").write_text(generate(prog, "python"))
    mod = _import(tmp_path / "frac_py.py", "frac_py")
    with pytest.raises(ValueError, match="not a whole number"):
        mod.model_params(h=7, w=1)
    with pytest.raises(TypeError):
        mod.model_params(h=6.0, w=1)
    with pytest.raises(ValueError, match="positive"):
        mod.model_params(h=-6, w=1)
    assert mod.model_kv_cache_bytes() == 0      # a constant: no arguments


def _run_node(tmp_path, prog, script_body: str) -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node")
    (tmp_path / "cost.js").write_text(generate(prog, "javascript"))
    (tmp_path / "run.js").write_text('const m = require("./cost.js");\n' + script_body)
    return subprocess.run([node, str(tmp_path / "run.js")], check=True, capture_output=True, text=True,
                          cwd=tmp_path).stdout


def test_javascript(case, tmp_path):
    name, model, prog, points, want = case
    names = prog.arg_names("javascript")
    calls, expected = [], []
    for f, args, values in _expected(prog, want, points):
        for a, v in zip(args, values):
            calls.append([f.name, {names[k]: str(x) for k, x in a.items()}])
            expected.append(str(v))
    body = (f"const calls = {json.dumps(calls)};\n"
            "for (const [f, a] of calls) {\n"
            "  const dims = Object.fromEntries(Object.entries(a).map(([k, v]) => [k, BigInt(v)]));\n"
            "  const v = m[f](dims);\n"
            "  if (typeof v !== 'bigint') throw new Error('not a BigInt');\n"
            "  console.log(v.toString());\n}\n")
    assert _run_node(tmp_path, prog, body).split() == expected


def test_javascript_errors(tmp_path):
    model = costgraph.loads(FRACTIONS, path="frac.cg")
    prog = plan(model, ["model"])
    body = ("for (const dims of [{h: 7n, w: 1n}, {h: 0n, w: 1n}, {h: 6.5, w: 1n}, {w: 1n}]) {\n"
            "  try { m.model_params(dims); console.log('ok'); } catch (e) { console.log(e.name); }\n}\n"
            "console.log(m.model_params({h: 6, w: 1}).toString());\n")
    # not whole, not positive, not an integer, missing; Numbers that are safe integers are accepted
    want = model.costs().evaluate(h=6, w=1, b=1, s=1)["params"]
    assert _run_node(tmp_path, prog, body).split() == ["RangeError", "RangeError", "TypeError", "TypeError",
                                                        str(want)]


def test_cli_defaults_from_config(tmp_path, capsys):
    out = tmp_path / "gpt2_cost.py"
    assert main(["codegen", "gpt", "--config", "gpt2", "--lang", "python", "--scope", "model", "layer",
                 "-o", str(out)]) == 0
    mod = _import(out, "gpt2_cost")
    # GPT-2 small: 124,439,808 parameters (the released checkpoint; shared/DOMAIN.md §1)
    assert mod.model_params() == 124_439_808
    # Korthikanti et al. 2022: 34 b s h + 5 b s^2 a bytes per layer; b = 1, s = 1024, h = 768, a = 12
    assert mod.layer_activation_bytes() == 34 * 1024 * 768 + 5 * 1024 ** 2 * 12
    assert mod.DEFAULTS["h"] == 768
    text = out.read_text()
    assert "'matmul' convention" in text and "precision 'bf16'" in text
    assert "costgraph codegen gpt --lang python --config gpt2 --scope model --scope layer" in text


def test_cli_conventions_reach_the_code(capsys):
    assert main(["codegen", "gpt", "--lang", "javascript", "--scope", "layer", "--convention", "all",
                 "--causal", "half", "--precision", "fp32", "--quantity", "flops_forward"]) == 0
    text = capsys.readouterr().out
    assert "'all' convention" in text and "causal 'half'" in text and "precision 'fp32'" in text
    assert "function layer_flops_forward(cg_dims = {}) {\n    let {b, s, h, a} = cg_own(cg_dims);" in text
    assert "layer_params" not in text


@pytest.mark.parametrize("argv,message", [
    (["codegen", "gpt", "--lang", "c", "--scope", "nowhere"], "scope"),
    (["codegen", "gpt", "--lang", "c", "--config", "gpt9"], "gpt9"),
    (["codegen", "gpt", "--lang", "c", "--set", "h=x"], "--set"),
])
def test_cli_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_keyword_dimensions_are_renamed_per_language():
    prog = plan(costgraph.loads(KEYWORDS, path="kw.cg"), ["model"])
    assert prog.arg_names("c") == {"b": "b", "int": "int_", "in": "in"}
    assert prog.arg_names("javascript") == {"b": "b", "int": "int", "in": "in_"}
    assert prog.arg_names("python") == {"b": "b", "int": "int", "in": "in_"}
    c = generate(prog, "c")
    assert "int_ (dimension int): input width" in c
    assert "static inline int kw_model_params(cg_int int_, cg_int in, cg_int *cg_out)" in c
