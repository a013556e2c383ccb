"""The confirmation's training FLOPs (issue 27 item 6, speed): derived once for the confirmed layouts that differ
only in the ZeRO stage and SP (plan_confirm.flops_at), the very dict training_flops gives each of them."""

import itertools

from costgraph.parallel.layout import Layout
from costgraph.training.compute import training_flops
from costgraph.training.plan_confirm import flops_at


def test_flops_shared_across_zero_and_sp_equal_each_layouts_own(gpt):
    cg = gpt.graph
    for recompute in ("none", "selective", "full"):
        got = []
        for zero, sp in itertools.product((0, 1, 3), (False, True)):
            L = Layout(t=2, p=2, d=2, m=4, zero=zero, sp=sp, recompute=recompute)
            mine = flops_at(cg, L)
            assert mine == training_flops(cg, L.filled())   # exact SymPy equality, every entry
            got.append(mine)
        assert all(g is got[0] for g in got)   # one derivation for the six
    # the recomputation is read (the key is not the ZeRO stage and SP alone): full re-runs more than none
    full, none = (flops_at(cg, Layout(t=2, p=2, d=2, m=4, recompute=r))["recompute_per_iteration"]
                  for r in ("full", "none"))
    assert full != none
