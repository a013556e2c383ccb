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


# --- --domain-ranks within the preset's domain (issue 16 trial) ------------------------------------------------------

def test_domain_ranks_within_the_preset(capsys):
    # before: --domain-ranks 10^30 on h100-sxm (8-GPU domains) put all 64 GPUs in one NVLink domain
    argv = ["train", "gpt", "--config", "gpt2", "--gpus", "64", "--tp", "4", "--hardware", "h100-sxm",
            "--domain-ranks", "1000000000000000000000000000000"]
    assert main(argv) == 2
    assert "scale-up domain" in capsys.readouterr().err
