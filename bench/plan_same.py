"""Check: `costgraph plan --format json` byte for byte the same in this checkout and another (issue 27 item 6).

Run:  python bench/plan_same.py --before PATH [--save DIR]
      python bench/plan_same.py --against DIR     (DIR: a --save folder; its ``.before`` outputs)

Runs bench_plan.py's plan cases and three more (DeepSeek-V2-Lite on 32 H100s, Gemma 3 12B on 32 H100s
``--top 20``, Llama-3-70B on 64 H100s ``--top 100``) in both checkouts, each a fresh process, and prints
``same`` or ``DIFFERS`` per case; exit status 1 when any case differs. A speedup must leave every output as it was.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_plan import CASES, PLAN, REFUSED  # noqa: E402

MORE = {
    "plan deepseek-v2-lite 32 h100": PLAN + ["deepseek_v2", "--config", "deepseek-v2-lite", "--gpus", "32",
                                             "--hardware", "h100-sxm", "--global-batch", "512"],
    "plan gemma-3-12b 32 h100 --top 20": PLAN + ["gemma3_text", "--config", "gemma-3-12b", "--gpus", "32", "--hardware",
                                                 "h100-sxm", "--global-batch", "512", "--top", "20"],
    "plan llama-3-70b 64 h100 --top 100": PLAN + ["llama", "--config", "llama-3-70b", "--gpus", "64", "--hardware",
                                                  "h100-sxm", "--global-batch", "512", "--set", "s=8192", "--top",
                                                  "100"],
}


def output(root: str, argv: list[str]) -> tuple[int, bytes, bytes]:
    src = os.path.join(root, "src")
    env = {**os.environ, "PYTHONPATH": src if os.path.isdir(os.path.join(src, "costgraph")) else root}
    done = subprocess.run([sys.executable, "-m", "costgraph", *argv], cwd=root, env=env, capture_output=True)
    return done.returncode, done.stdout, done.stderr


def saved(folder: str, name: str, got: tuple[int, bytes, bytes]) -> tuple[int, bytes, bytes]:
    """The saved output of case NAME, shaped as ``got`` when the bytes agree (the exit status is not saved)."""
    with open(os.path.join(folder, f"{name.replace(' ', '_')}.before"), "rb") as f:
        text = f.read()
    return got if got[1] + got[2] == text else (got[0], text, b"")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--before", help="a checkout of the previous version")
    which.add_argument("--against", help="a folder saved by --save: compare with its .before outputs")
    p.add_argument("--save", help="a folder to keep both outputs of each case in")
    p.add_argument("-k", help="only the cases whose name holds this text")
    args = p.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cases = {n: a for n, a in {**CASES, **MORE}.items() if a[0] == "plan" and (not args.k or args.k in n)}
    bad = 0
    for name, argv in cases.items():
        a = output(here, argv)
        b = output(args.before, argv) if args.before else saved(args.against, name, a)
        same = a == b
        bad += not same
        print(f"{name:<36} {'same' if same else 'DIFFERS'} (exit {a[0]} / {b[0]})", flush=True)
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            for tag, got in (("after", a), ("before", b)):
                with open(os.path.join(args.save, f"{name.replace(' ', '_')}.{tag}"), "wb") as f:
                    f.write(got[1] + got[2])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
