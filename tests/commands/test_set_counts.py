"""--set reads whole numbers as the count flags do (1e9, 7.5e9, 1_024), and a refusal of a layout flag names the flag
first (session 43's trial: `--set b=1e9` was refused while `--tp 1e30` was read; `--ep-overlap megatron --pp 2`
was refused as "Megatron's EP overlap needs ...", naming no flag)."""

import pytest

from costgraph.cli import main
from costgraph.commands.common import settings


@pytest.mark.parametrize("text, value", [("b=1e9", 10**9), ("b=7.5e9", 7_500_000_000), ("h=1_024", 1024),
                                         ("h=768", 768), ("s=2E3", 2000)])
def test_set_reads_counts(text, value):
    dims, options = settings([text])
    assert dims == {text.split("=")[0]: value} and options == {}


@pytest.mark.parametrize("text, words", [("b=1.5", "--set b '1.5' is not a positive whole number"),
                                         ("b=1e", "cannot read --set 'b=1e'"), ("b=-1e9", "a positive whole number"),
                                         ("b=0", "--set 'b=0': a dimension is a positive whole number")])
def test_set_refuses_what_is_not_a_whole_count(text, words, capsys):
    assert main(["derive", "gpt", "--set", text]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_set_count_and_digits_agree(capsys):
    assert main(["derive", "gpt", "--set", "b=1e3", "--format", "json"]) == 0
    exp = capsys.readouterr().out
    assert main(["derive", "gpt", "--set", "b=1000", "--format", "json"]) == 0
    assert capsys.readouterr().out == exp


def test_megatron_ep_overlap_refusal_names_the_flag(capsys):
    code = main(["train", "mixtral", "--config", "mixtral-8x7b", "--gpus", "16", "--pp", "2", "--ep", "8",
                 "--ep-overlap", "megatron"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --ep-overlap megatron needs the interleaved schedule when pp > 1")


@pytest.mark.parametrize("argv", [["derive", "gpt", "--config", "gpt2"], ["train", "gpt", "--config", "gpt2", "--gpus", "1"],
                                  ["derive", "examples/hf/gpt2.json"]],
                         ids=["derive", "train", "config.json"])
def test_set_zero_names_the_flag(argv, capsys):
    # `--set b=0` was refused as the API's "'b' must be a positive whole number, got 0", naming no flag
    assert main([*argv, "--set", "b=0"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --set 'b=0': a dimension is a positive whole number\nhint: a dimension counts something: " \
                  "--set b=1, 2, 3, ...\n"


def test_set_negative_hints_like_zero(capsys):
    # session 45 trial: `--set b=-1` hinted "1, 2, 3, ..." where `--set b=0` hints "--set b=1, 2, 3, ...": the same now
    for value in ("0", "-1"):
        assert main(["train", "gpt", "--config", "gpt2", "--gpus", "1", "--set", f"b={value}"]) == 2
        assert capsys.readouterr().err == f"error: --set 'b={value}': a dimension is a positive whole number\n" \
            "hint: a dimension counts something: --set b=1, 2, 3, ...\n"
