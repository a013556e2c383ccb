"""The fuzz campaign of issue 30, item 5 (``bench/bench_fuzz.py``), in part: its checks catch what
they name, and a few derandomized cases of every kind run clean in a worker under the memory bound.
The full campaign (10,000 cases and more) is the bench script's, by hand."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

import bench.bench_fuzz as B   # the checkout's root is on pytest's path (pyproject: pythonpath)


@pytest.fixture()
def fake_main(monkeypatch):
    """Replace costgraph.cli.main by the function given (what a run does)."""
    from costgraph import cli

    def use(f):
        monkeypatch.setattr(cli, "main", f)
    return use


def _kinds(rec):
    return sorted(k for k, _ in rec["findings"])


def test_the_checks_catch_what_they_name(tmp_path, fake_main):
    """Each finding of the campaign is raised by a run that does it, and none by one that does not."""
    (tmp_path / "model.cg").write_text("x", encoding="utf-8")
    fake_main(lambda argv: 0)
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == []
    fake_main(lambda argv: print("error: bad\nhint: x", file=sys.stderr) or 2)
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == []
    fake_main(lambda argv: print("costgraph: internal error: KeyError", file=sys.stderr) or 3)
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == ["internal"]
    fake_main(lambda argv: 1)
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == ["status"]
    assert _kinds(B.run_one(["fit", "gpt"], tmp_path, 5.0, set())) == []          # fit: 1 = does not fit
    fake_main(lambda argv: 2)
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == ["status"]   # 2 without a message
    fake_main(lambda argv: print(B.FILE_SECRET) or 0)
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == ["leak"]
    fake_main(lambda argv: (tmp_path / "model.cg").write_text("y", encoding="utf-8") and 0)
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == ["changed"]
    fake_main(lambda argv: (tmp_path / "model.cg").write_text("z", encoding="utf-8") and 0)
    assert _kinds(B.run_one(["derive", "gpt", "-o", "model.cg"], tmp_path, 5.0, {"model.cg"})) == []

    def spin(argv):
        t = time.process_time()
        while time.process_time() - t < 5:
            pass
        return 0
    fake_main(spin)
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 0.2, set())) == ["slow"]
    # a hang: stopped at 10x the limit of wall time (the timer in the case, or the kill beside it, whichever
    # comes first), the CPU it used named (a starved case at nice 19 on a loaded machine reads as a hang)
    fake_main(lambda argv: time.sleep(5))
    rec = B.run_one(["derive", "gpt"], tmp_path, 0.05, set())
    assert _kinds(rec) == ["slow"] and "wall time (0.0 s of CPU)" in rec["findings"][0][1], rec
    fake_main(lambda argv: os.kill(os.getpid(), signal.SIGSEGV))   # a crash of the case's process
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == ["died"]
    fake_main(lambda argv: os.write(1, b"Traceback (most recent call last):\n") and 0)   # below sys.stdout
    assert _kinds(B.run_one(["derive", "gpt"], tmp_path, 5.0, set())) == ["internal"]


def test_each_case_runs_in_a_fresh_fork(tmp_path, fake_main):
    """A case's changes to the process (a module's state, the working folder) do not reach the next
    case, and the record holds the child's own CPU time and peak memory."""
    from costgraph import cli

    def dirty(argv):
        cli.DIRTY = True
        return 0
    fake_main(dirty)
    rec = B.run_one(["derive", "gpt"], tmp_path, 5.0, set())
    assert rec["status"] == 0 and not hasattr(cli, "DIRTY") and rec["rss"] > 0 and rec["cpu"] >= 0


def test_fork_and_subprocess_modes_agree(tmp_path):
    """The same case as a fork of this process and as a fresh ``python -m costgraph``: the same exit
    status (2, an unknown model) and no finding either way."""
    fork = B.run_one(["derive", "no-such-model"], tmp_path, 60.0, set())
    fresh = B.run_one(["derive", "no-such-model"], tmp_path, 60.0, set(), mode="subprocess")
    assert (fork["status"], fork["findings"]) == (fresh["status"], fresh["findings"]) == (2, [])


def test_a_dead_worker_names_its_case(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"start": ["derive", "gpt"], "kind": "flags", "pid": 1}\n'
                   '{"start": ["train", "gpt"], "kind": "flags", "pid": 2}\n'
                   '{"argv": ["derive", "gpt"], "status": 0, "cpu": 0.1, "findings": [], "kind": "flags", "pid": 1}\n'
                   '{"start": ["plan", "gpt"], "kind": "flags", "pid": 1}\n'
                   '{"argv": ["train", "gpt"], "status": 0, "cpu": 0.1, "findings": [], "kind": "flags", "pid": 2}\n',
                   encoding="utf-8")   # two workers, one log: worker 1 dies in its second case
    done, dead = B.read_log(log)
    assert len(done) == 2 and dead == [{"start": ["plan", "gpt"], "kind": "flags", "pid": 1}]
    assert "died 1" in B.summary(done, dead, 1.0)


#: findings the campaign reproduces and a known open bug explains, (kind, words of the detail): none
#: since issue 30 item 1 was fixed (a symlinked config.json quoted; `-o --force` onto an import)
KNOWN: set[tuple[str, str]] = set()


def test_a_few_cases_of_every_kind(tmp_path):
    """15 cases (seed 1, three of each kind) in a worker process under RLIMIT_AS 4 GiB: no finding (25 took 24 s
    of CI; the campaign is the bench script's)."""
    log = tmp_path / "fuzz.jsonl"
    assert B.main(["--cases", "15", "--batch", "15", "--seed", "1", "--limit", "60", "--cycle", "--log", str(log)]) == 0
    done, dead = B.read_log(log)
    assert len(done) == 15 and not dead, (log.with_suffix(".stderr").read_text(encoding="utf-8"))[-3000:]
    assert {r["kind"] for r in done} == {"flags", "model", "config", "files", "api"}
    found = [(k, d, r["argv"]) for r in done for k, d in r["findings"]]
    unknown = [f for f in found if not any(f[0] == k and s in f[1] for k, s in KNOWN)]
    assert not unknown, unknown
    if found:
        pytest.xfail(f"known: {found[0][0]} in costgraph {' '.join(map(str, found[0][2]))}")
