"""The vision, speech and diffusion operators (issue 19): conv2d, conv3d,
dense_conv1d, flatten_patches, concat_seq, group_norm, upsample, modulate,
gate and layer_scale — output shape, parameters, FLOPs (forward, backward input and weight,
``all`` convention) and saved bytes (``pytorch`` profile), exact, computed by
hand from the rules' documented counts (FLOPs as ``torch.utils.flop_counter``'s
``conv_flop_count``: 2 per multiply-add of each output element). The
agreement with PyTorch is in ``tests/ops/test_vision_ops_torch.py``; the ViT model
in ``tests/models/test_vit.py``."""

from __future__ import annotations

import pytest
import sympy

import costgraph
from op_checks import costs_of, out_shape_of, row  # noqa: E402,F401  (tests/ on sys.path)
from costgraph.engine.symbols import dim
from costgraph.errors import CostgraphError

B, C, R, O, S, H = 2, 3, 8, 4, 5, 6
SIZES = dict(b=B, c=C, r=R, o=O, s=S, h=H)

HEAD = """model m {
  dim b
  dim c
  dim r
  dim o
  dim s
  dim h
  input img[b, c, r, r]
  input vol[b, c, r, r, r]
  input flat[b, 6, r, r]
  input sig[b, c, r]
  input x[b, s, h]
  input v[b, h]
"""


def model(body: str, **kw):
    # each operator alone, as its PyTorch twin measures it: inputs made with requires_grad=True
    return costgraph.loads(HEAD + body + "\n}\n", path="m.cg", profile="pytorch", **{"input_grads": True, **kw})


def costs(body: str, convention: str = "all") -> dict:
    return costs_of(model(body), convention, SIZES)


def out_shape(body: str) -> tuple:
    return out_shape_of(model(body), SIZES)


IMG = B * C * R * R          # 384 elements of img
T = B * S * H                # 60 elements of x

CASES = {
    # ViT's patch embedding: kernel = stride = 2 → [2, 4, 4, 4]; 2·(B·O·16)·C·4 = 3072 products, bias 128;
    # an input of the model gets no input gradient; keeps img (bf16)
    "return conv2d(img, o, kernel = 2, stride = 2)": ((B, O, 4, 4), row(
        params=O * C * 4 + O, fwd=3072 + 128, bw=3072 + 128, act=2 * IMG)),
    # padding 1, 3×3 → [2, 4, 8, 8]: 512 outputs · 2·C·9; its input (a gelu) gets a gradient
    "return conv2d(gelu(img), o, kernel = 3, padding = 1)": ((B, O, R, R), row(
        params=O * C * 9 + O, fwd=27648 + 512 + 9 * IMG, bi=27648 + 9 * IMG, bw=27648 + 512, act=4 * IMG)),
    # stride 2 without padding: (8 − 4)/2 + 1 = 3
    "return conv2d(img, o, kernel = 4, stride = 2, bias = false)": ((B, O, 3, 3), row(
        params=O * C * 16, fwd=2 * 72 * C * 16, bw=2 * 72 * C * 16, act=2 * IMG)),
    # depthwise: groups = C, weight [C, 1, 3, 3]
    "return conv2d(img, c, kernel = 3, padding = 1, groups = c, bias = false)": ((B, C, R, R), row(
        params=C * 9, fwd=2 * IMG * 9, bw=2 * IMG * 9, act=2 * IMG)),
    "return conv3d(vol, o, kernel = 2, stride = 2)": ((B, O, 4, 4, 4), row(
        params=O * C * 8 + O, fwd=2 * 512 * C * 8 + 512, bw=2 * 512 * C * 8 + 512, act=2 * B * C * R ** 3)),
    # Qwen2-VL-style: a temporal kernel of its own
    "return conv3d(vol, o, kernel = 2, stride = 2, kernel_t = 4, stride_t = 4)": ((B, O, 2, 4, 4), row(
        params=O * C * 16 + O, fwd=2 * 256 * C * 16 + 256, bw=2 * 256 * C * 16 + 256, act=2 * B * C * R ** 3)),
    # Whisper's stem: kernel 3, padding 1; then stride 2, kernel 4 → (8 + 2 − 4)/2 + 1 = 4
    "return dense_conv1d(sig, o, kernel = 3, padding = 1)": ((B, O, R), row(
        params=O * C * 3 + O, fwd=2 * 64 * C * 3 + 64, bw=2 * 64 * C * 3 + 64, act=2 * B * C * R)),
    "return dense_conv1d(gelu(sig), o, kernel = 4, padding = 1, stride = 2)": ((B, O, 4), row(
        params=O * C * 4 + O, fwd=2 * 32 * C * 4 + 32 + 9 * 48, bi=2 * 32 * C * 4 + 9 * 48,
        bw=2 * 32 * C * 4 + 32, act=4 * B * C * R)),
    # a view: no FLOPs, keeps nothing
    "return flatten_patches(img)": ((B, R * R, C), row()),
    # the class token: a parameter [1, 1, h] broadcast over the batch, a copy
    "param cls[1, 1, h]\n  return concat_seq(cls, x)": ((B, S + 1, H), row(params=H)),
    "return concat_seq(x, x)": ((B, 2 * S, H), row()),
    # γ, β [C]; 7 FLOPs an element, the weight gradient 3; keeps img and mean, 1/σ [B, groups] (bf16)
    "return group_norm(img, c)": ((B, C, R, R), row(params=2 * C, fwd=7 * IMG, bi=7 * IMG, bw=3 * IMG,
                                                    act=2 * IMG + 2 * 2 * B * C)),
    "return group_norm(img, 1, weight = false)": ((B, C, R, R), row(fwd=5 * IMG, bi=5 * IMG,
                                                                    act=2 * IMG + 2 * 2 * B)),
    # nearest ×2: a copy; backward sums each 2×2 block: out − in adds
    "return upsample(img, 2)": ((B, C, 2 * R, 2 * R), row(bi=4 * IMG - IMG)),
    # adaLN: x·(1 + scale) + shift (2 per element, 1 per element of scale); keeps x and 1 + scale [B, 1, H]
    "return modulate(x, v, gelu(v))": ((B, S, H), row(fwd=2 * T + B * H + 9 * B * H, bi=3 * T + 9 * B * H,
                                                      act=2 * T + 2 * B * H + 2 * B * H)),
    "return gate(x, v)": ((B, S, H), row(fwd=T, bi=2 * T, act=2 * T + 2 * B * H)),
    # LayerScale: λ [H]; keeps x only (the other operand is the parameter)
    "return layer_scale(x)": ((B, S, H), row(params=H, fwd=T, bi=T, bw=2 * T, act=2 * T)),
}


@pytest.mark.parametrize("body", list(CASES))
def test_operator_shapes_params_flops_saved_bytes(body):
    shape, want = CASES[body]
    assert out_shape(body) == shape
    assert costs(body) == want


def test_matmul_convention_counts_the_products_only():
    got = costs("return conv2d(img, o, kernel = 2, stride = 2)", convention="matmul")
    assert (got["flops_forward"], got["flops_backward_input"], got["flops_backward_weight"]) == (3072, 0, 3072)
    assert costs("return group_norm(modulate(x, v, v), 1)", convention="matmul")["flops_forward"] == 0


def test_patch_embedding_is_symbolic_in_image_and_patch():
    """kernel = stride = p on an image of side r: (r − p)/p + 1 = r/p patches a side, exactly."""
    m = model("  dim p\n  return flatten_patches(conv2d(img, o, kernel = p, stride = p))")
    r, p, b, o, c = (sympy.Symbol(n, positive=True, integer=True) for n in "rpboc")
    out = m.graph.tensors[m.graph.outputs[0]]
    assert [sympy.simplify(d - w) for d, w in zip(out.shape, (b, r ** 2 / p ** 2, o))] == [0, 0, 0]
    assert sympy.expand(m.costs("model", convention="matmul").flops_forward - 2 * b * o * c * r ** 2) == 0
    assert sympy.expand(m.costs("model", convention="all").flops_forward - 2 * b * o * c * r ** 2
                        - b * o * r ** 2 / p ** 2) == 0   # the bias: one add per output element


@pytest.mark.parametrize("body, fragment", [
    ("return conv2d(x, o, kernel = 2)", "[B, C, n1, n2]"),
    ("return conv3d(img, o, kernel = 2)", "[B, C, n1, n2, n3]"),
    ("return dense_conv1d(img, o, kernel = 2)", "[B, C, n1]"),
    ("return conv2d(flat, o, kernel = 2, groups = 4)", "do not split into 4 groups"),
    ("return group_norm(flat, 4)", "do not split into 4 groups"),
    ("return conv2d(img, o, kernel = 2, stride = 0)", "must be a positive whole number"),
    ("return concat_seq(x, v)", "one rank"),
    ("return concat_seq(x, transpose(x))", "last dimensions differ"),
    ("return modulate(x, x, v)", "[B, H]"),
    ("return gate(v, v)", "[B, S, H]"),
    ("return upsample(v, 2)", "[B, C, *spatial]"),
    ("return flatten_patches(v)", "[B, C, *spatial]"),
])
def test_refusals(body, fragment):
    with pytest.raises(CostgraphError) as e:
        model(body)
    assert fragment in str(e.value)


@pytest.mark.parametrize("body, fragment", [
    ("return conv2d(img, o, kernel = 20)", "r - 19 = -11"),      # a kernel larger than the image
    ("return conv2d(img, o, kernel = 2, groups = 2)", "channels_per_group"),   # c/2 with c = 3
    ("return group_norm(img, 2)", "channels_per_group"),
])
def test_refusals_at_the_values(body, fragment):
    with pytest.raises(CostgraphError, match="not a positive whole number") as e:
        model(body).costs("model").evaluate(**SIZES)
    assert fragment in str(e.value)


@pytest.mark.parametrize("call", ["conv2d(x, 4, kernel = 7)", "max_pool2d(x, 7)",
                                  "avg_pool2d(x, 7, stride = 1)",
                                  "conv2d(x, 4, kernel = 7, stride = 2)"])
def test_a_numeric_side_smaller_than_the_kernel_is_refused(call):
    """A 3×3 input under a 7×7 kernel, no padding: PyTorch refuses it ("Kernel size can't be greater than actual
    input size"); at stride 1 the side ``3 − 7 + 1 = −3`` was taken (and squared into positive FLOPs) once stride 1
    skipped the check (ops.vision._out_size)."""
    text = f"model m {{\n  dim b\n  input x[b, 4, 3, 3]\n  return {call}\n}}\n"
    with pytest.raises(CostgraphError, match="kernel 7 is larger than the padded input 3"):
        costgraph.loads(text, path="m.cg")


def test_a_numeric_stride_rounds_down_as_pytorch():
    """PyTorch's Conv2d output size floor((r − 3)/2) + 1 (torch.nn.Conv2d docs, dilation 1): r = 8 gives 3
    positions per axis (not refused: issue 28, wav2vec2's strided convolutions), r = 9 gives 4."""
    m = model("return conv2d(img, o, kernel = 3, stride = 2)")
    for r, side in ((8, 3), (9, 4)):
        got = m.costs("model", convention="matmul").evaluate(**{**SIZES, "r": r})
        assert got["flops_forward"] == 2 * B * O * C * 9 * side * side
        assert got["params"] == O * C * 9 + O


def test_a_symbolic_stride_that_does_not_divide_is_refused_at_the_values():
    """A symbolic stride (a patch embedding, kernel = stride = p) is taken as dividing, r/p; values for
    which it does not are refused."""
    body = "return conv2d(img, o, kernel = s, stride = s)"
    m = model(body)
    assert m.graph.tensors[m.graph.nodes["conv2d"]["outputs"][0]].shape[-1] == dim("r") / dim("s")
    with pytest.raises(CostgraphError, match="not a positive whole number"):
        m.costs("model").evaluate(**SIZES)          # r = 8, s = 5
    assert m.costs("model").evaluate(**{**SIZES, "r": 10})["params"] == O * C * 25 + O
