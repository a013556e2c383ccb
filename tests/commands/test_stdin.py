"""costgraph.commands._stdin: MODEL '-' reads the model file from standard input, named - in what is written, an
empty or oversized input refused with a hint."""

from costgraph.cli import main


def test_regenerate_lines_name_stdin_as_dash(capsys, tmp_path, monkeypatch):
    # `cat gpt.cg | costgraph codegen - -o f.py` (and web) wrote the temporary file standard input was
    # saved in (/tmp/costgraph-stdin-XXXX/<stdin>.cg) into the output's "regenerate with" line.
    import io
    import sys
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "models" / "gpt.cg").read_text(encoding="utf-8")
    for argv in (["codegen", "-", "--config", "gpt2", "--lang", "python", "-o", str(tmp_path / "f.py")],
                 ["web", "-", "--config", "gpt2", "-o", str(tmp_path / "calc.html")]):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))
        assert main(argv) == 0
    capsys.readouterr()
    assert "  costgraph codegen - --lang python --config gpt2\n" in (tmp_path / "f.py").read_text(encoding="utf-8")
    page = (tmp_path / "calc.html").read_text(encoding="utf-8")
    assert '"command":"costgraph web - --config gpt2 -o calc.html"' in page and "costgraph-stdin" not in page


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
