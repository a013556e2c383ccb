"""Shared checks of a command line run in process (the tests' one copy): ``run`` gives
(exit status, stdout, stderr); ``refused`` asserts a located refusal (exit status 2, a hint, no
traceback or internal error, each given fragment in stderr) and returns stderr."""

from __future__ import annotations

from costgraph.cli import main


def run(capsys, argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def refused(capsys, argv, *fragments):
    rc, out, err = run(capsys, argv)
    assert rc == 2, (rc, out, err)
    assert "hint:" in err and "Traceback" not in err and "internal error" not in err
    for f in fragments:
        assert f in err, err
    return err
