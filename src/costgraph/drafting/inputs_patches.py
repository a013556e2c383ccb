"""The probe input of a VLM's vision tower run standalone on flattened patches (issue 28 item 2, task k28patch13).

transformers 5.24 modeling_qwen2_5_vl.py ``Qwen2_5_VisionTransformerPretrainedModel.forward(hidden_states, grid_thw)``
(and Qwen3-VL's, GLM-4V's, ... towers of the same form): ``hidden_states`` ``[n_patches, c·tp·p·p]``, every image's
patches flattened (``Qwen2_5_VisionPatchEmbed.forward``: ``hidden_states.view(-1, c, tp, p, p)`` into a Conv3d of
kernel = stride = ``(tp, p, p)``), and ``grid_thw`` ``[images, 3]``: each image's (frames / tp, rows, columns) of
patches, read on the CPU (``vision_utils.get_vision_position_ids``: ``grid_thw.tolist()``).

Convention (the probe's): ``b`` images of one frame group each (``t = 1``), each ``m`` patch rows by ``m·s`` patch
columns (``m``: the config's ``spatial_merge_size``): ``m²·s`` patches an image, ``s`` image tokens after the merger
(m × m patches merged into one). A tower of window attention (Qwen2.5-VL's) gets ``m·u`` rows by ``m·u·s`` columns:
``s`` whole windows of u × u image tokens an image (:func:`window_probe`). ``s`` is :data:`costgraph.drafting.probe.SHAPES`' prime, so the patches' count
``m²·s`` and the merged tokens' ``s`` read back as sizes. The patches are zeros in the model's bfloat16 on the meta
device; ``grid_thw`` on the CPU (transformers reads it with ``.tolist()``). Torch is passed in: the module imports
none.

The tensors the tower derives from ``grid_thw`` on the CPU and then combines with the meta activations (the rotary
``position_ids``; Qwen3-VL's ``interp_indices`` and ``interp_weights`` of its learned position table; Qwen2.5-VL's
``window_index``) are computed here by transformers' own functions (``transformers.vision_utils``:
``get_vision_position_ids``, ``get_vision_interpolation_indices_and_weights``, ``get_vision_window_index``, with the
arguments the tower's forward passes them) and given to the forward as the keyword arguments those functions pop
(``kwargs.pop("position_ids")``, ...), moved to the meta device; the sequence boundaries (``cu_seqlens``,
``cu_window_seqlens``) stay on the CPU, where the eager attention splits the images with ``.tolist()``. Index
arithmetic only: no FLOPs of the count change. GLM-4V's learned positions (modeling_glm4v.py
``Glm4vVisionEmbeddings.forward(embeddings, lengths, image_shapes, h_coords, w_coords)``, resampled by
``grid_sample``) take the image lengths and ``grid_thw`` as the root's forward made them on the CPU: on this model
instance only, a forward pre-hook moves them to the activations' device (meta) before that module runs.
"""

from __future__ import annotations

#: the forward parameters of the flattened patches (Qwen2.5-VL's ``hidden_states``, GLM-Image's ``pixel_values``)
PATCHES = ("hidden_states", "pixel_values")
#: the forward parameters of the patch grid of each image
GRIDS = ("grid_thw", "image_grid_thw")


def patch_inputs(torch, model, params, b: int, s: int) -> dict | None:
    """``{"hidden_states": [b·m²·s, c·tp·p·p], "grid_thw": [[1, m, m·s]] × b}`` for a model whose forward takes
    ``hidden_states`` and ``grid_thw`` and no ``input_ids`` and whose config has ``patch_size``,
    ``temporal_patch_size``, ``in_channels`` and ``spatial_merge_size`` (module docstring); else None.
    ``params``: the forward's signature parameters."""
    cfg = model.config
    key = next((k for k in PATCHES if k in params), None)
    grid_key = next((k for k in GRIDS if k in params), None)
    if "input_ids" in params or key is None or grid_key is None:
        return None
    c = getattr(cfg, "in_channels", None) or getattr(cfg, "num_channels", None)
    sizes = [c, getattr(cfg, "temporal_patch_size", 1), getattr(cfg, "patch_size", None),
             getattr(cfg, "spatial_merge_size", None)]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
        return None
    c, tp, p, m = sizes
    u = window_units(model, m)      # Qwen2.5-VL's windows: s whole windows of u × u image tokens an image
    patches = torch.zeros((b * m * m * u * u * s, c * tp * p * p), dtype=torch.bfloat16, device="meta")
    grid = torch.tensor([[1, m * u, m * u * s]] * b)
    _resampled_on_meta(torch, model)
    model.flattened_patches = m * m     # on this instance: the trace records the patches an image token holds
    return {key: patches, grid_key: grid, **_derived(torch, model, grid, m)}


#: the window side in image tokens (merge units) of each probe of a tower of window attention: small counts, never
#: read from a shape (the draft writes them as ``W / (m·p)``, W the probed window_size), different at the two probes
WINDOW_UNITS = (2, 3)
#: the tower attribute that marks window attention (modeling_qwen2_5_vl.py ``fullatt_block_indexes``)
FULL_LAYERS = "fullatt_block_indexes"


def window_units(model, m: int) -> int:
    """u, the window side in image tokens of a tower of window attention (its ``window_size // m // patch_size``,
    transformers 5.24 vision_utils.py ``get_vision_window_index``'s ``vit_merger_window_size``), else 1."""
    cfg = model.config
    window, p = getattr(cfg, "window_size", None), getattr(cfg, "patch_size", None)
    if getattr(cfg, FULL_LAYERS, None) is None or not isinstance(window, int) or not isinstance(p, int):
        return 1
    return max(window // m // p, 1)


def window_probe(out: dict, config, probe) -> None:
    """At a probe of a tower of window attention (Qwen2.5-VL's: ``fullatt_block_indexes`` beside ``window_size``,
    in pixels), ``window_size`` set to u·m·p, u = :data:`WINDOW_UNITS` of the probe (m: the config's
    ``spatial_merge_size``, p: the probe's patch size), in the probe's fields and its symbol W too: the probe's own
    W (a token window of another meaning) would leave no whole window. ``out``: the probe's config dict."""
    m, p = getattr(config, "spatial_merge_size", None), probe.fields.get("patch_size")
    if getattr(config, FULL_LAYERS, None) is None or "window_size" not in probe.fields or not isinstance(m, int) \
            or not isinstance(p, int):
        return
    value = WINDOW_UNITS[probe.index] * m * p
    out["window_size"] = probe.fields["window_size"] = value
    probe.symbols["W"] = (value, "window_size")


def _derived(torch, model, grid, m: int) -> dict:
    """The keyword arguments of the tensors derived from ``grid`` (module docstring), those the tower reads."""
    from transformers import vision_utils as vu

    meta = {"position_ids": vu.get_vision_position_ids(grid, m)}
    side = getattr(model, "num_grid_per_side", None)
    if isinstance(side, int) and hasattr(model, "pos_embed"):     # Qwen3-VL's learned positions, resampled
        meta["interp_indices"], meta["interp_weights"] = vu.get_vision_interpolation_indices_and_weights(
            grid, num_grid_per_side=side, mode=getattr(model, "interpolation_mode", "bilinear"),
            align_corners=getattr(model, "interpolation_align_corners", False), spatial_merge_size=m)
    out = {k: v.to("meta") for k, v in meta.items()}
    window, patch = getattr(model, "window_size", None), getattr(model, "patch_size", None)
    if isinstance(window, int) and isinstance(patch, int) and hasattr(model, "permute_input_for_window_attn"):
        index, bounds = vu.get_vision_window_index(grid, spatial_merge_size=m, window_size=window, patch_size=patch)
        out.update(window_index=index.to("meta"), cu_window_seqlens=bounds)
    return out


def _resampled_on_meta(torch, model) -> None:
    """GLM-4V's position resampler (module docstring): its CPU tensor arguments moved to the meta device by a
    forward pre-hook on this instance's ``embeddings``; nothing for a tower without one."""
    import inspect

    embeddings = getattr(model, "embeddings", None)
    if embeddings is None or "image_shapes" not in inspect.signature(embeddings.forward).parameters:
        return

    def to_meta(module, args):
        return tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)

    embeddings.register_forward_pre_hook(to_meta)
