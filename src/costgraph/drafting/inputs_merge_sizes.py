"""The probe input of VideoLLaMA3's vision tower run standalone (task k28patch2, issue 28 item 2).

transformers 5.24 modeling_video_llama_3.py ``VideoLlama3VisionModel.forward(pixel_values, grid_thw, merge_sizes)``:
``pixel_values`` ``[n_patches, c·p·p]`` (``VideoLlama3VisionEmbeddings.forward``: ``view(-1, c, p, p)`` into a Conv2d of
kernel = stride = p), ``grid_thw`` ``[images, 3]`` (frames, rows, columns of patches) and ``merge_sizes``
``[images]``, each image's downsampling ratio (``pixel_unshuffle``: a bilinear ``interpolate`` to ``(rows / m, columns
/ m)``, no matrix product); both read on the CPU (``.tolist()``, ``zip``). The rotary ``position_ids`` the forward
derives from them (``vision_utils.get_vision_position_ids(grid_thw, merge_sizes)``, popped from its keyword arguments
when given) are computed here by that function and moved to the meta device, as drafting/inputs_patches.py does.

Convention (the probe's, as drafting/inputs_patches.py's): ``b`` images of one frame each, ``m`` patch rows by ``m·s``
patch columns, ``m`` = :data:`MERGE` (the processor's default ``merge_size`` for images, transformers 5.24
image_processing_video_llama_3.py): ``m²·s`` patches an image, ``s`` image tokens after the downsampling, ``s``
:data:`costgraph.drafting.probe.SHAPES`' prime. Torch is passed in: the module imports none.
"""

from __future__ import annotations

#: the downsampling ratio of every probe image: VideoLLaMA3's image processor's ``merge_size`` default (1 for images;
#: 2 for videos): 2 here so that the patches' count m²·s and the tokens' s differ (no symbol: never read from a shape
#: but as the count the writer reads from ``flattened_patches``)
MERGE = 2


def merge_size_inputs(torch, model, params, b: int, s: int) -> dict | None:
    """``{"pixel_values": [b·m²·s, c·p·p], "grid_thw": [[1, m, m·s]] × b, "merge_sizes": [m] × b}`` for a model whose
    forward takes ``pixel_values``, ``grid_thw`` and ``merge_sizes`` and no ``input_ids``, of integer
    ``num_channels`` and ``patch_size``; else None."""
    cfg = model.config
    if "input_ids" in params or not all(k in params for k in ("pixel_values", "grid_thw", "merge_sizes")):
        return None
    c, p = getattr(cfg, "num_channels", None), getattr(cfg, "patch_size", None)
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (c, p)):
        return None
    m = MERGE
    patches = torch.zeros((b * m * m * s, c * p * p), dtype=torch.bfloat16, device="meta")
    model.flattened_patches = m * m     # on this instance: the trace records the patches an image token holds
    grid, sizes = torch.tensor([[1, m, m * s]] * b), torch.tensor([m] * b)
    from transformers import vision_utils as vu     # the rotary positions, as the forward computes them (CPU), on meta

    return {"pixel_values": patches, "grid_thw": grid, "merge_sizes": sizes,
            "position_ids": vu.get_vision_position_ids(grid, sizes).to("meta")}
