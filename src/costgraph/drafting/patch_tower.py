"""The body of a VLM's vision tower run standalone on flattened patches (issue 28 item 2, task k28patch13).

The towers of Qwen2-VL's line (transformers 5.24 modeling_qwen3_5.py ``Qwen3_5VisionModel``, modeling_qwen3_vl.py
``Qwen3VLVisionModel``, modeling_glm4v.py ``Glm4vVisionModel``, ...) share one form: ``patch_embed.proj``, a Conv3d of
kernel = stride = ``(tp, p, p)`` over the patches the forward takes flattened (``[n, c·tp·p·p]``, viewed as ``[n, c,
tp, p, p]``: one output pixel a patch, the same products and weights as a linear map of the ``c·tp·p·p`` values of
each patch to h); learned positions resampled to each image's grid (Qwen3-VL's ``pos_embed`` table of
``num_position_embeddings`` rows, bilinear; GLM-4V's ``embeddings.position_embedding`` of ``(image_size / p)²``
rows, ``grid_sample``: gathers and weighted sums, no matrix product, parameters only under the ``matmul``
convention); ``blocks``, each a pre-norm attention over each image's patches (one fused ``qkv``, rotary positions,
``proj``) and a pre-norm MLP; then the merger: m × m neighbouring patches (``spatial_merge_size``, consecutive in
the patches' order, ``get_vision_position_ids``' block-major layout) concatenated into one token of m²·h
(``merge_tokens``), through linears (GLM-4V's ``downsample``, a Conv2d of kernel = stride = m over the m × m block:
the same products as a linear of the m²·h values), norms and a gated MLP (GLM-4V's ``Glm4vVisionPatchMerger``).

Convention: the probe's input (:mod:`costgraph.drafting.inputs_patches`): ``b`` images, each of m²·s patches, s
image tokens after the merger. The layers run each image's m²·s patches (transformers' eager attention splits
the packed patches by image, ``cu_seqlens``: the costs of ``[b, m²·s, h]``). Torch-free: module facts only.
"""

from __future__ import annotations

import re

from .blocks import _linear, is_norm, norm_call
from .facts import Module
from .writer import Sizer, layer_lines

#: the modules of the tower's form (module docstring)
PATCH_EMBED, LAYERS, MERGER = "patch_embed", "blocks", "merger"
#: the learned position tables, resampled to each image's grid (parameters only)
POSITION_TABLES = ("pos_embed", "position_embedding")


def _conv3d(root: Module) -> Module | None:
    """``patch_embed.proj``: a Conv3d (weight ``[h, c, tp, p, p]``) or a Conv2d (GLM-Image's ``[h, c, p, p]``)."""
    embed = root.child(PATCH_EMBED)
    conv = embed.child("proj") if embed is not None else None
    dims = {"Conv3d": 5, "Conv2d": 4}
    return conv if conv is not None and len(conv.params.get("weight", ())) == dims.get(conv.cls) else None


def _patch_linear(root: Module) -> Module | None:
    """Cosmos3-Edge's ``embeddings.patch_embedding``: a Linear of the flattened patches (c·p·p → h); or VideoLLaMA3's
    (transformers 5.24 modeling_video_llama_3.py ``VideoLlama3VisionEmbeddings``: a Conv2d of kernel = stride = p
    over each patch viewed as ``[c, p, p]``, weight ``[h, c, p, p]``: a linear map of its c·p·p values; k28patch2)."""
    embed = root.child("embeddings")
    lin = embed.child("patch_embedding") if embed is not None else None
    if lin is not None and lin.cls == "Conv2d" and len(lin.params.get("weight", ())) == 4:
        return lin
    return lin if lin is not None and _linear(lin) is not None else None


def patch_tower_body(root: Module, sz: Sizer) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of a tower of the module docstring's form, else None."""
    given = root.attrs.get("flattened_patches")     # m², where the probe gave the tower flattened patches
    conv = _conv3d(root) or (_patch_linear(root) if isinstance(given, int) else None)
    layers = root.child(LAYERS) or root.find("encoder.layers")
    merged = [m for m in root.walk() if m.path.startswith(MERGER) and not m.children and m.order is not None]
    if conv is None or layers is None or not layers.children or sz.probe.s is None:
        return None
    values = sz.probe.symbol_values()
    if conv.cls == "Linear":
        out, patch = conv.params["weight"]
    else:
        out, c, *kernel = conv.params["weight"]
        patch = c * kernel[0] * kernel[1] * (kernel[2] if len(kernel) == 3 else 1)
    h = sz.size(out, "hidden size")
    first = min((c.order for c in layers.children if c.order is not None), default=None)
    last = max((c.order for c in layers.children if c.order is not None), default=None)
    if first is None:
        return None
    # m² patches an image token: read from the merger; a tower without one (Cosmos3-Edge's: the language model's
    # projector merges) runs the m²·s patches the probe gave it, m² recorded by the trace (GLM-Image's m is 1)
    group = _group(root, out) if merged else given if isinstance(given, int) else 1
    if group is None or (isinstance(given, int) and group != given):
        return None
    width = sz.size(patch, "patch values")
    fulls = root.attrs.get("fullatt_block_indexes")     # Qwen2.5-VL's window attention (:func:`_windowed`)
    unit = _window_unit(sz, conv, group) if isinstance(fulls, tuple) else ""
    if unit is None:
        return None
    n = (f"{group} * {unit} * s" if unit else f"{group} * s") if group > 1 else "s"
    tokens = ", s image tokens after the merger" if merged else ", s image tokens after the language model's m × m merge"
    inputs = [f"input patches[b, {n}, {width}]   # b images of {n} flattened patches (c·tp·p·p values each)"
              + ((f", s windows of {unit} image tokens" if unit else tokens) if group > 1 else "")]
    lines = [f"x = linear(patches, {h}, bias = {_yes('bias' in conv.params)}, name = {PATCH_EMBED})   # the "
             f"{conv.cls} of kernel = stride = the patch over each flattened patch: a linear map"
             if conv.cls != "Linear" else f"x = linear(patches, {h}, bias = {_yes('bias' in conv.params)}, "
                                          f"name = {conv.name})"]
    leaves = sorted((m for m in root.walk() if not m.children and m.order is not None
                     and not m.path.startswith(layers.path + ".") and m is not conv), key=lambda m: m.order)
    read = [m for m in root.walk() if m.name in POSITION_TABLES and m.order is None]   # GLM-4V's: its weight read
    for m in [m for m in leaves if m.order < first] + read:
        line = _pre_line(m, sz, values)
        if line is None:
            return None
        lines += [line] if line else []
    rotary = any("rotary" in m.cls.lower() for m in root.walk())
    body = _block_lines(layers.children[0], sz, rotary) or (layer_lines(layers.children[0], sz, rotary)
                                                             if conv.name == "patch_embedding" else None)
    if body is not None and unit:
        body = _windowed(body, fulls)
    if body is None:
        return None
    count = "l" if values.get("l") == len(layers.children) else str(len(layers.children))
    if count == "l":
        sz.used.add("l")
    deep = _deepstack(root, sz, out, group)
    if deep is None:
        return None
    lines += deep[0] + [f"repeat {count} as {layers.name}[j] {{", *("  " + t for t in body + deep[1]), "}"]
    after = [m for m in leaves if m.order > last]
    post = _post_lines(after, sz, out, group) if after else []
    if post is None:
        return None
    lines += post or ["x = x"]
    lines[-1] = "return " + lines[-1].split(" = ", 1)[1]
    return inputs, lines


def _node(m: Module) -> str:
    """The node name of ``m``: its own, or with its parent's where it is a position in a Sequential (Qwen2.5-VL's
    ``merger.mlp.0``: ``mlp_0``, as the bundled models/qwen2_vl.cg names it)."""
    if m.name.isidentifier():
        return m.name
    return "_".join(m.path.split(".")[-2:]) if "." in m.path else f"m_{m.name}"


def _yes(flag: bool) -> str:
    return "true" if flag else "false"


def _group(root: Module, h: int) -> int | None:
    """m²: the patches merged into one token, read from the first merger linear whose input is a multiple of h."""
    for m in sorted((m for m in root.walk() if m.path.startswith(MERGER) or m.name == "downsample"),
                    key=lambda m: m.order if m.order is not None else 1 << 30):
        w = m.params.get("weight", ())
        if m.cls == "Conv2d" and len(w) == 4 and w[1] == h:
            return w[2] * w[3]
        f = _linear(m)
        if f is not None and f[0] % h == 0 and f[0] > h:
            return f[0] // h
    return None


def _pre_line(m: Module, sz: Sizer, values: dict) -> str | None:
    """The statement of a module called before the layers: a norm, a position table (parameters only); "" for a
    module without parameters (the rotary table); None for any other."""
    if not m.params:
        return ""
    if is_norm(m):
        return f"x = {norm_call(m, 'x')}"
    w = m.params.get("weight", ())
    if m.name in POSITION_TABLES and "embedding" in m.cls.lower() and len(w) == 2:
        rows = _rows(w[0], sz, values)
        return (f"param {m.name}[{rows}, {sz.size(w[1], 'hidden size')}]   # learned positions resampled to each "
                "image's grid: gathers and weighted sums (no matrix product)")
    return None


def _rows(n: int, sz: Sizer, values: dict) -> str:
    """A position table's rows: GLM-4V's (image / p)² (``Glm4vVisionEmbeddings``: ``num_patches``), else as read."""
    image, p = values.get("image"), values.get("p")
    if isinstance(image, int) and isinstance(p, int) and p and n == (image // p) ** 2:
        sz.used.update(("image", "p"))
        return "(image / p) * (image / p)"
    return sz.size(n, "position rows")


def _block_lines(layer: Module, sz: Sizer, rotary: bool) -> list[str] | None:
    """A block's statements: pre-norm attention, pre-norm MLP, each added to the residual."""
    norm1, norm2, attn, mlp = (layer.child(n) for n in ("norm1", "norm2", "attn", "mlp"))
    if None in (norm1, norm2, attn, mlp) or not (is_norm(norm1) and is_norm(norm2)):
        return None
    a, f = _attention(attn, norm_call(norm1, "x"), sz, rotary), _mlp(mlp, norm_call(norm2, "x"), sz)
    if a is None or f is None:
        return None
    return [f"x = x + {a}", f"x = x + {f}"]


def _attention(m: Module, arg: str, sz: Sizer, rotary: bool) -> str | None:
    """``gqa_attention`` of a fused ``qkv`` (heads · head size · 3 columns) and ``proj``, rotary where the tower has
    a rotary table (GLM-Image's has none: its learned positions alone), QK-norm where the module holds ``q_norm`` and
    ``k_norm`` (GLM-OCR's RMSNorm of a head), else None."""
    qkv, o = _linear(m.child("qkv")), _linear(m.child("proj"))
    heads = m.attrs.get("num_heads")
    if qkv is None or o is None or not isinstance(heads, int) or o[0] % heads:
        return None
    head = o[0] // heads
    kv = m.attrs.get("num_key_value_heads", heads)    # EXAONE 4.5's tower: grouped K and V heads in the fused qkv
    if not isinstance(kv, int) or qkv[1] != (heads + 2 * kv) * head:
        return None
    norms = [m.child(n) for n in ("q_norm", "k_norm")]
    if any(n is not None for n in norms) and not all(n is not None and "rms" in n.cls.lower()
                                                     and n.params.get("weight") == (head,) for n in norms):
        return None
    a, d = sz.size(heads, "attention heads"), sz.size(head, "head size")
    g = sz.size(kv, "key/value heads") if kv != heads else a
    opts = [f"qkv_bias = {_yes(qkv[2])}", f"out_bias = {_yes(o[2])}"] + (["qk_norm = true"] if norms[0] else []) \
        + ([] if rotary else ["rotary = false"]) + (["causal = false"] if m.attrs.get("is_causal") is False else [])
    return f"gqa_attention({arg}, {a}, {g}, {d}, {', '.join(opts)}, name = {m.name})"


def _mlp(m: Module, arg: str, sz: Sizer) -> str | None:
    """A gated MLP (``gate_proj``, ``up_proj``, ``down_proj``: ``swiglu``) or two linears (``linear_fc1``,
    ``linear_fc2``; GLM-Image's ``fc1``, ``fc2``: ``mlp``, its activation costing nothing under ``matmul``), else
    None."""
    gate, up, down = (_linear(m.child(n)) for n in ("gate_proj", "up_proj", "down_proj"))
    if None not in (gate, up, down) and gate[2] == up[2] == down[2]:
        return f"swiglu({arg}, {sz.size(up[1], 'MLP width')}, bias = {_yes(up[2])}, name = {m.name})"
    fc1, fc2 = _linear(m.child("linear_fc1", "fc1")), _linear(m.child("linear_fc2", "fc2"))
    if fc1 is not None and fc2 is not None and fc1[2] == fc2[2]:
        return f"mlp({arg}, {sz.size(fc1[1], 'MLP width')}, bias = {_yes(fc1[2])}, dropout = false, name = {m.name})"
    return None


def _post_lines(leaves: list[Module], sz: Sizer, width: int, group: int) -> list[str] | None:
    """The statements after the layers, in call order: norms; linears (the first whose input is m² times the width
    merges m² tokens first, ``merge_tokens``); GLM-4V's ``downsample`` Conv2d (kernel = stride = m: a linear of the
    merged tokens); a gated MLP (``gate_proj``, ``up_proj``, ``down_proj`` under one parent: ``swiglu``, written at
    its first); activations (no FLOPs; GELU written). None for a module of another kind."""
    lines, done = [], set()
    for m in leaves:
        if m.path in done:
            continue
        parent = m.path.rsplit(".", 1)[0] if "." in m.path else ""
        w = m.params.get("weight", ())
        if m.name in ("gate_proj", "up_proj", "down_proj"):
            trio = [x for x in leaves if x.path in {f"{parent}.{n}" for n in ("gate_proj", "up_proj", "down_proj")}]
            fs = [_linear(x) for x in trio]
            if len(trio) != 3 or None in fs or len({f[2] for f in fs}) != 1:
                return None
            up = next(f for x, f in zip(trio, fs) if x.name == "up_proj")
            lines.append(f"x = swiglu(x, {sz.size(up[1], 'MLP width')}, bias = {_yes(up[2])}, "
                         f"name = {parent.rsplit('.', 1)[-1]})")
            done.update(x.path for x in trio)
            done.update(x.path for x in leaves if x.path == f"{parent}.act_fn")
            continue
        if not m.params:
            if "gelu" in m.cls.lower():
                lines.append("x = gelu(x)")
            continue
        if is_norm(m):
            n = w[0] if w else None
            if n == width * group and group > 1:
                lines.append(f"x = merge_tokens(x, {group})   # m × m neighbouring patches into one token (a view)")
                width *= group
            elif n != width:
                return None
            lines.append(f"x = {norm_call(m, 'x')}")
            continue
        if m.cls == "Conv2d" and len(w) == 4 and w[1] == width and w[2] * w[3] == group:
            lines.append(f"x = linear(merge_tokens(x, {group}), {sz.size(w[0], 'merged width')}, "
                         f"bias = {_yes('bias' in m.params)}, name = {m.name})   # Conv2d of kernel = stride = m "
                         "over each m × m block of patches: a linear map of the merged token")
            width = w[0]
            continue
        f = _linear(m)
        if f is None:
            return None
        if f[0] == width * group and group > 1:
            lines.append(f"x = merge_tokens(x, {group})   # m × m neighbouring patches into one token (a view)")
            width *= group
        if f[0] != width:
            return None
        lines.append(f"x = linear(x, {sz.size(f[1], 'merger width')}, bias = {_yes(f[2])}, name = {_node(m)})")
        width = f[1]
    return lines or None


#: Qwen3-VL's mergers of the outputs of some layers (module docstring of :func:`_deepstack`)
DEEPSTACK = "deepstack_merger_list"


def _deepstack(root: Module, sz: Sizer, h: int, group: int) -> tuple[list[str], list[str]] | None:
    """(parameter statements before the layers, statements in the layers' repeat) of Qwen3-VL's DeepStack mergers,
    ([], []) for a tower without them, None where they are not of the form below.

    transformers 5.24 modeling_qwen3_vl.py ``Qwen3VLVisionModel.forward``: after layer ``j`` in
    ``deepstack_visual_indexes`` (``[8, 16, 24]``), ``deepstack_merger_list[k]`` (k: j's place in the list) merges
    that layer's output; ``Qwen3VLVisionPatchMerger`` with ``use_postshuffle_norm=True``: ``norm(x.view(-1, m²·h))``
    (LayerNorm of m²·h), ``linear_fc1`` (m²·h → m²·h), GELU, ``linear_fc2`` (m²·h → out_hidden_size). Every merger's
    parameters exist whatever the layer count; one runs only where its layer does (a config of fewer layers than
    an index: the probes' 11 and 13 layers run the first). So the parameters are bare ``param`` statements, counted
    once, and each merger's products are ``linear``s tied to them inside ``if j in [index]`` (a tied linear: the
    weight read, no parameters of its own; the biases added, and the norm's γ and β applied to a ``layernorm`` of no
    weight of its own, as the parameters: no FLOPs under ``matmul``)."""
    mergers = root.child(DEEPSTACK)
    indexes = root.attrs.get("deepstack_visual_indexes")
    if mergers is None:
        return [], []
    if not isinstance(indexes, tuple) or len(indexes) != len(mergers.children):
        return None
    params, body = [], []
    for k, (j, m) in enumerate(zip(indexes, mergers.children)):
        norm, fc1, fc2 = (m.child(n) for n in ("norm", "linear_fc1", "linear_fc2"))
        f1, f2 = _linear(fc1), _linear(fc2)
        if None in (norm, f1, f2) or norm.params.get("weight") != (h * group,) or f1[0] != h * group \
                or f2[0] != f1[1] or not (f1[2] and f2[2]) or set(m.params) or len(m.children) != 4:
            return None
        name = f"{DEEPSTACK}_{k}"
        wide, w1, w2 = sz.size(h * group, "merged width"), sz.size(f1[1], "merger width"), \
            sz.size(f2[1], "merger width")
        params += [f"param {name}_norm_weight[{wide}]", f"param {name}_norm_bias[{wide}]",
                   f"param {name}_linear_fc1[{w1}, {wide}]", f"param {name}_linear_fc1_bias[{w1}]",
                   f"param {name}_linear_fc2[{w2}, {w1}]", f"param {name}_linear_fc2_bias[{w2}]"]
        body += [f"if j in [{j}] {{   # {DEEPSTACK}.{k} merges layer {j}'s output (DeepStack)",
                 f"  y = layernorm(merge_tokens(x, {group}), weight = false) * {name}_norm_weight + {name}_norm_bias",
                 f"  y = gelu(linear(y, {w1}, bias = false, tied = {name}_linear_fc1) + {name}_linear_fc1_bias)",
                 f"  y = linear(y, {w2}, bias = false, tied = {name}_linear_fc2) + {name}_linear_fc2_bias",
                 "}"]
    return params, body


def _window_unit(sz: Sizer, conv: Module, group: int) -> str | None:
    """The patches of one window over m² (u², u = ``window_size / (m·p)`` image tokens a side: transformers 5.24
    vision_utils.py ``get_vision_window_index``, ``vit_merger_window_size = window_size // spatial_merge_size //
    patch_size``), written ``(W / (m * p)) * (W / (m * p))``; None where the probe's W is no such multiple."""
    values, m = sz.probe.symbol_values(), int(round(group ** 0.5))
    window, p = values.get("W"), conv.params["weight"][-1]
    if m * m != group or not isinstance(window, int) or window % (m * p) or sz.size(p, "patch size") != "p":
        return None
    sz.used.add("W")
    side = f"(W / ({m} * p))"
    return f"{side} * {side}"


def _windowed(body: list[str], fulls: tuple) -> list[str]:
    """A block of Qwen2.5-VL's tower (modeling_qwen2_5_vl.py ``Qwen2_5_VisionTransformerPretrainedModel.forward``):
    the layers of ``fullatt_block_indexes`` attend over each image's patches, the others within each window
    (``cu_window_seqlens``): the patches, put in window order before the layers (``permute_input_for_window_attn``,
    a gather: no FLOPs) and back after the merger (``argsort``), split into the image's s windows
    (``windows(x, s)``: ``[b·s, 4u², h]``) around the attention."""
    attn, mlp = body
    inner = attn.split("x = x + ", 1)[1]
    norm_end = inner.index("), ") + 1                 # gqa_attention(NORM(x, name = ...), ...
    head, rest = inner[:norm_end], inner[norm_end:]
    window = head.replace("gqa_attention(", "gqa_attention(windows(", 1) + ", s)" + rest
    window = re.sub(r"name = (\w+)\)", r"name = \1_window)", window)     # each branch's nodes named apart
    listed = ", ".join(str(j) for j in fulls)
    return [f"if j in [{listed}] {{   # fullatt_block_indexes: attention over the whole image", "  " + attn,
            "} else {   # attention within each of the image's s windows", f"  x = x + unwindows({window}, s)", "}",
            mlp]
