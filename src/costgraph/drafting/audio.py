"""The front end of a speech encoder from raw audio (the wav2vec2 family), drafted from its traced modules (issue 28
items 2 and 3).

transformers 5.24 modeling_wav2vec2.py:

- ``Wav2Vec2FeatureEncoder.forward``: ``input_values[:, None]`` ``[b, 1, L]`` through ``conv_layers``, one
  ``Conv1d(conv_dim[j-1], conv_dim[j], conv_kernel[j], stride=conv_stride[j], bias=conv_bias)`` each, then GELU
  (``feat_extract_activation``); ``feat_extract_norm`` "group": a ``GroupNorm(conv_dim[0], conv_dim[0])`` after the
  first convolution alone (``Wav2Vec2GroupNormConvLayer``); "layer": a LayerNorm over the channels after every
  convolution (``Wav2Vec2LayerNormConvLayer``: transposed, normed, transposed back). The frames after layer j are
  PyTorch's ``⌊(f_{j-1} − k_j)/s_j⌋ + 1`` (``Conv1d``, no padding): written as nested ``floor`` dims (``f1`` …, then
  ``s``), exact for every sample count L (the language's floor: a fractional intermediate length is rounded, never
  refused).
- ``Wav2Vec2FeatureProjection.forward``: LayerNorm(conv_dim[-1]), ``Linear(conv_dim[-1], h)``, dropout.
- ``Wav2Vec2PositionalConvEmbedding``: ``Conv1d(h, h, K_c, padding=K_c // 2, groups=G_c)`` under weight norm
  (``nn.utils.parametrizations.weight_norm(..., dim=2)``: ``parametrizations.weight.original0`` ``[1, 1, K_c]``, the
  magnitude, and ``original1`` ``[h, h/G_c, K_c]``, the direction; both are parameters, as ``sum(p.numel())``
  counts them); ``Wav2Vec2SamePadLayer`` drops the last frame where K_c is even (the conv makes s + 1); GELU; added to
  the projected features (``Wav2Vec2Encoder.forward``: ``hidden_states + position_embeddings``).
- Variants: Data2VecAudio's positional convolution is ``num_conv_pos_embeddings`` layers (a number) of width
  ``conv_pos_kernel_size`` without weight norm (modeling_data2vec_audio.py ``Data2VecAudioPositionalConvEmbedding``);
  SEW's has stride ``squeeze_factor`` and the frames are pooled by as much (modeling_sew.py ``SEWEncoder.forward``:
  ``AvgPool1d``, both cut to the shorter, the pooled count); wav2vec2-conformer builds it and never calls it (relative
  positions: parameters only, and ``pe``, the relative positions' table, an input of the layers).
- ``Wav2Vec2Model.masked_spec_embed`` ``[h]``: read only where ``mask_time_indices`` is given or in training (SpecAugment:
  ``_mask_hidden_states`` masks ``if self.training``): parameters only (:mod:`.inputs_audio`).

How the lists are written: the feature encoder's kernels, strides and channel widths (``conv_kernel``,
``conv_stride``, ``conv_dim``) are the config's own numbers, not symbols. The kernels and strides are the
architecture (wav2vec2's 400-sample receptive field, 320-sample hop: every checkpoint of the family keeps them), and a
list is no dimension of the language (``dim`` holds one size): one symbol per entry would name seven to thirteen sizes
nobody sweeps. The widths are written as numbers for the same reason (512 in every checkpoint of the family); the
config block of the draft thus sets h, the heads, the layers and the positional convolution, and a config with other
convolution widths drafts another file (still exact: the numbers are its own). The positional convolution's width
``num_conv_pos_embeddings`` and groups ``num_conv_pos_embedding_groups`` are symbols (``K_c``, ``G_c``): they size the
largest convolution of the model (``h·h/G_c·K_c`` weights).

Torch-free: module facts and integers only.
"""

from __future__ import annotations

from .blocks import norm_call
from .facts import Module
from .writer import Sizer

#: the default sample count of a draft's config block: one second at the feature extractor's 16 kHz
#: (transformers 5.24 feature_extraction_wav2vec2.py ``Wav2Vec2FeatureExtractor(sampling_rate=16000)``)
SAMPLES = 16000


def is_conv_stack(m: Module) -> bool:
    """``m`` is a feature encoder's ``conv_layers`` (a ModuleList whose elements each hold a ``Conv1d``): never the
    Transformer layers, even where it has as many elements (SEW's 13 convolutions at a probe of 13 layers)."""
    return m.name == "conv_layers" and m.cls == "ModuleList" and bool(m.children) \
        and all(c.child("conv") is not None and c.child("conv").cls == "Conv1d" for c in m.children)


def _conv_layers(root: Module) -> Module | None:
    """The feature encoder's ``conv_layers`` list, else None."""
    return next((m for m in root.walk() if is_conv_stack(m)), None)


def _pos_conv(root: Module) -> Module | None:
    """The positional convolution embedding (``pos_conv_embed``), else None."""
    return next((m for m in root.walk() if m.name == "pos_conv_embed"), None)


def _conv_line(conv: Module, arg: str, name: str) -> tuple[str, int, int]:
    """(the ``dense_conv1d`` call, its kernel, its stride) of a feature-encoder convolution (numbers)."""
    out, _, k = conv.params["weight"]
    stride = int(conv.attrs.get("stride", 1))
    bias = "true" if "bias" in conv.params else "false"
    return f"dense_conv1d({arg}, {out}, kernel = {k}, stride = {stride}, bias = {bias}, name = {name})", k, stride


def _feature_lines(convs: Module, last: str) -> tuple[list[str], list[str]]:
    """(dims, statements) of the feature encoder: each convolution, its norm, its GELU; the frames after each, those
    after the last called ``last``."""
    lines, dims, arg, frames = [], [], "audio", "L"
    for j, layer in enumerate(convs.children):
        conv = layer.child("conv")
        call, k, stride = _conv_line(conv, arg, f"feature_conv{j}")
        norm = layer.child("layer_norm")
        if norm is not None and norm.cls == "GroupNorm":
            ch = conv.params["weight"][0]
            affine = "" if "weight" in norm.params else ", weight = false"
            call = f"group_norm({call}, groups = {ch}{affine}, name = feature_norm{j})"
        elif norm is not None:     # "layer": LayerNorm over the channels of [b, C, f]
            normed = norm_call(norm, f"transpose({call})").replace(f"name = {norm.name})", f"name = feature_norm{j})")
            call = f"transpose({normed})"
        lines.append(f"x = gelu({call})")
        arg = "x"
        f = last if j == len(convs.children) - 1 else f"f{j + 1}"
        dims.append(f'  dim {f} = floor(({frames} - {k}) / {stride}) + 1 "frames after the feature encoder\'s '
                    f'convolution {j + 1} (PyTorch Conv1d: floor((n - k) / stride) + 1)"')
        frames = f
    lines.append("x = transpose(x)   # [b, s, C] frames (Wav2Vec2FeatureEncoder's output transposed, a view)")
    return dims, lines


def _projection_lines(proj: Module, sz: Sizer) -> list[str]:
    """The feature projection (``Wav2Vec2FeatureProjection``): its LayerNorm and Linear (conv_dim[-1] → h); the
    dropout where it drops."""
    out = []
    for m in proj.children:
        if m.order is None:
            continue
        if m.cls == "LayerNorm":
            out.append("x = " + norm_call(m, "x").replace(f"name = {m.name})", "name = feature_layer_norm)"))
        elif m.cls == "Linear":
            h = sz.size(m.params["weight"][0], "hidden size")
            out.append(f"x = linear(x, {h}, bias = {'true' if 'bias' in m.params else 'false'}, "
                       "name = feature_projection)")
        elif m.cls == "Dropout" and m.attrs.get("p", 0):
            out.append("x = dropout(x, name = feature_dropout)")
    return out


def _conv_sizes(conv: Module, out: int, per: int, k: int, sz: Sizer) -> str:
    """``h, kernel = K_c, padding = floor(K_c / 2), groups = G_c, bias = ...`` of a positional convolution."""
    h, groups = sz.size(out, "hidden size"), sz.size(out // per, "positional convolution groups")
    kernel = sz.size(k, "positional convolution width")
    pad = int(conv.attrs.get("padding", 0))
    padding = f"floor({kernel} / 2)" if pad == k // 2 else str(pad)
    return f"{h}, kernel = {kernel}, padding = {padding}, groups = {groups}, " \
           f"bias = {'true' if 'bias' in conv.params else 'false'}"


def _layered_lines(pos: Module, sz: Sizer) -> list[str] | None:
    """Data2VecAudio's positional convolution (transformers 5.24 modeling_data2vec_audio.py
    ``Data2VecAudioPositionalConvEmbedding``): ``num_conv_pos_embeddings`` layers (the config's number), each a grouped
    ``Conv1d(h, h, K_c, padding=K_c // 2, groups=G_c)`` (no weight norm), ``Data2VecAudioPadLayer`` (the last frame
    dropped where K_c is even), a LayerNorm over h without weights, GELU; added to x. None where ``pos`` is not so."""
    layers = pos.child("layers")
    if layers is None or not layers.children or any(c.signature() != layers.children[0].signature()
                                                    for c in layers.children):
        return None
    first = layers.children[0]
    conv, norm = first.child("conv"), first.child("layer_norm")
    if conv is None or conv.cls != "Conv1d" or norm is None or norm.cls != "LayerNorm" or norm.params:
        return None
    out, per, k = conv.params["weight"]
    return ["p = transpose(x)   # [b, h, s]",
            f"repeat {len(layers.children)} as pos_conv_layers {{   # num_conv_pos_embeddings layers (the config's number)",
            f"  p = dense_conv1d(p, {_conv_sizes(conv, out, per, k, sz)}, name = conv)",
            "  p = gelu(transpose(layernorm(transpose(slice(p, s)), weight = false, bias = false, name = layer_norm)))"
            "   # the last frame dropped where the width is even (a view); LayerNorm over h without weights",
            "}",
            "x = x + transpose(p)"]


def _squeeze(pos: Module) -> int:
    """SEW's ``squeeze_factor`` (transformers 5.24 modeling_sew.py ``SEWPositionalConvEmbedding``: its conv's stride,
    and ``SEWEncoder.pool``, ``nn.AvgPool1d(squeeze_factor, squeeze_factor)``); 1 for wav2vec2's (stride 1)."""
    conv = pos.child("conv")
    return int(conv.attrs.get("stride", 1)) if conv is not None else 1


def _pool(root: Module) -> Module | None:
    """SEW's ``encoder.pool`` (an AvgPool1d called before the layers), else None."""
    return next((m for m in root.walk() if m.cls == "AvgPool1d" and m.name == "pool" and m.order is not None), None)


def _positional_lines(pos: Module, sz: Sizer) -> list[str] | None:
    """The weight-normed positional convolution, added to x; None where its conv is not one."""
    if pos.child("layers") is not None:
        return _layered_lines(pos, sz)
    conv = pos.child("conv")
    plist = next((m for m in conv.walk() if m.cls == "ParametrizationList"), None) if conv is not None else None
    if plist is None or set(plist.params) != {"original0", "original1"}:
        return None
    out, per, k = plist.params["original1"]
    kernel = sz.size(k, "positional convolution width")
    g = plist.params["original0"]
    g_dims = ", ".join(sz.size(n, "weight norm magnitude") for n in g)
    if pos.order is None:     # built, never called (wav2vec2-conformer's relative positions): its parameters only
        for m in pos.walk():
            m.order = -1      # written here, not among the modules model_file lists as never called
        v_dims = ", ".join(sz.size(n, "positional convolution weight") for n in (out, per, k))
        return [f"param pos_conv_weight_g[{g_dims}]   # the positional convolution, built but not called "
                "(position_embeddings_type relative): parameters only",
                f"param pos_conv_weight_v[{v_dims}]"] \
            + ([f"param pos_conv_bias[{sz.size(out, 'hidden size')}]"] if "bias" in conv.params else [])
    squeeze = _squeeze(pos)
    stride = f", stride = {squeeze}" if squeeze > 1 else ""
    lines = [f"p = dense_conv1d(transpose(x), {_conv_sizes(conv, out, per, k, sz)}{stride}, name = pos_conv)"
             + ("" if squeeze > 1 else f"   # [b, h, s + 1] where {kernel} is even"),
             f"param pos_conv_weight_g[{g_dims}]   # weight norm (dim = 2): parametrizations.weight.original0; "
             "the conv's weight is original1"]
    if squeeze > 1:     # SEW: the frames pooled by the squeeze factor, the positions' frames cut to as many
        return lines + [f"x = transpose(slice(avg_pool1d(transpose(x), {squeeze}, name = pool), s) + "
                        "slice(gelu(p), s))   # SEWEncoder: pooled frames + positions, both cut to the shorter "
                        "(s, the pooled count; views)"]
    return lines + [f"x = x + transpose(gelu(slice(p, s)))   # Wav2Vec2SamePadLayer drops the last frame where "
                    f"{kernel} is even (a view); GELU"]


def audio_front(root: Module, pre: list[Module], sz: Sizer, leaf) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of a speech encoder's modules before its layers from raw audio, or None where
    ``root`` has no feature encoder of Conv1d layers and a positional convolution this module reads. The modules of
    ``pre`` are written in call order: the feature encoder, its projection and the positional convolution here, any
    other (SEW's LayerNorm and Linear on the root, the encoder's LayerNorm) by ``leaf`` (a module → a statement or
    None). Sets ``sz.seq`` (the frames ``s``), ``sz.front_dims`` (L and the frames after each convolution; SEW's s the
    frames pooled by its squeeze factor) and ``sz.front_config``."""
    convs, pos = _conv_layers(root), _pos_conv(root)
    if convs is None or pos is None:
        return None
    positional = _positional_lines(pos, sz)
    squeeze, pool = _squeeze(pos), _pool(root)
    if positional is None or (squeeze > 1) != (pool is not None):
        return None
    last = f"f{len(convs.children)}" if squeeze > 1 else "s"
    dims, features = _feature_lines(convs, last)
    if squeeze > 1:
        dims.append(f'  dim s = floor({last} / {squeeze}) "frames the layers run: pooled by squeeze_factor '
                    f'{squeeze} (AvgPool1d; the positional conv of stride {squeeze} makes at least as many)"')
    rel = next((m for m in pre if m.cls.endswith("RelPositionalEmbedding") and not m.params), None)
    proj = next((m for m in root.walk() if m.name == "feature_projection" and m.children), None)
    parts = [(convs.path + ".", features), (pos.path + ".", positional)]
    if proj is not None:
        parts.append((proj.path + ".", _projection_lines(proj, sz)))
    lines, done = [], set()
    for m in pre:
        part = next((i for i, (prefix, _) in enumerate(parts) if m.path.startswith(prefix)), None)
        if m is pool:
            continue
        if part is None:
            line = leaf(m)
            lines += [line] if line else []
        elif part not in done:
            done.add(part)
            lines += parts[part][1]
    if pos.order == -1:     # built, never called: its parameters (see _positional_lines)
        lines += positional
    for pname, shape in root.params.items():      # masked_spec_embed [h]: SpecAugment's, read only in training
        dims_text = ", ".join(sz.size(n, "masked embedding") for n in shape)
        lines.append(f"param {pname}[{dims_text}]   # read only with mask_time_indices or in training (parameters only)")
    sz.seq = "s"
    sz.front_dims = ['  dim L   "samples per clip (input_values [b, L], raw audio)"', *dims]
    sz.front_config = [f"L = {SAMPLES}"]
    inputs = ["input audio[b, 1, L]   # input_values [b, L] as the feature encoder reads it (input_values[:, None])"]
    if rel is not None:     # wav2vec2-conformer (modeling_wav2vec2_conformer.py Wav2Vec2ConformerRelPositionalEmbedding)
        h = _hidden(pos, sz)
        inputs.append(f"input pe[1, 2 * s - 1, {h}]   # the relative positions' table, sliced from a buffer (no "
                      "parameters): read by every layer's attention")
    return inputs, lines


def _hidden(pos: Module, sz: Sizer) -> str:
    """h, read from the positional convolution's output channels."""
    plist = next((m for m in pos.walk() if m.cls == "ParametrizationList"), None)
    return sz.size(plist.params["original1"][0], "hidden size")
