"""Fixes from a new user's and a hostile tester's trial of issues 19 and 20 (branch trial20).

Each test reproduces one defect the trial met, run in process (costgraph.cli.main)."""

from __future__ import annotations

from costgraph.cli import main


def test_web_required_output_hint_is_whole(capsys):
    # `costgraph web gpt` without -o: the hint quoted -o's help up to its first ';', which cut the
    # help's parenthesis ("(required; costgraph web --help ..."), and --help said "- for standard
    # output" twice.
    assert main(["web", "gpt"]) == 2
    err = capsys.readouterr().err
    assert "hint: give --output FILE — the page to write (required); costgraph web --help lists its arguments" in err


def test_batch_zero_is_named_with_its_flag(capsys):
    # `infer/fit --serve --batch 0` was refused at the model file (llama.cg:71: "a dimension of tensor
    # 'tokens' is b = 0"), and a bad --gpus/--tp hinted "--set --gpus=N", which is no command.
    assert main(["infer", "llama", "--config", "llama-3-8b", "--prompt", "5", "--generate", "5", "--batch", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: '--batch' must be a positive whole number, got 0 (int)") and ".cg" not in err
    assert main(["fit", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--serve", "--prompt", "5",
                 "--generate", "5", "--batch", "-3"]) == 2
    assert "'--batch' must be a positive whole number, got -3" in capsys.readouterr().err
    assert main(["fit", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--gpus", "0"]) == 2
    assert "hint: give --gpus a whole number above 0 (e.g. --gpus 2; in Python gpus=2)" in capsys.readouterr().err


def test_regenerate_lines_name_stdin_as_dash(capsys, tmp_path, monkeypatch):
    # `cat gpt.cg | costgraph codegen - -o f.py` (and web) wrote the temporary file standard input was
    # saved in (/tmp/costgraph-stdin-XXXX/<stdin>.cg) into the output's "regenerate with" line.
    import io
    import sys
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "models" / "gpt.cg").read_text(encoding="utf-8")
    for argv in (["codegen", "-", "--config", "gpt2", "--lang", "python", "-o", str(tmp_path / "f.py")],
                 ["web", "-", "--config", "gpt2", "-o", str(tmp_path / "calc.html")]):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))
        assert main(argv) == 0
    capsys.readouterr()
    assert "  costgraph codegen - --lang python --config gpt2\n" in (tmp_path / "f.py").read_text(encoding="utf-8")
    page = (tmp_path / "calc.html").read_text(encoding="utf-8")
    assert '"command": "costgraph web - --config gpt2 -o calc.html"' in page and "costgraph-stdin" not in page


def test_empty_stdin_is_named(capsys, monkeypatch):
    # `costgraph derive - < /dev/null` said "<stdin>:1:1: a model file must define exactly one model,
    # found 0"; more than 16 MiB had no hint.
    import io
    import sys

    import pytest

    from costgraph.commands._stdin import read_stdin
    from costgraph.errors import CostgraphValueError

    for text in (b"", b" \n\t\n"):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text), encoding="utf-8"))
        assert main(["derive", "-"]) == 2
        assert capsys.readouterr().err.startswith("error: <stdin> is empty: MODEL '-' reads the model file")
    with pytest.raises(CostgraphValueError) as e:
        read_stdin(io.BytesIO(b"x" * 11), limit=10)
    assert e.value.hint == "a model file or a config.json is a few kB: check what is piped in"


def test_getting_started_train_numbers():
    # docs/getting-started.md showed 1318395648 bytes (--attention eager's total) and largest_b 114
    # (stale: eager gives 103), not train's flash-attention default; `costgraph train gpt --config gpt2 --tp 2
    # --gpus 4 --zero 1 --hardware h100-sxm` prints 941,203,200 bytes and b = 226.
    from pathlib import Path

    import costgraph

    doc = (Path(__file__).resolve().parent.parent / "docs" / "getting-started.md").read_text(encoding="utf-8")
    gpt = costgraph.load("gpt")
    r = gpt.train(t=2, gpus=4, zero=1, values=gpt.values("gpt2"), hardware="h100-sxm", mfu=0.45, tokens=1e9)
    total, largest = r.to_dict()["memory"]["total"]["value"], r.fits["largest_b"]
    assert (total, largest) == (941203200, 226)
    assert f'r.to_dict()["memory"]["total"]["value"]                          # {total}\n' in doc
    assert f'r.fits["largest_b"]                   # {largest}: ' in doc
