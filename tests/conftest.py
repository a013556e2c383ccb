import contextlib
import io
import subprocess

import pytest

import costgraph
from costgraph.engine.symbols import dim


@pytest.fixture(scope="session")
def gpt():
    return costgraph.load("gpt")


@pytest.fixture(scope="session")
def S():
    """The dimension symbols of the field, from the one symbol table."""
    class _S:
        pass
    s = _S()
    for name in ("b", "s", "h", "a", "l", "V", "s_max"):
        setattr(s, name, dim(name))
    return s


@pytest.fixture
def cg():
    """``costgraph ARGV`` run in this process: ``cg(*argv)`` returns ``costgraph.cli.main``'s exit status,
    stdout and stderr as a ``subprocess.CompletedProcess`` (returncode, stdout, stderr), the checks of a
    ``python -m costgraph.cli`` run without the interpreter start, about 2 s of CPU a run. The entry points
    themselves run as processes in tests/test_cli.py (stdout full, closed, EPIPE), tests/test_cli_habits.py
    (``python -m costgraph``) and tests/test_errors.py::test_cli_end_to_end (module and console script)."""
    from costgraph.cli import main

    def run(*argv: str) -> subprocess.CompletedProcess:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(argv))
            except SystemExit as e:          # what the process would exit with
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return subprocess.CompletedProcess(["costgraph", *argv], code, out.getvalue(), err.getvalue())
    return run
