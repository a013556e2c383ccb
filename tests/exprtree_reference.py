"""A reference evaluator of costgraph's JSON expression trees (costgraph.export.exprtree), written from the
format's description only: Python integers and Fractions, no SymPy. Used by tests/export/test_exprtree.py
(trees against the engine's formulas) and tests/export/test_schemas.py (trees inside real documents)."""

from __future__ import annotations

import math
from fractions import Fraction


def ref_eval(t: dict, env: dict):
    """The value of tree ``t`` for ``env`` (name -> int): exact Fractions
    (floats read exactly from their decimal strings), booleans in conditions."""
    if "int" in t:
        return Fraction(int(t["int"]))
    if "rational" in t:
        return Fraction(int(t["rational"]["p"]), int(t["rational"]["q"]))
    if "float" in t:
        return Fraction(t["float"])
    if "sym" in t:
        return Fraction(env[t["sym"]])
    if "bool" in t:
        return t["bool"]
    op, args = t["op"], t["args"]
    if op == "sum":
        body, index, lo, hi = args
        lo, hi = ref_eval(lo, env), ref_eval(hi, env)
        return sum((ref_eval(body, {**env, index["sym"]: i}) for i in range(int(lo), int(hi) + 1)), Fraction(0))
    if op == "piecewise":
        for case in args:
            if ref_eval(case["args"][1], env):
                return ref_eval(case["args"][0], env)
        raise AssertionError("no case holds")
    xs = [ref_eval(a, env) for a in args]
    if op == "add":
        return sum(xs, Fraction(0))
    if op == "mul":
        return math.prod(xs, start=Fraction(1))
    if op == "pow":
        assert xs[1].denominator == 1, "an integer exponent"
        return xs[0] ** int(xs[1])
    if op in ("min", "max"):
        return (min if op == "min" else max)(xs)
    if op == "floor":
        return Fraction(math.floor(xs[0]))
    if op == "ceiling":
        return Fraction(math.ceil(xs[0]))
    if op == "mod":
        return xs[0] % xs[1]
    if op == "floordiv":
        return Fraction(xs[0] // xs[1])
    rel = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
           "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}
    if op in rel:
        return rel[op](*xs)
    if op == "and":
        return all(xs)
    if op == "or":
        return any(xs)
    if op == "not":
        return not xs[0]
    raise AssertionError(f"unknown op {op}")
