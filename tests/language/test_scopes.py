"""Whole numbers at every scope: each bundled model, under both activation
profiles, at model scope, layer scope, every repeat group, block and operator
node, gives whole-number totals for its configurations (issue 6, item 3).

The rule that makes this hold (costgraph.engine.totals.breakdown): a saved storage
shared by several instances of the nodes that keep it (one rotary table for
all layers; T5's encoder output for every decoder layer) is charged whole to
the innermost block or group with as many instances as the storage, and a
smaller scope does not contain it. Before, T5's decoder scope held
103284736/3 activation bytes (t5-small).
"""

from fractions import Fraction

import pytest
import sympy

import costgraph
from costgraph.language.resources import bundled_model_names
from costgraph.engine.totals import QUANTITIES


def _scopes(m):
    g = m.graph
    out = ["model", *g.groups, *g.blocks, *(p for p, _ in g.ops())]
    if len([p for p in g.groups if "/" not in p]) == 1:
        out.append("layer")
    return out


@pytest.mark.parametrize("profile", ["korthikanti", "pytorch"])
@pytest.mark.parametrize("name", bundled_model_names())
def test_every_scope_is_whole(name, profile):
    m = costgraph.load(name, profile=profile)
    config = next(iter(m.configs))
    counts = set().union(*(g.count.free_symbols | g.active.free_symbols for g in m.graph.groups.values()))
    # a layer pattern's per-layer views show the average layer, floor(l/8)/l of an attention
    # layer in Jamba (README, "The language"): a repeat count in a denominator by design there
    patterned = any(d["count"].has(sympy.floor) for _, d in m.graph.ops())
    from costgraph.engine.totals import resolve_scope

    values_at = m.values(config)
    for scope in _scopes(m):
        if resolve_scope(m.graph, scope).per.subs(values_at) == 0:
            continue   # a branch with no instance at this configuration (Gemma 4's KV-sharing layers at ns = 0)
        c = m.costs(scope)
        average = patterned and (scope == "layer" or scope in m.graph.groups)
        for q in QUANTITIES:
            # no share of a storage divided among the copies of a repeat (1/l_dec): no
            # repeat count in a denominator (h/a, a head's width, is whole by the size checks)
            assert average or not sympy.fraction(sympy.together(c[q]))[1].free_symbols & counts, (scope, q, c[q])
        values = c.evaluate(config=config)   # raises on a fraction, but for an average layer
        assert c.averaged == average
        assert all(isinstance(v, int) or average and isinstance(v, Fraction) for v in values.values())
        if average and scope == "layer":   # the average layer times l is whole: the layers' sum
            ell = m.values(config)[next(x for x in counts if str(x) == "l")]
            assert all((v * int(ell)) == int(v * int(ell)) for v in values.values())
        # node, storage and block rows add up to the scope's totals
        leaves = [r for r in c.rows if r["kind"] != "block"]
        assert sympy.expand(sum(r["count"] * r["activation_bytes"] for r in leaves) - c.activation_bytes) == 0


def test_t5_decoder_scope_is_whole_and_shared_storage_counted_once_at_model_scope():
    m = costgraph.load("t5")
    dec = m.costs("decoder").evaluate(config="t5-small")["activation_bytes"]
    assert isinstance(dec, int)
    whole = m.costs("model").evaluate(config="t5-small")["activation_bytes"]
    rows = {r["path"]: r for r in m.costs("model").rows}
    # the encoder output (2 b s h bytes, bf16) is one row, counted once at model scope
    enc = rows["saved:encoder_final_dropout:0"]
    assert enc["activation_bytes"] == 2 * sympy.Symbol("b", positive=True, integer=True) * \
        sympy.Symbol("s", positive=True, integer=True) * sympy.Symbol("h", positive=True, integer=True)
    assert whole > 6 * dec


def test_rotary_tables_shared_by_layers_are_charged_to_the_model():
    # Gemma-7B under the pytorch profile: cos and sin tables [1, s, d] in bf16, once for all
    # layers: 2 tables × s × d × 2 bytes = 4 d s at model scope, none at layer scope
    m = costgraph.load("gemma", profile="pytorch")
    rows = [r for r in m.costs("model").rows if r["kind"] == "storage"]
    assert sorted(r["path"] for r in rows) == ["saved:shared/rope_cos[s,d]", "saved:shared/rope_sin[s,d]"]
    layer = m.costs("layer").activation_bytes
    d, s = (sympy.Symbol(n, positive=True, integer=True) for n in ("d", "s"))
    assert sympy.expand(layer).as_coefficients_dict()[d * s] == 0   # no bare 4 d s term
    model = m.costs("model").activation_bytes
    assert sympy.expand(model).as_coefficients_dict()[d * s] == 4
