"""Issue 18, internal errors round three: each run that ended in "this is a bug"
(exit 3) now ends in a clear message and exit 2 (or a right answer); no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

HINT = "--config NAME or --set NAME=VALUE"


def _cg(*argv: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "costgraph.cli", *argv], capture_output=True, text=True,
                          timeout=timeout)


def _refused(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "this is a bug" not in p.stderr, p.stderr
    return p.stderr


def test_infer_without_sizes_names_them():
    err = _refused(_cg("infer", "mixtral", "--hardware", "h100-sxm", "--prompt", "16", "--generate", "16"))
    assert "error: no value for E, V, a, d, h, i, k, kv, l\n" in err and HINT in err


def test_plot_memory_without_sizes_names_them(tmp_path):
    err = _refused(_cg("plot", "gpt", "--set", "s=16", "--kind", "memory", "-o", str(tmp_path / "m.svg")))
    assert "error: no value for V, a, b, h, l, s_max\n" in err and HINT in err
    assert not (tmp_path / "m.svg").exists()


def test_plot_flops_without_sizes_names_them(tmp_path):
    err = _refused(_cg("plot", "gpt", "--set", "s=16", "--kind", "flops", "-o", str(tmp_path / "f.svg")))
    assert "error: no value for b, h, l\n" in err and HINT in err
