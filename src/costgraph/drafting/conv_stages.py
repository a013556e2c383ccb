"""The body of a staged vision backbone, drafted stage by stage (issue 28 items 1 and 2; task k28conv12):
ConvNeXt, ConvNeXt V2, DINOv3 ConvNeXt, ResNet, RegNet, PoolFormer, and the windowed Transformers Swin, Swin V2 and
their copies (:mod:`costgraph.drafting.window_stages` writes a Swin layer).

Per-stage lists, how they are symbolised. A config of such a backbone sets one entry per stage: ``depths`` (the
layers of stage i), ``hidden_sizes`` (its channels: transformers 5.24 configuration_convnext.py, _resnet.py,
_regnet.py, _poolformer.py) and Swin's ``num_heads`` (configuration_swin.py, whose widths are ``embed_dim``·2^(i−1)).
Entry i (from 0) is a symbol of its own, ``l_{i+1}``, ``h_{i+1}``, ``a_{i+1}``, named in the draft's ``dim`` as
``depths[i]``, ``hidden_sizes[i]``, ``num_heads[i]`` (the config block gives the config's entries), each entry probed
at a value of its own (:data:`costgraph.drafting.probe.STAGE_LISTS`: the widths 4 × a prime of k28conv12's range, the
depths and heads small counts named by position, never read from a shape); the number of stages stays the config's
(the lists' length; ``num_stages``, Swin's ``num_layers`` follow it). A backbone's fields of one value are symbols
too (:data:`costgraph.drafting.probe.STAGE_SCALARS`: ResNet's ``embedding_size`` h_0, RegNet's ``groups_width``
g_w, Swin's ``embed_dim`` h_e). The draft writes one block per stage, ``repeat l_i as stage_i { ... }``, of the
stage's layers, after the modules the stage calls before them (ConvNeXt's ``downsampling_layer``, PoolFormer's patch
embedding of the stage); where a stage's first layer is built otherwise (ResNet's and RegNet's shortcut projection
and stride), its statements come first, then ``repeat l_i - 1``.

The statements follow the traced modules in call order. transformers 5.24 modeling_convnext.py
``ConvNextEmbeddings.forward``: ``patch_embeddings`` (Conv2d, kernel = stride = ``patch_size``), then a
channels-first ``ConvNextLayerNorm`` (``permute(0, 2, 3, 1)``, LayerNorm over the channels, ``permute(0, 3, 1,
2)``). ``ConvNextLayer.forward``: ``dwconv`` (Conv2d 7×7, padding 3, groups = channels), ``permute(0, 2, 3, 1)``,
``layernorm``, ``pwconv1`` (Linear C → 4C), ``act``, [``grn``: ConvNeXt V2], ``pwconv2`` (4C → C), [``layer_scale_
parameter`` × ·], ``permute(0, 3, 1, 2)``, ``residual + drop_path(·)``. ``ConvNextModel.forward``:
``layernorm(last_hidden_state.mean([-2, -1]))``. modeling_resnet.py ``ResNetBottleNeckLayer``: ``layer`` (three
Conv2d + BatchNorm2d + activation), ``shortcut`` (strided 1×1 Conv2d + BatchNorm2d, or Identity) on the layer's
input, ``activation`` of the sum; modeling_regnet.py adds grouped 3×3 convolutions and a squeeze-and-excitation.
Kernel sizes, strides, paddings that the modeling code fixes (7, 3, 2, 1) are written as numbers; sizes as symbols
through :class:`costgraph.drafting.writer.Sizer`. A strided output side is PyTorch's ``⌊(n + 2·padding −
k)/stride⌋ + 1`` (the ``conv2d`` rule of :mod:`costgraph.ops.vision`); the probes' images are chosen so that every
stage halves a whole side (:meth:`costgraph.drafting.probe.Probe.make`'s ``stages``). A backbone whose config sets
no image size (ResNet's) reads an image ``[b, c, s, s]``, s the input's side (224 in the config block). Torch-free:
module facts and integers only.
"""
from __future__ import annotations

import re

from .blocks import is_norm, norm_call
from .facts import Module
from .probe import STAGE_LISTS, STAGES
from .pvt import holds_positions, is_token_stage, last_called, position_lines
from .reduced_attention import segformer_layer_lines
from .window_stages import swin_layer_lines, swinv2_layer_lines
from .writer import Sizer

#: the image side of a backbone whose config sets none (ResNet's, PoolFormer's): the draft's ``s`` at the config,
#: ImageNet's 224×224 crop (He et al. 2016, ResNet, §3.4)
IMAGE_SIDE = 224

#: activation modules by a part of their class name (transformers' ``ACT2FN`` classes: GELUActivation, ...)
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "silu": "silu", "tanh": "tanh", "sigmoid": "sigmoid"}


def stage_count(config) -> int:
    """The stages of a config whose ``depths`` and other :data:`STAGE_LISTS` fields are lists of one length, 1 …
    :data:`STAGES`; else 0."""
    lists = [getattr(config, f, None) for f in STAGE_LISTS]
    lists = [v for v in lists if isinstance(v, (list, tuple))]
    if not isinstance(getattr(config, "depths", None), (list, tuple)) or len({len(v) for v in lists}) != 1:
        return 0
    n = len(lists[0])
    return n if 0 < n <= STAGES and all(isinstance(x, int) for v in lists for x in v) else 0


def field_value(config, field: str):
    """``config.field``, or entry i of a list field written ``name[i]`` (:data:`STAGE_LISTS`' symbols)."""
    if field.endswith("]") and "[" in field:
        name, index = field[:-1].split("[", 1)
        v = getattr(config, name, None)
        return v[int(index)] if isinstance(v, (list, tuple)) and index.isdigit() and int(index) < len(v) else None
    return getattr(config, field, None)


def _side_after(conv: Module, side: str, sz: Sizer) -> str:
    """The text of a map's side after ``conv``: ``side / p`` for a patch embedding of kernel = stride = a probed
    field, else PyTorch's ``floor((side + 2·padding − k) / stride) + 1``."""
    k, stride, pad = (conv.attrs.get(a) for a in ("kernel_size", "stride", "padding"))
    if k == stride and k > 7 and not pad:
        return f"{side} / {sz.size(k, 'kernel')}" if " " not in side else f"({side}) / {sz.size(k, 'kernel')}"
    span = 2 * pad - k
    shifted = f"{side} + {span}" if span > 0 else f"{side} - {-span}" if span < 0 else side
    return f"floor(({shifted}) / {stride}) + 1" if stride != 1 else f"{shifted} + 1"


def _stages(root: Module) -> Module | None:
    """The ModuleList of stages: each child holds a list ``layers`` (ConvNeXt's ``encoder.stages``, a ModuleList;
    ResNet's, a Sequential)."""
    for m in root.walk():
        if m.cls == "ModuleList" and m.children and all(
                _layers(c) is not None and _layers(c).cls in ("ModuleList", "Sequential") for c in m.children):
            return m
    return None


def _layers(stage: Module) -> Module | None:
    """A stage's list of layers: ``layers`` (ConvNeXt, ResNet), ``blocks`` (Swin), or the stage itself where it is
    the list (PoolFormer's ``encoder.block[i]``: its patch embedding ``encoder.patch_embeddings[i]`` a list apart,
    called before it)."""
    if stage.cls == "ModuleList" and stage.children and not any(c.cls == "ModuleList" for c in stage.children):
        return stage
    return stage.child("layers") or stage.child("blocks")


def _width(sz: Sizer, n: int, what: str) -> str:
    """A channel count in symbols: :meth:`Sizer.size`, or ``h_i / 4`` where ``n`` is a stage width over a small
    power of two (ResNet's bottleneck: ``out_channels // reduction``, reduction 4; transformers 5.24
    modeling_resnet.py ``ResNetBottleNeckLayer``)."""
    if sz.probe.cover(n) is None:
        for k in (2, 4, 8):
            over = sz.probe.cover(n * k)
            if over is not None and " " not in over:
                sz.used.add(over)
                real = sz.real.get(over)
                return f"floor({over} / {k})" if isinstance(real, int) and real % k else f"{over} / {k}"
    return sz.size(n, what)


def _conv(m: Module, arg: str, sz: Sizer, name: str) -> str | None:
    """``conv2d(...)`` of a Conv2d, its geometry from the trace's attributes; None where one is missing. A kernel or
    stride above 7 is a probed field (a patch size, prime ≥ 499), written in symbols; the modeling code's own
    (7, 4, 3, 2, 1) as numbers."""
    w = m.params.get("weight")
    k, stride, pad, groups = (m.attrs.get(a) for a in ("kernel_size", "stride", "padding", "groups"))
    if m.cls != "Conv2d" or w is None or len(w) != 4 or not all(isinstance(v, int) for v in (k, stride, pad, groups)):
        return None
    out = _width(sz, w[0], "output channels")
    text = f"conv2d({arg}, {out}, kernel = {sz.size(k, 'kernel') if k > 7 else k}"
    if stride != 1:
        text += f", stride = {sz.size(stride, 'stride') if stride > 7 else stride}"
    if pad:
        text += f", padding = {pad}"
    if groups != 1:
        text += f", groups = {_width(sz, groups, 'groups')}"
    if "bias" not in m.params:
        text += ", bias = false"
    return text + f", name = {name})"


def _leaf(m: Module, var: str, layout: str, sz: Sizer, name: str) -> tuple[str | None, str]:
    """(statement on ``var`` or None, the layout after it: ``first`` [B, C, H, W], ``last`` [B, H, W, C],
    ``pooled`` [B, C], ``pool:NAME`` a pooled map held by NAME, ``tokens``) of one module without children."""
    conv = _conv(m, var if layout == "first" else f"channels_first({var})", sz, name) if m.cls == "Conv2d" else None
    if conv is not None:
        return f"{var} = {conv}", "first"
    if m.cls == "BatchNorm2d" and layout == "first" and set(m.params) == {"weight", "bias"}:
        return f"{var} = batch_norm({var}, name = {name})", layout
    if m.cls == "MaxPool2d" and layout == "first" and all(isinstance(m.attrs.get(a), int)
                                                          for a in ("kernel_size", "stride", "padding")):
        k, stride, pad = (m.attrs[a] for a in ("kernel_size", "stride", "padding"))
        return f"{var} = max_pool2d({var}, {k}, stride = {stride}, padding = {pad})", layout
    if m.cls == "AdaptiveAvgPool1d" and m.attrs.get("output_size") == 1 and layout == "tokens":   # Swin's pooler
        return f"{name} = spatial_mean({var})", "pooled"
    if m.cls == "AdaptiveAvgPool2d" and m.attrs.get("output_size") == 1 and layout == "first":
        return f"{name} = spatial_mean({var}, keepdim = true)", f"pool:{name}"
    if is_norm(m):
        call = norm_call(m, "@").replace(f"name = {m.name})", f"name = {name})")
        if layout.startswith("pool:") and m.attrs.get("in_rank") == 3:   # DINOv3 ConvNeXt: the pool in front
            tokens = f"concat_seq(flatten_patches({layout[5:]}), flatten_patches({var}))"
            return f"{var} = {call.replace('@', tokens)}", "tokens"
        if m.attrs.get("data_format") == "channels_first" and layout == "first":
            return f"{var} = channels_first({call.replace('@', f'channels_last({var})')})", "first"
        if layout == "first" and m.attrs.get("in_rank") == 2:     # ConvNextModel's final norm: on the mean
            return f"{var} = {call.replace('@', f'spatial_mean({var})')}", "pooled"
        if layout == "first":
            return f"{var} = {call.replace('@', f'channels_last({var})')}", "last"
        return f"{var} = {call.replace('@', var)}", layout
    w = m.params.get("weight")
    if "linear" in m.cls.lower() and w is not None and len(w) == 2:
        arg = f"channels_last({var})" if layout == "first" else var
        bias = "true" if "bias" in m.params else "false"
        return f"{var} = linear({arg}, {sz.size(w[0], 'output size')}, bias = {bias}, name = {name})", \
            "last" if layout not in ("pooled", "tokens") else layout
    if m.cls.endswith("GRN") and layout == "last" and set(m.params) == {"weight", "bias"}:
        return f"{var} = grn({var}, name = {name})", layout
    act = next((v for k, v in ACTIVATIONS.items() if k in m.cls.lower()), None)
    if act is not None and not m.params:
        return f"{var} = {act}({var})", layout
    if not m.params and (m.cls in ("Identity", "Dropout") or "droppath" in m.cls.lower()):
        return None, layout
    return sz.todo(m, "in a convolutional backbone, not a Conv2d, norm, pool, linear, activation or GRN"), layout


def _squeeze_excite(m: Module) -> bool:
    """RegNet's ``RegNetSELayer`` (transformers 5.24 modeling_regnet.py): ``pooler`` (AdaptiveAvgPool2d(1)), then
    ``attention`` (1×1 Conv2d, ReLU, 1×1 Conv2d, Sigmoid), its output times the input."""
    kids = [c.cls for c in m.children]
    return kids == ["AdaptiveAvgPool2d", "Sequential"] and m.children[0].attrs.get("output_size") == 1


def _called_leaves(m: Module) -> list[Module]:
    """The modules without children under ``m`` (itself, if it has none) that ran, in call order; a squeeze-and-
    excitation module whole."""
    if not m.children or _squeeze_excite(m):
        return [m] if m.order is not None else []
    return [x for c in m.children if c.order is not None for x in _called_leaves(c)]


def _chain(mods: list[Module], var: str, source: str, layout: str, sz: Sizer) -> tuple[list[str], str]:
    """Statements of ``mods`` in call order on ``var``, the first reading ``source``; (lines, layout after)."""
    lines = []
    for m in mods:
        for leaf in _called_leaves(m):
            name = leaf.name if leaf is m else leaf.path[len(m.path) - len(m.name):].replace(".", "_")
            if _squeeze_excite(leaf) and layout == "first":
                se, _ = _chain(leaf.children[1].children, "se", "se", "first", sz)
                lines += [f"se = spatial_mean({source}, keepdim = true)   # {name}: squeeze and excitation",
                          *(re.sub(r"name = (\w+)", rf"name = {name}_\1", t) for t in se), f"{var} = {source} * se"]
                source = var
                continue
            line, layout = _leaf(leaf, source, layout, sz, name)
            if line is not None:
                lines.append(line.replace(f"{source} = ", f"{var} = ", 1))
                source = var
    return lines, layout


def _poolformer_layer(layer: Module, sz: Sizer) -> list[str] | None:
    """PoolFormer's layer (transformers 5.24 modeling_poolformer.py ``PoolFormerLayer.forward`` with
    ``use_layer_scale``): ``x + layer_scale_1 · (pool(before_norm(x)) − before_norm(x))``, then ``x + layer_scale_2 ·
    output(after_norm(x))`` (``output``: 1×1 Conv2d C → mlp_ratio·C, activation, 1×1 Conv2d back); the norms
    ``GroupNorm(1, C)``, the pool ``AvgPool2d(k, 1, k // 2, count_include_pad=False)``; else None."""
    names = {c.name: c for c in layer.children}
    out, pool = names.get("output"), names.get("pooling")
    if not {"before_norm", "pooling", "after_norm", "output"} <= set(names) or set(layer.params) != {
            "layer_scale_1", "layer_scale_2"} or pool is None or pool.child("pool") is None:
        return None
    k = pool.child("pool").attrs.get("kernel_size")
    convs = [c for c in out.children if c.cls == "Conv2d"]
    act = next((a for k_, a in ACTIVATIONS.items() for c in out.children if k_ in c.cls.lower()), None)
    if not isinstance(k, int) or len(convs) != 2 or act is None:
        return None
    norm = [names[n] for n in ("before_norm", "after_norm")]
    if any(n.cls.lower().find("groupnorm") < 0 or n.attrs.get("num_groups", 1) != 1 for n in norm):
        return None
    scale = "y = channels_first(layer_scale(channels_last(y)))   # {} [C], per channel"
    return ["y = group_norm(x, 1, name = before_norm)",
            f"y = avg_pool2d(y, {k}, stride = 1, padding = {k // 2}) - y   # pooling", scale.format("layer_scale_1"),
            "x = x + y", "y = group_norm(x, 1, name = after_norm)",
            f"y = {act}({_conv(convs[0], 'y', sz, 'output_conv1')})",
            f"y = {_conv(convs[1], 'y', sz, 'output_conv2')}", scale.format("layer_scale_2"), "x = x + y"]


def _layer(layer: Module, sz: Sizer) -> list[str]:
    """One residual layer on ``x`` (channels first). Its children in call order up to a shortcut (a later child that
    reads the layer's input too and holds parameters: ResNet's ``shortcut``, a strided 1×1 Conv2d and BatchNorm2d)
    on ``y`` from ``x``; the shortcut on ``r`` from ``x``; the layer's own 1-D parameter (ConvNeXt's
    ``layer_scale_parameter``, DINOv3's ``gamma``: ``layer_scale``); then ``x = x + y`` (``y + r``) and the children
    after the shortcut on the sum (ResNet's ``activation``). PoolFormer's layer: :func:`_poolformer_layer`."""
    pool = _poolformer_layer(layer, sz)
    if pool is not None:
        return pool
    kids = [c for c in layer.children if c.order is not None]
    cut = next((i for i, c in enumerate(kids) if i and c.src == "input"), None)
    main, short, after = (kids, [], []) if cut is None else (kids[:cut], [kids[cut]], kids[cut + 1:])
    lines, layout = _chain(main, "y", "x", "first", sz)
    for pname, shape in layer.params.items():
        if len(shape) == 1 and layout == "last":
            sz.size(shape[0], "layer scale")
            lines.append(f"y = layer_scale(y)   # {pname} [C]")
        else:
            lines.append(sz.todo(layer, f"holds {pname} {list(shape)}, not a layer scale"))
    rest, _ = _chain(short, "r", "x", "first", sz)
    lines += rest
    y = "channels_first(y)" if layout == "last" else "y"
    lines.append(f"x = {y} + {'r' if rest else 'x'}")
    after_lines, _ = _chain(after, "x", "x", "first", sz)
    lines += after_lines
    for m in layer.children:
        if m.order is None and m.param_count():
            lines.append(sz.todo(m, "never called, with parameters"))
    return lines


def stage_body(root: Module, sz: Sizer) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of a staged convolutional backbone, or None where ``root`` holds no list of
    stages or the probe set no per-stage symbols. Sets ``sz.stages``."""
    values = sz.probe.symbol_values()
    stages = _stages(root)
    if stages is None or "l_1" not in values or len(stages.children) > STAGES:
        return None
    sz.stages = True
    swin = all(s.child("blocks") is not None for s in stages.children) or all(
        is_token_stage(_layers(s)) for s in stages.children)      # PVT v1's token layers too
    inside = {_layers(s).path + "." for s in stages.children}
    parents = {m.path: m for m in root.walk()}
    leaves = sorted((m for m in root.walk() if not m.children and m.order is not None
                     and not any(m.path.startswith(p) for p in inside)), key=lambda m: m.order)
    first_conv = next((m for m in leaves if m.cls == "Conv2d"), None)
    if first_conv is None:
        return None
    ch = first_conv.params["weight"][1]
    image = values.get("image")
    side = sz.size(image, "image size") if image else "s"     # no image_size field: the input's side, s
    inputs = [f"input pixels[b, {sz.size(ch, 'image channels')}, {side}, {side}]"]
    lines, layout, done, result, now_side = [], "first", set(), "x", side
    for m in leaves:
        for i, stage in enumerate(stages.children):
            layers = _layers(stage)
            starts = min((c.order for c in layers.children if c.order is not None), default=None)
            if i not in done and starts is not None and starts < m.order:
                lines += _stage_lines(i, layers, sz, values, swin, now_side)
                done.add(i)
                result = "x"
        name = m.path.replace(".", "_")
        arg = "pixels" if m is first_conv else "x"
        merging = parents.get(m.path.rpartition(".")[0])
        if merging is not None and merging.cls.endswith("PatchMerging") and layout == "tokens" \
                and m is min(merging.children, key=lambda c: c.order if c.order is not None else 1 << 60):
            arg = "merge_tokens(x, 4)"    # Swin's 2×2 neighbours side by side (a cat: no FLOPs), then its first module
        line, now = _leaf(m, arg, "first" if m.cls == "Conv2d" else layout, sz, name)
        if line is not None and m.cls == "Conv2d" and layout == "tokens":    # SegFormer's next patch embedding
            line = line.replace("conv2d(x,", f"conv2d(unflatten_patches(x, {now_side}),", 1)   # on the map
        if line is not None and m.cls == "Conv2d" and swin:     # Swin's, SegFormer's patches as tokens [b, R^2, C]
            line, now = line.replace("= conv2d(", "= flatten_patches(conv2d(", 1) + ")", "tokens"
        if line is not None and m.cls == "Conv2d":
            now_side = _side_after(m, now_side, sz)
        if line is not None and arg.startswith("merge_tokens"):
            line = "x = " + line.split(" = ", 1)[1]
        if line is not None:
            lines.append(line.replace("pixels = ", "x = ", 1))
            if not line.startswith("#"):
                layout, result = now, line.split(" = ", 1)[0].replace("pixels", "x")
        holder = parents.get(m.path.rpartition(".")[0])
        if holds_positions(holder) and m is last_called(holder) and layout == "tokens":   # PVT v1's positions
            lines += position_lines(holder, sz, now_side)
    for i, stage in enumerate(stages.children):
        if i not in done:
            lines += _stage_lines(i, _layers(stage), sz, values, swin, now_side)
            result = "x"
    lines.append(f"return {result}")   # the last module's output (ResNet's pooler: the pooled map)
    if any("relative_coords" in line for line in lines):    # Swin V2's constant table of window offsets
        inputs.append("input relative_coords[1, (2 * W - 1) * (2 * W - 1), 2]   # relative_coords_table: a buffer "
                      "(no parameters), the position MLP's input")
    return inputs, lines


def _body(layer: Module, sz: Sizer, i: int, swin: bool, side: str = "") -> list[str]:
    """One layer's statements: a Swin layer's (:func:`costgraph.drafting.window_stages.swin_layer_lines`, on stage
    i's side ``image / (2^i·p)``), a SegFormer layer's (on ``side``, the stage's side as its patch embedding left
    it) or a residual convolutional layer's (:func:`_layer`)."""
    if not swin:
        return _layer(layer, sz)
    own = "image / p" if i == 0 else f"image / ({2 ** i} * p)"
    lines = swin_layer_lines(layer, sz, i + 1, own) or swinv2_layer_lines(layer, sz, i + 1, own) \
        or segformer_layer_lines(layer, sz, i + 1, side)
    return lines if lines is not None else [sz.todo(layer, "a Swin layer of a window or heads not probed")]


def _built(layer: Module) -> tuple:
    """``layer.signature()`` without its parameter-free identities: a stochastic-depth module (``SwinDropPath``,
    ``ConvNextDropPath``) where the drop rate is above 0, ``nn.Identity`` where it is 0 (the rate grows with the
    layer's index: transformers 5.24 modeling_swin.py ``SwinEncoder``'s ``torch.linspace(0, drop_path_rate, ...)``);
    both the identity in a forward without training."""
    kids = [c for c in layer.children if c.params or c.children or not (
        c.cls in ("Identity", "Dropout") or "droppath" in c.cls.lower())]
    return (layer.cls, tuple(sorted(layer.params.items())), tuple(c.signature() for c in kids))


def _stage_lines(i: int, layers: Module, sz: Sizer, values: dict, swin: bool = False, side: str = "") -> list[str]:
    """``repeat l_{i+1} as stage_{i+1} { ... }`` of a stage's layers, all built alike; where the first is built
    otherwise (ResNet's first layer of a stage: a shortcut projection, a stride), its statements, then
    ``repeat l_{i+1} - 1``. A layer count that is not the probe's entry is written as a number, with a warning."""
    sym = f"l_{i + 1}"
    kids = layers.children
    n = len(kids)
    count = sym if values.get(sym) == n else str(n)
    if count == sym:
        sz.used.add(sym)
    else:
        sz.warnings.append(f"{layers.path}: {n} layers, not the probe's depths[{i}]: written as a number")
    if n == 0:
        return []
    first = _built(kids[0]) != _built(kids[-1]) if n > 1 else False
    rest = kids[1:] if first else kids
    for other in rest[1:]:
        if _built(other) != _built(rest[0]):
            sz.todos.append(other.path)
            sz.warnings.append(f"{other.path}: built unlike the stage's other layers; left as a TODO")
            break
    out = []
    if first:     # its own statements (a repeat body keeps x's shape): its nodes named stage_{i+1}_first_...
        out += [f"# stage {i + 1}: its first layer, built otherwise",
                *(re.sub(r"name = (\w+)", rf"name = stage_{i + 1}_first_\1", t) for t in _body(kids[0], sz, i, swin, side))]
        count = f"{count} - 1" if count == sym else str(n - 1)
    return out + [f"repeat {count} as stage_{i + 1} {{   # stage {i + 1}: depths[{i}] layers"
                  + (" after the first" if first else ""), *("  " + t for t in _body(rest[0], sz, i, swin, side)), "}"]
