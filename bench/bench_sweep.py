"""Benchmark of `costgraph sweep`: rows per second of a 10^6-row sweep.

Run:  python bench/bench_sweep.py [--runs N]

Llama-2-70B at model scope, every quantity (9), over b = 1..1000 × s =
4..4000 step 4 (10^6 rows; the largest backward FLOPs, about 1.7·10^18, stay
within int64), in process (:func:`costgraph.export.sweep.sweep`):

* evaluation only, per dtype (int64: exact with the overflow guard; float64);
  compilation included (it is part of every sweep);
* evaluation + CSV to an in-memory stream (the csv module), int64.

Prints the median over ``--runs`` repeats (default 3) and rows/second. The
machine's load matters: read the figures as orders of magnitude.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time

import costgraph
from costgraph.export.sweep import parse_axes, sweep, to_csv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    model = costgraph.load("llama")
    fixed = {str(k): int(v) for k, v in model.values("llama-2-70b").items()}
    axes = parse_axes(["b=1:1000:+1", "s=4:4000:+4"])
    rows = len(axes[0].values) * len(axes[1].values)
    assert rows == 10 ** 6

    def timed(fn) -> float:
        times = []
        for _ in range(args.runs):
            costs = model.costs()          # a fresh Costs: compilation is timed too
            t = time.perf_counter()
            fn(costs)
            times.append(time.perf_counter() - t)
        return statistics.median(times)

    print(f"Llama-2-70B, model scope, 9 quantities, {rows:,} rows; median of {args.runs} runs")
    for dtype in ("int64", "float64"):
        t = timed(lambda c: sweep(model, c, axes, fixed, dtype=dtype))
        print(f"  evaluate, {dtype:<8} {t:7.2f} s  {rows / t:12,.0f} rows/s")
    t = timed(lambda c: to_csv(sweep(model, c, axes, fixed, dtype="int64"), io.StringIO()))
    print(f"  evaluate + CSV, int64 {t:5.2f} s  {rows / t:12,.0f} rows/s")


if __name__ == "__main__":
    main()
