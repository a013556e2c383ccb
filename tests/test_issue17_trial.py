"""Issue 17 trial: `costgraph infer`'s serving options under hostile or combined input.

Each test is a defect found by running the README's commands and hostile flags: it failed
before its fix (an internal error, a hang, or a flag silently ignored)."""

from __future__ import annotations

import json

import pytest

from costgraph import cli

LLAMA = ["infer", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"]
DSV3 = ["infer", "deepseek_v3", "--config", "deepseek-v3", "--set", "l=4", "k_d=1", "--hardware", "h200",
        "--batch", "64", "--prompt", "100", "--generate", "10", "--speculative-tokens", "1", "--acceptance", "0.8",
        "--draft", "mtp", "--format", "json"]


def _refused(capsys, argv, *fragments):
    """Exit status 2, no traceback, the message and a hint on stderr."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    assert "hint:" in err
    for f in fragments:
        assert f in err, err
    return err


def test_mtp_draft_under_a_parallel_layout(capsys):
    # was: internal error, 'ServingInference' object has no attribute 'convention'
    assert cli.main(DSV3 + ["--tp", "8"]) == 0
    plain = json.loads(capsys.readouterr().out)["serving"]["speculative"]
    assert cli.main(DSV3 + ["--tp", "8", "--ep", "8", "--dp-attention", "8"]) == 0
    spec = json.loads(capsys.readouterr().out)["serving"]["speculative"]
    assert spec["draft"] == "mtp" and spec["tokens_per_step"]["expr"] == "9/5"
    # the MTP draft runs at plain TP 8 (not the EP layout): the same draft step either way
    assert spec["draft_step_seconds"]["expr"] == plain["draft_step_seconds"]["expr"]


def test_reserve_and_utilization_that_disagree_are_refused(capsys):
    # was: --reserve 0.1 (the default's value, given) silently dropped for --gpu-memory-utilization 0.8
    _refused(capsys, LLAMA + ["--gpu-memory-utilization", "0.8", "--reserve", "0.1"], "disagree")
    assert cli.main(LLAMA + ["--gpu-memory-utilization", "0.8", "--reserve", "0.2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["reserve"] == "1/5"
    assert cli.main(LLAMA + ["--gpu-memory-utilization", "0.8", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["reserve"] == "1/5"
    assert cli.main(LLAMA + ["--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["reserve"] == "1/10"


def test_api_reserve_and_utilization_that_disagree_are_refused():
    import costgraph
    from costgraph.errors import CostgraphValueError

    m = costgraph.load("llama")
    v = m.values("llama-3-8b")
    with pytest.raises(CostgraphValueError, match="disagree"):
        m.infer(hardware="h100-sxm", prompt=512, generate=128, values=v, reserve="0.1", gpu_memory_utilization="0.8")
    rep = m.infer(hardware="h100-sxm", prompt=512, generate=128, values=v, gpu_memory_utilization="0.8")
    assert rep.settings["reserve"] == "1/5"


def test_huge_speculative_tokens_refused_not_hung(capsys):
    # was: --speculative-tokens 10**9 computed (7/10)^(10^9 + 1) exactly: no answer in 60 s
    _refused(capsys, LLAMA + ["--speculative-tokens", "1000000000", "--acceptance", "0.7", "--draft", "llama"],
             "--speculative-tokens must be a whole number from 1 to 1,024")
    assert cli.main(LLAMA + ["--speculative-tokens", "1024", "--acceptance", "1", "--draft", "llama",
                             "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["serving"]["speculative"]["tokens_per_step"]["expr"] == "1025"


@pytest.mark.parametrize("extra, fragment", [
    (["--acceptance", "0.7"], "speculative decoding needs"),              # was: ignored
    (["--draft-config", "llama-2-7b"], "--draft-config llama-2-7b"),      # was: ignored
    (["--draft", "mtp", "--draft-config", "llama-2-7b", "--speculative-tokens", "2", "--acceptance", "0.5"],
     "--draft-config"),
    # was: 'llama.cg:38:1: error: model 'llama' has no option 'mtp'' (the model file, not the flag)
    (["--draft", "mtp", "--speculative-tokens", "2", "--acceptance", "0.5"], "--draft mtp: model 'llama'"),
])
def test_speculative_flags_alone_are_refused(capsys, extra, fragment):
    _refused(capsys, LLAMA + extra, fragment)


MIXTRAL = ["infer", "mixtral", "--config", "mixtral-8x7b", "--prompt", "100", "--generate", "10"]


def _json(capsys, argv) -> dict:
    from costgraph.export import schema as schemas

    assert cli.main(argv + ["--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e.message for e in schemas.validator("infer").iter_errors(doc)] == []
    return doc


def test_parallel_layout_without_a_device(capsys):
    # was: internal error, KeyError 'tokens_per_second' (EP / DP attention with no seconds)
    doc = _json(capsys, MIXTRAL + ["--tp", "8", "--ep", "8", "--dp-attention", "8", "--batch", "8"])
    assert doc["settings"]["ep"] == 8 and doc["parallel"]["experts_per_device"]["value"] == 1
    assert doc["time_per_output_token"]["value"] is None
    # a rate but no link: the EP all-to-all has no seconds, said so
    doc = _json(capsys, MIXTRAL + ["--tp", "8", "--ep", "8", "--peak", "1e15", "--bandwidth", "4.8e12"])
    assert doc["time_per_output_token"]["value"] is None


def test_pipeline_without_a_link_has_no_seconds(capsys):
    # was: internal error, TypeError One * None (the stages' sends on a link nobody gave)
    doc = _json(capsys, MIXTRAL + ["--pp", "4", "--peak", "1e15", "--bandwidth", "4.8e12"])
    assert "pipeline stages' sends need a link" in doc["time_per_output_token"]["absent"]
    doc = _json(capsys, MIXTRAL + ["--pp", "4", "--peak", "1e15", "--bandwidth", "4.8e12", "--link-bandwidth", "50e9"])
    assert doc["time_per_output_token"]["value"] is not None


def test_prefix_caching_without_device_memory(capsys):
    # was: internal error, TypeError '<=' Integer and None (the fit of a device nobody gave)
    argv = LLAMA[:4] + ["--prompt", "100", "--generate", "10", "--shared-prefix", "50", "--peak", "1e15",
                        "--bandwidth", "3e12"]
    doc = _json(capsys, argv)
    p = doc["serving"]["prefix_caching"]
    assert p["fits"] is None and p["max_batch"] is None
    assert p["kv_cache_bytes_paged"]["value"] == 7 * 16 * 131_072   # b = 1: ceil(110/16) blocks of 131,072 B/token
    assert cli.main(argv) == 0
    assert "largest batch             — (no device memory)" in capsys.readouterr().out


def test_speculative_at_generate_1_refused(capsys):
    # was: a verify step at n = P + G - 2 = P - 1 cached positions (fewer than the prompt) and a
    # time per output token for a run that has no decode step
    _refused(capsys, LLAMA[:8] + ["--generate", "1", "--speculative-tokens", "2", "--acceptance", "0.6",
                                  "--draft", "llama"], "--generate 1 has none")


def test_api_reads_generate_as_the_cli_does(capsys):
    # was: Model.infer(generate="1e12") refused ("must be a positive whole number, not '1e12'")
    import costgraph

    m = costgraph.load("llama")
    v = m.values("llama-3-8b")
    assert cli.main(LLAMA[:6] + ["--prompt", "100", "--generate", "1e12", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for g in ("1e12", 1e12, 10**12):
        rep = m.infer(hardware="h100-sxm", prompt=100, generate=g, values=v)
        assert json.loads(json.dumps(rep.to_dict())) == doc


def test_vllm_would_not_start_is_said(capsys):
    # was: 'Available KV cache memory 0.00 GiB', '0.00x' and nothing else, where vLLM raises
    # (vllm-project/vllm v1/core/kv_cache_utils.py::check_enough_kv_cache_memory)
    argv = LLAMA[:4] + ["--prompt", "1024", "--generate", "64"]
    doc = _json(capsys, argv + ["--memory", "1"])
    assert doc["serving"]["vllm"]["tokens"] == 0
    assert doc["serving"]["vllm"]["note"] == "vLLM would not start: No available memory for the cache blocks"
    doc = _json(capsys, argv + ["--hardware", "h100-sxm", "--max-model-len", "1000000"])
    v = doc["serving"]["vllm"]
    # 26,157: the weights as vLLM loads them, with its 2 MiB rotary cos/sin cache (issue 29; was 26,158)
    assert v["num_blocks"] == 26_157 and v["blocks_per_request"] == 62_500
    assert v["note"] == "vLLM would not start: one request of max_model_len 1,000,000 does not fit the KV cache"
    assert _json(capsys, argv + ["--hardware", "h100-sxm"])["serving"]["vllm"]["note"] is None


def test_prompt_read_as_generate_is(capsys):
    # was: --prompt 1e7 refused ('invalid int value') while --generate 1e7 was read; --prompt 10**22 accepted
    base = LLAMA[:6] + ["--generate", "2", "--format", "json"]
    assert cli.main(base + ["--prompt", "1e7"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert cli.main(base + ["--prompt", "10**7"]) == 0
    assert json.loads(capsys.readouterr().out) == a and a["settings"]["prompt"] == 10**7
    assert cli.main(base + ["--prompt", "10**16"]) == 2
    assert "out of range" in capsys.readouterr().err


def test_serving_values_keep_huge_expert_powers_unevaluated(capsys):
    # was: prefix caching on Llama-4-Scout at P = 10^7 (b = 64, S = 5·10^6) ran past 60 s: the
    # serving figures expanded (15/16)^(63·5·10^6) exactly (inference/exact.py::exact_value)
    import sympy

    from costgraph.inference.decode import ExactPow
    from costgraph.inference.exact import exact_value

    k, E, n = sympy.symbols("k E n", positive=True)
    e = 1 - (1 - k / E) ** n
    small = exact_value(e, {k: 1, E: 16, n: 3})
    assert small == 1 - sympy.Rational(15, 16) ** 3
    huge = exact_value(e, {k: 1, E: 16, n: 315 * 10**6})
    assert huge.has(ExactPow) and float(huge) == 1.0
    argv = ["infer", "llama4_text", "--config", "llama-4-scout-17b-16e", "--hardware", "h200", "--prompt", "10000000",
            "--generate", "10", "--batch", "64", "--tp", "8", "--shared-prefix", "5000000"]
    doc = _json(capsys, argv)
    p = doc["serving"]["prefix_caching"]
    assert p["max_batch"] == 2 and p["fits"] is False
    assert 0 < p["time_to_first_token"]["value"] < doc["time_to_first_token"]["value"]
