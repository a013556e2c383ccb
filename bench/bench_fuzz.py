"""The fuzz campaign of issue 30, item 5: property-based (Hypothesis) argument lists over every
command and flag, mutated model files and configs, and hostile files, run in bounded child
processes; counts what it finds.

Run (at low priority: it shares the machine)::

    nice -n 19 python -m bench.bench_fuzz --cases 10000 --workers 1 --log fuzz.jsonl

Each worker is a child process (``python -m bench.bench_fuzz --worker ...``) under
``RLIMIT_AS`` (``--memory``, default 4 GiB: the bound on memory, enforced by the kernel) that
runs ``--batch`` cases in its own process through ``costgraph.cli.main`` (the parser's own
subcommands and flags: ``tests/cli_props.py``; the mutations of ``tests/fuzz_inputs.py``) and
writes one JSON line per case; a worker that dies (killed, out of memory) is a finding named by
the case it had started. A case is

``flags`` (5 in 10)
    an argument list of a random subcommand (valid, plausible and hostile values);
``model`` / ``config`` (1 in 10 each)
    a mutated bundled model file or example config.json as the MODEL of a random command;
``api`` (1 in 10)
    a bundled model's ``train``, ``infer``, ``plan`` or ``costs().evaluate`` with arguments drawn
    from plausible, out-of-range and wrong-typed values (:func:`run_api`): it returns or raises
    costgraph's own error;
``files`` (2 in 10)
    hostile files: a ``config.json`` that is a symbolic link to a file holding a secret (plain,
    or JSON whose strings are the secret), in a folder or a fake Hub cache snapshot; ``-o`` naming
    the model file, a file it imports or the config, with ``--force``.

Checks, each counted as a finding with its argument list:

* ``internal``: exit status 3, a traceback, "internal error" or "this is a bug";
* ``status``: an exit status other than 0 and 2 (``fit`` and ``verify``: also 1), or 2 without a
  message;
* ``slow``: a run over ``--limit`` seconds of CPU time (default 60; a SIGPROF timer, with a
  wall-clock backstop ten times longer);
* ``leak``: the secret (an environment variable's value and the secret file's text) in the output;
* ``changed``: a file that existed before the run (the model, its imports, the config, the secret)
  changed by it, but for a file given to ``-o`` that the run did not read;
* ``died``: a worker that ended without reporting its case (a crash or the memory bound).

The summary prints the cases run, per kind and exit status, the CPU seconds (median, 99th
percentile, largest), the workers' peak memory, and every finding's first example.
``tests/commands/test_fuzz_campaign.py`` runs a few derandomized cases of it in CI.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECRET = "s3cr3t-7f1c2a9e-never-printed"
FILE_SECRET = "f1le-s3cret-55e0b2-never-printed"
KINDS = ["flags"] * 5 + ["model", "config", "api"] + ["files"] * 2
#: values an API argument is drawn from: plausible, out of range, of the wrong type
API_VALUES = [1, 2, 4, 8, 0, -1, 3, 10**30, 0.5, 1 / 3, float("nan"), float("inf"), -0.0, "2", "1e400", "", None,
              True, [], {}, "h100-sxm", "a100-80gb-sxm", "bogus", 2**63]


# --- one case ------------------------------------------------------------------------------

class TooSlow(BaseException):
    """Raised by the timer (a BaseException: the CLI's ``except Exception`` does not take it)."""


def _alarm(signum, frame):
    raise TooSlow("cpu" if signum == signal.SIGPROF else "wall")


@contextlib.contextmanager
def _limited(limit: float):
    old = signal.signal(signal.SIGPROF, _alarm), signal.signal(signal.SIGALRM, _alarm)
    # re-armed every second after the limit: a TooSlow raised inside a callback that swallows it (the
    # garbage collector's, "Exception ignored in ...") is raised again (seed 10012 ran 278 s of CPU so)
    signal.setitimer(signal.ITIMER_PROF, limit, 1.0)
    signal.setitimer(signal.ITIMER_REAL, 10 * limit, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGPROF, old[0])
        signal.signal(signal.SIGALRM, old[1])


def _snapshot(folder: Path) -> dict[str, tuple]:
    """Every regular file under ``folder`` (links not followed): its size, mtime and bytes' hash."""
    import hashlib

    out = {}
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            out[str(p.relative_to(folder))] = (len(data), hashlib.sha1(data).hexdigest())
    return out


def run_one(argv: list[str], work: Path, limit: float, may_change: set[str]) -> dict:
    """Run ``costgraph argv`` in ``work`` in this process and check it: the case's record
    (``status``, ``cpu`` seconds, ``findings``: a list of (kind, detail))."""
    from costgraph import cli

    before = _snapshot(work)
    out, err = io.StringIO(), io.StringIO()
    cwd, t0 = os.getcwd(), time.process_time()
    os.chdir(work)
    status: int | None = None
    findings = []
    try:
        with _limited(limit), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = cli.main(list(argv))
    except TooSlow as e:
        findings.append(("slow", f"over {limit} s of {e}"))
    finally:
        os.chdir(cwd)
    cpu = time.process_time() - t0
    text = out.getvalue() + err.getvalue()
    allowed = {0, 1, 2} if argv and argv[0] in ("fit", "verify") else {0, 2}
    harness = "TooSlow" in text and status is None   # the timer's exception, swallowed once (_limited)
    if status == 3 or not harness and any(s in text for s in ("Traceback", "internal error", "this is a bug")):
        findings.append(("internal", text[-600:]))
    elif status is not None and status not in allowed:
        findings.append(("status", f"exit {status}: {text[-300:]}"))
    elif status == 2 and not err.getvalue().strip():
        findings.append(("status", "exit 2 without a message"))
    for s in (SECRET, FILE_SECRET):
        if s in text:
            findings.append(("leak", text[max(0, text.index(s) - 200):text.index(s) + 60]))
    after = _snapshot(work)
    changed = sorted(k for k, v in before.items() if after.get(k) != v and k not in may_change)
    if changed:
        findings.append(("changed", ", ".join(changed)))
    return {"argv": argv, "status": status, "cpu": round(cpu, 3), "findings": findings}


def draw_api(data) -> tuple[str, str, dict]:
    """An API call: a bundled model, ``train``, ``infer``, ``plan`` or ``evaluate``, and arguments
    drawn from :data:`API_VALUES` (names the method takes, and one it does not)."""
    import tests.cli_props as P
    from hypothesis import strategies as st

    name = data.draw(st.sampled_from(P.MODEL_NAMES), label="model")
    method = data.draw(st.sampled_from(["train", "infer", "plan", "evaluate"]), label="method")
    names = {"train": ["t", "p", "c", "e", "d", "gpus", "zero", "m", "sp", "recompute", "hardware", "mfu", "tokens",
                       "global_batch", "memory", "reserve", "lora_rank", "v", "schedule"],
             "infer": ["prompt", "generate", "batch", "tp", "hardware", "weights", "kv", "page", "peak", "bandwidth",
                       "memory", "reserve"],
             "plan": ["gpus", "hardware", "global_batch", "top", "memory", "reserve"],
             "evaluate": ["b", "s", "h", "l", "a", "V", "kv", "config"]}[method] + ["no_such_argument"]
    kwargs = data.draw(st.dictionaries(st.sampled_from(names), st.sampled_from(API_VALUES), max_size=5), label="kwargs")
    return name, method, kwargs


def run_api(call: tuple[str, str, dict], limit: float) -> dict:
    """An API case (:func:`draw_api`): the call must return, or raise costgraph's own error (a
    :class:`~costgraph.CostgraphError`) or, for a name the method does not take, Python's
    ``TypeError``; anything else is ``internal``."""
    import tests.cli_props as P

    import costgraph

    name, method, kwargs = call

    argv = [f"api:{name}.{method}", repr(kwargs)]
    findings, t0 = [], time.process_time()
    try:
        with _limited(limit):
            model = costgraph.load(name)
            config = (P.CONFIGS.get(name) or [None])[0]
            values = model.values(config) if config else None
            if method == "evaluate":
                model.costs().evaluate(**kwargs)
            elif method == "plan":
                model.plan(values, **{"gpus": 8, "hardware": "h100-sxm", "global_batch": 8, **kwargs})
            elif method == "infer":
                model.infer(**{"prompt": 16, "generate": 4, "values": values, **kwargs})
            else:
                model.train(values=values, **kwargs)
    except TooSlow as e:
        findings.append(("slow", f"over {limit} s of {e}"))
    except costgraph.CostgraphError:
        pass
    except TypeError as e:
        if "no_such_argument" not in str(e):
            findings.append(("internal", f"TypeError: {e}"[:600]))
    except Exception as e:   # noqa: BLE001 (what the campaign looks for)
        findings.append(("internal", f"{type(e).__name__}: {e}"[:600]))
    return {"argv": argv, "status": None, "cpu": round(time.process_time() - t0, 3), "findings": findings}


# --- the cases -----------------------------------------------------------------------------

def _hostile_files(data, work: Path, spec: dict) -> tuple[list[str], set[str]]:
    """A hostile-file case in ``work``: its argv and the files it may change."""
    import tests.cli_props as P
    from hypothesis import strategies as st

    secret = work / "secret.txt"
    kind = data.draw(st.sampled_from(["link-plain", "link-json", "hub-link", "o-import", "o-model", "o-config"]),
                     label="files")
    if kind.startswith("link") or kind == "hub-link":
        secret.write_text(FILE_SECRET + "\n" if kind == "link-plain" else
                          json.dumps({"model_type": FILE_SECRET, "hidden_size": FILE_SECRET}), encoding="utf-8")
        if kind == "hub-link":
            snap = work / "hub" / "models--org--name" / "snapshots" / ("0" * 40)
            snap.mkdir(parents=True)
            (work / "hub" / "models--org--name" / "refs").mkdir()
            (work / "hub" / "models--org--name" / "refs" / "main").write_text("0" * 40)
            folder = snap
        else:
            folder = work / "ckpt"
            folder.mkdir()
        (folder / "config.json").symlink_to(secret)
        model = data.draw(st.sampled_from([str(folder), str(folder / "config.json")]), label="model")
    else:
        # m.cg: GPT with its MLP block imported from blocks.cg (models/std/mlp.cg) beside it
        shutil.copy(ROOT / "models" / "std" / "mlp.cg", work / "blocks.cg")
        gpt = (ROOT / "models" / "gpt.cg").read_text(encoding="utf-8")
        (work / "m.cg").write_text(gpt.replace('import "std/mlp.cg"', 'import "blocks.cg"'), encoding="utf-8")
        shutil.copy(ROOT / "examples" / "hf" / "llama-3-8b.json", work / "config.json")
        model = {"o-import": "m.cg", "o-model": "m.cg", "o-config": "config.json"}[kind]
    if kind.startswith("o-"):   # MODEL is the file; -o names it, or what it imports, with --force
        writers = [c for c in sorted(spec) if any(a.flag == "-o" for a in spec[c])
                   and any(a.flag is None and a.dest == "model" for a in spec[c])]
        command = data.draw(st.sampled_from(writers), label="command")
        target = {"o-import": "blocks.cg", "o-model": "m.cg", "o-config": "config.json"}[kind]
        extra = {"codegen": ["--lang", "python"], "sweep": ["--over", "b=1,2"], "plot": ["--kind", "flops"],
                 "report": ["--format", "md"], "graph": ["--format", "dot"]}.get(command, [])
        config = ["--config", "gpt2"] if model == "m.cg" else []   # m.cg is GPT: its configurations
        return [command, model, *config, *extra, "-o", target, "--force"], set()
    command = data.draw(st.sampled_from([c for c in ("derive", "codegen", "report", "graph", "sweep", "plot",
                                                     "train", "infer", "web") if c in spec]), label="command")
    argv = data.draw(P.argv_for(command, spec[command], model), label="argv")
    return argv, outputs(argv)


def outputs(argv: list[str]) -> set[str]:
    """The files an argument list names to ``-o`` (a run may replace them with ``--force``
    when it did not read them)."""
    return {argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--output")}


def draw_case(data, spec: dict, work: Path, models: Path, kind: str | None = None) \
        -> tuple[str, list[str], set[str], object]:
    """One case (of ``kind``, or a kind drawn: :data:`KINDS`): (kind, argv, files it may change,
    an undo callable or None)."""
    import tests.cli_props as P
    import tests.fuzz_inputs as F
    from hypothesis import strategies as st

    kind = kind or data.draw(st.sampled_from(KINDS), label="kind")
    model_commands = [c for c, args in spec.items() if any(a.flag is None and a.dest == "model" for a in args)]
    shutil.copy(ROOT / "models" / "gpt.cg", work / "model.cg")
    undo = None
    if kind == "flags":
        command = data.draw(st.sampled_from(sorted(spec)), label="command")
        argv = data.draw(P.argv_for(command, spec[command]), label="argv")
    elif kind == "model":
        rel = data.draw(st.sampled_from([r for r in F.SOURCES if "/" not in r]), label="file")
        target = models / rel
        target.write_text(F.mutate_model_text(data, F.TEXTS[rel]), encoding="utf-8")
        undo = lambda: target.write_text(F.TEXTS[rel], encoding="utf-8")   # noqa: E731
        command = data.draw(st.sampled_from(model_commands), label="command")
        argv = data.draw(P.argv_for(command, spec[command], str(target)), label="argv")
    elif kind == "config":
        name = data.draw(st.sampled_from(sorted(F.CONFIGS)), label="config")
        (work / "config.json").write_text(F.to_json_text(F.mutate_config(data, F.CONFIGS[name])), encoding="utf-8")
        command = data.draw(st.sampled_from(model_commands), label="command")
        argv = data.draw(P.argv_for(command, spec[command], str(work / "config.json")), label="argv")
    else:
        argv, may = _hostile_files(data, work, spec)
        return kind, argv, may, undo
    return kind, argv, outputs(argv) - ({"config.json"} if kind == "config" else set()), undo


def worker(cases: int, seed: int, limit: float, log: Path, cycle: bool = False) -> None:
    """Run ``cases`` cases drawn by Hypothesis from ``seed``, appending one JSON line each to
    ``log`` (a line ``{"start": ...}`` before each case, so a death names its case); ``cycle``:
    a fifth of them of each kind (flags, model, config, files, api) instead of drawn kinds."""
    import tests.cli_props as P
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    spec = P.subcommands()
    base = Path(tempfile.mkdtemp(prefix="cg-fuzz-"))
    models = base / "models"
    shutil.copytree(ROOT / "models", models, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    os.environ.update({P.SECRET_NAME: SECRET, "XDG_CACHE_HOME": str(base / "cache"), "HF_HUB_OFFLINE": "1",
                       "HF_HUB_CACHE": str(base / "hubcache")})

    def campaign(data, fixed):
        kind = fixed or data.draw(st.sampled_from(KINDS), label="kind")
        if kind == "api":
            call = draw_api(data)   # every draw before the start line (Hypothesis may end a case in a draw)
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"start": [f"api:{call[0]}.{call[1]}", repr(call[2])], "kind": kind,
                                    "pid": os.getpid()}) + "\n")
            rec = run_api(call, limit)
            rec.update(kind=kind, pid=os.getpid(), rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(rec) + "\n")
            return
        work = Path(tempfile.mkdtemp(dir=base))
        kind, argv, may, undo = draw_case(data, spec, work, models, kind)
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps({"start": argv, "kind": kind, "pid": os.getpid()}) + "\n")
        try:
            rec = run_one(argv, work, limit, may)
        finally:
            if undo:
                undo()
            shutil.rmtree(work, ignore_errors=True)
        rec.update(kind=kind, pid=os.getpid(), rss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")

    kinds = ("flags", "model", "config", "files", "api") if cycle else (None,)
    try:
        for i, fixed in enumerate(kinds):
            n = cases // len(kinds) + (i < cases % len(kinds))
            run = settings(max_examples=n, deadline=None, database=None, phases=[Phase.generate],
                           suppress_health_check=list(HealthCheck))(given(data=st.data(), fixed=st.just(fixed))(
                               campaign))
            hseed(seed)(run)()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --- the campaign --------------------------------------------------------------------------

def _bounded(memory: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        os.setpgrp()
    return apply


def read_log(log: Path) -> tuple[list[dict], list[dict]]:
    """The finished cases of a log and the cases started but never finished (a dead worker):
    each record closes its worker's (``pid``) open start; a worker that starts again, or the
    log's end, leaves an open start dead (the workers of a campaign write to one log)."""
    done, dead, open_ = [], [], {}
    for line in log.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        pid = rec.get("pid")
        if "start" in rec:
            if pid in open_:
                dead.append(open_.pop(pid))
            open_[pid] = rec
        else:
            done.append(rec)
            open_.pop(pid, None)
    return done, dead + list(open_.values())


def summary(done: list[dict], dead: list[dict], seconds: float) -> str:
    """The campaign's figures as text."""
    cpu = sorted(r["cpu"] for r in done) or [0.0]
    by = collections.Counter((r["kind"], r["status"]) for r in done)
    findings = collections.defaultdict(list)
    for r in done:
        for kind, detail in r["findings"]:
            findings[kind].append((r["argv"], detail))
    for r in dead:
        findings["died"].append((r["start"], "the worker ended during this case"))
    lines = [f"{len(done):,} cases in {seconds:,.0f} s; {len(dead)} worker deaths",
             "by kind and exit status: " + ", ".join(f"{k} {s}: {n:,}" for (k, s), n in sorted(by.items(), key=str)),
             f"CPU seconds per case: median {cpu[len(cpu) // 2]:.2f}, p99 {cpu[int(len(cpu) * 0.99)]:.2f}, "
             f"max {cpu[-1]:.2f}",
             f"peak memory of a worker: {max((r.get('rss', 0) for r in done), default=0) / 2**30:.2f} GiB",
             "findings: " + (", ".join(f"{k} {len(v)}" for k, v in sorted(findings.items())) or "none")]
    for kind, items in sorted(findings.items()):
        for argv, detail in items[:3]:
            lines.append(f"  {kind}: costgraph {' '.join(map(repr, argv))}\n    {detail[-400:]!r}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=10_000, help="cases in all (default 10,000)")
    p.add_argument("--batch", type=int, default=200, help="cases per worker process (default 200)")
    p.add_argument("--workers", type=int, default=1, help="worker processes at a time (default 1)")
    p.add_argument("--limit", type=float, default=60.0, help="CPU seconds a case may take (default 60)")
    p.add_argument("--memory", type=float, default=4 * 2**30, help="RLIMIT_AS of a worker, bytes (default 4 GiB)")
    p.add_argument("--hours", type=float, default=None, help="stop starting workers after this long")
    p.add_argument("--seed", type=int, default=None, help="the first worker's seed (default: from the time)")
    p.add_argument("--log", default="fuzz.jsonl", help="the JSON lines of every case (appended)")
    p.add_argument("--cycle", action="store_true", help="each case kind a fifth of a worker's cases (a short run)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    log = Path(a.log).resolve()   # the workers run in the checkout's root
    if a.worker:
        worker(a.batch, a.seed, a.limit, log, a.cycle)
        return 0
    seed, started, t0 = a.seed if a.seed is not None else int(time.time()), 0, time.time()
    running: list[subprocess.Popen] = []
    errors = open(log.with_suffix(".stderr"), "a", encoding="utf-8")   # the workers' own failures
    while started < a.cases or running:
        running = [w for w in running if w.poll() is None]
        out_of_time = a.hours is not None and time.time() - t0 > a.hours * 3600
        while len(running) < a.workers and started < a.cases and not out_of_time:
            n = min(a.batch, a.cases - started)
            running.append(subprocess.Popen(
                [sys.executable, "-m", "bench.bench_fuzz", "--worker", "--batch", str(n), "--seed", str(seed), "--limit",
                 str(a.limit), "--log", str(log)] + (["--cycle"] if a.cycle else []), preexec_fn=_bounded(int(a.memory)),
                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=errors))
            seed, started = seed + 1, started + n
        if out_of_time and not running:
            break
        time.sleep(1)
    done, dead = read_log(log)
    print(summary(done, dead, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
