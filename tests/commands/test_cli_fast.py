"""The light commands (issue 6, item 7): ``costgraph --help``, ``--version``,
``list`` and ``ops`` import neither SymPy nor NetworkX, and what they print
comes from the same sources as the engine (the parsed files, the ``@op``
declarations)."""

import json
import os
import subprocess
import sys

import costgraph
from costgraph import cli, commands
from costgraph.ops import REGISTRY, catalogue
from costgraph.language.resources import bundled_model_names

LIGHT = """
import contextlib, io, sys
import costgraph.cli as cli
out = io.StringIO()
with contextlib.redirect_stdout(out):
    codes = [cli.main(a) for a in (["--help"], ["--version"], ["list"], ["list"], ["ops"])]
heavy = sorted(m for m in ("sympy", "networkx") if m in sys.modules)
print(json.dumps({"codes": codes, "heavy": heavy, "out": out.getvalue()}))
"""


def _run_light(tmp_path, *env_extra):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", "import json\n" + LIGHT], capture_output=True, text=True, env=env,
                       check=True)
    return json.loads(r.stdout)


def test_light_commands_import_no_sympy_or_networkx(tmp_path):
    r = _run_light(tmp_path)
    assert r["codes"] == [0, 0, 0, 0, 0]
    assert r["heavy"] == []
    assert "usage: costgraph" in r["out"] and f"costgraph {costgraph.__version__}" in r["out"]
    assert "gpt: configurations gpt2" in r["out"] and "linear(x, out, bias=true" in r["out"]


def test_light_commands_without_cache(tmp_path):
    r = _run_light(tmp_path, ("COSTGRAPH_NO_CACHE", "1"))
    assert r["codes"] == [0, 0, 0, 0, 0] and r["heavy"] == []


def test_importing_costgraph_is_light_and_its_names_still_work():
    code = ("import sys, costgraph; light = 'sympy' not in sys.modules; "
            "from costgraph import load, Costs, load_hf_config; "
            "print(light, costgraph.load is load, callable(costgraph.from_hf_config), 'Model' in dir(costgraph))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.split() == ["True", "True", "True", "True"]


def test_unknown_top_level_name_is_an_attribute_error():
    try:
        costgraph.no_such_name
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("expected AttributeError")


def test_list_names_the_configurations_the_built_models_have(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    listed = {}
    for text in (commands.module("list").run(), commands.module("list").run()):   # parsed, then from the cache
        listed = dict(line.split(": configurations ") for line in text.splitlines())
        assert list(listed) == list(bundled_model_names())
    for name in bundled_model_names():
        assert listed[name] == (", ".join(costgraph.load(name).configs) or "(none)"), name
    assert len(list((tmp_path / "costgraph").glob("list-*"))) == 1   # beside it: the parse cache


def test_catalogue_read_from_the_source_equals_the_registry():
    from costgraph.ops import registry

    declared = registry._declared()
    assert declared is not None
    loaded = {name: REGISTRY[name] for name in REGISTRY}
    assert [s.name for s in declared] == sorted(loaded)
    for spec in declared:
        assert (spec.params, spec.summary) == (loaded[spec.name].params, loaded[spec.name].summary)
    assert catalogue() == tuple(loaded[n] for n in sorted(loaded))


def test_digit_caps_agree():
    from costgraph import arguments
    from costgraph.language import parser

    assert arguments.MAX_DIGITS == parser.MAX_DIGITS


SIZED = """
import sys
import costgraph.cli as cli
sys.argv = ["costgraph", "derive", "gpt", "--scope", "layer", "--format", "json"]
try:
    cli.run()
except SystemExit as e:
    import sympy.core.cache as cache
    print(e.code, cache.SYMPY_CACHE_SIZE, file=sys.stderr)
"""


def test_command_process_sizes_sympys_cache(tmp_path):
    # costgraph.SYMPY_CACHE_SIZE: a command's own process keeps 100,000 SymPy cache entries (web of
    # Qwen3-Next: 47.9 s CPU at SymPy's default 1,000, 28.2 s at 100,000); one process (a value in the environment
    # is kept: os.environ.setdefault)
    env = {k: v for k, v in os.environ.items() if k != "SYMPY_CACHE_SIZE"}
    run = subprocess.run([sys.executable, "-c", SIZED], capture_output=True, text=True, timeout=120, env=env)
    assert run.stderr.split()[-2:] == ["0", "100000"], run.stderr[-2000:]


DERIVE = """
import contextlib, io, json, sys
import costgraph.cli as cli
with contextlib.redirect_stdout(io.StringIO()):
    code = cli.main(["derive", "gpt"])
loaded = sorted(m for m in sys.modules if m.startswith("costgraph"))
from costgraph.ops.registry import REGISTRY, catalogue, has_role, traits
print(json.dumps({"code": code, "loaded": loaded, "input": traits("input") is None,
                  "conv1d": traits("conv1d").layout, "ssm": "costgraph.ops.ssm" in sys.modules,
                  "all": sorted(REGISTRY) == [s.name for s in catalogue()]}))
"""


def test_derive_imports_only_what_it_uses(tmp_path):
    """Issue 31 item 8 (cold start): `costgraph derive gpt` imports the operator rules GPT calls (the module that
    declares each: ops.registry.declared_modules), not the SSM, vision, linear-attention or recurrent rules; nor
    --launch's hook, the Hub's resolver (a bundled name), the exact evaluators (no values given) or shell completion
    (a top-level option, never after a command). An operator of a module not yet imported is still found (its module
    imported then), a node kind that is no operator has no traits, and the registry then lists every operator."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = json.loads(subprocess.run([sys.executable, "-c", DERIVE], capture_output=True, text=True, env=env,
                                  check=True).stdout)
    assert r["code"] == 0
    ops = {m.rsplit(".", 1)[1] for m in r["loaded"] if m.startswith("costgraph.ops.")}
    assert ops == {"registry", "elementwise", "matmul", "norm", "shape"}, ops   # gpt.cg's linear, gelu, softmax, ...
    assert not set(r["loaded"]) & {"costgraph.commands._launch_hook", "costgraph.language.hf_hub",
                                   "costgraph.numbers.evaluator", "costgraph.completion"}
    assert r["input"] and r["conv1d"] == ["per_channel", "x"] and r["ssm"] and r["all"]
