"""Benchmark of issue 20's front door, as ratios within one run (medians):

* loading a model by Hub id from a local cache (``costgraph.load("org/name")``: huggingface_hub's
  cache lookup, then the config.json) against loading the same config.json by its path;
* writing the offline calculator page (``costgraph.export.web.page``: the codegen functions plus
  24 training-memory variants) against ``costgraph codegen --lang javascript``'s program alone.

Run:  python bench/bench_front_door.py [--runs N]

The cache is laid out in a temporary folder as the Hub writes it (blobs, refs/main, a snapshot
symlink) and HF_HUB_CACHE points at it; nothing touches the network (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "hf" / "llama-3-8b.json"


def _cache(root: Path) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = root / "models--meta-llama--Meta-Llama-3-8B"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "snapshots" / commit).mkdir(parents=True)
    blob = repo / "blobs" / "cfg"
    blob.write_bytes(CONFIG.read_bytes())
    (repo / "refs" / "main").write_text(commit)
    os.symlink(os.path.relpath(blob, repo / "snapshots" / commit), repo / "snapshots" / commit / "config.json")


def _median(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    import costgraph
    from costgraph.export.codegen import generate, plan
    from costgraph.export.web import page

    with tempfile.TemporaryDirectory() as tmp:
        _cache(Path(tmp))
        os.environ.update(HF_HUB_CACHE=tmp, HF_HUB_OFFLINE="1")
        by_path = _median(lambda: costgraph.load(str(CONFIG)), runs)
        by_id = _median(lambda: costgraph.load("meta-llama/Meta-Llama-3-8B"), runs)
    print(f"load by path {by_path:.3f} s, by Hub id {by_id:.3f} s: ratio {by_id / by_path:.2f}")
    model = costgraph.load("gpt")
    values = model.values("gpt2")
    code = _median(lambda: generate(plan(model, ("model", "layer"), values=values), "javascript"), runs)
    web = _median(lambda: page(model, values=values), runs)
    print(f"codegen javascript {code:.3f} s, web page {web:.3f} s: ratio {web / code:.2f}")


if __name__ == "__main__":
    main()
