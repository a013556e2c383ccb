"""Square image and patch sizes written as ``[height, width]`` lists (task k28patch2, issue 28 item 2).

InternVL's vision tower (transformers 5.24 configuration_internvl.py ``InternVLVisionConfig``: ``image_size=[448,
448]``, ``patch_size=[14, 14]``; Qianfan-OCR's the same) holds both sizes as lists, which the probe's integer fields
(``probe.FIELDS``' ``image_size`` → ``image``, ``patch_size`` → ``p``) do not take. Convention: a config whose
``image_size`` and ``patch_size`` are both two equal entries (a square image of square patches, as every default
config of these types is) is probed as ``[image, image]`` and ``[p, p]`` at the probe's own values of ``image`` and
``p`` (``p·q``, ``p``: ``probe.Probe.make``), read back as ``image_size[0]`` and ``patch_size[0]``; the probe image is
``[b, c, image, image]`` (:func:`pixels_of`). A config of unequal entries (a non-square image) is not marked and
fails as before. Torch-free at import: torch is passed in.

No new primes: ``image`` and ``p`` are the probe's own (``primes.PRIMES``' ``p``, ``q``).
"""

from __future__ import annotations

#: the marker :func:`costgraph.drafting.api._present` puts among the present fields of a config of square list sizes
SQUARE_LISTS = "image_size[i, i], patch_size[p, p]"
#: the list fields and the probe symbol each is read back as
LIST_FIELDS = {"image_size": "image", "patch_size": "p"}


def _square(value) -> bool:
    """Whether ``value`` is a list or tuple of two equal positive whole numbers."""
    return isinstance(value, (list, tuple)) and len(value) == 2 and value[0] == value[1] \
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)


def square_lists(config) -> bool:
    """Whether ``config`` (a transformers config object) has ``image_size`` and ``patch_size`` both square lists
    (module docstring) and ``num_channels`` a whole number."""
    c = getattr(config, "num_channels", None)
    return all(_square(getattr(config, f, None)) for f in LIST_FIELDS) and isinstance(c, int) and c > 0


def list_values(probe, present, p: dict):
    """``probe`` with ``image_size = [p·q, p·q]`` and ``patch_size = [p, p]`` (``p``: this probe's primes) where
    :data:`SQUARE_LISTS` is in ``present``, read back as ``image`` (``image_size[0]``) and ``p``
    (``patch_size[0]``); its traced ``s`` the patches and the class token, ``q² + 1`` (``probe._input_length``'s
    for an integer image size); ``probe`` unchanged otherwise."""
    if SQUARE_LISTS not in present:
        return probe
    side = {"image": p["p"] * p["q"], "p": p["p"]}
    for name, symbol in LIST_FIELDS.items():
        probe.fields[name] = [side[symbol], side[symbol]]
        probe.symbols[symbol] = (side[symbol], f"{name}[0]")
    probe.s = p["q"] ** 2 + 1
    return probe


def pixels_of(torch, model, params, b: int) -> dict | None:
    """``{"pixel_values": [b, c, image, image]}`` (bfloat16 zeros, meta device) for a vision encoder (forward of
    ``pixel_values`` and no ``input_ids``) whose config has square list sizes (:func:`square_lists`); else None."""
    cfg = model.config
    if "input_ids" in params or "pixel_values" not in params or not square_lists(cfg):
        return None
    side = cfg.image_size[0]
    return {"pixel_values": torch.zeros((b, cfg.num_channels, side, side), dtype=torch.bfloat16, device="meta")}
