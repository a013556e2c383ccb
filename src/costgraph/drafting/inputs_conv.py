"""The probe input of a convolutional backbone whose config sets no image size (ResNet: transformers 5.24
configuration_resnet.py has ``num_channels`` and the stage lists, no ``image_size``; ``ResNetModel.forward(
pixel_values)``): an image ``[b, num_channels, s, s]`` of the probe's side ``s``
(:meth:`costgraph.drafting.probe.Probe.make`'s ``stages``: a prime of task k28conv12's range times 2^(stages + 1)),
in the model's dtype on the meta device (task k28conv12).
"""

from __future__ import annotations

from .conv_stages import stage_count


def conv_pixels(torch, model, b: int, s: int):
    """``pixel_values`` ``[b, c, s, s]`` for a model whose forward takes ``pixel_values`` and no ``input_ids`` and
    whose config has per-stage lists and ``num_channels`` but no ``image_size``; else None."""
    import inspect

    params = inspect.signature(model.forward).parameters
    cfg = model.config
    if "input_ids" in params or "pixel_values" not in params or not stage_count(cfg) \
            or isinstance(getattr(cfg, "image_size", None), int) or not isinstance(getattr(cfg, "num_channels", None), int):
        return None
    return torch.zeros((b, cfg.num_channels, s, s), dtype=torch.bfloat16, device="meta")
