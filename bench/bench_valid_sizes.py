"""Benchmark of the valid-size search of `costgraph optimal` and `costgraph solve` (issue 18):
the divisor candidates (:func:`costgraph.symbolic.solve.divisor_candidates`) against the old
scan of every integer (``candidates=None``), same answers.

Run:  python bench/bench_valid_sizes.py

Llama-3-8B scaled in kv (kv must divide a = 32): ``optimal --rule chinchilla --flops 1e23`` (the
loss's minimum lies far past 32: the old scan tried 100,000 sizes above it) and ``solve --quantity
params --budget 1e10`` (binds at kv = 66). Prints the valid-size checks made and the seconds of
the search (the model loaded once, outside), with the ratio old/new (the old scan makes 100,000+ checks:
minutes on a loaded machine); the machine's load matters:
read the ratio, not the seconds.
"""

from __future__ import annotations

import time

import costgraph
from costgraph.commands.solve import _candidates, _validity
from costgraph.engine.symbols import dim
from costgraph.symbolic.optimal import optimal
from costgraph.symbolic.solve import solve_budget


def main() -> None:
    model = costgraph.load("llama")
    values = model.values("llama-3-8b")
    costs = model.costs()
    kv = dim("kv")
    given = {k: v for k, v in values.items() if k != kv}
    cases = {
        "optimal --scale kv --rule chinchilla --flops 1e23":
            lambda valid, cand: optimal(costs, values, kv, 10**23, rule="chinchilla", valid=valid,
                                        candidates=cand).value,
        "solve --for kv --quantity params --budget 1e10":
            lambda valid, cand: solve_budget(costs["params"], kv, given, 10**10, valid=valid,
                                             candidates=cand).value,
    }
    for name, fn in cases.items():
        out = {}
        for label, with_candidates in (("old scan", False), ("candidates", True)):
            valid, _ = _validity(model, values, kv, None)
            calls = [0]

            def counted(n, valid=valid):
                calls[0] += 1
                return valid(n)
            t = time.perf_counter()
            cand = _candidates(model, values, kv) if with_candidates else None
            answer = fn(counted, cand)
            out[label] = (answer, calls[0], time.perf_counter() - t)
        (a0, c0, t0), (a1, c1, t1) = out["old scan"], out["candidates"]
        assert a0 == a1, (a0, a1)
        print(f"{name}: kv = {a1}; validity checks {c0:,} → {c1:,}; search {t0:.2f} s → {t1:.2f} s "
              f"(×{t0 / t1:.0f} faster)")


if __name__ == "__main__":
    main()
