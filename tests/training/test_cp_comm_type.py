"""--cp-comm-type: how context parallelism exchanges K and V (costgraph.choices.CP_COMM_TYPE).

Sources: Megatron-LM @ d98e8a64 transformer_config.py ``cp_comm_type`` ("p2p": KV chunks exchanged in a ring, "async
and can be overlapped with attention compute"; "all_gather": "All-gather to get full sequence of KV before
attention. The all-gather is not async, and cannot be overlapped"), arguments.py ``--cp-comm-type`` default
["p2p"]; Transformer Engine @ d0067d0d transformer_engine/pytorch/attention/dot_product_attention/
context_parallel.py ``AttnFuncWithCPAndKVAllGather``: forward ``gather_along_first_dim(k, cp_group)`` and ``(v,
...)``; backward gathers K and V again (``gather_along_first_dim(k, ctx.cp_group)``) and reduce-scatters dK and dV
(``reduce_scatter_along_first_dim(dk, ctx.cp_group)``); the Llama 3 report (arXiv 2407.21783 §3.3.2) runs it.
"""

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.hardware import preset
from costgraph.parallel.communication import communication
from costgraph.parallel.layout import Layout
from costgraph.training.steptime import step_time

H100 = preset("h100-sxm")


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


def _parts(model, layout):
    return communication(model.graph, layout.filled())["cp"].parts


def test_all_gather_gathers_k_and_v_again_in_the_backward(gpt):
    ring = _parts(gpt, Layout(c=4, gpus=4, m=1))
    gather = _parts(gpt, Layout(c=4, gpus=4, m=1, cp_comm_type="all_gather"))
    # per attention layer: p2p counts K/V forward (all-gather) + dK/dV backward (reduce-scatter); all_gather adds
    # the backward's second all-gather of K and V, of the forward's size
    assert [p.op for p in ring] == ["all-gather", "reduce-scatter"] * (len(ring) // 2)
    assert [p.op for p in gather] == ["all-gather", "all-gather", "reduce-scatter"] * (len(ring) // 2)
    assert len(gather) == 3 * len(ring) // 2
    for fwd, again in zip(gather[0::3], gather[1::3]):
        assert again.what.endswith("(backward)") and fwd.what.endswith("(forward)")
        assert (again.op, again.group, again.elements, again.dtype_bytes, again.calls) == \
               (fwd.op, fwd.group, fwd.elements, fwd.dtype_bytes, fwd.calls)


def test_all_gather_is_exposed_under_every_overlap_convention(gpt):
    vals = gpt.values("gpt2", b=1, s=8192)
    for conv in ("megatron", "torchtitan", "none"):
        ring = step_time(gpt.graph, Layout(c=2, gpus=2, m=1, overlap=conv), H100)["overlap"]
        gather = step_time(gpt.graph, Layout(c=2, gpus=2, m=1, overlap=conv, cp_comm_type="all_gather"),
                           H100)["overlap"]
        assert gather.kinds["cp"].rule == "exposed"
        assert ring.kinds["cp"].rule == ("exposed" if conv == "none" else "ring")
        total = gather.kinds["cp"].seconds.xreplace(vals)
        assert gather.exposed()["cp"].xreplace(vals) == total > 0
        # the same bytes per transfer: the all_gather step's CP seconds are 3/2 of the ring's (3 transfers, not 2)
        assert total / ring.kinds["cp"].seconds.xreplace(vals) == sympy.Rational(3, 2)


def test_unknown_value_refused_and_named_in_train(capsys):
    with pytest.raises(CostgraphValueError):
        Layout(c=2, cp_comm_type="a2a").filled()
    from costgraph.cli import main

    assert main(["train", "gpt", "--config", "gpt2", "--gpus", "2", "--cp", "2", "--set", "s=4096",
                 "--cp-comm-type", "all_gather"]) == 0
    out = capsys.readouterr().out
    assert "CP communication: --cp-comm-type all_gather (K and V all-gathered" in out
    assert main(["train", "gpt", "--config", "gpt2", "--gpus", "2", "--cp", "2", "--set", "s=4096"]) == 0
    assert "CP communication: --cp-comm-type p2p (default)" in capsys.readouterr().out


def test_train_names_it_at_cp_1_as_not_applying(capsys):
    """At cp 1 no K and V are exchanged: a given --cp-comm-type is said not to apply (it was printed as the CP
    exchange, as if it were used), and the default at cp 1 gets no line (as ZeRO-3's gathered line below ZeRO 3)."""
    from costgraph.cli import main

    argv = ["train", "gpt", "--config", "gpt2", "--gpus", "2", "--set", "s=4096"]
    assert main([*argv, "--cp-comm-type", "all_gather"]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("CP communication")]
    assert lines == ["CP communication: --cp-comm-type all_gather does not apply (cp 1: no context parallelism, "
                     "no K and V exchanged)"]
    assert main(argv) == 0
    assert "CP communication" not in capsys.readouterr().out


def test_plan_passes_it_to_every_row_and_its_check_command(gpt):
    from costgraph.training.planning import plan_layouts

    res = plan_layouts(gpt, gpt.values("gpt2", s=8192), gpus=4, hardware="h100-sxm", global_batch=8, top=3,
                       cp_comm_type="all_gather")
    assert res.settings["cp_comm_type"] == "all_gather"
    assert res.check_command(res.layouts[0]).endswith("--cp-comm-type all_gather")


def test_train_json_names_it_and_the_schema_documents_it(capsys):
    """train's JSON carries the type in its ``plan`` object, a key the schema documents (export/schemas/train.json:
    every other key of that object is documented there)."""
    import json

    from costgraph.cli import main
    from costgraph.export import schema as schemas

    assert main(["train", "gpt", "--config", "gpt2", "--gpus", "2", "--cp", "2", "--set", "s=4096",
                 "--cp-comm-type", "all_gather", "--format", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert plan["cp_comm_type"] == "all_gather"
    props = schemas.schema("train")["$defs"]["model"]["properties"]["plan"]["properties"]
    assert set(plan) <= set(props) and props["cp_comm_type"]["enum"] == ["p2p", "all_gather"]
