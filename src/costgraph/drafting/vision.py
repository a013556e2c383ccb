"""The embeddings of a ViT-family vision encoder, drafted from its traced modules (issue 28 item 2).

transformers 5.24 modeling_vit.py ``ViTPatchEmbeddings.forward``: ``projection(pixel_values).flatten(2).transpose(1,
2)``, a Conv2d of kernel = stride = ``patch_size`` from ``num_channels`` to ``hidden_size``: n = (image/p)² patches
of h. ``ViTEmbeddings.forward`` puts the class token ``cls_token [1, 1, h]`` in front (``torch.cat((cls_tokens,
embeddings), dim=1)``) and adds ``position_embeddings [1, n + 1, h]``; DeiT (modeling_deit.py ``DeiTEmbeddings``)
puts its ``distillation_token`` after the class token (n + 2 positions); DINOv2 (modeling_dinov2.py
``Dinov2Embeddings``) holds a ``mask_token [1, h]`` that a forward without ``bool_masked_pos`` never reads
(parameters only). CLIP (modeling_clip.py ``CLIPVisionEmbeddings``) names its class token ``class_embedding [h]``
and holds its positions as a table ``position_embedding = nn.Embedding(n + 1, h)`` read at ``position_ids`` (every
row, in order: a gather of the whole table, no FLOPs), written as the parameter ``[1, n + 1, h]`` added, as the
bundled ``models/clip.cg`` writes it; SigLIP (modeling_siglip.py ``SiglipVisionEmbeddings``) and I-JEPA
(modeling_ijepa.py ``IJepaEmbeddings``) put no token in front: n positions. DINOv2 with registers
(modeling_dinov2_with_registers.py ``Dinov2WithRegistersEmbeddings.forward``) adds the positions to the class token
and the patches, then puts ``register_tokens [1, n_r, h]`` between them (``torch.cat((embeddings[:, :1],
register_tokens, embeddings[:, 1:]), dim=1)``): n + 1 + n_r positions. The drafted statements are those of the
bundled ``models/vit.cg`` (``conv2d``, ``flatten_patches``, ``concat_seq``). Torch-free: module facts and integers
only.
"""

from __future__ import annotations

from fractions import Fraction

from .blocks import is_norm, norm_call
from .facts import Module
from .writer import Sizer

#: the tokens an embeddings module puts in front of the patches, in the order its forward concatenates them
FRONT = ("cls_token", "class_embedding", "distillation_token")
#: the parameter or table of the learned positions (ViT's parameter, CLIP's and SigLIP's nn.Embedding)
POSITIONS = ("position_embeddings", "position_embedding")


def patch_conv(pre: list[Module]) -> Module | None:
    """The patch embedding's Conv2d called before the layers (weight ``[h, c, p, p]``), else None."""
    return next((m for m in pre if m.cls == "Conv2d" and len(m.params.get("weight", ())) == 4), None)


def _table(holder: Module) -> Module | None:
    """The nn.Embedding of the positions under ``holder`` (CLIP's ``position_embedding``), else None."""
    return next((c for c in holder.children if c.name in POSITIONS and "embedding" in c.cls.lower()
                 and len(c.params.get("weight", ())) == 2), None)


def _holder(root: Module, conv: Module) -> Module | None:
    """The lowest module above ``conv`` that holds a token put in front of the patches or the positions (ViT's
    ``embeddings``), else None."""
    above = [m for m in root.walk() if conv.path.startswith(m.path + ".") and m.path]
    return next((m for m in sorted(above, key=lambda m: -len(m.path)) if any(t in m.params for t in FRONT)
                 or any(t in m.params for t in POSITIONS) or _table(m) is not None), None)


def _rows(rows: int, sz: Sizer, front: int, text: str) -> str:
    """The positions' rows: ``n`` plus the ``front`` tokens in front (``text``: their count in symbols) where they are
    that many, else the size as read."""
    values = sz.probe.symbol_values()
    n = (values.get("image", 0) // max(values.get("p", 1), 1)) ** 2
    return ("n" if front == 0 else f"n + {text}") if rows == n + front else sz.size(rows, "position rows")


def _front_counts(holder: Module, sz: Sizer, tokens: list[str]) -> tuple[list[str], int, str]:
    """(each token's count as text, their total, the total in symbols) of the ``tokens`` that ``holder`` puts in front
    of the patches: one of each of :data:`FRONT` (ViT's ``cls_token [1, 1, h]``, CLIP's ``class_embedding [h]``) but
    Pixio's ``n_cls_tokens`` class tokens (transformers 5.24 modeling_pixio.py ``PixioEmbeddings.__init__``:
    ``cls_token [1, n_cls_tokens, h]``, put in front whole: ``torch.cat((cls_tokens, embeddings), dim=1)``), read as
    their symbol ``n_c``. The total's text: the symbols, then the single tokens as one number (DeiT's ``2``)."""
    counts = [holder.params[t][-2] if len(holder.params[t]) == 3 else 1 for t in tokens]
    texts = [sz.size(c, "class tokens") if c > 1 else "1" for c in counts]
    ones = counts.count(1)
    total = " + ".join([t for t, c in zip(texts, counts) if c > 1] + ([str(ones)] if ones else []))
    return texts, sum(counts), total


def _half(n: int, sz: Sizer) -> str:
    """``n`` in symbols, or half of ``2·n`` so written (MLCD's ``class_pos_emb [1, h / a / 2]``: the rotary table's
    row of the class token, half a head: transformers 5.24 modeling_mlcd.py ``MLCDVisionModel.__init__``)."""
    text = sz.size(n, "parameter size", quiet=True)
    return text if not text.isdigit() or n == 1 else f"{sz.size(2 * n, 'parameter size')} / 2"


def _root_params(root: Module, holder: Module, sz: Sizer) -> list[str]:
    """``param`` statements of the model's own parameters (read by its forward, no FLOPs counted: MLCD's
    ``class_pos_emb``)."""
    if root is holder:
        return []
    return [f"param {name}[{', '.join(_half(n, sz) for n in shape)}]   # read by the forward (parameters only)"
            for name, shape in root.params.items() if name not in root.tied]


def _kept(holder: Module, front: int) -> str | None:
    """The positions ViT-MAE's random masking keeps, or None for an embeddings module without it. transformers 5.24
    modeling_vit_mae.py ``ViTMAEEmbeddings.random_masking``: ``len_keep = int(seq_length * (1 - mask_ratio))`` of the
    n patches (the positions added first), then the class token in front. Convention (named in the draft): the
    encoder's forward as pretraining runs it, at the config's ``mask_ratio`` (0.75: a quarter of the patches), the
    fraction kept written as the exact fraction of ``1 - mask_ratio`` (``floor(n / 4) + 1``); ``mask_ratio`` 0 (a
    fine-tuning or feature-extraction forward) keeps all n. The costs are the same for any order of the kept rows."""
    ratio = holder.attrs.get("mask_ratio")
    if not isinstance(ratio, float) or not 0 < ratio < 1:
        return None
    keep = Fraction(1 - ratio).limit_denominator(1000)
    part = f"n / {keep.denominator}" if keep.numerator == 1 else f"{keep.numerator} * n / {keep.denominator}"
    return f"floor({part}) + {front}" if front else f"floor({part})"


def _norm_line(m: Module, names) -> str:
    return f"x = {norm_call(m, 'x').replace(f'name = {m.name})', f'name = {names(m)})')}"


def vision_embeddings(root: Module, pre: list[Module], sz: Sizer, names) -> tuple[list[str], list[str], set] | None:
    """(input declarations, statements, the ids of the modules of ``pre`` they draft) of a vision encoder's
    embeddings, or None where ``pre`` holds no patch Conv2d under a module with a class token or positions. Sets
    ``sz.seq``, the sequence the layers run (``n + 1``, DeiT's ``n + 2``, SigLIP's ``n``). ``names``: a module's node
    name (model_file's ``_Names``). A norm of the embeddings module is drafted where its forward calls it (AIMv2's
    ``rms_norm`` of the patches, before the positions: modeling_aimv2.py ``Aimv2VisionEmbeddings.forward``)."""
    conv = patch_conv(pre)
    holder = _holder(root, conv) if conv is not None and "image" in sz.probe.symbol_values() else None
    if holder is None:      # no patch Conv2d, or no image probed (a speech model's Conv2d subsampling): not a tower
        return None
    out, c, k, k2 = conv.params["weight"]
    h, p, ch = sz.size(out, "hidden size"), sz.size(k, "patch size"), sz.size(c, "image channels")
    bias = "true" if "bias" in conv.params else "false"
    lines = [f"x = flatten_patches(conv2d(pixels, {h}, kernel = {p}, stride = {p}, bias = {bias}, "
             f"name = {names(conv)}))   # [b, n, h], n = (image/p)^2 patches"]
    table = _table(holder)
    norms = [m for m in pre if is_norm(m) and m.path.startswith(holder.path + ".")]
    late = [m for m in norms if table is None or table.order is None or m.order > table.order]
    lines += [_norm_line(m, names) for m in norms if all(m is not x for x in late)]
    front = [t for t in FRONT if t in holder.params]
    counts, ahead, ahead_text = _front_counts(holder, sz, front)
    for t, count in zip(front, counts):
        lines.append(f"param {t}[1, {count}, {h}]")
    for t in reversed(front):
        lines.append(f"x = concat_seq({t}, x)")
    seq = f"n + {ahead_text}" if front else "n"
    rows = holder.params.get("position_embeddings", table.params["weight"] if table is not None else None)
    if rows is not None:
        pos = "position_embeddings" if table is None else table.name
        lines.append(f"param {pos}[1, {_rows(rows[-2], sz, ahead, ahead_text)}, {h}]"
                     + ("   # nn.Embedding read at every row, in order (position_ids)" if table is not None else ""))
        lines.append(f"x = x + {pos}")
    registers = holder.params.get("register_tokens")
    if registers is not None and registers[1]:      # after the class token in the model: the same sizes and costs as in front
        r = sz.size(registers[1], "register tokens")
        lines += [f"param register_tokens[1, {r}, {h}]",
                  "x = concat_seq(register_tokens, x)   # the model puts them after the class token (no FLOPs)"]
        seq = f"{seq} + {r}"
    if "mask_token" in holder.params:
        dims = ", ".join(sz.size(n, "mask token") for n in holder.params["mask_token"])
        lines.append(f"param mask_token[{dims}]   # read only with bool_masked_pos (parameters only)")
    lines += [_norm_line(m, names) for m in late]
    lines += _root_params(root, holder, sz)
    kept = _kept(holder, len(front))
    if kept is not None:
        seq = kept
        lines.append(f"x = slice_seq(x, s)   # random masking keeps s = {kept} of the n + {ahead_text} positions "
                     f"(mask_ratio {holder.attrs['mask_ratio']}: the pretraining forward; 0 keeps every patch)")
    sz.seq = seq
    sz.size(sz.probe.symbol_values().get("image", 0), "image size")   # image is a dimension of the input
    return [f"input pixels[b, {ch}, image, image]"], lines, {id(conv), *(id(m) for m in norms)}

