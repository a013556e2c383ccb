"""``--overlap-contention`` (issue 27 item 4): the compute a hidden collective slows (costgraph.training.contention).

Each hidden second of a kind costs ``σ`` seconds of compute: ``n/N`` under ``sm-share`` (the SMs the collective's
kernels hold of the device's), ``s/(1 + s)`` under ``measured``, 0 under ``none`` (the step before the convention).
The factors come from ``training/contention.toml``, each beside its source there:

* H100 SXM5: 132 SMs (NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022);
* NCCL: 24 thread blocks (NVIDIA developer forum 337991: Nsight Systems shows ncclAllGather launching 24 blocks
  beside a 132-block GEMM on H100);
* DeepEP: 20 SMs (DeepSeek-V3 technical report, arXiv 2412.19437, §3.2.2);
* userbuffers: 16 SMs (TransformerEngine @ 0004dbd0 transformer_engine/pytorch/module/base.py initialize_ub
  add_ub: ``num_sm: int = 16``);
* measured: 0.189 (arXiv 2507.03114, abstract: "an average computational slowdown of 18.9%").
"""

from __future__ import annotations

import json
import shlex
import tomllib
from importlib import resources

import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.hardware import preset
from costgraph.parallel.layout import Layout
from costgraph.training.contention import entries, share
from costgraph.training.steptime import step_time

H100 = preset("h100-sxm")


@pytest.fixture(scope="module")
def gpt():
    m = costgraph.load("gpt")
    return m, m.values("gpt2", b=8)


@pytest.fixture(scope="module")
def steps(gpt):
    """GPT-2 under ZeRO-3 on 8 H100s (the FSDP gathers hidden behind the next unit's compute), per convention."""
    m, _ = gpt
    return {c: step_time(m.graph, Layout(zero=3, gpus=8, m=1, overlap_contention=c), H100)
            for c in ("sm-share", "measured", "none")}


def test_the_factors_are_the_data_files():
    raw = tomllib.loads(resources.files("costgraph.training").joinpath("contention.toml").read_text())
    got = entries()["h100-sxm"]
    assert (got.sm_count, got.nccl_sms, got.deepep_sms, got.userbuffers_sms, got.measured_slowdown) == \
        (132, 24, 20, 16, sympy.Rational(189, 1000))
    assert raw["h100-sxm"]["nccl_sms"] == 24 and raw["h100-sxm"]["measured_slowdown"] == "0.189"
    # the device's SMs agree with the per-kernel model's (kernels.toml [h100-sxm] sm_count, userbuffers' margin)
    from costgraph.training.kernel_table import kernel_table
    from costgraph.training.kernel_time import UB_COMM_SMS

    assert kernel_table(H100).sm_count == got.sm_count and UB_COMM_SMS == got.userbuffers_sms


def test_each_kind_holds_its_kernels_sms():
    L = Layout(gpus=8).filled()
    assert share("fsdp", L, H100, per_kernel=True) == sympy.Rational(24, 132)      # NCCL's 24 blocks
    assert share("ep", L, H100, per_kernel=True) == sympy.Rational(24, 132)        # alltoall: NCCL's
    deepep = Layout(gpus=8, ep_dispatcher="deepep").filled()
    assert share("ep", deepep, H100, per_kernel=True) == sympy.Rational(20, 132)   # DeepEP's 20 SMs
    assert share("tp", L, H100, per_kernel=False) == sympy.Rational(16, 132)       # userbuffers, flat rate
    assert share("tp", L, H100, per_kernel=True) == 0   # the per-kernel model's userbuffers_margin has them
    measured = Layout(gpus=8, overlap_contention="measured").filled()
    assert share("fsdp", measured, H100, per_kernel=True) == sympy.Rational(189, 1189)   # s/(1 + s)
    assert share("fsdp", Layout(gpus=8).filled(), preset("a100-80gb-sxm"), per_kernel=True) == 0   # no entry


def test_the_step_adds_the_compute_the_hidden_gathers_slow(gpt, steps):
    _, vals = gpt
    st = steps["sm-share"]
    ov = st["overlap"]
    (kind,) = ov.kinds   # one kind: ZeRO-3's gathers and reduce-scatters (fsdp)
    hidden = (ov.kinds[kind].seconds - ov.exposed()[kind]).xreplace(vals)
    assert hidden > 0
    contention = st["contention"].xreplace(vals)
    assert contention == sympy.Rational(24, 132) * hidden
    assert st["total"].xreplace(vals) - steps["none"]["total"].xreplace(vals) == contention
    measured = steps["measured"]
    assert measured["contention"].xreplace(vals) == sympy.Rational(189, 1189) * hidden
    assert measured["total"].xreplace(vals) - steps["none"]["total"].xreplace(vals) == \
        sympy.Rational(189, 1189) * hidden


def test_none_is_the_step_before_the_convention(gpt, steps):
    _, vals = gpt
    st = steps["none"]
    assert st["contention"] == 0
    before = st["compute"] + st["bubble"] + st["optimizer"] + sum(st["overlap"].exposed().values())
    assert st["total"].xreplace(vals) == before.xreplace(vals)


def test_plan_times_every_row_with_the_convention_and_train_agrees(gpt, capsys):
    m, _ = gpt
    values = m.values("gpt2", s=4096)
    res = m.plan(values, gpus=8, hardware="h100-sxm", global_batch=16, top=1, overlap_contention="measured")
    doc = json.loads(res.to_json())
    assert doc["overlap_contention"] == "measured" and "overlap_contention" not in doc["searched"]
    words = shlex.split(res.check_command())
    assert "--overlap-contention" in words and words[words.index("--overlap-contention") + 1] == "measured"
    assert main(words[1:] + ["--format", "json"]) == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["step"]["overlap_contention"] == "measured"
    assert trained["step"]["total"]["value"] == doc["layouts"][0]["step_seconds"]
    assert trained["memory"]["total"]["value"] == doc["layouts"][0]["memory_bytes"]


def test_train_names_the_convention(capsys):
    words = ["train", "gpt", "--config", "gpt2", "--set", "b=8", "--gpus", "8", "--zero", "3", "--hardware", "h100-sxm"]
    assert main(words) == 0
    out = capsys.readouterr().out
    assert "overlap contention: sm-share (default)" in out and "--overlap-contention" in out
    assert main(words + ["--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["step"]["overlap_contention"] == "sm-share" and doc["plan"]["overlap_contention"] == "sm-share"
    assert doc["step"]["contention"]["value"] > 0


def test_a_bad_value_is_refused_naming_the_flag(capsys):
    assert main(["train", "gpt", "--config", "gpt2", "--hardware", "h100-sxm", "--overlap-contention", "sometimes"]) == 2
    err = capsys.readouterr().err
    assert "argument --overlap-contention: invalid choice: 'sometimes'" in err and "one of: sm-share" in err
    assert "Traceback" not in err
    with pytest.raises(CostgraphValueError, match="overlap.contention"):
        Layout(overlap_contention="sometimes").filled()


def test_a_preset_without_an_entry_is_warned_in_the_result(gpt):
    """No ``contention.toml`` entry for the preset (a100-80gb-sxm): the convention counts nothing there, which
    train's JSON and the API's warnings say, as its text's step line does and as plan warns it (never a silent 0)."""
    m, vals = gpt
    res = m.train(Layout(zero=3, gpus=8), values=vals, hardware="a100-80gb-sxm")
    said = [w for w in res.warnings if "contention.toml" in w]
    assert said == ["--overlap-contention sm-share: no contention.toml entry for a100-80gb-sxm: none counted "
                    "(a hidden collective slows no compute); a COSTGRAPH_DATA contention.toml may add one"]
    assert not [w for w in m.train(Layout(zero=3, gpus=8), values=vals, hardware="h100-sxm").warnings
                if "contention.toml" in w]   # an entry: nothing to say
    assert not [w for w in m.train(Layout(zero=3, gpus=8, overlap_contention="none"), values=vals,
                                   hardware="a100-80gb-sxm").warnings if "contention.toml" in w]   # none asked
    plan = m.plan(m.values("gpt2", s=1024), gpus=8, hardware="a100-80gb-sxm", global_batch=16, top=1)
    assert said[0] in plan.warnings
    # a note of the step time (its rate's notes): fit, which prints no time, leaves it out (verdict.fit)
    assert said[0] in res.compute["rate"].notes
    assert said[0] not in costgraph.fit(m, hardware="a100-80gb-sxm", gpus=8, zero=3, values=vals).warnings
