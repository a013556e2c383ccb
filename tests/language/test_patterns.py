"""Layer patterns (`repeat l as layers[i]` with `if` on the index), dimension
functions (min, max, floor, ceil, %), bare parameters (`param`), and
configurations that set options."""

from __future__ import annotations

import itertools

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphSemanticError, CostgraphSyntaxError, CostgraphValueError
from costgraph.engine.context import expanded_size
from costgraph.engine.symbols import dim

# --- a Gemma-3-like model: five local (sliding-window) layers, then a global one

LAYERS = """
import "std/attention.cg"
import "std/mlp.cg"

block local_layer(x[B, S, H], heads, kv_heads, head_dim, width, window) {
  x = x + gqa_attention(rmsnorm(x, name = ln_1), heads, kv_heads, head_dim, window = window, name = attn)
  return x + geglu(rmsnorm(x, name = ln_2), width, name = mlp)
}

block global_layer(x[B, S, H], heads, kv_heads, head_dim, width) {
  x = x + gqa_attention(rmsnorm(x, name = ln_1), heads, kv_heads, head_dim, name = attn)
  return x + geglu(rmsnorm(x, name = ln_2), width, name = mlp)
}
"""

HEAD = """
  dim b
  dim s
  dim h
  dim a
  dim kv "key/value heads"
  dim d "head size"
  dim f "MLP width"
  dim V
  dim w "window of the local layers"
  input tokens[b, s]: index
  x = embedding(tokens, V, h, name = embed)
"""

TAIL = """
  x = rmsnorm(x, name = norm)
  return linear(x, V, bias = false, tied = embed, name = lm_head)
}
"""

PATTERN = LAYERS + "model g3 {\n  dim l" + HEAD + """
  repeat l as layers[i] {
    if i % 6 == 5 {
      x = global_layer(x, a, kv, d, f, name = global)
    } else {
      x = local_layer(x, a, kv, d, f, w, name = local)
    }
  }
""" + TAIL


def unrolled(n: int) -> str:
    calls = "".join(
        f"  x = global_layer(x, a, kv, d, f, name = layer_{k})\n" if k % 6 == 5 else
        f"  x = local_layer(x, a, kv, d, f, w, name = layer_{k})\n" for k in range(n))
    return LAYERS + "model g3u {" + HEAD + calls + TAIL


VALUES = dict(b=2, s=64, h=48, a=4, kv=2, d=12, f=96, V=101, w=16)


@pytest.fixture(scope="module")
def pattern():
    return costgraph.loads(PATTERN, path="g3.cg")


def test_pattern_builds_each_kind_of_layer_once(pattern):
    layer_ops = [p for p, _ in pattern.graph.ops() if p.startswith("layers/")]
    one = costgraph.loads(unrolled(6), path="g3u.cg")   # five local layers and one global
    local = [p for p, _ in one.graph.ops() if p.startswith("layer_0/")]
    glob = [p for p, _ in one.graph.ops() if p.startswith("layer_5/")]
    assert len(layer_ops) == len(local) + len(glob)
    l = dim("l")
    counts = {d["count"] for p, d in pattern.graph.ops() if p.startswith("layers/")}
    assert counts == {sympy.floor(l / 6), l - sympy.floor(l / 6)}
    assert pattern.graph.nodes["layers/global/attn/q_proj"]["count"] == sympy.floor(l / 6)


@pytest.mark.parametrize("n", [6, 7, 12, 62])
@pytest.mark.parametrize("convention,causal", [("matmul", "full"), ("all", "half")])
def test_pattern_totals_equal_the_hand_unrolled_model(pattern, n, convention, causal):
    got = pattern.costs(convention=convention, causal=causal).evaluate(l=n, **VALUES)
    want = costgraph.loads(unrolled(n), path="g3u.cg").costs(convention=convention, causal=causal).evaluate(**VALUES)
    assert got == want


def test_pattern_breakdown_and_printing(pattern):
    costs = pattern.costs()
    rows = {r["path"]: r for r in costs.rows}
    assert rows["layers/global"]["kind"] == "block"
    assert "floor(l/6)" in str(costs.params) or "floor(l/6)" in str(costs.flops_forward)
    from costgraph.export.text_report import to_json, to_text_doc

    values = pattern.values(l=62, **VALUES)
    assert "floor" in to_text_doc(costs, values)
    to_json(costs, values)
    # compiled evaluation agrees with the exact one
    f = costs.compile(dtype="int64", **VALUES)
    assert int(f(l=62)["params"]) == costs.evaluate(l=62, **VALUES)["params"]


# --- counting: every condition the builder accepts is counted exactly

CONDITIONS = [
    ("i % 6 == 5", lambda i, k: i % 6 == 5),
    ("i % 2 == 0", lambda i, k: i % 2 == 0),
    ("i < k", lambda i, k: i < k),
    ("i >= k", lambda i, k: i >= k),
    ("k > i", lambda i, k: k > i),
    ("i <= k", lambda i, k: i <= k),
    ("i == k", lambda i, k: i == k),
    ("i != 0", lambda i, k: i != 0),
    ("i % 4 < 2", lambda i, k: i % 4 < 2),
    ("i % 3 != 1 and i >= k", lambda i, k: i % 3 != 1 and i >= k),
    ("i % 2 == 1 or i < k", lambda i, k: i % 2 == 1 or i < k),
    ("not (i % 3 == 1 or i < k)", lambda i, k: not (i % 3 == 1 or i < k)),
    ("i % 4 == 3 and i % 6 == 5", lambda i, k: i % 4 == 3 and i % 6 == 5),
    ("i < k / 2", lambda i, k: i < k / 2),
    ("i % 5 == 7", lambda i, k: False),
    ("true and i % 2 == 0", lambda i, k: i % 2 == 0),
    # a congruence between whole-number bounds: its few indices listed (patterns._listed)
    ("i % 2 == 0 and i < 5", lambda i, k: i % 2 == 0 and i < 5),
    ("i % 3 == 2 and not (i in [0, 1, 2]) and i >= k", lambda i, k: i % 3 == 2 and i not in (0, 1, 2) and i >= k),
    ("i % 6 == 5 or i in [0, 1, 2] or i == k", lambda i, k: i % 6 == 5 or i in (0, 1, 2) or i == k),
]


def counting_model(cond: str) -> str:
    return f"""model t {{
  dim b
  dim n
  dim k
  input x[b]
  repeat n as layers[i] {{
    if {cond} {{ param yes[b] }} else {{ param no[b, b] }}
  }}
  return x
}}
"""


@pytest.mark.parametrize("cond,truth", CONDITIONS, ids=[c for c, _ in CONDITIONS])
def test_counts_are_exact(cond, truth):
    m = costgraph.loads(counting_model(cond))
    costs = m.costs()
    for n, k in itertools.product(range(1, 14), range(1, 9)):
        want = sum(1 for i in range(n) if truth(i, k))
        values = {"b": 2, "n": n, "k": k} if "k" in m.symbols else {"b": 2, "n": n}
        # params = 2·(layers taking the if) + 4·(the others)
        assert costs.evaluate(**values)["params"] == 2 * want + 4 * (n - want), (cond, n, k)


# Beam's layer pattern (transformers 5.24 configuration_beam.py BeamConfig.__post_init__: layer_types full attention
# where (i + 1) % 6 == 0 and at the last layer, mlp_layer_types dense for the first 3 layers), as costgraph import
# writes it (drafting/model_file.py _periodic with a prefix and the last layer): the last layer's branch, the first
# three's, then every 6th against the rest
BEAM_PATTERN = """model t {
  dim b
  dim l
  input x[b]
  repeat l as layers[j] {
    if j in [l - 1] { param last[b] } else {
      if j in [0, 1, 2] { param first[b, b] } else {
        if j % 6 == 5 { param full[b, b, b] } else { param sliding[b, b, b, b] }
      }
    }
  }
  return x
}
"""


def _beam_kinds(n: int) -> dict[str, int]:
    kinds = {"last": 0, "first": 0, "full": 0, "sliding": 0}
    for j in range(n):
        kinds["last" if j == n - 1 else "first" if j < 3 else "full" if j % 6 == 5 else "sliding"] += 1
    return kinds


def test_a_pattern_of_first_layers_the_last_and_every_mth_has_a_short_closed_form():
    m = costgraph.loads(BEAM_PATTERN)
    l = dim("l")
    counts = {k.split("/")[1]: w.count for k, w in m.graph.weights.items()}
    # the listed indices 0, 1, 2 are tested against j % 6 == 5 at once (none is 5 mod 6): every 6th layer but the
    # last is floor((l - 1) / 6), exactly, with no Min or Max of the bounds (before: 18 terms of Min/Max floors)
    assert counts["full"] == sympy.floor((l - 1) / 6)
    assert counts["last"] == 1
    # the first three and the rest (j % 6 != 5: the listed 0, 1, 2 each one clamp), whose terms cancel in the total
    assert sympy.expand(sum(counts.values())) == l
    for c in counts.values():    # within the builder's limit of 32 (the rest's count was 41 terms before)
        assert expanded_size(c)[0] <= 25 and expanded_size(c)[1] <= 1
    costs = m.costs()
    for n in range(1, 60):
        want = _beam_kinds(n)
        assert counts["first"].subs(l, n) == min(3, n - 1) == want["first"], n
        assert costs.evaluate(b=2, l=n)["params"] == sum(c * 2 ** (1 + i) for i, c in enumerate(want.values())), n


def test_nested_ifs_and_nested_repeats():
    text = """model t {
  dim b
  dim l
  dim e
  input x[b]
  repeat l as layers[i] {
    if i % 2 == 1 {
      if i < 4 { param early[b] } else {
        repeat e as experts { param expert[b] }
      }
    }
  }
  return x
}
"""
    m = costgraph.loads(text)
    for n in range(1, 12):
        odd = [i for i in range(n) if i % 2 == 1]
        early = sum(1 for i in odd if i < 4)
        want = 3 * early + 3 * 5 * (len(odd) - early)
        assert m.costs().evaluate(b=3, l=n, e=5)["params"] == want


def test_branches_join_into_one_tensor_and_activations_count_every_layer():
    text = """model t {
  dim b
  dim h
  dim l
  input x[b, h]
  repeat l as layers[i] {
    if i % 3 == 0 { x = gelu(x) } else { x = relu(x) }
    x = linear(x, h, name = proj)
  }
  return x
}
"""
    m = costgraph.loads(text)
    proj = m.graph.nodes["layers/proj"]
    assert proj["count"] == dim("l")
    c = m.costs().evaluate(b=2, h=8, l=7)
    assert c["params"] == 7 * (8 * 8 + 8)


# --- refusals, each located

BASE = "model t {\n  dim b\n  dim l\n  dim k\n  input x[b]\n"


@pytest.mark.parametrize("body,fragment", [
    ("  repeat l as layers[i] {\n    if i * 2 == 0 { x = gelu(x) }\n  }\n", "can only be tested in an if"),
    ("  repeat l as layers[i] {\n    if i % k == 0 { x = gelu(x) }\n  }\n", "modulo a whole number"),
    ("  repeat l as layers[i] {\n    if i % 2 == k { x = gelu(x) }\n  }\n", "compare it with a whole number"),
    ("  if l > 4 { x = gelu(x) }\n", "a comparison tests a repeat's index"),
    ("  repeat l as layers[i] active k { x = gelu(x) }\n", "cannot have an active count"),
    ("  repeat l as layers[i] {\n    c = i % 2 == 0\n  }\n", "can only be tested by an if"),
    ("  repeat l as layers[i] {\n    repeat k as inner[j] {\n      if i == 0 and j == 0 { x = gelu(x) }\n    }\n  }\n",
     "the index of one repeat only"),
    ("  repeat l as layers[i] {\n    if i % 2 == 0 { x = gelu(x) } else { x = linear(x, 2 * b) }\n  }\n",
     "both branches must leave it the same shape"),
    ("  repeat l as layers[i] {\n    if i % 2 == 0 { x = gelu(x, name = g) } else { x = relu(x, name = g) }\n  }\n",
     "name them apart"),
    ("  repeat l as layers[b] { x = gelu(x) }\n", "the index needs a name of its own"),
    ("  repeat l as layers[i] {\n    if i % 2 == 0 { n = b } else { n = l }\n  }\n", "cannot depend on a layer's index"),
    ("  repeat l as layers[i] {\n    if i % 7 == 0 and i % 11 == 0 and i % 13 == 0 { x = gelu(x) }\n  }\n",
     "moduli of this condition combine to 1001"),
    ("  x = x * min(x, b)\n", "min() takes dimension expressions"),
    ("  y = linear(x, floor(b, 2))\n", "floor() takes one argument"),
])
def test_pattern_mistakes_are_located(body, fragment):
    with pytest.raises(CostgraphSemanticError) as info:
        costgraph.loads(BASE + body + "  return x\n}\n", path="t.cg")
    text = str(info.value)
    assert fragment in text, text
    assert text.startswith("t.cg:")


def test_syntax_of_conditions():
    with pytest.raises(CostgraphSyntaxError) as info:
        costgraph.loads(BASE + "  repeat l as layers[i] {\n    if i % 2 == 0 && i < k { }\n  }\n  return x\n}\n")
    assert "'and' is written and" in str(info.value)
    with pytest.raises(CostgraphSyntaxError) as info:
        costgraph.loads(BASE + "  param\n  return x\n}\n")
    assert "param NAME[a]" in str(info.value)


# --- dimension functions

def test_min_max_floor_ceil_mod_in_dimensions():
    text = """model t {
  dim b
  dim h
  dim l
  input x[b, h]
  y = linear(x, min(h, 64), bias = false, name = p1)
  z = linear(x, max(h, 64), bias = false, name = p2)
  repeat floor(l / 2) as pairs { x = linear(x, h, bias = false, name = a) }
  repeat ceil(l / 3) as thirds { x = linear(x, h, bias = false, name = c) }
  repeat l % 4 + 1 as rest { x = linear(x, h, bias = false, name = r) }
  return x
}
"""
    m = costgraph.loads(text)
    for h, l in [(32, 7), (100, 9), (64, 12)]:
        want = h * min(h, 64) + h * max(h, 64) + (l // 2 + -(-l // 3) + l % 4 + 1) * h * h
        assert m.costs().evaluate(b=1, h=h, l=l)["params"] == want


# --- bare parameters

def test_param_counts_in_params_not_flops():
    text = """import "std/attention.cg"
model t {
  dim b
  dim s
  dim h
  dim a
  dim l
  input x[b, s, h]
  repeat l as layers {
    param sinks[a]
    param scale[h]
    x = x * scale
  }
  return x
}
"""
    m = costgraph.loads(text)
    assert m.graph.nodes["layers/sinks"]["kind"] == "param"
    c = m.costs()
    b, s, h, a, l = (dim(n) for n in "bshal")
    assert sympy.expand(c.params - l * (a + h)) == 0
    assert sympy.expand(c.params_active - l * (a + h)) == 0
    assert sympy.expand(c.flops_forward) == 0   # matmul FLOPs: none
    assert c.evaluate(b=1, s=4, h=8, a=2, l=3)["params"] == 30


# --- configurations that set options

OPT = """model t {
  dim b
  dim h
  option bias = true
  input x[b, h]
  return linear(x, h, bias = bias)
}
config nobias { h = 16, bias = false }
config plain { h = 16 }
"""


def test_config_options_apply_when_loaded_with_the_config():
    m = costgraph.loads(OPT, config="nobias")
    assert m.graph.options["bias"] is False
    assert m.costs().evaluate("nobias", b=1)["params"] == 16 * 16
    # options given explicitly win over the configuration's
    m2 = costgraph.loads(OPT, config="nobias", options={"bias": True})
    assert m2.costs().evaluate("nobias", b=1)["params"] == 16 * 16 + 16
    assert costgraph.loads(OPT, config="plain").costs().evaluate("plain", b=1)["params"] == 16 * 16 + 16


def test_config_options_are_not_silently_ignored():
    m = costgraph.loads(OPT)
    with pytest.raises(CostgraphValueError) as info:
        m.values("nobias")
    assert "sets option bias = false" in str(info.value)
    assert "config='nobias'" in str(info.value)


def test_cli_derive_applies_a_configs_option(tmp_path, capsys):
    from costgraph.cli import main

    path = tmp_path / "t.cg"
    path.write_text(OPT)
    rc = main(["derive", str(path), "--config", "nobias", "--set", "b=1", "--format", "json"])
    assert rc in (0, None)
    import json

    out = json.loads(capsys.readouterr().out)
    assert "256" in json.dumps(out)
    assert "272" not in json.dumps(out)


def test_the_index_can_be_passed_to_a_block():
    text = """block layer(x[B, H], k, idx) {
  if idx < k { return gelu(x) } else { return linear(x, H, name = moe) }
}
model t {
  dim b
  dim h
  dim l
  dim k "dense layers first"
  input x[b, h]
  repeat l as layers[i] { x = layer(x, k, i, name = layer) }
  return x
}
"""
    m = costgraph.loads(text)
    l, k = dim("l"), dim("k")
    assert m.graph.nodes["layers/layer/moe"]["count"] == l - sympy.Min(k, l)
    assert m.costs().evaluate(b=1, h=4, l=5, k=2)["params"] == 3 * 20
    assert m.costs().evaluate(b=1, h=4, l=5, k=9)["params"] == 0
