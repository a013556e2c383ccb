"""The front of a speech encoder that stacks consecutive spectrogram frames (issue 28 item 2, task k28speech2):
transformers 5.24 modeling_nemotron3_diarization.py ``Nemotron3DiarizationFeatureStacking.forward`` (and
modeling_nemotron3_5_transcribe.py's ``Nemotron3_5TranscribeFeatureStacking``, the same): ``input_features [b, T,
mel]`` zero-padded to a multiple of ``subsampling_factor`` F frames (``-T % F`` rows), reshaped ``[b, ⌈T/F⌉, F·mel]``
(a view after the pad's copy: no FLOPs), then ``projection`` ``Linear(F·mel, h, bias=False)``: ``s = ⌊(T + F − 1)/F⌋``
rows. The input is declared as the reshape leaves it, ``[b, s, F·mel]``; F is the config's number (8 by default: the
projection's input width over the probe's Mel bins). Torch-free and writer-free (``sz``: a
:class:`costgraph.drafting.writer.Sizer`).
"""

from __future__ import annotations

from .blocks import _linear
from .facts import Module
from .fast_conformer import FRAMES
from .inputs_frames import STACKING


def stacking_front(root: Module, sz, names) -> tuple[list[str], list[str], list[Module]] | None:
    """(input declarations, statements, modules drafted) of a frame-stacking front (above), else None where ``root``
    has none or the probe no Mel bins ``mel``. Sets ``sz.seq`` (``s``), ``sz.front_dims`` (``T`` and ``s``) and
    ``sz.front_config`` (``T`` = :data:`costgraph.drafting.fast_conformer.FRAMES`)."""
    mel = sz.probe.symbol_values().get("mel")
    stack = next((m for m in root.walk() if m.cls.endswith(STACKING)), None)
    proj = stack.child("projection") if stack is not None else None
    lin = _linear(proj) if proj is not None else None
    if mel is None or lin is None or lin[2] or lin[0] % mel or len(stack.children) != 1:
        return None
    factor = lin[0] // mel
    sz.size(mel, "Mel bins")
    sz.seq = "s"
    sz.front_dims = ['  dim T   "spectrogram frames per clip (input_features [b, T, mel])"',
                     f'  dim s = floor((T + {factor - 1}) / {factor}) "frames after stacking {factor} (the last group '
                     'zero-padded: ceil(T / F))"']
    sz.front_config = [f"T = {FRAMES}"]
    inputs = [f"input features[b, s, {factor} * mel]   # input_features [b, T, mel] padded to a multiple of {factor} "
              f"frames and reshaped [b, s, {factor} mel] (Nemotron3DiarizationFeatureStacking)"]
    return inputs, [f"x = linear(features, {sz.size(lin[1], 'hidden size')}, bias = false, name = {names(proj)})"], \
        [proj]
