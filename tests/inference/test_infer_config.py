"""`costgraph infer --config NAME` builds the model with the options the configuration sets
(issue 10: a `config` block that sets an option was accepted and ignored), as derive and train do.

GPT-2 small without biases (nanoGPT's bias=False): 124,337,664 parameters (README, "More"; the
124,439,808 of DOMAIN.md §1 less, per layer, the linear biases 3h + h + 4h + h and the two
LayerNorm shifts 2h, and the final LayerNorm's shift h, h = 768);
bf16 weights are 2 bytes each.
"""

import json

from costgraph.cli import main

NANO = """import "gpt.cg"

model nano extends gpt {
  option bias = true
}

config gpt2-nobias { h = 768, l = 12, a = 12, V = 50257, s_max = 1024, s = 1024, b = 1, bias = false }
"""

ARGS = ["--hardware", "h100-sxm", "--prompt", "16", "--generate", "4", "--format", "json"]


def _infer(capsys, *argv):
    assert main(["infer", *argv, *ARGS]) == 0
    return json.loads(capsys.readouterr().out)


def test_infer_config_applies_its_options(tmp_path, capsys):
    path = tmp_path / "nano.cg"
    path.write_text(NANO)
    doc = _infer(capsys, str(path), "--config", "gpt2-nobias")
    assert doc["weight_bytes"]["value"] == 2 * 124_337_664
    assert 124_439_808 - 124_337_664 == 12 * 11 * 768 + 768


def test_infer_set_option_overrides_the_config(tmp_path, capsys):
    path = tmp_path / "nano.cg"
    path.write_text(NANO)
    doc = _infer(capsys, str(path), "--config", "gpt2-nobias", "--set", "bias=true")
    assert doc["weight_bytes"]["value"] == 2 * 124_439_808     # DOMAIN.md §1, GPT-2 small
