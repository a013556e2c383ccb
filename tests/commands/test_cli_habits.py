"""Issue 20, item 4: the command line's habits — ``-o -`` is standard output, ``-`` as MODEL reads
the model (or a config.json) from standard input with located errors, ``--version``,
``python -m costgraph``, NO_COLOR / FORCE_COLOR, shell completion, and one ``--over`` grammar for
``sweep``, ``plot`` and ``report``.

Every command runs in process (costgraph.cli.main) but ``python -m costgraph``. The GPT-2 figures:
124,439,808 parameters for ``gpt2`` (Hugging Face's GPT2LMHeadModel count); a config.json of
h 64, l 2, V 100, s_max 128 gives l(12h² + 13h) + hV + h·s_max + 2h = 114,688 (the same formula
``costgraph derive gpt`` prints).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from costgraph import __version__
from costgraph.cli import main

GPT_CG = Path(__file__).resolve().parents[2] / "models" / "gpt.cg"
SMALL_JSON = '{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 2, "vocab_size": 100, "n_positions": 128}'


def run(capsys, *argv, stdin: str | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))
    status = main(list(argv))
    out = capsys.readouterr()
    return status, out.out, out.err


# ---------------------------------------------------------------- -o -

def test_dash_output_is_stdout(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed = run(capsys, "codegen", "gpt", "--lang", "python")
    dashed = run(capsys, "codegen", "gpt", "--lang", "python", "-o", "-")
    assert dashed == printed and printed[0] == 0 and '"""Cost formulas of model \'gpt\'' in printed[1]
    assert run(capsys, "sweep", "gpt", "--config", "gpt2", "--over", "s=1,2", "--quantity", "params", "-o", "-") == \
        (0, "s,params\n1,124439808\n2,124439808\n", "")
    assert list(tmp_path.iterdir()) == []          # no file named '-'


def test_plot_to_stdout_is_svg_text(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, "plot", "gpt", "--config", "gpt2", "--kind", "flops", "-o", "-")
    assert (status, err) == (0, "")
    assert out.startswith('<?xml version="1.0" encoding="utf-8" standalone="no"?>') and out.rstrip().endswith("</svg>")
    assert "forward FLOPs by block" in out and list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- MODEL -

def test_model_from_stdin_is_the_file(capsys, monkeypatch):
    from_file = run(capsys, "derive", str(GPT_CG), "--config", "gpt2", "--format", "json")
    from_stdin = run(capsys, "derive", "-", "--config", "gpt2", "--format", "json", stdin=GPT_CG.read_text(),
                     monkeypatch=monkeypatch)
    assert from_stdin == from_file and from_file[0] == 0
    assert json.loads(from_stdin[1])["quantities"]["params"]["value"] == 124_439_808


def test_config_json_from_stdin(capsys, monkeypatch):
    status, out, err = run(capsys, "derive", "-", "--format", "json", stdin=SMALL_JSON, monkeypatch=monkeypatch)
    assert (status, err) == (0, "")
    assert json.loads(out)["quantities"]["params"]["value"] == 2 * (12 * 64**2 + 13 * 64) + 64 * 100 + 64 * 128 + 2 * 64 \
        == 114_688
    status, out, err = run(capsys, "derive", "-", stdin=SMALL_JSON, monkeypatch=monkeypatch)
    assert "from <stdin>: model_type gpt2 → model 'gpt' with bias" in out


def test_stdin_errors_are_located_at_stdin(capsys, monkeypatch, tmp_path):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert run(capsys, "derive", "-", stdin="model m(h) {\n}\n", monkeypatch=monkeypatch) == (
        2, "", "<stdin>:1:8: syntax error: unexpected '(': expected 'extends' or '{'\n    model m(h) {\n"
               "           ^\nhint: write model NAME { ... } or model NAME extends BASE { option ... }\n")
    status, out, err = run(capsys, "derive", "-", stdin=SMALL_JSON[:-1] + ',\n "x" 1}', monkeypatch=monkeypatch)
    assert (status, err.splitlines()[0]) == (2, "<stdin>:2:6: error: invalid JSON: Expecting ':' delimiter")
    assert list(tmp_path.iterdir()) == []           # the temporary copy is removed


def test_stdin_is_bounded_and_must_be_piped(capsys, monkeypatch):
    from costgraph.commands._stdin import read_stdin
    from costgraph.errors import CostgraphValueError

    with pytest.raises(CostgraphValueError, match="too large for a model or a config.json \\(over 10 bytes\\)"):
        read_stdin(io.BytesIO(b"x" * 11), limit=10)
    assert read_stdin(io.BytesIO(b"x" * 10), limit=10) == "x" * 10
    with pytest.raises(CostgraphValueError, match="not UTF-8"):
        read_stdin(io.BytesIO(b"\xff"), limit=10)

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Tty())
    status, out, err = run(capsys, "derive", "-")
    assert status == 2 and err.startswith("error: MODEL '-' reads the model from standard input, and there is none")


# ---------------------------------------------------------------- --version, python -m

def test_version(capsys):
    assert run(capsys, "--version") == (0, f"costgraph {__version__}\n", "")


def test_python_dash_m():
    p = subprocess.run([sys.executable, "-m", "costgraph", "--version"], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[2])
    assert (p.returncode, p.stdout, p.stderr) == (0, f"costgraph {__version__}\n", "")


# ---------------------------------------------------------------- NO_COLOR, FORCE_COLOR

RED = "\x1b[31m"


def _drawn(console) -> str:
    with console.capture() as cap:
        console.print("[red]x[/red]")
    return cap.get()


def test_no_color_and_force_color(monkeypatch):
    from costgraph.export.progress import stderr_console

    monkeypatch.setenv("TERM", "xterm-256color")
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    assert RED in _drawn(stderr_console(force=True))
    monkeypatch.setenv("NO_COLOR", "1")
    assert _drawn(stderr_console(force=True)) == "x\n"                # https://no-color.org
    monkeypatch.delenv("NO_COLOR")
    assert stderr_console().is_terminal is False                       # pytest's stderr is no terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert stderr_console().is_terminal is True and RED in _drawn(stderr_console())


# ---------------------------------------------------------------- completion

def test_print_completion(capsys):
    pytest.importorskip("shtab", reason="the completion extra (shtab) is not installed")
    from costgraph.commands import names

    assert main(["--print-completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("# AUTOMATICALLY GENERATED by https://github.com/")
    assert "_shtab_costgraph" in script and all(f"_shtab_costgraph_{n}_" in script for n in names())
    assert main(["--print-completion", "zsh"]) == 0
    assert "#compdef costgraph" in capsys.readouterr().out


def test_print_completion_without_shtab(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "shtab", None)
    assert run(capsys, "--print-completion", "bash") == (
        2, "", "costgraph: error: --print-completion needs shtab, which is not installed\n"
               "hint: pip install 'costgraph[completion]' (or pip install shtab)\n")


# ---------------------------------------------------------------- one --over

def test_one_over_grammar():
    from costgraph.commands._analysis import parse_over
    from costgraph.errors import CostgraphValueError
    from costgraph.export.sweep import parse_axis

    assert parse_over("s=1_024,2_048") == ("s", [1024, 2048]) == (parse_axis("s=1_024,2_048").name,
                                                                 list(parse_axis("s=1_024,2_048").values))
    assert parse_over("s=1_024:4_096:x2") == ("s", [1024, 2048, 4096])
    for bad, why in (("s=1,1", "lists a value twice"), ("s=1__0", "only separates groups of three digits"), ("s=1_", "only separates groups"),
                     ("s=8:2:x2", "ends \\(2\\) before it starts \\(8\\)")):
        with pytest.raises(CostgraphValueError, match=why):
            parse_over(bad)
        with pytest.raises(CostgraphValueError, match=why):
            parse_axis(bad)


def test_sweep_and_plot_agree_on_over(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sweep = run(capsys, "sweep", "gpt", "--config", "gpt2", "--over", "s=1,1", "--quantity", "params")
    plot = run(capsys, "plot", "gpt", "--config", "gpt2", "--kind", "memory", "--over", "s=1,1", "-o", "m.svg")
    assert sweep[0] == plot[0] == 2
    assert sweep[2].splitlines()[0] == plot[2].splitlines()[0] == "error: --over 's=1,1' lists a value twice"
    status, out, err = run(capsys, "sweep", "gpt", "--config", "gpt2", "--over", "s=1_024", "--quantity", "params")
    assert (status, out, err) == (0, "s,params\n1024,124439808\n", "")
    status, out, err = run(capsys, "plot", "gpt", "--config", "gpt2", "--kind", "memory", "--over", "s=512,1_024",
                           "-o", "-")
    assert (status, err) == (0, "") and out.count("<svg") == 1 and ">512<" in out and ">1,024<" in out
