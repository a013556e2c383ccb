"""Speculative decoding (costgraph.inference.speculative): a draft model or the MTP module, Leviathan et al. 2023
Eq. 1's expected tokens per step, --acceptance as an exact fraction, and its refusals."""

import json
from fractions import Fraction

import pytest
import sympy

from costgraph import cli
from costgraph.cli import main
from costgraph.errors import CostgraphValueError
from costgraph.inference import infer, load, machine, step_seconds
from costgraph.inference.speculative import expected_tokens, mtp_step
from cli_checks import refused as _refused


@pytest.fixture(scope="module")
def llama():
    return load("llama")


def test_expected_tokens_leviathan_eq1():
    a = sympy.Rational(7, 10)
    assert expected_tokens(3, a) == (1 - a**4) / (1 - a) == sympy.Rational(2533, 1000)
    assert expected_tokens(3, 1) == 4
    assert expected_tokens(5, 0) == 1


def test_speculative_with_a_draft_model(llama):
    v = llama.values("llama-3-70b")
    d = llama.values("llama-3-8b")
    rep = infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, t=8, speculative_tokens=4,
                acceptance="0.8", draft=llama, draft_values=d)
    q = {k: val for k, (_, val) in rep.serving["speculative"]["quantities"].items()}
    e = (1 - sympy.Rational(4, 5) ** 5) / sympy.Rational(1, 5)
    assert q["tokens_per_step"] == e
    assert q["time_per_output_token"] == (4 * q["draft_step_seconds"] + q["verify_seconds"]) / e
    # the verify step is the target's step of q = k + 1 = 5 tokens at n = P + G - 2
    from costgraph.inference import Inference

    m = machine("h100-sxm", "bf16", 8)
    inf = Inference(llama, t=8)
    subs = {**{k: x for k, x in v.items() if k not in (inf.b, inf.s)}, inf.b: 1}
    assert sympy.nsimplify(q["verify_seconds"] - step_seconds(inf.step(5, 638), m, 8).xreplace(subs)) == 0


def test_mtp_draft_is_the_mtp_module():
    # DeepSeek-V3's MTP module (option mtp): its step's FLOPs are the MTP model's step less the
    # plain model's (the same operators besides)
    from costgraph.inference import Inference

    plain, mtp = load("deepseek_v3"), load("deepseek_v3", options={"mtp": True})
    v, vm = plain.values("deepseek-v3"), mtp.values("deepseek-v3")
    sp, sm = Inference(plain).step(1, 100), Inference(mtp).step(1, 100)
    own = mtp_step(sm, 1)
    sub_m = {k: x for k, x in vm.items() if str(k) not in ("b", "s")}
    sub_p = {k: x for k, x in v.items() if str(k) not in ("b", "s")}
    own_flops = sympy.Add(*[o.flops for o in own.ops]).xreplace(sub_m)
    assert own_flops != 0
    assert sympy.expand(own_flops - (sm.flops.xreplace(sub_m) - sp.flops.xreplace(sub_p))) == 0
    rep = infer(plain, hardware="h200", prompt=512, generate=128, batch=1, values=v, t=8, speculative_tokens=1,
                acceptance="0.85", draft=mtp, draft_values=vm, draft_mtp=True)
    sp_ = rep.serving["speculative"]
    assert sp_["draft"] == "mtp"
    assert sp_["quantities"]["tokens_per_step"][1] == sympy.Rational(185, 100)


def test_speculative_refusals(llama):
    v = llama.values("llama-3-8b")
    with pytest.raises(CostgraphValueError, match="acceptance"):
        infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, speculative_tokens=3,
              draft=llama, draft_values=v)
    with pytest.raises(CostgraphValueError, match="acceptance"):
        infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, speculative_tokens=3,
              acceptance="1.5", draft=llama, draft_values=v)
    with pytest.raises(CostgraphValueError, match="draft"):
        infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, speculative_tokens=3,
              acceptance="0.5")
    with pytest.raises(CostgraphValueError, match="speculative-tokens"):
        infer(llama, hardware="h100-sxm", prompt=512, generate=128, batch=1, values=v, speculative_tokens=0,
              acceptance="0.5", draft=llama, draft_values=v)


LLAMA = ["infer", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--prompt", "1024", "--generate", "256"]


SPEC = ["--speculative-tokens", "4", "--draft", "llama", "--draft-config", "llama-3-8b"]


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _speculative(capsys, alpha):
    code, out, err = _cli(capsys, *LLAMA, *SPEC, "--acceptance", alpha, "--format", "json")
    assert code == 0, err
    return json.loads(out)["serving"]["speculative"]


def test_acceptance_fraction_equals_its_decimal(capsys):
    half, point5 = _speculative(capsys, "1/2"), _speculative(capsys, "0.5")
    assert half == point5 and half["acceptance"] == "1/2"
    # Leviathan et al. 2023 eq. 1: (1 - a^(k+1))/(1 - a) at a = 1/2, k = 4: 31/16
    assert half["tokens_per_step"]["expr"] == "31/16"


def test_acceptance_one_third_exact(capsys):
    third = _speculative(capsys, "1/3")
    assert third["acceptance"] == "1/3"
    # (1 - (1/3)^5) / (1 - 1/3) = (242/243) / (2/3) = 121/81, never 0.333... rounded
    assert third["tokens_per_step"]["expr"] == "121/81"
    assert third["tokens_per_step"]["tree"] == {"rational": {"p": "121", "q": "81"}}
    assert "/121" in third["time_per_output_token"]["expr"]   # the draft's k steps and the verify over 121/81


def test_parse_acceptance_exact():
    from costgraph.inference.speculative import expected_tokens, parse_acceptance

    assert parse_acceptance("1/3") == sympy.Rational(1, 3)
    assert parse_acceptance(" 2 / 4 ") == sympy.Rational(1, 2) == parse_acceptance("0.5")
    assert parse_acceptance(Fraction(1, 3)) == sympy.Rational(1, 3)
    assert parse_acceptance("0/7") == 0 and parse_acceptance("7/7") == 1
    assert expected_tokens(4, parse_acceptance("1/3")) == sympy.Rational(121, 81)


@pytest.mark.parametrize("alpha, said", [("1/0", "divides by zero"), ("4/3", "must be a fraction in [0, 1]"),
                                         ("1/-3", "cannot read"), ("1e0/3", "cannot read"), ("(1/3)", "cannot read"),
                                         ("1/3/3", "cannot read"), ("__import__('os')", "cannot read")])
def test_acceptance_refused(alpha, said, capsys):
    code, out, err = _cli(capsys, *LLAMA, *SPEC, "--acceptance", alpha)
    assert code == 2 and "Traceback" not in err and not out
    assert said in err and "\nhint: " in err


def test_acceptance_api_refusal():
    from costgraph.inference.speculative import parse_acceptance

    with pytest.raises(CostgraphValueError, match="divides by zero"):
        parse_acceptance("3/0")


LLAMA_512 = ["infer", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"]


DSV3 = ["infer", "deepseek_v3", "--config", "deepseek-v3", "--set", "l=4", "k_d=1", "--hardware", "h200",
        "--batch", "64", "--prompt", "100", "--generate", "10", "--speculative-tokens", "1", "--acceptance", "0.8",
        "--draft", "mtp", "--format", "json"]


def test_mtp_draft_under_a_parallel_layout(capsys):
    # was: internal error, 'ServingInference' object has no attribute 'convention'
    assert cli.main(DSV3 + ["--tp", "8"]) == 0
    plain = json.loads(capsys.readouterr().out)["serving"]["speculative"]
    assert cli.main(DSV3 + ["--tp", "8", "--ep", "8", "--dp-attention", "8"]) == 0
    spec = json.loads(capsys.readouterr().out)["serving"]["speculative"]
    assert spec["draft"] == "mtp" and spec["tokens_per_step"]["expr"] == "9/5"
    # the MTP draft runs at plain TP 8 (not the EP layout): the same draft step either way
    assert spec["draft_step_seconds"]["expr"] == plain["draft_step_seconds"]["expr"]


def test_huge_speculative_tokens_refused_not_hung(capsys):
    # was: --speculative-tokens 10**9 computed (7/10)^(10^9 + 1) exactly: no answer in 60 s
    _refused(capsys, LLAMA_512 + ["--speculative-tokens", "1000000000", "--acceptance", "0.7", "--draft", "llama"],
             "--speculative-tokens must be a whole number from 1 to 1,024")
    assert cli.main(LLAMA_512 + ["--speculative-tokens", "1024", "--acceptance", "1", "--draft", "llama",
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
    _refused(capsys, LLAMA_512 + extra, fragment)


def test_speculative_at_generate_1_refused(capsys):
    # was: a verify step at n = P + G - 2 = P - 1 cached positions (fewer than the prompt) and a
    # time per output token for a run that has no decode step
    _refused(capsys, LLAMA_512[:8] + ["--generate", "1", "--speculative-tokens", "2", "--acceptance", "0.6",
                                  "--draft", "llama"], "--generate 1 has none")


# --- vLLM's KV cache with the drafter (issue 29 item 4; costgraph.inference.speculative.vllm_draft) ---------------
# vLLM loads the drafter inside GPUModelRunner.load_model ("Loading drafter model...") before
# Worker.determine_available_memory profiles (vllm/v1/worker/gpu_model_runner.py), so its weights are among those
# the cache is sized from; EagleProposer.load_model (vllm/v1/spec_decode/eagle.py) registers the drafter's attention
# layers (every AttentionLayerBase less the target's) and get_kv_cache_spec takes them all; one spec for all layers:
# num_blocks = available // page_size // num_layers, tokens = num_blocks * block_size (vllm @ 001cabc1,
# vllm/v1/core/kv_cache_utils.py get_num_blocks, _report_kv_cache_config). DeepSeek-V3 (config.json
# num_nextn_predict_layers 1): 61 + 1 MLA layers, page = 16 tokens x (512 + 64) x 2 B = 18,432 B.
DSV3_FP8 = ["infer", "deepseek_v3", "--config", "deepseek-v3", "--hardware", "h200", "--tp", "8", "--weights", "fp8",
             "--prompt", "1000", "--generate", "100", "--format", "json"]
MTP = ["--speculative-tokens", "1", "--acceptance", "0.8", "--draft", "mtp"]


def _doc(argv):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(argv) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def dsv3_mtp():
    return _doc(DSV3_FP8 + MTP)


def test_vllm_kv_cache_holds_the_mtp_layer(dsv3_mtp):
    v = dsv3_mtp["serving"]["vllm"]
    page = 16 * 576 * 2
    assert v["draft_layers"] == 1 and v["group_size"] == 62 and v["page_bytes"] == page == 18_432
    assert v["num_blocks"] == v["available_bytes"] // page // 62
    assert v["tokens"] == v["num_blocks"] * 16


def test_vllm_available_memory_less_the_drafter_weights(dsv3_mtp):
    plain = _doc(DSV3_FP8)["serving"]["vllm"]
    v = dsv3_mtp["serving"]["vllm"]
    drafter = int(dsv3_mtp["serving"]["speculative"]["draft_weight_bytes"]["value"])
    assert v["draft_weight_bytes"] == drafter > 0
    assert v["weight_bytes"] == plain["weight_bytes"] + drafter
    assert v["available_bytes"] == plain["available_bytes"] - drafter
    assert plain["group_size"] == 61 and "draft_layers" not in plain
    # the cache re-sized with the drafter still names where its non-torch memory and its engine come from
    assert (v["non_torch_from"], v["engine"]) == (plain["non_torch_from"], plain["engine"]) == (v["non_torch_from"], "v1")


def test_vllm_kv_memory_given_with_the_drafter():
    # --kv-memory (vLLM's kv_cache_memory_bytes) replaces the profile: 40 GiB over 62 layers' pages
    v = _doc(DSV3_FP8 + MTP + ["--kv-memory", "40GiB"])["serving"]["vllm"]
    assert v["tokens"] == 40 * 2**30 // 18_432 // 62 * 16 == 601_328
