"""Benchmark of issue 6's speed targets, in one run (medians; ratios taken in the same run).

Run:  python bench/bench_speed.py [--runs N]

Prints:
* wall time of fresh processes: `costgraph --help`, `--version`, `list`, `ops`
  (these must not import SymPy), and cold `costgraph derive gpt` / `deepseek_v3`;
* `Costs.evaluate` points per second on Llama-2-70B (model scope, every
  quantity, exact), beside SymPy `xreplace` of the same quantities (the ratio);
* `Costs.compile()` points per second over a 1000 × 1000 (b, s) grid in
  float64, and int64 / exact on smaller grids;
* a synthetic model of 64 distinct repeat groups (~1,500 operator nodes):
  load + build + costs in process, and as a fresh `costgraph derive` process.

Targets (issue 6): CLI without SymPy ≤ 0.1 s; cold derive gpt ≤ 0.45 s,
deepseek_v3 ≤ 0.6 s; evaluate ≥ 10⁴ points/s; compiled float64 ≥ 10⁷
points/s; the synthetic model ≤ 1 s. Machines differ: read the ratios.

``--baseline REV`` also times an earlier commit in the same run (a git
worktree in the temp folder, run from source), and prints the ratios:
``python bench/bench_speed.py --baseline 5351777``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def _cmd(*args: str) -> list[str]:
    exe = shutil.which("costgraph")
    return [exe, *args] if exe else [sys.executable, "-m", "costgraph.cli", *args]


def wall(cmd: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def synthetic_model(groups: int = 64) -> str:
    """A model of ``groups`` distinct repeat groups, each with its own count
    and a pre-norm attention + GELU MLP body (~23 nodes each)."""
    lines = ['import "std/attention.cg"', 'import "std/mlp.cg"', "", "model synthetic {",
             "  dim b", "  dim s", "  dim h", "  dim a", "  dim V"]
    lines += [f'  dim l{i} "layers of stack {i}"' for i in range(groups)]
    lines += ["  input tokens[b, s]: index", "  x = embedding(tokens, V, h, name = wte)"]
    for i in range(groups):
        lines += [f"  repeat l{i} as stack{i} {{",
                  "    x = x + attention(layernorm(x, name = ln_1), a, name = attn)",
                  "    x = x + mlp(layernorm(x, name = ln_2), 4 * h, name = mlp)",
                  "  }"]
    lines += ["  return linear(layernorm(x, name = ln_f), V, name = lm_head)", "}"]
    return "\n".join(lines) + "\n"


def plan_rates(costgraph, np, runs: int) -> None:
    """The planner: `costgraph plan` wall time in process (derive + compile + evaluate), and the rate of
    evaluating one compiled (memory, step time) pair over 10⁶ random layouts."""
    from costgraph.hardware import preset
    from costgraph.training.memory import Layout, training_memory
    from costgraph.training.plan import C, D, EP, M, P, T, plan
    from costgraph.training.steptime import step_time
    from costgraph.numbers.evaluator import vectorized

    m = costgraph.load("llama")
    values = m.values("llama-3-70b")
    hw = preset("h100-sxm")
    times = []
    for _ in range(max(3, runs // 3)):
        t0 = time.perf_counter()
        result = plan(m, values, gpus=64, hardware=hw, global_batch=512)
        times.append(time.perf_counter() - t0)
    print(f"\nplanner, Llama-3-70B on 64 H100, global batch 512: {result.considered:,} layouts in "
          f"{statistics.median(times):.2f} s (derive, compile and evaluate; median)")
    b = m.graph.dims["b"].symbol
    fixed = {k: v for k, v in values.items() if k != b}
    layout = Layout(t=T, p=P, c=C, e=EP, d=D, m=M, zero=1, recompute="selective", sp=True)
    mem = training_memory(m.graph, layout).stages[0].memory["total"].xreplace(fixed)
    step = step_time(m.graph, layout, hw)["total"].xreplace(fixed)
    f = vectorized([mem, step], [T, P, C, EP, D, M, b])
    rng = np.random.default_rng(0)
    n = 10**6
    grid = [2.0 ** rng.integers(0, 4, n), 2.0 ** rng.integers(1, 4, n), 2.0 ** rng.integers(0, 3, n), np.ones(n),
            2.0 ** rng.integers(0, 4, n), 2.0 ** rng.integers(2, 8, n), 2.0 ** rng.integers(0, 3, n)]
    f(*grid)
    print(f"  one compiled (memory, step time) pair over 10⁶ random layouts: "
          f"{rate(lambda: f(*grid), n, runs):,.0f} layouts/s")


def rate(fn, points: int, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return points / statistics.median(times)


def baseline_tree(rev: str) -> str:
    """A worktree of ``rev`` runnable from source (grammars/ and models/ linked
    into the package, as the install maps them)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sha = subprocess.run(["git", "-C", repo, "rev-parse", "--short", rev], check=True, capture_output=True,
                         text=True).stdout.strip()
    path = os.path.join(tempfile.gettempdir(), f"costgraph-baseline-{sha}")
    if not os.path.isdir(path):
        subprocess.run(["git", "-C", repo, "worktree", "add", "--detach", path, sha], check=True, capture_output=True)
    for name in ("grammars", "models"):
        link = os.path.join(path, "costgraph", name)
        if not os.path.exists(link):
            os.symlink(os.path.join(path, name), link)
    return path


def _from_tree(tree: str, *args: str) -> list[str]:
    code = f"import sys; sys.path.insert(0, {tree!r}); sys.argv = ['costgraph', *{list(args)!r}]; " \
           "from costgraph.cli import main; sys.exit(main())"
    return [sys.executable, "-c", code]


def compare(rev: str, runs: int, synthetic_path: str) -> None:
    """Old and new in one run: wall times of fresh processes and evaluate rates."""
    tree = baseline_tree(rev)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print(f"\nbaseline {rev} vs this tree, both run from source (median of {runs}; ratio = old / new):")
    for label, args in [("--help", ["--help"]), ("list", ["list"]), ("ops", ["ops"]),
                        ("derive gpt", ["derive", "gpt"]), ("derive deepseek_v3", ["derive", "deepseek_v3"]),
                        ("derive synthetic (1,539 nodes)", ["derive", synthetic_path])]:
        old = wall(_from_tree(tree, *args), runs)
        new = wall(_from_tree(here, *args), runs)
        print(f"  {label:<32} old {old:.3f} s   new {new:.3f} s   ratio {old / new:.2f}×")
    code = ("import sys, time; sys.path.insert(0, {t!r}); import costgraph; "
            "c = costgraph.load('llama').costs('model'); c.evaluate(config='llama-2-70b'); t0 = time.perf_counter(); "
            "[c.evaluate(config='llama-2-70b', s=1024 + i, b=8) for i in range(200)]; "
            "print(200 / (time.perf_counter() - t0))")
    old = float(subprocess.run([sys.executable, "-c", code.format(t=tree)], check=True, capture_output=True,
                               text=True).stdout)
    new = float(subprocess.run([sys.executable, "-c", code.format(t=here)], check=True, capture_output=True,
                               text=True).stdout)
    print(f"  {'Costs.evaluate, points/s':<32} old {old:,.0f}   new {new:,.0f}   ratio {new / old:.0f}× faster")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--baseline", help="also time this earlier commit in the same run")
    args = p.parse_args()
    n = args.runs

    print("fresh processes (median wall time):")
    for label, cmd in [("costgraph --help", _cmd("--help")), ("costgraph --version", _cmd("--version")),
                       ("costgraph list", _cmd("list")), ("costgraph ops", _cmd("ops")),
                       ("costgraph derive gpt", _cmd("derive", "gpt")),
                       ("costgraph derive deepseek_v3", _cmd("derive", "deepseek_v3"))]:
        print(f"  {label:<32} {wall(cmd, n):.3f} s")
    py = wall([sys.executable, "-c", "pass"], n)
    print(f"  {'(python -c pass, for scale)':<32} {py:.3f} s")
    sy = wall([sys.executable, "-c", "import sympy, lark"], n)
    print(f"  {'(python -c import sympy, lark)':<32} {sy:.3f} s   the floor of any derive")

    import numpy as np

    import costgraph

    costs = costgraph.load("llama").costs("model")
    costs.evaluate(config="llama-2-70b")   # compile once
    k = 2000
    def fast():
        for i in range(k):
            costs.evaluate(config="llama-2-70b", s=1024 + i, b=8)
    subs_model = costs.model
    def slow():
        for i in range(k // 20):
            vals = subs_model.values("llama-2-70b", s=1024 + i, b=8)
            {q: int(e.xreplace(vals)) for q, e in costs.quantities.items()}
    r_fast, r_slow = rate(fast, k, 5), rate(slow, k // 20, 5)
    print(f"\nCosts.evaluate, Llama-2-70B, all 9 quantities, exact: {r_fast:,.0f} points/s "
          f"(SymPy xreplace: {r_slow:,.0f} points/s; ratio {r_fast / r_slow:.0f}×)")

    f64 = costs.compile("llama-2-70b")
    b, s = np.meshgrid(np.arange(1, 1001), np.arange(1, 1001) * 64)
    f64(b=b, s=s)
    print(f"Costs.compile float64, 10⁶-point (b, s) grid, all 9 quantities: "
          f"{rate(lambda: f64(b=b, s=s), b.size, n):,.0f} points/s")
    i64 = costs.compile("llama-2-70b", dtype="int64")
    bi, si = np.meshgrid(np.arange(1, 101), np.arange(1, 1001) * 8)
    print(f"Costs.compile int64 (with the overflow guard), 10⁵ points: "
          f"{rate(lambda: i64(b=bi, s=si), bi.size, n):,.0f} points/s")
    try:
        i64(b=b, s=s)
    except costgraph.CostgraphValueError as e:
        print(f"  int64 on the 10⁶-point grid: refused ({e.message})")
    ex = costs.compile("llama-2-70b", dtype="exact")
    be, se = np.meshgrid(np.arange(1, 21), np.arange(1, 51) * 64)
    print(f"Costs.compile exact (Python integers), 10³ points: "
          f"{rate(lambda: ex(b=be, s=se), be.size, n):,.0f} points/s")

    plan_rates(costgraph, np, n)

    text = synthetic_model()
    def synth():
        costgraph.loads(text, path=os.path.join(os.getcwd(), "synthetic.cg")).costs("model")
    m = costgraph.loads(text, path=os.path.join(os.getcwd(), "synthetic.cg"))
    times = []
    for _ in range(max(3, n // 3)):
        t0 = time.perf_counter()
        synth()
        times.append(time.perf_counter() - t0)
    print(f"\nsynthetic model, 64 distinct repeat groups, {len(m.graph.ops())} operator nodes: "
          f"load + build + costs {statistics.median(times):.3f} s (in process, median)")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "synthetic.cg")
        with open(path, "w") as fh:
            fh.write(text)
        print(f"  fresh `costgraph derive synthetic.cg`: {wall(_cmd('derive', path), max(3, n // 3)):.3f} s")
        if args.baseline:
            compare(args.baseline, max(3, n // 2), path)


if __name__ == "__main__":
    main()
