"""The operators added for new architectures (sigmoid ... selective_scan, cast,
per-call ``keep``), and the causal count of windowed and non-square products.

Each operator: output shape, parameters, FLOPs (forward, backward input and
weight, ``all`` convention) and saved bytes, exact. The ones PyTorch
implements directly are checked against it (``FlopCounterMode`` and the
storages ``saved_tensors_hooks`` sees), on CPU, when torch is installed.
"""

from __future__ import annotations

import itertools

import pytest
import sympy

import costgraph
from costgraph.errors import CostgraphError
from costgraph.engine.totals import causal_pairs

B, S, H, N, K = 2, 6, 8, 5, 3
SIZES = dict(b=B, s=S, h=H, n=N, k=K)

HEAD = """model m {
  dim b
  dim s
  dim h
  dim n
  dim k
  input x[b, s, h]
  input ids[n]: index
"""


def model(body: str, profile: str = "pytorch", **kw):
    # each operator alone, as tests/ops/test_new_ops_torch.py measures it: inputs made with requires_grad=True
    return costgraph.loads(HEAD + body + "\n}\n", path="m.cg", profile=profile, **{"input_grads": True, **kw})


def costs(body: str, profile: str = "pytorch", convention: str = "all", **kw) -> dict:
    m = model(body, profile, **kw)
    got = m.costs("model", convention=convention).evaluate(**SIZES)
    return {q: got[q] for q in ("params", "flops_forward", "flops_backward_input",
                                "flops_backward_weight", "activation_bytes", "kv_cache_bytes",
                                "kv_cache_bytes_per_token")}


def out_shape(body: str):
    m = model(body)
    out = m.graph.tensors[m.graph.outputs[0]]
    return tuple(int(d.xreplace({sympy.Symbol(k, positive=True, integer=True): v for k, v in SIZES.items()}))
                 if d.free_symbols else int(d) for d in out.shape), out.role


def row(params=0, fwd=0, bi=0, bw=0, act=0, kv=0, kv_tok=0) -> dict:
    return dict(params=params, flops_forward=fwd, flops_backward_input=bi, flops_backward_weight=bw,
                activation_bytes=act, kv_cache_bytes=kv, kv_cache_bytes_per_token=kv_tok)


T = B * S * H   # elements of x


# ---------------------------------------------------------------- each operator, exact
CASES = {
    # body: (output shape, role, costs under `all`, pytorch profile)
    "return sigmoid(x)": ((B, S, H), "act", row(fwd=3 * T, bi=3 * T, act=2 * T)),
    "return tanh(x)": ((B, S, H), "act", row(fwd=T, bi=T, act=2 * T)),
    "return softplus(x)": ((B, S, H), "act", row(fwd=3 * T, bi=3 * T, act=2 * T)),
    "return square(x)": ((B, S, H), "act", row(fwd=T, bi=T, act=2 * T)),
    "return relu2(x)": ((B, S, H), "act", row(fwd=2 * T, bi=2 * T, act=2 * T)),
    # xIELU: α_p and α_n, one element each; keeps x, α_p·x, expm1's output, expm1(..) − x, the bool mask, the α's
    "return xielu(x)": ((B, S, H), "act", row(params=2, fwd=11 * T, bi=11 * T, bw=5 * T, act=4 * 2 * T + T + 2 * 2)),
    "return clamp(x)": ((B, S, H), "act", row(fwd=2 * T, bi=2 * T, act=2 * T)),
    "return clamp(x, lower = false)": ((B, S, H), "act", row(fwd=T, bi=T, act=2 * T)),
    "return softcap(x, cap = 30)": ((B, S, H), "act", row(fwd=3 * T, bi=3 * T, act=2 * T)),
    # gpt-oss's clamped SwiGLU on [.., 2w] (w = H/2): 10 FLOPs an output element, 12 back; x and 4 tensors of w
    "return clamped_glu(x)": ((B, S, H // 2), "act", row(fwd=10 * T // 2, bi=12 * T // 2, act=2 * T + 4 * T)),
    "return maximum(x, gelu(x))": ((B, S, H), "act", row(fwd=10 * T, bi=9 * T, act=4 * T)),
    "return max(x)": ((B, S), "act", row(fwd=T, act=8 * B * S)),
    "v, i = topk(x, k)\n  return v": ((B, S, K), "act", row(fwd=T, act=8 * B * S * K)),
    "v, i = topk(x, k)\n  return i": ((B, S, K), "index", row(fwd=T, act=8 * B * S * K)),
    "return gather(x, ids)": ((N, H), "act", row(bi=N * H, act=8 * N)),
    "return scatter(gather(x, ids), ids, b * s)": ((B * S, H), "act", row(fwd=N * H, bi=N * H, act=8 * N + 2 * N * H)),
    "return select(x)": ((B, H), "act", row()),
    "return select(x, index = 2)": ((B, H), "act", row()),
    "return cast(x, fp32)": ((B, S, H), "fp32", row()),
    "return cast(cast(x, fp32), bf16)": ((B, S, H), "bf16", row()),
    "return cast(x, act)": ((B, S, H), "act", row()),   # the identity
    # norms: no weight; per-head; fp32 input; keep
    "return rmsnorm(x, weight = false)": ((B, S, H), "act", row(fwd=3 * T, bi=3 * T, act=4 * T + 4 * B * S)),
    "return layernorm(x, weight = false)": ((B, S, H), "act", row(fwd=5 * T, bi=5 * T, act=2 * T + 8 * B * S)),
    "return layernorm(x, bias = false)": ((B, S, H), "act", row(params=H, fwd=6 * T, bi=6 * T, bw=2 * T,
                                                                act=2 * T + 8 * B * S)),
    "return rmsnorm(split_heads(x, 2))": ((B, 2, S, H // 2), "act",
                                          row(params=H // 2, fwd=4 * T, bi=4 * T, bw=2 * T,
                                              act=4 * T + 4 * B * 2 * S + 2 * T)),
    "return rmsnorm(cast(x, fp32))": ((B, S, H), "fp32", row(params=H, fwd=4 * T, bi=4 * T, bw=2 * T,
                                                             act=4 * T + 4 * B * S + 4 * T)),
    "return rmsnorm(x, keep = input)": ((B, S, H), "act", row(params=H, fwd=4 * T, bi=4 * T, bw=2 * T,
                                                              act=2 * T + 4 * B * S + 2 * T)),
    "return rmsnorm(x, keep = nothing)": ((B, S, H), "act", row(params=H, fwd=4 * T, bi=4 * T, bw=2 * T)),
    "return layernorm(x, keep = fp32)": ((B, S, H), "act", row(params=2 * H, fwd=7 * T, bi=7 * T, bw=3 * T,
                                                               act=4 * T + 8 * B * S)),
    "return gelu(x, keep = output)": ((B, S, H), "act", row(fwd=9 * T, bi=9 * T, act=2 * T)),
    "return silu(x, keep = nothing)": ((B, S, H), "act", row(fwd=4 * T, bi=4 * T)),
    "return softmax(x, fp32 = true, keep = output)": ((B, S, H), "act", row(fwd=5 * T, bi=5 * T, act=2 * T)),
    "return linear(cast(x, fp32), n, bias = false)": ((B, S, N), "fp32", row(
        params=N * H, fwd=2 * B * S * H * N, bi=2 * B * S * H * N, bw=2 * B * S * H * N, act=4 * T)),
    # rotary: the shared tables count once for the model, `own` ones per call
    "return rope(x) + rope(x)": ((B, S, H), "act", row(fwd=7 * T, bi=6 * T, act=2 * 2 * S * H)),
    "return rope(x, table = own) + rope(x, table = own)": ((B, S, H), "act",
                                                           row(fwd=7 * T, bi=6 * T, act=2 * 2 * 2 * S * H)),
    # sequence mixers: parameters, FLOPs, the input kept, a fixed-size state at inference
    "return conv1d(x, k)": ((B, S, H), "act", row(
        params=H * K + H, fwd=2 * T * K + T, bi=2 * T * K, bw=2 * T * K + T, act=2 * T, kv=2 * B * H * K)),
    "return conv1d(x, k, bias = false, state = false)": ((B, S, H), "act", row(
        params=H * K, fwd=2 * T * K, bi=2 * T * K, bw=2 * T * K, act=2 * T)),
    "return selective_scan(x, gelu(x), slice(x, n), slice(gelu(x), n))": ((B, S, H), "act", row(
        params=H * N + H, fwd=2 * T * N + 5 * T * N + 3 * T + 2 * 9 * T,
        bi=4 * T * N + 5 * T * N + 3 * T + 2 * 9 * T, bw=2 * T * N + 2 * T,
        act=3 * 2 * T, kv=2 * B * H * N)),   # x and two gelu outputs (each gelu keeps x)
}


@pytest.mark.parametrize("body", list(CASES))
def test_operator_shapes_params_flops_saved_bytes(body):
    shape, role, want = CASES[body]
    assert out_shape(body) == (shape, role)
    assert costs(body) == want


# gpt-oss's gated unit as transformers 5.24 writes it (GptOssExperts._apply_gate), one op per step
CLAMPED_STEPS = """gate, up = split(x, 2)
  gate = clamp(gate, lower = false)
  up = clamp(up)
  glu = gate * sigmoid(scale(gate))
  return scale(up) * glu"""


def test_clamped_glu_is_the_eager_steps_in_pytorch_and_megatrons_fused_unit_in_korthikanti():
    # eager autograd: one operator costs and keeps what its steps do, under both FLOP conventions
    for convention in ("all", "matmul"):
        assert costs("return clamped_glu(x)", convention=convention) == costs(CLAMPED_STEPS, convention=convention)
    # Megatron-LM @ d98e8a64 fusions/fused_bias_geglu.py WeightedQuickGeGLUFunction.forward:
    # ctx.save_for_backward(input_for_backward, ...): the [.., 2w] input only (bf16: 2 B an element)
    fused = costs("return clamped_glu(x)", profile="korthikanti")
    assert fused["activation_bytes"] == 2 * T
    assert fused["activation_bytes"] < costs(CLAMPED_STEPS, profile="korthikanti")["activation_bytes"]


def test_korthikanti_profile_keeps_the_inputs_of_norms():
    assert costs("return rmsnorm(x, weight = false)", profile="korthikanti")["activation_bytes"] == 2 * T
    assert costs("return rmsnorm(x, keep = output)", profile="korthikanti")["activation_bytes"] == 2 * T
    assert costs("return layernorm(x, keep = nothing)", profile="korthikanti")["activation_bytes"] == 0


def test_matmul_convention_counts_products_only():
    assert costs("return conv1d(x, k)", convention="matmul")["flops_forward"] == 2 * T * K
    got = costs("return selective_scan(x, x, slice(x, n), slice(x, n))", convention="matmul")
    assert (got["flops_forward"], got["flops_backward_input"], got["flops_backward_weight"]) == (
        2 * T * N, 4 * T * N, 0)
    assert costs("return sigmoid(softcap(x))", convention="matmul")["flops_forward"] == 0


def test_state_cache_does_not_grow_with_tokens():
    m = model("return selective_scan(x, x, slice(x, n), slice(x, n))")
    c = m.costs("model")
    assert c.kv_cache_bytes_per_token == 0
    assert c.evaluate(b=3, s=10, h=H, n=N)["kv_cache_bytes"] == c.evaluate(b=3, s=1000, h=H, n=N)["kv_cache_bytes"] \
        == 3 * H * N * 2
    # transformers 5.24 keeps Mamba's state in fp32 (MambaMixer's recurrent_states [b, D, N] float32 after a prefill)
    fp32 = model("return selective_scan(x, x, slice(x, n), slice(x, n), state_fp32 = true)").costs("model")
    assert fp32.evaluate(b=3, s=10, h=H, n=N)["kv_cache_bytes"] == 3 * H * N * 4


@pytest.mark.parametrize("body, fragment", [
    ("return cast(x, int8)", "cast to int8"),
    ("return cast(ids, fp32)", "floating-point"),
    ("return gather(x, x)", "'index'"),
    ("return scatter(x, ids, n)", "one id per row"),
    ("return gelu(x, keep = both)", "keep = both"),
    ("return clamp(x, lower = false, upper = false)", "at least one bound"),
    ("v, i = topk(x, h + 1)\n  return v", "more than it has"),
    ("return conv1d(split_heads(x, 2), k)", "[B, S, C]"),
])
def test_refusals(body, fragment):
    with pytest.raises(CostgraphError) as info:
        model(body)
    assert fragment in str(info.value)


# ---------------------------------------------------------------- causal products
def brute(m: int, n: int, w: int | None) -> int:
    """(query, key) pairs a causal mask keeps: query i sits at position n − m + i."""
    return sum(1 for i in range(m) for j in range(n)
               if j <= n - m + i and (w is None or n - m + i - j < w))


def test_causal_pairs_exact_by_brute_force():
    m_, n_, w_ = sympy.symbols("m n w", positive=True, integer=True)
    forms = {(exact, win): sympy.lambdify((m_, n_, w_), causal_pairs(m_, n_, w_ if win else None, exact=exact))
             for exact in (True, False) for win in (True, False)}
    for n in range(1, 13):
        for m in range(1, n + 6):   # m > n: FlashAttention 2.1's bottom-right mask (issue 30; brute's rule)
            for w in (None, *range(1, 15)):
                args = (m, n, w or 1)
                assert forms[True, w is not None](*args) == brute(m, n, w), (m, n, w)
                cap = (lambda t: t if w is None else min(t, w))
                assert forms[False, w is not None](*args) == brute(m, n, w) - (cap(n) - cap(max(n - m, 0))) / 2, (m, n, w)


def test_causal_pairs_closed_forms_symbolic():
    s, w, m, n = sympy.symbols("s w m n", positive=True, integer=True)
    assert sympy.expand(causal_pairs(s, s)) == s**2 / 2                          # the documented 'half'
    assert sympy.expand(causal_pairs(s, s, exact=True) - s * (s + 1) / 2) == 0
    u = sympy.Symbol("u", nonnegative=True, integer=True)   # n = m + u keys: at least as many as queries
    assert sympy.expand(causal_pairs(m, m + u)) == sympy.expand(m * (m + u) - m**2 / 2)
    assert sympy.expand(causal_pairs(m, m + u, exact=True)) == sympy.expand(m * (m + u) - m * (m - 1) / 2)
    assert sympy.expand(causal_pairs(n + u, n)) == n**2 / 2                       # more queries: the square
    assert sympy.expand(causal_pairs(n + u, n, exact=True) - n * (n + 1) / 2) == 0
    band = causal_pairs(s, s, w)
    for sv, wv in ((100, 7), (7, 100), (64, 64)):
        assert band.subs({s: sv, w: wv}) == (sv * wv - sympy.Rational(wv * wv, 2) if wv <= sv else sympy.Rational(sv * sv, 2))
        assert causal_pairs(s, s, w, exact=True).subs({s: sv, w: wv}) == brute(sv, sv, wv)


def _attention(cz: str, s: int, w: int) -> int:
    """Forward FLOPs of Mistral-7B's QKᵀ and scores·V (all layers, b = 1)."""
    m = costgraph.load("mistral")
    full = m.costs("model", causal="full").evaluate(config="mistral-7b", s=s, w=w)["flops_forward"]
    got = m.costs("model", causal=cz).evaluate(config="mistral-7b", s=s, w=w)["flops_forward"]
    band = s * min(s, w)
    return full - got, band


@pytest.mark.parametrize("s, w", [(12, 5), (5, 12), (9, 9), (32768, 4096)])
def test_mistral_window_causal_counts(s, w):
    l, a, d = 32, 32, 128
    per_pair = 4 * a * d * l          # QKᵀ and scores·V, 2 FLOPs each per pair and head dim
    saved, band = _attention("exact", s, w)
    pairs = brute(s, s, w) if s < 100 else s * w - w * (w - 1) // 2   # the s·w − w(w−1)/2
    assert band - saved // per_pair == pairs and saved % per_pair == 0
    saved, band = _attention("half", s, w)
    area = s * w - sympy.Rational(w * w, 2) if w <= s else sympy.Rational(s * s, 2)
    assert band * per_pair - saved == area * per_pair


def test_mistral_32k_half_is_the_band_not_half_of_it():
    # costgraph derive mistral --config mistral-7b --set s=32768 --causal half
    s, w = 32768, 4096
    m = costgraph.load("mistral")
    full = m.costs("model").evaluate(config="mistral-7b", s=s)["flops_forward"]
    half = m.costs("model", causal="half").evaluate(config="mistral-7b", s=s)["flops_forward"]
    attention = 4 * 32 * 128 * 32 * s * w
    assert full - half == attention * w // (2 * s)            # s·w − w²/2 pairs: 1/16 of the band off
    assert full - half == 4_398_046_511_104
    assert half == 531_957_469_413_376


def test_causal_half_of_a_square_is_unchanged():
    m = costgraph.load("gpt")
    b, s, h = (sympy.Symbol(n, positive=True, integer=True) for n in "bsh")
    diff = m.costs("layer").flops_forward - m.costs("layer", causal="half").flops_forward
    assert sympy.expand(diff - 2 * b * s**2 * h) == 0
    diff = m.costs("layer").flops_forward - m.costs("layer", causal="exact").flops_forward
    assert sympy.expand(diff - (2 * b * s**2 * h - 2 * b * s * h)) == 0   # s(s+1)/2 pairs of 4bh FLOPs


NONSQUARE = """model m {
  dim b
  dim q
  dim t
  dim d
  input x[b, q, d]
  input kv[b, t, d]
  p = softmax(matmul(x, transpose(kv), causal = true))
  return matmul(p, kv, causal = true)
}
"""


def test_non_square_causal_product():
    m = costgraph.loads(NONSQUARE, path="m.cg")
    for cz, pairs in (("half", lambda q, t: q * t - sympy.Rational(q * q, 2)),
                      ("exact", lambda q, t: brute(q, t, None))):
        got = m.costs("model", causal=cz).evaluate(b=2, q=3, t=7, d=4)["flops_forward"]
        assert got == 2 * 2 * 2 * 4 * pairs(3, 7)



def test_causal_product_with_more_queries_than_keys_is_bottom_right_aligned():
    """derive of q = 10 queries over t = 4 keys gave −480 FLOPs under --causal half and −240 under
    exact (issue 30 item 2). The mask is aligned to the bottom right (Dao-AILab/flash-attention README,
    "2.1: Change behavior of causal flag": seqlen_q = 5 over seqlen_k = 2 keeps 0, 0, 0, 1, 2 keys per
    row), so the first q − t queries meet no key: t²/2 pairs as an area, t(t+1)/2 exactly (brute)."""
    m = costgraph.loads(NONSQUARE, path="m.cg")
    for cz, pairs in (("half", sympy.Rational(4 * 4, 2)), ("exact", brute(10, 4, None))):
        got = m.costs("model", causal=cz).evaluate(b=2, q=10, t=4, d=3)["flops_forward"]
        assert got == 2 * 2 * 2 * 3 * pairs and got > 0, (cz, got)
    assert brute(10, 4, None) == 10 and brute(5, 2, None) == 3       # the README's 0, 0, 0, 1, 2
    shifted = costgraph.loads(NONSQUARE.replace("dim t", "dim t = q + 1").replace(
        "input x[b, q, d]", "input x[b, q + 2, d]"), path="m.cg")     # q + 2 queries over q + 1 keys
    got = shifted.costs("model", causal="exact").evaluate(b=1, q=3, d=1)["flops_forward"]
    assert got == 2 * 2 * brute(5, 4, None)
