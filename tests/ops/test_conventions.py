"""FLOP conventions and precision settings."""

import pytest
import sympy

import costgraph
from costgraph.ops.elementwise import PER_ELEMENT
from costgraph.cli import main


def eq(a, b):
    return sympy.expand(a - b) == 0


def test_all_convention_adds_the_per_element_table(gpt, S):
    b, s, h, a = S.b, S.s, S.h, S.a
    bsh, bas2 = b * s * h, b * a * s**2
    ln = PER_ELEMENT["layernorm"] + PER_ELEMENT["scale"] + PER_ELEMENT["add"]   # γ and β
    other = (2 * ln * bsh                       # ln_1, ln_2
             + (3 + 1 + 4 + 1) * bsh            # bias adds of c_attn, c_proj, c_fc, mlp c_proj
             + PER_ELEMENT["scale"] * bas2      # 1/√d
             + PER_ELEMENT["softmax"] * bas2
             + PER_ELEMENT["dropout"] * (bas2 + 2 * bsh)   # attention, attn-out, MLP dropouts
             + 2 * PER_ELEMENT["add"] * bsh     # two residual adds
             + PER_ELEMENT["gelu"] * 4 * bsh)
    fwd = gpt.costs("layer", convention="all").flops_forward
    assert eq(fwd, 24 * b * s * h**2 + 4 * b * s**2 * h + other)
    # the matmul convention is the default
    assert eq(gpt.costs("layer").flops_forward, 24 * b * s * h**2 + 4 * b * s**2 * h)


def test_fp32_precision_doubles_activation_bytes_but_not_masks(gpt, S):
    c = gpt.costs("layer", precision="fp32")
    # 34bsh = 32bsh of activations + 2bsh of 1-byte masks; 5as²b = 4 + 1 (mask)
    assert eq(c.activation_bytes, (32 * 2 + 2) * S.b * S.s * S.h + (4 * 2 + 1) * S.a * S.s**2 * S.b)


def test_unknown_convention_and_precision_are_errors(gpt):
    with pytest.raises(costgraph.CostgraphValueError, match="unknown FLOP convention"):
        gpt.costs("layer", convention="macs")
    with pytest.raises(costgraph.CostgraphValueError, match="unknown precision"):
        gpt.costs("layer", precision="int3")


# --- derive's header names the causal convention (new-user trial) ----------------------------------------------------

# the header names the causal convention; a FLOP count past the SI prefixes keeps its space
@pytest.mark.parametrize("causal, tail", [
    ("half", ", causal attention products halved; "),
    ("exact", ", causal attention products over the kept pairs (exact); "),
    ("full", "; "),
])
def test_derive_header_names_the_causal_convention(capsys, causal, tail):
    assert main(["derive", "gpt", "--config", "gpt2", "--causal", causal]) == 0
    line = capsys.readouterr().out.splitlines()[2]
    assert line.startswith("FLOPs: 'matmul' convention, 2 FLOPs per multiply-add" + tail)
