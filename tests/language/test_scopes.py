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

import pytest
import sympy

import costgraph
from costgraph.language.resources import bundled_model_names
from scope_checks import check_every_scope_is_whole


@pytest.mark.parametrize("name", bundled_model_names())
def test_every_scope_is_whole(name):
    check_every_scope_is_whole(name, "korthikanti")   # the pytorch profile: tests/language/test_scopes_pytorch.py


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


def test_an_empty_branch_is_refused_as_empty(capsys):
    """A per-instance scope of a branch with no instance (Gemma 4's KV-sharing layers, ``if j < l - ns``
    with ``ns = 0`` when ``kv_shared`` is off) is said to be empty, at its owner (resolve_scope), for
    every command and the API; it evaluated 0/0 and was refused as 'no exact integer code for nan'
    (derive) or 'no expression-tree node for ComplexInfinity' (graph) (issue 30 item 2)."""
    from cli_checks import refused

    from costgraph.errors import CostgraphValueError

    m = costgraph.load("gemma4_text")
    assert m.graph.blocks["layers/full_shared"].count == 0
    for argv in (["derive", "gemma4_text", "--config", "gemma4-text-defaults", "--scope", "layers/full_shared"],
                 ["derive", "gemma4_text", "--scope", "layers/sliding_shared/mlp"],
                 ["graph", "gemma4_text", "--scope", "layers/full_shared"]):
        err = refused(capsys, argv, "is empty: it has no instance", "hint: name a scope with instances")
        assert "nan" not in err and "zoo" not in err
    with pytest.raises(CostgraphValueError, match="'layers/full_shared/mlp' of model 'gemma4_text' is empty"):
        m.costs("layers/full_shared/mlp")
    assert m.costs("layers/full/mlp").evaluate(config="gemma4-text-defaults")["params"] == 3 * 2304 * 9216


BRANCH = ('model br {\n  dim b "batch"\n  dim s "seq"\n  dim h "hidden"\n  dim l "layers"\n  input x[b, s, h]: act\n'
          '  repeat l as layers[j] {\n    if j >= 100 { x = linear(x, h, name = big) } '
          'else { x = linear(x, h, name = small) }\n  }\n  return x\n}\n')


def test_a_branch_with_no_instance_at_the_values_is_warned(capsys, tmp_path):
    """``if j >= 100`` at l = 4 has no instance: its per-instance figures (one linear: h² + h = 272
    parameters at h = 16) come with a warning that the model does not run it; at l = 200 (100
    instances), none (issue 30 item 2)."""
    from cli_checks import run

    f = tmp_path / "br.cg"
    f.write_text(BRANCH, encoding="utf-8")
    rc, out, _ = run(capsys, "derive", str(f), "--set", "b=1", "s=8", "h=16", "l=4", "--scope", "layers/big")
    assert rc == 0 and "  parameters                   272\n" in out
    assert "warning: scope 'layers/big' has no instance at these values (it occurs Max(0, -100 + l) times): " \
           "the figures are one instance's, which the model does not run" in out
    rc, out, _ = run(capsys, "derive", str(f), "--set", "b=1", "s=8", "h=16", "l=200", "--scope", "layers/big")
    assert rc == 0 and "warning" not in out
    m = costgraph.loads(BRANCH)
    assert m.costs("layers/small").evaluate(b=1, s=8, h=16, l=4)["params"] == 272
