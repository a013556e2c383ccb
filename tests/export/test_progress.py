"""The progress bar (costgraph.export.progress): on stderr only, only after the delay,
and the planner's step count is its real amount of work."""

import costgraph
from costgraph.export import progress as P


def test_bar_goes_to_stderr_after_the_delay(capsys):
    with P.progress("working", total=3, delay=0.0, force=True) as bar:
        for _ in range(3):
            bar.advance()
        assert bar.shown
    out = capsys.readouterr()
    assert out.out == "" and "working" in out.err


def test_no_bar_for_quick_work_or_a_pipe(capsys):
    with P.progress("working", total=3, delay=60.0, force=True) as bar:
        bar.advance(3)
        assert not bar.shown
    with P.progress("working", total=3, delay=0.0) as bar:   # stderr is not a terminal under pytest
        bar.advance(3)
        assert not bar.shown
    assert capsys.readouterr().err == ""


def test_planner_advances_exactly_its_step_count(monkeypatch):
    from costgraph.hardware import preset
    from costgraph.training.plan import plan

    seen = []
    orig = P._Bar.close
    monkeypatch.setattr(P._Bar, "close", lambda self: (seen.append((self.done, self.total)), orig(self)))
    m = costgraph.load("gpt")
    plan(m, m.values("gpt2"), gpus=8, hardware=preset("h100-sxm"), global_batch=16)
    assert len(seen) == 1 and seen[0][0] == seen[0][1] > 0
