"""The probe inputs of a speech encoder over a log-Mel spectrogram (issue 28 item 2, ``input_features``).

A Whisper-like audio encoder's forward takes ``input_features [b, num_mel_bins, frames]`` and no token ids
(transformers 5.24 modeling_qwen2_audio.py ``Qwen2AudioEncoder.forward(input_features, attention_mask=None)``,
modeling_voxtral.py ``VoxtralEncoder.forward``, modeling_glmasr.py ``GlmAsrEncoder.forward``); AudioFlamingo 3's
wants the frames' mask too (modeling_audioflamingo3.py ``AudioFlamingo3Encoder.forward(input_features,
input_features_mask)``: 1 for a frame of audio). The frames are the probe's ``s``
(:meth:`costgraph.drafting.probe.Probe.make`: twice ``max_source_positions`` where the forward adds the position
table whole and checks ``input_features.shape[-1] == max_source_positions · 2``). Every frame is audio (no padding).
"""

from __future__ import annotations

import inspect

#: the masks of the frames a forward may take ([b, frames], 1 for a frame of audio), by parameter name
FRAME_MASKS = ("input_features_mask",)


def mel_inputs(torch, model, b: int, s: int) -> dict | None:
    """The keyword inputs of one forward of ``model`` over a ``[b, mel, s]`` spectrogram (zeros in the model's dtype,
    bfloat16, on the meta device), or None where the model is no spectrogram encoder: its forward takes token ids,
    or no ``input_features``, or its config has no whole ``num_mel_bins``."""
    params = inspect.signature(model.forward).parameters
    mel = getattr(model.config, "num_mel_bins", None)
    if "input_ids" in params or "input_features" not in params or not isinstance(mel, int) or isinstance(mel, bool):
        return None
    inputs = {"input_features": torch.zeros((b, mel, s), dtype=torch.bfloat16, device="meta")}
    for name in FRAME_MASKS:
        if name in params:
            inputs[name] = torch.ones((b, s), dtype=torch.long, device="meta")
    return inputs
