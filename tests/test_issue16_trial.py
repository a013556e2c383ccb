"""Fixes from a new user's trial of issue 16's options (hostile input and a crash)."""

import pytest

from costgraph.cli import main


def test_fit_changes_after_a_named_recompute_policy(capsys):
    # torchtitan-op is not on the none < selective < full ladder: what would make it fit tries full
    # (before: an internal error, tuple.index)
    argv = ["train", "gpt", "--config", "gpt2", "--set", "b=8", "s=1024", "--recompute", "torchtitan-op",
            "--memory", "1GB", "--attention", "eager"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "does NOT fit" in out and "--recompute full" in out


@pytest.mark.parametrize("v", ["1025", "1000000000000000000000000000000"])
def test_virtual_stages_are_bounded(capsys, v):
    # before: v = 10^30 hung (the chunk layout is built per chunk)
    argv = ["train", "gpt", "--config", "gpt2", "--pp", "2", "--schedule", "interleaved", "--micro-batches", "4",
            "--virtual-stages", v]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "at most 1024 model chunks" in err and "hint:" in err


def test_domain_ranks_within_the_preset(capsys):
    # before: --domain-ranks 10^30 on h100-sxm (8-GPU domains) put all 64 GPUs in one NVLink domain
    argv = ["train", "gpt", "--config", "gpt2", "--gpus", "64", "--tp", "4", "--hardware", "h100-sxm",
            "--domain-ranks", "1000000000000000000000000000000"]
    assert main(argv) == 2
    assert "scale-up domain" in capsys.readouterr().err


def test_bare_count_needs_devices(capsys):
    # before: --params with --gpus 0 answered for "1 GPUs"
    assert main(["train", "--params", "7e9", "--gpus", "0"]) == 2
    assert "--gpus must be a positive whole number" in capsys.readouterr().err
