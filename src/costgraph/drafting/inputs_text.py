"""Probe inputs of the text encoders and encoder-decoders whose forward cannot run on token ids alone on the meta
device (issue 28 item 2, task k28text13). Torch is passed in (the drafter's ``require``); nothing is imported at module
load.

- FSMT (transformers 5.24 modeling_fsmt.py ``_prepare_fsmt_decoder_inputs``): without ``decoder_attention_mask`` the
  forward calls ``make_padding_mask``, whose ``if not padding_mask.any()`` asks a meta tensor for its value; given
  one (every decoder position a token: ones), ``invert_mask`` reads it instead and the forward runs. The encoder's
  ``input_ids`` and the decoder's ``decoder_input_ids`` are :mod:`.inputs_seq2seq`'s.
"""

from __future__ import annotations

import inspect

from .inputs_seq2seq import seq2seq_inputs

#: the encoder-decoders whose forward asks the decoder's ids whether any is padding (a value meta cannot give):
#: their ``decoder_attention_mask`` given whole
DECODER_MASKED = ("FSMTModel",)


def text_inputs(torch, model, b: int, s: int, t: int | None) -> dict | None:
    """:func:`.inputs_seq2seq.seq2seq_inputs` with ``decoder_attention_mask`` [b, t] (ones, bool, on meta) for a
    model of :data:`DECODER_MASKED`; None for any other model (its inputs are another branch's)."""
    if type(model).__name__ not in DECODER_MASKED \
            or "decoder_attention_mask" not in inspect.signature(model.forward).parameters:
        return None
    inputs = seq2seq_inputs(torch, model, b, s, t)
    if inputs is not None:
        inputs["decoder_attention_mask"] = torch.ones((b, t), dtype=torch.bool, device="meta")
    return inputs
