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
