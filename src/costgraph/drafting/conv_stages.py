"""The body of a hierarchical convolutional backbone (ConvNeXt, ConvNeXt V2), drafted stage by stage (issue 28
items 1 and 2; task k28conv12).

Per-stage lists. A config of such a backbone sets one entry per stage: ``hidden_sizes`` (the channels of stage i)
and ``depths`` (its layers) in transformers 5.24 configuration_convnext.py. Entry i (from 0) is the symbol
``h_{i+1}`` (``l_{i+1}``), named in the draft's ``dim`` as ``hidden_sizes[i]`` (``depths[i]``) and probed at primes
of its own (:data:`costgraph.drafting.probe.STAGE_LISTS`); the number of stages stays the config's (the lists'
length, ``num_stages``). The draft writes one block per stage, ``repeat l_i as stage_i { ... }``, of the stage's
layers, after the modules the stage calls before them (ConvNeXt's ``downsampling_layer``: a channels-first
LayerNorm, then a Conv2d of kernel = stride = 2 from ``h_{i}`` to ``h_{i+1}``).

The statements follow the traced modules in call order. transformers 5.24 modeling_convnext.py
``ConvNextEmbeddings.forward``: ``patch_embeddings`` (Conv2d, kernel = stride = ``patch_size``), then a
channels-first ``ConvNextLayerNorm`` (``permute(0, 2, 3, 1)``, LayerNorm over the channels, ``permute(0, 3, 1,
2)``). ``ConvNextLayer.forward``: ``dwconv`` (Conv2d 7×7, padding 3, groups = channels), ``permute(0, 2, 3, 1)``,
``layernorm``, ``pwconv1`` (Linear C → 4C), ``act``, [``grn``: ConvNeXt V2], ``pwconv2`` (4C → C), [``layer_scale_
parameter`` × ·], ``permute(0, 3, 1, 2)``, ``residual + drop_path(·)``. ``ConvNextModel.forward``:
``layernorm(last_hidden_state.mean([-2, -1]))``. Kernel sizes, strides, paddings that the modeling code fixes
(7, 3, 2) are written as numbers; sizes as symbols through :class:`costgraph.drafting.writer.Sizer`. A strided
output side is PyTorch's ``⌊(n + 2·padding − k)/stride⌋ + 1`` (the ``conv2d`` rule of
:mod:`costgraph.ops.vision`); the probes' images are chosen so that every stage halves a whole side
(:meth:`costgraph.drafting.probe.Probe.make`'s ``stages``). Torch-free: module facts and integers only.
"""

from __future__ import annotations

from .blocks import is_norm, norm_call
from .facts import Module
from .probe import STAGE_LISTS, STAGES
from .writer import Sizer

#: activation modules by a part of their class name (transformers' ``ACT2FN`` classes: GELUActivation, ...)
ACTIVATIONS = {"gelu": "gelu", "relu": "relu", "silu": "silu", "tanh": "tanh"}


def stage_count(config) -> int:
    """The stages of a config whose :data:`STAGE_LISTS` fields are lists of one length, 1 … :data:`STAGES`; else 0."""
    lists = [getattr(config, f, None) for f in STAGE_LISTS]
    lists = [v for v in lists if isinstance(v, (list, tuple))]
    if len(lists) != len(STAGE_LISTS) or len({len(v) for v in lists}) != 1:
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


def _stages(root: Module) -> Module | None:
    """The ModuleList of stages: each child holds a ModuleList ``layers`` (ConvNeXt's ``encoder.stages``)."""
    for m in root.walk():
        if m.cls == "ModuleList" and m.children and all(
                c.child("layers") is not None and c.child("layers").cls == "ModuleList" for c in m.children):
            return m
    return None


def _conv(m: Module, arg: str, sz: Sizer, name: str) -> str | None:
    """``conv2d(...)`` of a Conv2d, its geometry from the trace's attributes; None where one is missing."""
    w = m.params.get("weight")
    k, stride, pad, groups = (m.attrs.get(a) for a in ("kernel_size", "stride", "padding", "groups"))
    if m.cls != "Conv2d" or w is None or len(w) != 4 or not all(isinstance(v, int) for v in (k, stride, pad, groups)):
        return None
    out = sz.size(w[0], "output channels")
    text = f"conv2d({arg}, {out}, kernel = {sz.size(k, 'kernel') if k > 7 else k}"
    if stride != 1:
        text += f", stride = {sz.size(stride, 'stride') if stride > 7 else stride}"
    if pad:
        text += f", padding = {pad}"
    if groups != 1:
        text += f", groups = {sz.size(groups, 'groups')}"
    if "bias" not in m.params:
        text += ", bias = false"
    return text + f", name = {name})"


def _leaf(m: Module, var: str, layout: str, sz: Sizer, name: str) -> tuple[str | None, str]:
    """(statement on ``var`` or None, the layout after it: ``first`` [B, C, H, W], ``last`` [B, H, W, C],
    ``pooled`` [B, C]) of one module called outside a residual layer or inside one."""
    conv = _conv(m, var if layout == "first" else f"channels_first({var})", sz, name) if m.cls == "Conv2d" else None
    if conv is not None:
        return f"{var} = {conv}", "first"
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
            "last" if layout != "pooled" else layout
    if m.cls.endswith("GRN") and layout == "last" and set(m.params) == {"weight", "bias"}:
        return f"{var} = grn({var}, name = {name})", layout
    act = next((v for k, v in ACTIVATIONS.items() if k in m.cls.lower()), None)
    if act is not None and not m.params:
        return f"{var} = {act}({var})", layout
    if not m.params and (m.cls in ("Identity", "Dropout") or "droppath" in m.cls.lower()):
        return None, layout
    return sz.todo(m, "in a convolutional backbone, not a Conv2d, norm, linear, activation or GRN"), layout


def _layer(layer: Module, sz: Sizer) -> list[str]:
    """One residual layer on ``x`` (channels first): its modules on ``y`` from ``x``, the layer's own 1-D parameter
    (``layer_scale_parameter``, ``gamma``: ``layer_scale``) after them, then ``x = x + y``."""
    lines, layout, var = [], "first", "x"
    for m in (c for c in layer.children if c.order is not None):
        line, layout = _leaf(m, var, layout, sz, m.name)
        if line is not None:
            line = line.replace(f"{var} = ", "y = ", 1)
            lines.append(line)
            var = "y"
    for pname, shape in layer.params.items():
        if len(shape) == 1 and layout == "last":
            sz.size(shape[0], "layer scale")
            lines.append(f"y = layer_scale(y)   # {pname} [C]")
        else:
            lines.append(sz.todo(layer, f"holds {pname} {list(shape)}, not a layer scale"))
    lines.append("x = x + channels_first(y)" if layout == "last" else "x = x + y")
    for m in layer.children:
        if m.order is None and m.param_count():
            lines.append(sz.todo(m, "never called, with parameters"))
    return lines


def stage_body(root: Module, sz: Sizer) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of a staged convolutional backbone, or None where ``root`` holds no list of
    stages or the probe set no per-stage symbols. Sets ``sz.stages``."""
    values = sz.probe.symbol_values()
    stages = _stages(root)
    if stages is None or "h_1" not in values or len(stages.children) > STAGES:
        return None
    sz.stages = True
    inside = {s.child("layers").path + "." for s in stages.children}
    leaves = sorted((m for m in root.walk() if not m.children and m.order is not None
                     and not any(m.path.startswith(p) for p in inside)), key=lambda m: m.order)
    first_conv = next((m for m in leaves if m.cls == "Conv2d"), None)
    if first_conv is None:
        return None
    ch = first_conv.params["weight"][1]
    image = values.get("image")
    side = sz.size(image, "image size") if image else "image"
    inputs = [f"input pixels[b, {sz.size(ch, 'image channels')}, {side}, {side}]"]
    lines, layout, done = [], "first", set()
    for m in leaves:
        for i, stage in enumerate(stages.children):
            layers = stage.child("layers")
            starts = min((c.order for c in layers.children if c.order is not None), default=None)
            if i not in done and starts is not None and starts < m.order:
                lines += _stage_lines(i, layers, sz, values)
                done.add(i)
        name = m.path.replace(".", "_")
        arg = "pixels" if m is first_conv else "x"
        line, now = _leaf(m, arg, layout, sz, name)
        if line is not None:
            lines.append(line.replace("pixels = ", "x = ", 1))
            layout = now
    for i, stage in enumerate(stages.children):
        if i not in done:
            lines += _stage_lines(i, stage.child("layers"), sz, values)
    lines.append("return x")
    return inputs, lines


def _stage_lines(i: int, layers: Module, sz: Sizer, values: dict) -> list[str]:
    """``repeat l_{i+1} as stage_{i+1} { ... }`` of a stage's layers (all built alike), or the layer count as a
    number with a warning where it is not the probe's entry."""
    sym = f"l_{i + 1}"
    n = len(layers.children)
    count = sym if values.get(sym) == n else str(n)
    if count == sym:
        sz.used.add(sym)
    else:
        sz.warnings.append(f"{layers.path}: {n} layers, not the probe's depths[{i}]: written as a number")
    if n == 0:
        return []
    body = _layer(layers.children[0], sz)
    for other in layers.children[1:]:
        if other.signature() != layers.children[0].signature():
            sz.todos.append(other.path)
            sz.warnings.append(f"{other.path}: built unlike the stage's first layer; left as a TODO")
            break
    return [f"repeat {count} as stage_{i + 1} {{   # stage {i + 1}: depths[{i}] layers",
            *("  " + t for t in body), "}"]
