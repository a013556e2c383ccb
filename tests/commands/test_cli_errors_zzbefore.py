"""costgraph.cli_errors: argparse's own errors keep its usage and gain what was expected and a hint, exit status 2."""

import pytest

from costgraph.cli import main


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


INFER = ["infer", "llama", "--config", "llama-3-8b", "--prompt", "8", "--generate", "2"]


@pytest.mark.parametrize("args, error, hint", [
    (INFER + ["--promt", "5"], "costgraph infer: error: unrecognized arguments: --promt 5",
     "hint: did you mean --prompt? costgraph infer --help lists its arguments"),
    (INFER + ["--promt", "5", "--batchh=3"], "costgraph infer: error: unrecognized arguments: --promt 5 --batchh=3",
     "hint: --promt: did you mean --prompt? --batchh: did you mean --batch? costgraph infer --help lists its arguments"),
    (["derive", "gpt", "extra"], "costgraph derive: error: unrecognized arguments: extra",
     "hint: it takes no more positional values; costgraph derive --help lists its arguments"),
    (INFER + ["--compute", "fp9"],
     "costgraph infer: error: argument --compute: invalid choice: 'fp9' (choose from 'bf16', 'fp16', 'fp8', 'tf32', "
     "'fp32')", "hint: did you mean 'fp8'? one of: bf16, fp16, fp8, tf32, fp32; costgraph infer --help lists its "
                "arguments"),
    (["drive", "gpt"], None, "hint: did you mean 'derive'? one of: derive, train, "),
    (["derive", "gpt", "--format", "xml"], None,
     "hint: one of: text, latex, json; costgraph derive --help lists its arguments"),
    (INFER + ["--batch", "x"], "costgraph infer: error: argument --batch: invalid int value: 'x'",
     "hint: --batch takes a whole number, e.g. 8; costgraph infer --help lists its arguments"),
    (["infer", "llama", "--generate", "2"], "costgraph infer: error: the following arguments are required: --prompt",
     "hint: give --prompt PROMPT — prompt tokens per sequence P: a whole number, e.g. 2048, 1e7 or 10**7 (at most "
     "10**15); costgraph infer --help lists its arguments"),
    (["derive"], "costgraph derive: error: the following arguments are required: model", "hint: give model — "),
    (["plot", "gpt", "--kind", "memory"], "costgraph plot: error: the following arguments are required: -o/--output",
     "hint: give --output FILE — "),
    (INFER + ["--batch"], "costgraph infer: error: argument --batch: expected one argument",
     "hint: --batch BATCH — concurrent sequences b (default 1): give its value after it; costgraph infer --help "
     "lists its arguments"),
    (INFER + ["--p", "3"], "costgraph infer: error: ambiguous option: --p could match --prompt, --page-size, --peak, --pp",
     "hint: write the flag in full: --prompt or --page-size or --peak or --pp; costgraph infer --help lists its "
     "arguments"),
    # a type function's own "(hint: ...)" becomes the hint line
    (INFER + ["--page-size", "0"], "costgraph infer: error: argument --page-size: --page-size '0' is not a positive "
                                   "whole number",
     "hint: a positive whole number, e.g. 1000, 1e12 or 10**12; costgraph infer --help lists its arguments"),
    # a removed flag names the one that took its place (not difflib's closest, --no-loss), where the command has it
    (["train", "llama", "--gpus", "8", "--loss-fusion", "fused"],
     "costgraph train: error: unrecognized arguments: --loss-fusion fused",
     "hint: --loss-fusion was replaced by --cross-entropy: 'fused' is --cross-entropy megatron-fused, 'unfused' is "
     "--cross-entropy megatron; costgraph train --help lists its arguments"),
], ids=["unknown-flag", "two-unknown-flags", "extra-positional", "invalid-choice", "unknown-command",
        "invalid-format", "wrong-type", "missing-flag", "missing-positional", "missing-output", "no-value",
        "ambiguous", "type-hint", "retired-flag"])
def test_argparse_errors_have_hints(args, error, hint, capsys):
    code, out, err = _cli(capsys, *args)
    assert code == 2 and not out and "Traceback" not in err
    lines = err.splitlines()
    assert lines[0].startswith("usage: costgraph")       # argparse's usage is kept
    if error is not None:
        assert lines[-2] == error
    assert lines[-1].startswith(hint)
    assert lines[-1].endswith("--help lists its arguments")
