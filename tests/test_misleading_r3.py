"""Issue 18, "silently wrong or misleading" (round three): inputs that were
accepted and printed wrong or confusing figures are refused or worded plainly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError

ROOT = Path(__file__).resolve().parents[1]

PYTHIA = {"model_type": "gpt_neox", "hidden_size": 768, "num_attention_heads": 12, "rotary_pct": 0.25,
          "intermediate_size": 3072, "num_hidden_layers": 12, "vocab_size": 50304,
          "max_position_embeddings": 2048, "use_parallel_residual": True}


def _cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- 1. a rope fraction above 1 ---------------------------------------------------------------------------

def test_set_r_above_head_size_refused(capsys):
    """pythia-160m: h/a = 768/12 = 64 entries per head; r may be at most 64."""
    code, out, err = _cli(capsys, "derive", "gpt_neox", "--config", "pythia-160m", "--set", "r=100000")
    assert code == 2 and "Traceback" not in err
    # the location of the first rope call in models/std/attention.cg (line:column of `rope(`)
    lines = (ROOT / "models" / "std" / "attention.cg").read_text().splitlines()
    line = next(i for i, t in enumerate(lines, 1) if "q = rope(q" in t)
    assert f"std/attention.cg:{line}:9" in err and "rotates r entries of a last dimension of h/a (at most h/a)" in err
    assert "-99935" in err and "hint:" in err          # 64 - 100000 + 1
    code, _, err = _cli(capsys, "derive", "gpt_neox", "--config", "pythia-160m", "--set", "r=65")
    assert code == 2 and "rotates r entries" in err


def test_set_r_at_head_size_accepted(capsys):
    m = costgraph.load("gpt_neox")
    assert m.costs().evaluate("pythia-160m", r=64)["params"] == 162_322_944
    with pytest.raises(CostgraphValueError, match="rotates r entries"):
        m.costs().evaluate("pythia-160m", r=65)


def test_rotary_pct_above_one_in_config_json(tmp_path, capsys):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**PYTHIA, "rotary_pct": 2.0}))
    code, out, err = _cli(capsys, "derive", str(p))
    assert code == 2 and "Traceback" not in err
    assert f"{p}: key 'rotary_pct' is the fraction of each head that is rotated, at most 1, got 2.0" in err
    assert "hint: write a number in (0, 1]" in err
    p.write_text(json.dumps({**PYTHIA, "rotary_pct": 1.0}))
    code, out, err = _cli(capsys, "derive", str(p))
    assert code == 0 and "r=64," in out                 # 1.0 · 768/12


# --- 2. duplicate keys in config.json ---------------------------------------------------------------------

def test_duplicate_key_warns_with_key_file_and_value_used(tmp_path):
    from costgraph.language.hf_config import DuplicateKeyWarning

    text = json.dumps(PYTHIA)[:-1] + ',\n "hidden_size": 1024,\n "hidden_size": 384}'
    p = tmp_path / "config.json"
    p.write_text(text)
    with pytest.warns(DuplicateKeyWarning) as record:
        hf = costgraph.load_hf_config(str(p))
    assert hf.values["h"] == 384 and hf.values["r"] == 8          # the last value, as json.loads takes: 0.25·384/12
    assert [str(w.message) for w in record] == [
        f"duplicate key 'hidden_size' in {p}: it is given 3 times; the last value, 384, is used "
        "(as Python and Transformers do)"]
    assert record[0].filename == str(p) and record[0].lineno == 3


def test_no_warning_without_duplicates(tmp_path, recwarn):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(PYTHIA))
    assert costgraph.load_hf_config(str(p)).values["h"] == 768
    assert not [w for w in recwarn if "duplicate" in str(w.message)]


# --- 3. units past the largest prefix ---------------------------------------------------------------------

def test_bytes_past_the_largest_prefix_in_scientific_notation():
    from costgraph.numbers.units import PAST_PREFIXES, decimal, nbytes, with_unit

    assert PAST_PREFIXES == 10**33
    assert nbytes(10**33 - 10**30) == "999.00 QB, 788.07 QiB"      # still prefixed: 999·10³⁰ / 2¹⁰⁰
    assert nbytes(2 * 10**99) == "2.000 x 10⁹⁹ bytes"
    assert with_unit("activation_bytes", 16 * 10**99) == f"{16 * 10**99:,} bytes (1.600 x 10¹⁰⁰ bytes)"
    assert decimal(13265616.4, 0) == "13,265,616" and decimal(153.537, 2) == "153.54"
    assert decimal(2.1933888e91) == "2.193 x 10⁹¹"


def test_train_params_1e99_prints_no_float_artefacts(capsys):
    code, out, err = _cli(capsys, "train", "--params", "1e99", "--tokens", "1e12", "--gpus", "8",
                          "--hardware", "h100-sxm", "--mfu", "0.4")
    assert code == 0, err
    assert "(2.000 x 10⁹⁹ bytes)" in out and "(1.600 x 10¹⁰⁰ bytes)" in out and "QB" not in out
    assert "GPU-hours    4.211 x 10⁹³" in out                        # 6·10¹¹¹ / (8 · 9.894e14 · 0.4) / 3600 · 8
    assert "time         1.895 x 10⁹⁶ s = 2.193 x 10⁹¹ days" in out
    assert all(len(tok) < 40 for line in out.splitlines() for tok in line.split() if "," not in tok)


# --- 4. a report's average layer worded as derive's -------------------------------------------------------

def test_report_average_layer_uses_derive_wording(capsys):
    """gemma-3-1b: 26 layers, one global in 6 (floor(26/6) = 4): the per-layer forward FLOPs are
    32416265666560/13 = 2,493,558,897,427 9/13."""
    code, out, err = _cli(capsys, "report", "gemma3_text", "--config", "gemma-3-1b", "--format", "md")
    assert code == 0, err
    assert "/13 FLOP |" not in out
    assert "| 2,493,558,897,427 9/13 FLOP (average; ≈ 2,493,558,897,427.7) |" in out
    code, derived, err = _cli(capsys, "derive", "gemma3_text", "--config", "gemma-3-1b", "--scope", "layers")
    assert "forward FLOPs                2,493,558,897,427 9/13 FLOP (average; ≈ 2,493,558,897,427.7)" in derived


# --- 5. cosmetics -----------------------------------------------------------------------------------------

def test_derive_dev_zero_is_not_a_regular_file(capsys):
    code, out, err = _cli(capsys, "derive", "/dev/zero")
    assert code == 2 and err.startswith("error: /dev/zero is not a regular file\n") and "no such" not in err
    code, out, err = _cli(capsys, "derive", "no/such/model.cg")
    assert code == 2 and err.startswith("error: no such model file: no/such/model.cg\n")


@pytest.mark.parametrize("name", ["", "  "])
def test_hardware_empty_name_asks_for_a_name(capsys, name):
    from costgraph.hardware import presets

    code, out, err = _cli(capsys, "hardware", name)
    assert code == 2 and "did you mean" not in err
    assert err.startswith("error: a hardware name is needed, got an empty one\nhint: presets: "
                          + ", ".join(presets()) + ";")
    code, out, err = _cli(capsys, "hardware", "h100sx")
    assert code == 2 and "did you mean 'h100-sxm'?" in err
