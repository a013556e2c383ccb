"""The planner's variants (issue 27 item 2; costgraph.options, costgraph.training.plan_variants):
the requirements declared beside each variant are exactly what train refuses (DeepSpeed's offload
rules, Megatron's EP-overlap rules, as Layout checks them), a variant row's check command gives
train's figures, GPipe is pruned by a bound that holds on train, and --pipeline-layout rows carry
the layout text."""

import shlex

import pytest
import sympy

import costgraph
from costgraph.cli import _parser
from costgraph.commands._analysis import train_layout
from costgraph.commands.common import load_any, settings
from costgraph.errors import CostgraphValueError
from costgraph.options import ACROSS_GROUPS, BY_FIELD, DOMINATED_SCHEDULES, Space, not_searched, searched, variants
from costgraph.parallel.layout import Layout
from costgraph.training.plan import Candidate
from costgraph.hardware import preset
from costgraph.training.plan_confirm import checked, exact_figures, layout_of
from costgraph.training.plan_variants import layout_fields
from costgraph.training.planning import PlanResult

ALL = Space(gpus=16, max_tp=8, layers=8, experts=(16,), top_k=4, domains=2, fp8_policies=("fp8-current",),
            allow_fp8=True, allow_offload=True, exhaustive=True, modules=("mlp", "layernorm"))


def _refused(layout) -> bool:
    try:
        layout.filled()
    except CostgraphValueError:
        return True
    return False


def test_offload_requirements_are_trains():
    """DeepSpeed (deepspeed/runtime/zero/offload_config.py: offload_param "Valid only with stage 3";
    ZeRO-Offload moves partitioned gradients: stage 2 or 3), as Layout._check_offload refuses: a variant's
    ``requires`` on the ZeRO stage is exactly the stages train accepts."""
    offload = [v for v in variants(Space(gpus=8, max_tp=8, layers=8, allow_offload=True))
               if len(v) > 1 and "offload_activations" not in v]   # activation offload: test_plan_published.py
    assert len(offload) == 8   # {none, cpu, nvme}² but the base; none refused by both requirements at once
    for v in offload:
        fields = {k: x for k, x in layout_fields(v).items() if k.startswith("offload")}
        accepted = tuple(z for z in range(4) if not _refused(Layout(gpus=8, zero=z, **fields)))
        assert accepted == v["requires"]["zero"], (fields, accepted)


def test_ep_overlap_requirements_are_trains():
    """Megatron's EP overlap (transformer_config.py, costgraph.parallel.ep_time.check_overlap): no full
    recomputation, and the interleaved schedule when p > 1 — the declared requirement, checked on train."""
    (v,) = [v for v in variants(Space(gpus=8, max_tp=8, layers=8, experts=(8,), exhaustive=True))
            if v.get("ep_overlap") == "megatron"]
    need = v["requires"]
    for r in ("none", "selective", "full"):
        for sched, vs in (("1f1b", 1), ("interleaved", 2), ("zb-h1", 1), ("dualpipe", 1)):
            ok = not _refused(Layout(gpus=8, p=2, m=4, e=2, recompute=r, schedule=sched, v=vs, ep_overlap="megatron"))
            assert ok == (r in need["recompute"] and sched in need["schedule"]), (r, sched)


def test_variants_are_searched_only_when_asked():
    """Without --allow-fp8/--allow-offload/--exhaustive no variant is searched and each is named under
    not_searched; with them each is in `searched`, none under not_searched."""
    base = Space(gpus=8, max_tp=8, layers=8, experts=(8,), top_k=2, domains=2, fp8_policies=("fp8-current",))
    assert [v for v in variants(base) if len(v) > 1] == []
    assert {"policy", "offload_optimizer", "offload_params", "ep_overlap", "recompute_modules"} <= set(not_searched(base))
    got = searched(ALL)
    assert got["policy"] == [None, "fp8-current"] and got["offload_params"] == ["none", "cpu", "nvme"]
    assert got["route_nodes"] == [None, 1] and ["mlp", "layernorm"] in got["recompute_modules"]
    assert not_searched(ALL) == {"variant combinations": ACROSS_GROUPS}
    groups = [{BY_FIELD[k].extra["group"] for k in v if k != "requires"} for v in variants(ALL)]
    # one group at a time, but FP8 with offload together (options.JOINT_GROUPS): every FP8 policy with every
    # offload combination, whose requirements (ZeRO 2 or 3; 3 for the parameters) it keeps
    assert groups[0] == set() and all(len(g) == 1 or g == {"precision", "offload"} for g in groups[1:])
    joint = [v for v in variants(ALL) if "policy" in v and len(v) > 2]
    alone = [v for v in variants(ALL) if "policy" not in v and any(k in ("offload_optimizer", "offload_params")
                                                                   for k in v)]
    # activation offload: a group of its own (Megatron's terms, test_plan_published.py), with no FP8 policy
    assert got["offload_activations"] == [False, "0.5"]
    assert [v for v in variants(ALL) if "offload_activations" in v] == \
        [{"offload_activations": "0.5", "requires": {"p": (1,), "recompute": ("none",)}}]
    assert len(joint) == len(alone) == 8 and all(v["policy"] == "fp8-current" for v in joint)
    assert {(v.get("offload_optimizer"), v.get("offload_params"), v["requires"]["zero"]) for v in joint} == \
        {(v.get("offload_optimizer"), v.get("offload_params"), v["requires"]["zero"]) for v in alone}


@pytest.fixture(scope="module")
def llama():
    m = costgraph.load("llama")
    return m, m.values("llama-3-8b", s=1024, b=2)


def _train(words: str):
    args = _parser().parse_args(shlex.split(words)[1:])
    dims, options = settings(args.set)
    model, values = load_any(args, dims, options)
    r = model.train(train_layout(args, args.micro_batches), values=values, hardware=args.hardware,
                    global_batch=args.global_batch, efficiency=args.efficiency)
    return (int(sympy.ceiling(r.most_loaded(values).memory["total"].xreplace(values))),
            float(r.step["total"].xreplace(values)))


@pytest.mark.parametrize("options", [{"policy": "fp8-current"}, {"offload_optimizer": "cpu"},
                                     {"policy": "fp8-current", "offload_optimizer": "cpu"},
                                     {"recompute_modules": ("mlp", "layernorm")},
                                     {"recompute_method": "block", "recompute_num_layers": 2}],
                         ids=lambda o: "-".join(map(str, o.values())))
def test_variant_row_is_train(llama, options):
    """plan = train for a variant row: the Layout the planner confirms (layout_of) and the row's check
    command run through train's parser give the same memory (bytes) and step time."""
    m, values = llama
    rec = "selective" if "recompute_modules" in options else "full" if "recompute_method" in options else "none"
    c = Candidate(2, 1, 4, 1, 1, 2, rec, True, 2, 8, 0, 0, 0, options=options)
    st = dict(attention="flash", policy="mixed", optimizer="adam", gpus=8)
    mem, step = exact_figures(m, checked(m, layout_of(c, st), values), values, preset("h100-sxm"), None)
    res = PlanResult("llama", 8, "h100-sxm", 32, 80 * 10**9, None, 1, {}, [], dict(
        st, precision="mixed", command="costgraph train llama --config llama-3-8b --set s=1024 --profile korthikanti"))
    row = {**c.as_dict(), "memory_bytes": mem, "step_seconds": float(step)}
    words = res.check_command(row)
    assert all(str(x) in words for x in options.values() if not isinstance(x, tuple))
    assert _train(words) == (mem, float(step))


def test_gpipe_is_dominated_by_1f1b_on_train(llama):
    """The bound GPipe is pruned by (options.DOMINATED_SCHEDULES): on train, its step time equals its 1F1B
    twin's and its memory is at least it (every micro-batch in flight; Narayanan et al. 2021 §2.2)."""
    m, values = llama
    assert DOMINATED_SCHEDULES["gpipe"][0] == "1f1b"
    figs = {}
    for sched in ("1f1b", "gpipe"):
        r = m.train(Layout(t=2, p=2, gpus=8, m=8, schedule=sched), values=values, hardware="h100-sxm")
        figs[sched] = (int(sympy.ceiling(r.most_loaded(values).memory["total"].xreplace(values))),
                       r.step["total"].xreplace(values))
    assert figs["gpipe"][1] == figs["1f1b"][1] and figs["gpipe"][0] > figs["1f1b"][0]


def test_chunk_layout_row_is_train(llama):
    """plan = train for a row of a generated chunk layout (options.chunk_layouts: PP 4 × VP 3 of Llama-3-8B's
    32 layers, which no even split serves): the Layout the planner confirms and its check command, which
    carries the text, give the same memory and step time; the text sets each rank's layers."""
    from costgraph.options import chunk_layouts

    m, values = llama
    text = dict(chunk_layouts(Space(gpus=8, max_tp=8, layers=32), 4))[3]
    assert text == "Et*2|(t*3|)*10L"
    c = Candidate(1, 4, 2, 1, 1, 1, "none", False, 2, 8, 0, 0, 0, 3, "interleaved",
                  options={"pipeline_layout": text})
    st = dict(attention="flash", policy="mixed", optimizer="adam", gpus=8)
    lay = checked(m, layout_of(c, st), values)
    assert (lay.pipeline_layout, lay.filled().v) == (text, 3)
    mem, step = exact_figures(m, lay, values, preset("h100-sxm"), None)
    res = PlanResult("llama", 8, "h100-sxm", 32, 80 * 10**9, None, 1, {}, [], dict(
        st, precision="mixed", command="costgraph train llama --config llama-3-8b --set s=1024 --profile korthikanti"))
    words = res.check_command({**c.as_dict(), "memory_bytes": mem, "step_seconds": float(step)})
    assert "--pipeline-layout 'Et*2|(t*3|)*10L'" in words and "--virtual-stages 3" in words
    assert _train(words) == (mem, float(step))
    # rank 0 holds chunks 0, 4, 8 (2 + 3 + 3 layers), rank 3 chunks 3, 7, 11 (3 + 3 + the loss alone)
    r = m.train(lay, values=values)
    assert [int(st.layers) for st in r.stages] == [8, 9, 9, 6]
