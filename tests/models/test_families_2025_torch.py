"""The 2025–26 text families (issue 19) against PyTorch: OLMo 3, Seed-OSS, GLM-4.5 (glm4_moe),
ERNIE 4.5 MoE and MiniMax-M2.

For each family a tiny config (the example config of ``examples/hf/`` with its sizes shrunk and its
structural keys kept) is built by transformers 5.24 on the meta device (``tests/torch_probe.py``)
and compared with costgraph's numbers for the same config.json (``costgraph.from_hf_config``):

(a) parameters: ``sum(p.numel() for p in model.parameters())`` equals costgraph's count exactly,
    except that the sigmoid routers' ``e_score_correction_bias`` of GLM-4.5 and MiniMax-M2 is a
    *buffer* in transformers (a tensor of the checkpoint, moved by the load-balancing rule, not by
    gradients) which costgraph counts with the router, as for DeepSeek-V3
    (tests/models/test_torch_agreement.py): parameters + those buffers = costgraph, exactly;
(b) FLOPs, forward and backward: ``FlopCounterMode``'s matmul ops (mm, addmm, bmm) plus the probe's
    formula for ``aten._grouped_mm`` (the routed experts; stock FlopCounterMode counts it as 0:
    ``torch_probe.GROUPED_MM_FLOPS``) equal costgraph's ``matmul`` convention exactly, at two (b, s)
    points (s at most every sliding window, so Min(s, w) = s as FlopCounterMode's masked square).

The released configs at full size satisfy (a) and (b) too (on meta: shapes only), and ``costgraph
verify`` reports the parameters and forward FLOPs exact on each example config.

Pinned: torch 2.13.0, transformers 5.24.0. Skipped when either is not installed.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
import torch_probe as probe  # noqa: E402  (tests/ is on sys.path under pytest)

HF = Path(__file__).resolve().parents[2] / "examples" / "hf"
POINTS = [(1, 16), (2, 32)]
MATMUL_OPS = {"aten.mm", "aten.addmm", "aten.bmm"}

#: the example config of each family (examples/hf/SOURCES.md says where each comes from)
EXAMPLES = {"olmo3": "olmo3-defaults.json", "seed_oss": "seed_oss-defaults.json", "glm4_moe": "glm-4.5-air.json",
            "ernie4_5_moe": "ernie4_5_moe-defaults.json", "minimax_m2": "minimax_m2-defaults.json"}
FAMILIES = tuple(EXAMPLES)


def example(file: str, **changes) -> dict:
    cfg = json.loads((HF / file).read_text())
    cfg.update(changes)
    return cfg


TOKENS = dict(bos_token_id=0, eos_token_id=1, pad_token_id=2)
SIZES = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, vocab_size=128, intermediate_size=128,
             max_position_embeddings=64, **TOKENS)

CASES = {
    # 8 layers: two full-attention layers (j = 3, 7), six sliding ones (window 32 ≥ s)
    "olmo3": example("olmo3-defaults.json", **SIZES, num_hidden_layers=8, sliding_window=32,
                     layer_types=None),
    # head size 32 ≠ h/a (a·d = 128 ≠ h = 64, as the release's 80·128 ≠ 5120); dropout 0.1 as the defaults
    "seed_oss": example("seed_oss-defaults.json", **SIZES, num_hidden_layers=2, head_dim=32),
    # Q/K/V biases on, no output bias
    "seed_oss-out_bias": example("seed_oss-defaults.json", **SIZES, num_hidden_layers=2, head_dim=16,
                                 attention_out_bias=True, attention_bias=False),
    # GLM-4.5-Air: 1 dense layer then MoE, Q/K/V biases, half the head rotated; head size 32 ≠ h/a
    "glm4_moe": example("glm-4.5-air.json", **SIZES, num_hidden_layers=3, head_dim=32, moe_intermediate_size=32,
                        n_routed_experts=8, num_experts_per_tok=2, n_shared_experts=2, first_k_dense_replace=1),
    # GLM-4.5: per-head QK-norm, 2 dense layers, grouped routing (4 groups, 2 chosen)
    "glm4_moe-qk_norm": example("glm-4.5-air.json", **SIZES, num_hidden_layers=4, head_dim=16, use_qk_norm=True,
                                moe_intermediate_size=32, n_routed_experts=8, num_experts_per_tok=2,
                                n_shared_experts=1, first_k_dense_replace=2, n_group=4, topk_group=2),
    # ERNIE-4.5-21B-A3B's layout: 1 dense layer then MoE to the last (end index given as l − 1), tied head
    "ernie4_5_moe": example("ernie4_5_moe-defaults.json", **SIZES, num_hidden_layers=3, moe_intermediate_size=32,
                            moe_num_experts=8, moe_k=2, moe_num_shared_experts=2, moe_layer_start_index=1,
                            moe_layer_end_index=2),
    # end index -1 (the class default before __post_init__), untied head, 2 dense layers
    "ernie4_5_moe-untied": example("ernie4_5_moe-defaults.json", **SIZES, num_hidden_layers=4, moe_intermediate_size=32,
                                   moe_num_experts=8, moe_k=2, moe_num_shared_experts=1, moe_layer_start_index=2,
                                   moe_layer_end_index=-1, tie_word_embeddings=False),
    # MiniMax-M2: QK-norm over the whole projections, rotary_dim half the head, every layer MoE
    "minimax_m2": example("minimax_m2-defaults.json", **SIZES, num_hidden_layers=2, head_dim=32, rotary_dim=16,
                          num_local_experts=8, num_experts_per_tok=2),
}
CASE_IDS = list(CASES)
POINT_CASES = [(n, b, s) for n in CASES for (b, s) in POINTS]

#: the routers' score-correction bias: a buffer in transformers and in costgraph (param ...: buffer), in neither
#: parameter count
BUFFER_PARAMS = ("e_score_correction_bias",)


@functools.cache
def torch_model(name: str, full: bool = False):
    cfg = dict(json.loads((HF / EXAMPLES[name]).read_text()) if full else CASES[name])
    return probe.build_model(cfg.pop("model_type"), cfg)


@functools.cache
def hf(name: str, full: bool = False):
    cfg = json.loads((HF / EXAMPLES[name]).read_text()) if full else CASES[name]
    return costgraph.from_hf_config(cfg, source=name)


def counted_params(m) -> int:
    """sum(numel) of the parameters (model.parameters(): the router buffers left out, as costgraph does)."""
    return probe.param_count(m)


def measured_flops(m, b: int, s: int) -> dict[str, int]:
    f = probe.flops(m, b, s)
    out = {}
    for direction in ("forward", "backward"):
        ops = dict(f[f"{direction}_ops"])
        grouped = ops.pop("aten._grouped_mm", 0)
        assert set(ops) <= MATMUL_OPS, ops
        out[direction] = sum(ops.values()) + grouped
    return out


def costgraph_values(m, b: int | None = None, s: int | None = None) -> dict:
    values = dict(m.values)
    if b is not None:
        values.update(b=b, s=s)
    return m.costs("model", convention="matmul").evaluate(**values)


def test_every_family_has_a_case_and_an_example():
    from costgraph.language.hf_config import supported_model_types

    assert set(FAMILIES) <= set(supported_model_types())
    assert {c["model_type"] for c in CASES.values()} == set(FAMILIES)
    assert {json.loads((HF / f).read_text())["model_type"] for f in EXAMPLES.values()} == set(FAMILIES)


@pytest.mark.parametrize("name", CASE_IDS)
def test_tiny_model_is_the_family_class(name):
    m = torch_model(name)
    assert type(m).__name__.lower().replace("_", "").startswith(CASES[name]["model_type"].replace("_", ""))
    assert hf(name).model_type == CASES[name]["model_type"]


@pytest.mark.parametrize("name", CASE_IDS)
def test_param_count(name):
    assert counted_params(torch_model(name)) == costgraph_values(hf(name))["params"]


@pytest.mark.parametrize("name,b,s", POINT_CASES, ids=[f"{n}-b{b}-s{s}" for n, b, s in POINT_CASES])
def test_flops(name, b, s):
    measured = measured_flops(torch_model(name), b, s)
    cg = costgraph_values(hf(name), b, s)
    assert (measured["forward"], measured["backward"]) == (cg["flops_forward"], cg["flops_backward"])


FULL_POINTS = [(1, 128)]


@pytest.mark.parametrize("name", FAMILIES)
def test_example_config_at_full_size(name):
    # the full-size example configs (256 experts, 62 layers, ...) satisfy the same equalities on meta
    m, cg_model = torch_model(name, True), hf(name, True)
    assert counted_params(m) == costgraph_values(cg_model)["params"]
    for b, s in FULL_POINTS:
        measured = measured_flops(m, b, s)
        cg = costgraph_values(cg_model, b, s)
        assert (measured["forward"], measured["backward"]) == (cg["flops_forward"], cg["flops_backward"])
