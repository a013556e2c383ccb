"""Agreement with PyTorch at full size: the LLaMA-style decoders' released configs (RMSNorm, SwiGLU, RoPE, GQA;
Mixtral). The comparison, its points and terms: ``tests/models/test_torch_released.py`` (RELEASED_GROUPS
splits the released configs over files by CPU time). Skipped when torch or transformers is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_torch_released import RELEASED_GROUPS, released_agrees  # noqa: E402


@pytest.mark.parametrize("file", RELEASED_GROUPS[Path(__file__).name])
def test_released_config_at_full_size(file):
    released_agrees(file)
