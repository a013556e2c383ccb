"""A FastConformer speech encoder drafted from its traced modules (issue 28 item 2, task k28speech13): Parakeet's
(transformers 5.24 modeling_parakeet.py; Rekesh et al. 2023, "Fast Conformer", arXiv 2305.05084), and LASR's, its
variant (modeling_lasr.py: a Linear and two Conv1d for a stem, rotary attention, weighted residual sums, a depthwise
convolution of padding "same"; :func:`_conv1d_stem`, :func:`_sums`, the ``fc_conv_same`` block), and Nemotron ASR
Streaming's (modeling_nemotron_asr_streaming.py, task k28speech2: causal convolutions, padded ``(k − 1, stride − 1)`` in
their forward, in its stem, ``conv2d``'s ``padding_end``, and in its convolution module, a LayerNorm in place of the
BatchNorm; :func:`_causal_stem`, :func:`_causal_lines`, the ``fc_conv_causal`` block).

- The stem, ``ParakeetEncoderSubsamplingConv2D.forward``: ``input_features [b, frames, mel]`` as a one-channel image
  ``unsqueeze(1)`` ``[b, 1, frames, mel]``; ``layers``: ``Conv2d(1, C, k, stride, padding=(k − 1)//2)``, ReLU, then
  ``log2(subsampling_factor) − 1`` times a depthwise ``Conv2d(C, C, k, stride, padding, groups=C)``, a pointwise
  ``Conv2d(C, C, 1)`` and ReLU (biases on: nn.Conv2d's default); ``transpose(1, 2).reshape(b, frames', −1)``
  ``[b, frames', C·mel']`` (a copy: the ``merge_heads`` operator's ``[b, C, f, m] → [b, f, C·m]``), then ``linear``
  ``Linear(C·(mel // stride^layers), h)``. Each strided convolution makes PyTorch's ``⌊(n + 2·padding − k)/stride⌋ + 1``
  frames (the ``conv2d`` operator's): the frames the layers run, ``s``, follow from the input's ``T`` by as many dims.
  The kernel sizes and strides are the config's numbers (``subsampling_conv_kernel_size`` 3, ``subsampling_conv_stride``
  2 in every checkpoint: the architecture, as wav2vec2's feature encoder's are, :mod:`costgraph.drafting.audio`); the
  channels are a symbol (``C_s``, ``subsampling_conv_channels``).
- ``ParakeetEncoder.forward``: ``hidden_states * input_scale`` (√h where ``scale_input``, else 1.0: ``scale``, no
  matmul FLOPs); ``encode_positions`` (``ParakeetEncoderRelPositionalEncoding``: the sines and cosines of the offsets
  ``s − 1 … −(s − 1)``, ``[b, 2s − 1, h]``, no parameters and no matmul): the input ``pe`` every layer's attention reads.
- ``ParakeetEncoderBlock.forward``: ``x + 0.5·feed_forward1(norm_feed_forward1(x))``, ``+ self_attn(norm_self_att(x))``,
  ``+ conv(norm_conv(x))``, ``+ 0.5·feed_forward2(norm_feed_forward2(x))``, ``norm_out`` (LayerNorms with biases).
- ``ParakeetEncoderAttention``: q, k, v, o projections (``attention_bias``), ``relative_k_proj`` (h → h, no bias) of the
  positions, ``bias_u``, ``bias_v`` ``[a, h/a]``; ``matrix_bd = (q + bias_v) @ relative_kᵀ`` ``[b, a, s, 2s − 1]``,
  shifted (a pad and views) and cut to ``s`` columns, scaled, passed as the mask of the attention of ``q + bias_u``.
- ``ParakeetEncoderConvolutionModule``: ``pointwise_conv1`` (h → 2h, kernel 1), GLU over the channels, a depthwise
  ``Conv1d(h, h, conv_kernel_size, padding=(k − 1)//2, groups=h)``, ``BatchNorm1d(h)`` (eval: its running statistics;
  γ, β ``[h]``), the activation (``hidden_act``), ``pointwise_conv2`` (h → h); biases where ``convolution_bias``.
- ``ParakeetEncoderFeedForward``: ``linear2(act(linear1(x)))`` (h → i → h, ``attention_bias``).

Torch-free and writer-free (``sz``: a :class:`costgraph.drafting.writer.Sizer`): module facts and integers only.
"""

from __future__ import annotations

from .blocks import _linear, norm_call
from .facts import Module

#: the default input frames of a draft's config block: ten seconds at the feature extractor's 10 ms hop
#: (transformers 5.24 feature_extraction_parakeet.py ``ParakeetFeatureExtractor(hop_length=160, sampling_rate=16000)``)
FRAMES = 1000

#: the blocks this module's recognisers write
FAST_CONFORMER_BLOCKS = {"fc_feed_forward": """# FastConformer's feed-forward (transformers 5.24 modeling_parakeet.py ParakeetEncoderFeedForward): linear1
# H -> width, the activation (hidden_act), linear2 width -> H; biases where attention_bias.
block fc_feed_forward(x[B, S, H], width, bias = true) {
  return linear(silu(linear(x, width, bias = bias, name = linear1)), H, bias = bias, name = linear2)
}""", "fc_rel_attention": """# FastConformer's attention with relative positions (Transformer-XL's; transformers 5.24 modeling_parakeet.py
# ParakeetEncoderAttention): pe [B, 2S - 1, H], the sines and cosines of the offsets, projected by relative_k_proj (no
# bias) and multiplied with q + bias_v (matrix b + d, [B, heads, S, 2S - 1], shifted: a pad and views, then cut to S
# columns); q + bias_u against k (matrix a + c); b + d added to the scores (the attention's mask). kv_heads: the
# config's num_key_value_heads (its __post_init__ sets the heads; a config.json may set fewer: repeat_kv).
block fc_rel_attention(x[B, S, H], pe[B, P, H], heads, kv_heads, bias = true) {
  q = split_heads(linear(x, H, bias = bias, name = q_proj), heads)
  k = repeat_kv(split_heads(linear(x, kv_heads * (H / heads), bias = bias, name = k_proj), kv_heads), heads / kv_heads)
  v = repeat_kv(split_heads(linear(x, kv_heads * (H / heads), bias = bias, name = v_proj), kv_heads), heads / kv_heads)
  param bias_u[heads, H / heads]
  param bias_v[heads, H / heads]
  r = split_heads(linear(pe, H, bias = false, name = relative_k_proj), heads)
  bd = slice(matmul(q, transpose(r)), S)
  p = softmax(scale(matmul(q, transpose(k))) + scale(bd), fp32 = true)
  return linear(merge_heads(matmul(p, v)), H, bias = bias, name = o_proj)
}""", "fc_conv": """# FastConformer's convolution module (transformers 5.24 modeling_parakeet.py ParakeetEncoderConvolutionModule): a
# pointwise Conv1d H -> 2H, GLU over the channels, a depthwise Conv1d of width kernel (padding (kernel - 1) / 2),
# BatchNorm1d (eval: its running statistics; gamma, beta [H]), the activation, a pointwise Conv1d H -> H; biases where
# convolution_bias. Its LayerNorm (norm_conv) is the layer's. Channels first between the convolutions.
block fc_conv(x[B, S, H], kernel, padding, bias = true) {
  t = transpose(dense_conv1d(transpose(x), 2 * H, kernel = 1, bias = bias, name = pointwise_conv1))
  y = transpose(slice(t, H) * sigmoid(slice(t, H)))
  y = dense_conv1d(y, H, kernel = kernel, padding = padding, groups = H, bias = bias, name = depthwise_conv)
  param norm_weight[H]
  param norm_bias[H]
  return transpose(dense_conv1d(silu(y), H, kernel = 1, bias = bias, name = pointwise_conv2))
}""", "fc_conv_same": """# LASR's convolution module (transformers 5.24 modeling_lasr.py LasrEncoderConvolutionModule): fc_conv's, its depthwise
# Conv1d of padding "same" (k - 1 in all, one more on the right for an even kernel: S outputs); written as conv1d
# (state = false), whose counts are those (S outputs of k weights a channel, C k + C parameters): centred, not causal,
# which changes no count.
block fc_conv_same(x[B, S, H], kernel, bias = true) {
  t = transpose(dense_conv1d(transpose(x), 2 * H, kernel = 1, bias = bias, name = pointwise_conv1))
  y = conv1d(slice(t, H) * sigmoid(slice(t, H)), kernel, bias = bias, state = false, name = depthwise_conv)
  param norm_weight[H]
  param norm_bias[H]
  return transpose(dense_conv1d(transpose(silu(y)), H, kernel = 1, bias = bias, name = pointwise_conv2))
}""", "fc_conv_causal": """# Nemotron ASR Streaming's convolution module (transformers 5.24
# modeling_nemotron_asr_streaming.py NemotronAsrStreamingEncoderConvolutionModule): fc_conv's, its depthwise Conv1d
# causal (NemotronAsrStreamingEncoderCausalConv1d: F.pad(x, (k - 1, 0)) then no padding: S outputs of k weights a
# channel, as conv1d's) and a LayerNorm (gamma, beta [H], as BatchNorm1d's) in place of the BatchNorm.
block fc_conv_causal(x[B, S, H], kernel, bias = true) {
  t = transpose(dense_conv1d(transpose(x), 2 * H, kernel = 1, bias = bias, name = pointwise_conv1))
  y = conv1d(slice(t, H) * sigmoid(slice(t, H)), kernel, bias = bias, state = false, name = depthwise_conv)
  param norm_weight[H]
  param norm_bias[H]
  return transpose(dense_conv1d(transpose(silu(y)), H, kernel = 1, bias = bias, name = pointwise_conv2))
}"""}

#: a FastConformer layer's modules, in its forward's order (ParakeetEncoderBlock)
LAYER = ("norm_feed_forward1", "feed_forward1", "norm_self_att", "self_attn", "norm_conv", "conv",
         "norm_feed_forward2", "feed_forward2", "norm_out")


def _yes(flag: bool) -> str:
    return "true" if flag else "false"


def _act(m: Module) -> str | None:
    """The activation module's kind (SiLU: ``silu``), else None."""
    act = next((c for c in m.children if c.name == "activation"), None)
    return "silu" if act is not None and "silu" in act.cls.lower() else None


def feed_forward_call(m: Module, arg: str, sz) -> str | None:
    """``fc_feed_forward(arg, i)`` of a ``ParakeetEncoderFeedForward`` (linear1 h → i, SiLU, linear2 i → h, one bias
    setting), else None."""
    one, two = _linear(m.child("linear1")), _linear(m.child("linear2"))
    if one is None or two is None or m.params or one[2] != two[2] or (one[0], one[1]) != (two[1], two[0]) \
            or _act(m) != "silu" or any(c.name not in ("linear1", "linear2", "activation") for c in m.children):
        return None
    sz.blocks.add("fc_feed_forward")
    bias = "" if one[2] else ", bias = false"
    return f"fc_feed_forward({arg}, {sz.size(one[1], 'MLP intermediate size')}{bias}, name = {m.name})"


def attention_call(m: Module, arg: str, sz) -> str | None:
    """``fc_rel_attention(arg, pe, a, kv)`` of a ``ParakeetEncoderAttention`` (q, o h → h, k, v h → kv·h/a, one bias
    setting; ``relative_k_proj`` h → h without, ``bias_u``/``bias_v`` [a, h/a]), else None."""
    u, v = m.params.get("bias_u"), m.params.get("bias_v")
    projs = [_linear(m.child(n)) for n in ("q_proj", "k_proj", "v_proj", "o_proj")]
    rel = _linear(m.child("relative_k_proj"))
    if u is None or u != v or set(m.params) != {"bias_u", "bias_v"} or None in projs or rel is None \
            or len(m.children) != 5:
        return None
    h, heads = projs[0][0], u[0]
    kv = projs[1][1] // u[1]
    if any(p[2] != projs[0][2] for p in projs) or (projs[0][1], projs[3][:2]) != (h, (h, h)) or rel != (h, h, False) \
            or u[1] * heads != h or any(p[:2] != (h, kv * u[1]) for p in projs[1:3]) or kv < 1 or heads % kv:
        return None
    sz.blocks.add("fc_rel_attention")
    bias = "" if projs[0][2] else ", bias = false"
    return f"fc_rel_attention({arg}, pe, {sz.size(heads, 'attention heads')}, {sz.size(kv, 'key/value heads')}" \
           f"{bias}, name = {m.name})"


def conv_call(m: Module, arg: str, sz) -> str | None:
    """``fc_conv(arg, kernel, padding)`` of a ``ParakeetEncoderConvolutionModule`` (the block above; its depthwise
    width the config's ``conv_kernel_size``, a number; LASR's ``fc_conv_same``, Nemotron ASR Streaming's causal one with
    a LayerNorm ``fc_conv_causal``), else None."""
    parts = {c.name: c for c in m.children}
    need = ("pointwise_conv1", "depthwise_conv", "norm", "pointwise_conv2")
    causal = parts.get("depthwise_conv") is not None and parts["depthwise_conv"].cls.endswith("CausalConv1d")
    if m.params or any(n not in parts for n in need) or _act(m) != "silu" \
            or parts["norm"].cls != ("LayerNorm" if causal else "BatchNorm1d") \
            or set(parts["norm"].params) != {"weight", "bias"}:
        return None
    w1, dw, w2 = (parts[n].params.get("weight") for n in ("pointwise_conv1", "depthwise_conv", "pointwise_conv2"))
    biased = {"bias" in parts[n].params for n in ("pointwise_conv1", "depthwise_conv", "pointwise_conv2")}
    if w2 is None or w1 != (2 * w2[0], w2[0], 1) or w2 != (w2[0], w2[0], 1) or dw is None or dw[:2] != (w2[0], 1) \
            or len(biased) != 1 or parts["depthwise_conv"].attrs.get("groups") != w2[0]:
        return None
    pad = parts["depthwise_conv"].attrs.get("padding", 0)
    bias = "" if biased == {True} else ", bias = false"
    if causal and pad == 0:     # Nemotron ASR Streaming's: padded (k - 1, 0) in its forward (the block above)
        sz.blocks.add("fc_conv_causal")
        return f"fc_conv_causal({arg}, {dw[2]}{bias}, name = {m.name})"
    if pad == "same":     # LASR's (PyTorch's "same": the output as long as the input; the block above)
        sz.blocks.add("fc_conv_same")
        return f"fc_conv_same({arg}, {dw[2]}{bias}, name = {m.name})"
    if not isinstance(pad, int):
        return None
    sz.blocks.add("fc_conv")
    return f"fc_conv({arg}, {dw[2]}, {pad}{bias}, name = {m.name})"


def _sums(layer: Module) -> tuple[str, str, str, str]:
    """(the feed-forwards' residual sum, its comment, the convolution's, its comment) as ``{x}`` and ``{y}`` (the
    residual and the block's output): Parakeet's ``x + 0.5·y`` and ``x + y``; LASR's weights (modeling_lasr.py
    ``LasrEncoderBlock.forward``: ``w[0]·residual + w[1]·y``, ``feed_forward_residual_weights`` (1.5, 0.5),
    ``conv_residual_weights`` (2.0, 1.0) by default), scalar products (no matmul FLOPs) written ``scale``."""
    ff, conv = layer.attrs.get("feed_forward_residual_weights"), layer.attrs.get("conv_residual_weights")
    if not isinstance(ff, str) or not isinstance(conv, str):
        return "{x} + scale({y})", "x 0.5: a half step", "{x} + {y}", ""
    w, c = ff.split(","), conv.split(",")
    return "scale({x}) + scale({y})", f"residual x {w[0]}, output x {w[1]} (feed_forward_residual_weights)", \
        "scale({x}) + scale({y})", f"   # residual x {c[0]}, output x {c[1]} (conv_residual_weights)"


def layer_lines(layer: Module, sz, rotary: bool, mixer_call) -> list[str] | None:
    """The statements of a FastConformer layer (``ParakeetEncoderBlock.forward``, above; LASR's ``LasrEncoderBlock``
    the same with rotary attention of the std blocks, weighted residual sums and LayerNorms without biases), or None
    where ``layer`` is not one (a module missing or not read). ``mixer_call``: the std blocks' recogniser
    (:func:`costgraph.drafting.recurrent.mixer_call`, passed in: that module imports this one's blocks)."""
    parts = {c.name: c for c in layer.children}
    if any(n not in parts for n in LAYER) or layer.params \
            or any(parts[n].cls != "LayerNorm" for n in LAYER if n.startswith("norm")):
        return None
    norm = {n: norm_call(parts[n], "x") for n in LAYER if n.startswith("norm")}
    ff = [feed_forward_call(parts[f], norm[n], sz) for f, n in (("feed_forward1", "norm_feed_forward1"),
                                                                 ("feed_forward2", "norm_feed_forward2"))]
    attn = attention_call(parts["self_attn"], norm["norm_self_att"], sz) \
        or (mixer_call(parts["self_attn"], norm["norm_self_att"], sz, rotary) if not parts["self_attn"].params else None)
    conv = conv_call(parts["conv"], norm["norm_conv"], sz)
    if None in (*ff, attn, conv):
        return None
    ff_sum, ff_note, conv_sum, conv_note = _sums(layer)
    return [f"x = {ff_sum.format(x='x', y=ff[0])}   # {ff_note}",
            f"x = x + {attn}",
            f"x = {conv_sum.format(x='x', y=conv)}{conv_note}",
            f"x = {norm_call(parts['norm_out'], ff_sum.format(x='x', y=ff[1]))}   # {ff_note}"]


def ctc_head_line(m: Module, sz, name: str, last: bool) -> str | None:
    """The statement of a CTC head of a ``Conv1d`` of width 1 over the positions (transformers 5.24
    modeling_parakeet.py ``ParakeetEncoderCTCHead``: ``Conv1d(h, vocab_size, kernel_size=1)`` on ``x.transpose(1,
    2)``, transposed back: 2·b·s·h·V FLOPs, as a Linear), or None for another module."""
    w = m.params.get("weight")
    if not m.cls.endswith("CTCHead") or w is None or len(w) != 3 or w[2] != 1 or m.children:
        return None
    bias = "" if "bias" in m.params else ", bias = false"
    call = f"transpose(dense_conv1d(transpose(x), {sz.size(w[0], 'vocabulary size')}, kernel = 1{bias}, name = {name}))"
    return f"return {call}" if last else f"x = {call}"


def _stem(root: Module) -> Module | None:
    """The Conv2d subsampling stem: a module holding ``layers`` (Conv2d and ReLU modules, a Conv2d first) and a
    ``linear``, else None."""
    for m in root.walk():
        layers, linear = m.child("layers"), m.child("linear")
        if layers is not None and linear is not None and layers.children \
                and layers.children[0].cls == "Conv2d" \
                and all(c.cls in ("Conv2d", "ReLU") and not c.children for c in layers.children):
            return m
    return None


def _conv_line(m: Module, sz, names, arg: str, causal: bool = False) -> tuple[str, int, int, int] | None:
    """(the ``conv2d`` call, kernel, stride, padding) of a stem Conv2d (square kernel and stride), else None.
    ``causal``: padded ``(k − 1, stride − 1)`` on each axis in its forward (``padding``, ``padding_end``; a module
    padding 0)."""
    w = m.params.get("weight")
    k, stride, pad, groups = (m.attrs.get(a, d) for a, d in (("kernel_size", None), ("stride", 1), ("padding", 0),
                                                               ("groups", 1)))
    if w is None or len(w) != 4 or not all(isinstance(v, int) for v in (k, stride, pad, groups)) or w[2:] != (k, k):
        return None
    out = sz.size(w[0], "subsampling channels")
    if causal and pad != 0:
        return None
    pads = (("padding", k - 1, 0), ("padding_end", stride - 1, 0)) if causal else (("padding", pad, 0),)
    opts = [f"kernel = {k}"] + [f"{a} = {v}" for a, v, d in (("stride", stride, 1), *pads) if v != d]
    if groups != 1:
        opts.append(f"groups = {sz.size(groups, 'subsampling channels')}")
    bias = "" if "bias" in m.params else ", bias = false"
    return f"conv2d({arg}, {out}, {', '.join(opts)}{bias}, name = {names(m)})", k, stride, pad


def _conv1d_stem(root: Module, sz, names) -> tuple[list[str], list[str], list[Module]] | None:
    """(dims, statements, modules) of LASR's stem (transformers 5.24 modeling_lasr.py ``LasrEncoderSubsampling.forward``:
    ``relu(dense_0(features))`` (mel → h), transposed, ``relu(conv_0(·))``, ``relu(conv_1(·))`` (Conv1d of
    ``subsampling_conv_kernel_size`` and ``subsampling_conv_stride``, no padding: ``⌊(n − k)/stride⌋ + 1`` frames each),
    transposed, ``dense_1`` (C → h)), else None."""
    stem = next((m for m in root.walk() if all(m.child(n) is not None for n in ("dense_0", "conv_0", "conv_1",
                                                                                 "dense_1"))), None)
    if stem is None or any(stem.child(n).cls != "Conv1d" for n in ("conv_0", "conv_1")):
        return None
    first, last = _linear(stem.child("dense_0")), _linear(stem.child("dense_1"))
    if first is None or last is None:
        return None
    lines = [f"x = relu(linear(features, {sz.size(first[1], 'hidden size')}, bias = {_yes(first[2])}, "
             f"name = {names(stem.child('dense_0'))}))",
             "x = transpose(x)   # [b, h, T]"]
    dims, frames = [], "T"
    for j, n in enumerate(("conv_0", "conv_1")):
        m = stem.child(n)
        out, _, k = m.params["weight"]
        stride, pad = m.attrs.get("stride", 1), m.attrs.get("padding", 0)
        if not isinstance(stride, int) or pad != 0:
            return None
        bias = "" if "bias" in m.params else ", bias = false"
        lines.append(f"x = relu(dense_conv1d(x, {sz.size(out, 'subsampling channels')}, kernel = {k}, stride = {stride}"
                     f"{bias}, name = {names(m)}))")
        f = "s" if j == 1 else "f1"
        dims.append(f'  dim {f} = floor(({frames} - {k}) / {stride}) + 1 "frames after the stem\'s convolution {j + 1} '
                    '(PyTorch Conv1d: floor((n - k) / stride) + 1)"')
        frames = f
    lines.append(f"x = linear(transpose(x), {sz.size(last[1], 'hidden size')}, bias = {_yes(last[2])}, "
                 f"name = {names(stem.child('dense_1'))})")
    return dims, lines, [m for m in stem.walk() if not m.children]


def _causal_stem(root: Module) -> Module | None:
    """Nemotron ASR Streaming's subsampling (transformers 5.24 modeling_nemotron_asr_streaming.py
    ``NemotronAsrStreamingEncoderSubsamplingConv2D``): a module holding ``conv_in`` (a causal Conv2d), ``layers``
    (modules of a causal depthwise ``depthwise_conv`` and a ``pointwise_conv``) and ``linear``, else None."""
    for m in root.walk():
        conv_in, layers, linear = m.child("conv_in"), m.child("layers"), m.child("linear")
        if conv_in is not None and layers is not None and linear is not None \
                and conv_in.cls.endswith("CausalConv2D") and not conv_in.children \
                and all(c.child("depthwise_conv") is not None and c.child("pointwise_conv") is not None
                        and c.child("depthwise_conv").cls.endswith("CausalConv2D") for c in layers.children):
            return m
    return None


def _causal_lines(stem: Module, sz, names) -> tuple[list[str], list[tuple]] | None:
    """(statements, (kernel, stride, padding, padding end) of each strided convolution) of a causal stem
    (:func:`_causal_stem`): ``relu(conv_in(features))``, then ``relu(pointwise_conv(depthwise_conv(x)))`` a layer
    (``NemotronAsrStreamingEncoderSubsamplingConv2D.forward``; each causal Conv2d padded ``(k − 1, stride − 1)`` on
    both axes, ``NemotronAsrStreamingEncoderCausalConv2D.forward``: ``conv2d``'s ``padding_end``), else None."""
    lines, strided = [], []
    convs = [stem.child("conv_in")] + [c for layer in stem.child("layers").children
                                       for c in (layer.child("depthwise_conv"), layer.child("pointwise_conv"))]
    for m in convs:
        causal = m.cls.endswith("CausalConv2D")
        conv = _conv_line(m, sz, names, "features" if not lines else "x", causal)
        if conv is None:
            return None
        call, k, stride, _ = conv
        if causal:
            strided.append((k, stride, k - 1, stride - 1))
        lines.append(f"x = {call}" if causal and m is not convs[0] else f"x = relu({call})")
    return lines, strided


def _frames(strided: list[tuple]) -> list[str] | None:
    """The ``dim`` lines of the frames after each strided convolution ((kernel, stride, padding, padding end) each;
    the last ``s``), else None where none is strided."""
    dims, frames = [], "T"
    for j, (k, stride, pad, end) in enumerate(strided):
        f = "s" if j == len(strided) - 1 else f"f{j + 1}"
        span = pad + end - k
        span = f"{frames} + {span}" if span > 0 else f"{frames} - {-span}" if span < 0 else frames
        rule = "2 padding" if pad == end else "padding + padding_end"
        dims.append(f'  dim {f} = floor(({span}) / {stride}) + 1 "frames after the stem\'s strided convolution '
                    f'{j + 1} (PyTorch Conv2d: floor((n + {rule} - k) / stride) + 1)"')
        frames = f
    return dims or None


def _conv2d_lines(stem: Module, sz, names) -> tuple[list[str], list[tuple]] | None:
    """(statements, (kernel, stride, padding, padding) of each strided convolution) of Parakeet's stem
    (:func:`_stem`), else None."""
    lines, strided = [], []
    for m in stem.child("layers").children:
        if m.cls == "ReLU":
            lines.append("x = relu(x)")
            continue
        conv = _conv_line(m, sz, names, "features" if not lines else "x")
        if conv is None:
            return None
        call, k, stride, pad = conv
        lines.append(f"x = {call}")
        if (k, stride, pad) != (1, 1, 0):      # the frames change: named (the last, s: :func:`_frames`)
            strided.append((k, stride, pad, pad))
    return lines, strided


def front(root: Module, pre: list[Module], sz, names) -> tuple[list[str], list[str], list[Module]] | None:
    """(input declarations, statements, modules drafted) of a FastConformer's stem (Parakeet's: :func:`_stem`;
    Nemotron ASR Streaming's causal one: :func:`_causal_stem`), scale and relative positions (LASR's stem alone:
    :func:`_conv1d_stem`), or None where ``root`` has no stem or the probe no Mel bins and stem channels (``mel``,
    ``C_s``). Sets ``sz.seq`` (``s``, the frames the layers run), ``sz.front_dims`` (the input frames ``T`` and the
    frames after each strided convolution) and ``sz.front_config``. ``names``: the node names
    (:class:`costgraph.drafting.model_file._Names`)."""
    stem, values = _stem(root), sz.probe.symbol_values()
    if "mel" not in values or "C_s" not in values:
        return None
    causal = _causal_stem(root) if stem is None else None
    lasr = _conv1d_stem(root, sz, names) if stem is None and causal is None else None
    if lasr is not None:      # LASR's: a Linear over the bins, two Conv1d over the frames; rotary positions (no pe)
        sz.size(values["mel"], "Mel bins")
        sz.seq, sz.front_config = "s", [f"T = {FRAMES}"]
        sz.front_dims = ['  dim T   "spectrogram frames per clip (input_features [b, T, mel])"', *lasr[0]]
        return ["input features[b, T, mel]   # input_features"], lasr[1], lasr[2]
    stem = stem or causal
    first = stem.child("conv_in") if causal is not None else stem.child("layers").children[0] if stem else None
    if first is None or first.params.get("weight", (0, 0))[1] != 1:
        return None
    made = _causal_lines(stem, sz, names) if causal is not None else _conv2d_lines(stem, sz, names)
    lin = _linear(stem.child("linear"))
    dims = _frames(made[1]) if made is not None else None
    if dims is None or lin is None:
        return None
    lines = made[0] + [
        "x = merge_heads(x)   # [b, s, C_s * mel bins left]: transpose(1, 2).reshape(b, s, -1) (a copy)",
        f"x = linear(x, {sz.size(lin[1], 'hidden size')}, bias = {_yes(lin[2])}, name = {names(stem.child('linear'))})"]
    scale = next((m.attrs["input_scale"] for m in root.walk() if "input_scale" in m.attrs), None)   # the encoder's
    if isinstance(scale, float) and scale != 1.0:
        lines.append("x = scale(x)   # x input_scale, sqrt(h) (scale_input)")
    sz.size(values["mel"], "Mel bins")
    sz.seq = "s"
    sz.front_dims = ['  dim T   "spectrogram frames per clip (input_features [b, T, mel])"', *dims]
    sz.front_config = [f"T = {FRAMES}"]
    h = sz.size(lin[1], "hidden size")
    inputs = ["input features[b, 1, T, mel]   # input_features [b, T, mel] as the stem reads it (unsqueeze(1))",
              f"input pe[b, 2 * s - 1, {h}]   # the relative positions' sines and cosines (encode_positions: no "
              "parameters, no matmul): read by every layer's attention"]
    return inputs, lines, [m for m in stem.walk() if not m.children]
