"""What the new-user trial of issue 19's merge found (hostile input on the new families),
fixed at the root: each test fails on the code before the fix."""

from __future__ import annotations

import json

import pytest

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError


def run(argv, capsys):
    status = main(argv)
    out = capsys.readouterr()
    return status, out.out, out.err


@pytest.mark.parametrize("nested", [None, [1], "x", 7])
def test_a_nested_config_that_is_not_an_object_is_refused(tmp_path, nested):
    # before: llava's vision tower silently took CLIPVisionConfig's defaults (224/32/768), which is
    # not even what LlavaConfig builds for a missing vision_config (1024 wide, 24 layers, patch 14)
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llava", "vision_config": nested, "text_config": {}}))
    with pytest.raises(CostgraphValueError, match=r"key 'vision_config' must be an object") as e:
        costgraph.load_hf_config(str(path))
    assert e.value.hint


def test_a_missing_nested_config_is_refused(tmp_path):
    path = tmp_path / "config.json"
    # LlavaConfig builds its own tower for a missing vision_config, not CLIPVisionConfig's defaults;
    # CLIPConfig builds CLIPTextConfig() (its mapping entry's nested_defaults: read as the defaults)
    path.write_text(json.dumps({"model_type": "llava", "text_config": {}}))
    with pytest.raises(CostgraphValueError, match=r"key 'vision_config' must be an object .*missing or null"):
        costgraph.load_hf_config(str(path))


def test_llava_prompt_shorter_than_its_image_tokens_is_refused(capsys):
    # llava-1.5-7b: 576 image tokens; derive --set s=100 refused it, infer --prompt 100 answered
    status, out, err = run(["infer", "llava", "--config", "llava-1.5-7b", "--hardware", "h100-sxm",
                            "--prompt", "100", "--generate", "10"], capsys)
    assert status == 2 and out == ""
    assert "llava.cg:" in err and "= -476" in err
    status, out, err = run(["infer", "llava", "--config", "llava-1.5-7b", "--hardware", "h100-sxm",
                            "--prompt", "1000", "--generate", "10", "--format", "json"], capsys)
    assert status == 0, err
    assert json.loads(out)["settings"]["prompt"] == 1000


def test_whisper_infer_says_what_to_do(capsys):
    # since i19phase infer models whisper's two caches; P + G past the decoder's table of t_max = 448
    # rows warns, as s past s_max does for GPT-2
    status, out, err = run(["infer", "whisper", "--config", "whisper-tiny", "--hardware", "h100-sxm",
                            "--prompt", "1024", "--generate", "128"], capsys)
    assert status == 0, err
    assert "P + G = 1,152 positions is longer than t_max = 448" in out + err


@pytest.mark.parametrize("argv, hint", [
    (["derive", "vit", "--config", "vit-base-patch16-224", "--set", "image=0"], "--set image=N"),
    (["sweep", "llama", "--config", "llama-3-8b", "--over", "h=64:128:+64", "--max-rows", "-1"], "hint: "),
])
def test_refusals_carry_a_hint(capsys, argv, hint):
    status, _, err = run(argv, capsys)
    assert status == 2 and hint in err and "hint: " in err


def test_max_rows_reads_scientific_notation(capsys):
    status, out, err = run(["sweep", "llama", "--config", "llama-3-8b", "--over", "h=64:128:+64",
                            "--max-rows", "1e11"], capsys)
    assert status == 0, err
    assert len(out.strip().splitlines()) == 3      # the header and the rows h = 64, 128


def test_config_file_errors_carry_a_hint(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text("")
    status, _, err = run(["derive", str(empty)], capsys)
    assert status == 2 and "invalid JSON" in err and "hint: " in err
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    status, _, err = run(["derive", str(binary)], capsys)
    assert status == 2 and "not UTF-8 text" in err and "hint: " in err
    frac = tmp_path / "frac.json"
    frac.write_text(json.dumps({"model_type": "vit", "image_size": 224.5}))
    status, _, err = run(["derive", str(frac)], capsys)
    assert status == 2 and "positive whole number" in err and "hint: " in err
