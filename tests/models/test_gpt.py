"""GPT-2/GPT-3 costs derived from models/gpt.cg, against published values.

Every assertion is exact: symbolic equality via expand(a - b) == 0, or exact
integers.
"""

import sympy

import costgraph


def eq(a, b):
    return sympy.expand(a - b) == 0


# --- per layer (Korthikanti et al. 2022, §4.1 and Table 2; DOMAIN.md §1, §3, §5)

def test_layer_params(gpt, S):
    # attention 4h² + 4h, MLP 8h² + 5h, two LayerNorms 4h (DOMAIN.md §1)
    assert eq(gpt.costs("layer").params, 12 * S.h**2 + 13 * S.h)


def test_layer_forward_flops(gpt, S):
    # QKV 6bsh², QKᵀ 2bs²h, scores·V 2bs²h, out-proj 2bsh², MLP 16bsh² (DOMAIN.md §3)
    assert eq(gpt.costs("layer").flops_forward, 24 * S.b * S.s * S.h**2 + 4 * S.b * S.s**2 * S.h)


def test_layer_backward_flops_is_twice_forward(gpt, S):
    c = gpt.costs("layer")
    assert eq(c.flops_backward, 48 * S.b * S.s * S.h**2 + 8 * S.b * S.s**2 * S.h)
    # split: matmul input-grads = forward; attention's two activation products have
    # two input gradients each and no weight gradient; weight-grads = linear forwards
    assert eq(c.flops_backward_weight, 24 * S.b * S.s * S.h**2)
    assert eq(c.flops_backward_input, 24 * S.b * S.s * S.h**2 + 8 * S.b * S.s**2 * S.h)


def test_layer_activation_bytes(gpt, S):
    # Korthikanti et al. 2022, Eq. (1): sbh(34 + 5as/h) bytes per layer
    assert eq(gpt.costs("layer").activation_bytes, 34 * S.b * S.s * S.h + 5 * S.a * S.s**2 * S.b)


def test_block_activation_bytes(gpt, S):
    # Korthikanti et al. 2022 §4.1: attention 11sbh + 5as²b, MLP 19sbh
    rows = {r["path"]: r for r in gpt.costs("layer").rows}
    assert eq(rows["layers/attn"]["activation_bytes"], 11 * S.b * S.s * S.h + 5 * S.a * S.s**2 * S.b)
    assert eq(rows["layers/mlp"]["activation_bytes"], 19 * S.b * S.s * S.h)
    # and the block scope gives the same per instance
    assert eq(gpt.costs("layers/attn").activation_bytes, 11 * S.b * S.s * S.h + 5 * S.a * S.s**2 * S.b)


# --- whole model

def test_model_params_formula_and_breakdown(gpt, S):
    # l(12h² + 13h) + Vh + s_max·h + 2h (DOMAIN.md §1): wte, wpe, ln_f, layers
    c = gpt.costs("model")
    assert eq(c.params, S.l * (12 * S.h**2 + 13 * S.h) + S.V * S.h + S.s_max * S.h + 2 * S.h)
    rows = {r["path"]: r for r in c.rows}
    assert rows["layers"]["count"] == S.l and eq(rows["layers"]["params"], 12 * S.h**2 + 13 * S.h)
    assert eq(rows["wte"]["params"], S.V * S.h)
    assert eq(rows["wpe"]["params"], S.s_max * S.h)
    assert eq(rows["ln_f"]["params"], 2 * S.h)
    assert rows["lm_head"]["params"] == 0  # tied to wte: counted once


def test_logits_and_tied_head(gpt, S):
    rows = {r["path"]: r for r in gpt.costs("model").rows}
    assert eq(rows["lm_head"]["flops_forward"], 2 * S.b * S.s * S.h * S.V)   # DOMAIN.md §3
    assert rows["wte"]["flops_forward"] == 0                                 # a lookup is no matmul
    assert rows["wte"]["flops_backward_input"] == 0                          # ids have no gradient


def test_model_forward_flops(gpt, S):
    # l(24bsh² + 4bs²h) + 2bshV (DOMAIN.md §3)
    assert eq(gpt.costs("model").flops_forward,
              S.l * (24 * S.b * S.s * S.h**2 + 4 * S.b * S.s**2 * S.h) + 2 * S.b * S.s * S.h * S.V)


def test_model_activation_bytes_beyond_layers(gpt, S):
    # l layers, plus what the graph keeps outside them: embedding dropout mask
    # (1 byte, bsh), ln_f input (2bsh), lm_head input (2bsh), token ids (int64, 8bs)
    # and position ids (8s). Korthikanti et al. 2022 §4.3 leave these out as small.
    c = gpt.costs("model")
    assert eq(c.activation_bytes, S.l * (34 * S.b * S.s * S.h + 5 * S.a * S.s**2 * S.b)
              + 5 * S.b * S.s * S.h + 8 * S.b * S.s + 8 * S.s)


# --- numbers

def test_gpt2_small_params():
    # GPT-2 small (124M checkpoint): 124,439,808 parameters (DOMAIN.md §1)
    m = costgraph.load("gpt")
    assert m.costs().evaluate(h=768, l=12, a=12, V=50257, s_max=1024, s=1024, b=1)["params"] == 124_439_808
    assert m.costs().evaluate(config="gpt2")["params"] == 124_439_808


def test_gpt2_small_without_biases():
    # nanoGPT transformer_sizing.ipynb (bias=False: no Linear and no LayerNorm biases): 124,337,664
    m = costgraph.load("gpt", options={"bias": False})
    assert m.costs().evaluate(config="gpt2")["params"] == 124_337_664


def test_gpt2_small_forward_flops_per_sequence():
    # nanoGPT transformer_sizing.ipynb: 291,648,307,200 forward FLOPs at s = 1024
    # (matrix products only, 2 FLOPs per multiply-add; biases add no matmul FLOPs)
    for options in ({}, {"bias": False}):
        m = costgraph.load("gpt", options=options)
        assert m.costs().evaluate(config="gpt2")["flops_forward"] == 291_648_307_200


def test_gpt3_activation_bytes():
    # GPT-3 175B at b=1, s=2048 under Korthikanti's per-layer count
    # l(34bsh + 5as²b) = 275,414,777,856 bytes (DOMAIN.md §5)
    m = costgraph.load("gpt")
    layers = next(r for r in m.costs().rows if r["path"] == "layers")
    subs = m.values("gpt3-175b")
    assert int((layers["count"] * layers["activation_bytes"]).subs(subs)) == 275_414_777_856
    assert m.costs("layer").evaluate(config="gpt3-175b")["activation_bytes"] * 96 == 275_414_777_856
    # the whole model adds 5bsh + 8bs + 8s bytes (see test above)
    assert m.costs().evaluate(config="gpt3-175b")["activation_bytes"] == \
        275_414_777_856 + 5 * 2048 * 12288 + 8 * 2048 + 8 * 2048


def test_gpt3_params():
    # l(12h² + 13h) + Vh + s_max·h + 2h at h 12288, l 96, V 50257, s_max 2048
    assert costgraph.load("gpt").costs().evaluate(config="gpt3-175b")["params"] == \
        96 * (12 * 12288**2 + 13 * 12288) + 50257 * 12288 + 2048 * 12288 + 2 * 12288


def test_no_dropout_masks_vanish_and_softmax_output_counted_once(S):
    # Without dropout: no masks (bs²a + 2bsh per layer), and the softmax output is
    # kept by both softmax and scores·V but is one storage: 2bs²a, not 4bs²a.
    # Korthikanti §4.1's terms without the dropout ones: 32bsh + 2as²b.
    m = costgraph.load("gpt", dropout=False)
    assert eq(m.costs("layer").activation_bytes, 32 * S.b * S.s * S.h + 2 * S.a * S.s**2 * S.b)
    assert not [n for n, d in m.graph.ops() if d["kind"] == "dropout"]
