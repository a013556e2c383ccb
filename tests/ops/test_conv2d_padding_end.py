"""``conv2d``'s ``padding_end`` (task k28speech2): a causal Conv2d's asymmetric zero padding, ``F.pad(x, (k − 1,
stride − 1, k − 1, stride − 1))`` before a Conv2d of no padding (transformers 5.24 modeling_nemotron_asr_streaming.py
``NemotronAsrStreamingEncoderCausalConv2D.forward``: ``freq_pad`` and ``time_pad`` ``(kernel − 1, stride − 1)``),
against PyTorch on CPU at concrete sizes: the output shape equals the torch module's, the parameters its
``numel``, and the matmul FLOPs forward and backward ``FlopCounterMode``'s (the input is the model's: no input
gradient, as PyTorch's ``convolution_backward`` skips it); a ``padding_end`` below 1 is refused located
(a dim argument).

Skipped without the torch extra."""

from __future__ import annotations

import pytest

import costgraph
from costgraph.errors import CostgraphError
from op_checks import costs_of, out_shape_of  # noqa: E402  (tests/ on sys.path)

torch = pytest.importorskip("torch")

B, C, OUT = 2, 3, 5
SIZES = dict(b=B, c=C)


def model(body: str, h: int, w: int):
    src = f"model m {{\n  dim b\n  dim c\n  input img[b, c, {h}, {w}]\n  return {body}\n}}\n"
    return costgraph.loads(src, path="m.cg", profile="pytorch")


# (h, w, kernel, stride, groups): NemotronAsrStreaming's stem (kernel 3, stride 2: pads (2, 1)) on odd and even sides,
# its depthwise layers (groups = channels), and larger kernels and strides (pads (3, 2), (4, 2)). A dim argument is
# a positive whole number (the language's rule): a stride of 1 (pads (k − 1, 0)) is written without padding_end
CASES = [(9, 8, 3, 2, 1), (8, 7, 3, 2, 1), (11, 6, 3, 2, C), (7, 7, 4, 3, 1), (10, 9, 5, 3, 1)]


@pytest.mark.parametrize("h, w, k, stride, groups", CASES)
def test_conv2d_padding_end_matches_pytorch(h, w, k, stride, groups):
    out = C if groups != 1 else OUT
    conv = torch.nn.Conv2d(C, out, k, stride=stride, groups=groups)
    x = torch.randn(B, C, h, w)

    def fn(t):      # NemotronAsrStreamingEncoderCausalConv2D.forward (offline): both pads, then the Conv2d
        t = torch.nn.functional.pad(t, (k - 1, stride - 1))
        return conv(torch.nn.functional.pad(t, (0, 0, k - 1, stride - 1)))

    from torch.utils.flop_counter import FlopCounterMode
    with FlopCounterMode(display=False) as fc:
        y = fn(x)
        fwd = fc.get_total_flops()
        y.sum().backward()
    bwd = fc.get_total_flops() - fwd
    groups_arg = f", groups = {groups}" if groups != 1 else ""
    body = f"conv2d(img, {out}, kernel = {k}, stride = {stride}, padding = {k - 1}, padding_end = {stride - 1}" \
           f"{groups_arg})"
    m = model(body, h, w)
    assert out_shape_of(m, SIZES) == tuple(y.shape)
    got = costs_of(m, "matmul", SIZES)
    assert got["params"] == sum(p.numel() for p in conv.parameters())
    assert got["flops_forward"] == fwd
    assert got["flops_backward_input"] == 0
    # FlopCounterMode counts a grouped convolution's weight gradient as if ungrouped (ops/vision.py's notes)
    assert got["flops_backward_weight"] * groups == bwd


def test_conv2d_padding_end_default_is_symmetric():
    a = costs_of(model("conv2d(img, 5, kernel = 3, stride = 2, padding = 1)", 9, 9), "matmul", SIZES)
    b = costs_of(model("conv2d(img, 5, kernel = 3, stride = 2, padding = 1, padding_end = 1)", 9, 9), "matmul", SIZES)
    assert a == b


def test_conv2d_negative_padding_end_refused():
    with pytest.raises(CostgraphError) as e:
        model("conv2d(img, 5, kernel = 3, padding = 2, padding_end = 1 - 2)", 9, 9)
    assert "'padding_end' of conv2d must be a positive whole number, got -1" in str(e.value)
    assert str(e.value).startswith("m.cg:5:")
