"""The embeddings of the Audio Spectrogram Transformer (AST: a ViT over a log-mel spectrogram), drafted from its traced
modules (issue 28 item 2).

transformers 5.24 modeling_audio_spectrogram_transformer.py: ``ASTPatchEmbeddings.forward`` reads ``input_values``
``[b, max_length, num_mel_bins]`` as ``input_values.unsqueeze(1).transpose(2, 3)`` ``[b, 1, mel, time]`` (a view) and
runs ``Conv2d(1, h, kernel_size=(patch_size, patch_size), stride=(frequency_stride, time_stride))``, overlapping
patches (stride 10 < kernel 16 by default): ``⌊(mel − p)/f⌋ + 1`` by ``⌊(time − p)/t⌋ + 1`` patches, flattened;
``ASTEmbeddings.forward`` puts ``cls_token`` and ``distillation_token`` in front and adds ``position_embeddings [1, n + 2,
h]``, whose rows ``ASTEmbeddings.get_shape`` computes from the config: the spectrogram's size is the config's
(``num_mel_bins``, ``max_length``), and so are the patch size and strides: written as numbers (the probe leaves
``patch_size`` at the config's value). ``ASTModel`` ends with its LayerNorm; its pooled output, the mean of the two
front tokens, has no parameters. The layers are ViT's. Torch-free: module facts and integers only.
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer

#: the tokens ASTEmbeddings puts in front of the patches, in its forward's order
FRONT = ("cls_token", "distillation_token")


def spectrogram_embeddings(root: Module, conv: Module, sz: Sizer, name: str) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of AST's embeddings, or None where ``conv`` is not a one-channel Conv2d of a
    square kernel and equal strides under a module holding both front tokens and the position table (the vision
    encoders' patch convolution, kernel = stride, is :mod:`costgraph.drafting.vision`'s). Sets ``sz.seq`` and
    ``sz.front_dims`` (n and s = n + 2)."""
    out, ch, k, k2 = conv.params["weight"]
    stride, shape = conv.attrs.get("stride"), str(conv.attrs.get("in_shape", "")).split(",")
    holder = next((m for m in root.walk() if all(t in m.params for t in (*FRONT, "position_embeddings"))
                   and conv.path.startswith(m.path + ".")), None)
    if holder is None or ch != 1 or k != k2 or not isinstance(stride, int) or stride == k or len(shape) != 4 \
            or int(conv.attrs.get("padding", 0)) != 0:
        return None
    mel, time = int(shape[2]), int(shape[3])
    n = ((mel - k) // stride + 1) * ((time - k) // stride + 1)
    if holder.params["position_embeddings"][1] != n + 2:
        return None
    h = sz.size(out, "hidden size")
    bias = "true" if "bias" in conv.params else "false"
    lines = [f"x = flatten_patches(conv2d(spectrogram, {h}, kernel = {k}, stride = {stride}, bias = {bias}, "
             f"name = {name}))   # [b, n, h]: overlapping patches"]
    lines += [f"param {t}[1, 1, {h}]" for t in FRONT]
    lines += [f"x = concat_seq({t}, x)" for t in reversed(FRONT)]
    lines += [f"param position_embeddings[1, n + 2, {h}]", "x = x + position_embeddings"]
    sz.seq = "n + 2"
    sz.front_dims = [f'  dim n = (floor(({mel} - {k}) / {stride}) + 1) * (floor(({time} - {k}) / {stride}) + 1) '
                     f'"patches: frequency by time (num_mel_bins {mel}, max_length {time}, patch {k}, stride {stride}: '
                     'the config\'s)"',
                     '  dim s = n + 2 "sequence length: the patches, the class and distillation tokens"']
    return [f"input spectrogram[b, 1, {mel}, {time}]   # input_values [b, max_length, num_mel_bins] as "
            "ASTPatchEmbeddings reads it (unsqueeze(1).transpose(2, 3), a view)"], lines
