"""The planner's screen counts an FP8 policy's buffers (issue 27 item 3: the screen must leave out no
cost train counts). ``training_memory`` adds the FP8 weight transposes, copies and scales to each
stage's total only; the screen summed the weights, gradients, optimizer and activations, 18.5 GiB
under train for DeepSeek-V3 on 256 GB200s with MXFP8, so most screened rows were out of memory once
derived exactly. A row without a pipeline (p = 1: the screen's forms are train's at its degrees)
must screen to train's exact bytes."""

from unittest import mock

import costgraph
from costgraph.training import plan as planner
from costgraph.training.plan_confirm import checked, exact_memory, layout_of


def test_screened_memory_of_an_fp8_row_is_train_s():
    m = costgraph.load("llama")
    values = m.values("llama-3-8b", s=2048)
    b = m.graph.dims["b"].symbol
    seen = []
    first = planner.confirm

    def spy(model, vals, b_sym, candidates, settings, *args, **kw):
        cands = list(candidates)
        seen.extend((c, settings) for c in cands if c.pp == 1)
        return first(model, vals, b_sym, cands, settings, *args, **kw)

    with mock.patch.object(planner, "confirm", spy):
        res = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=64, precision="fp8-current", top=1)
    assert res.layouts and seen
    for c, settings in seen[:6]:
        at = {**values, b: c.micro_batch}
        exact = exact_memory(m, checked(m, layout_of(c, settings), at), at)
        assert abs(c.memory_bytes - exact) <= 1e-9 * exact, (c, exact)   # float64 screen vs exact bytes
