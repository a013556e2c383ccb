"""The harness of plan = train (issue 27 item 1; tests/training/test_plan_equals_train.py for dense models and
layer patterns, test_plan_equals_train_moe.py for mixtures of experts): one model per name for the whole
process, one plan per case (a module-scoped fixture), and the check that every row is train's."""

import functools

import costgraph
from tests.device_memory import H100_SXM_CUDA


@functools.lru_cache(maxsize=None)
def model_named(name):
    """One model per name for the whole process (the planner's closed forms are derived once per model and
    settings: training/plan.py's forms_of)."""
    return costgraph.load(name)


def plan_keywords(c) -> dict:
    """A case's plan keywords (its seventh item), none when it has six."""
    return c[6] if len(c) > 6 else {}


def case_id(c):
    """A case's test id: the model, its device count and the plan keywords given."""
    return f"{c[0]}-{c[3]}gpus" + "".join(f"-{k}" for k in plan_keywords(c))


def plan_case(param):
    """Plan one case: (model, config, sizes, devices, global batch, device memory[, plan keywords]), the
    plan keywords' own checks asserted on the result."""
    from unittest import mock

    from costgraph.training import plan_variants

    name, config, sets, gpus, batch, memory = param[:6]
    kw = plan_keywords(param)
    hardware = kw.get("hardware", "h100-sxm")   # a case's own preset (plan keyword), else an H100 SXM
    m = model_named(name)
    first = plan_variants.variants
    with mock.patch.object(plan_variants, "variants", lambda space: first(space)[:2]):   # the base and one FP8 policy
        res = m.plan(m.values(config, **sets), gpus=gpus, global_batch=batch, memory=memory, top=1,
                     **{"hardware": hardware, **kw})
    if kw.get("allow_fp8"):
        assert res.layouts[0]["options"] == {"policy": "fp8-delayed"} and "--precision fp8-delayed" in res.check_command()
    if kw.get("reserve"):   # the capacity under the convention, named in the check command where not the default
        assert res.capacity_bytes == (80_000_000_000 if kw.get("memory_convention") else H100_SXM_CUDA)
        assert ("--memory-convention nominal" in res.check_command()) == bool(kw.get("memory_convention"))
        # the reserve kept free: 10 % of CUDA's 85,061,827,297 bytes, rounded (train's --reserve 0.1), or 8 GB
        assert res.reserve_bytes == {"0.1": 8_506_182_730, "8GB": 8_000_000_000}[kw["reserve"]]
        assert f"--reserve {kw['reserve']}" in res.check_command()
    if kw.get("cross_entropy"):
        assert f"--cross-entropy {kw['cross_entropy']}" in res.check_command()
    assert ("--link-rate line" in res.check_command()) == (kw.get("link_rate") == "line")
    if kw.get("pipeline_layout"):
        assert all(r["pp"] in (2, 4) for r in res.layouts) and "--pipeline-layout" in res.check_command()
    return res


def every_row_is_train(planned, train_check):
    """Every row plan lists: train, run with the row's own check command, gives its memory and step time."""
    assert planned.layouts, planned.to_text()
    for row in planned.layouts:
        peak, step, fits = train_check(planned.check_command(row))
        assert (peak, step) == (row["memory_bytes"], row["step_seconds"])
        assert fits
    assert planned.refused.get("refused by train", 0) == 0   # the grid asks train's checks first
