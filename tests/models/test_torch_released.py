"""Agreement with PyTorch at full size: every released config.json of ``examples/hf/`` against what
PyTorch measures on its ``transformers`` model, built on the meta device at its published sizes.

The cases, their terms and the comparison are those of the tiny configs
(``tests/models/test_torch_agreement.py``: parameters; forward and backward FLOPs counted by
``FlopCounterMode`` under costgraph's ``matmul`` convention; bytes autograd saves for backward against
``activation_bytes`` of the ``pytorch`` profile), each exact: ``torch == costgraph + Σ terms``. Every
point is measured by one forward and backward (``probe.flops_and_saved_bytes``: the FLOPs and the
saved bytes of the same run). Skipped when torch or transformers is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import costgraph  # noqa: E402
import torch_probe as probe  # noqa: E402  (tests/ is on sys.path under pytest)
from test_torch_agreement import CASES, FAMILIES_ELSEWHERE, HF, POINTS, check, dropout_in, real  # noqa: E402

#: every released config of examples/hf/, with the case whose terms it must satisfy
RELEASED = {
    "gpt-oss-120b.json": "gpt_oss",
    "gpt2.json": "gpt2-gelu_new", "llama-3-8b.json": "llama", "mistral-7b.json": "mistral",
    "mixtral-8x7b.json": "mixtral", "qwen2-7b.json": "qwen2", "qwen3-8b.json": "qwen3",
    "qwen3-30b-a3b.json": "qwen3_moe", "gemma-2b.json": "gemma", "gemma-2-9b.json": "gemma2",
    "phi-3-mini-4k-instruct.json": "phi3", "pythia-1b.json": "gpt_neox", "deepseek-v3.json": "deepseek_v3",
    "t5-small.json": "t5", "starcoder2-3b.json": "starcoder2",
    "nemotron-4-mini-hindi-4b-instruct.json": "nemotron",
    "command-r-08-2024.json": "cohere", "bert-base-uncased.json": "bert", "gemma-3-1b-it.json": "gemma3_text",
    "qwen2-57b-a14b.json": "qwen2_moe",
    "olmo-2-1124-13b.json": "olmo2", "mamba-2.8b-hf.json": "mamba",
    # issue 19: built from the config classes' defaults with the published sizes (SOURCES.md)
    "bloom-560m.json": "bloom", "mpt-7b.json": "mpt", "smollm3-3b.json": "smollm3",
}
#: (b, s) points at full size: s ≤ every sliding window of the releases (Gemma 3's 512 the smallest), so
#: costgraph's Min(s, w) = s. On meta a Transformer's cost does not depend on s (shapes only, no arithmetic).
FULL_POINTS = [(1, 128), (2, 64)]
#: Mamba's points. Without the mamba_ssm kernels transformers runs the reference selective scan, a Python
#: loop over the s positions in each of the 64 blocks, forward and backward (about 25 ops a position): its
#: cost on meta grows with s (about 50 s of CPU at FULL_POINTS). The terms (test_torch_agreement's
#: MAMBA_*) are linear in b·s and b·(s + K − 1), and the points only need b = 1 and b = 2 (the x_proj copy
#: from b = 2 on), s > K − 1 = 3 and, to tell terms in s from terms in b·s apart, b·s different at the two
#: points (17 and 22; FULL_POINTS have 128 both times) and both different from the tiny points' (16, 64).
SCAN_FULL_POINTS = {"mamba": [(1, 17), (2, 11)]}


def full_points(case_name: str) -> list[tuple[int, int]]:
    return SCAN_FULL_POINTS.get(CASES[case_name].config["model_type"], FULL_POINTS)


#: the released configs by test file (each file under 30 s of CPU: a full-size model on meta costs about a
#: second per point for every ~15 layers): every released config in exactly one (test_released_configs_are_split)
RELEASED_GROUPS = {
    # GPT-2-era and LayerNorm families, encoders, T5, ALiBi: this file
    "test_torch_released.py": ("gpt2.json", "pythia-1b.json", "t5-small.json", "bert-base-uncased.json",
                               "bloom-560m.json", "mpt-7b.json", "starcoder2-3b.json",
                               "nemotron-4-mini-hindi-4b-instruct.json", "command-r-08-2024.json"),
    # LLaMA-style decoders (RMSNorm, SwiGLU, RoPE, GQA), Mixtral (Mistral's with experts) included
    "test_torch_released_llama.py": ("llama-3-8b.json", "mistral-7b.json", "mixtral-8x7b.json", "qwen2-7b.json",
                                     "qwen3-8b.json", "phi-3-mini-4k-instruct.json"),
    # decoders that depart from LLaMA's: Gemma's (1 + γ) norms, soft-capping and sliding layers, OLMo 2's
    # post-norms and QK-norm, SmolLM3's NoPE layers
    "test_torch_released_variants.py": ("gemma-2b.json", "gemma-2-9b.json", "gemma-3-1b-it.json",
                                        "olmo-2-1124-13b.json", "smollm3-3b.json"),
    # the largest mixtures of experts: DeepSeek-V3 (MLA, 256 experts, 61 layers), Qwen3's MoE (128 experts)
    "test_torch_released_moe.py": ("deepseek-v3.json", "qwen3-30b-a3b.json"),
    # gpt-oss's and Qwen2's mixtures of experts; the state-space Mamba
    "test_torch_released_moe_ssm.py": ("gpt-oss-120b.json", "qwen2-57b-a14b.json", "mamba-2.8b-hf.json"),
}


def released_agrees(file: str) -> None:
    """The released ``file`` satisfies its case's equations at full size (parameters; FLOPs and saved bytes at
    each of its points)."""
    # The tiny sizes hide nothing: the released configs (GPT-2's gelu_new, Gemma's 256-wide heads,
    # Mixtral's 8 and DeepSeek-V3's 256 experts, 61 layers, ...) satisfy the same equations,
    # with the same terms, at full size. On meta this takes seconds, not memory.
    case = CASES[RELEASED[file]]
    cfg = real(file)
    m = probe.build_model(cfg["model_type"], {k: v for k, v in cfg.items() if k != "model_type"})
    hf = costgraph.from_hf_config(cfg, source=file, profile="pytorch", dropout=dropout_in(cfg))
    c = SimpleNamespace(**case.dims(cfg))

    def terms(ts, b=0, s=0):
        return {t.name: int(t.formula(c, b, s)) for t in ts}

    check(f"{file} params", probe.param_count(m), hf.costs().evaluate(**hf.values)["params"], terms(case.params))
    for b, s in full_points(RELEASED[file]):
        values = {**hf.values, "b": b, "s": s, **({"t": s} if case.seq2seq else {})}
        cg = hf.costs("model", convention="matmul").evaluate(**values)
        f, saved = probe.flops_and_saved_bytes(m, b, s)      # one forward and backward: both measurements
        for direction, ts in (("forward", case.flops_forward), ("backward", case.flops_backward)):
            ops = dict(f[f"{direction}_ops"])
            grouped = ops.pop("aten._grouped_mm", 0)
            t = terms(ts, b, s)
            check(f"{file} {direction} FLOPs (b={b}, s={s})", sum(ops.values()), cg[f"flops_{direction}"], t)
            assert grouped == -sum(v for k, v in t.items() if "_grouped_mm" in k)
        check(f"{file} saved bytes (b={b}, s={s})", saved["bytes"], cg["activation_bytes"], terms(case.bytes, b, s))


@pytest.mark.parametrize("file", RELEASED_GROUPS[Path(__file__).name])
def test_released_config_at_full_size(file):
    released_agrees(file)


def test_released_configs_are_split():
    # every released config is compared in exactly one file, and each file exists
    files = [f for group in RELEASED_GROUPS.values() for f in group]
    assert sorted(files) == sorted(RELEASED)
    here = Path(__file__).parent
    assert all((here / name).is_file() for name in RELEASED_GROUPS)


def test_scan_points_tell_the_terms_apart():
    # the smaller points of the scan families keep what FULL_POINTS give: b = 1 and b = 2, distinct b·s, each
    # b·s apart from the tiny points' (POINTS), s past the convolution's K − 1
    for model_type, points in SCAN_FULL_POINTS.items():
        case = CASES[model_type]
        assert case.config["model_type"] == model_type
        assert sorted(b for b, _ in points) == [1, 2]
        assert len({b * s for b, s in points}) == len(points)
        assert not {b * s for b, s in points} & {b * s for b, s in POINTS}
        assert all(s > case.dims(case.config)["K"] - 1 for _, s in points)


def test_every_family_with_a_released_config_is_compared_at_full_size():
    # one released config per family (Llama-2-7B/70B add nothing to Llama-3-8B's check)
    from costgraph.language.hf_config import _model_type   # diffusers configs name a _class_name instead

    families = {_model_type(json.loads(p.read_text()), p.name) for p in HF.glob("*.json")} - set(FAMILIES_ELSEWHERE)
    assert {real(f)["model_type"] for f in RELEASED} == families
    assert all(CASES[c].config["model_type"] == real(f)["model_type"] for f, c in RELEASED.items())


def test_gpt2_small_matches_the_notes():
    # TORCH_NOTES.md: GPT-2 small, b = 1, s = 1024, gelu_pytorch_tanh, train, 1-byte masks.
    cfg = real("gpt2.json")
    cfg["activation_function"] = "gelu_pytorch_tanh"
    m = probe.build_meta("gpt2", {k: v for k, v in cfg.items() if k != "model_type"})
    hf = costgraph.from_hf_config(cfg, profile="pytorch", dropout=True)
    cg = hf.costs().evaluate(**{**hf.values, "b": 1, "s": 1024})
    f, saved = probe.flops_and_saved_bytes(m, 1, 1024)
    measured = (probe.param_count(m), f["forward"], saved["bytes"])
    assert measured == (cg["params"], cg["flops_forward"], cg["activation_bytes"]) \
        == (124_439_808, 291_648_307_200, 1_079_992_320)
