"""The package as users get it: ``python -m build`` makes an sdist and a wheel
(the wheel built from the sdist, so both are complete), the wheel installs into
a fresh virtualenv (not editable) and the README's first commands run from
another folder; the grammar, the bundled models and the data files ship inside."""

import json
import re
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def readme_quickstart() -> list[list[str]]:
    """The ``costgraph`` command lines of the README's first fenced block under "## Quickstart"."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quickstart.*?```\w*\n(.*?)```", text, re.S).group(1)
    lines = [line.split("#", 1)[0].split() for line in block.splitlines()]
    return [words for words in lines if words and words[0] == "costgraph"]


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
                       capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    (wheel,), (sdist,) = out.glob("*.whl"), out.glob("*.tar.gz")
    return wheel, sdist


@pytest.mark.slow
def test_wheel_and_sdist_carry_license_types_and_data(dist):
    wheel, sdist = dist
    names = zipfile.ZipFile(wheel).namelist()
    assert "costgraph-0.1.0.dist-info/licenses/LICENSE" in names
    assert {"costgraph/py.typed", "costgraph/grammars/costgraph.lark", "costgraph/models/gpt.cg",
            "costgraph/hardware.toml", "costgraph/optional.py"} <= set(names)
    meta = zipfile.ZipFile(wheel).read("costgraph-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta
    # the core requirements carry no extra's packages; the extras name them
    core = [line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not any(p in line for line in core for p in ("matplotlib", "graphviz", "mkdocs"))
    assert "Requires-Dist: matplotlib>=3.7; extra == \"plot\"" in meta
    members = tarfile.open(sdist).getnames()
    assert {"costgraph-0.1.0/LICENSE", "costgraph-0.1.0/models/gpt.cg", "costgraph-0.1.0/grammars/costgraph.lark"} \
        <= set(members)
    # what the tests and the docs read ships too (MANIFEST.in): the suite runs from an unpacked sdist
    assert {"costgraph-0.1.0/docs/index.md", "costgraph-0.1.0/examples/hf/llama-3.1-8b.json",
            "costgraph-0.1.0/tests/conftest.py", "costgraph-0.1.0/mkdocs.yml"} <= set(members)


@pytest.mark.slow
def test_wheel_install_runs_the_readme_from_elsewhere(dist, tmp_path):
    wheel, _ = dist
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    py, cg = env / "bin" / "python", env / "bin" / "costgraph"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    commands = readme_quickstart()
    assert commands, "the README's Quickstart block has no costgraph command"
    for words in commands:
        r = subprocess.run([str(cg), *words[1:]], capture_output=True, text=True, cwd=work)
        assert r.returncode == 0, (words, r.stderr)
    r = subprocess.run([str(cg), "derive", "gpt", "--config", "gpt2", "--format", "json"],
                       capture_output=True, text=True, cwd=work)
    assert r.returncode == 0, r.stderr
    # GPT-2 small: 124,439,808 parameters
    assert json.loads(r.stdout)["quantities"]["params"]["value"] == 124439808
    # the data files of the analyses ship too: policies, optimizers, hardware presets, dtypes
    for args in (["train", "llama", "--config", "llama-2-7b", "--gpus", "8", "--zero", "3", "--optimizer", "adafactor"],
                 ["hardware", "h100-sxm"],
                 ["infer", "llama", "--config", "llama-2-7b", "--hardware", "h100-sxm", "--prompt", "128",
                  "--generate", "8", "--kv", "int8", "--weights", "int4"],
                 ["train", "llama", "--config", "llama-2-7b", "--lora", "8", "--quantize", "nf4", "--gpus", "1"]):
        r = subprocess.run([str(cg), *args], capture_output=True, text=True, cwd=work)
        assert r.returncode == 0, (args, r.stderr)
    # the core install has no plotting: the error names the extra (exit 2, no traceback)
    r = subprocess.run([str(cg), "plot", "gpt", "--config", "gpt2", "--kind", "flops", "-o", "f.svg"],
                       capture_output=True, text=True, cwd=work)
    assert r.returncode == 2 and "costgraph[plot]" in r.stderr and "Traceback" not in r.stderr, r.stderr
    # the installed copy is used, not the checkout
    where = subprocess.run([str(py), "-c", "import costgraph; print(costgraph.__file__)"],
                           capture_output=True, text=True, cwd=work).stdout
    assert str(env) in where


def test_every_python_package_is_listed_for_the_wheel():
    """Each folder of ``costgraph/`` with an ``__init__.py`` is in ``[tool.setuptools] packages``
    (an unlisted one is missing from the wheel: ``costgraph.drafting`` was, so ``costgraph import``
    failed from an installed wheel)."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "costgraph").rglob("__init__.py")}
    assert found - listed == set()
