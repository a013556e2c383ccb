"""Helpers of ``tests/test_docs_commands.py`` and ``tests/test_docs_pages.py``: the ``costgraph``
commands of README.md and docs/**/*.md, read from the pages' code blocks with markdown-it-py, and an in-process run of each
through :func:`costgraph.cli.main`.

Not a test module (no ``test_`` prefix): pytest does not collect it.

What a page may write in a code block (fenced or indented; any info string but ``toml``,
``python``, ``json``), and what the test does with it:

``$ costgraph ARGS`` followed by lines of output
    runs ``ARGS`` and compares what it prints (stdout and stderr, in the order printed) with the
    lines shown, up to the next ``$`` line or the block's end. ``...`` stands for any text, as in
    doctest's ``ELLIPSIS`` (a line of its own: any number of lines); trailing spaces are ignored.
    The command must exit 0, unless the next line is ``$ echo $?`` followed by its status.
``$ costgraph ARGS | grep [-A N] PATTERN | head [-n N] | tail [-n N]``
    the same, the output filtered as those commands filter it (PATTERN a Python regular
    expression: the pages use the common subset).
``$ cat FILE`` followed by lines
    a file the reader writes: the test writes the lines to FILE (or, when FILE exists, compares).
``$ OTHER`` (any other program: ``node``, ``cc``, ``python``)
    not run; what the page shows after it is not compared.
``costgraph ARGS`` (no ``$``, no output shown)
    runs ``ARGS`` and requires exit status 0. A ``# comment`` after the command is not run;
    nor are ``#`` lines right below it (no blank line between): they are its comment too.
a line ``\\`` at its end
    continues on the next line.

A ``python`` block written as a doctest (``>>>`` lines and the values they print) runs as one:
the page's blocks in order, in one namespace.

A block is not run when the line just above its fence is ``<!-- docs-test: skip REASON -->``
(a synopsis such as ``costgraph fit MODEL [options]``); ``<!-- docs-test: without MODULE ... -->``
runs it as if those modules were not installed (a page showing the message of a missing extra).

A number written with digit groups or decimals (``8,030,261,248``, ``1.34``) in the ``# comment``
after a command (on its line, or on the ``#`` lines right below a command written without ``$``)
must appear in what the command prints.

Each page runs in a fresh temporary folder holding ``examples/`` and ``models/`` (links to the
repository's),
an empty ``docs/`` and a Hugging Face cache (``HF_HUB_CACHE``, offline) with
``meta-llama/Llama-3.1-8B``'s ``config.json`` (``examples/hf/llama-3.1-8b.json``), so its
commands write nowhere else and find what the pages assume; the commands of a page run in order
(a profile written by one is read by the next).
"""

from __future__ import annotations

import contextlib
import doctest
import hashlib
import importlib.util
import io
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
NOT_SHELL = {"toml", "python", "py", "json", "yaml", "csv"}
DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(skip|without)\b(.*?)-->\s*$")
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@\S+)?$")
HUB_REPO, HUB_COMMIT = "meta-llama/Llama-3.1-8B", "0e9e39f249a16976918f6564b8830bc894c89659"


@dataclass
class Step:
    """One command of a page: ``kind`` is ``costgraph``, ``cat`` or ``other`` (not run); ``argv`` its arguments (after
    ``costgraph``; for ``cat`` the file name); ``filters`` the ``| grep ...`` stages; ``want`` the
    lines shown (``None``: nothing shown, only the exit status checked); ``status`` the exit status
    the page says."""
    page: Path
    line: int
    text: str
    kind: str
    argv: list[str]
    filters: list[list[str]] = field(default_factory=list)
    want: str | None = None
    status: int = 0
    comment: str = ""   # the text after `#` on the command's line, then that of the `#` lines below it
    without: tuple[str, ...] = ()   # modules the block runs without (<!-- docs-test: without M -->)
    shown_lines: tuple[int, int] = (0, 0)   # the page's lines of the output shown: [first, end)

    @property
    def needs_hub(self) -> bool:
        """Whether the command names a Hub id (``org/name`` that is not a path): it needs the
        ``hub`` extra (huggingface_hub), and is not run without it."""
        return self.kind == "costgraph" and len(self.argv) > 1 and bool(HUB_ID.match(self.argv[1])) \
            and not (ROOT / self.argv[1]).exists()

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _subcommands() -> set[str]:
    from costgraph import commands

    return set(commands.names())


def _blocks(page: Path):
    """(first content line number, modules to run without, lines) of each code block of ``page``
    not marked skip."""
    text = page.read_text(encoding="utf-8")
    src = text.splitlines()
    for tok in MarkdownIt("commonmark").parse(text):
        if tok.type not in ("fence", "code_block") or tok.info.strip().split(" ")[0] in NOT_SHELL:
            continue
        start = tok.map[0]
        directive = DIRECTIVE.match(src[start - 1] if start > 0 else "")
        if directive and directive.group(1) == "skip":
            continue
        without = tuple(directive.group(2).split()) if directive else ()
        yield start + (2 if tok.type == "fence" else 1), without, tok.content.splitlines()


def _join(lines: list[str], i: int) -> tuple[str, int]:
    """The logical line starting at ``lines[i]`` (``\\`` continuations joined) and the next index."""
    text = lines[i]
    while text.rstrip().endswith("\\") and i + 1 < len(lines):
        i += 1
        text = text.rstrip()[:-1] + " " + lines[i].strip()
    return text, i + 1


def _split(page: Path, line: int, text: str, subcommands: set[str]) -> Step | None:
    """The step of one command line, or None when the line is not a costgraph command."""
    tokens = shlex.split(text, comments=True)
    if not tokens:
        return None
    stages, cur = [], []
    for t in tokens:
        if t == "|":
            stages.append(cur)
            cur = []
        else:
            cur.append(t)
    stages.append(cur)
    head = stages[0]
    if not head:
        return None
    if head[0] == "cat" and len(head) == 2 and len(stages) == 1:
        return Step(page, line, text, "cat", head[1:])
    if head[0] != "costgraph" or len(head) < 2 or not (head[1] in subcommands or head[1].startswith("-")):
        return None
    for stage in stages[1:]:
        if not stage or stage[0] not in ("grep", "head", "tail"):
            raise ValueError(f"{page.relative_to(ROOT)}:{line}: the test runs no {' '.join(stage)!r} "
                             "(only grep, head and tail after a pipe)")
    comment = text.split(" #", 1)[1] if " #" in text else ""
    return Step(page, line, text, "costgraph", head[1:], stages[1:], comment=comment)


#: the steps of each page read in this process, by its path and text: test_docs_pages.py, test_docs_commands.py and
#: test_docs_import.py each read every page at collection, and pytest-xdist's workers each collect every file
_STEPS: dict = {}


def steps(page: Path) -> list[Step]:
    """The commands of ``page`` in order, with the output and exit status each shows (read once a process for
    a page's text: :data:`_STEPS`; a new list of the same steps each call)."""
    key = (page, page.read_text(encoding="utf-8"))
    if key not in _STEPS:
        _STEPS[key] = _read_steps(page)
    return list(_STEPS[key])


def _read_steps(page: Path) -> list[Step]:
    """:func:`steps` without the pages kept."""
    subcommands = _subcommands()
    out: list[Step] = []
    for first, without, lines in _blocks(page):
        base = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
        lines = [x[base:] for x in lines]
        i = 0
        prev: Step | None = None
        below: Step | None = None   # the command (no `$`) whose `#` comment lines may follow
        while i < len(lines):
            line_no = first + i
            if lines[i].startswith("$ "):
                below = None
                text, i = _join(lines, i)
                shown_from, shown = first + i, []
                while i < len(lines) and not lines[i].startswith("$ "):
                    shown.append(lines[i])
                    i += 1
                while shown and not shown[-1].strip():
                    shown.pop()
                body = text[2:].strip()
                if body == "echo $?":
                    if prev is None or len(shown) != 1 or not shown[0].strip().isdigit():
                        raise ValueError(f"{page.relative_to(ROOT)}:{line_no}: `echo $?` must follow a "
                                         "command and show one status")
                    prev.status = int(shown[0])
                    continue
                step = _split(page, line_no, body, subcommands) or Step(page, line_no, body, "other", [])
                step.without = without
                step.want = "\n".join(shown)
                step.shown_lines = (shown_from, shown_from + len(shown))
                out.append(step)
                prev = step
            else:
                text, nxt = _join(lines, i)
                if text.lstrip().startswith("#") and below is not None:   # a comment line under the command
                    below.comment += ("\n" if below.comment else "") + text.lstrip()[1:]
                    i = nxt
                    continue
                below = None
                step = _split(page, line_no, text.strip(), subcommands)
                if step is not None and step.kind == "costgraph":
                    step.without = without
                    out.append(step)
                    prev = below = step
                i = nxt
    return out


def python_examples(page: Path) -> list[tuple[int, str]]:
    """The ``python`` blocks of ``page`` written as doctests (``>>>``), with their first line."""
    return [(tok.map[0] + 2, tok.content) for tok in MarkdownIt("commonmark").parse(page.read_text(encoding="utf-8"))
            if tok.type == "fence" and tok.info.strip().split(" ")[0] in ("python", "py", "pycon")
            and ">>>" in tok.content]


def run_python_examples(page: Path) -> list[str]:
    """Run the doctest blocks of ``page`` in order, in one namespace (a later block uses what an
    earlier one defined, as a reader's session does), ``ELLIPSIS`` and ``NORMALIZE_WHITESPACE``
    on: the report of each failed example."""
    globs: dict = {"__name__": "__docs__"}
    failures = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for line, text in python_examples(page):
        name = f"{page.relative_to(ROOT)}:{line}"
        test = doctest.DocTestParser().get_doctest(text, globs, name, str(page), line - 1)
        out = io.StringIO()
        runner.run(test, out=out.write, clear_globs=False)
        globs = test.globs   # DocTest copies the namespace it is given
        if runner.failures:
            failures.append(out.getvalue())
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    return failures


# --- running -------------------------------------------------------------------------------

def _grep(lines: list[str], args: list[str]) -> list[str]:
    after, pattern, rest = 0, None, list(args)
    while rest:
        a = rest.pop(0)
        if a == "-A":
            after = int(rest.pop(0))
        elif a.startswith("-A"):
            after = int(a[2:])
        elif a == "-E":
            continue
        else:
            pattern = re.compile(a)
    keep, out = -1, []
    for n, line in enumerate(lines):
        if pattern.search(line):
            if out and after and n > keep + 1:
                out.append("--")
            keep = n + after
        if n <= keep:
            out.append(line)
    return out


def _head_tail(lines: list[str], args: list[str], tail: bool) -> list[str]:
    n = 10
    if args and args[0] == "-n":
        n = int(args[1])
    elif args and args[0].startswith("-"):
        n = int(args[0][1:].lstrip("n"))
    return lines[-n:] if tail else lines[:n]


def filtered(text: str, filters: list[list[str]]) -> str:
    lines = text.splitlines()
    for stage in filters:
        if stage[0] == "grep":
            lines = _grep(lines, stage[1:])
        else:
            lines = _head_tail(lines, stage[1:], stage[0] == "tail")
    return "\n".join(lines)


def _files(folder: Path) -> dict[str, bytes]:
    """The regular files under ``folder`` (links to folders not followed: examples/, models/) and their bytes."""
    out = {}
    for top, _, names in os.walk(folder):
        for name in names:
            path = Path(top) / name
            if path.is_file():
                out[path.relative_to(folder).as_posix()] = path.read_bytes()
    return out


#: the commands this process ran, by what decides a run: the arguments, the modules hidden and the files of the
#: page's folder before it (the folder's name aside: a run that printed it is not kept) -> (exit status, what it
#: printed, the files it wrote). A command two pages show runs once: README.md's and docs/commands/index.md's
#: ``web llama --config llama-3-8b -o calc.html`` (a calculator page, ~8 s of CPU), README.md's and docs/index.md's
#: ``derive gpt --scope layer``; the second page's run writes the files the first one wrote and prints what it printed
_RUNS: dict = {}


def run(step: Step) -> tuple[int, str]:
    """Run one costgraph step in this process (the working directory is the page's folder):
    its exit status and what it printed (stdout and stderr in order, filtered). The same command on the same
    files, run before by another page of this process, is answered from that run (:data:`_RUNS`)."""
    folder = Path.cwd()
    before = _files(folder)
    key = (tuple(step.argv), step.without, tuple(sorted(before.items())))
    if key in _RUNS:
        status, text, wrote = _RUNS[key]
        for rel, data in wrote.items():
            (folder / rel).write_bytes(data)
        return status, filtered(text, step.filters)
    status, text = _run(step)
    after = _files(folder)
    if str(folder) not in text and str(folder.resolve()) not in text:
        _RUNS[key] = (status, text, {rel: data for rel, data in after.items() if before.get(rel) != data})
    return status, filtered(text, step.filters)


def _run(step: Step) -> tuple[int, str]:
    """:func:`run` without the runs kept: the exit status and the unfiltered output."""
    from costgraph import cli

    buf = io.StringIO()
    hidden = {m: sys.modules.get(m) for m in step.without}
    try:
        sys.modules.update(dict.fromkeys(step.without))   # None: `import m` raises ImportError
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            status = cli.main(list(step.argv))
    finally:
        for m, mod in hidden.items():
            if mod is None:
                sys.modules.pop(m, None)
            else:
                sys.modules[m] = mod
    return status, buf.getvalue()


NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+\.\d+)(?![\w,]|\.\d)")


def comment_numbers(step: Step) -> list[str]:
    """The numbers of the command's ``# comment`` that the test looks for in its output."""
    return NUMBER.findall(step.comment)


def matches(want: str, got: str) -> bool:
    """``got`` is what ``want`` shows: lines compared without trailing spaces, ``...`` any text."""
    def norm(s):
        return "\n".join(line.rstrip() for line in s.strip("\n").splitlines()) + "\n"
    return doctest.OutputChecker().check_output(norm(want), norm(got), doctest.ELLIPSIS)


def write_hub_cache(folder: Path) -> None:
    """A Hugging Face cache as huggingface_hub writes it (blobs, refs/main, a snapshot whose
    config.json links into blobs), holding meta-llama/Llama-3.1-8B's config.json."""
    data = (ROOT / "examples" / "hf" / "llama-3.1-8b.json").read_bytes()
    repo = folder / ("models--" + HUB_REPO.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(HUB_COMMIT)
    blob = hashlib.sha256(data).hexdigest()
    (repo / "blobs" / blob).write_bytes(data)
    snap = repo / "snapshots" / HUB_COMMIT
    snap.mkdir(parents=True)
    os.symlink(os.path.join("..", "..", "blobs", blob), snap / "config.json")


SOURCE_DATE = 1796515200   # 2026-12-06T00:00:00Z: the date the pages' calibration profiles show
HUB = importlib.util.find_spec("huggingface_hub") is not None   # the `hub` extra: Hub ids
# pages whose commands need an optional extra (`costgraph import` drafts from PyTorch: the `torch` extra)
NEEDS = {"docs/import.md": ("torch", "transformers")}


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


def check_page_commands(page: Path, page_dir: Path) -> None:
    """Each command of the page, in order: the exit status the page says (0 unless `$ echo $?`
    follows) and, where output is shown, that output. Every failure of the page is listed
    (tests/test_docs_commands.py and tests/test_docs_pages.py)."""
    missing = [m for m in NEEDS.get(page.relative_to(ROOT).as_posix(), ()) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (the torch tier runs it)")
    failures = []
    for step in steps(page):
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


def page_group(page: Path) -> str:
    """Which test file runs a page's commands: ``reference`` (docs/commands/*.md but its overview:
    tests/test_docs_commands.py), ``import`` (docs/import.md, the `torch` extra: tests/test_docs_import.py)
    or ``guide`` (README.md, docs/*.md and docs/commands/index.md: tests/test_docs_pages.py). One group
    per page, so every page is run by exactly one file."""
    if page == ROOT / "docs" / "import.md":
        return "import"
    if page.parent == ROOT / "docs" / "commands" and page.name != "index.md":
        return "reference"
    return "guide"
