"""The probe inputs of a FastConformer speech encoder over a frames-first log-Mel spectrogram (issue 28 item 2,
``input_features``).

transformers 5.24 modeling_parakeet.py ``ParakeetEncoder.forward(input_features, attention_mask=None, ...)``:
``input_features [b, frames, num_mel_bins]`` (frames first, unlike Whisper's ``[b, mel, frames]``:
:mod:`costgraph.drafting.inputs_mel`), read by ``ParakeetEncoderSubsamplingConv2D.forward`` as
``input_features.unsqueeze(1)`` ``[b, 1, frames, mel]``, a one-channel image for its Conv2d stem. The model is marked by
its config's ``subsampling_conv_channels`` (the stem's channels) beside ``num_mel_bins``. The probe gives no
``attention_mask``: every frame is audio (no padding), so the forward builds no mask and the convolution module masks
nothing (``ParakeetEncoderConvolutionModule.forward``: ``if attention_mask is not None``). LASR's forward takes the
same (modeling_lasr.py ``LasrEncoder.forward``, its ``LasrEncoderSubsampling`` a Linear over the bins first). The
frames are the probe's
``s`` (:meth:`costgraph.drafting.probe.Probe.make`: a prime, no position table to fill). Torch is passed in: the module
imports none.
"""

from __future__ import annotations

import inspect

#: the config field that marks a FastConformer's Conv2d subsampling stem (configuration_parakeet.py
#: ``ParakeetEncoderConfig.subsampling_conv_channels``)
STEM = "subsampling_conv_channels"
#: the class-name ending of a module that stacks ``subsampling_factor`` frames and projects them (transformers 5.24
#: modeling_nemotron3_diarization.py ``Nemotron3DiarizationFeatureStacking``: ``input_features [b, T, mel]`` padded to
#: a multiple of the factor, reshaped ``[b, T/factor, factor·mel]``, a Linear without bias)
STACKING = "FeatureStacking"
#: the config field of Wav2Vec2-BERT's input width (configuration_wav2vec2_bert.py ``feature_projection_input_dim``:
#: two 80-bin frames stacked, 160; modeling_wav2vec2_bert.py ``Wav2Vec2BertModel.forward(input_features [b, s, 160])``)
STACKED = "feature_projection_input_dim"


def frames_inputs(torch, model, b: int, s: int) -> dict | None:
    """``{"input_features": [b, s, mel]}`` (zeros in the model's bfloat16, on the meta device) for a model whose
    forward takes ``input_features`` and no ``input_ids`` and whose config (a CTC wrapper's ``encoder_config``) holds
    whole ``num_mel_bins`` and :data:`STEM`; else None."""
    params = inspect.signature(model.forward).parameters
    cfg = getattr(model.config, "encoder_config", None) or model.config    # ParakeetForCTC's: its encoder's
    mel, stem = getattr(cfg, "num_mel_bins", None), getattr(cfg, STEM, None)
    stacked = getattr(cfg, STACKED, None)
    if isinstance(stacked, int) and not isinstance(stacked, bool) and not isinstance(mel, int):
        mel, stem = stacked, stacked      # Wav2Vec2-BERT's stacked frames: [b, s, feature_projection_input_dim]
    if isinstance(mel, int) and not isinstance(stem, int) and any(      # k28speech2: frames stacked, no Conv2d stem
            type(m).__name__.endswith(STACKING) for m in model.modules()):
        stem = mel
    if "input_ids" in params or "input_features" not in params \
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in (mel, stem)):
        return None
    return {"input_features": torch.zeros((b, s, mel), dtype=torch.bfloat16, device="meta")}
