"""The docs run (issue 30, item 4): every ``costgraph`` command in README.md and docs/**/*.md runs,
in this process (``costgraph.cli.main``), and prints what the page shows beside it; a page whose
numbers the program no longer prints fails here. What a page may write (``$`` lines, output,
``...``, ``$ echo $?``, ``$ cat FILE``, a skip marker) is in ``tests/docs_commands.py``."""

from __future__ import annotations

import importlib.util

import pytest

from docs_commands import (PAGES, ROOT, comment_numbers, matches, python_examples, run, run_python_examples, steps,
                           write_hub_cache)

PAGE_STEPS = {p: steps(p) for p in PAGES}
SOURCE_DATE = 1796515200   # 2026-12-06T00:00:00Z: the date the pages' calibration profiles show
HUB = importlib.util.find_spec("huggingface_hub") is not None   # the `hub` extra: Hub ids
# pages whose commands need an optional extra (`costgraph import` drafts from PyTorch: the `torch` extra)
NEEDS = {"docs/import.md": ("torch", "transformers")}
RUN = [p for p, s in PAGE_STEPS.items() if s]


def test_the_commands_are_found():
    """Every page that shows a `costgraph` command in a shell block is read, and the count does not
    fall silently (61 commands when issue 30 was filed; fewer means the extractor lost some)."""
    n = sum(len(s) for s in PAGE_STEPS.values())
    names = {p.relative_to(ROOT).as_posix() for p in RUN}
    assert {"README.md", "docs/commands/training.md", "docs/commands/outputs.md", "docs/step-time.md"} <= names
    assert n >= 60, n


def test_comment_lines_below_a_command_are_checked(tmp_path):
    """A `#` line right below a command written without `$` is its comment, as an inline one is: its
    numbers are looked for in the output (README.md's train and infer examples write theirs so); a blank
    line ends it, and a `#` line above any command is nobody's."""
    page = tmp_path / "page.md"
    page.write_text("```bash\n# 1,000 above\ncostgraph derive gpt   # 1.50 inline\n#   total 2,048 bytes\n"
                    "#   (2.05 kB)\n\n# 3,000 after a blank line\ncostgraph list\n```\n", encoding="utf-8")
    first, second = steps(page)
    assert comment_numbers(first) == ["1.50", "2,048", "2.05"] and comment_numbers(second) == []
    readme = {n for s in PAGE_STEPS[ROOT / "README.md"] for n in comment_numbers(s)}
    assert {"53,958,504,448", "671,088,640"} <= readme   # the train and infer examples' total and KV cache


@pytest.fixture()
def page_dir(tmp_path, monkeypatch):
    """A fresh folder per page: examples/ and models/ (links), an empty docs/, an offline Hub cache,
    the date of SOURCE_DATE_EPOCH (what `calibrate` writes: the page's 2026-12-06)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "models").symlink_to(ROOT / "models")
    (tmp_path / "docs").mkdir()
    cache = tmp_path / ".cache" / "huggingface" / "hub"
    write_hub_cache(cache)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(SOURCE_DATE))
    if HUB:   # huggingface_hub reads the folder from its constants, set at its import
        import huggingface_hub.constants as constants

        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("page", RUN, ids=[p.relative_to(ROOT).as_posix() for p in RUN])
def test_page_commands(page, page_dir):
    """Each command of the page, in order: the exit status the page says (0 unless `$ echo $?`
    follows) and, where output is shown, that output. Every failure of the page is listed."""
    missing = [m for m in NEEDS.get(page.relative_to(ROOT).as_posix(), ()) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (the torch tier runs it)")
    failures = []
    for step in PAGE_STEPS[page]:
        if step.kind == "other" or (step.needs_hub and not HUB):
            continue
        if step.kind == "cat":
            path = page_dir / step.argv[0]
            if path.exists():
                if not matches(step.want, path.read_text(encoding="utf-8")):
                    failures.append(f"{step.where}: {step.argv[0]} is not what the page shows")
            else:
                path.write_text(step.want + "\n", encoding="utf-8")
            continue
        status, got = run(step)
        if status != step.status:
            failures.append(f"{step.where}: `costgraph {' '.join(step.argv)}` exited {status}, the page says "
                            f"{step.status}:\n{got}")
        elif step.want is not None and not matches(step.want, got):
            failures.append(f"{step.where}: `costgraph {' '.join(step.argv)}` prints\n{got}\n--- the page shows\n"
                            f"{step.want}")
        missing = [n for n in comment_numbers(step) if n not in got]
        if missing:
            failures.append(f"{step.where}: the comment says {', '.join(missing)}, which "
                            f"`costgraph {' '.join(step.argv)}` does not print")
    assert not failures, "\n\n".join(failures)


PYTHON = [p for p in PAGES if python_examples(p)]


def test_the_python_examples_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in PYTHON}
    assert {"README.md", "docs/getting-started.md"} <= names


@pytest.mark.parametrize("page", PYTHON, ids=[p.relative_to(ROOT).as_posix() for p in PYTHON])
def test_page_python_examples(page, page_dir):
    """The page's Python examples run as doctests and print what the page shows."""
    failures = run_python_examples(page)
    assert not failures, "\n".join(failures)
