# costgraph first, before anything imports SymPy: it sizes SymPy's cache (costgraph.SYMPY_CACHE_SIZE, 100,000
# entries; SymPy's default 1,000) as a command's process does: tests/training/test_planner_fidelity.py
# 38.0 -> 24.0 s CPU, peak memory 152 -> 175 MB; a value in the environment is kept
import costgraph  # noqa: E402,F401  (isort: skip)

import contextlib
import gc
import io
import shlex
import subprocess

import pytest

from costgraph.engine.symbols import dim

# the cyclic collector less often (CPython's default 700 new objects between young collections): a derivation
# makes millions of short-lived SymPy objects, and the test process held ~7% of its CPU in collections that
# free little (tests/training/test_plan_equals_train.py 32.2 -> 30.1 s CPU, tests/export/test_schemas.py
# 30.6 -> 29.3 s at 50,000); reference counting frees the rest as before
gc.set_threshold(100_000, 50, 100)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Under ``-n N`` (the README's ``python -m pytest -q -n auto``) with no ``--dist`` given, pytest-xdist sends
    whole files to its workers (``--dist loadfile``), not single tests (its default ``load``): a file's
    module-scoped fixtures — the drafts of tests/drafting, the documents of tests/export/test_schemas.py, the plans of
    tests/training/test_plan_equals_train*.py — and the models a file shares through a process-wide cache are then
    built by one worker, not by each worker that draws one of the file's tests. A ``--dist`` given is kept; ``-n 0``
    and a run without pytest-xdist are unchanged. Runs before xdist's own hook (both tryfirst, a conftest's first)."""
    opt = config.option
    if getattr(opt, "numprocesses", None) and getattr(opt, "dist", None) == "no" and not getattr(opt, "distload", False):
        opt.dist = "loadfile"


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
    themselves run as processes in tests/commands/test_cli.py (stdout full, closed, EPIPE), tests/commands/test_cli_habits.py
    (``python -m costgraph``) and tests/commands/test_errors.py::test_cli_end_to_end (module and console script)."""
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


@pytest.fixture(scope="session")
def train_check():
    """``train_check(words)``: ``costgraph train`` on a plan's check command (``costgraph train ...``) as
    commands/train.py runs it, parsed by the real CLI parser and run through the API it calls, without
    rendering its JSON (the closed forms of a pipelined step take 10 to 100 times the derivation to print in
    field order: export.printing.field_order expands each). Returns (bytes of the most-loaded device, rounded
    up; step seconds; fits), the figures a plan row lists. tests/test_api_parity.py checks that the command's
    JSON is ``to_dict()`` of the same result."""
    import sympy

    from costgraph.cli import _parser
    from costgraph.commands._analysis import train_layout
    from costgraph.commands.common import load_any, settings
    from costgraph.training.fit import parse_size

    def run(words: str):
        args = _parser().parse_args(shlex.split(words)[1:])
        assert args.command == "train"
        dims, options = settings(args.set)
        model, values = load_any(args, dims, options)
        capacity = parse_size(args.memory) if args.memory is not None else None
        r = model.train(train_layout(args, args.micro_batches), values=values, hardware=args.hardware,
                        global_batch=args.global_batch, memory=capacity, efficiency=args.efficiency,
                        reserve=args.reserve)
        peak = int(sympy.ceiling(r.most_loaded(values).memory["total"].xreplace(values)))
        return peak, float(r.step["total"].xreplace(values)), r.fits["fits"]
    return run


def pytest_unconfigure(config):
    """SymPy's cache emptied as the session ends, before pytest's last collections (its unraisable-exception
    check runs gc.collect() five times at exit, each traversing every cached expression: ~2 s of CPU after a
    SymPy-heavy file); what the cache alone held is freed by reference counting, not traversed."""
    from sympy.core.cache import clear_cache

    clear_cache()
