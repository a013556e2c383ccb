"""An encoder-decoder's probe inputs (issue 28 item 2): the encoder's token ids and the decoder's own.

transformers' encoder-decoder base models (transformers 5.24 modeling_t5.py ``T5Model.forward``,
modeling_m2m_100.py ``M2M100Model.forward``, ...) run the encoder on ``input_ids`` [b, s] and the decoder on
``decoder_input_ids`` [b, t], its cross-attention reading the encoder's s outputs; without decoder ids the forward
fails (T5: "You must specify exactly one of input_ids or inputs_embeds"). The decoder length ``t`` is a probe value of
its own (:func:`costgraph.drafting.probe.decoder_length`: 911, 919), apart from ``s`` (37, 41), so that the cross-
attention's ``t·s`` products and the decoder's ``t²`` are told from the encoder's ``s²`` in the counts. Torch is
passed in (the drafter's ``require``); nothing is imported at module load.
"""

from __future__ import annotations

import inspect

from .probe import decoder_length  # noqa: F401  (the probe's t, importable here)


def seq2seq_inputs(torch, model, b: int, s: int, t: int | None) -> dict | None:
    """``{"input_ids": [b, s], "decoder_input_ids": [b, t], "use_cache": False}`` (zeros, long, on meta) for a
    model whose forward takes ``decoder_input_ids``; None for any other model, or where ``t`` is None."""
    if t is None or "decoder_input_ids" not in inspect.signature(model.forward).parameters:
        return None
    ids = torch.zeros((b, s), dtype=torch.long, device="meta")
    return {"input_ids": ids, "decoder_input_ids": torch.zeros((b, t), dtype=torch.long, device="meta"),
            "use_cache": False}
