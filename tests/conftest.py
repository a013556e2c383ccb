import pytest

import costgraph
from costgraph.engine.symbols import dim


@pytest.fixture(scope="session")
def gpt():
    return costgraph.load("gpt")


@pytest.fixture(scope="session")
def S():
    """The dimension symbols of the field, from the one symbol table."""
    class _S:
        pass
    s = _S()
    for name in ("b", "s", "h", "a", "l", "V", "s_max"):
        setattr(s, name, dim(name))
    return s
