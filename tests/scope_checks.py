"""The whole-number check at every scope of a bundled model (tests/language/test_scopes.py and
tests/language/test_scopes_pytorch.py: one file a profile, each under 30 s of CPU)."""

from fractions import Fraction

import sympy

import costgraph
from costgraph.engine.totals import QUANTITIES


def _scopes(m):
    g = m.graph
    out = ["model", *g.groups, *g.blocks, *(p for p, _ in g.ops())]
    if len([p for p in g.groups if "/" not in p]) == 1:
        out.append("layer")
    return out


def _denominator_symbols(e) -> set:
    """The symbols of the denominator of ``e`` over one common denominator (``sympy.together``): none when
    no term of ``e`` has one in its own (a common denominator is made of the terms'), else together's."""
    if not any(sympy.fraction(t)[1].free_symbols for t in sympy.Add.make_args(e)):
        return set()
    return sympy.fraction(sympy.together(e))[1].free_symbols


def check_every_scope_is_whole(name: str, profile: str) -> None:
    """Each scope of bundled model ``name`` under activation profile ``profile`` gives whole totals at its first
    configuration, and its node, storage and block rows add up to the scope's activation bytes."""
    m = costgraph.load(name, profile=profile)
    config = next(iter(m.configs))
    counts = set().union(*(g.count.free_symbols | g.active.free_symbols for g in m.graph.groups.values()))
    # a layer pattern's per-layer views show the average layer, floor(l/8)/l of an attention
    # layer in Jamba (README, "The language"): a repeat count in a denominator by design there
    patterned = any(d["count"].has(sympy.floor) for _, d in m.graph.ops())
    from costgraph.engine.totals import resolve_scope

    values_at = m.values(config)
    for scope in _scopes(m):
        if m.graph.blocks.get(scope) is not None and m.graph.blocks[scope].count == 0 or \
                scope in m.graph.nodes and m.graph.nodes[scope]["count"] == 0:
            continue   # a branch with no instance as built: refused (test_an_empty_branch_is_refused_as_empty)
        if resolve_scope(m.graph, scope).per.xreplace(values_at) == 0:
            continue   # a branch with no instance at this configuration
        c = m.costs(scope)
        average = patterned and (scope == "layer" or scope in m.graph.groups)
        for q in QUANTITIES:
            # no share of a storage divided among the copies of a repeat (1/l_dec): no
            # repeat count in a denominator (h/a, a head's width, is whole by the size checks)
            assert average or not _denominator_symbols(c[q]) & counts, (scope, q, c[q])
        values = c.evaluate(config=config)   # raises on a fraction, but for an average layer
        assert c.averaged == average
        assert all(isinstance(v, int) or average and isinstance(v, Fraction) for v in values.values())
        if average and scope == "layer":   # the average layer times l is whole: the layers' sum
            ell = m.values(config)[next(x for x in counts if str(x) == "l")]
            assert all((v * int(ell)) == int(v * int(ell)) for v in values.values())
        # node, storage and block rows add up to the scope's totals
        leaves = [r for r in c.rows if r["kind"] != "block"]
        assert sympy.expand(sum(r["count"] * r["activation_bytes"] for r in leaves) - c.activation_bytes) == 0
