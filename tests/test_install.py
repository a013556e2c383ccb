"""The grammar and the bundled models ship inside the installed package:
install into a fresh virtualenv (not editable) and derive from elsewhere."""

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_install_derives_bundled_model(tmp_path):
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    py = env / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", str(ROOT)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    r = subprocess.run([str(env / "bin" / "costgraph"), "derive", "gpt", "--config", "gpt2", "--format", "json"],
                       capture_output=True, text=True, cwd=work)
    assert r.returncode == 0, r.stderr
    # GPT-2 small: 124,439,808 parameters
    assert json.loads(r.stdout)["quantities"]["params"]["value"] == 124439808
    # the data files of the analyses ship too: policies, optimizers, hardware presets, dtypes
    for args in (["train", "llama", "--config", "llama-2-7b", "--gpus", "8", "--zero", "3", "--optimizer", "adafactor"],
                 ["hardware", "h100-sxm"],
                 ["infer", "llama", "--config", "llama-2-7b", "--hardware", "h100-sxm", "--prompt", "128",
                  "--generate", "8", "--kv", "int8", "--weights", "int4"],
                 ["train", "llama", "--config", "llama-2-7b", "--lora", "8", "--quantize", "nf4", "--gpus", "1"]):
        r = subprocess.run([str(env / "bin" / "costgraph"), *args], capture_output=True, text=True, cwd=work)
        assert r.returncode == 0, (args, r.stderr)
    # the installed copy is used, not the checkout
    where = subprocess.run([str(py), "-c", "import costgraph; print(costgraph.__file__)"],
                           capture_output=True, text=True, cwd=work).stdout
    assert str(env) in where
