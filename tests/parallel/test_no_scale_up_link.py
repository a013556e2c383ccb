"""A preset without a scale-up link (Apple M-series: ``scale_up_bandwidth = 0``, domain 1).

Found by the CLI property tier (issue 18): ``plan gpt --config gpt2 --global-batch 16
--hardware m3-max --gpus 2`` crashed (exit 3, a ``Piecewise`` with ``1/0`` in its scale-up
branch reached ``lambdify``). Every group of more than one device leaves the domain of 1, so
its link is the scale-out one; a group of one sends nothing.
"""

import sympy

from costgraph import cli
from costgraph.engine.symbols import dim
from costgraph.hardware import preset
from costgraph.parallel.placement import link
from costgraph.cli import main


def test_link_is_scale_out_without_a_scale_up_link():
    hw = preset("m3-max")
    assert hw.scale_up_bandwidth == 0 and hw.scale_up_domain == 1
    down = (sympy.Rational(hw.latency_scale_out_ns, 10**9), sympy.Integer(hw.scale_out_bandwidth))
    assert link(1, 2, hw, 2) == down
    # a symbolic degree: no Piecewise with a zero bandwidth in it
    assert link(1, dim("t"), hw) == down
    assert down[1] == 5_000_000_000      # hardware.toml: Thunderbolt 4, 5 GB/s per direction


def test_plan_on_a_preset_without_a_scale_up_link(capsys):
    status = cli.main(["plan", "gpt", "--config", "gpt2", "--global-batch", "16",
                       "--hardware", "m3-max", "--gpus", "2", "--format", "json"])
    out = capsys.readouterr()
    assert status == 0, out.err
    assert "internal error" not in out.err


# --- issue 30 item 2: a zero scale-out bandwidth where traffic needs it ------------------------------------

import re  # noqa: E402
from importlib.resources import files  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def no_scale_out(tmp_path, monkeypatch):
    """A user table (COSTGRAPH_DATA) with the bundled h100-sxm's figures as 'solo8' but scale_out_bandwidth = 0."""
    bundled = (files("costgraph") / "hardware.toml").read_text(encoding="utf-8")
    body = re.search(r"^\[h100-sxm\]\n(.*?)(?=^\[)", bundled, re.S | re.M).group(1)
    body = re.sub(r"^scale_out_bandwidth = .*$", "scale_out_bandwidth = 0  # source: a one-node test machine",
                  body, flags=re.M)
    (tmp_path / "hardware.toml").write_text("[solo8]\n" + body)
    monkeypatch.setenv("COSTGRAPH_DATA", str(tmp_path))


@pytest.mark.parametrize("argv", [
    ["train", "llama", "--config", "llama-2-7b", "--hardware", "solo8", "--gpus", "16"],
    ["train", "llama", "--config", "llama-2-7b", "--hardware", "solo8", "--gpus", "16", "--tp", "8"],
    ["plan", "llama", "--config", "llama-2-7b", "--hardware", "solo8", "--gpus", "16", "--global-batch", "64"],
])
def test_zero_scale_out_bandwidth_across_nodes_is_refused(no_scale_out, capsys, argv):
    """Two nodes of 8 with scale_out_bandwidth = 0 exited 3 (NaN in a symbolic Max, a complex float);
    now refused, naming the preset and the figure."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "hardware 'solo8' has scale_out_bandwidth = 0" in err and "hint:" in err, err


def test_zero_scale_out_bandwidth_inside_one_node_still_runs(no_scale_out, capsys):
    """Inside one domain of 8 no group crosses nodes: train runs; its TP all-reduce uses NVLink's figure."""
    hw = preset("solo8")
    assert hw.scale_out_bandwidth == 0
    # h100-sxm's NVLink at NCCL's busbw (hardware.toml scale_up_busbw: NCCL src/graph/topo.h 20.6 GB/s x 18 links)
    assert link(1, 8, hw, 8) == (sympy.Rational(hw.latency_scale_up_ns, 10**9), 370_800_000_000)
    assert link(1, 8, hw, 8, rate="line")[1] == 450_000_000_000
    assert cli.main(["train", "llama", "--config", "llama-2-7b", "--hardware", "solo8", "--gpus", "8", "--tp", "8"]) == 0
    with pytest.raises(Exception, match="scale_out_bandwidth = 0"):
        link(1, 16, hw, 16)


# --- --domain-ranks within the preset's domain (issue 16 trial) ------------------------------------------------------

def test_domain_ranks_within_the_preset(capsys):
    # before: --domain-ranks 10^30 on h100-sxm (8-GPU domains) put all 64 GPUs in one NVLink domain
    argv = ["train", "gpt", "--config", "gpt2", "--gpus", "64", "--tp", "4", "--hardware", "h100-sxm",
            "--domain-ranks", "1000000000000000000000000000000"]
    assert main(argv) == 2
    assert "scale-up domain" in capsys.readouterr().err
