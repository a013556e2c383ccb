"""The embeddings of a ViT-family vision encoder, drafted from its traced modules (issue 28 item 2).

transformers 5.24 modeling_vit.py ``ViTPatchEmbeddings.forward``: ``projection(pixel_values).flatten(2).transpose(1,
2)``, a Conv2d of kernel = stride = ``patch_size`` from ``num_channels`` to ``hidden_size``: n = (image/p)² patches
of h. ``ViTEmbeddings.forward`` puts the class token ``cls_token [1, 1, h]`` in front (``torch.cat((cls_tokens,
embeddings), dim=1)``) and adds ``position_embeddings [1, n + 1, h]``; DeiT (modeling_deit.py ``DeiTEmbeddings``)
puts its ``distillation_token`` after the class token (n + 2 positions); DINOv2 (modeling_dinov2.py
``Dinov2Embeddings``) holds a ``mask_token [1, h]`` that a forward without ``bool_masked_pos`` never reads
(parameters only). The drafted statements are those of the bundled ``models/vit.cg`` (``conv2d``,
``flatten_patches``, ``concat_seq``). Torch-free: module facts and integers only.
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer

#: the tokens an embeddings module puts in front of the patches, in the order its forward concatenates them
FRONT = ("cls_token", "distillation_token")


def patch_conv(pre: list[Module]) -> Module | None:
    """The patch embedding's Conv2d called before the layers (weight ``[h, c, p, p]``), else None."""
    return next((m for m in pre if m.cls == "Conv2d" and len(m.params.get("weight", ())) == 4), None)


def _holder(root: Module, conv: Module) -> Module | None:
    """The module above ``conv`` that holds the class token (ViT's ``embeddings``)."""
    return next((m for m in root.walk() if "cls_token" in m.params and conv.path.startswith(m.path + ".")), None)


def vision_embeddings(root: Module, pre: list[Module], sz: Sizer, name: str) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of a vision encoder's embeddings, or None where ``pre`` holds no patch
    Conv2d under a module with a class token. Sets ``sz.seq``, the sequence the layers run (``n + 1``, DeiT's
    ``n + 2``). ``name``: the Conv2d's node name."""
    conv = patch_conv(pre)
    holder = _holder(root, conv) if conv is not None else None
    if holder is None:
        return None
    out, c, k, k2 = conv.params["weight"]
    h, p, ch = sz.size(out, "hidden size"), sz.size(k, "patch size"), sz.size(c, "image channels")
    bias = "true" if "bias" in conv.params else "false"
    lines = [f"x = flatten_patches(conv2d(pixels, {h}, kernel = {p}, stride = {p}, bias = {bias}, name = {name}))"
             "   # [b, n, h], n = (image/p)^2 patches"]
    front = [t for t in FRONT if t in holder.params]
    for t in front:
        lines.append(f"param {t}[1, 1, {h}]")
    for t in reversed(front):
        lines.append(f"x = concat_seq({t}, x)")
    seq = f"n + {len(front)}"
    rows = holder.params.get("position_embeddings")
    if rows is not None:
        lines.append(f"param position_embeddings[1, {seq}, {h}]")
        lines.append("x = x + position_embeddings")
    if "mask_token" in holder.params:
        dims = ", ".join(sz.size(n, "mask token") for n in holder.params["mask_token"])
        lines.append(f"param mask_token[{dims}]   # read only with bool_masked_pos (parameters only)")
    sz.seq = seq
    sz.size(sz.probe.symbol_values().get("image", 0), "image size")   # image is a dimension of the input
    return [f"input pixels[b, {ch}, image, image]"], lines
