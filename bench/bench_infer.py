"""Benchmark of `costgraph infer` time against --generate (issue 17, item 3), in one run
(medians; ratios to the smallest G taken in the same run).

Run:  python bench/bench_infer.py [--runs N] [--cli]

Prints, per setting (a dense model, a windowed one at a large batch, a mixture, the 10M-token
Llama-4-Scout prompt), the time of ``Model.infer(...)`` in process (the model already built,
so the figure is the analysis: formulas, the closed-form decode sums, the values) at
G = 10, 10^3, 10^6 and 10^12, and its ratio to G = 10. Decode totals and means are closed
forms (:mod:`costgraph.inference.decode`): the ratios stay near 1 whatever G (before, the mean
summed one evaluation per decode step: G = 10^6 took ~30 s, 10^12 never ended).
``--cli`` also times fresh ``costgraph infer`` processes (start-up and the model build
included).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time

SETTINGS = [  # (model, config, prompt, batch)
    ("llama", "llama-3-8b", 512, 1),
    ("mistral", "mistral-7b", 512, 256),            # a 4096-token window, compute-bound pieces
    ("mixtral", "mixtral-8x7b", 512, 64),           # a mixture: expected distinct experts
    ("llama4_text", "llama-4-scout-17b-16e", 10**7, 1),   # its 10M context
]
GENERATE = (10, 10**3, 10**6, 10**12)


def in_process(name: str, config: str, prompt: int, batch: int, runs: int) -> list[float]:
    """Median seconds of ``Model.infer`` per G (the model built beforehand)."""
    import costgraph

    model = costgraph.load(name)
    values = model.values(config)
    model._inference_model()                       # built once, as a session would
    out = []
    for g in GENERATE:
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            model.infer(hardware="h100-sxm", prompt=prompt, generate=g, batch=batch, values=values)
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times))
    return out


def cli(name: str, config: str, prompt: int, batch: int, runs: int) -> list[float]:
    """Median wall seconds of a fresh ``costgraph infer`` process per G."""
    exe = shutil.which("costgraph")
    base = [exe] if exe else [sys.executable, "-m", "costgraph.cli"]
    out = []
    for g in GENERATE:
        cmd = [*base, "infer", name, "--config", config, "--hardware", "h100-sxm", "--prompt", str(prompt),
               "--generate", str(g), "--batch", str(batch), "--format", "json"]
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
        out.append(statistics.median(times))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cli", action="store_true", help="also time fresh costgraph infer processes")
    args = p.parse_args()
    heads = "".join(f"{'G=' + (f'1e{len(str(g)) - 1}' if g >= 10**6 else str(g)):>12}" for g in GENERATE)
    print(f"{'setting':<44}{heads}   ratio G=1e12 / G=10")
    for name, config, prompt, batch in SETTINGS:
        kinds = [("in process", in_process)] + ([("cli", cli)] if args.cli else [])
        for kind, fn in kinds:
            ts = fn(name, config, prompt, batch, args.runs)
            label = f"{config} P={prompt:,} b={batch} ({kind})"
            print(f"{label:<44}" + "".join(f"{t:>11.3f}s" for t in ts) + f"   {ts[-1] / ts[0]:.2f}")


if __name__ == "__main__":
    main()
