"""Benchmark: cold start of `costgraph derive gpt`, and derive time per bundled model.

Run:  python bench/bench_derive.py [--runs N]

Prints the median wall time of N fresh processes running `costgraph derive gpt`
(imports, grammar, parse, build, totals, printing: what a user waits for), and
for each bundled model the median in-process time to load, build and sum it
at model scope (parse + graph + totals; the import cost is paid once).
Goal (issue 2): cold start under 0.7 s on the 2-core CI machines.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time


def cold_start(runs: int) -> list[float]:
    exe = shutil.which("costgraph")
    cmd = [exe, "derive", "gpt"] if exe else [sys.executable, "-m", "costgraph.cli", "derive", "gpt"]
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return times


def derive_times(runs: int) -> dict[str, list[float]]:
    import costgraph
    from costgraph.language.resources import bundled_model_names

    out = {}
    for name in bundled_model_names():
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            costgraph.load(name).costs("model")
            times.append(time.perf_counter() - t0)
        out[name] = times
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=9)
    args = p.parse_args()
    cold = cold_start(args.runs)
    print(f"cold start `costgraph derive gpt`: median {statistics.median(cold):.3f} s "
          f"(min {min(cold):.3f}, max {max(cold):.3f}, {args.runs} runs)")
    for name, times in derive_times(args.runs).items():
        print(f"derive {name:<12} median {statistics.median(times) * 1000:.1f} ms "
              f"(min {min(times) * 1000:.1f}, {args.runs} runs, in process)")


if __name__ == "__main__":
    main()
