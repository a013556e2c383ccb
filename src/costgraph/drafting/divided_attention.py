"""TimeSformer's divided space-time attention (Bertasius et al. 2021), drafted from its traced modules: the frames'
patch embeddings and one layer (task k28vision13, issue 28 item 2). Torch-free: module facts and integers only.

transformers 5.24 modeling_timesformer.py ``TimesformerPatchEmbeddings.forward``: the video ``[b, f, c, image,
image]`` reshaped to ``[b·f, c, image, image]`` (a view), ``projection`` a Conv2d of kernel = stride = p, flattened:
``[b·f, n, h]``, n = (image/p)². ``TimesformerEmbeddings.forward``: ``cls_token [1, 1, h]`` in front of each frame's
patches, ``position_embeddings [1, n + 1, h]`` added; then (``divided_space_time``) one class token per video
(``embeddings[:batch_size, 0, :]``: the same values), the patches as ``[b·n, f, h]`` plus ``time_embeddings [1, f,
h]``, back to ``[b, n·f, h]`` after the class token: s = n·f + 1 tokens.

``TimesformerLayer.forward`` (``divided_space_time``): the temporal attention (``temporal_layernorm``,
``temporal_attention``: one fused ``qkv`` and ``output.dense``) over the f frames of each of the b·n patches, then
``temporal_dense`` (h → h) added to the patches; the spatial attention (``layernorm_before``, ``attention``) over
each of the b·f frames' n patches and its own copy of the class token (``init_cls_token.repeat(1, num_frames, 1)``);
the f class-token outputs averaged (``torch.mean``), both added to the layer's input; then ``layernorm_after``, the
MLP (``intermediate.dense`` h → i, the activation, ``output.dense`` i → h), added. The costs do not depend on the
token order (the model's permutes are copies): the draft cuts the tokens into windows (``windows``, ``unwindows``)
in the order that gives each attention its sequences.
"""

from __future__ import annotations

from .blocks import norm_call
from .facts import Module

#: the children of a divided space-time layer, as modeling_timesformer.py names them
PARTS = ("temporal_layernorm", "temporal_attention", "temporal_dense", "layernorm_before", "attention",
         "layernorm_after", "intermediate", "output")


def _attention(x: str, norm: Module, attention: Module, name: str) -> str | None:
    """The std block of TimeSformer's ``TimeSformerAttention`` (one fused ``attention.qkv``, biased where the config's
    ``qkv_bias``, and ``output.dense``: the same FLOPs and parameters as separate q, k, v) on ``norm`` of ``x``; None
    where ``attention`` is not one."""
    qkv, out = attention.find("attention.qkv"), attention.find("output.dense")
    if qkv is None or out is None:
        return None
    has = (lambda m: "true" if "bias" in m.params else "false")
    return (f"gqa_attention({norm_call(norm, x)}, a, a, h / a, qkv_bias = {has(qkv)}, out_bias = {has(out)}, "
            f"rotary = false, name = {name})")


def divided_embeddings(holder: Module, conv: Module, sz, names) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of TimeSformer's embeddings (``holder`` holds ``time_embeddings``), or None.
    Sets ``sz.seq`` and ``sz.seq_dims`` (s = n·f + 1)."""
    values = sz.probe.symbol_values()
    need = ("cls_token", "position_embeddings", "time_embeddings")
    if not all(t in holder.params for t in need) or not all(k in values for k in ("f", "image", "p")):
        return None
    out, c, k, _ = conv.params["weight"]
    h, p, ch = sz.size(out, "hidden size"), sz.size(k, "patch size"), sz.size(c, "image channels")
    n = (values["image"] // values["p"]) ** 2
    if holder.params["position_embeddings"][-2] != n + 1 or holder.params["time_embeddings"][-2] != values["f"]:
        return None
    sz.size(values["f"], "frames")
    sz.size(values["image"], "image size")
    bias = "true" if "bias" in conv.params else "false"
    lines = [f"x = flatten_patches(conv2d(pixels, {h}, kernel = {p}, stride = {p}, bias = {bias}, "
             f"name = {names(conv)}))   # [b·f, n, h]: each frame's patches",
             f"param cls_token[1, 1, {h}]", "x = concat_seq(cls_token, x)",
             f"param position_embeddings[1, n + 1, {h}]", "x = x + position_embeddings",
             "cls = slice_seq(unwindows(slice_seq(x, 1), f), 1)   # one class token per video [b, 1, h] (the same "
             "values)",
             f"param time_embeddings[1, f, {h}]",
             "x = unwindows(windows(unwindows(slice_seq(x, n), f), n) + time_embeddings, n)"
             "   # the patches [b·n, f, h] + the frames' positions, then [b, n·f, h]",
             "x = concat_seq(cls, x)"]
    sz.seq = "n * f + 1"
    sz.seq_dims = ['  dim n = (image / p) * (image / p) "patches per frame, (image/p)^2"',
                   '  dim s = n * f + 1 "sequence length: the patches of every frame and the class token"']
    frames = f"input pixels[b * f, {ch}, image, image]   # the model's [b, f, c, image, image] as b·f frames (a view)"
    return [frames], lines


def divided_layer_lines(layer: Module, sz) -> list[str] | None:
    """The statements of one divided space-time layer on ``x`` ``[b, n·f + 1, h]``, or None where ``layer`` is not
    one (its parts, the probe's heads ``a``, frames ``f``)."""
    kids = {c.name: c for c in layer.children}
    values = sz.probe.symbol_values()
    if any(p not in kids for p in PARTS) or not all(k in values for k in ("a", "f", "h")):
        return None
    up, down = kids["intermediate"].child("dense"), kids["output"].child("dense")
    dense = kids["temporal_dense"]
    temporal = _attention("windows(t, n)", kids["temporal_layernorm"], kids["temporal_attention"], "temporal_attention")
    spatial = _attention("y", kids["layernorm_before"], kids["attention"], "attention")
    if up is None or down is None or "weight" not in dense.params or temporal is None or spatial is None:
        return None
    sz.used.update({"a", "h"})
    i = sz.size(up.params["weight"][0], "MLP width")
    has = (lambda m: "true" if "bias" in m.params else "false")
    return [
        "c0 = slice_seq(x, 1)   # the class token [b, 1, h]",
        "t = slice_seq(x, n * f)   # the patches of every frame [b, n·f, h]",
        f"t = t + linear(unwindows({temporal}, n), h, bias = {has(dense)}, name = temporal_dense)"
        "   # each patch's f frames",
        "y = concat_seq(windows(merge_seq(repeat_kv(split_seq(c0, 1), f)), f), windows(t, f))"
        "   # each frame's n patches after its copy of the class token [b·f, n + 1, h]",
        f"y = {spatial}",
        "yc = split_seq(spatial_mean(channels_first(split_seq(unwindows(slice_seq(y, 1), f), f))), b)"
        "   # the f class-token outputs averaged [b, 1, h]",
        "x = concat_seq(c0, t) + concat_seq(yc, unwindows(slice_seq(y, n), f))",
        f"x = x + mlp({norm_call(kids['layernorm_after'], 'x')}, {i}, bias = {has(up)}, dropout = false, "
        f"name = mlp)",
    ]
