"""The docs run for docs/import.md: its ``costgraph import`` and ``derive config.json`` commands draft
models from PyTorch (the `torch` extra: skipped without torch and transformers, as the torch tier is)
and print what the page shows (tests/docs_commands.py runs a page; the other pages are run by
tests/test_docs_commands.py and tests/test_docs_pages.py)."""

from __future__ import annotations

from docs_commands import ROOT, check_page_commands, page_dir, page_group, steps  # noqa: F401  (page_dir: the fixture)

PAGE = ROOT / "docs" / "import.md"


def test_page_commands(page_dir):
    """Each command of the import page, in order, prints what the page shows."""
    assert steps(PAGE) and page_group(PAGE) == "import", "docs/import.md shows costgraph commands"
    check_page_commands(PAGE, page_dir)
