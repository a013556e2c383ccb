"""The docs run for the README, the guides (docs/*.md: getting started, the language, the step-time
model, ...) and the commands' overview (docs/commands/index.md): every ``costgraph`` command of the page
runs in this process and prints what the page shows, and the page's Python examples run as doctests. The
command reference (the other docs/commands/*.md) and the extractor's own checks are in
tests/test_docs_commands.py, the import page (the `torch` extra) in tests/test_docs_import.py; how a page
is run, in tests/docs_commands.py."""

from __future__ import annotations

import pytest

from docs_commands import (PAGES, ROOT, check_page_commands, page_dir, page_group,  # noqa: F401  (page_dir: the fixture)
                           python_examples, run_python_examples, steps)

GUIDES = [p for p in PAGES if page_group(p) == "guide" and steps(p)]
PYTHON = [p for p in PAGES if python_examples(p)]


def test_the_guides_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in GUIDES}
    assert {"README.md", "docs/step-time.md", "docs/getting-started.md"} <= names


@pytest.mark.parametrize("page", GUIDES, ids=[p.relative_to(ROOT).as_posix() for p in GUIDES])
def test_page_commands(page, page_dir):
    """Each command of the README, a guide or the overview, in order, prints what the page shows."""
    check_page_commands(page, page_dir)


def test_the_python_examples_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in PYTHON}
    assert {"README.md", "docs/getting-started.md"} <= names


@pytest.mark.parametrize("page", PYTHON, ids=[p.relative_to(ROOT).as_posix() for p in PYTHON])
def test_page_python_examples(page, page_dir):
    """The page's Python examples run as doctests and print what the page shows."""
    failures = run_python_examples(page)
    assert not failures, "\n".join(failures)
