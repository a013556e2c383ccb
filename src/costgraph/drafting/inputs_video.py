"""The probe input of a video encoder (task k28vision13): ``pixel_values`` ``[b, frames, c, image, image]``, the
layout transformers' video models take (transformers 5.24 modeling_videomae.py ``VideoMAEPatchEmbeddings.forward``:
``batch_size, num_frames, num_channels, height, width = pixel_values.shape``, then ``permute(0, 2, 1, 3, 4)`` for
the ``Conv3d``), at the config's ``num_frames`` and square ``image_size`` (the probe's: ``frames = 2 · tb``,
:mod:`costgraph.drafting.probe_video`), in the model's dtype on the meta device.
"""

from __future__ import annotations

#: the config fields of a video encoder's input: frames, channels, image side
VIDEO_FIELDS = ("num_frames", "num_channels", "image_size")


def video_pixels(torch, model, b: int):
    """``{"pixel_values": [b, frames, c, image, image]}`` for a model whose forward takes ``pixel_values`` and no
    ``input_ids`` and whose config sets whole ``num_frames``, ``num_channels`` and ``image_size``; else None."""
    import inspect

    params = inspect.signature(model.forward).parameters
    cfg = model.config
    if "input_ids" in params or "pixel_values" not in params \
            or not all(isinstance(getattr(cfg, f, None), int) for f in VIDEO_FIELDS):
        return None
    shape = (b, cfg.num_frames, cfg.num_channels, cfg.image_size, cfg.image_size)
    return {"pixel_values": torch.zeros(shape, dtype=torch.bfloat16, device="meta")}
