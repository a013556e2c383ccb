"""``costgraph verify``: costgraph's costs against PyTorch on the transformers model of a config.json
(costgraph/verify.py), and the message without the torch extra."""

import builtins
import json
from pathlib import Path

import pytest

from costgraph import cli
from costgraph.verify import _fit, explain

HF = Path(__file__).resolve().parents[1] / "examples" / "hf"

TINY = {
    # GPT-2's released config (dropout 0.1: masks counted) with gelu_pytorch_tanh, tiny sizes
    "gpt2": dict(json.loads((HF / "gpt2.json").read_text()), n_embd=64, n_layer=2, n_head=4, vocab_size=128,
                 n_positions=64, n_ctx=64, activation_function="gelu_pytorch_tanh", bos_token_id=0, eos_token_id=0),
    "llama": dict(json.loads((HF / "llama-3-8b.json").read_text()), hidden_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, vocab_size=128, intermediate_size=128,
                  max_position_embeddings=64, bos_token_id=0, eos_token_id=1, pad_token_id=2),
}


def _write(tmp_path, name):
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(TINY[name]))
    return p


def test_fit_of_a_difference():
    shapes = [(1, 16), (2, 32), (3, 8)]
    assert _fit(shapes, [5 * b * s - 2 * b * s * s for b, s in shapes]) == (5, -2)
    assert _fit(shapes, [8 * s for b, s in shapes]) is None          # not α·b·s + β·b·s²


@pytest.mark.parametrize("name", sorted(TINY))
def test_verify_tiny_configs_all_exact(tmp_path, name, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from costgraph.verify import verify

    v = verify(str(_write(tmp_path, name)), shapes=[(1, 16), (2, 32)])
    assert [q.name for q in v.quantities] == ["parameters", "forward FLOPs", "backward FLOPs", "KV cache bytes",
                                              "saved bytes"]
    assert all(q.skipped is None for q in v.quantities)
    assert v.exact, [(q.name, q.diffs) for q in v.quantities]
    assert v.dropout == (name == "gpt2")        # the config's dropout rates apply
    if name == "gpt2":
        assert v.quantities[-1].torch[0] > 0


def test_cli_verify_reports_exact_and_differences(tmp_path, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    p = _write(tmp_path, "llama")
    assert cli.main(["verify", "llama", "--hf", str(p), "--shape", "1x16", "2x32", "--no-kv"]) == 0
    out = capsys.readouterr().out
    assert "exact" in out and "LlamaForCausalLM" in out and out.rstrip().endswith("all exact")
    assert "KV cache bytes   skipped" in out
    # GPT-2's gelu_new keeps three more [b, s, 4h] bf16 tensors per layer: 24·l·h bytes per token
    cfg = dict(TINY["gpt2"], activation_function="gelu_new")
    g = tmp_path / "gelu_new.json"
    g.write_text(json.dumps(cfg))
    assert cli.main(["verify", "--hf", str(g), "--no-kv"]) == 1
    out = capsys.readouterr().out
    assert f"difference = {24 * 2 * 64:,}·b·s (fits all 3 shapes)" in out


def test_cli_verify_bad_shape(tmp_path, capsys):
    assert cli.main(["verify", "--hf", str(tmp_path / "x.json"), "--shape", "2by32"]) == 2
    assert "--shape" in capsys.readouterr().err


def test_without_torch_says_how_to_install(tmp_path, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch.") or name == "transformers":
            raise ImportError(f"No module named '{name}'", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    assert cli.main(["verify", "--hf", str(_write(tmp_path, "llama"))]) == 2
    err = capsys.readouterr().err
    assert "costgraph verify needs PyTorch" in err and "pip install -e '.[torch]'" in err
    assert "Traceback" not in err


# The released GPT-2 small (examples/hf/gpt2.json, openai-community/gpt2): n_embd 768, n_layer 12,
# n_head 12, vocab 50257, n_positions 1024; hf_mapping.toml names them h, l, a, V, s_max
GPT2_DIMS = {"h": 768, "l": 12, "a": 12, "V": 50257, "s_max": 1024}
# gelu_new written as Python ops keeps three more [b, s, 4h] bf16 tensors per layer than one GELU:
# 3 · 4h · 2 bytes · l = 24·l·h per token (README, "Agreement with PyTorch", gpt2 row)
GELU_NEW = 24 * 12 * 768


def test_explain_finds_every_monomial_of_the_config():
    got = explain(GELU_NEW, GPT2_DIMS)
    # l = a = 12 in GPT-2 small, and 18·12·1024 = 221,184 too: the two shapes cannot tell these apart
    assert got == ["18 a s_max", "18 l s_max", "24 h a", "24 l h", "2 h a^2", "2 l h a", "2 l^2 h"]
    assert GELU_NEW == 221_184 == 18 * 12 * 1024 == 2 * 12 * 12 * 768
    assert explain(2 * 768 ** 2, {"h": 768, "l": 12}) == ["2 h^2"]           # one answer: no ambiguity
    assert explain(-3 * 768, {"h": 768}) == ["-3 h"]
    assert explain(50257 * 65, GPT2_DIMS) == []           # coefficient 65 > MAX_COEFFICIENT
    assert explain(7, {"b1": 1}) == ["7"]                  # a dimension worth 1 explains nothing


def test_verify_released_gpt2_difference_in_the_config_symbols(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    assert cli.main(["verify", "--hf", str(HF / "gpt2.json"), "--no-kv"]) == 1
    out = capsys.readouterr().out
    assert f"difference = {GELU_NEW:,}·b·s (fits all 3 shapes)" in out
    # gelu_new keeps 24 l h bytes a token more (the README's agreement table); GPT-2 small has l = a = 12 and
    # s_max = 1024 = 4/3 h, so other monomials fit too: the five with fewest factors are shown, then a count
    assert ("b·s: 221,184 = 18 a s_max = 18 l s_max = 24 h a = 24 l h = 2 h a^2 in the config's symbols "
            "(and 2 more; several explain it: a fit at this config's values)") in out


def test_verification_renders_as_a_table_in_notebooks():
    """A Verification in Jupyter and IPython's pretty printer is a table, one row per quantity and shape
    (issue 32 item 2), not the dataclass's fields; print() gives the report `costgraph verify` prints. The
    figures: Pythia-1B's verify run in docs/import.md (torch 2.13.0+cpu, transformers 5.24.0)."""
    pretty = pytest.importorskip("IPython.lib.pretty").pretty
    from costgraph.verify import Quantity, Verification, to_text

    shapes = [(1, 16), (2, 32), (3, 8)]
    v = Verification("gpt_neox", "gpt_neox", "GPTNeoXForCausalLM", "examples/hf/pythia-1b.json", False,
                     [Quantity("parameters", [(1, 16)], [1011781632], [1011781632]),
                      Quantity("KV cache bytes", shapes, [], [], skipped="not asked (--no-kv)"),
                      Quantity("saved bytes", shapes, [18161920, 65037312, 23945600], [16077056, 65061888, 23951744])],
                     "torch 2.13.0+cpu, transformers 5.24.0")
    assert str(v) == to_text(v) and str(v).endswith("differences found (torch − costgraph above)")
    lines = pretty(v).splitlines()
    assert lines[0] == ("costgraph 'gpt_neox' vs transformers GPTNeoXForCausalLM (torch 2.13.0+cpu, "
                        "transformers 5.24.0): differences found")
    assert lines[2].split() == ["parameters", "—", "—", "1,011,781,632", "1,011,781,632", "0", "exact"]
    assert "skipped: not asked (--no-kv)" in lines[3]
    assert lines[4].split() == ["saved", "bytes", "1", "16", "18,161,920", "bytes", "16,077,056", "bytes",
                                "2,084,864", "bytes", "differs"]
    assert len(lines) == 7 and "Verification(" not in pretty(v)
    html = v._repr_html_()
    assert html.count("<tr>") == 1 + 5 and "<td>-24,576 bytes</td>" in html
    # each quantity's unit is declared with its name (costgraph.verify.UNITS), not guessed from its words
    assert [q.unit for q in v.quantities] == ["", "bytes", "bytes"]
