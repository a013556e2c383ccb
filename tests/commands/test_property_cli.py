"""Property tests over every subcommand's flags (issue 18, "Kept fixed").

The subcommands and their flags are read from the real argparse parser
(:func:`costgraph.cli._parser`), so a new flag is drawn without touching this
file. Hypothesis builds argument lists: bundled model names, ``config.json``
files and generated (mutated) model files and configs as the model; named
configurations, dimensions, presets and choices drawn from the bundled files;
plausible numbers; hostile values (huge, negative, ``1/3``, ``1e400``, ``NaN``,
empty, Unicode, ``/dev/zero``, ``/proc/self/environ``, missing files); any
subset of the flags in any order. Each list runs ``costgraph.cli.main`` in this
process (stdout and stderr captured; the working directory and
``XDG_CACHE_HOME`` a temporary folder, so ``-o`` writes nowhere else) and must

* exit 0 or 2 (``verify`` also 1: "not exact", as documented), with a message
  on stderr for 2, never a traceback, "internal error" or "this is a bug";
* finish within ``COSTGRAPH_FUZZ_CLI_LIMIT`` seconds of CPU time (default 20; a
  SIGPROF timer, with a wall-clock backstop ten times longer) and keep the
  process's peak resident memory under ``COSTGRAPH_FUZZ_MEMORY`` bytes (default
  4 GiB; ``test_memory_bound_in_a_subprocess`` runs cases under RLIMIT_AS);
* print nothing of the environment (a marker variable is set and looked for);
* on success, print or write output that parses: JSON strictly (no NaN or
  Infinity), valid against the command's own schema, every number finite,
  non-negative (but fields named in ``cli_props.SIGNED``, with the reason) and
  whole where it is a count; generated Python compiles and runs, C passes
  ``cc -fsyntax-only -Werror`` and JavaScript ``node --check`` (where those
  exist); HTML parses; GraphML and SVG are XML; CSV cells are finite and
  non-negative; every report and plot is non-empty.

Three files, one harness (``tests/property_run.py``: the settings, :func:`run_case`, the checks): this one
(every subcommand's flags but ``web``'s, the memory bound, the checks of the checks; 18 s of CPU),
``test_property_web.py`` (``web``'s flags: a page derives train and infer for every preset; 17 s) and
``test_property_inputs.py`` (generated model files and configs as the MODEL; 50 s, 47 of them one drawn
``plan --exhaustive`` over 64 GPUs). A derandomized draw depends on the test function's source only
(Hypothesis' function digest), so the split draws the lists one file drew.
Profiles, chosen by ``COSTGRAPH_FUZZ`` (the variable of tests/commands/test_fuzz.py):

``fast`` (default, part of the suite)
    derandomized: 6 argument lists per subcommand (2 to 4 for the slow ``plan``,
    ``verify``, ``graph``, ``optimal``, ``fit``, ``web``), 5 generated model files, 4 configs, 2
    subprocess runs; about 90 s of CPU time in all (2026-12-07, the three files alone: 18 + 17 + 50 s);
``long`` (by hand)
    ``COSTGRAPH_FUZZ=long nice python -m pytest tests/commands/test_property_*.py -q
    --hypothesis-show-statistics``: ``COSTGRAPH_FUZZ_EXAMPLES`` (default 300)
    lists per subcommand plus as many model files and configs, from a random
    seed (``COSTGRAPH_FUZZ_SEED=N`` repeats a run); ``COSTGRAPH_FUZZ_LOG=FILE``
    appends one JSON line per case (argv, status, CPU seconds) for the counts.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cli_props as P
from property_run import (COMMANDS, LONG, MODEL_COMMANDS, SPEC, _seeded, _settings, base, check,  # noqa: F401
                          flags_property, run_case)

#: subcommands whose flags are drawn in a file of their own (tests/commands/test_property_web.py)
ELSEWHERE = ("web",)

# --- the tests ----------------------------------------------------------------------

def test_every_subcommand_and_flag_is_drawn():
    """The spec is the parser's: every command module is there, and every option has a
    value strategy (a flag the tables do not name falls back to numbers and hostile text)."""
    from costgraph import commands

    assert COMMANDS == commands.names()
    assert set(MODEL_COMMANDS) >= {"derive", "train", "plan", "infer", "report", "codegen", "sweep"}
    flags = [a for args in SPEC.values() for a in args if a.flag]
    assert len(flags) > 200
    for a in flags:
        assert P.value(a, "gpt") is not None
    for command in ELSEWHERE:   # drawn there, not here
        assert (Path(__file__).parent / f"test_property_{command}.py").is_file()


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in ELSEWHERE])
def test_flags(base, command):
    flags_property(base, command)


def _limited():
    cap = P.MEMORY
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    resource.setrlimit(resource.RLIMIT_CPU, (int(P.LIMIT) + 5, int(P.LIMIT) + 5))


@_seeded
@_settings(fast=2, long=max(LONG // 10, 10))
@given(data=st.data())
def test_memory_bound_in_a_subprocess(base, data):
    """Argument lists run as ``python -m costgraph.cli`` under RLIMIT_AS (the memory bound
    enforced by the kernel) and RLIMIT_CPU: a MemoryError or a kill fails the case.
    ``verify`` and ``import`` are left to the in-process test: importing torch reserves more
    address space than the bound."""
    command = data.draw(st.sampled_from([c for c in COMMANDS if c not in ("verify", "import")]), label="command")
    argv = data.draw(P.argv_for(command, SPEC[command]), label="argv")
    work = Path(tempfile.mkdtemp(dir=base))
    env = {**os.environ, "PYTHONPATH": str(P.ROOT)}
    try:
        r = subprocess.run([sys.executable, "-m", "costgraph.cli", *argv], cwd=work, env=env, capture_output=True,
                           text=True, preexec_fn=_limited, timeout=10 * P.LIMIT + 30)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    where = "costgraph " + " ".join(map(repr, argv))
    assert r.returncode in (0, 2), f"{where}: exit {r.returncode}\n{r.stderr[-3000:]}"
    for bad in ("Traceback", "this is a bug", "MemoryError", P.SECRET):
        assert bad not in r.stdout + r.stderr, f"{where}: {bad!r}\n{r.stderr[-3000:]}"


def test_the_checks_fail_on_what_they_name(tmp_path):
    """Each check catches its failure (a check that cannot fail would be a defect)."""
    def fails(r):
        with pytest.raises((AssertionError, ValueError, SyntaxError, ET.ParseError)):
            check(r, tmp_path)

    fails(P.Result(["derive", "gpt"], 3, "", "costgraph: internal error: KeyError"))
    fails(P.Result(["derive", "gpt"], 1, "x", ""))
    fails(P.Result(["derive", "gpt"], 2, "", ""))                        # exit 2 without a message
    fails(P.Result(["derive", "gpt"], 0, "Traceback (most recent call last):", ""))
    fails(P.Result(["derive", "gpt"], 0, P.SECRET, ""))
    fails(P.Result(["hardware", "--format", "json"], 0, '{"a": NaN}', ""))
    fails(P.Result(["hardware", "--format", "json"], 0, '{"a": -1}', ""))
    fails(P.Result(["hardware", "--format", "json"], 0, '{"params": 2.5}', ""))
    fails(P.Result(["hardware", "--format", "json"], 0, '{"presets": 1}', ""))   # not valid against its schema
    fails(P.Result(["codegen", "gpt", "--lang", "python"], 0, "def f(:\n", ""))
    fails(P.Result(["graph", "gpt", "--format", "graphml"], 0, "<graphml>", ""))
    fails(P.Result(["sweep", "gpt"], 0, "s,params\n1,-5\n", ""))
    P.check_numbers({"derivative": -3, "params": 7, "chinchilla_6ND": {"params": 2.5}}, "ok")
    if shutil.which("cc"):
        with pytest.raises(AssertionError):
            P.check_code("c", "int f(void) { return 1 }\n", "c")
    if shutil.which("node"):
        with pytest.raises(AssertionError):
            P.check_code("javascript", "function (\n", "js")


@pytest.mark.parametrize("extra, missing", [([], "no value for l"), (["--set", "l=2"], "no value for d, kv")])
def test_found_infer_kv_memory_without_sizes_says_which_are_missing(base, extra, missing):
    """Found by this file's long tier: vLLM's KV capacity (--kv-memory) on a model without
    --config ended in SymPy's TypeError (exit 3); it names the missing sizes (exit 2)."""
    r = run_case(base, ["infer", "gemma", "--prompt", "1e9", "--generate", "1e9", "--gpu-memory-utilization", "1",
                        "--kv-memory", "16MiB", *extra])
    assert r.status == 2 and r.err.startswith(f"error: {missing}\n"), r.err


def test_time_limit_names_the_limit_that_applied(monkeypatch):
    """The harness's timer (cli_props.time_limit): the message names the CPU limit of the call that
    ran over (not the global LIMIT), and each call's wall-clock backstop is ten times its own limit
    (a later call with a larger limit does not keep the first call's backstop)."""
    import signal
    monkeypatch.setattr(P, "WALL", None)
    with pytest.raises(P.CaseTooSlow, match=r"more than 0\.05 s of CPU time"):
        with P.time_limit(0.05):
            assert 0.4 < signal.getitimer(signal.ITIMER_REAL)[0] <= 0.5
            while True:
                pass
    with P.time_limit(3.0):
        assert 29 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30
    monkeypatch.setattr(P, "WALL", 0.05)
    with pytest.raises(P.CaseTooSlow, match=r"wall-clock backstop \(0\.05 s;"):
        with P.time_limit(3.0):
            time.sleep(1)
    assert signal.getitimer(signal.ITIMER_REAL)[0] == signal.getitimer(signal.ITIMER_PROF)[0] == 0
