"""A dual encoder's probe inputs (issue 28 item 2, task k28dual13): token ids for the text tower and an image for the
vision tower, in one forward.

transformers' contrastive dual encoders (transformers 5.24 modeling_clip.py ``CLIPModel.forward(input_ids,
pixel_values, ...)``, modeling_siglip.py ``SiglipModel.forward``) run the text tower on ``input_ids`` [b, s] and the
vision tower on ``pixel_values`` [b, c, image, image], then compare every image with every text
(``torch.matmul(text_embeds, image_embeds.t())``); without pixels the forward fails ("You have to specify
pixel_values"). Such a model is told by its learned ``logit_scale`` (a parameter of the model itself: CLIP's
``nn.Parameter(torch.tensor(logit_scale_init_value))``) beside a ``text_config`` and a ``vision_config``; a
vision-language model (LLaVA: ``text_config`` and ``vision_config``, no logit scale) keeps its text forward. The b
images and the b texts are one batch (b image-text pairs: logits ``[b, b]``). Torch is passed in (the drafter's
``require``); nothing is imported at module load.
"""

from __future__ import annotations

import inspect


def is_dual(torch, model) -> bool:
    """Whether ``model`` is a dual encoder of text and images: a ``logit_scale`` parameter of its own, a
    ``text_config`` and a ``vision_config`` whose image size and channels are whole numbers, and a forward taking
    ``input_ids`` and ``pixel_values``."""
    cfg = model.config
    vision, text = getattr(cfg, "vision_config", None), getattr(cfg, "text_config", None)
    params = inspect.signature(model.forward).parameters
    return isinstance(getattr(model, "logit_scale", None), torch.nn.Parameter) and text is not None \
        and vision is not None and "input_ids" in params and "pixel_values" in params \
        and all(isinstance(getattr(vision, f, None), int) for f in ("num_channels", "image_size"))


def dual_inputs(torch, model, b: int, s: int) -> dict | None:
    """``{"input_ids": [b, s], "pixel_values": [b, c, image, image]}`` (zeros on meta: long ids, the image in the
    model's bfloat16, at the vision config's channels and size) for a dual encoder (:func:`is_dual`), else None."""
    if not is_dual(torch, model):
        return None
    vision = model.config.vision_config
    return {"input_ids": torch.zeros((b, s), dtype=torch.long, device="meta"),
            "pixel_values": torch.zeros((b, vision.num_channels, vision.image_size, vision.image_size),
                                        dtype=torch.bfloat16, device="meta")}
