"""numbers.minmax (issue 27 item 6, the planner's speed): smin/smax give the very object SymPy's
Min/Max give (the same srepr: arguments, order, evaluation), and skip SymPy's pairwise proofs only where
the order of the arguments changes with the symbols.

The reference is SymPy's own constructor (sympy 1.14.0, sympy/functions/elementary/miscellaneous.py,
``MinMaxBase.__new__``: ``_new_args_filter``, ``_collapse_arguments``, ``_find_localzeros``), run here beside."""

import pytest
import sympy

from costgraph.engine.symbols import dim
from costgraph.numbers import minmax
from costgraph.numbers.minmax import smax, smin
from costgraph.parallel import layer_split

L, KD, M = dim("l"), dim("k_d"), dim("m")
H = sympy.Rational(1, 2)
PAIRS = [
    (KD, L / 2 - H), (43, KD), (8, L), (L - 15, KD), (0, sympy.Min(KD, L / 2 - H) - 14),   # undecided
    (0, L - sympy.Max(KD, L / 2 + H) - 14), (sympy.Max(7, KD), sympy.Min(10, L)),
    (L, L + 1), (L + 3, L), (2 * L, L), (0, L), (KD, KD), (3, 5), (H, -2),                   # decided
    (L, sympy.Max(L, KD)), (sympy.Min(L, 4), L), (0, -L), (M * L, L),
    (sympy.oo, L), (-sympy.oo, KD),                                                           # short circuits
]


def same(a, b) -> bool:
    return sympy.srepr(a) == sympy.srepr(b) and a == b and a.args == b.args


@pytest.mark.parametrize("a, b", PAIRS)
def test_same_object_as_sympy(a, b):
    assert same(smin(a, b), sympy.Min(a, b))
    assert same(smax(a, b), sympy.Max(a, b))
    assert same(smin(b, a), sympy.Min(b, a))
    assert same(smax(a, b, 3), sympy.Max(a, b, 3))


def test_fast_path_taken_only_where_the_order_changes():
    assert minmax._unordered(frozenset([KD, L / 2 - H]))          # k_d = 1, l = 100 vs k_d = 100, l = 1
    assert minmax._unordered(frozenset([sympy.Integer(43), KD]))
    assert not minmax._unordered(frozenset([L, L + 1]))           # l < l + 1 at every point: SymPy decides
    assert not minmax._unordered(frozenset([M * L, L]))           # m·l ≥ l for positive integers
    neg = sympy.Symbol("n", negative=True)                        # a domain without the positive integers
    assert not minmax._unordered(frozenset([neg, sympy.Integer(-3)]))
    assert same(smin(neg, -3), sympy.Min(neg, -3))
    plain = sympy.Symbol("z")                                     # no assumptions: SymPy's own Min
    assert same(smax(plain, 2), sympy.Max(plain, 2))


def test_layer_split_same_as_with_sympy(monkeypatch):
    """DeepSeek-V3's uneven splits (the first dense layers ``k_d`` of ``l``, MTP after): the shares are the
    objects SymPy's Min/Max build."""
    counts = [KD, L - KD, sympy.Integer(1)]
    cases = [dict(p=4), dict(p=8, first=3), dict(p=16, first=4, last=1), dict(p=8, v=2), dict(p=4, embedding=True,
                                                                                                  loss=True)]
    def shares():
        layer_split._stage_shares.cache_clear(), layer_split._min.cache_clear(), layer_split._max.cache_clear()
        return [layer_split.stage_shares(counts, **kw) for kw in cases]
    fast = shares()
    monkeypatch.setattr(layer_split, "smin", sympy.Min)
    monkeypatch.setattr(layer_split, "smax", sympy.Max)
    slow = shares()
    layer_split._stage_shares.cache_clear(), layer_split._min.cache_clear(), layer_split._max.cache_clear()
    assert any(isinstance(x, sympy.Add) and x.has(sympy.Max) for rows in slow for row in rows for x in row)
    for f, s in zip(fast, slow):
        assert all(same(x, y) for fr, sr in zip(f, s) for x, y in zip(fr, sr))
