"""numbers.substitute (issue 27 item 6, the planner's speed): the substitution the planner compiles
gives the value SymPy's xreplace gives once every symbol is a number, leaves Max/Min unevaluated
(their evaluation compared symbolic sums), and the screen's sums stay NumPy float arrays."""

import numpy as np
import sympy

from costgraph.numbers.substitute import exact_value, substitute
from costgraph.training.overlap import Hide, KindOverlap, Overlaps

x, y = sympy.symbols("x y", positive=True, integer=True)
E = (sympy.Max(x * y, 3 * x + y) + sympy.Min(x, y) / 2 + sympy.floor(x * y / 3)
     + sympy.Piecewise((x, sympy.Eq(sympy.Mod(y, 2), 0)), (y, True)))


def test_same_value_as_xreplace():
    for xv in (1, 2, 5):
        part = substitute(E, {x: sympy.Integer(xv)})
        for yv in (1, 2, 3, 7, 8):
            assert part.xreplace({y: sympy.Integer(yv)}) == E.xreplace({x: xv, y: yv})


def test_max_left_unevaluated_and_memo_shared():
    memo = {}
    e = sympy.Max(x, y + 1)
    assert isinstance(e, sympy.Max)
    got = substitute(e, {x: sympy.Integer(1)}, memo)
    assert isinstance(got, sympy.Max)   # xreplace decides Max(1, y + 1) = y + 1; the compiled max gives the same
    assert e.xreplace({x: 1}) == y + 1
    assert substitute(e * x, {x: sympy.Integer(1)}, memo) is got   # the shared part substituted once


def test_exposed_sum_of_arrays_is_a_float_array():
    a, f = np.array([1.0, 2.0]), np.array([4.0, 4.0])
    ov = Overlaps("megatron", {"tp": KindOverlap("tp", "exposed", a, a),
                               "dp_grads": KindOverlap("dp_grads", "buckets", a, a * 0, (Hide(a, a * 0 + 1, "backward"),))},
                  f, f)
    got = ov.total_exposed(np.maximum)
    assert got.dtype == np.float64 and list(got) == [1.0, 2.0]   # 1 + max(0, 1 − 4), 2 + max(0, 2 − 4)


def test_exact_value_is_xreplace_on_numbers():
    # the planner's confirmation (plan_confirm) evaluates train's forms this way: the same exact number
    big = sympy.ceiling(E * sympy.Rational(7, 3) / (x + 2)) + sympy.Max(x ** 2 / 5, y) * sympy.Min(x, y - 1) ** 2
    for xv in (1, 2, 5, 12):
        for yv in (1, 2, 3, 7, 8):
            at = {x: sympy.Integer(xv), y: sympy.Integer(yv)}
            for e in (E, big, E / 7, sympy.Integer(3), x):
                got = exact_value(e, at, {})
                assert got == e.xreplace(at) and type(got) is type(e.xreplace(at))


def test_exact_value_leaves_a_missing_symbol():
    got = exact_value(sympy.Max(x, 3) * y, {x: sympy.Integer(5)})
    assert got == 5 * y


def test_exact_value_sums_products_powers_of_fractions():
    # issue 27 item 6 (speed): the rationals are Python ints (Fractions where not whole), a sum or product over
    # a common denominator reduced once: the number xreplace gives, Integer where whole, Rational else
    z = sympy.Symbol("z", positive=True, integer=True)
    forms = (x / 3 + y / 6 + z / 4, x / 3 + y / 6 - x / 2, (x / 6) * (y / 10) * z, (x / 3) ** 2 * y ** -2,
             sympy.Max(x / 3, y / 2) - sympy.Min(x, z) / 7, x ** -1 + y ** -1, sympy.ceiling(x / 3) / y + 1)
    for at in ({x: 3, y: 6, z: 4}, {x: 1, y: 7, z: 9}, {x: 12, y: 5, z: 2}, {x: 2**70 + 1, y: 3, z: 2**64}):
        at = {k: sympy.Integer(v) for k, v in at.items()}
        for e in forms:
            got = exact_value(e, at, {})
            assert got == e.xreplace(at) and type(got) is type(e.xreplace(at)), (e, at)
    assert exact_value(x / 3 + x * 2 / 3, {x: sympy.Integer(5)}) == 5   # Fractions summing to a whole number
    assert type(exact_value(x / 3 + x * 2 / 3, {x: sympy.Integer(5)})) is sympy.Integer
