"""Vision-language models for ``costgraph verify`` beyond LLaVA (:mod:`costgraph.torch_vision`):
transformers' ``Gemma3ForConditionalGeneration`` (model_type ``gemma3``: image tokens in the
decoder's sequence) and ``MllamaForConditionalGeneration`` (``mllama``: the image reaches the
decoder through gated cross-attention layers, not as tokens), built on the meta device and wrapped
so that the probes' forward takes ``input_ids`` ``[b, s]`` and makes the image inputs itself.
``torch`` is passed in by the caller (which has checked it is installed), so this module imports
nothing of costgraph's and torch only when called.
"""
from __future__ import annotations

#: model types built here (:func:`build_vlm`)
VLM_TYPES = frozenset({"gemma3", "mllama"})


def sequence_tokens(model_type: str, config_dict: dict) -> int:
    """Image tokens the decoder's sequence ``s`` counts: Gemma 3's ``mm_tokens_per_image``
    (Gemma3Config's default 256) per image; none for Mllama (its image is cross-attended)."""
    if model_type == "gemma3":
        return int(config_dict.get("mm_tokens_per_image") or 256)
    return 0


def _finish(model, train: bool):
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(True)
    return model


def build_vlm(torch, model_type: str, config_dict: dict, *, train: bool = True, dtype: str = "bfloat16",
              attn_implementation: str = "eager", **_):
    """The :data:`VLM_TYPES` model of ``config_dict`` on meta (bf16, eager attention, train mode),
    wrapped (:func:`build_gemma3`, :func:`build_mllama`). The wrappers add no parameters and no
    operations that count (image inputs are made by ``zeros``/``ones``/``full``/``cat``)."""
    build = {"gemma3": build_gemma3, "mllama": build_mllama}[model_type]
    return _finish(build(torch, config_dict, dtype=dtype, attn_implementation=attn_implementation), train)


def build_gemma3(torch, config_dict: dict, *, dtype: str = "bfloat16", attn_implementation: str = "eager"):
    """``Gemma3ForConditionalGeneration`` running one image per sequence: the first ``n =
    mm_tokens_per_image`` ids are replaced by ``image_token_id`` and ``pixel_values`` ``[b, c, image,
    image]`` (zeros) are made, so ``s`` counts the image tokens (``s > n``). No ``token_type_ids``:
    the causal mask over the whole sequence. The placeholder check (a ``.item()`` on the count)
    cannot run on meta: the instance's ``get_placeholder_mask`` is the same mask without it."""
    from transformers import AutoConfig, Gemma3ForConditionalGeneration

    from .torch_vision import with_image_prefix

    config = AutoConfig.for_model("gemma3", **dict(config_dict))
    with torch.device("meta"):
        inner = Gemma3ForConditionalGeneration._from_config(config, attn_implementation=attn_implementation,
                                                            dtype=getattr(torch, dtype))
    return with_image_prefix(torch, inner, int(config.mm_tokens_per_image), config.image_token_id,
                             config.vision_config, "Gemma3ForConditionalGenerationWithImage", "Gemma 3")


def build_mllama(torch, config_dict: dict, *, dtype: str = "bfloat16", attn_implementation: str = "eager"):
    """``MllamaForConditionalGeneration`` running one image of ``max_num_tiles`` tiles per
    sequence: ``pixel_values`` ``[b, 1, tiles, c, image, image]`` (zeros), ``aspect_ratio_ids``
    ``[b, 1]`` (aspect ratio 1, every tile used: ``aspect_ratio_mask`` ones ``[b, 1, tiles]``), no
    ``cross_attention_mask`` (every text token sees every image token), ``input_ids`` ``[b, s]``
    the text alone."""
    from transformers import AutoConfig, MllamaForConditionalGeneration

    config = AutoConfig.for_model("mllama", **dict(config_dict))
    with torch.device("meta"):
        inner = MllamaForConditionalGeneration._from_config(config, attn_implementation=attn_implementation,
                                                            dtype=getattr(torch, dtype))
    vision = config.vision_config
    tiles = vision.max_num_tiles

    class MllamaForConditionalGenerationWithImage(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.config = model.config

        def forward(self, input_ids, use_cache=False, **kwargs):
            b = input_ids.shape[0]
            dev = input_ids.device
            pixels = torch.zeros((b, 1, tiles, vision.num_channels, vision.image_size, vision.image_size),
                                 dtype=next(self.model.parameters()).dtype, device=dev)
            ratio = torch.ones((b, 1), dtype=torch.long, device=dev)
            mask = torch.ones((b, 1, tiles), dtype=torch.long, device=dev)
            return self.model(input_ids=input_ids, pixel_values=pixels, aspect_ratio_ids=ratio,
                              aspect_ratio_mask=mask, use_cache=use_cache, **kwargs)

    return MllamaForConditionalGenerationWithImage(inner)
