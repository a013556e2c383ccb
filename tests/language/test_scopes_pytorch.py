"""Whole numbers at every scope under the pytorch activation profile (issue 6, item 3): the check of
tests/language/test_scopes.py (tests/scope_checks.py) for every bundled model, split from it by profile so each
file stays under 30 s of CPU."""

import pytest

from costgraph.language.resources import bundled_model_names
from scope_checks import check_every_scope_is_whole


@pytest.mark.parametrize("name", bundled_model_names())
def test_every_scope_is_whole_pytorch(name):
    check_every_scope_is_whole(name, "pytorch")
