"""costgraph/arguments.py and the size reader (training/fit.parse_size): '_' as a thousands separator is
read wherever ascii_number lets it through (trial 8: `--tokens 1_000_000`, `--memory 80_000MB`,
`--reserve 8_000MB`, `--kv-memory 8_000MB` passed the rule, then the readers said "cannot read")."""

import pytest
import sympy

from costgraph.arguments import parse_count, parse_rational
from costgraph.errors import CostgraphValueError
from costgraph.training.fit import memory_size, parse_size


def test_thousands_separator_read_by_every_reader():
    assert parse_rational("1_000_000", "--tokens") == 10**6
    assert parse_rational("1_000.5", "--tokens") == sympy.Rational(2001, 2)
    assert parse_count("7_500_000_000") == 7_500_000_000
    assert parse_size("80_000MB", what="--memory") == 80 * 10**9
    assert memory_size("80_000MB") == (80 * 10**9, False)
    with pytest.raises(CostgraphValueError, match="is negative"):
        parse_rational("-1_000", "--tokens")


@pytest.mark.parametrize("text", ["8_0GB", "1__000MB", "0.000_1GB", "1e1_2"])
def test_separator_elsewhere_still_refused(text):
    with pytest.raises(CostgraphValueError, match="only separates groups of three digits"):
        parse_size(text, what="--memory")
