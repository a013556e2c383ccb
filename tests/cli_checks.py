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
