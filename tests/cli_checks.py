"""Shared checks of a command line run in process (the tests' one copy): ``run`` gives
(exit status, stdout, stderr); ``refused`` asserts a located refusal (exit status 2, a hint, no
traceback or internal error, each given fragment in stderr) and returns stderr."""

from __future__ import annotations

from costgraph.cli import main


#: a model file whose strings are hostile Markdown/HTML (the reports must escape them)
EVIL_MD = ('model evil {\n'
           '  dim b "<script>alert(1)</script> | *x* [l](javascript:x) `c`" default 2\n'
           '  dim h "<img src=x onerror=alert(1)> a_b _e_ & c" default 4\n'
           '  input x[b, h]\n  param w[h, h]\n  y = matmul(x, w)\n  return y\n}\n')


def run(capsys, *argv):
    """``run(capsys, ["derive", "gpt"])`` or ``run(capsys, "derive", "gpt")``: (status, stdout, stderr)."""
    if len(argv) == 1 and isinstance(argv[0], (list, tuple)):
        argv = argv[0]
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


def same_answer(cg, launch_argv, hand_argv):
    """Run a command with ``--launch`` and the same command with hand-written flags (``cg``: the session's
    subprocess runner), both as JSON: equal documents but for the launch's own ``launch`` object (which the
    command's schema validates), returned (issue 32: a launch file gives the hand-written flags' answer)."""
    import json

    from costgraph.export.schema import validator

    a, b = cg(*launch_argv, "--format", "json"), cg(*hand_argv, "--format", "json")
    assert a.returncode == 0, a.stderr
    assert b.returncode == 0, b.stderr
    doc, hand = json.loads(a.stdout), json.loads(b.stdout)
    validator(launch_argv[0]).validate(doc)   # the "launch" object is in each command's schema (launch.json)
    launch = doc.pop("launch")
    assert doc == hand
    return launch
