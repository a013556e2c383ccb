"""The command line and its JSON contract (README, "JSON output")."""

import json
import subprocess
import sys

import pytest

from costgraph.cli import main

ALL = ("params", "flops_forward", "flops_backward", "activation_bytes")


def test_json_layer_contract(cg):
    r = cg("derive", "gpt", "--scope", "layer", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {"model", "scope", "convention", "symbols", "quantities", "breakdown"} <= set(doc)
    assert doc["model"] == "gpt" and doc["scope"] == "layer" and doc["convention"] == "matmul"
    assert doc["symbols"]["h"] == "hidden size (d_model)"
    for q in ALL:
        assert {"expr", "latex"} <= set(doc["quantities"][q])
        assert "value" not in doc["quantities"][q]          # no values given
    assert doc["quantities"]["flops_forward"]["expr"] == "24*b*s*h**2 + 4*b*s**2*h"
    assert doc["quantities"]["activation_bytes"]["latex"] == "34 b s h + 5 b s^{2} a"
    assert doc["breakdown"]["layers/attn/c_attn"]["kind"] == "linear"
    assert doc["breakdown"]["layers/attn/c_attn"]["quantities"]["params"]["expr"] == "3*h**2 + 3*h"


def test_json_model_value_gpt2_small(cg):
    # the acceptance command; GPT-2 small has 124,439,808 parameters
    r = cg("derive", "gpt", "--scope", "model", "--set", "h=768", "l=12", "a=12", "V=50257",
            "s=1024", "s_max=1024", "b=1", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["quantities"]["params"]["value"] == 124439808
    assert doc["quantities"]["flops_forward"]["value"] == 291648307200   # nanoGPT transformer_sizing
    assert doc["values"] == {"h": 768, "l": 12, "a": 12, "V": 50257, "s": 1024, "s_max": 1024, "b": 1}
    assert doc["breakdown"]["layers"]["count"] == "l"


def test_latex_layer_flops(capsys):
    assert main(["derive", "gpt", "--scope", "layer", "--format", "latex"]) == 0
    out = capsys.readouterr().out
    assert r"\text{forward FLOPs} &= 24 b s h^{2} + 4 b s^{2} h" in out


def test_text_with_config_has_units(capsys):
    assert main(["derive", "gpt", "--config", "gpt3-175b", "--scope", "layer"]) == 0
    out = capsys.readouterr().out
    # 34bsh + 5as²b at GPT-3's shape: 2,868,903,936 bytes, printed in GB and GiB both
    assert "2,868,903,936 bytes (2.87 GB, 2.67 GiB)" in out


def test_text_model_shows_grouped_formula(capsys):
    assert main(["derive", "gpt"]) == 0
    out = capsys.readouterr().out
    assert "l (12 h^2 + 13 h) + h V + h s_max + 2 h" in out


def test_options_via_set(capsys):
    assert main(["derive", "gpt", "--config", "gpt2", "--set", "bias=false", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["quantities"]["params"]["value"] == 124337664


def test_malformed_file_gives_located_error_and_status_2(cg, tmp_path):
    f = tmp_path / "bad.cg"
    f.write_text("model m {\n  dim h\n  x = linear(y, h\n}\n")
    r = cg("derive", str(f))
    assert r.returncode == 2
    assert f"{f}:4:1: syntax error" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("args", [["derive", "gtp"], ["derive", "gpt", "--set", "h=x"],
                                  ["derive", "gpt", "--config", "nope"], ["derive", "gpt", "--scope", "zzz"]])
def test_bad_arguments_exit_2_without_traceback(cg, args):
    r = cg(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.strip()


def test_list_and_ops(capsys):
    assert main(["list"]) == 0
    assert "gpt: configurations gpt2" in capsys.readouterr().out
    assert main(["ops"]) == 0
    assert "linear(x, out, bias=true, tied=none, tp=true)" in capsys.readouterr().out
    # one operator by name (as `hardware NAME`), an unknown one refused with the closest names
    assert main(["ops", "clamped_glu"]) == 0
    one = capsys.readouterr().out
    assert one.startswith("clamped_glu(x)\n    gpt-oss's clamped SwiGLU") and "linear(" not in one
    assert main(["ops", "clamp_glu"]) == 2
    assert capsys.readouterr().err.splitlines()[-2:] == [
        "error: no operator 'clamp_glu'", "hint: did you mean clamped_glu, clamp? costgraph ops lists every operator"]


def test_latex_is_named_tex_or_latex_everywhere(capsys):
    """report --format latex was refused while derive --format latex was accepted (issue 30 item 3):
    both commands take both names."""
    from costgraph.cli import main

    assert main(["report", "gpt", "--format", "latex"]) == 0
    latex = capsys.readouterr().out
    assert main(["report", "gpt", "--format", "tex"]) == 0
    assert capsys.readouterr().out == latex and "\\begin{document}" in latex
    assert main(["derive", "gpt", "--format", "tex"]) == 0
    tex = capsys.readouterr().out
    assert main(["derive", "gpt", "--format", "latex"]) == 0
    assert capsys.readouterr().out == tex and "\\begin{aligned}" in tex


@pytest.mark.parametrize("argv", [
    ["derive", "gpt", "--no-dropout=1"], ["derive", "gpt", "--format", "xml"], ["train", "gpt", "--gpus", "x"],
    ["fit", "gpt", "--train", "--serve"], ["derive", "gpt", "--s"], ["list", "extra"], ["bogus"], [],
    ["report", "gpt", "--format", "pdf"], ["sweep", "gpt", "--max-rows", "x"],
])
def test_every_argparse_rejection_has_a_hint_line(argv, capsys):
    """argparse's rejections print a hint line as every other refusal does (issue 30 item 3), exit 2."""
    from costgraph.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-2].split(": error: ", 1)[1] and err[-1].startswith("hint: "), err[-2:]


# --- --help and --version beside the argparse hints (issue 18) -------------------------------------------------------

def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_help_and_version_unchanged(capsys):
    import costgraph

    assert _cli(capsys, "--version")[:2] == (0, f"costgraph {costgraph.__version__}\n")
    code, out, _ = _cli(capsys, "infer", "--help")
    assert code == 0 and out.startswith("usage: costgraph infer") and "--page-size PAGE_SIZE" in out


# --- stdout full, closed or gone: a message and exit 2, or exit 1 for EPIPE (issue 18) -------------------------------

@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [["list"], ["derive", "gpt", "--config", "gpt2"]])
def test_stdout_full(argv):
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "costgraph.cli", *argv], stdout=full, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr == "costgraph: cannot write the output to stdout: No space left on device\n"


def test_stdout_closed():
    p = subprocess.run([sys.executable, "-m", "costgraph.cli", "list"], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True, timeout=300, pass_fds=(),
                       preexec_fn=lambda: __import__("os").close(1))
    assert p.returncode == 2, p.stderr
    assert p.stderr == "costgraph: cannot write the output: stdout is closed\n"


def test_reader_gone_is_exit_1_without_a_message():
    # EPIPE: the conventional status 1 (Python's documented SIGPIPE idiom), nothing on stderr
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "costgraph.cli", "list"], stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=300)
    finally:
        os.close(w)
    assert p.returncode == 1 and p.stderr == "", p.stderr


# --- --set: repeated flags accumulate, a name twice refused (a new user's README run) --------------------------------

def test_repeated_set_flags_accumulate(capsys):
    assert main(["derive", "gpt", "--config", "gpt2", "--set", "s=2048", "--set", "b=4", "--format", "json"]) == 0
    values = json.loads(capsys.readouterr().out)["values"]
    assert values["s"] == 2048 and values["b"] == 4


def test_same_name_twice_in_set_is_an_error(capsys):
    assert main(["derive", "gpt", "--set", "h=768", "h=1024"]) == 2
    assert "gives 'h' twice" in capsys.readouterr().err


def test_readme_example_figures_are_what_the_program_prints(capsys):
    # found by a new user's trial: the README's train example said 58,276,540,416 bytes and plan's
    # "7,301 considered" after the defaults changed (flash keeps grouped K/V); each `costgraph ...` line
    # followed by a `#   ... N bytes` comment must print that figure
    import re
    import shlex
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    pairs = re.findall(r"^(costgraph [^\n#]+?)\s*\n#\s.*?([0-9][0-9,]* bytes)", text, re.M)
    assert len(pairs) >= 2, pairs
    for command, figure in pairs:
        main(shlex.split(command)[1:])
        out = capsys.readouterr().out
        assert f" {figure}" in out, (command, figure)
