"""Issue 29 item 5 (``costgraph fit`` for training): the host memory per node that CPU offload
needs, judged against a node's host memory (``--host-memory``, else the preset's node); ``--lora``
and ``--quantize``; the further steps (offload, LoRA/QLoRA, the fewest devices) and the plain
"nothing in this list fits"; the JSON schema of ``costgraph fit``; and item 3's last bullet:
``--memory 23.58GiB`` floored to whole bytes in ``train`` and ``fit`` as ``--kv-memory`` is."""

from __future__ import annotations

import copy
import json

import pytest

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.export import schema as schemas
from costgraph.hardware import preset

# Llama-3-70B: 70,553,706,496 parameters (meta-llama/Meta-Llama-3-70B, safetensors index total_size
# 141,107,412,992 bytes in bf16 = 2 x 70,553,706,496)
P = 70_553_706_496
OFFLOAD = dict(zero=3, recompute="full", offload_optimizer="cpu", offload_params="cpu")


@pytest.fixture(scope="module")
def llama():
    m = costgraph.load("llama")
    return m, m.values("llama-3-70b")


@pytest.fixture(scope="module")
def one_tb(llama):
    """The issue's job (ZeRO 3, full recomputation, optimizer and parameters on the CPU, 1 H100)
    on a node of 1 TB of host memory."""
    m, v = llama
    return costgraph.fit(m, hardware="h100-sxm", gpus=1, values=v, host_memory="1TB", **OFFLOAD)


def test_params_are_the_published_count(llama):
    m, v = llama
    assert m.costs("model")["params"].xreplace(v) == P


def test_host_memory_is_deepspeeds_per_node_and_judged(llama, one_tb):
    """DeepSpeed @ 38327e07, deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs
    with offload_param and offload_optimizer on the CPU (zero_init): cpu_mem = total_params * 18 *
    gpus_factor * additional_buffer_factor, gpus_factor = 1 / num_nodes; with the buffer factor 1:
    18 bytes a parameter on one node (fp32 master, Adam m and v, fp32 gradients, bf16 weights)."""
    r = one_tb
    assert r.host_need_bytes == 18 * P == 1_269_966_716_928
    assert (r.host_capacity_bytes, r.fits, r.status) == (10**12, False, 1)   # the device alone fits
    assert r.need_bytes <= r.usable_bytes
    assert "host memory per node (CPU offload): 1,182.75 GiB of 931.32 GiB (does NOT fit)" in r.to_text()
    m, v = llama
    # the preset's node: DGX H100, 2 TB (hardware.toml, with its source)
    assert preset("h100-sxm").host_memory_bytes == 2 * 10**12 and "DGX H100" in preset("h100-sxm").source(
        "host_memory_bytes")
    r2 = costgraph.fit(m, hardware="h100-sxm", gpus=16, values=v, **OFFLOAD)
    # 16 GPUs on 2 nodes of 8: DeepSpeed's 18 P / 2 per node; what costgraph train reports per node
    assert (r2.host_need_bytes, r2.host_capacity_bytes, r2.fits) == (9 * P, 2 * 10**12, True)
    t = m.train(values=v, hardware="h100-sxm", gpus=16, **OFFLOAD)
    assert int(t.offload["host_per_node"].xreplace(v)) == r2.host_need_bytes


def test_further_steps_when_the_host_does_not_fit(llama, one_tb):
    m, v = llama
    steps = {s.options: s for s in one_tb.steps}
    # the fewest devices at 8 a node: 8 x 18 P / d <= 10^12 first at d = 11 (d = 10: 1,015,972,373,542)
    assert 8 * 18 * P // 10 > 10**12 >= -(-8 * 18 * P // 11)
    assert steps["--gpus 11"].host_bytes == -(-8 * 18 * P // 11) and steps["--gpus 11"].fits
    # NVMe for the optimizer: what stays on the host is the bf16 weights, 2 P (DeepSpeed's offload_param)
    assert steps["--offload-optimizer nvme"].host_bytes == 2 * P and steps["--offload-optimizer nvme"].fits
    # LoRA and QLoRA: each the peak Model.train gives for the same layout
    lora = m.train(values=v, hardware="h100-sxm", gpus=1, lora_rank=8, **OFFLOAD)
    peak = int(-(-lora.most_loaded().memory["total"].xreplace(v) // 1))
    assert steps["--lora 8"].after_bytes == peak and steps["--lora 8"].fits
    assert steps["--lora 8 --quantize nf4"].host_bytes < steps["--lora 8"].host_bytes
    assert [s.fits for s in one_tb.steps] == sorted((s.fits for s in one_tb.steps), reverse=True)


def test_fewest_devices_fit_and_one_fewer_does_not(llama):
    m, v = llama
    r = costgraph.fit(m, hardware="h100-sxm", gpus=1, values=v, lora_rank=16)
    assert not r.fits and not any(s.fits for s in r.steps if not s.options.startswith("--zero 3 --recompute full"))
    step = next(s for s in r.steps if s.options.startswith("--zero 3 --recompute full --gpus"))
    n = int(step.options.split()[-1])
    at = costgraph.fit(m, hardware="h100-sxm", gpus=n, values=v, lora_rank=16, zero=3, recompute="full")
    below = costgraph.fit(m, hardware="h100-sxm", gpus=n - 1, values=v, lora_rank=16, zero=3, recompute="full")
    assert (at.fits, below.fits, at.need_bytes) == (True, False, step.after_bytes)


def test_nothing_fits_said_plainly(llama):
    m, v = llama
    r = costgraph.fit(m, hardware="h100-sxm", gpus=1, values=v, memory="1GB")
    assert not r.fits and r.steps and not any(s.fits for s in r.steps)
    assert "nothing in this list fits" in r.to_text()


def test_further_steps_and_host_verdict_are_typed_parts(llama, one_tb):
    """Issue 31 item 2: the host side of the verdict and each further step are typed parts whose fields carry
    their unit (costgraph.training.fit_further: HostVerdict, and result_parts.FitChange; read also as the mappings they were),
    fit's steps are costgraph.verdict.Step parts, and the fit schema names exactly their fields: producer and
    schema one list."""
    from costgraph.result_fields import quantities
    from costgraph.training.fit_further import HostVerdict, host_verdict
    from costgraph.training.result_parts import FitChange
    from costgraph.verdict import FitResult, Step

    m, v = llama
    t = m.train(values=v, hardware="h100-sxm", gpus=1, **OFFLOAD)
    h = host_verdict(m, t, "h100-sxm", "1TB", one_tb.need_bytes, one_tb.usable_bytes, False)
    assert type(h) is HostVerdict and (h.need, h.capacity, h.fits, h.source) == (18 * P, 10**12, False, "--host-memory")
    assert list(h) == ["need", "capacity", "fits", "warnings", "further", "source"] and h["need"] == h.need
    assert {type(s) for s in h.further} == {FitChange} and h.further[0]["peak_bytes"] == h.further[0].peak_bytes
    # fit's steps are these, before the peak it started from
    assert sorted((s.options, s.peak_bytes, s.host_bytes, s.fits) for s in h.further) == sorted(
        (s.options, s.after_bytes, s.host_bytes, s.fits) for s in one_tb.steps)
    # one type for a change tried, train's and fit's further steps alike (session 42 review: FurtherStep was a copy)
    assert {n: q.unit for n, q in quantities(FitChange)} == {"change": "", "options": "", "peak_bytes": "bytes",
                                                             "fits": "", "host_bytes": "bytes"}
    assert {n: q.unit for n, q in quantities(HostVerdict) if q.unit} == {"need": "bytes", "capacity": "bytes"}
    assert {n for n, q in quantities(Step) if q.unit == "bytes"} == {"before_bytes", "after_bytes", "host_bytes"}
    doc = one_tb.to_dict()
    assert type(one_tb.steps[0]) is Step and doc["steps"][0] == dict(one_tb.steps[0])
    s = schemas.schema("fit")
    names = [q.json for _, q in quantities(FitResult)] + ["status"]
    assert list(doc) == names == s["required"] == [k for k in s["properties"] if k != "launch"]
    step = s["$defs"]["step"]
    assert list(step["properties"]) == step["required"] == [q.json for _, q in quantities(Step)]


def test_cli_lora_quantize_host_memory_and_schema(llama, capsys, one_tb):
    base = ["fit", "llama", "--config", "llama-3-70b", "--hardware", "h100-sxm", "--gpus", "1"]
    off = ["--zero", "3", "--recompute", "full", "--offload-optimizer", "cpu", "--offload-params", "cpu"]
    assert main(base + off + ["--host-memory", "1TB", "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc == json.loads(one_tb.to_json())
    v = schemas.validator("fit")
    assert v.is_valid(doc)
    for key in ("fits", "need_bytes", "steps", "host_need_bytes", "status"):
        bad = copy.deepcopy(doc)
        del bad[key]
        assert not v.is_valid(bad), key
    bad = copy.deepcopy(doc)
    bad["steps"][0]["after_bytes"] = -1
    assert not v.is_valid(bad)
    assert main(base + off + ["--format", "json"]) == 0   # the preset's node: 2 TB
    assert v.is_valid(json.loads(capsys.readouterr().out))
    assert main(base + ["--serve", "--prompt", "512", "--generate", "64", "--format", "json"]) in (0, 1)
    assert v.is_valid(json.loads(capsys.readouterr().out))
    assert main(base + ["--lora", "16", "--quantize", "nf4", "--zero", "3", "--recompute", "full"]) == 0
    assert capsys.readouterr().out.startswith("llama, training on 1 × h100-sxm: fits")
    for extra, said in ((["--serve", "--prompt", "8", "--generate", "8", "--lora", "16"], "--lora is a training"),
                        (["--serve", "--prompt", "8", "--generate", "8", "--host-memory", "2TB"], "--host-memory is"),
                        (["--lora-targets", "all-linear"], "needs --lora R\nhint: add --lora R, e.g. --lora 8"),
                        (["--lora", "8", "--lora-targets", ""],   # a hostile trial: no hint before
                         "must be node names or globs, not ('',)\nhint: linear nodes' names (q_proj), globs"),
                        (off + ["--host-memory", "lots"], "cannot read --host-memory")):
        assert main(base + extra) == 2, extra
        assert said in capsys.readouterr().err


def test_memory_floored_as_kv_memory(llama, capsys):
    """23.58 GiB = 23.58 x 2^30 = 25,318,832,209.92 bytes: floored to 25,318,832,209 by train, fit
    and infer alike (a size a log printed rounded), and each says so."""
    m, v = llama
    want = 25_318_832_209
    t = m.train(values=v, memory="23.58GiB")
    assert t.fits["capacity_bytes"] == want
    assert any("floored to whole bytes" in w for w in t.warnings)
    r = costgraph.fit(m, memory="23.58GiB", values=v, zero=3)
    assert r.capacity_bytes == want and any("floored" in w for w in r.warnings)
    assert main(["train", "llama", "--config", "llama-3-70b", "--memory", "23.58GiB"]) == 0
    assert "25,318,832,209 bytes" in capsys.readouterr().out
    with pytest.raises(CostgraphValueError, match="cannot read --memory"):
        m.train(values=v, memory="23.58 gigs")


def test_fewest_devices_step_carries_no_no_op_option():
    """Trial 8 leftover: the fewest-devices step said "1 devices (dp 1) at ZeRO 3" — ZeRO shards nothing over a data-
    parallel group of 1, and --gpus at the layout's own count changes nothing: neither is printed, one device is
    "1 device"; a step with nothing left to change is dropped."""
    from costgraph.parallel.layout import Layout
    from costgraph.training.fit_further import _devices_words, _fewest_step
    from costgraph.training.result_parts import FitChange

    assert (_devices_words(1, 1), _devices_words(8, 1), _devices_words(16, 2)) == \
        ("1 device", "8 devices", "16 devices (dp 2)")
    one = FitChange("1 device", "--gpus 1", 10, True)
    both = {"zero": 3, "recompute": "full"}
    s = _fewest_step(Layout(gpus=8, zero=0), one, 1, both)          # 8 → 1 device: ZeRO 3 dropped at dp 1
    assert (s.change, s.options) == ("1 device at recompute full", "--recompute full --gpus 1")
    s = _fewest_step(Layout(gpus=1, zero=0), one, 1, both)          # the same device count: only the recompute
    assert (s.change, s.options) == ("recompute full", "--recompute full")
    assert _fewest_step(Layout(gpus=1, zero=0), one, 1, {"zero": 3}) is None   # nothing changes at all
    two = FitChange("16 devices (dp 2)", "--gpus 16", 10, True)   # dp 2: ZeRO 3 shards, kept
    s = _fewest_step(Layout(t=8, gpus=8, zero=0), two, 2, {"zero": 3})
    assert (s.change, s.options) == ("16 devices (dp 2) at ZeRO 3", "--zero 3 --gpus 16")
