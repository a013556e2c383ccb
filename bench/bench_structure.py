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

``--baseline REV`` also times the plan at an earlier commit (a git worktree
in the temp folder, run from source) in the same run and prints the ratio.
Machines differ: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

PLAN = ["plan", "llama", "--config", "llama-3-70b", "--gpus", "64", "--hardware", "h100-sxm",
        "--global-batch", "512", "--set", "s=8192"]


def _cmd(*args: str, tree: str | None = None) -> list[str]:
    if tree:
        return [sys.executable, "-c", f"import sys; sys.path.insert(0, {tree!r}); from costgraph.cli import run; "
                                      f"sys.argv[0] = 'costgraph'; run()", *args]
    # the console script of this interpreter's environment (not the first on PATH: a pyenv shim, or
    # another checkout's install, would time other code behind a shell wrapper)
    exe = os.path.join(os.path.dirname(sys.executable), "costgraph")
    return [exe, *args] if os.path.exists(exe) else [sys.executable, "-m", "costgraph.cli", *args]


def wall(cmd: list[str], runs: int, env=None) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


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
    tree = os.path.join(tempfile.gettempdir(), f"costgraph-baseline-{rev}")
    if not os.path.isdir(tree):
        subprocess.run(["git", "worktree", "add", "--detach", tree, rev], check=True, capture_output=True)
    return tree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--baseline", help="an earlier commit to time the plan against, in the same run")
    a = ap.parse_args()
    env = {**os.environ, "COSTGRAPH_NO_CACHE": "1"}
    # a user's second run: the parse cache of the bundled model files warm, in a folder of its own
    cached = {**os.environ, "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="costgraph-bench-cache-")}
    cached.pop("COSTGRAPH_NO_CACHE", None)
    subprocess.run(_cmd("derive", "gpt"), check=True, capture_output=True, env=cached)   # fills the cache
    floor = wall([sys.executable, "-c", "import sympy, lark"], a.runs)
    derive = wall(_cmd("derive", "gpt"), a.runs, cached)
    uncached = wall(_cmd("derive", "gpt"), a.runs, env)
    plan = wall(_cmd(*PLAN), a.runs, env)
    print(f"floor (import sympy, lark)   {floor:7.3f} s")
    print(f"derive gpt                   {derive:7.3f} s   {derive / floor:5.2f} x floor   (target <= 1.35; parse cache warm)")
    print(f"derive gpt, no parse cache   {uncached:7.3f} s   {uncached / floor:5.2f} x floor   (COSTGRAPH_NO_CACHE=1)")
    print(f"plan 64 x H100, Llama-3-70B  {plan:7.3f} s   {plan / floor:5.2f} x floor   (target <= 1 s, <= 4)")
    if a.baseline:
        tree = baseline_tree(a.baseline)
        before = wall(_cmd(*PLAN, tree=tree), a.runs, env)
        print(f"plan at {a.baseline:<20} {before:7.3f} s   now / then = {plan / before:5.2f}")
    compiled, bare = compile_ratio(a.runs)
    print(f"Costs.compile, 10^6 points   {compiled * 1e3:7.1f} ms  bare lambdify {bare * 1e3:.1f} ms   "
          f"{compiled / bare:5.2f} x   (target <= 1.5)")


if __name__ == "__main__":
    main()
