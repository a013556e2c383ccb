"""Probe fields of the FastConformer speech encoders of task k28speech2 (issue 28 item 2), kept apart from
:mod:`costgraph.drafting.probe`: :func:`frames_values` (:func:`costgraph.drafting.api._probed_runs` calls it on each
probe after :func:`costgraph.drafting.probe_video.vision_values`). Torch-free, imports nothing of the package.

A FastConformer's ``max_position_embeddings`` sizes no table: its relative positions are sines and cosines computed in
the forward (transformers 5.24 modeling_nemotron_asr_streaming.py ``NemotronAsrStreamingEncoderRelPositionalEncoding``:
``inv_freq`` ``[h/2]`` only, a non-persistent buffer), and the field only bounds the frames the layers run
(``forward`` raises ``ValueError("Sequence Length: … has to be less or equal than config.max_position_embeddings")``).
The probe's ``s_max`` (43 / 47) is below the frames the probe's spectrogram makes (102), so the field is left at the
config's value (5000 by default) and read back as no symbol.
"""

from __future__ import annotations

#: the config field that marks a FastConformer's Conv2d subsampling stem (as
#: :data:`costgraph.drafting.inputs_frames.STEM`: configuration_parakeet.py ``subsampling_conv_channels``)
STEM = "subsampling_conv_channels"
#: the fields left at the config's value in a FastConformer's probe
BOUNDS = ("max_position_embeddings",)


def frames_values(probe, present):
    """``probe`` (a :class:`~costgraph.drafting.probe.Probe`) with :data:`BOUNDS` taken out of its fields and symbols
    where ``present`` (the config's canonical fields) holds :data:`STEM`; else ``probe`` unchanged."""
    if STEM not in present:
        return probe
    for name in BOUNDS:
        probe.fields.pop(name, None)
        for sym in [s for s, (_, f) in probe.symbols.items() if f == name]:
            del probe.symbols[sym]
    return probe
