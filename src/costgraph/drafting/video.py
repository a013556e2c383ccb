"""The embeddings of a video encoder, drafted from its traced modules (task k28vision13, issue 28 item 2).

transformers 5.24 modeling_videomae.py ``VideoMAEPatchEmbeddings``: the video ``[b, f, c, image, image]`` is permuted
to ``[b, c, f, image, image]`` (a view) and cut into tubelets by ``nn.Conv3d(c, h, kernel_size=(tubelet_size, p, p),
stride=(tubelet_size, p, p))``, then ``flatten(2).transpose(1, 2)``: n = (f/tb)·(image/p)² tokens of h.
``VideoMAEEmbeddings.forward`` adds ``get_sinusoid_encoding_table(num_patches, hidden_size)``, a fixed table held as
a plain tensor (no parameter, no buffer: the add is one element-wise op, no FLOPs under ``matmul``) and puts no token
in front (s = n). ViViT (modeling_vivit.py ``VivitEmbeddings``) puts ``cls_token [1, 1, h]`` in front and adds
``position_embeddings [1, n + 1, h]``: the statements of :mod:`.vision` for them. TimeSformer's frames, each a
Conv2d's patches: :mod:`.divided_attention`. Torch-free: module facts and
integers only.
"""

from __future__ import annotations

from .facts import Module
from .divided_attention import divided_embeddings
from .vision import FRONT, patch_conv
from .writer import Sizer


def tubelet_conv(pre: list[Module]) -> Module | None:
    """The tubelet embedding's Conv3d called before the layers (weight ``[h, c, tb, p, p]``), else None."""
    return next((m for m in pre if m.cls == "Conv3d" and len(m.params.get("weight", ())) == 5), None)


def video_embeddings(root: Module, pre: list[Module], sz: Sizer, names) -> tuple[list[str], list[str], set] | None:
    """(input declarations, statements, the ids of the modules of ``pre`` they draft) of a video encoder's tubelet
    embeddings, or None where ``pre`` holds no tubelet Conv3d or the probe sets no frames. Sets ``sz.seq`` and
    ``sz.seq_dims`` (n = (f/tb)·(image/p)² tubelets, s the sequence the layers run)."""
    conv = tubelet_conv(pre)
    values = sz.probe.symbol_values()
    frames = patch_conv(pre)
    holder = next((m for m in root.walk() if frames is not None and m.path and frames.path.startswith(m.path + ".")
                   and "time_embeddings" in m.params), None)
    if conv is None and holder is not None:       # TimeSformer's frames, each cut into patches
        divided = divided_embeddings(holder, frames, sz, names)
        return None if divided is None else (*divided, {id(frames)})
    if conv is None or not all(k in values for k in ("f", "image")):
        return None
    out, c, kt, k, k2 = conv.params["weight"]
    if k != k2:
        return None
    h, p, ch, tb = (sz.size(out, "hidden size"), sz.size(k, "patch size"), sz.size(c, "image channels"),
                    sz.size(kt, "tubelet frames"))
    bias = "true" if "bias" in conv.params else "false"
    lines = [f"x = flatten_patches(conv3d(pixels, {h}, kernel = {p}, stride = {p}, kernel_t = {tb}, stride_t = {tb}, "
             f"bias = {bias}, name = {names(conv)}))   # [b, n, h], n = (f/tb)·(image/p)^2 tubelets"]
    holder = next((m for m in root.walk() if m.path and conv.path.startswith(m.path + ".")
                   and any(t in m.params for t in (*FRONT, "position_embeddings"))), None)
    front = [t for t in FRONT if holder is not None and t in holder.params]
    for t in front:
        lines += [f"param {t}[1, 1, {h}]", f"x = concat_seq({t}, x)"]
    seq = f"n + {len(front)}" if front else "n"
    rows = holder.params.get("position_embeddings") if holder is not None else None
    if rows is not None:
        n = values["f"] // max(kt, 1) * (values["image"] // max(k, 1)) ** 2
        if rows[-2] != n + len(front):
            return None
        lines += [f"param position_embeddings[1, {seq}, {h}]", "x = x + position_embeddings"]
    elif not front:
        lines.append("# + a fixed sinusoidal position table (a tensor of the model, no parameters; one add)")
    sz.size(values["f"], "frames")
    sz.size(values["image"], "image size")
    sz.seq = seq
    sz.seq_dims = ['  dim n = (f / tb) * (image / p) * (image / p) "tubelets: (f/tb)·(image/p)^2"',
                   f'  dim s = {seq} "sequence length: the tubelets and the tokens put in front of them"']
    return ([f"input pixels[b, {ch}, f, image, image]   # the model's [b, f, c, image, image], permuted (a view)"],
            lines, {id(conv)})
