"""Expression trees (costgraph.export.exprtree): rebuilt into SymPy they equal the engine's formulas exactly
(every quantity of every bundled model); evaluated by the small reference evaluator (tests/exprtree_reference.py:
Python integers and Fractions, no SymPy) they equal `Costs.evaluate` at every configuration of every bundled
model; malformed and too deep trees are refused with a message. Trees inside real documents are checked by
tests/export/test_schemas.py."""

from __future__ import annotations

import functools
import json

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphValueError
from costgraph.export.exprtree import from_tree, to_tree
from costgraph.export.printing import field_order
from costgraph.language.resources import bundled_model_names
from costgraph.engine.symbols import dim
from exprtree_reference import ref_eval

MODELS = bundled_model_names()
_field_order = functools.cache(field_order)   # one field-ordered form per formula: a model's configurations share them


@pytest.fixture(scope="module")
def loaded():
    return {name: costgraph.load(name) for name in MODELS}


# --- expression trees ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_trees_rebuild_every_quantity_exactly(loaded, name):
    """to_tree → JSON text → from_tree gives back each formula (SymPy's
    canonical form and the field-ordered form the documents print), at model
    and layer scope, with the causal half convention (Min terms of windows)."""
    model = loaded[name]
    scopes = ["model"] + (["layer"] if len([g for g in model.graph.groups if "/" not in g]) == 1 else [])
    for scope in scopes:
        for causal in ("full", "half"):
            for q, e in model.costs(scope, causal=causal).quantities.items():
                for form in (e, _field_order(e)):
                    back = from_tree(json.loads(json.dumps(to_tree(form))))
                    # the same formula: identical, else its difference expands to 0
                    assert back == e or sympy.expand(back - e) == 0, (name, scope, causal, q)


@pytest.mark.parametrize("name", MODELS)
def test_reference_evaluator_matches_evaluate(loaded, name):
    """Every configuration of every bundled model: the tree evaluated with
    plain integers equals costgraph's exact `evaluate` for each quantity."""
    assert loaded[name].configs, name
    built = {}   # the options a configuration sets -> (model built with them, its costs, each formula's tree)
    for config, sizes in loaded[name].configs.items():
        key = tuple(sorted((k, v) for k, v in sizes.items() if isinstance(v, bool)))
        if key not in built:
            # built with the options the configuration sets: the module's model where it has them already
            # (costgraph.model._build builds again only then; every figure below names the configuration)
            same = all(loaded[name].graph.options.get(k) == v for k, v in key)
            model = loaded[name] if same else costgraph.load(name, config=config)
            costs = model.costs(causal="exact")
            built[key] = model, costs, {q: to_tree(_field_order(e)) for q, e in costs.quantities.items()}
        model, costs, trees = built[key]
        vals = {str(k): int(v) for k, v in model.values(config).items()}
        want = costs.evaluate(config=config)
        for q, tree in trees.items():
            got = ref_eval(tree, vals)
            assert got == want[q], (name, config, q)


def test_tree_of_a_layer_pattern_has_floors():
    """Layer patterns count floor(l/6) layers (costgraph.engine.builder): the tree
    carries the floor node, and evaluates it in integers."""
    l = dim("l")
    t = to_tree(l - sympy.floor(l / 6))
    assert t == {"op": "add", "args": [{"sym": "l"}, {"op": "mul", "args": [
        {"int": "-1"}, {"op": "floor", "args": [{"op": "mul", "args": [
            {"rational": {"p": "1", "q": "6"}}, {"sym": "l"}]}]}]}]}
    assert ref_eval(t, {"l": 62}) == 62 - 10


def test_tree_node_kinds():
    s, w, h, i = dim("s"), dim("w"), dim("h"), sympy.Symbol("i", integer=True, nonnegative=True)
    big = 10 ** 40 + 7
    assert to_tree(sympy.Integer(big)) == {"int": str(big)}              # exact, not a JSON number
    assert to_tree(sympy.Rational(55, 4)) == {"rational": {"p": "55", "q": "4"}}
    assert to_tree(sympy.Float(0.45)) == {"float": "0.45"}
    assert to_tree(sympy.Min(s, w))["op"] == "min"
    assert to_tree(h / s) == {"op": "mul", "args": [{"sym": "h"}, {"op": "pow", "args": [{"sym": "s"}, {"int": "-1"}]}]}
    pw = sympy.Piecewise((s, s < w), (w, True))
    assert from_tree(to_tree(pw)) == pw
    assert ref_eval(to_tree(pw), {"s": 3, "w": 5}) == 3 and ref_eval(to_tree(pw), {"s": 9, "w": 5}) == 5
    m = sympy.Mod(s, 4)
    assert from_tree(to_tree(m)) == m and ref_eval(to_tree(m), {"s": 10}) == 2
    # a sum whose index has the name of a dimension (LLaMA's MLP width i): the index is renamed
    dim_i = dim("i")
    total = sympy.Sum(dim_i * (i + 1), (i, 0, s - 1))
    t = to_tree(total)
    assert t["args"][1] == {"sym": "i_1"}
    assert ref_eval(t, {"i": 7, "s": 4}) == 7 * (1 + 2 + 3 + 4)
    assert sympy.simplify(from_tree(t).doit() - total.doit()) == 0


@pytest.mark.parametrize("tree, fragment", [
    ({"int": 12}, "decimal string"),
    ({"int": "1e5"}, "decimal string"),
    ({"int": "1" * 1001}, "decimal string"),
    ({"sym": "__import__('os')"}, "symbol name"),
    ({"op": "eval", "args": [{"int": "1"}]}, "unknown op"),
    ({"op": "add", "args": [{"int": "1"}]}, "at least 2"),
    ({"op": "pow", "args": [{"int": "1"}]}, "pow takes 2"),
    ({"op": "floor", "args": "x"}, "args a list"),
    ({"rational": {"p": "1", "q": "0"}}, "q > 0"),
    ({"float": "1+1"}, "float"),
    ({"num": "1"}, "unknown node"),
    ({"int": "1", "sym": "h"}, "expected {op, args}"),
    ([], "expected an object"),
    ({"op": "sum", "args": [{"int": "1"}, {"int": "0"}, {"int": "0"}, {"int": "1"}]}, "index of a sum"),
    ({"op": "piecewise", "args": [{"int": "1"}]}, "case"),
])
def test_malformed_trees_are_refused(tree, fragment):
    with pytest.raises(CostgraphValueError) as e:
        from_tree(tree)
    assert fragment in str(e.value)


def test_deep_trees_are_refused_with_a_message():
    t = {"sym": "h"}
    for _ in range(300):
        t = {"op": "floor", "args": [t]}
    with pytest.raises(CostgraphValueError, match="deeper than 200"):
        from_tree(t)


# --- the documents ------------------------------------------------------------------------------
