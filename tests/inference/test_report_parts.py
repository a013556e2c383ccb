"""The settings and serving figures of ``costgraph infer`` are typed parts (costgraph.inference.report_parts):
the report holds them, the JSON writes their fields in order, the infer schema names the same fields."""

import math

import pytest
import sympy

from costgraph.export.schema import schema
from costgraph.inference import kv_parts as kp
from costgraph.inference import report_parts as rp
from costgraph.result_fields import quantities


def names(cls, required=False):
    return [q.json for _, q in quantities(cls) if q.json is not None and not (required and q.omit_none)]


@pytest.fixture(scope="module")
def served(gpt):
    # chunked prefill and prefix caching on: the serving part's typed sections present
    return gpt.infer(hardware="h100-sxm", prompt=64, generate=8, batch=2, values=gpt.values("gpt2"), chunk=16,
                     shared_prefix=32)


def test_infer_schema_names_the_fields_of_the_typed_parts():
    """Producer and schema are one list: the settings' and serving's keys are their parts' fields in order, and the
    keys the schema requires are those never left out (no ``omit_none``)."""
    props = schema("infer")["properties"]
    st, sv = props["settings"], props["serving"]
    assert (list(st["properties"]), st["required"]) == (names(rp.InferenceSettings), names(rp.InferenceSettings, True))
    assert list(sv["properties"]) == names(rp.ServingFigures)
    chunked = sv["properties"]["chunked_prefill"]
    assert list(chunked["properties"]) == chunked["required"] == names(rp.ChunkedPrefill)
    for key, cls in (("prefix_caching", rp.PrefixCaching), ("speculative", rp.Speculative)):
        # the part's ``quantities`` ({name: (expr, value)}) are spread into the section as entries
        fields = [n for n in names(cls) if n != "quantities"]
        assert [k for k in sv["properties"][key]["properties"] if k in fields] == fields


def test_infer_schema_names_the_fields_of_the_kv_cache_parts():
    """vLLM's KV cache and the other runtimes' (costgraph.inference.kv_parts): the schema's keys are the parts'
    fields in order (vLLM's exact max_concurrency written beside it), required those always present."""
    sv = schema("infer")["properties"]["serving"]["properties"]
    vllm, runtime = sv["vllm"], sv["runtime"]
    fields = names(kp.VllmKvCache)
    at = fields.index("max_concurrency") + 1
    assert list(vllm["properties"]) == fields[:at] + ["max_concurrency_exact"] + fields[at:]
    always = [n for n in names(kp.VllmKvCache, True) if n not in kp.VllmKvCache.SIZED]
    assert vllm["required"] == always[:always.index("max_concurrency") + 1] + ["max_concurrency_exact"]
    parts = list(kp.RUNTIME_PARTS.values())
    assert list(runtime["properties"]) == list(dict.fromkeys(n for cls in parts for n in names(cls)))
    assert runtime["required"] == [n for n in names(parts[0], True) if all(n in names(c, True) for c in parts)]
    assert set(kp.RUNTIME_PARTS) == set(runtime["properties"]["runtime"]["enum"]) - {"vllm"}   # choices.RUNTIME


def test_settings_and_serving_are_the_typed_parts(served):
    st, sv = served.settings, served.serving
    assert type(st) is rp.InferenceSettings and type(sv) is rp.ServingFigures
    assert type(sv.chunked_prefill) is rp.ChunkedPrefill and type(sv.prefix_caching) is rp.PrefixCaching
    assert sv.speculative is None and "speculative" not in sv and sv.runtime is None
    assert type(sv.vllm) is kp.VllmKvCache and sv.vllm["tokens"] == sv.vllm.tokens > 0
    doc = served.to_dict()
    # the JSON writes the present fields in order, the exact concurrency (a Rational) beside its float
    assert list(doc["serving"]["vllm"]) == [*sv.vllm, "max_concurrency_exact"]
    assert doc["serving"]["vllm"]["max_concurrency_exact"] == str(sv.vllm.max_concurrency)
    assert sv.vllm.tokens == sv.vllm.num_blocks // sv.vllm.groups * st.page_size   # vLLM: blocks per group x block
    assert "draft_layers" not in sv.vllm and sv.vllm.requested_bytes is not None
    # V1's sampler in the profile run (inference/sampler_peak.py), a typed part beside the forward's peak
    assert type(sv.vllm.sampler) is kp.SamplerPeak and sv.vllm["sampler_bytes"] == sv.vllm.sampler.bytes
    assert list(doc["settings"]) == list(st) == [n for n in names(rp.InferenceSettings) if n in st]
    assert list(doc["serving"]) == list(sv) == ["vllm", "prefix_caching", "chunked_prefill"]
    # vLLM schedules a prompt of P tokens as ceil(P / C) chunks of at most C (--chunk C)
    assert (sv.chunked_prefill.chunk, sv.chunked_prefill.chunks) == (16, math.ceil(64 / 16)) == (16, 4)
    assert doc["serving"]["chunked_prefill"]["chunks"] == 4 and sv.prefix_caching.shared_prefix == 32
    # the usable memory is (1 - reserve) x the device memory, floored (inference/capacity.py)
    assert st.capacity_bytes == int((1 - sympy.Rational(st.reserve)) * st.device_memory)
    assert (st.tp, st.batch, st.prompt, st.generate, st.runtime) == (1, 2, 64, 8, "vllm")
    assert st.devices is None and "devices" not in st   # no parallel serving layout


def test_settings_units_and_a_misspelt_field():
    units = {q.json: q.unit for _, q in quantities(rp.InferenceSettings)}
    assert (units["prompt"], units["batch"], units["capacity_bytes"], units["peak_flops"]) == (
        "tokens", "sequences", "bytes", "FLOP/s")
    assert units["weights"] == units["runtime"] == ""   # a text has no unit
    assert {q.json: q.unit for _, q in quantities(rp.ChunkedPrefill)} == {"chunk": "tokens", "chunks": "",
                                                                          "time_to_first_token": "s"}
    kv = {q.json: q.unit for _, q in quantities(kp.VllmKvCache)}
    assert (kv["available_bytes"], kv["tokens"], kv["max_num_seqs"], kv["num_blocks"], kv["note"]) == (
        "bytes", "tokens", "sequences", "", "")
    assert {q.json: q.unit for _, q in quantities(kp.SglangKvCache)}["rest_bytes"] == "bytes"
    with pytest.raises(AttributeError, match="capacity_byte"):
        rp.InferenceSettings().set(capacity_byte=1)


def test_a_figure_present_with_another_is_declared_on_its_field():
    """vLLM's figures of a cache the device memory sized are keys exactly when ``requested_bytes`` is set: declared
    on each field (result_fields.quantity(present_with=...)), read by the generic Part (no override); the JSON's
    other keys keep their field order."""
    assert kp.VllmKvCache.SIZED == ("total_bytes", "total_from", "requested_bytes", "weight_bytes",
                                    "activation_bytes", "non_torch_bytes")
    given = kp.VllmKvCache(available_bytes=7, kv_memory_given=True)   # --kv-memory: nothing sized
    assert not set(kp.VllmKvCache.SIZED) & set(given) and "available_bytes" in given
    sized = kp.VllmKvCache(requested_bytes=10, available_bytes=7, page_bytes=4)   # the rest None, keys all the same
    keys = list(sized)
    assert set(kp.VllmKvCache.SIZED) <= set(keys) and sized["weight_bytes"] is None
    assert keys == [n for n in names(kp.VllmKvCache) if n in keys]   # field order
    assert kp.VllmKvCache.present is kp.Part.present   # the generic rule, no override
