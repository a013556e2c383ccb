"""Optional extras: a command that needs one that is not installed says which extra to install
(exit status 2, no traceback) before doing any work (costgraph/optional.py)."""

import sys

import pytest

from costgraph.cli import main
from costgraph.optional import EXTRAS, MissingExtra, need


def test_need_returns_the_module_or_names_the_extra():
    import json

    assert need("json", "plot", "x") is json
    with pytest.raises(MissingExtra) as e:
        need("no_such_module_xyz.sub", "graph", "costgraph graph")
    assert str(e.value).splitlines() == [
        "error: costgraph graph needs no_such_module_xyz, which is not installed",
        "hint: install the graph extra: pip install 'costgraph[graph]' (from a checkout: pip install -e '.[graph]')"]


def test_extras_table_is_pyproject():
    import tomllib
    from pathlib import Path

    doc = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    extras = doc["project"]["optional-dependencies"]
    dist = {"yaml": "pyyaml"}   # the module PyYAML installs is `yaml`
    for extra, modules in EXTRAS.items():
        assert [r.split(">")[0] for r in extras[extra]] == [dist.get(m, m) for m in modules]
    assert extras["all"] == ["costgraph[" + ",".join(EXTRAS) + "]"]
    assert not {m for ms in EXTRAS.values() for m in ms} & {r.split(">")[0] for r in doc["project"]["dependencies"]}


@pytest.mark.parametrize("args, extra", [
    (["plot", "gpt", "--config", "gpt2", "--kind", "flops", "-o", "f.svg"], "plot"),
    (["graph", "gpt", "--scope", "layer"], "graph"),
    (["graph", "gpt", "--scope", "layer", "--format", "svg"], "graph")])
def test_command_without_its_extra_names_it(args, extra, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    for name in list(sys.modules):
        if name.split(".")[0] in EXTRAS[extra]:
            monkeypatch.delitem(sys.modules, name)
    for module in EXTRAS[extra]:
        monkeypatch.setitem(sys.modules, module, None)   # import raises ImportError
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"needs {EXTRAS[extra][0]}, which is not installed" in err
    assert f"pip install 'costgraph[{extra}]'" in err and "Traceback" not in err
    assert not (tmp_path / "f.svg").exists()


def test_graph_json_needs_no_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "graphviz", None)
    assert main(["graph", "gpt", "--scope", "layer", "--format", "json"]) == 0
    assert '"nodes"' in capsys.readouterr().out
