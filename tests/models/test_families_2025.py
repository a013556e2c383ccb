"""The 2025–26 text families of issue 19 without torch: their config.json guards, GLM-4.5's
multi-token prediction option, and every analysis (derive, train, infer) on their example configs.
Exactness against transformers is tests/models/test_families_2025_torch.py's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphValueError

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
EXAMPLES = ("olmo3-defaults.json", "seed_oss-defaults.json", "glm-4.5-air.json", "ernie4_5_moe-defaults.json",
            "minimax_m2-defaults.json")


def config(file: str, **changes) -> dict:
    cfg = json.loads((HF / file).read_text())
    cfg.update(changes)
    return cfg


def params(cfg: dict, **options) -> int:
    m = costgraph.from_hf_config(cfg, options=options or None)
    return m.costs().evaluate(**m.values)["params"]


@pytest.mark.parametrize("file,changes", [
    ("olmo3-defaults.json", dict(layer_types=["full_attention"] * 32)),       # no sliding layers: another model
    ("olmo3-defaults.json", dict(attention_bias=True)),
    ("seed_oss-defaults.json", dict(mlp_bias=True)),
    ("glm-4.5-air.json", dict(n_shared_experts=0)),
    ("glm-4.5-air.json", dict(tie_word_embeddings=True)),
    ("ernie4_5_moe-defaults.json", dict(moe_layer_end_index=20)),             # dense layers after the MoE ones
    ("ernie4_5_moe-defaults.json", dict(moe_layer_end_index=True)),
    ("ernie4_5_moe-defaults.json", dict(moe_layer_interval=2)),
    ("ernie4_5_moe-defaults.json", dict(use_bias=True)),
    ("minimax_m2-defaults.json", dict(shared_intermediate_size=1024)),
])
def test_variants_the_model_files_do_not_describe_are_refused(file, changes):
    with pytest.raises(CostgraphValueError, match="variant"):
        costgraph.from_hf_config(config(file, **changes))


def test_ernie_moe_to_the_last_layer_either_way():
    # moe_layer_end_index -1 (Ernie4_5_MoeConfig's argument default) and l − 1 (what it stores) are one model
    assert params(config("ernie4_5_moe-defaults.json", moe_layer_end_index=-1)) \
        == params(config("ernie4_5_moe-defaults.json")) == 21_825_437_888


def test_olmo3_layer_types_as_the_default_pattern():
    cfg = config("olmo3-defaults.json")
    assert cfg["layer_types"][:4] == ["sliding_attention"] * 3 + ["full_attention"]
    m = costgraph.from_hf_config(cfg)
    v = m.costs().evaluate(**{**m.values, "s": 8192})
    # KV cache: 8 full layers keep s positions, 24 sliding ones w = 4096; K and V, 32 heads of 128, bf16
    assert v["kv_cache_bytes"] == 2 * 2 * 32 * 128 * (8 * 8192 + 24 * 4096)


def test_glm4_moe_mtp_is_one_more_moe_layer_with_its_projection_and_norms():
    cfg = config("glm-4.5-air.json")
    off, on = params(cfg), params(cfg, mtp=True)
    deeper = params(config("glm-4.5-air.json", num_hidden_layers=47))   # one MoE layer more
    h = cfg["hidden_size"]
    # eh_proj 2h → h, enorm, hnorm and final_layernorm; the embedding and head are shared
    assert on - off == (deeper - off) + 2 * h * h + 3 * h
    assert off == 106_852_245_504   # transformers on meta (the routers' buffers apart)


@pytest.mark.parametrize("file", EXAMPLES)
def test_every_analysis_runs(file, capsys):
    path = str(HF / file)
    assert main(["derive", path]) == 0
    assert main(["train", path]) == 0
    assert main(["infer", path, "--prompt", "1024", "--generate", "256"]) == 0
    assert "parameters" in capsys.readouterr().out
