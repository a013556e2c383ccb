"""The docs run (issue 30, item 4): every ``costgraph`` command in README.md and docs/**/*.md runs,
in this process (``costgraph.cli.main``), and prints what the page shows beside it; a page whose
numbers the program no longer prints fails here. What a page may write (``$`` lines, output,
``...``, ``$ echo $?``, ``$ cat FILE``, a skip marker) and how a page is run are in
``tests/docs_commands.py``. This file: the extractor's checks and the command reference
(docs/commands/*.md, but its overview index.md); the README, the guides and the overview are run by
tests/test_docs_pages.py."""

from __future__ import annotations

import pytest

from docs_commands import (PAGES, ROOT, check_page_commands, comment_numbers, page_dir,  # noqa: F401  (page_dir: the fixture)
                           page_group, steps)

PAGE_STEPS = {p: steps(p) for p in PAGES}
RUN = [p for p, s in PAGE_STEPS.items() if s]
REFERENCE = [p for p in RUN if page_group(p) == "reference"]


def test_the_commands_are_found():
    """Every page that shows a `costgraph` command in a shell block is read, and the count does not
    fall silently (61 commands when issue 30 was filed; fewer means the extractor lost some)."""
    n = sum(len(s) for s in PAGE_STEPS.values())
    names = {p.relative_to(ROOT).as_posix() for p in RUN}
    assert {"README.md", "docs/commands/training.md", "docs/commands/outputs.md", "docs/step-time.md"} <= names
    assert n >= 60, n
    groups = {page_group(p) for p in RUN}   # the three files that run them: reference, guide, import
    assert groups == {"reference", "guide", "import"} and ROOT / "docs" / "commands" / "training.md" in REFERENCE


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


@pytest.mark.parametrize("page", REFERENCE, ids=[p.relative_to(ROOT).as_posix() for p in REFERENCE])
def test_page_commands(page, page_dir):
    """Each command of a command reference page, in order, prints what the page shows."""
    check_page_commands(page, page_dir)
