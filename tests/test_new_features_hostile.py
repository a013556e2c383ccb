"""Bad input to the features of issues 27 and 29 (calibrate and --efficiency-profile,
--pipeline-layout, the per-kernel time tables, --runtime): each refused with a located
message, a hint and exit status 2, never a traceback, and never echoing a file's content.

Each test pins one behaviour that a hostile run found wrong (the source of each rule is the
module the message names)."""

from __future__ import annotations

import pytest

from costgraph.cli import main

GPT2 = ["train", "gpt", "--config", "gpt2", "--set", "b=4", "--gpus", "8", "--hardware", "h100-sxm"]


def _run(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("layout, words", [
    ("E", "the loss L comes once, last"),                     # no layers, no loss: Megatron's validate_layer_layout
    ("Et*11L", "places 11 Transformer layer(s) (t); 'gpt' has 12"),
])
def test_a_one_stage_pipeline_layout_is_checked_against_the_model(capsys, layout, words):
    # one stage means p = 1: the layout's checks ran only for p > 1, so 'E' alone trained GPT-2's 12 layers
    rc, out, err = _run(capsys, GPT2 + ["--pipeline-layout", layout])
    assert rc == 2 and words in err and "hint:" in err and "Traceback" not in err
