"""PVT v1's stage embeddings (Wang et al. 2021, Pyramid Vision Transformer; issue 28 item 2; task k28vision2), drafted
from its traced modules. Torch-free: module facts and integers only.

transformers 5.24 modeling_pvt.py ``PvtPatchEmbeddings.forward`` (one per stage, ``PvtEncoder.patch_embeddings[i]``):
``projection`` (Conv2d, kernel = ``strides[i]``, stride = ``patch_sizes[i]``), flattened to tokens ``[B, R², C]``,
``layer_norm``; the last stage's (``cls_token=i == num_encoder_blocks - 1``) puts its ``cls_token [1, 1, C]`` in
front (``torch.cat``: no FLOPs); then adds ``position_embeddings [1, N (+1), C]``, N = ``(image_size // 2^(i+1)
// patch_sizes[i])²`` (``image_size`` itself for stage 0), ``interpolate_pos_encoding`` resampling the N positions
to the map's R × R (``F.interpolate(..., mode="bilinear")``, which PyTorch's FlopCounterMode counts as 0 FLOPs).
With the config's ``patch_sizes`` = ``strides`` ([4, 2, 2, 2]) the map's side R is N's side at every image size
(⌊image/4⌋, then ⌊R/2⌋ a stage), so the draft writes the table's rows as R·R (+1) on the map's side as the stage's
patch embedding left it: the resampling an identity of shape, and the count of parameters the config's.
``PvtEncoder.block[i]`` (a ModuleList of ``PvtLayer``) is drafted by
:func:`costgraph.drafting.reduced_attention.segformer_layer_lines` (the layer of PVT v2 and SegFormer without the
MLP's depthwise convolution: ``PvtFFN`` is ``dense1``, the activation, ``dense2``).
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer


def is_token_stage(layers: Module) -> bool:
    """Whether a stage's list of layers holds Transformer layers on tokens named as PVT v1's (``PvtLayer``: children
    ``attention`` with ``self`` and ``output``, and ``mlp``)."""
    return bool(layers.children) and all(
        c.child("attention") is not None and c.child("mlp") is not None
        and c.find("attention.self") is not None for c in layers.children)


def holds_positions(holder: Module | None) -> bool:
    """Whether ``holder`` is a stage's patch embedding holding its own ``position_embeddings`` (PVT v1's)."""
    return holder is not None and bool(holder.children) and "position_embeddings" in holder.params \
        and set(holder.params) <= {"position_embeddings", "cls_token"}


def last_called(holder: Module) -> Module | None:
    """The child of ``holder`` called last (its ``dropout``, after the positions are added in PVT v1's forward)."""
    called = [c for c in holder.children if c.order is not None]
    return max(called, key=lambda c: c.order) if called else None


def position_lines(holder: Module, sz: Sizer, side: str) -> list[str]:
    """The statements after a PVT v1 stage's patch embedding on tokens ``x`` ``[b, R², C]``, ``side`` the text of R:
    the class token put in front where the module holds one, then the positions added, R·R (+1) rows (the module
    docstring: N = R·R with the config's patch sizes; the probes' parameter counts compare the two)."""
    width = holder.params["position_embeddings"][2]
    front = "cls_token" in holder.params
    c = sz.size(width, "stage width")
    name = holder.path.replace(".", "_")
    r = side if " " not in side else f"({side})"
    lines = []
    if front:
        lines += [f"param {name}_cls_token[1, 1, {c}]",
                  f"x = concat_seq({name}_cls_token, x)   # the class token in front (a cat: no FLOPs)"]
    lines += [f"param {name}_position_embeddings[1, {r} * {r}{' + 1' if front else ''}, {c}]   # "
              "N rows resampled to the map's R x R (bilinear: no FLOPs counted)",
              f"x = x + {name}_position_embeddings"]
    return lines
