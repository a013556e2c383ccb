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

from costgraph.version import __version__ as VERSION

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
    info = f"costgraph-{VERSION}.dist-info"
    assert wheel.name == f"costgraph-{VERSION}-py3-none-any.whl" and sdist.name == f"costgraph-{VERSION}.tar.gz"
    names = zipfile.ZipFile(wheel).namelist()
    assert f"{info}/licenses/LICENSE" in names
    assert {"costgraph/py.typed", "costgraph/grammars/costgraph.lark", "costgraph/models/gpt.cg",
            "costgraph/hardware.toml", "costgraph/optional.py"} <= set(names)
    meta = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in meta and "License-File: LICENSE" in meta
    # one version source: costgraph/version.py, read by setuptools (pyproject's dynamic version)
    assert f"\nVersion: {VERSION}\n" in meta
    # no placeholder addresses: the project URLs are absent until they are real (issue 32 item 4)
    assert "Project-URL" not in meta and "Home-page" not in meta
    # the core requirements carry no extra's packages; the extras name them
    core = [line for line in meta.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert not any(p in line for line in core for p in ("matplotlib", "graphviz", "mkdocs", "huggingface"))
    assert "Requires-Dist: matplotlib>=3.7; extra == \"plot\"" in meta
    members = tarfile.open(sdist).getnames()
    assert {f"costgraph-{VERSION}/LICENSE", f"costgraph-{VERSION}/models/gpt.cg",
            f"costgraph-{VERSION}/grammars/costgraph.lark"} <= set(members)
    # what the tests and the docs read ships too (MANIFEST.in): the suite runs from an unpacked sdist
    assert {f"costgraph-{VERSION}/docs/index.md", f"costgraph-{VERSION}/examples/hf/llama-3.1-8b.json",
            f"costgraph-{VERSION}/tests/conftest.py", f"costgraph-{VERSION}/mkdocs.yml"} <= set(members)


def test_one_version_source():
    """pyproject.toml names no version of its own: setuptools reads costgraph/version.py."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "costgraph.version.__version__"}
    assert "urls" not in project["project"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION)


@pytest.mark.slow
def test_twine_check(dist):
    """``twine check --strict`` of the wheel and the sdist, as the package index would render them
    (the README as the long description, the metadata fields). twine is the extra ``release``."""
    pytest.importorskip("twine", reason="twine is the extra 'release' (pip install -e '.[release]')")
    r = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist)],
                       capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert r.stdout.count("PASSED") == 2, r.stdout


def core_requirements(wheel: Path, folder: Path) -> Path:
    """``folder`` holding links to the installed distributions that the wheel's core requirements (its
    ``Requires-Dist`` without an extra's marker) need, with their own requirements, and to nothing else: the
    environment a ``pip install`` of the wheel from the package index makes, from the copies installed here."""
    from importlib import metadata

    from packaging.requirements import Requirement

    meta = zipfile.ZipFile(wheel).read(f"costgraph-{VERSION}.dist-info/METADATA").decode()
    todo = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    folder.mkdir()
    seen = set()
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}) or req.name.lower() in seen:
            continue
        seen.add(req.name.lower())
        dist = metadata.distribution(req.name)
        assert dist.files, f"{req.name} lists no files (RECORD)"
        for top in {f.parts[0] for f in dist.files if f.parts[0] not in ("..", "__pycache__")}:
            if not (folder / top).exists():
                (folder / top).symlink_to(Path(dist.locate_file(top)).resolve())
        todo += dist.requires or []
    return folder


@pytest.mark.slow
def test_wheel_install_runs_the_readme_from_elsewhere(dist, tmp_path):
    wheel, _ = dist
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)   # pip is this process's, run for the new environment (pip --python)
    py, cg = env / "bin" / "python", env / "bin" / "costgraph"
    # the core requirements as installed here, seen by the new environment through a .pth: not unpacked and
    # byte-compiled a second time (CI has just installed them); pip check below asserts they satisfy the wheel's
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "core_requirements.pth").write_text(f"{core_requirements(wheel, tmp_path / 'core')}\n", encoding="utf-8")
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    r = subprocess.run([*pip, "install", "-q", "--disable-pip-version-check", "--no-deps", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([*pip, "check"], capture_output=True, text=True)   # every Requires-Dist of the wheel met
    assert r.returncode == 0, r.stdout + r.stderr
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
    # src/ layout (issue 31 item 6): from the checkout's root, `python -m costgraph` runs the installed
    # wheel (the checkout's package folder no longer shadows it: before, "No module named 'costgraph.models'")
    r = subprocess.run([str(py), "-m", "costgraph", "derive", "gpt", "--config", "gpt2", "--format", "json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["quantities"]["params"]["value"] == 124439808
    where = subprocess.run([str(py), "-c", "import costgraph; print(costgraph.__file__)"],
                           capture_output=True, text=True, cwd=ROOT).stdout
    assert str(env) in where, where


def test_every_python_package_is_listed_for_the_wheel():
    """Each folder of ``src/costgraph/`` with an ``__init__.py`` is in ``[tool.setuptools] packages``
    (an unlisted one is missing from the wheel: ``costgraph.drafting`` was, so ``costgraph import``
    failed from an installed wheel)."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT / "src").parts) for p in (ROOT / "src" / "costgraph").rglob("__init__.py")}
    assert found - listed == set()


def test_quickstart_install_covers_the_docs_examples():
    """The Quickstart of the README and of docs/getting-started.md install from the package index and
    from a clone alike, and the extra they name covers the docs' examples: `fit` of a Hub id
    (docs/commands/index.md) needs huggingface_hub, the extra `hub`, so `all` carries it (issue 32 item 2)."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert extras["all"] == ["costgraph[plot,graph,hub,yaml]"] and "costgraph[all]" in extras["test"]
    hub_examples = re.findall(r"^\$ costgraph fit [\w.-]+/[\w.-]+", (ROOT / "docs" / "commands" / "index.md")
                              .read_text(encoding="utf-8"), re.M)
    assert hub_examples, "docs/commands/index.md shows no fit of a Hub id"
    for page in ("README.md", "docs/getting-started.md"):
        quick = re.search(r"## Quickstart.*?```\w*\n(.*?)```", (ROOT / page).read_text(encoding="utf-8"), re.S).group(1)
        assert "pip install 'costgraph[all]'" in quick, page
        assert "pip install -e '.[" in quick, page
