"""Issue 18, cosmetics (round three): a huge ``--page-size`` label, ``--acceptance`` as an exact
fraction, duplicate names in hints, and argparse's own errors with a hint."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import sympy

from costgraph.cli import main
from costgraph.errors import CostgraphValueError

LLAMA = ["infer", "llama", "--config", "llama-3-8b", "--hardware", "h100-sxm", "--prompt", "1024", "--generate", "256"]
SPEC = ["--speculative-tokens", "4", "--draft", "llama", "--draft-config", "llama-3-8b"]


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- 1. --page-size 1e12: read as --generate is, printed within the label column ---------------------------

def test_page_size_1e12_label_fits_the_column(capsys):
    code, out, err = _cli(capsys, *LLAMA, "--page-size", "1e12")   # was: "invalid int value: '1e12'"
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("  paged (blocks of"))
    # the label column is 28 characters wide: the label and one space at least, then the formula
    assert row.startswith("  paged (blocks of 1.000 T)   4000000000000 b d kv l ceiling(")
    # 4 bytes x d 128 x kv 8 x l 32 per token, one block of 10^12 tokens per sequence
    assert row.endswith("= 131,072,000,000,000,000 bytes (131.07 PB, 116.42 PiB)")
    # vLLM takes any positive block size (vllm-project/vllm @ 002f10e, vllm/config/cache.py::CacheConfig
    # .block_size gt=0) and then has no block to allocate: the report says so, as vLLM would
    assert "  GPU KV cache size         0 tokens (0 blocks of 4,096,000,000,000,000 bytes per layer" in out
    assert "vLLM would not start: No available memory for the cache blocks" in out


@pytest.mark.parametrize("k, label, bytes_per_block", [("16", "paged (blocks of 16)        ", 64),
                                                       ("2**10", "paged (blocks of 1,024)     ", 4096),
                                                       ("1_048_576", "paged (blocks of 1,048,576) ", 4194304),
                                                       ("12345678", "paged (blocks of 12.35 M)   ", 49382712)])
def test_page_size_labels(k, label, bytes_per_block, capsys):
    """k tokens a block, 4 bytes (K and V in bf16) a token and (d, kv, l) position: 4 k b d kv l."""
    code, out, err = _cli(capsys, *LLAMA, "--page-size", k)
    assert code == 0, err
    assert f"\n  {label}{bytes_per_block} b d kv l ceiling(" in out


def test_page_size_json_exact(capsys):
    code, out, err = _cli(capsys, *LLAMA, "--page-size", "1e12", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["settings"]["page_size"] == 10**12
    assert doc["kv_cache_bytes_paged"]["value"] == 131_072 * 10**12


@pytest.mark.parametrize("k, said", [("0", "not a positive whole number"), ("-3", "cannot read --page-size"),
                                     ("1e16", "out of range"), ("1.5", "--page-size"), ("abc", "cannot read")])
def test_page_size_refused(k, said, capsys):
    code, out, err = _cli(capsys, *LLAMA, "--page-size", k)
    assert code == 2 and "Traceback" not in err and not out
    assert said in err and "\nhint: " in err


# --- 4. --acceptance 1/3: an exact fraction -----------------------------------------------------------------

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


# --- 2. each name once in a hint ----------------------------------------------------------------------------

@pytest.mark.parametrize("model, nodes", [
    # was: "q_proj, k_proj, ..., down_proj, q_proj, k_proj, ..., lm_head" (one q_proj per layer kind)
    ("gemma3_text", "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, lm_head"),
    ("jamba", "q_proj, k_proj, v_proj, o_proj, in_proj, x_proj, dt_proj, out_proj, gate, gate_proj, up_proj, "
              "down_proj, lm_head"),
])
def test_lora_target_hint_names_each_node_once(model, nodes, capsys):
    code, out, err = _cli(capsys, "train", model, "--lora", "16", "--lora-targets", "qproj")
    assert code == 2 and not out
    assert err.splitlines()[-1] == "hint: linear nodes: " + nodes


def test_hints_helpers():
    from costgraph.hints import close, did_you_mean, listing, unique

    assert unique(["b", "a", "b", 1, "1"]) == ["b", "a", "1"]
    assert listing(["q", "k", "q", "v", "k"]) == "q, k, v"
    assert close("h100", ["h100-sxm", "h100-pcie", "h100-sxm", "h200"], prefix=True) == ["h100-sxm", "h100-pcie"]
    assert close("lama", ["llama", "llama", "gemma"], n=3) == ["llama"]
    assert close("", ["a", "b"], prefix=True) == []
    assert did_you_mean("lineer", ["linear", "linear"]) == "did you mean 'linear'?"
    assert did_you_mean("zzz", ["linear"]) is None


def test_hardware_did_you_mean_once(capsys):
    code, out, err = _cli(capsys, "hardware", "h100")
    assert code == 2
    hint = err.splitlines()[-1]
    assert hint.startswith("hint: did you mean 'h100-sxm' or 'h100-pcie'? presets: a100-40gb-sxm, ")
    names = hint.split("presets: ")[1].split("; ")[0].split(", ")
    assert len(names) == len(set(names)) == 31


# --- 3. argparse's own errors: what was expected and a hint, exit status 2 ----------------------------------

INFER = ["infer", "llama", "--config", "llama-3-8b", "--prompt", "8", "--generate", "2"]


@pytest.mark.parametrize("args, error, hint", [
    (INFER + ["--promt", "5"], "costgraph infer: error: unrecognized arguments: --promt 5",
     "hint: did you mean --prompt? costgraph infer --help lists its arguments"),
    (INFER + ["--promt", "5", "--batchh=3"], "costgraph infer: error: unrecognized arguments: --promt 5 --batchh=3",
     "hint: --promt: did you mean --prompt? --batchh: did you mean --batch? costgraph infer --help lists its arguments"),
    (["derive", "gpt", "extra"], "costgraph derive: error: unrecognized arguments: extra",
     "hint: it takes no more positional values; costgraph derive --help lists its arguments"),
    (INFER + ["--compute", "fp9"],
     "costgraph infer: error: argument --compute: invalid choice: 'fp9' (choose from 'bf16', 'fp16', 'fp8', 'tf32', "
     "'fp32')", "hint: did you mean 'fp8'? one of: bf16, fp16, fp8, tf32, fp32; costgraph infer --help lists its "
                "arguments"),
    (["drive", "gpt"], None, "hint: did you mean 'derive'? one of: derive, train, "),
    (["derive", "gpt", "--format", "xml"], None,
     "hint: one of: text, latex, json; costgraph derive --help lists its arguments"),
    (INFER + ["--batch", "x"], "costgraph infer: error: argument --batch: invalid int value: 'x'",
     "hint: --batch takes a whole number, e.g. 8; costgraph infer --help lists its arguments"),
    (["infer", "llama", "--generate", "2"], "costgraph infer: error: the following arguments are required: --prompt",
     "hint: give --prompt PROMPT — prompt tokens per sequence P: a whole number, e.g. 2048, 1e7 or 10**7 (at most "
     "10**15); costgraph infer --help lists its arguments"),
    (["derive"], "costgraph derive: error: the following arguments are required: model", "hint: give model — "),
    (["plot", "gpt", "--kind", "memory"], "costgraph plot: error: the following arguments are required: -o/--output",
     "hint: give --output FILE — "),
    (INFER + ["--batch"], "costgraph infer: error: argument --batch: expected one argument",
     "hint: --batch BATCH — concurrent sequences b (default 1): give its value after it; costgraph infer --help "
     "lists its arguments"),
    (INFER + ["--p", "3"], "costgraph infer: error: ambiguous option: --p could match --prompt, --page-size, --peak, --pp",
     "hint: write the flag in full: --prompt or --page-size or --peak or --pp; costgraph infer --help lists its "
     "arguments"),
    # a type function's own "(hint: ...)" becomes the hint line
    (INFER + ["--page-size", "0"], "costgraph infer: error: argument --page-size: --page-size '0' is not a positive "
                                   "whole number",
     "hint: a positive whole number, e.g. 1000, 1e12 or 10**12; costgraph infer --help lists its arguments"),
], ids=["unknown-flag", "two-unknown-flags", "extra-positional", "invalid-choice", "unknown-command",
        "invalid-format", "wrong-type", "missing-flag", "missing-positional", "missing-output", "no-value",
        "ambiguous", "type-hint"])
def test_argparse_errors_have_hints(args, error, hint, capsys):
    code, out, err = _cli(capsys, *args)
    assert code == 2 and not out and "Traceback" not in err
    lines = err.splitlines()
    assert lines[0].startswith("usage: costgraph")       # argparse's usage is kept
    if error is not None:
        assert lines[-2] == error
    assert lines[-1].startswith(hint)
    assert lines[-1].endswith("--help lists its arguments")


def test_help_and_version_unchanged(capsys):
    import costgraph

    assert _cli(capsys, "--version")[:2] == (0, f"costgraph {costgraph.__version__}\n")
    code, out, _ = _cli(capsys, "infer", "--help")
    assert code == 0 and out.startswith("usage: costgraph infer") and "--page-size PAGE_SIZE" in out
