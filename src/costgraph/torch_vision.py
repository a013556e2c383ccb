"""Image encoders for ``costgraph verify`` (:mod:`costgraph.torch_measure`'s
``build_model`` for ``VISION_TYPES``): transformers' class of a vision
``config.json`` built on the meta device, its forward taking ``pixel_values``.
``torch`` is passed in by the caller (which has checked it is installed), so
this module imports nothing of costgraph's and torch only when called.
"""
from __future__ import annotations


def build_vision(torch, model_type: str, config_dict: dict, *, train: bool = True, dtype: str = "bfloat16",
                 attn_implementation: str = "eager", **_):
    """An image encoder of ``VISION_TYPES`` on meta (bf16, eager attention, train mode): the
    class its ``architectures`` names (``ViTForImageClassification`` through
    ``AutoModelForImageClassification``), else what ``AutoModel`` builds (``ViTModel`` with its
    pooler). Wrapped so that the probes' forward takes ``pixel_values`` ``[b, c, H, W]``
    (``torch_measure.make_inputs`` makes them from ``image_shape``, the config's ``num_channels`` and
    ``image_size``) and returns as ``logits`` the head's logits, else the pooled output, else
    the last hidden state. The wrapper adds no parameters and no operations; its name is the
    inner class's followed by ``OutputAsLogits``."""
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoModel, AutoModelForImageClassification

    config = AutoConfig.for_model(model_type, **dict(config_dict))
    archs = config_dict.get("architectures") or []
    auto = AutoModelForImageClassification if any(a.endswith("ForImageClassification") for a in archs) else AutoModel
    with torch.device("meta"):
        inner = auto.from_config(config, attn_implementation=attn_implementation, dtype=getattr(torch, dtype))
    size = config.image_size

    class Wrapper(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.config = model.config
            self.image_shape = (config.num_channels, size, size)

        def forward(self, pixel_values, use_cache=False, **kwargs):
            out = self.model(pixel_values=pixel_values)
            for name in ("logits", "pooler_output", "last_hidden_state"):
                if getattr(out, name, None) is not None:
                    return SimpleNamespace(logits=getattr(out, name))
            raise AssertionError(type(out).__name__)

    Wrapper.__name__ = Wrapper.__qualname__ = f"{type(inner).__name__}OutputAsLogits"
    model = Wrapper(inner)
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def build_pair(torch, model_type: str, config_dict: dict, *, train: bool = True, dtype: str = "bfloat16",
               attn_implementation: str = "eager", **_):
    """A two-tower image-text model (``clip``: CLIPModel; ``siglip``: SiglipModel) on meta (bf16, eager
    attention, train mode), wrapped so that the probes' forward takes ``input_ids`` ``[b, s]`` and
    ``pixel_values`` ``[b, c, H, W]`` (its ``inputs_for(torch, b, s)`` makes both, for
    ``torch_measure.make_inputs``) and returns ``logits_per_image`` ``[b, b]`` as ``logits``. The wrapper
    adds no parameters and no operations; its name is the inner class's followed by ``OutputAsLogits``."""
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoModel

    config = AutoConfig.for_model(model_type, **dict(config_dict))
    with torch.device("meta"):
        inner = AutoModel.from_config(config, attn_implementation=attn_implementation, dtype=getattr(torch, dtype))
    vision = config.vision_config
    image_shape = (vision.num_channels, vision.image_size, vision.image_size)

    class Wrapper(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.config = model.config

        def inputs_for(self, torch_, b: int, s: int) -> dict:
            pdtype = next(self.parameters()).dtype
            return {"input_ids": torch_.zeros((b, s), dtype=torch_.long, device="meta"),
                    "pixel_values": torch_.zeros((b, *image_shape), dtype=pdtype, device="meta")}

        def forward(self, input_ids, pixel_values, use_cache=False, **kwargs):
            out = self.model(input_ids=input_ids, pixel_values=pixel_values)
            return SimpleNamespace(logits=out.logits_per_image)

    Wrapper.__name__ = Wrapper.__qualname__ = f"{type(inner).__name__}OutputAsLogits"
    model = Wrapper(inner)
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(True)
    return model


#: image-text models whose decoder reads image tokens (:func:`build_llava`)
MULTIMODAL_TYPES = frozenset({"llava"})


def image_tokens(config_dict: dict) -> int:
    """LLaVA's image tokens per image: ``(image_size / patch_size)^2`` of the vision config
    (CLIPVisionConfig's defaults 224 and 32 when absent), the class token dropped
    (vision_feature_select_strategy "default")."""
    vision = config_dict.get("vision_config") or {}
    return (vision.get("image_size", 224) // vision.get("patch_size", 32)) ** 2


def build_llava(torch, config_dict: dict, *, train: bool = True, dtype: str = "bfloat16",
                attn_implementation: str = "eager", **_):
    """transformers' ``LlavaForConditionalGeneration`` of a ``llava`` config on meta (bf16, eager
    attention, train mode), wrapped so that the probes' forward takes ``input_ids`` ``[b, s]``
    (``torch_measure.make_inputs``) and runs LLaVA on one image per sequence: the first ``n``
    (:func:`image_tokens`) ids are replaced by ``image_token_id`` and ``pixel_values``
    ``[b, c, image, image]`` are made (zeros), so ``s`` counts the image tokens and ``s > n``.
    The placeholder check (``get_placeholder_mask``, a ``.item()`` on the count) cannot run on
    meta: the instance's method is replaced by the same mask without the check. The wrapper adds no
    parameters and no operations that count (ids and pixels are made by ``full``/``cat``/``zeros``)."""
    from transformers import AutoConfig, LlavaForConditionalGeneration

    config = AutoConfig.for_model("llava", **dict(config_dict))
    with torch.device("meta"):
        inner = LlavaForConditionalGeneration._from_config(config, attn_implementation=attn_implementation,
                                                           dtype=getattr(torch, dtype))
    model = with_image_prefix(torch, inner, image_tokens(config_dict), config.image_token_id,
                              config.vision_config, "LlavaForConditionalGenerationWithImage", "LLaVA")
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def with_image_prefix(torch, inner, n: int, token: int, vision, name: str, label: str):
    """``inner`` (a transformers VLM on meta) wrapped so that its forward takes ``input_ids``
    ``[b, s]`` and runs on one image per sequence: the first ``n`` ids become ``token`` (the image
    placeholder) and ``pixel_values`` ``[b, c, image, image]`` are zeros, so ``s`` counts the image
    tokens and must exceed ``n``. The placeholder check (``get_placeholder_mask``, a ``.item()`` on
    the count) cannot run on meta: the instance's method is replaced by the same mask without the
    check. The wrapper class is called ``name`` (what ``costgraph verify`` reports); ``label`` names
    the family in the error for ``s <= n``. It adds no parameters and no operation that counts."""
    import types

    def placeholder_mask(self, input_ids, inputs_embeds, image_features):
        return (input_ids == token).unsqueeze(-1).expand_as(inputs_embeds)

    inner.model.get_placeholder_mask = types.MethodType(placeholder_mask, inner.model)

    class WithImage(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.config = model.config

        def forward(self, input_ids, use_cache=False, **kwargs):
            b, s = input_ids.shape
            if s <= n:
                raise ValueError(f"{label}: s = {s} must exceed the {n} image tokens")
            ids = torch.cat([torch.full((b, n), token, dtype=input_ids.dtype, device=input_ids.device),
                             input_ids[:, n:]], dim=1)
            pixels = torch.zeros((b, vision.num_channels, vision.image_size, vision.image_size),
                                 dtype=next(self.model.parameters()).dtype, device=input_ids.device)
            return self.model(input_ids=ids, pixel_values=pixels, use_cache=use_cache, **kwargs)

    WithImage.__name__ = WithImage.__qualname__ = name
    return WithImage(inner)


#: Qwen2-VL-style models (:func:`build_qwen_vl`): Conv3d patches, a patch merger, M-RoPE decoder
QWEN_VL_TYPES = frozenset({"qwen2_vl", "qwen2_5_vl"})


def qwen_vl_image_tokens(config_dict: dict, g: int = 16) -> int:
    """Image tokens of one image of ``g × g`` merge units (``g·m·p`` pixels a side): ``g²``."""
    return g * g


def _qwen_vl_patch(model, image_token: int):
    """On the instance only: the vision rotary table reads positions made on CPU from ``grid_thw``
    (moved to the hidden states' device, meta), and the placeholder mask skips its count check
    (a ``.item()`` that cannot run on meta). Elementwise work only: no FLOPs counted change."""
    import types

    rot = model.model.visual.rotary_pos_emb
    forward = rot.forward
    rot.forward = lambda x, position_ids: forward(x, position_ids.to(x.device))

    def placeholder_mask(self, input_ids, inputs_embeds, image_features=None, video_features=None):
        return (input_ids == image_token).unsqueeze(-1).expand_as(inputs_embeds), None

    model.model.get_placeholder_mask = types.MethodType(placeholder_mask, model.model)


def build_qwen_vl(torch, model_type: str, config_dict: dict, *, g: int = 16, train: bool = True,
                  dtype: str = "bfloat16", attn_implementation: str = "eager", **_):
    """transformers' ``Qwen2VLForConditionalGeneration`` (``qwen2_vl``) or
    ``Qwen2_5_VLForConditionalGeneration`` (``qwen2_5_vl``) on meta (bf16, eager attention, train mode),
    wrapped so that the probes' forward takes ``input_ids`` ``[b, s]`` and runs one image of
    ``g × g`` merge units (``g·m·p`` pixels a side) per sequence: the first ``g²`` ids become
    ``image_token_id``; ``pixel_values`` are the flattened patches ``[b·(g·m)², c·tp·p·p]`` (zeros) and
    ``image_grid_thw`` ``[[1, g·m, g·m]] × b`` (on CPU: transformers reads it with ``.tolist()``);
    the text positions are ``arange(s)`` on the three M-RoPE axes (passed as ``position_ids``, which
    skips ``get_rope_index``: elementwise work, no FLOPs). The wrapper adds no parameters and no
    operations that count."""
    from transformers import AutoConfig, Qwen2_5_VLForConditionalGeneration, Qwen2VLForConditionalGeneration

    cls = Qwen2VLForConditionalGeneration if model_type == "qwen2_vl" else Qwen2_5_VLForConditionalGeneration
    config = AutoConfig.for_model(model_type, **dict(config_dict))
    with torch.device("meta"):
        inner = cls._from_config(config, attn_implementation=attn_implementation, dtype=getattr(torch, dtype))
    vision, token = config.vision_config, config.image_token_id
    _qwen_vl_patch(inner, token)
    side = g * vision.spatial_merge_size
    ni = g * g
    patch = vision.in_channels * vision.temporal_patch_size * vision.patch_size ** 2

    class QwenVLWithImage(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.config = model.config

        def forward(self, input_ids, use_cache=False, **kwargs):
            b, s = input_ids.shape
            if s <= ni:
                raise ValueError(f"{model_type}: s = {s} must exceed the {ni} image tokens")
            dev = input_ids.device
            ids = torch.cat([torch.full((b, ni), token, dtype=input_ids.dtype, device=dev), input_ids[:, ni:]], dim=1)
            pixels = torch.zeros((b * side * side, patch), dtype=next(self.model.parameters()).dtype, device=dev)
            grid = torch.tensor([[1, side, side]] * b)
            positions = torch.arange(s, device=dev).view(1, 1, -1).expand(3, b, -1)
            return self.model(input_ids=ids, pixel_values=pixels, image_grid_thw=grid, position_ids=positions,
                              use_cache=use_cache, **kwargs)

    QwenVLWithImage.__name__ = QwenVLWithImage.__qualname__ = f"{cls.__name__}WithImage"
    model = QwenVLWithImage(inner)
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(True)
    return model
