"""Operators of vision, speech and diffusion Transformers: convolutions
(``conv2d``, ``conv3d``, ``dense_conv1d``), ``flatten_patches``, ``merge_tokens``, ``split_seq``/``merge_seq``,
``concat_seq`` (class and image tokens), ``group_norm``, nearest ``upsample``, ``avg_pool2d``, ``avg_pool1d``,
adaptive-LayerNorm ``modulate`` / ``gate`` (DiT's adaLN) and ``layer_scale``
(DINOv2).

Tensors use PyTorch's layouts: a convolution reads ``[B, C_in, *spatial]``
(channels first) and writes ``[B, C_out, *out]``; ``flatten_patches`` turns
that into the Transformer's ``[B, N, C]`` tokens.

Convolution FLOPs, under ``matmul`` as ``torch.utils.flop_counter`` counts
``aten.convolution`` (``conv_flop_count``): ``2·B·C_out·(C_in/groups)·Πk·Πout``
forward (2 per multiply-add of each output element), as much for the input
gradient and as much for the weight gradient; the bias add (``B·C_out·Πout``)
and its gradient under `all`. An input of the model (``pixel_values``, an
audio spectrogram) needs no gradient: PyTorch's ``convolution_backward`` then
skips the input gradient (``output_mask[0]`` false), and so does the rule.
``FlopCounterMode`` counts a grouped convolution's weight gradient as if
ungrouped (``groups`` times ours; see ``conv1d`` in :mod:`costgraph.ops.ssm`).
Parameters: weight ``[C_out, C_in/groups, *k]`` (+ bias ``[C_out]``). Keeps its
input for the weight gradient (autograd's ``ConvolutionBackward0`` keeps input
and weight).

Output size per spatial axis (PyTorch's ``Conv2d`` with dilation 1):
``⌊(n + 2·padding − k) / stride⌋ + 1`` on numbers and with a numeric stride
(wav2vec2's feature encoder: ``⌊(L − 10)/5⌋ + 1``, then ``⌊(⌊(L − 10)/5⌋ − 2)/2⌋ + 1``,
exact for every ``L``, as PyTorch rounds); stride 1 takes no floor (``n + 2·padding − k + 1``: a whole
side stays whole, ConvNeXt's 7×7 depthwise keeps ``image/p``). A symbolic stride (a patch
embedding's ``kernel = stride = p``) is taken to divide (``(image − p)/p + 1 =
image/p``), and values for which it does not are refused when evaluated.
"""

from __future__ import annotations

import sympy

from ..engine.context import as_dim
from ..engine.graph import Flops, numel
from .elementwise import PER_ELEMENT
from .registry import op


def _out_size(c, n, k, stride, pad, pad_end=None):
    """One spatial axis after a convolution (or pooling) of kernel ``k``: ``pad`` zeros before the axis and
    ``pad_end`` after it (``pad`` where None: PyTorch's symmetric ``padding``)."""
    n, k, stride, pad = (as_dim(v) for v in (n, k, stride, pad))
    pad_end = pad if pad_end is None else as_dim(pad_end)
    if stride.is_number and not (stride.is_integer and stride >= 1):
        c.fail(f"{c.kind}: stride {stride} must be a whole number ≥ 1")
    for what, v in (("padding", pad), ("padding_end", pad_end)):
        if v.is_number and v < 0:
            c.fail(f"{c.kind}: {what} {v} is negative")
    span = n + pad + pad_end - k
    if span.is_number and span < 0:
        c.fail(f"{c.kind}: kernel {k} is larger than the padded input {n + pad + pad_end}",
               hint="a smaller kernel, or more padding")
    if stride == 1:     # a whole side: no floor to take (ConvNeXt's depthwise 7×7 keeps a symbolic side as it is)
        return span + 1
    if span.is_number and stride.is_number:
        return sympy.floor(span / stride) + 1
    if stride.is_number:   # PyTorch's floor: floor((2·e − 1)/2) = e − 1 on a whole e (Whisper's stem);
        return sympy.floor(span / stride) + 1   # floor((L − 10)/5) + 1 stays (wav2vec2's feature encoder)
    return sympy.cancel(span / stride + 1)


def _conv(c, rank: int, kernels: tuple, strides: tuple):
    x, out, groups = c["x"], c["out"], c["groups"]
    if len(x.shape) != rank + 2:
        axes = ", ".join(["B", "C"] + [f"n{i + 1}" for i in range(rank)])
        c.fail(f"{c.kind} needs [{axes}] (channels first, as PyTorch), got {x.shape_str()}")
    batch, cin, *spatial = x.shape
    pad, pad_end = as_dim(c["padding"]), c.args.get("padding_end")
    outs = [_out_size(c, n, k, s, pad, pad_end) for n, k, s in zip(spatial, kernels, strides)]
    per_group = cin / as_dim(groups)
    if per_group.is_number and not per_group.is_integer:
        c.fail(f"{c.kind}: {cin} input channels do not split into {groups} groups")
    c.attr("channels_per_group", per_group)   # checked a whole number when values are given
    y = c.output((batch, out, *outs), role=c.float_role(x))
    c.weight("weight", (out, per_group, *kernels))
    points = batch * out * numel(tuple(outs))
    mm = 2 * points * per_group * numel(tuple(kernels))
    bias = points if c["bias"] else 0
    if c["bias"]:
        c.weight("bias", (out,))
    c.forward(Flops(matmul=mm, other=bias))
    if c.b.cg.nodes.get(x.producer, {}).get("kind") != "input":   # an input of the model needs no gradient
        c.backward_input(Flops(matmul=mm))
    c.backward_weight(Flops(matmul=mm, other=bias))
    c.save(x)
    return y


@op("conv2d", "2-D convolution (PyTorch Conv2d): x [B, C_in, H, W] → [B, out, H', W'], a k×k kernel, "
    "stride, zero padding (padding_end: the zeros after each axis, where they differ from those before); "
    "a ViT patch embedding is kernel = stride = p",
    x="tensor", out="dim", kernel="dim", stride=("dim", 1), padding=("dim", 0), bias=("bool", True),
    groups=("dim", 1), padding_end=("dim", None), layout="whole")
def conv2d(c):
    """``nn.Conv2d(C_in, out, kernel, stride, padding, groups=groups, bias=bias)``
    with a square kernel. See the module's notes for FLOPs and what is kept. ``padding_end``: ``F.pad(x, (padding,
    padding_end, padding, padding_end))`` before a Conv2d of no padding (a causal convolution's: transformers 5.24
    modeling_nemotron_asr_streaming.py ``NemotronAsrStreamingEncoderCausalConv2D.forward``, ``(k − 1, stride − 1)``
    on each axis): each side ``⌊(n + padding + padding_end − k)/stride⌋ + 1``; the pad's copy is not counted."""
    k, s = c["kernel"], c["stride"]
    return _conv(c, 2, (k, k), (s, s))


@op("conv3d", "3-D convolution (PyTorch Conv3d): x [B, C_in, T, H, W] → [B, out, T', H', W']; "
    "kernel_t/stride_t on the first axis (default: kernel, stride); Qwen2-VL's patches: kernel_t = 2",
    x="tensor", out="dim", kernel="dim", stride=("dim", 1), padding=("dim", 0), bias=("bool", True),
    groups=("dim", 1), kernel_t=("dim", None), stride_t=("dim", None), layout="whole")
def conv3d(c):
    """``nn.Conv3d(C_in, out, (kernel_t, kernel, kernel), (stride_t, stride, stride), padding)``."""
    k, s = c["kernel"], c["stride"]
    kt = k if c["kernel_t"] is None else c["kernel_t"]
    st = s if c["stride_t"] is None else c["stride_t"]
    return _conv(c, 3, (kt, k, k), (st, s, s))


@op("dense_conv1d", "1-D convolution over all channels (PyTorch Conv1d): x [B, C_in, L] → [B, out, L'], "
    "stride, zero padding (Whisper's stem); conv1d is Mamba's depthwise causal one",
    x="tensor", out="dim", kernel="dim", stride=("dim", 1), padding=("dim", 0), bias=("bool", True),
    groups=("dim", 1), layout="whole")
def dense_conv1d(c):
    """``nn.Conv1d(C_in, out, kernel, stride, padding, groups=groups, bias=bias)``."""
    return _conv(c, 1, (c["kernel"],), (c["stride"],))


@op("flatten_patches", "[B, C, *spatial] → [B, Πspatial, C]: a convolution's output as tokens "
    "(flatten(2).transpose(1, 2), a view)", x="tensor", layout="whole")
def flatten_patches(c):
    """``x.flatten(2).transpose(1, 2)``: a view (no FLOPs, keeps nothing); the
    first consumer that needs it contiguous copies it."""
    x = c["x"]
    if len(x.shape) < 3:
        c.fail(f"flatten_patches needs [B, C, *spatial], got {x.shape_str()}")
    batch, ch, *spatial = x.shape
    return c.output((batch, numel(tuple(spatial)), ch), view_of=x)


@op("merge_tokens", "[B, S, H] → [B, S/g, g·H]: g consecutive tokens side by side (a view of a "
    "contiguous tensor; Qwen2-VL's patch merger, g = spatial_merge_size²)", x="tensor", group="dim",
    layout="whole")
def merge_tokens(c):
    """``x.view(-1, g·H)`` of a contiguous ``[B·S, H]`` (Qwen2-VL's ``PatchMerger``, whose
    processor orders the patches so that each merge window's g = m² patches are consecutive):
    a view (no FLOPs, keeps nothing). S must be a multiple of g (checked when values are given)."""
    x, g = c["x"], c["group"]
    if len(x.shape) != 3:
        c.fail(f"merge_tokens needs [B, S, H], got {x.shape_str()}")
    batch, seq, hidden = x.shape
    groups = seq / as_dim(g)
    if groups.is_number and not groups.is_integer:
        c.fail(f"merge_tokens: {seq} tokens do not split into groups of {g}")
    return c.output((batch, groups, hidden * g), view_of=x)


@op("split_seq", "[..., S, H] → [..., n, S/n, H]: the sequence cut into n equal consecutive parts "
    "(a view; Qwen2.5-VL's attention windows)", x="tensor", n="dim", layout="whole")
def split_seq(c):
    """``x.view(..., n, S/n, H)``: a view (no FLOPs, keeps nothing). S must be a multiple of n
    (checked when values are given)."""
    x, n = c["x"], c["n"]
    if len(x.shape) < 2:
        c.fail(f"split_seq needs [..., S, H], got {x.shape_str()}")
    *lead, seq, hidden = x.shape
    part = seq / as_dim(n)
    if part.is_number and not part.is_integer:
        c.fail(f"split_seq: {seq} tokens do not split into {n} equal parts")
    return c.output((*lead, n, part, hidden), view_of=x)


@op("merge_seq", "[..., n, S, H] → [..., n·S, H]: parts of the sequence joined back (a view of a contiguous "
    "tensor; undoes split_seq)", x="tensor", layout="whole")
def merge_seq(c):
    """``x.view(..., n·S, H)``: a view (no FLOPs, keeps nothing)."""
    x = c["x"]
    if len(x.shape) < 3:
        c.fail(f"merge_seq needs [..., n, S, H], got {x.shape_str()}")
    *lead, n, seq, hidden = x.shape
    return c.output((*lead, n * seq, hidden), view_of=x)


@op("concat_seq", "join along the sequence axis: x [..., S1, d], y [..., S2, d] → [..., S1 + S2, d], "
    "broadcasting the leading axes (a class token [1, 1, d] over the batch; copy)",
    x="tensor", y="tensor", layout="whole")
def concat_seq(c):
    """``torch.cat((cls.expand(B, -1, -1), x), dim=1)`` (ViT's class token,
    image tokens before text): a new storage, 0 FLOPs, keeps nothing (the
    backward of ``cat`` slices the gradient)."""
    x, y = c["x"], c["y"]
    if len(x.shape) != len(y.shape) or len(x.shape) < 2:
        c.fail(f"concat_seq needs two tensors of one rank ≥ 2, got {x.shape_str()} and {y.shape_str()}")
    if not c.same(x.shape[-1], y.shape[-1]):
        c.fail(f"concat_seq: last dimensions differ: {x.shape_str()} and {y.shape_str()}")
    lead = []
    for p, q in zip(x.shape[:-2], y.shape[:-2]):
        if c.same(p, q) or q == 1:
            lead.append(p)
        elif p == 1:
            lead.append(q)
        else:
            c.fail(f"concat_seq: leading dimensions differ: {x.shape_str()} and {y.shape_str()}")
    return c.output((*lead, x.shape[-2] + y.shape[-2], x.shape[-1]), role=c.float_role(x, y))


@op("group_norm", "GroupNorm (Wu & He 2018) of x [B, C, *spatial] over `groups` groups of channels; "
    "γ and β per channel (none if weight = false)",
    x="tensor", groups="dim", weight=("bool", True), layout="whole")
def group_norm(c):
    """``nn.GroupNorm(groups, C, affine=weight)``: statistics per sample and
    group, γ, β ``[C]`` (``2C`` parameters). FLOPs (`all`) per element as
    LayerNorm (normalise 5, γ 1, β 1), as much again for the input gradient;
    the weight gradient 3 per element. Keeps its input and, in the
    ``pytorch`` profile, the mean and 1/σ ``[B, groups]``
    (``NativeGroupNormBackward0``) in the input's dtype: ATen's
    ``native_group_norm`` makes them in ``param_scalar_type`` (fp32 only for
    a mixed bf16 input with fp32 γ), unlike LayerNorm's fp32 statistics."""
    x, g = c["x"], c["groups"]
    if len(x.shape) < 2:
        c.fail(f"group_norm needs [B, C, ...], got {x.shape_str()}")
    batch, ch = x.shape[0], x.shape[1]
    per = ch / as_dim(g)
    if per.is_number and not per.is_integer:
        c.fail(f"group_norm: {ch} channels do not split into {g} groups")
    c.attr("channels_per_group", per)
    y = c.output(x.shape, role=c.float_role(x))
    affine = c["weight"]
    if affine:
        c.weight("weight", (ch,))
        c.weight("bias", (ch,))
    n = x.numel
    each = PER_ELEMENT["layernorm"] + (PER_ELEMENT["scale"] + PER_ELEMENT["add"] if affine else 0)
    c.forward(Flops(other=each * n))
    c.backward_input(Flops(other=each * n))
    if affine:
        c.backward_weight(Flops(other=3 * n))
    c.save(x)
    if c.settings.profile == "pytorch":
        role = c.float_role(x)
        c.save(c.aux("mean", (batch, g), role), c.aux("rstd", (batch, g), role))
    return y


@op("upsample", "nearest-neighbour upsampling of x [B, C, *spatial] by a whole factor on each spatial axis "
    "(F.interpolate(mode='nearest'); copy)", x="tensor", factor="dim", layout="whole")
def upsample(c):
    """``F.interpolate(x, scale_factor=factor, mode="nearest")``: a copy,
    0 FLOPs forward (``FlopCounterMode`` counts none); the backward sums each
    output block into its source: ``factor^d − 1`` adds per input element are
    ``(out − in)`` adds (`all`). Keeps nothing."""
    x, f = c["x"], c["factor"]
    if len(x.shape) < 3:
        c.fail(f"upsample needs [B, C, *spatial], got {x.shape_str()}")
    batch, ch, *spatial = x.shape
    y = c.output((batch, ch, *(n * f for n in spatial)), role=c.float_role(x))
    c.backward_input(Flops(other=y.numel - x.numel))
    return y


@op("avg_pool2d", "average pooling over k×k windows (nn.AvgPool2d(k, stride, padding, count_include_pad=False)), "
    "stride k and no padding unless given: x [B, C, H, W] → [B, C, H', W'], each side ⌊(n + 2·padding − k)/stride⌋ "
    "+ 1; with side, tokens [B, side², C] read as a side×side grid → [B, side'², C] (Gemma 3)",
    x="tensor", kernel="dim", stride=("dim", None), padding=("dim", 0), side=("dim", None), layout="whole")
def avg_pool2d(c):
    """``nn.AvgPool2d(kernel_size=k, stride=k)`` on ``[B, C, H, W]`` (Gemma 3's projector), or with ``stride``
    and ``padding`` PoolFormer's token mixer (transformers 5.24 modeling_poolformer.py ``PoolFormerPooling``:
    ``nn.AvgPool2d(pool_size, stride=1, padding=pool_size // 2, count_include_pad=False)``; the padding left out
    of the mean changes the values, not the counts). 0 matrix FLOPs (``FlopCounterMode`` counts none). Under
    `all`: k² − 1 adds and a divide per output element, and as many for the input gradient (each output's
    gradient divided once and added into the k² inputs of its window; torch 2.13
    aten/src/ATen/native/cpu/AvgPoolKernel.cpp ``cpu_avg_pool``, ``cpu_avg_pool_backward``; border windows
    counted whole); when the windows tile the input (stride k, no padding) one per input element, the same
    count where k divides the side. Keeps its input (``AvgPool2DBackward0`` saves ``self``). Output size as a
    convolution's: ``⌊(H + 2·padding − k)/stride⌋ + 1``, ``H/k`` on a symbolic H with stride k.

    With ``side``: tokens ``[B, N, C]``, ``N = side²`` (Gemma3MultiModalProjector:
    ``x.transpose(1, 2).reshape(B, C, side, side).contiguous()``, a copy of the
    tokens, which the pool keeps; then ``flatten(2).transpose(1, 2)``, a view)
    → ``[B, side'², C]``.

    Errors: a wrong rank, tokens that are not side², a kernel larger than the padded input, a stride < 1."""
    x, k, side, pad = c["x"], c["kernel"], c["side"], c["padding"]
    stride = k if c["stride"] is None else c["stride"]
    if side is None:
        if len(x.shape) != 4:
            c.fail(f"avg_pool2d needs [B, C, H, W] (or tokens [B, N, C] with side), got {x.shape_str()}")
        batch, ch, hh, ww = x.shape
        y = c.output((batch, ch, _out_size(c, hh, k, stride, pad), _out_size(c, ww, k, stride, pad)),
                     role=c.float_role(x))
    else:
        if len(x.shape) != 3 or not c.same(x.shape[1], as_dim(side) * as_dim(side)):
            c.fail(f"avg_pool2d with side = {side} needs tokens [B, side², C], got {x.shape_str()}")
        batch, _, ch = x.shape
        m = _out_size(c, side, k, stride, pad)
        y = c.output((batch, m * m, ch), role=c.float_role(x))
    tiles = as_dim(stride) == as_dim(k) and as_dim(pad) == 0
    each = x.numel if tiles else as_dim(k) * as_dim(k) * y.numel
    c.forward(Flops(other=each))
    c.backward_input(Flops(other=each))
    c.save(x)
    return y


@op("avg_pool1d", "average pooling over blocks of k positions, stride k (nn.AvgPool1d(k, k)): x [B, C, L] → "
    "[B, C, ⌊(L − k)/k⌋ + 1] (Qwen2-Audio's encoder output, SEW's squeeze)", x="tensor", kernel="dim", layout="whole")
def avg_pool1d(c):
    """``nn.AvgPool1d(kernel_size=k, stride=k)`` on ``[B, C, L]`` (transformers 5.24 modeling_qwen2_audio.py
    ``Qwen2AudioEncoder.avg_pooler``, on the layers' output permuted to ``[B, h, L]``; modeling_sew.py
    ``SEWEncoder.pool``: ``nn.AvgPool1d(squeeze_factor, squeeze_factor)``): as :func:`avg_pool2d` on one axis: 0
    matrix FLOPs (``FlopCounterMode`` counts none); under `all` one add (or the divide) per input element, as much for
    the input gradient. Keeps its input. Output length as a convolution's (no padding): ``⌊(L − k)/k⌋ + 1``, PyTorch's
    floor (an odd L drops its last position)."""
    x, k = c["x"], c["kernel"]
    if len(x.shape) != 3:
        c.fail(f"avg_pool1d needs [B, C, L], got {x.shape_str()}")
    batch, ch, n = x.shape
    as_k = as_dim(k)
    length = sympy.floor((as_dim(n) - as_k) / as_k) + 1 if as_k.is_number else _out_size(c, n, k, k, 0)
    y = c.output((batch, ch, length), role=c.float_role(x))
    c.forward(Flops(other=x.numel))
    c.backward_input(Flops(other=x.numel))
    c.save(x)
    return y


def _per_sample(c, x, v, what: str):
    if len(x.shape) != 3 or len(v.shape) != 2:
        c.fail(f"{c.kind} needs x [B, S, H] and {what} [B, H], got {x.shape_str()} and {v.shape_str()}")
    if not (c.same(x.shape[0], v.shape[0]) or v.shape[0] == 1) or not c.same(x.shape[-1], v.shape[-1]):
        c.fail(f"{c.kind}: {what} {v.shape_str()} does not match x {x.shape_str()} as [B, H]")


@op("modulate", "adaptive LayerNorm modulation (DiT, Peebles & Xie 2023): x·(1 + scale) + shift, "
    "x [B, S, H], shift and scale [B, H] per sample (broadcast over S)",
    x="tensor", shift="tensor", scale="tensor", layout="whole")
def modulate(c):
    """``x * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)`` (DiT's
    ``modulate``). 3 FLOPs an element of ``x`` under `all` (``1 + scale`` on
    ``[B, H]`` counted too); input gradients: ``dx = dy·(1 + scale)`` and
    ``dscale = Σ_S dy·x`` (2 per element), ``dshift = Σ_S dy`` (1). Keeps
    ``x`` and the ``[B, 1, H]`` tensor ``1 + scale`` (``MulBackward0``)."""
    x, shift, scale = c["x"], c["shift"], c["scale"]
    _per_sample(c, x, shift, "shift")
    _per_sample(c, x, scale, "scale")
    y = c.output(x.shape, role=c.float_role(x, shift, scale))
    n = x.numel
    c.forward(Flops(other=2 * n + scale.numel))
    c.backward_input(Flops(other=3 * n))
    c.save(x, c.aux("one_plus_scale", (scale.shape[0], 1, scale.shape[1]), c.float_role(scale)))
    return y


@op("gate", "adaLN-Zero's gate (DiT): g·x, x [B, S, H], g [B, H] per sample (broadcast over S)",
    x="tensor", g="tensor", layout="whole")
def gate(c):
    """``gate.unsqueeze(1) * x``: 1 FLOP an element (`all`); the input
    gradients ``dx = dy·g`` and ``dg = Σ_S dy·x``, 2 per element. Keeps both
    operands (``MulBackward0``; the unsqueezed gate is a view of ``g``)."""
    x, g = c["x"], c["g"]
    _per_sample(c, x, g, "g")
    y = c.output(x.shape, role=c.float_role(x, g))
    c.forward(Flops(other=x.numel))
    c.backward_input(Flops(other=2 * x.numel))
    c.save(x, g)
    return y


@op("layer_scale", "LayerScale (Touvron et al. 2021; DINOv2): x·λ, a learned λ [H] per channel",
    x="tensor", layout=("per_channel", "x"))
def layer_scale(c):
    """``x * lambda1`` (Hugging Face's ``Dinov2LayerScale``): the parameter
    ``lambda1`` ``[H]``. 1 FLOP an element (`all`); the input gradient 1, the
    weight gradient 2 (multiply and sum over the tokens). Keeps ``x`` (the
    product's other operand is the parameter, not an activation)."""
    x = c["x"]
    if not x.shape:
        c.fail("layer_scale needs a tensor with at least one dimension")
    y = c.output(x.shape, role=c.float_role(x))
    c.weight("lambda1", (x.shape[-1],))
    c.forward(Flops(other=x.numel))
    c.backward_input(Flops(other=x.numel))
    c.backward_weight(Flops(other=2 * x.numel))
    c.save(x)
    return y


# ------------------------------------------------- diffusion Transformers (DiT, MMDiT)


@op("sinusoidal", "sinusoidal embedding of one number per sample (a diffusion timestep): t [B] → [B, dim] "
    "in fp32, the sine and cosine of t·ω_k at dim/2 frequencies; no parameters",
    t="tensor", dim="dim", layout="whole", roles="timestep")
def sinusoidal(c):
    """diffusers' ``get_timestep_embedding(t, dim)`` (``Timesteps``; DiT, Peebles & Xie 2023,
    §3.2; the frequencies of Vaswani et al. 2017): ``t[:, None].float() · ω`` with ``ω_k =
    exp(−ln(10⁴)·k/(dim/2 − shift))``, scaled, then ``cat(sin, cos)``. An fp32 ``[B, dim]``
    result (the model casts it to the compute dtype before its MLP). No parameters, no matrix
    product; under `all` 2 FLOPs an output element (the product t·ω and its scaling, dim/2 each,
    and one sine or cosine per element); the ``[dim/2]`` frequencies, made once, are not counted.
    No gradient reaches ``t`` (an input); keeps nothing."""
    t, dim = c["t"], as_dim(c["dim"])
    if len(t.shape) != 1:
        c.fail(f"sinusoidal needs one number per sample, t [B], got {t.shape_str()}")
    if dim.is_number and (not dim.is_integer or dim % 2):
        c.fail(f"sinusoidal: dim {dim} must be even (a sine and a cosine per frequency)")
    y = c.output((t.shape[0], dim), role="fp32")
    c.forward(Flops(other=2 * t.shape[0] * dim))
    return y


@op("slice_seq", "the first or next `size` positions of the sequence axis: x [..., S, d] → [..., size, d] "
    "(a view; MMDiT splits its joint attention output back into image and text tokens)",
    x="tensor", size="dim", layout="whole")
def slice_seq(c):
    """``x[:, :n]`` then ``x[:, n:]`` (SD3's ``JointAttnProcessor2_0`` after attending over the
    image and text tokens together): a view, no FLOPs, keeps nothing. Successive calls on one
    tensor take successive runs of positions, as ``slice`` does on the last axis."""
    x = c["x"]
    if len(x.shape) < 2:
        c.fail(f"slice_seq needs [..., S, d], got {x.shape_str()}")
    c.at_most(c["size"], x.shape[-2], "takes")
    return c.output((*x.shape[:-2], c["size"], x.shape[-1]), view_of=x)
