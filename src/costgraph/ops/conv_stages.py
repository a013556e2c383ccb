"""Operators of staged vision backbones (task k28conv12): the layout changes between a convolution's channels-first
``[B, C, H, W]`` and a Linear's channels-last ``[B, H, W, C]`` (``channels_last``, ``channels_first``: ConvNeXt's
``permute``, views), ``spatial_mean`` (a global average pool), ``grn`` (ConvNeXt V2's Global Response
Normalization), ``batch_norm`` and ``max_pool2d`` (ResNet's), ``windows`` and ``unwindows`` (Swin's window
partition and its reverse) and ``unflatten_patches`` (SegFormer's). PoolFormer's average pool (a stride and padding)
is ``ops.vision.avg_pool2d``.

FLOPs under ``matmul``: none (``torch.utils.flop_counter`` counts no ``permute``, ``mean``, ``linalg_vector_norm``,
``batch_norm``, pooling, ``mul`` or ``add``). Under ``all``: each operator's docstring.
"""
from __future__ import annotations

from ..engine.context import as_dim
from ..engine.graph import Flops
from .registry import op


def _rank4(c, what: str):
    x = c["x"]
    if len(x.shape) != 4:
        c.fail(f"{c.kind} needs {what}, got {x.shape_str()}")
    return x


@op("channels_last", "[B, C, H, W] → [B, H, W, C] (x.permute(0, 2, 3, 1), a view): a convolution's output "
    "for a Linear or a LayerNorm over the channels", x="tensor", layout="whole")
def channels_last(c):
    """``x.permute(0, 2, 3, 1)`` (ConvNeXt's layers, transformers 5.24 modeling_convnext.py
    ``ConvNextLayer.forward``): a view, no FLOPs, keeps nothing."""
    x = _rank4(c, "[B, C, H, W]")
    b, ch, hh, ww = x.shape
    return c.output((b, hh, ww, ch), view_of=x)


@op("channels_first", "[B, H, W, C] → [B, C, H, W] (x.permute(0, 3, 1, 2), a view): back to a "
    "convolution's layout", x="tensor", layout="whole")
def channels_first(c):
    """``x.permute(0, 3, 1, 2)``: a view, no FLOPs, keeps nothing (the first consumer that needs it
    contiguous copies it)."""
    x = _rank4(c, "[B, H, W, C]")
    b, hh, ww, ch = x.shape
    return c.output((b, ch, hh, ww), view_of=x)


@op("spatial_mean", "the mean over the spatial axes: [B, C, H, W] → [B, C] (x.mean([-2, -1]): ConvNeXt's "
    "global average pool); keepdim = true: → [B, C, 1, 1] (nn.AdaptiveAvgPool2d(1)); tokens [B, N, C] → [B, C]",
    x="tensor",
    keepdim=("bool", False), layout="whole")
def spatial_mean(c):
    """``x.mean([-2, -1])`` (transformers 5.24 modeling_convnext.py ``ConvNextModel.forward``), or with
    ``keepdim`` DINOv3 ConvNeXt's ``nn.AdaptiveAvgPool2d(1)`` (modeling_dinov3_convnext.py
    ``DINOv3ConvNextModel.forward``): 0 matrix FLOPs; under `all` one add per input element, and one per input
    element for the input gradient (``MeanBackward1`` spreads each output's gradient over H·W). Keeps nothing
    (the backward needs the shape only)."""
    x = c["x"]
    if len(x.shape) == 3:     # tokens [B, N, C] (Swin's pooler: AdaptiveAvgPool1d(1) over the tokens) → [B, C]
        y = c.output((x.shape[0], x.shape[2]), role=c.float_role(x))
        c.forward(Flops(other=x.numel))
        c.backward_input(Flops(other=x.numel))
        return y
    x = _rank4(c, "[B, C, H, W] (or tokens [B, N, C])")
    y = c.output((x.shape[0], x.shape[1], *((1, 1) if c["keepdim"] else ())), role=c.float_role(x))
    c.forward(Flops(other=x.numel))
    c.backward_input(Flops(other=x.numel))
    return y


@op("grn", "Global Response Normalization (ConvNeXt V2, Woo et al. 2023) of x [B, H, W, C]: "
    "γ·(x·N(x)) + β + x, N the per-channel L2 norm over H, W divided by its mean over the channels; γ, β [C]",
    x="tensor", layout="whole")
def grn(c):
    """``ConvNextV2GRN`` (transformers 5.24 modeling_convnextv2.py): ``weight`` and ``bias`` ``[1, 1, 1, C]``
    (2C parameters). 0 matrix FLOPs; under `all` 6 per element forward (the norm's square and add, ``x·N``, γ·,
    + β, + x) and as many for the input gradient (the convention of ``group_norm``), 3 per element for the
    weight gradients (γ: a multiply and an add, β: an add, as ``batch_norm``'s); the per-sample statistics (the
    norm, its mean over C, the divide: O(B·C)) left out. Keeps what autograd keeps of the eager forward: its input
    (``linalg_vector_norm``'s and ``x * N``'s) and the product ``x·N(x)`` (``weight * ...``'s), each [B, H, W, C];
    under the ``pytorch`` profile also the norm and N(x) [B, 1, 1, C] and the mean's denominator [B, 1, 1, 1]
    (``saved_tensors_hooks`` on torch 2.13 CPU)."""
    x = _rank4(c, "[B, H, W, C]")
    ch = x.shape[-1]
    y = c.output(x.shape, role=c.float_role(x))
    c.weight("weight", (ch,))
    c.weight("bias", (ch,))
    c.forward(Flops(other=6 * x.numel))
    c.backward_input(Flops(other=6 * x.numel))
    c.backward_weight(Flops(other=3 * x.numel))
    c.save(x, c.aux("product", x.shape, c.float_role(x)))
    if c.settings.profile == "pytorch":
        role, b = c.float_role(x), x.shape[0]
        c.save(c.aux("norm", (b, 1, 1, ch), role), c.aux("ratio", (b, 1, 1, ch), role),
               c.aux("denominator", (b, 1, 1, 1), role))
    return y


@op("batch_norm", "BatchNorm2d of x [B, C, H, W] (Ioffe & Szegedy 2015): per-channel statistics, γ and β [C] "
    "(the running mean and variance are buffers, not parameters)", x="tensor", layout="whole")
def batch_norm(c):
    """``nn.BatchNorm2d(C)`` (ResNet's ``ResNetConvLayer.normalization``, transformers 5.24 modeling_resnet.py):
    ``weight`` and ``bias`` ``[C]`` (2C parameters; ``running_mean``, ``running_var`` and ``num_batches_tracked``
    are buffers). 0 matrix FLOPs (``FlopCounterMode`` counts none); under `all` as ``group_norm``: 7 per element
    forward (normalise 5, γ 1, β 1), as many for the input gradient, 3 per element for γ's and β's gradients. Keeps
    its input; under the ``pytorch`` profile also the batch's mean and 1/σ [C] (``native_batch_norm``'s
    ``save_mean``, ``save_invstd``), as ``group_norm``'s statistics. The running mean and variance autograd also
    holds are buffers, not activations."""
    x = _rank4(c, "[B, C, H, W]")
    y = c.output(x.shape, role=c.float_role(x))
    c.weight("weight", (x.shape[1],))
    c.weight("bias", (x.shape[1],))
    c.forward(Flops(other=7 * x.numel))
    c.backward_input(Flops(other=7 * x.numel))
    c.backward_weight(Flops(other=3 * x.numel))
    c.save(x)
    if c.settings.profile == "pytorch":
        role = c.float_role(x)
        c.save(c.aux("mean", (x.shape[1],), role), c.aux("invstd", (x.shape[1],), role))
    return y


@op("max_pool2d", "max pooling over k×k windows (nn.MaxPool2d(kernel, stride, padding)): x [B, C, H, W] → "
    "[B, C, H', W'], each side ⌊(n + 2·padding − k)/stride⌋ + 1", x="tensor", kernel="dim", stride=("dim", 1),
    padding=("dim", 0), layout="whole")
def max_pool2d(c):
    """``nn.MaxPool2d(kernel_size=k, stride, padding)`` (ResNet's stem: 3, 2, 1; transformers 5.24
    modeling_resnet.py ``ResNetEmbeddings.pooler``): 0 matrix FLOPs (``FlopCounterMode`` counts none); under
    `all` k² − 1 comparisons per output element; the input gradient scatters one value per output element. Keeps
    its input and the int64 argmax indices, one per output element (``MaxPool2DWithIndicesBackward0`` keeps
    ``self`` and ``result1``)."""
    from .vision import _out_size

    x = _rank4(c, "[B, C, H, W]")
    k, stride, pad = c["kernel"], c["stride"], c["padding"]
    b, ch, hh, ww = x.shape
    y = c.output((b, ch, _out_size(c, hh, k, stride, pad), _out_size(c, ww, k, stride, pad)), role=c.float_role(x))
    c.forward(Flops(other=(k * k - 1) * y.numel))
    c.backward_input(Flops(other=y.numel))
    c.save(x, c.aux("indices", y.shape, "index"))
    return y


@op("windows", "[B, S, C] → [B·n, S/n, C]: the tokens cut into n windows of S/n tokens, each a sequence of its own "
    "(Swin's window_partition; a copy, no FLOPs)", x="tensor", n="dim", layout="whole")
def windows(c):
    """transformers 5.24 modeling_swin.py ``window_partition`` (``view``, ``transpose(2, 3).contiguous()``, ``view``)
    of the ``[B, R, R, C]`` map into ``n = (R/W)²`` windows of ``W²`` tokens; the cyclic shift before it
    (``torch.roll``) and the window's attention mask cost no matrix FLOPs. Here the windows are cut as consecutive
    runs of tokens: the same shapes and counts. 0 FLOPs, keeps nothing. S must be a multiple of n (checked when
    values are given)."""
    x, n = c["x"], c["n"]
    if len(x.shape) != 3:
        c.fail(f"windows needs [B, S, C], got {x.shape_str()}")
    b, seq, ch = x.shape
    part = seq / as_dim(n)
    if part.is_number and not part.is_integer:
        c.fail(f"windows: {seq} tokens do not split into {n} windows")
    return c.output((b * n, part, ch), role=c.float_role(x))


@op("unwindows", "[B·n, S, C] → [B, n·S, C]: n windows of S tokens back into one sequence (Swin's window_reverse; "
    "a copy, no FLOPs)", x="tensor", n="dim", layout="whole")
def unwindows(c):
    """transformers 5.24 modeling_swin.py ``window_reverse`` (and the reverse roll): 0 FLOPs, keeps nothing."""
    x, n = c["x"], c["n"]
    if len(x.shape) != 3:
        c.fail(f"unwindows needs [B·n, S, C], got {x.shape_str()}")
    bn, seq, ch = x.shape
    return c.output((bn / as_dim(n), seq * n, ch), role=c.float_role(x))


@op("unflatten_patches", "[B, side², C] → [B, C, side, side]: tokens back into a map for a convolution "
    "(x.transpose(1, 2).reshape(B, C, side, side); a copy, no FLOPs)", x="tensor", side="dim", layout="whole")
def unflatten_patches(c):
    """SegFormer's ``SegformerSequenceReduction`` and ``SegformerDepthWiseConv`` (transformers 5.24
    modeling_segformer.py: ``hidden_states.transpose(1, 2).view(batch_size, num_channels, height, width)``): 0 FLOPs,
    keeps nothing. The tokens must be side² (checked when values are given)."""
    x, side = c["x"], as_dim(c["side"])
    if len(x.shape) != 3:
        c.fail(f"unflatten_patches needs tokens [B, side², C], got {x.shape_str()}")
    b, n, ch = x.shape
    if not c.same(n, side * side):
        c.fail(f"unflatten_patches: {n} tokens are not {side}²", hint="the side of the map the tokens came from")
    return c.output((b, ch, side, side), role=c.float_role(x))
