"""Speech encoder-decoders for ``costgraph verify`` (:mod:`costgraph.torch_measure`'s
``build_model`` for ``SPEECH_TYPES``): transformers' Whisper class of a ``config.json``
built on the meta device, its forward taking the probes' ``[b, s]`` token ids as the
decoder's input and a log-Mel spectrogram ``input_features [b, num_mel_bins,
2·max_source_positions]`` (80 or 128 × 3000) made inside. ``torch`` is passed in by
the caller (which has checked it is installed), so this module imports nothing of
costgraph's and torch only when called.
"""
from __future__ import annotations


def build_speech(torch, model_type: str, config_dict: dict, *, train: bool = True, dtype: str = "bfloat16",
                 attn_implementation: str = "eager", **_):
    """Whisper on meta (bf16, eager attention, train mode): ``WhisperForConditionalGeneration``
    when ``architectures`` names it, else ``WhisperModel`` (what ``AutoModel`` builds).

    Wrapped so that ``forward(input_ids, decoder_input_ids, use_cache, labels)`` (what
    ``torch_measure.make_inputs`` passes an encoder-decoder) runs the model on
    ``decoder_input_ids`` (else ``input_ids``) and a zero spectrogram ``[b, num_mel_bins,
    2·max_source_positions]`` in the parameters' dtype (an input: no gradient, as
    ``pixel_values``); it returns the model's output (``logits``, ``loss``,
    ``past_key_values``), or for WhisperModel the last hidden state as ``logits``. The
    wrapper adds no parameters and no operations; its name is the inner class's followed by
    ``FromFeatures``; ``config`` is the inner model's (``is_encoder_decoder`` true). Every
    parameter requires grad except the encoder's sinusoidal ``embed_positions``, which
    transformers freezes (``requires_grad_(False)``) and which is kept frozen here."""
    from types import SimpleNamespace

    from transformers import AutoConfig, AutoModel, WhisperForConditionalGeneration

    config = AutoConfig.for_model(model_type, **{k: v for k, v in config_dict.items() if k != "model_type"})
    archs = config_dict.get("architectures") or []
    head = any(a.endswith("ForConditionalGeneration") for a in archs)
    kwargs = {"attn_implementation": attn_implementation, "dtype": getattr(torch, dtype)}
    with torch.device("meta"):
        inner = (WhisperForConditionalGeneration._from_config(config, **kwargs) if head
                 else AutoModel.from_config(config, **kwargs))
    frames = 2 * config.max_source_positions

    class Wrapper(torch.nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model
            self.config = model.config

        def forward(self, input_ids=None, decoder_input_ids=None, use_cache=False, labels=None, **kwargs):
            ids = input_ids if decoder_input_ids is None else decoder_input_ids
            dt = next(self.model.parameters()).dtype
            feats = torch.zeros((ids.shape[0], self.config.num_mel_bins, frames), dtype=dt, device=ids.device)
            extra = {"labels": labels} if labels is not None else {}
            out = self.model(input_features=feats, decoder_input_ids=ids, use_cache=use_cache, **extra)
            if getattr(out, "logits", None) is None:
                return SimpleNamespace(logits=out.last_hidden_state, past_key_values=_cache_of(out))
            return out

    Wrapper.__name__ = Wrapper.__qualname__ = f"{type(inner).__name__}FromFeatures"
    model = Wrapper(inner)
    model.train(train)
    for p in model.parameters():
        p.requires_grad_(True)
    # as WhisperEncoder.__init__ leaves it: the sinusoidal table is a frozen parameter (counted by
    # sum(numel); no gradient, so its embedding lookup keeps no indices)
    encoder = inner.get_encoder() if hasattr(inner, "get_encoder") else inner.model.encoder
    encoder.embed_positions.weight.requires_grad_(False)
    return model


def _cache_of(out):
    """The cache a forward returned: ``cache`` in transformers 5.24's outputs, ``past_key_values`` before."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


def encoder_decoder_cache_bytes(torch, model, b: int, s: int) -> dict:
    """Bytes of the ``EncoderDecoderCache`` a forward of ``model`` (:func:`build_speech`) allocates
    for ``b`` sequences of ``s`` decoder tokens (eval, no grad, on meta): ``{"self": ..., "cross":
    ..., "total": ...}``, the key and value tensors of every decoder layer of its
    ``self_attention_cache`` (``[b, heads, s, d]``, growing with the tokens) and of its
    ``cross_attention_cache`` (``[b, heads, max_source_positions, d]``, computed once from the
    encoder's output: transformers 5.24 modeling_whisper.py::WhisperAttention.forward,
    cache_utils.py::EncoderDecoderCache)."""
    was_training = model.training
    model.train(False)   # inference mode (nn.Module.eval): no dropout
    try:
        ids = torch.zeros((b, s), dtype=torch.long, device="meta")
        with torch.no_grad():
            cache = _cache_of(model(decoder_input_ids=ids, use_cache=True))
    finally:
        model.train(was_training)
    sizes = {}
    for name, part in (("self", cache.self_attention_cache), ("cross", cache.cross_attention_cache)):
        sizes[name] = int(sum(t.numel() * t.element_size() for layer in part.layers
                              for t in (layer.keys, layer.values) if t is not None and hasattr(t, "numel")))
    sizes["total"] = sizes["self"] + sizes["cross"]
    return sizes
