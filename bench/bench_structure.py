"""Benchmark of issue 15's speed targets, as ratios taken within one run (medians).

Run:  python bench/bench_structure.py [--runs N] [--baseline REV]

Method (each figure the median of N runs, every process started fresh):

* **floor**: ``python -c "import sympy, lark"`` — what any command that derives
  formulas must pay before it starts;
* ``costgraph derive gpt`` (text): target ≤ 1.35 × the floor, as a user's second run makes it (the parse
  cache of the bundled model files warm: :mod:`costgraph.language.parse_cache`; in a cache folder of the
  benchmark's own), and without the cache (``COSTGRAPH_NO_CACHE=1``), for comparison. Python's bytecode
  cache matters as much: with ``PYTHONDONTWRITEBYTECODE`` set and no ``__pycache__`` every costgraph
  module is compiled from source at each start (half a second), which no installed wheel does;
* ``costgraph plan llama --config llama-3-70b --gpus 64 --hardware h100-sxm
  --global-batch 512 --set s=8192``: target ≤ 1 s wall and ≤ 4 × the floor;
* in process, ``Costs.compile("llama-2-70b")`` evaluated on a 1000 × 1000
  (b, s) grid in float64, against a bare ``sympy.lambdify`` of the same
  quantities with the configuration's sizes substituted (the floor of any
  compiled evaluator): target ≤ 1.5 ×.

``--baseline REV`` also times derive and the plan at an earlier commit (its files, ``git archive``d into the temp
folder and run from source: the ``src/`` layout's ``models/`` and ``grammars/`` linked into the package, no git
worktree added) in the same rounds and prints the ratios of both.

The commands are interleaved (each round runs every command once), and each figure is given twice: wall time
and CPU time (user + system of the process, from ``getrusage``): on a loaded machine the wall time measures the
queue as much as the program, the CPU time far less. Whether Python's bytecode is written
(``PYTHONDONTWRITEBYTECODE``) is printed: without it every costgraph module is compiled at each start, and the
ratios of derive rise by about 0.15. Machines differ: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

PLAN = ["plan", "llama", "--config", "llama-3-70b", "--gpus", "64", "--hardware", "h100-sxm",
        "--global-batch", "512", "--set", "s=8192"]


def _cmd(*args: str, tree: str | None = None) -> list[str]:
    if tree:
        src = os.path.join(tree, "src")
        return [sys.executable, "-c", f"import sys; sys.path.insert(0, {src!r}); from costgraph.cli import run; "
                                      f"sys.argv[0] = 'costgraph'; run()", *args]
    # the console script of this interpreter's environment (not the first on PATH: a pyenv shim, or
    # another checkout's install, would time other code behind a shell wrapper)
    exe = os.path.join(os.path.dirname(sys.executable), "costgraph")
    return [exe, *args] if os.path.exists(exe) else [sys.executable, "-m", "costgraph.cli", *args]


def timed(cmd: list[str], env=None) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one run of ``cmd``."""
    r0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    r1, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter() - t0
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def rounds(commands: dict, runs: int) -> dict:
    """``name → (cmd, env)`` run ``runs`` times, interleaved (each round runs every command once): ``name →
    (median wall, median CPU)``."""
    got = {name: [] for name in commands}
    for _ in range(runs):
        for name, (cmd, env) in commands.items():
            got[name].append(timed(cmd, env))
    return {name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for name, t in got.items()}


def median_call(f, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def compile_ratio(runs: int) -> tuple[float, float]:
    import numpy as np
    import sympy

    import costgraph

    m = costgraph.load("llama")
    costs = m.costs("model")
    values = m.values("llama-2-70b")
    b = np.arange(1, 1001, dtype=np.float64)[:, None]
    s = (np.arange(1, 1001, dtype=np.float64) * 8)[None, :]
    compiled = costs.compile("llama-2-70b", dtype="float64")
    fixed = {k: v for k, v in values.items() if str(k) not in ("b", "s")}
    exprs = [e.xreplace(fixed) for e in costs.quantities.values()]
    syms = sorted(set().union(*(e.free_symbols for e in exprs)), key=str)
    bare = sympy.lambdify(syms, exprs, modules="numpy", cse=True)
    args = {"b": b, "s": s}
    return (median_call(lambda: compiled(b=b, s=s), runs),
            median_call(lambda: bare(*[args[str(x)] for x in syms]), runs))


def baseline_tree(rev: str) -> str:
    """The files of commit ``rev`` in the temp folder (``git archive``), the package runnable from ``src/``."""
    tree = os.path.join(tempfile.gettempdir(), f"costgraph-baseline-{rev}")
    if not os.path.isdir(tree):
        os.makedirs(tree)
        archive = subprocess.run(["git", "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        for data in ("models", "grammars"):   # pyproject's package-dir maps them into the package
            link = os.path.join(tree, "src", "costgraph", data)
            if os.path.isdir(os.path.join(tree, data)) and not os.path.exists(link):
                os.symlink(os.path.join(tree, data), link)
    return tree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", help="an earlier commit to time derive and the plan against, in the same rounds")
    a = ap.parse_args()
    env = {**os.environ, "COSTGRAPH_NO_CACHE": "1"}
    # a user's second run: the parse cache of the bundled model files warm, in a folder of its own
    cached = {**os.environ, "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="costgraph-bench-cache-")}
    cached.pop("COSTGRAPH_NO_CACHE", None)
    trees = {"": None, **({f" at {a.baseline}": baseline_tree(a.baseline)} if a.baseline else {})}
    commands = {"floor": ([sys.executable, "-c", "import sympy, lark"], None)}
    for label, tree in trees.items():
        # fills the cache
        subprocess.run(_cmd("derive", "gpt", tree=tree), check=True, capture_output=True, env=cached)
        commands.update({f"derive gpt{label}": (_cmd("derive", "gpt", tree=tree), cached),
                         f"derive gpt, no parse cache{label}": (_cmd("derive", "gpt", tree=tree), env),
                         f"plan 64 x H100, Llama-3-70B{label}": (_cmd(*PLAN, tree=tree), env)})
    got = rounds(commands, a.runs)
    (fw, fc), written = got.pop("floor"), not os.environ.get("PYTHONDONTWRITEBYTECODE")
    print("bytecode " + ("written (read from __pycache__ after the first start)" if written
                         else "not written: PYTHONDONTWRITEBYTECODE is set (each start compiles costgraph)"))
    print(f"{'median of ' + str(a.runs):40s} {'wall':>7s} {'ratio':>6s}   {'CPU':>7s} {'ratio':>6s}")
    print(f"{'floor (import sympy, lark)':40s} {fw:7.3f} s        {fc:7.3f} s")
    targets = {"derive gpt": "target <= 1.35; parse cache warm", "derive gpt, no parse cache": "COSTGRAPH_NO_CACHE=1",
               "plan 64 x H100, Llama-3-70B": "target <= 1 s, <= 4"}
    for name, (w, c) in got.items():
        note = targets.get(name, "")
        print(f"{name:40s} {w:7.3f} s {w / fw:5.2f}x   {c:7.3f} s {c / fc:5.2f}x" + (f"   ({note})" if note else ""))
    compiled, bare = compile_ratio(a.runs)
    print(f"Costs.compile, 10^6 points   {compiled * 1e3:7.1f} ms  bare lambdify {bare * 1e3:.1f} ms   "
          f"{compiled / bare:5.2f} x   (target <= 1.5)")


if __name__ == "__main__":
    main()
