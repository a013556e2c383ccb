"""``plan --ep-dispatcher`` (issue 27): the EP dispatcher is a convention of the cluster's software, passed to
every row plan ranks and to its check command (never searched, as ``--link-rate``), and plan's JSON states
both: what it timed the rows' collectives at and which kernels ran the EP dispatch. The bandwidths: DeepEP's
measured figures on H800 (hardware.toml [h800] deepep_scale_up_bw 153 GB/s: deepseek-ai/DeepEP README @ ebfe47e,
the lower of dispatch 153 and combine 158 over NVLink at EP 8) against NCCL's busbw (164.8 GB/s,
tests/parallel/test_expert_placement.py)."""

from __future__ import annotations

import json

import pytest

import costgraph


@pytest.fixture(scope="module")
def planned():
    m = costgraph.load("deepseek_v2")
    values = m.values("deepseek-v2-lite", s=1024)
    res = m.plan(values, gpus=8, hardware="h800", global_batch=16, top=8, ep_dispatcher="deepep")
    return m, values, res


def test_the_json_states_the_link_rate_and_the_dispatcher(planned):
    _, _, res = planned
    doc = json.loads(res.to_json())
    assert (doc["link_rate"], doc["ep_dispatcher"]) == ("nccl", "deepep")
    assert "ep_dispatcher" not in doc["searched"]


def test_every_row_is_train_with_the_dispatcher_in_its_check_command(planned, train_check):
    _, _, res = planned
    assert "EP dispatch --ep-dispatcher deepep" in res.to_text()
    for row in res.layouts:
        words = res.check_command(row)
        assert "--ep-dispatcher deepep" in words
        assert train_check(words) == (row["memory_bytes"], row["step_seconds"], True)
    # the fastest rows run PP 8 under DualPipe without EP; the first with EP runs an all-to-all
    row = next(r for r in res.layouts if r["ep"] > 1)
    words = res.check_command(row)
    peak, step, _ = train_check(words)
    # the same row with NCCL's all-to-all (164.8 GB/s, faster than DeepEP's 153 on H800): the same memory, a
    # shorter step, so the dispatcher reached the row's time
    peak_nccl, step_nccl, _ = train_check(words.replace(" --ep-dispatcher deepep", ""))
    assert peak_nccl == peak and step_nccl < step


def test_the_default_is_alltoall_and_left_out_of_the_check_command():
    from costgraph.train_options import PlanOptions

    assert PlanOptions.__dataclass_fields__["ep_dispatcher"].default == "alltoall"


# EP options on a dense model (issue 27): train refuses an EP degree above 1 (training/validity.py check_layout:
# "expert parallelism (e = 2) needs routed experts"); the options of the EP exchange, which have no degree, change
# nothing there and are warned, with what was assumed, by train and plan alike (validity.expert_option_warnings)
DENSE = ["train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--hardware", "h100-sxm"]


@pytest.mark.parametrize("base, flags, warned", [
    ([], ["--ep-overlap", "megatron"], "--ep-overlap megatron"),
    ([], ["--ep-dispatcher", "deepep"], "--ep-dispatcher deepep"),
    ([], ["--route-nodes", "2"], "--route-nodes 2"),
    # DualPipe's overlap only under its schedule, p > 1 (ep_time.check_overlap)
    (["--pp", "2", "--schedule", "dualpipe"], ["--ep-overlap", "dualpipe", "--ep-dispatcher", "deepep"],
     "--ep-overlap dualpipe, --ep-dispatcher deepep"),
])
def test_train_warns_of_ep_options_on_a_dense_model(capsys, base, flags, warned):
    from cli_checks import run

    code, out, _ = run(capsys, DENSE + base + flags + ["--format", "json"])
    assert code == 0
    doc = json.loads(out)
    assert [w for w in doc["warnings"] if "routed experts" in w] == [
        f"{warned}: 'llama' has no routed experts, so there is no EP all-to-all to time: ignored (the step time is "
        f"the same without {'them' if ',' in warned else 'it'})"]
    code, plain, _ = run(capsys, DENSE + base + ["--format", "json"])
    assert json.loads(plain)["step"]["total"]["value"] == doc["step"]["total"]["value"]   # nothing timed: the same


def test_train_refuses_an_ep_degree_on_a_dense_model_and_warns_nothing_for_defaults(capsys):
    from cli_checks import run

    code, _, err = run(capsys, DENSE + ["--ep", "2"])
    assert code == 2 and "expert parallelism (e = 2) needs routed experts; 'llama' has none" in err
    code, out, _ = run(capsys, DENSE + ["--ep-dispatcher", "alltoall", "--ep-overlap", "none"])
    assert code == 0 and "routed experts" not in out   # the defaults ask for nothing


def test_plan_warns_of_the_dispatcher_on_a_dense_model():
    m = costgraph.load("gpt")
    res = m.plan(m.values("gpt2"), gpus=8, hardware="h100-sxm", global_batch=16, top=1, ep_dispatcher="deepep")
    warned = ["--ep-dispatcher deepep: 'gpt' has no routed experts, so there is no EP all-to-all to time: ignored "
              "(the step time is the same without it)"]
    assert res.warnings == warned and json.loads(res.to_json())["warnings"] == warned
    assert res.to_text().splitlines()[-1] == "warning: " + warned[0]
    # nothing to warn of: [] as train writes it (issue 27 trial fix 4: plan left the key out)
    assert json.loads(m.plan(m.values("gpt2"), gpus=8, hardware="h100-sxm", global_batch=16,
                             top=1).to_json())["warnings"] == []


def test_deepep_on_h800_warns_nothing(planned):
    """H800 has both of DeepEP's measured figures (module docstring): nothing assumed, ``warnings`` is []."""
    _, _, res = planned
    assert res.warnings == [] and json.loads(res.to_json())["warnings"] == []


# DeepEP on a preset without its measured figures (issue 27 trial fix 5): train's EP dispatch line says NCCL's
# busbw is assumed for each link (hardware.dispatch_text); plan said nothing. Now plan warns it, in the same words
# (hardware.dispatch_warnings; h100-sxm has no deepep_scale_up_bw / deepep_scale_out_bw in hardware.toml)
H100_DEEPEP = ("--ep-dispatcher deepep: scale-up: no DeepEP measurement for h100-sxm in hardware.toml, NCCL's "
               "figure assumed; scale-out per NIC: no DeepEP measurement for h100-sxm in hardware.toml, NCCL's "
               "figure assumed")


def test_deepep_without_its_figures_is_warned_by_plan_as_train_says_it(capsys):
    from cli_checks import run

    m = costgraph.load("deepseek_v2")
    values = m.values("deepseek-v2-lite", s=1024)
    res = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=16, top=1, ep_dispatcher="deepep")
    assert res.warnings == [H100_DEEPEP] and json.loads(res.to_json())["warnings"] == [H100_DEEPEP]
    assert "warning: " + H100_DEEPEP in res.to_text().splitlines()
    # train's own line on an EP layout, less its " above" (it follows train's links line)
    code, out, _ = run(capsys, ["train", "deepseek_v2", "--config", "deepseek-v2-lite", "--set", "s=1024", "--gpus",
                                "8", "--ep", "8", "--hardware", "h100-sxm", "--ep-dispatcher", "deepep"])
    line = next(x.strip() for x in out.splitlines() if x.strip().startswith("EP dispatch (--ep-dispatcher deepep)"))
    assert code == 0 and H100_DEEPEP == "--ep-dispatcher deepep: " + line.split("): ", 1)[1].replace(" above", "")
    # and train warns it as plan does (issue 27: train's --format json warnings lacked it): in its text, and in
    # the result's warnings, the JSON's "warnings" key (training/result.py key("warnings"); the JSON itself takes
    # ~9 s of CPU to write, too slow for this file)
    assert out.splitlines()[-1] == "warning: " + H100_DEEPEP
    assert m.train(values=values, gpus=8, e=8, ep_dispatcher="deepep", hardware="h100-sxm").warnings == [H100_DEEPEP]
    # no EP all-to-all (EP 1), or NCCL's: train's report prints no DeepEP line, and warns nothing of it
    for kw in ({"e": 1, "ep_dispatcher": "deepep"}, {"e": 8, "ep_dispatcher": "alltoall"}):
        assert m.train(values=values, gpus=8, hardware="h100-sxm", **kw).warnings == []
    # NCCL's all-to-all, or the line rates: nothing assumed, nothing warned
    for kw in ({"ep_dispatcher": "alltoall"}, {"ep_dispatcher": "deepep", "link_rate": "line"}):
        assert m.plan(values, gpus=8, hardware="h100-sxm", global_batch=16, top=1, **kw).warnings == []
