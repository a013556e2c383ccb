"""Benchmark: `costgraph plan`'s cost, as ratios within one run (issue 27 item 6).

Run:  python bench/bench_plan.py [--runs N] [--before PATH]

Each case is a fresh process; its cost is the CPU seconds (user + system) the process used,
the median of N runs (CPU time, not wall time: the 2-core machines are shared). Printed:

* ``derive deepseek_v3`` (the unit of the DeepSeek-V3 goal);
* ``plan`` of DeepSeek-V3 on 256 GB200s, gpt-oss-20b on 16 H100s and Llama-3-70B on 64
  H100s (``--top 5``), and their ratios to ``derive deepseek_v3``;
* ``--top 3`` against ``--top 100`` (the most ``plan`` shows) for Llama-3-8B on 8 H100s:
  the cost must not grow with ``--top``; ``--top 1000000000`` is refused (exit status 2, "plan
  shows at most 100 layouts") before any layout is screened, in the time of loading the model.

Goals: DeepSeek-V3 on 256 GPUs at most 5× one derive; gpt-oss-20b in seconds; Llama-3-70B
at most 1 s on an idle 2-core machine; ``--top 100`` / ``--top 3`` near 1. ``--before PATH``:
a checkout of the previous version (e.g. /work/main), run in the same session for the
before/after ratios, the two checkouts alternating run by run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

PLAN = ["plan", "--format", "json"]
CASES = {
    "derive deepseek_v3": ["derive", "deepseek_v3"],
    "plan deepseek-v3 256 gb200": PLAN + ["deepseek_v3", "--config", "deepseek-v3", "--set", "s=4096", "--gpus", "256",
                                          "--hardware", "gb200", "--global-batch", "4096"],
    "plan gpt-oss-20b 16 h100": PLAN + ["gpt_oss", "--config", "gpt-oss-20b", "--gpus", "16", "--hardware",
                                        "h100-sxm", "--global-batch", "256"],
    "plan llama-3-70b 64 h100": PLAN + ["llama", "--config", "llama-3-70b", "--gpus", "64", "--hardware", "h100-sxm",
                                        "--global-batch", "512", "--set", "s=8192", "--top", "5"],
    "plan llama-3-8b --top 3": PLAN + ["llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm",
                                       "--global-batch", "512", "--top", "3"],
    "plan llama-3-8b --top 100": PLAN + ["llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm",
                                         "--global-batch", "512", "--top", "100"],
    "plan llama-3-8b --top 1e9": PLAN + ["llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm",
                                         "--global-batch", "512", "--top", "1000000000"],
}
#: the cases refused with exit status 2 (the others must exit 0)
REFUSED = {"plan llama-3-8b --top 1e9"}


def cpu_seconds(argv: list[str], root: str, status: int = 0) -> float:
    """CPU seconds (user + system) of one fresh ``python -m costgraph ARGV`` run in ``root``, which
    must exit with ``status``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    src = os.path.join(root, "src")   # the src/ layout: the package lives in ROOT/src/costgraph
    env = {**os.environ, "PYTHONPATH": src if os.path.isdir(os.path.join(src, "costgraph")) else root}
    done = subprocess.run([sys.executable, "-m", "costgraph", *argv], cwd=root, env=env, capture_output=True)
    if done.returncode != status:
        raise SystemExit(f"{' '.join(argv)}: exit status {done.returncode}, not {status}\n{done.stderr.decode()}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(roots: list[str], runs: int) -> list[dict[str, float]]:
    """The median CPU seconds of each case in each checkout of ``roots``. With two, the checkouts alternate run
    by run within each case (A B, then B A, ...), so that the machine's load moves both alike (measuring every
    case of one checkout, then of the other, read ratios 0.8-1.26 for unchanged code on the loaded 2-core machine)."""
    out: list[dict[str, float]] = [{} for _ in roots]
    for name, argv in CASES.items():
        got: list[list[float]] = [[] for _ in roots]
        for i in range(runs):
            order = list(range(len(roots)))
            for k in (order if i % 2 == 0 else order[::-1]):
                got[k].append(cpu_seconds(argv, roots[k], 2 if name in REFUSED else 0))
        for k in range(len(roots)):
            out[k][name] = statistics.median(got[k])
    return out


def report(label: str, t: dict[str, float]) -> None:
    unit = t["derive deepseek_v3"]
    print(f"[{label}]")
    for name, s in t.items():
        print(f"  {name:<30} {s:8.2f} s CPU   {s / unit:6.1f}× derive deepseek_v3")
    print(f"  --top 100 / --top 3: {t['plan llama-3-8b --top 100'] / t['plan llama-3-8b --top 3']:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--before", help="a checkout of the previous version, measured in the same run")
    args = p.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    got = measure([here] + ([args.before] if args.before else []), args.runs)
    after = got[0]
    report("this checkout", after)
    if args.before:
        before = got[1]
        report(f"before: {args.before}", before)
        for name in CASES:
            print(f"  {name:<30} after/before {after[name] / before[name]:.2f}")


if __name__ == "__main__":
    main()
