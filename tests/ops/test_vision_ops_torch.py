"""The vision operators (issue 19) against PyTorch on CPU: parameters equal to
``sum(p.numel())`` of the ``torch.nn`` module, forward and backward FLOPs equal
to ``torch.utils.flop_counter.FlopCounterMode`` (matmul convention: it counts
``aten.convolution`` and ``convolution_backward`` by ``conv_flop_count``,
2 per multiply-add; torch 2.13 ``torch/utils/flop_counter.py``), and the
bytes of the storages autograd keeps (``saved_tensors_hooks``) equal to the
``pytorch`` profile's activation bytes. Skipped without the torch extra."""

from __future__ import annotations

import pytest

from test_new_ops_torch import _measure
from test_vision_ops import B, C, O, R, S, H, costs as all_costs, model, SIZES  # noqa: F401

torch = pytest.importorskip("torch")
F = torch.nn.functional


def costs(body):
    return all_costs(body, convention="matmul")


def _agree(body, module, fn, *inputs):
    want = costs(body)
    params = list(module.parameters()) if module is not None else []
    assert sum(p.numel() for p in params) == want["params"]
    fwd, bwd, saved = _measure(fn, *inputs, params=params)
    assert (fwd, bwd, saved) == (want["flops_forward"], want["flops_backward_input"] + want["flops_backward_weight"],
                                 want["activation_bytes"])
    return fwd, bwd


def _t(*shape, grad=True):
    return torch.randn(*shape, dtype=torch.bfloat16, requires_grad=grad)


def test_conv2d_patch_embedding_on_an_input_without_gradient():
    conv = torch.nn.Conv2d(C, O, 2, stride=2, dtype=torch.bfloat16)
    fwd, bwd = _agree("return conv2d(img, o, kernel = 2, stride = 2)", conv, conv, _t(B, C, R, R, grad=False))
    assert (fwd, bwd) == (3072, 3072)   # pixel_values need no gradient: the weight gradient only


@pytest.mark.parametrize("body, kw", [
    ("return conv2d(gelu(img), o, kernel = 3, padding = 1)", dict(kernel_size=3, padding=1)),
    ("return conv2d(gelu(img), o, kernel = 4, stride = 2, bias = false)", dict(kernel_size=4, stride=2, bias=False)),
])
def test_conv2d_with_stride_and_padding(body, kw):
    conv = torch.nn.Conv2d(C, O, dtype=torch.bfloat16, **kw)
    # torch's gelu is the erf form; its FLOPs are not counted (matmul convention) and it keeps its input, as ours
    fwd, bwd = _agree(body, conv, lambda x: conv(F.gelu(x)), _t(B, C, R, R))
    assert bwd == 2 * fwd   # the input gradient and the weight gradient, each as the forward


def test_conv3d_with_a_temporal_kernel():
    conv = torch.nn.Conv3d(C, O, (4, 2, 2), stride=(4, 2, 2), dtype=torch.bfloat16)
    _agree("return conv3d(gelu(vol), o, kernel = 2, stride = 2, kernel_t = 4, stride_t = 4)", conv,
           lambda x: conv(F.gelu(x)), _t(B, C, R, R, R))


def test_dense_conv1d_with_stride_and_padding():
    conv = torch.nn.Conv1d(C, O, 4, stride=2, padding=1, dtype=torch.bfloat16)
    _agree("return dense_conv1d(gelu(sig), o, kernel = 4, padding = 1, stride = 2)", conv,
           lambda x: conv(F.gelu(x)), _t(B, C, R))


def test_group_norm_parameters_and_kept_tensors():
    """ATen's native_group_norm keeps input, γ, mean and 1/σ, the statistics in the input's dtype."""
    gn = torch.nn.GroupNorm(C, C, dtype=torch.bfloat16)
    _agree("return group_norm(img, c)", gn, gn, _t(B, C, R, R))


def test_concat_seq_class_token_and_flatten_patches():
    cls = torch.nn.Parameter(torch.randn(1, 1, H, dtype=torch.bfloat16))
    holder = torch.nn.Module()
    holder.cls = cls
    _agree("param cls[1, 1, h]\n  return concat_seq(cls, x)", holder,
           lambda x: torch.cat((cls.expand(B, -1, -1), x), dim=1), _t(B, S, H))
    _agree("return flatten_patches(img)", None, lambda x: x.flatten(2).transpose(1, 2), _t(B, C, R, R))


def test_upsample_nearest():
    _agree("return upsample(img, 2)", None, lambda x: F.interpolate(x, scale_factor=2, mode="nearest"),
           _t(B, C, R, R))


def test_adaln_modulate_and_gate():
    """DiT (facebookresearch/DiT models.py::modulate): x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)."""
    v = _t(B, H)
    _agree("return modulate(x, v, gelu(v))", None,
           lambda x: x * (1 + F.gelu(v).unsqueeze(1)) + v.unsqueeze(1), _t(B, S, H))
    _agree("return gate(x, v)", None, lambda x: _t(B, H).unsqueeze(1) * x, _t(B, S, H))


def test_layer_scale():
    """Dinov2LayerScale: hidden_state * lambda1; autograd keeps x and the parameter (not an activation)."""
    lam = torch.nn.Parameter(torch.ones(H, dtype=torch.bfloat16))
    holder = torch.nn.Module()
    holder.lambda1 = lam
    _agree("return layer_scale(gelu(x))", holder, lambda x: F.gelu(x) * lam, _t(B, S, H))
