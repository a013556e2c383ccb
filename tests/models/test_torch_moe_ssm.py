"""Agreement with PyTorch for the mixture-of-experts and state-space families' tiny configs (Mixtral, Qwen's
MoE, DeepSeek-V2/V3, gpt-oss, Llama 4, Mamba, Jamba): their routing, dispatch and reference-scan terms. The
cases, their terms and the tests are ``tests/models/test_torch_agreement.py``'s (MOE_SSM_TYPES), split off
for CPU time. Skipped when torch or transformers is not installed."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_torch_agreement import (case_ids, flops_agree, keeps_the_family_structure, params_agree,  # noqa: E402
                                  point_cases, point_ids, saved_bytes_agree)

CASE_IDS = case_ids(moe_ssm=True)
POINT_CASES = point_cases(CASE_IDS)


@pytest.mark.parametrize("name", CASE_IDS)
def test_tiny_config_keeps_the_family_structure(name):
    keeps_the_family_structure(name)


@pytest.mark.parametrize("name", CASE_IDS)
def test_param_count(name):
    params_agree(name)


@pytest.mark.parametrize("name,b,s", POINT_CASES, ids=point_ids(POINT_CASES))
def test_flops(name, b, s):
    flops_agree(name, b, s)


@pytest.mark.parametrize("name,b,s", POINT_CASES, ids=point_ids(POINT_CASES))
def test_saved_bytes(name, b, s):
    saved_bytes_agree(name, b, s)
