"""Benchmark of ``costgraph web`` (issue 30: every page under a minute of CPU): the CPU time (user + sys,
``/usr/bin/time -f %U+%S``) and the page's size of every bundled model (``costgraph list``: its default
configuration) and of every ``examples/hf/*.json`` (the configs the fuzz campaign draws), one at a time,
each in its own process under ``nice -n 10``, the page written into a temporary folder.

Run:  python bench/bench_web.py [--only NAME ...] [--docs] [--runs N] [--before PATH] [--json FILE] [--limit S]

Prints one row per page (model, CPU s, bytes), slowest first, then a summary line: the count, the total
and the largest CPU time, the largest page, and how many pages took ``--limit`` seconds (default 60) or more.
The exit status is 1 where one did, or where a page failed.

``--docs``: the pages of the ``costgraph web`` commands the documentation runs (:data:`DOCS`: GPT-2 on a
TP 2 × PP 2 layout, Llama-3-8B), not every model. ``--runs N``: each page's CPU time is the median of N
runs. ``--before PATH``: the same pages also by the checkout at PATH (its ``src/`` first on ``PYTHONPATH``,
e.g. an unpacked ``git archive`` of the previous commit), run alternately with this checkout's, each page's
after/before ratio printed, and the pages compared byte for byte (a faster page must be the same page).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the ``costgraph web`` commands of the documentation (docs/commands/index.md, README.md), without ``-o``
DOCS = {"gpt2 tp2 pp2 zero1": ["gpt", "--config", "gpt2", "--tp", "2", "--pp", "2", "--zero", "1"],
        "llama-3-8b": ["llama", "--config", "llama-3-8b"]}


def targets_of() -> list[str]:
    """The bundled models' names (``costgraph list``) and the examples/hf/*.json paths."""
    listed = subprocess.run([sys.executable, "-m", "costgraph", "list"], capture_output=True, text=True, check=True)
    names = re.findall(r"^([\w.\-]+):\s+configurations", listed.stdout, re.M)
    return names + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "hf").glob("*.json"))


def measure(target, folder: Path, root: Path = ROOT) -> dict:
    """``{"target", "cpu_s", "bytes", "error", "page"}`` of one ``costgraph web`` run of the checkout ``root``
    (``target``: a model name or config path, or the arguments after ``web``; ``page``: the page's bytes)."""
    argv = [target] if isinstance(target, str) else list(target)
    out = folder / "page.html"
    clock = folder / "time.txt"
    out.unlink(missing_ok=True)
    env = dict(os.environ)
    if root != ROOT:   # the other checkout's package first (its src/ layout)
        env["PYTHONPATH"] = os.pathsep.join([str(root / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    run = subprocess.run(["nice", "-n", "10", "/usr/bin/time", "-f", "%U+%S", "-o", str(clock),
                          sys.executable, "-m", "costgraph", "web", *argv, "-o", str(out)],
                         capture_output=True, text=True, cwd=root, env=env)
    user, system = clock.read_text().strip().splitlines()[-1].split("+")
    page = out.read_bytes() if out.exists() else b""
    return {"target": " ".join(argv), "cpu_s": round(float(user) + float(system), 2), "bytes": len(page),
            "error": None if run.returncode == 0 else (run.stderr.strip().splitlines() or ["?"])[-1][:200],
            "page": page}


def median_of(target, folder: Path, runs: int, root: Path = ROOT) -> dict:
    """:func:`measure`'s row with the median CPU time of ``runs`` runs."""
    rows = [measure(target, folder, root) for _ in range(runs)]
    return {**rows[0], "cpu_s": round(statistics.median(r["cpu_s"] for r in rows), 2),
            "error": next((r["error"] for r in rows if r["error"]), None)}


def compare(targets: dict, before: Path, runs: int, folder: Path) -> list[str]:
    """Each target's median CPU time by this checkout and by ``before`` (run alternately, so that the load of
    the machine weighs on both alike), the ratio, and whether the pages are the same bytes: the lines to print."""
    lines = []
    for name, target in targets.items():
        after_runs, before_runs = [], []
        for _ in range(runs):
            after_runs.append(measure(target, folder, ROOT))
            before_runs.append(measure(target, folder, before))
        a = statistics.median(r["cpu_s"] for r in after_runs)
        b = statistics.median(r["cpu_s"] for r in before_runs)
        same = all(r["page"] == before_runs[0]["page"] for r in after_runs + before_runs)
        lines.append(f"  {name:<24} before {b:7.2f} s  after {a:7.2f} s  after/before {a / b:5.2f}  "
                     f"runs {runs}  pages {'identical' if same else 'DIFFER'} ({after_runs[0]['bytes']:,} B)")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="these models or config paths only")
    parser.add_argument("--docs", action="store_true", help="the documentation's web commands (DOCS) only")
    parser.add_argument("--runs", type=int, default=1, help="runs per page (the median CPU time is shown)")
    parser.add_argument("--before", help="a checkout of the previous version: its pages measured alternately")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--limit", type=float, default=60.0, help="CPU seconds a page must stay under")
    args = parser.parse_args()
    targets = DOCS if args.docs else {t: t for t in (args.only or targets_of())}
    if args.before:
        with tempfile.TemporaryDirectory() as tmp:
            print("\n".join(compare(targets, Path(args.before).resolve(), args.runs, Path(tmp))))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for target in targets.values():
            rows.append(median_of(target, Path(tmp), args.runs))
            r = rows[-1]
            print(f"  {r['target']:<52} {r['cpu_s']:>7.2f} s {r['bytes']:>9,} B {r['error'] or ''}", flush=True)
    for r in rows:
        del r["page"]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print("\nslowest first:")
    for r in sorted(rows, key=lambda r: -r["cpu_s"]):
        print(f"  {r['target']:<52} {r['cpu_s']:>7.2f} s {r['bytes']:>9,} B {r['error'] or ''}")
    over = [r for r in rows if r["cpu_s"] >= args.limit]
    failed = [r for r in rows if r["error"]]
    top = max(rows, key=lambda r: r["cpu_s"])
    big = max(rows, key=lambda r: r["bytes"])
    print(f"summary: {len(rows)} pages, {sum(r['cpu_s'] for r in rows):.1f} s CPU in all, slowest {top['target']} "
          f"{top['cpu_s']:.1f} s, largest {big['target']} {big['bytes']:,} B, {len(over)} at {args.limit:g} s or more, "
          f"{len(failed)} failed")
    return 1 if over or failed else 0


if __name__ == "__main__":
    sys.exit(main())
