"""The staged-backbone operators of ``costgraph.ops.conv_stages`` (task k28conv12) against PyTorch, on CPU:
``channels_last``, ``channels_first``, ``spatial_mean``, ``grn``, ``batch_norm``, ``max_pool2d``, ``windows``,
``unwindows`` and ``unflatten_patches``, and ``ops.vision.avg_pool2d`` with a stride and padding (PoolFormer's
token mixer, once ``avg_pool``), each alone in a tiny model at concrete sizes:

- the output shape equals the torch module's output shape (PyTorch's floor lengths with padding and stride);
- the parameters equal ``sum(p.numel())`` of the torch module;
- the FLOPs under ``matmul`` equal ``torch.utils.flop_counter.FlopCounterMode``'s (none of these is counted there:
  0 forward and backward);
- the bytes of the storages autograd keeps (``saved_tensors_hooks``, parameters left out) equal the ``pytorch``
  profile's activation bytes;
- the ``all`` counts equal a count by hand from the source, cited beside each case;
- a bad input (a wrong rank, a kernel larger than the padded input, windows that do not divide) is refused with the
  located message, and by the CLI with exit status 2.

Skipped without the torch extra (transformers is needed for ConvNeXt V2's GRN and Swin's window functions)."""

from __future__ import annotations

import pytest

import costgraph
from op_checks import costs_of, out_shape_of, row  # noqa: E402,F401  (tests/ on sys.path)
from costgraph.cli import main
from costgraph.errors import CostgraphError

torch = pytest.importorskip("torch")
from test_new_ops_torch import _measure  # noqa: E402

F = torch.nn.functional
B, C = 2, 3                  # img [2, 3, 8, 8], tokens t [2, 16, 3] (a 4×4 map)
SIZES = dict(b=B, c=C)
IMG = B * C * 8 * 8          # 384 elements
BF16 = 2                     # bytes an element: the inputs are bf16, as the pytorch profile's compute dtype

HEAD = "model m {\n  dim b\n  dim c\n  input img[b, c, 8, 8]\n  input t[b, 16, c]\n"


def model(body: str):
    # each operator alone, as its PyTorch twin measures it: inputs made with requires_grad=True
    return costgraph.loads(HEAD + f"  return {body}\n}}\n", path="m.cg", profile="pytorch", input_grads=True)


def costs(body: str, convention: str) -> dict:
    return costs_of(model(body), convention, SIZES)


def out_shape(body: str) -> tuple:
    return out_shape_of(model(body), SIZES)


def _grn():
    from transformers.models.convnextv2.modeling_convnextv2 import ConvNextV2GRN
    return ConvNextV2GRN(C).to(torch.bfloat16)


def _swin():
    from transformers.models.swin import modeling_swin
    return modeling_swin


# body → (the torch twin: a function of the module that returns (module or None, fn), the input's shape,
#         the `all` counts by hand)
CASES = {
    # transformers 5.24 modeling_convnext.py ConvNextLayer.forward: input.permute(0, 2, 3, 1), a view: nothing
    "channels_last(img)": (lambda: (None, lambda x: x.permute(0, 2, 3, 1)), (B, C, 8, 8), row()),
    "channels_first(channels_last(img))": (
        lambda: (None, lambda x: x.permute(0, 2, 3, 1).permute(0, 3, 1, 2)), (B, C, 8, 8), row()),
    # ConvNextModel.forward: pooled = last_hidden_state.mean([-2, -1]): each output sums H·W = 64 inputs and
    # divides once: 63 adds + 1 divide = 64 per output, B·C·64 = one per input element; MeanBackward1 expands
    # grad/64 over the H·W inputs: one per input element. MeanBackward1 keeps only the sizes.
    "spatial_mean(img)": (lambda: (None, lambda x: x.mean([-2, -1])), (B, C, 8, 8), row(fwd=IMG, bi=IMG)),
    # DINOv3 ConvNeXt's nn.AdaptiveAvgPool2d(1): ATen dispatches an output of 1×1 to mean (keeps nothing)
    "spatial_mean(img, keepdim = true)": (lambda: (None, torch.nn.AdaptiveAvgPool2d(1)), (B, C, 8, 8),
                                          row(fwd=IMG, bi=IMG)),
    # Swin's pooler (modeling_swin.py SwinModel.forward): AdaptiveAvgPool1d(1) over the transposed tokens, flatten
    "spatial_mean(t)": (lambda: (None, lambda x: torch.nn.AdaptiveAvgPool1d(1)(x.transpose(1, 2)).flatten(1)),
                        (B, 16, C), row(fwd=B * 16 * C, bi=B * 16 * C)),
    # modeling_convnextv2.py ConvNextV2GRN.forward: vector_norm over H, W (a square and an add an element: 2),
    # hidden_states * norm_features (1), weight * (...) (1), + bias (1), + hidden_states (1): 6 an element (the
    # B·C norms, their mean over C, + 1e-6 and the divide left out); the input gradient as many (group_norm's
    # convention); the weight gradients: weight's sum(g · x·N) a multiply and an add, bias's sum(g) an add: 3.
    # Kept (saved_tensors_hooks): x [2, 8, 8, 3] (the norm's and the mul's), x·N (weight * ...'s), the norm and
    # N [2, 1, 1, 3] (the divide's and the mul's), the denominator [2, 1, 1, 1] (the divide's), all bf16.
    "grn(channels_last(img))": (lambda: (lambda m: (m, lambda x: m(x.permute(0, 2, 3, 1))))(_grn()), (B, C, 8, 8),
                                row(params=2 * C, fwd=6 * IMG, bi=6 * IMG, bw=3 * IMG,
                                    act=BF16 * (2 * IMG + 2 * B * C + B))),
    # nn.BatchNorm2d (ResNetConvLayer.normalization, modeling_resnet.py): (x − μ)·(1/σ) per element as
    # group_norm's 5 (sub, square, add for the variance; sub, mul), γ 1, β 1: 7; backward as group_norm's; keeps
    # x and save_mean, save_invstd [C] (bf16 on CPU); the running mean and variance are buffers (below).
    "batch_norm(img)": (lambda: (lambda m: (m, m))(torch.nn.BatchNorm2d(C).to(torch.bfloat16)), (B, C, 8, 8),
                        row(params=2 * C, fwd=7 * IMG, bi=7 * IMG, bw=3 * IMG, act=BF16 * (IMG + 2 * C))),
    # ResNet's stem pool nn.MaxPool2d(3, 2, 1) (ResNetEmbeddings.pooler): ⌊(8 + 2 − 3)/2⌋ + 1 = 4 a side, 96
    # outputs; each the max of its 3×3 window: 8 comparisons (torch aten/src/ATen/native/cpu/MaxPoolKernel.cpp
    # cpu_max_pool, border windows counted whole); the backward adds each output's gradient at its argmax: 1;
    # keeps x (bf16) and the int64 indices [2, 3, 4, 4].
    "max_pool2d(img, 3, stride = 2, padding = 1)": (lambda: (None, lambda x: F.max_pool2d(x, 3, 2, 1)), (B, C, 8, 8),
                                                    row(fwd=8 * 96, bi=96, act=BF16 * IMG + 8 * 96)),
    # no padding: ⌊(8 − 3)/2⌋ + 1 = 3 a side (PyTorch's floor drops the last row and column), 54 outputs
    "max_pool2d(img, 3, stride = 2)": (lambda: (None, lambda x: F.max_pool2d(x, 3, 2)), (B, C, 8, 8),
                                       row(fwd=8 * 54, bi=54, act=BF16 * IMG + 8 * 54)),
    # PoolFormer's token mixer (modeling_poolformer.py PoolFormerPooling: nn.AvgPool2d(3, 1, 1,
    # count_include_pad=False)): 8 a side, 384 outputs; AvgPoolKernel.cpp cpu_avg_pool: 9 adds into a zeroed sum
    # (8 counted) and a divide: 9 an output; cpu_avg_pool_backward: grad / divide_factor once, then added to the 9
    # inputs of its window: 9 (border windows counted whole, as the forward's); AvgPool2DBackward0 keeps x.
    "avg_pool2d(img, 3, stride = 1, padding = 1)": (
        lambda: (None, lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False)), (B, C, 8, 8),
        row(fwd=9 * IMG, bi=9 * IMG, act=BF16 * IMG)),
    # overlapping windows, no padding: ⌊(8 − 3)/2⌋ + 1 = 3 a side, 54 outputs of 9 inputs
    "avg_pool2d(img, 3, stride = 2)": (lambda: (None, lambda x: F.avg_pool2d(x, 3, 2)), (B, C, 8, 8),
                                       row(fwd=9 * 54, bi=9 * 54, act=BF16 * IMG)),
    # stride = kernel (the default), windows that tile the input: 96 outputs of 4 inputs = one per input element
    "avg_pool2d(img, 2)": (lambda: (None, lambda x: F.avg_pool2d(x, 2)), (B, C, 8, 8),
                           row(fwd=IMG, bi=IMG, act=BF16 * IMG)),
    # Gemma 3's projector (modeling_gemma3.py Gemma3MultiModalProjector.forward): tokens transposed, reshaped to
    # the 4×4 grid (a copy the pool keeps), AvgPool2d(2, 2), flatten(2).transpose(1, 2): [B, 4, C]
    "avg_pool2d(t, 2, side = 4)": (
        lambda: (None, lambda x: F.avg_pool2d(x.transpose(1, 2).reshape(B, C, 4, 4), 2).flatten(2).transpose(1, 2)),
        (B, 16, C), row(fwd=B * 16 * C, bi=B * 16 * C, act=BF16 * B * 16 * C)),
    # modeling_swin.py window_partition of the 4×4 map into (4/2)² = 4 windows of 2×2 tokens (view, permute,
    # contiguous, view: a copy, nothing kept), as [B·4, 4, C]
    "windows(t, 4)": (lambda: (None, lambda x: _swin().window_partition(x.view(B, 4, 4, C), 2).view(B * 4, 4, C)),
                      (B, 16, C), row()),
    # window_reverse: [B·4, 4, C] → [B, 16, C]
    "unwindows(windows(t, 4), 4)": (
        lambda: (None, lambda x: _swin().window_reverse(
            _swin().window_partition(x.view(B, 4, 4, C), 2), 2, 4, 4).view(B, 16, C)), (B, 16, C), row()),
    # modeling_segformer.py SegformerDepthWiseConv: hidden_states.transpose(1, 2).view(B, C, H, W) (a copy here,
    # the transposed tokens are not contiguous; nothing kept)
    "unflatten_patches(t, 4)": (lambda: (None, lambda x: x.transpose(1, 2).reshape(B, C, 4, 4)), (B, 16, C), row()),
}

# the buffers BatchNorm2d's backward holds (running_mean, running_var [C], bf16): module state, not activations
BUFFERS = {"batch_norm(img)": BF16 * 2 * C}


@pytest.fixture(scope="module")
def twins():
    torch.manual_seed(0)
    return {body: make() for body, (make, _, _) in CASES.items()}


@pytest.mark.parametrize("body", list(CASES))
def test_shape_and_all_counts_by_hand(body, twins):
    _, shape, want = CASES[body]
    module, fn = twins[body]
    assert out_shape(body) == tuple(fn(torch.zeros(*shape, dtype=torch.bfloat16)).shape)
    assert costs(body, "all") == want


@pytest.mark.parametrize("body", list(CASES))
def test_matmul_flops_parameters_and_kept_bytes_against_torch(body, twins):
    _, shape, _ = CASES[body]
    module, fn = twins[body]
    params = list(module.parameters()) if module is not None else []
    got = costs(body, "matmul")
    assert got["params"] == sum(p.numel() for p in params)
    fwd, bwd, saved = _measure(fn, torch.randn(*shape, dtype=torch.bfloat16, requires_grad=True), params=params)
    assert (got["flops_forward"], got["flops_backward_input"] + got["flops_backward_weight"]) == (fwd, bwd) == (0, 0)
    assert got["activation_bytes"] + BUFFERS.get(body, 0) == saved


@pytest.mark.parametrize("body, fragment", [
    ("channels_last(t)", "channels_last needs [B, C, H, W], got [b, 16, c]"),
    ("channels_first(t)", "channels_first needs [B, H, W, C], got [b, 16, c]"),
    ("spatial_mean(spatial_mean(img))", "spatial_mean needs [B, C, H, W] (or tokens [B, N, C]), got [b, c]"),
    ("grn(t)", "grn needs [B, H, W, C], got [b, 16, c]"),
    ("batch_norm(t)", "batch_norm needs [B, C, H, W], got [b, 16, c]"),
    ("max_pool2d(t, 3)", "max_pool2d needs [B, C, H, W], got [b, 16, c]"),
    ("max_pool2d(img, 11, padding = 1)", "max_pool2d: kernel 11 is larger than the padded input 10"),
    ("avg_pool2d(img, 9, stride = 1)", "avg_pool2d: kernel 9 is larger than the padded input 8"),
    ("avg_pool2d(t, 2)", "avg_pool2d needs [B, C, H, W] (or tokens [B, N, C] with side), got [b, 16, c]"),
    ("avg_pool2d(t, 2, side = 5)", "avg_pool2d with side = 5 needs tokens [B, side², C], got [b, 16, c]"),
    ("max_pool2d(img, 3, stride = 0)", "argument 'stride' of max_pool2d must be a positive whole number, got 0"),
    ("windows(img, 4)", "windows needs [B, S, C], got [b, c, 8, 8]"),
    ("windows(t, 5)", "windows: 16 tokens do not split into 5 windows"),
    ("unwindows(img, 4)", "unwindows needs [B·n, S, C], got [b, c, 8, 8]"),
    ("unflatten_patches(img, 4)", "unflatten_patches needs tokens [B, side², C], got [b, c, 8, 8]"),
    ("unflatten_patches(t, 5)", "unflatten_patches: 16 tokens are not 5²"),
])
def test_refusals(body, fragment):
    with pytest.raises(CostgraphError) as e:
        model(body)
    assert fragment in str(e.value)
    assert "m.cg:6:" in str(e.value)      # located: the line of the return


def test_the_cli_refuses_with_exit_status_2_and_the_location(tmp_path, capsys):
    path = tmp_path / "bad.cg"
    path.write_text(HEAD + "  return max_pool2d(img, 11, padding = 1)\n}\n")
    assert main(["derive", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:6:10: error: max_pool2d: kernel 11 is larger than the padded input 10" in err
    assert "hint: a smaller kernel, or more padding" in err and "Traceback" not in err
