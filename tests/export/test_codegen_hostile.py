"""`costgraph codegen` on hostile model files (issue 18): dimension names
that start with the generator's own prefixes (`cg_`, `_cg`, `CG_OK`,
`Cg_x`, `costgraph`...), that equal a rename target or a C macro, and
comment text that tries to close or nest comments. Every target (Python,
NumPy, C, JavaScript) must be generated in bounded time, compile/run, and
give the same exact numbers as the Python target and `Costs.evaluate`."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess

import pytest

import costgraph
from costgraph.cli import main
from costgraph.export.codegen import LANGUAGES, generate, plan

# names starting with every prefix the generator uses (cg_/_cg/CG_/Cg_/COSTGRAPH, numpy's _cg_f_<i>,
# C's <MODEL>_DEFAULT_ macros), a name equal to a rename target (dim_cg_), names C reserves or
# predefines (int64_t, __x, _X, unix under GNU C) and keywords with their trailing-_ rename taken (int, int_)
HOSTILE_NAMES = ["cg_", "_cg", "CG_OK", "Cg_x", "cg", "COSTGRAPH", "_cg_f_0", "dim_cg_", "HOSTILE_DEFAULT_cg_",
                 "int64_t", "__x", "_X", "unix", "int", "in", "int_"]


def _model_text(names, meanings=None) -> str:
    meanings = meanings or {}
    # a .cg string has no escapes: the text goes in as it is
    dims = "\n".join(f'  dim {n} "{meanings.get(n, "size " + str(i))}"' for i, n in enumerate(names))
    layers = "\n".join(f"  y = linear(y, {n}, name = l{i})" for i, n in enumerate(names[3:]))
    return (f"model hostile {{\n{dims}\n  input x[{names[0]}, {names[1]}, {names[2]}]\n  y = x\n{layers}\n"
            f"  return y\n}}\n")


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _values(prog) -> dict[str, int]:
    primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71]
    return {d: primes[i % len(primes)] for i, d in enumerate(prog.symbols)}


def _run_python(prog, tmp_path, point) -> list[int]:
    names = prog.arg_names("python")
    (tmp_path / "hostile_py.py").write_text(generate(prog, "python"))
    mod = _import(tmp_path / "hostile_py.py", "hostile_py")
    return [getattr(mod, f.name)(**{names[a]: point[a] for a in f.args}) for f in prog.functions]


def _run_numpy(prog, tmp_path, point) -> list[int]:
    names = prog.arg_names("numpy")
    (tmp_path / "hostile_np.py").write_text(generate(prog, "numpy"))
    mod = _import(tmp_path / "hostile_np.py", "hostile_np")
    return [int(getattr(mod, f.name)(**{names[a]: point[a] for a in f.args}, dtype="int64"))
            for f in prog.functions]


def _run_c(prog, tmp_path, point, std=("-std=c99",)) -> list[int]:
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "hostile.h").write_text(generate(prog, "c"))
    lines = ["#include <stdio.h>", '#include "hostile.h"', "int main(void) {", "    char buf[64];", "    cg_int v;"]
    for f in prog.functions:
        argv = ", ".join([f"CG_C({point[a]})" for a in f.args] + ["&v"])
        lines.append(f'    if ({prog.ident}_{f.name}({argv})) return 1;')
        lines.append('    printf("%s\\n", cg_to_decimal(v, buf));')
    (tmp_path / "main.c").write_text("\n".join(lines + ["    return 0;", "}"]) + "\n")
    exe = tmp_path / "main"
    cmd = [cc, *std, "-O0", "-Wall", "-Wextra", "-Werror", "-o", str(exe), str(tmp_path / "main.c")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()]


def _run_js(prog, tmp_path, point) -> list[int]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node")
    names = prog.arg_names("javascript")
    (tmp_path / "hostile.js").write_text(generate(prog, "javascript"))
    calls = [[f.name, {names[a]: point[a] for a in f.args}] for f in prog.functions]
    body = ('const m = require("./hostile.js");\n'
            # JSON.parse: an object literal's "__proto__": 3 would set the prototype, not a key
            f"for (const [f, a] of JSON.parse({json.dumps(json.dumps(calls))})) {{\n"
            "  const dims = Object.fromEntries(Object.entries(a).map(([k, v]) => [k, BigInt(v)]));\n"
            "  console.log(m[f](dims).toString());\n}\n")
    (tmp_path / "run.js").write_text(body)
    out = subprocess.run([node, "run.js"], check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    return [int(x) for x in out.split()]


RUN = {"python": _run_python, "numpy": _run_numpy, "c": _run_c, "javascript": _run_js}


@pytest.fixture(scope="module")
def hostile():
    model = costgraph.loads(_model_text(HOSTILE_NAMES), path="hostile.cg")
    prog = plan(model, ["model", "l1"],
                values={d: 2 for d in HOSTILE_NAMES}, command="test hostile")
    return model, prog


def test_renaming_terminates_and_never_collides(hostile):
    _, prog = hostile
    for lang in LANGUAGES:
        names = prog.arg_names(lang)
        assert list(names) == HOSTILE_NAMES
        assert len(set(names.values())) == len(names), lang
        for d, n in names.items():
            assert not n.lower().startswith(("cg_", "_cg", "costgraph")), (lang, d, n)
    c = prog.arg_names("c")
    # cg_ → dim_cg_ is another dimension's own name, so the counter goes on; int_ likewise for int
    assert (c["cg_"], c["dim_cg_"], c["int"], c["int_"]) == ("dim_cg__2", "dim_cg_", "int__2", "int_")
    assert (c["CG_OK"], c["Cg_x"], c["__x"], c["_X"], c["unix"], c["int64_t"]) == (
        "dim_CG_OK", "dim_Cg_x", "dim___x", "dim__X", "unix_", "dim_int64_t_2")
    assert c["HOSTILE_DEFAULT_cg_"] == "dim_HOSTILE_DEFAULT_cg_"
    assert prog.arg_names("python")["in"] == "in_" and prog.arg_names("python")["__x"] == "__x"


@pytest.mark.parametrize("lang", LANGUAGES)
def test_every_target_agrees_with_python_and_evaluate(hostile, lang, tmp_path):
    model, prog = hostile
    point = _values(prog)
    want = [model.costs(f.scope).evaluate(**point)[f.quantity] for f in prog.functions]
    assert _run_python(prog, tmp_path, point) == want
    assert RUN[lang](prog, tmp_path, point) == want


def test_c_compiles_in_gnu_mode(hostile, tmp_path):
    """GCC's default GNU dialect predefines `unix` as 1: the argument is renamed."""
    model, prog = hostile
    point = _values(prog)
    want = [model.costs(f.scope).evaluate(**point)[f.quantity] for f in prog.functions]
    assert _run_c(prog, tmp_path, point, std=()) == want


@pytest.mark.parametrize("lang", LANGUAGES)
def test_cli_codegen_returns_on_prefixed_names(tmp_path, lang, capsys):
    path = tmp_path / "hostile.cg"
    path.write_text(_model_text(["cg_", "_cg", "CG_OK", "Cg_x"]))
    assert main(["codegen", str(path), "--lang", lang]) == 0
    assert "dim_Cg_x" in capsys.readouterr().out


# comment text that nests or closes C/JavaScript block comments, forms a C trigraph (??/ splices the
# next line), or closes a Python docstring; the .cg language's strings hold no double quote, so the
# docstring closers are put into the plan directly
NASTY = {"b": "batch /* nested */*/ end \\*x ??/", "s": "tokens */", "h": "width ''' \\N{x} end \\"}


@pytest.fixture(scope="module")
def nasty():
    model = costgraph.loads(_model_text(["b", "s", "h", "w"], NASTY), path="hostile.cg")
    prog = plan(model, ["model"], command='costgraph codegen "a*/b/*c.cg" --set w=1 */ """ \\')
    prog.symbols["w"] = 'cap """ "" " \\ */'
    return model, prog


@pytest.mark.parametrize("lang", LANGUAGES)
def test_comment_text_cannot_close_or_nest_comments(nasty, lang, tmp_path):
    model, prog = nasty
    text = generate(prog, lang)
    if lang in ("c", "javascript"):
        body = [ln for ln in text.splitlines() if ln.lstrip().startswith("* ")]
        assert body and not any("*/" in ln or "/*" in ln for ln in body)
        assert "batch / * nested * / * / end / *x ? ?/" in text
    else:
        assert 'cap \'\'\' "" " / * /' in text
    point = {"b": 2, "s": 3, "h": 6, "w": 5}
    want = [model.costs(f.scope).evaluate(**point)[f.quantity] for f in prog.functions]
    assert RUN[lang](prog, tmp_path, point) == want


def test_c_comments_compile_in_gnu_mode_with_trigraph_warnings(nasty, tmp_path):
    model, prog = nasty
    point = {"b": 2, "s": 3, "h": 6, "w": 5}
    want = [model.costs(f.scope).evaluate(**point)[f.quantity] for f in prog.functions]
    assert _run_c(prog, tmp_path, point, std=("-trigraphs", "-Wtrigraphs", "-Wcomment")) == want


# JavaScript: names of Object.prototype's properties (and __proto__, an accessor there)
PROTO_NAMES = ["constructor", "__proto__", "toString", "hasOwnProperty", "valueOf"]


@pytest.fixture(scope="module")
def proto():
    model = costgraph.loads(_model_text(PROTO_NAMES), path="hostile.cg")
    return model, plan(model, ["model"], values={"constructor": 3, "__proto__": 5, "valueOf": 11})


@pytest.mark.parametrize("lang", LANGUAGES)
def test_prototype_names_agree_with_python_and_evaluate(proto, lang, tmp_path):
    model, prog = proto
    point = _values(prog)
    want = [model.costs(f.scope).evaluate(**point)[f.quantity] for f in prog.functions]
    assert _run_python(prog, tmp_path, point) == want
    assert RUN[lang](prog, tmp_path, point) == want


def test_javascript_reads_only_own_properties(proto, tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("no node")
    model, prog = proto
    (tmp_path / "proto.js").write_text(generate(prog, "javascript"))
    body = ('const m = require("./proto.js");\n'
            # no own toString: Object.prototype.toString must not be taken
            'try { m.model_flops_forward({hasOwnProperty: 7n}); console.log("taken"); }\n'
            'catch (e) { console.log(e.name + ":" + e.message.split(" ")[0]); }\n'
            # defaults (constructor 3, __proto__ 5, valueOf 11) for what is not an own property
            'console.log(m.model_flops_forward({toString: 2n, hasOwnProperty: 7n}).toString());\n'
            # an own __proto__ (JSON.parse makes one) is read, not the prototype
            'const d = JSON.parse(\'{"__proto__": 13, "constructor": 2, "toString": 3, "hasOwnProperty": 7, '
            '"valueOf": 1}\');\n'
            'console.log(m.model_flops_forward(d).toString());\n'
            'try { m.model_params(null); } catch (e) { console.log(e.name); }\n'
            'console.log(Object.keys(m.SYMBOLS).join(","));\n')
    (tmp_path / "run.js").write_text(body)
    out = subprocess.run([node, "run.js"], check=True, capture_output=True, text=True, cwd=tmp_path).stdout
    ev = model.costs().evaluate
    assert out.split() == [
        "TypeError:toString",
        str(ev(constructor=3, __proto__=5, toString=2, hasOwnProperty=7, valueOf=11)["flops_forward"]),
        str(ev(constructor=2, __proto__=13, toString=3, hasOwnProperty=7, valueOf=1)["flops_forward"]),
        "TypeError",
        ",".join(PROTO_NAMES)]
