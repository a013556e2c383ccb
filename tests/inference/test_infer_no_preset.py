"""``costgraph infer`` without a hardware preset (issue 17, item 1).

KV cache bytes, weights, FLOPs and bytes per step need no device; seconds need a peak and
an HBM bandwidth (and a link under --tp), capacity a device memory. Figures given with
--peak/--bandwidth/--memory/--link-bandwidth (or a user hardware table) give exactly the
answers of a preset with those figures (H100 SXM: 989.4 TFLOP/s BF16 dense, 3.35 TB/s,
80 GB, NVLink 450 GB/s per direction; costgraph/hardware.toml and its sources).
"""

import json

import pytest
import sympy

from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.inference import infer, load, machine
from costgraph.inference import device

H100 = dict(peak=989_400_000_000_000, bandwidth=3_350_000_000_000, memory=80_000_000_000)
SECONDS = ("prefill.seconds", "decode.seconds", "time_to_first_token", "time_per_output_token",
           "time_per_output_token_mean", "tokens_per_second", "tokens_per_second_per_device", "decode_total_seconds")
CAPACITY = ("fits", "max_batch", "max_context")


@pytest.fixture(scope="module")
def llama():
    return load("llama")


@pytest.fixture(scope="module")
def values(llama):
    return llama.values("llama-2-7b")


def _run(llama, values, **kw):
    return infer(llama, prompt=512, generate=128, batch=8, values=values, **kw)


@pytest.fixture(scope="module")
def with_preset(llama, values):
    # the preset's printed figures (memory convention nominal: 80 GB, hardware.toml), which the figures given
    # restate; by default infer reads the 79.22 GiB CUDA reports (test_capacity_serving)
    return _run(llama, values, hardware="h100-sxm", memory_convention="nominal")


def test_bytes_and_flops_need_no_device(llama, values, with_preset):
    bare = _run(llama, values)
    q, v = bare.quantities, bare.values
    for k, e in with_preset.quantities.items():
        if k in SECONDS or k.endswith("communication_seconds") or k == "compute_bound_batch":
            continue
        assert sympy.expand(q[k] - e) == 0, k             # the same formula
        assert v.get(k) == with_preset.values.get(k), k    # and the same exact value
    assert v["kv_cache_bytes"] == 8 * 640 * 524_288       # test_inference: Llama-2-7B, 640 positions, bf16
    assert v["memory_bytes"] == with_preset.values["memory_bytes"]
    for k in SECONDS:
        assert k not in v
    assert v["compute_bound_batch"] is None
    assert all(v[k] is None for k in CAPACITY)
    assert bare.settings["hardware"] is None and bare.settings["capacity_bytes"] is None
    assert bare.absent == {"seconds": device.NEED_SECONDS, "capacity": device.NEED_MEMORY}
    assert with_preset.absent == {}


def test_given_figures_give_the_preset_seconds_exactly(llama, values, with_preset):
    for given in (H100, {"peak": "989.4e12", "bandwidth": "3.35e12", "memory": "80GB"}):
        rep = _run(llama, values, **given)
        assert rep.absent == {}
        for k in (*SECONDS, "compute_bound_batch", *CAPACITY, "memory_bytes"):
            assert rep.values[k] == with_preset.values[k], k
        assert rep.values["time_per_output_token"] == with_preset.values["time_per_output_token"]
        assert rep.settings["figures_from"] == {"peak_flops": "--peak", "memory_bandwidth": "--bandwidth",
                                                "device_memory": "--memory"}
    assert with_preset.settings["peak_flops"] == "989400000000000"
    assert with_preset.settings["figures_from"]["peak_flops"] == "h100-sxm"


def test_a_given_figure_replaces_the_presets(llama, values, with_preset):
    half = _run(llama, values, hardware="h100-sxm", bandwidth=1_675_000_000_000)
    same = _run(llama, values, peak=989_400_000_000_000, bandwidth=1_675_000_000_000, memory=80_000_000_000)
    assert half.values["time_per_output_token"] == same.values["time_per_output_token"]
    assert half.values["time_per_output_token"] > with_preset.values["time_per_output_token"]
    assert half.settings["figures_from"]["memory_bandwidth"] == "--bandwidth"
    assert half.settings["figures_from"]["peak_flops"] == "h100-sxm"


def test_a_user_hardware_table_is_a_preset(llama, values, with_preset, tmp_path):
    from costgraph.hardware import preset

    h = preset("h100-sxm")
    lines = ["[my-gpu]", 'name = "my GPU"', 'vendor = "me"', 'source = "the H100 SXM figures of hardware.toml"']
    lines += [f"{k} = {v}" for k, v in h.numbers().items()]
    path = tmp_path / "my.toml"
    path.write_text("\n".join(lines) + "\n")
    rep = _run(llama, values, hardware=f"{path}:my-gpu")
    for k in (*SECONDS, *CAPACITY):
        assert rep.values[k] == with_preset.values[k], k


def test_bandwidth_alone_gives_a_lower_bound_not_seconds(llama, values, with_preset):
    rep = _run(llama, values, bandwidth=H100["bandwidth"], memory=H100["memory"])
    v = rep.values
    assert rep.absent == {"seconds": device.NEED_PEAK}
    assert v["decode.seconds_at_least"] == sympy.Rational(v["decode.bytes"], H100["bandwidth"])
    # the roofline sums max(FLOPs/peak, bytes/bandwidth) over ops: at least the step's bytes/bandwidth
    assert v["decode.seconds_at_least"] <= with_preset.values["decode.seconds"]
    for k in CAPACITY:
        assert v[k] == with_preset.values[k]
    peak_only = _run(llama, values, peak=H100["peak"])
    assert peak_only.absent["seconds"] == device.NEED_BANDWIDTH
    assert peak_only.values["prefill.seconds_at_least"] == sympy.Rational(peak_only.values["prefill.flops"], H100["peak"])


def test_tp_without_a_link_has_no_seconds(llama):
    values = llama.values("llama-2-70b")
    kw = dict(prompt=256, generate=8, batch=1, values=values, t=4)
    bare = infer(llama, peak=H100["peak"], bandwidth=H100["bandwidth"], **kw)
    assert bare.absent["seconds"] == device.NEED_LINK
    assert "decode.communication_seconds" not in bare.quantities
    # the preset's own link given again: the preset's answer, exactly
    ref = infer(llama, hardware="h100-sxm", **kw)
    again = infer(llama, hardware="h100-sxm", link_bandwidth=450_000_000_000, **kw)
    assert again.values["time_per_output_token"] == ref.values["time_per_output_token"]
    # no preset: the ring's bandwidth term only (latency 0, named in the assumptions)
    m = machine(None, "bf16", 4, peak=H100["peak"], bandwidth=H100["bandwidth"], link_bandwidth="450e9")
    assert (m.alpha, m.beta) == (0, 450_000_000_000) and m.timed
    linked = infer(llama, peak=H100["peak"], bandwidth=H100["bandwidth"], link_bandwidth="450e9", **kw)
    assert 0 < linked.values["decode.communication_seconds"] < ref.values["decode.communication_seconds"]
    assert any("latency 0" in n for n in linked.notes)


def test_bad_figures_are_refused():
    for kw, text in ((dict(peak="abc"), "cannot read --peak"), (dict(peak=0), "--peak must be positive"),
                     (dict(bandwidth="-3"), "--bandwidth"), (dict(memory="80 Gb"), "bits"),
                     (dict(link_bandwidth=True), "--link-bandwidth")):
        with pytest.raises(CostgraphValueError, match=text):
            machine(None, "bf16", 2, **kw)


def _cli(capsys, *argv):
    rc = main(["infer", "llama", "--config", "llama-2-7b", "--prompt", "512", "--generate", "128", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_without_hardware_says_what_is_absent(capsys):
    rc, out, _ = _cli(capsys)
    assert rc == 0
    assert "inference on no device (bytes and FLOPs only)" in out
    assert device.NEED_SECONDS in out and device.NEED_MEMORY in out
    rc, out, _ = _cli(capsys, "--format", "json")
    doc = json.loads(out)
    assert doc["time_to_first_token"] == {"value": None, "absent": device.NEED_SECONDS}
    assert doc["decode"]["seconds"]["value"] is None
    assert doc["fits"] is None and doc["max_batch"] is None and doc["max_context"] is None
    assert doc["settings"]["hardware"] is None and doc["settings"]["peak_flops"] is None
    assert doc["kv_cache_bytes"]["value"] == 640 * 524_288


def test_cli_peak_and_bandwidth_equal_the_preset(capsys):
    _, ref, _ = _cli(capsys, "--hardware", "h100-sxm", "--memory-convention", "nominal", "--format", "json")
    _, got, _ = _cli(capsys, "--peak", "989.4e12", "--bandwidth", "3.35e12", "--memory", "80GB", "--format", "json")
    ref, got = json.loads(ref), json.loads(got)
    for k in ("time_to_first_token", "time_per_output_token", "time_per_output_token_mean", "tokens_per_second"):
        assert got[k]["value"] == ref[k]["value"] and got[k]["expr"] == ref[k]["expr"], k
    assert (got["max_batch"], got["max_context"], got["fits"]) == (ref["max_batch"], ref["max_context"], ref["fits"])
    assert got["absent"] == {} == ref["absent"]


def test_cli_bad_peak_exits_2(capsys):
    rc, _, err = _cli(capsys, "--peak", "1e15; rm")
    assert rc == 2 and "cannot read --peak" in err


def test_notebook_table_without_a_preset(llama, values):
    html = _run(llama, values)._repr_html_()
    assert "inference on no preset" in html
    assert "seconds: need --hardware NAME" in html     # the absent seconds say why
