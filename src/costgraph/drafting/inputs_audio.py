"""The probe input of a speech encoder from raw audio (``input_values``, the wav2vec2 family), for
:func:`costgraph.drafting.model_build._forward` (issue 28 item 2).

transformers 5.24 modeling_wav2vec2.py ``Wav2Vec2Model.forward(input_values, attention_mask=None,
mask_time_indices=None, ...)``: ``input_values`` ``[b, samples]`` of raw audio, read by the feature encoder as
``input_values[:, None]`` (``Wav2Vec2FeatureEncoder.forward``). The probe gives no ``attention_mask`` (every clip whole)
and no ``mask_time_indices``: ``_mask_hidden_states`` then masks only in training (``elif self.config.mask_time_prob
> 0 and self.training``, ``if self.config.mask_feature_prob > 0 and self.training``), and the drafter's model is in
eval mode (``model.train(False)``): SpecAugment's masking is a training-time augmentation the forward counted here
never applies (its ``masked_spec_embed [h]`` is counted as parameters only). AST's spectrogram (modeling_audio_
spectrogram_transformer.py ``ASTModel.forward``): ``[b, max_length, num_mel_bins]``. Torch is passed in: the module
imports none.
"""

from __future__ import annotations

#: the forward parameter that marks a model of raw audio
INPUT = "input_values"


def audio_inputs(torch, model, params, b: int, samples: int) -> dict | None:
    """``{"input_values": [b, samples]}`` (zeros on the meta device, in the model's bfloat16) for a model whose
    forward takes ``input_values`` and no ``input_ids`` and whose config has a feature encoder's ``conv_kernel``
    list (the wav2vec2 family); ``[b, max_length, num_mel_bins]`` where the config has those (AST's spectrogram);
    else None. ``params``: the forward's signature parameters."""
    cfg = model.config
    if "input_ids" in params or INPUT not in params:
        return None
    frames, mel = getattr(cfg, "max_length", None), getattr(cfg, "num_mel_bins", None)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (frames, mel)):
        # AST (modeling_audio_spectrogram_transformer.py ASTModel.forward): a spectrogram [b, max_length,
        # num_mel_bins], the sizes its position table was built for
        return {INPUT: torch.zeros((b, frames, mel), dtype=torch.bfloat16, device="meta")}
    if not isinstance(getattr(cfg, "conv_kernel", None), (list, tuple)):
        return None
    return {INPUT: torch.zeros((b, samples), dtype=torch.bfloat16, device="meta")}
