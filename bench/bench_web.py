"""Benchmark of ``costgraph web`` (issue 30: every page under a minute of CPU): the CPU time (user + sys,
``/usr/bin/time -f %U+%S``) and the page's size of every bundled model (``costgraph list``: its default
configuration) and of every ``examples/hf/*.json`` (the configs the fuzz campaign draws), one at a time,
each in its own process under ``nice -n 10``, the page written into a temporary folder.

Run:  python bench/bench_web.py [--only NAME ...] [--json FILE] [--limit S]

Prints one row per page (model, CPU s, bytes), slowest first, then a summary line: the count, the total
and the largest CPU time, the largest page, and how many pages took ``--limit`` seconds (default 60) or more.
The exit status is 1 where one did, or where a page failed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def targets() -> list[str]:
    """The bundled models' names (``costgraph list``) and the examples/hf/*.json paths."""
    listed = subprocess.run([sys.executable, "-m", "costgraph", "list"], capture_output=True, text=True, check=True)
    names = re.findall(r"^([\w.\-]+):\s+configurations", listed.stdout, re.M)
    return names + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples" / "hf").glob("*.json"))


def measure(target: str, folder: Path) -> dict:
    """``{"target", "cpu_s", "bytes", "error"}`` of one ``costgraph web`` run."""
    out = folder / "page.html"
    clock = folder / "time.txt"
    out.unlink(missing_ok=True)
    run = subprocess.run(["nice", "-n", "10", "/usr/bin/time", "-f", "%U+%S", "-o", str(clock),
                          sys.executable, "-m", "costgraph", "web", target, "-o", str(out)],
                         capture_output=True, text=True, cwd=ROOT)
    user, system = clock.read_text().strip().splitlines()[-1].split("+")
    return {"target": target, "cpu_s": round(float(user) + float(system), 2),
            "bytes": out.stat().st_size if out.exists() else 0,
            "error": None if run.returncode == 0 else (run.stderr.strip().splitlines() or ["?"])[-1][:200]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", help="these models or config paths only")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--limit", type=float, default=60.0, help="CPU seconds a page must stay under")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for target in args.only or targets():
            rows.append(measure(target, Path(tmp)))
            r = rows[-1]
            print(f"  {r['target']:<52} {r['cpu_s']:>7.2f} s {r['bytes']:>9,} B {r['error'] or ''}", flush=True)
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
