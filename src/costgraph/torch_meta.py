"""The context of a forward on meta tensors (:func:`meta_forward`): transformers' data-dependent branches
(mask creation, padding warnings) answered without data. Used by :mod:`costgraph.torch_measure` (the
``costgraph verify`` tier) and by ``costgraph import`` (:mod:`costgraph.drafting.api`). Needs the torch extra.
"""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def meta_forward():
    """Context for a forward on meta tensors: mask creation without data-dependent branches.

    With no attention_mask, transformers 5 scans ``position_ids`` for packed sequences
    (``find_packed_sequence_indices``) and branches on ``(...).all()``, which cannot run
    on meta. Our position ids are ``arange(s)``, for which that function returns None
    (not packed); on meta tensors this context returns None directly. Nothing else in
    the model changes: SDPA models then get ``is_causal=True`` and no mask, as in training.
    Encoder-style models (BigBird, RoFormer, RemBERT, MegatronBERT: transformers 5.24
    ``PreTrainedModel.warn_if_padding_and_no_attention_mask``) look for the pad token in the
    first and last ids to log a warning (``pad_token_id in input_ids[:, [-1, 0]]``, an
    ``.item()``): on meta ids that check is skipped; it computes nothing the model uses. Where such
    a model makes its own all-ones padding mask, whether the mask may be skipped
    (``masking_utils._ignore_bidirectional_mask_sdpa``: ``padding_mask.all()``) is answered "no" on
    meta: the mask is built, as a meta tensor (masking is no matrix product: the FLOPs are the same).
    """
    from transformers import masking_utils, modeling_utils

    real = masking_utils.find_packed_sequence_indices
    model_class = modeling_utils.PreTrainedModel
    warn = model_class.warn_if_padding_and_no_attention_mask

    def find_packed_sequence_indices(position_ids, *args, **kwargs):
        if position_ids.device.type == "meta":
            return None
        return real(position_ids, *args, **kwargs)

    skip = masking_utils._ignore_bidirectional_mask_sdpa

    def ignore_bidirectional_mask(padding_mask, *args, **kwargs):
        if padding_mask is not None and padding_mask.device.type == "meta":
            return False
        return skip(padding_mask, *args, **kwargs)

    def warn_if_padding_and_no_attention_mask(self, input_ids, attention_mask):
        if input_ids is not None and input_ids.device.type == "meta":
            return None
        return warn(self, input_ids, attention_mask)

    masking_utils.find_packed_sequence_indices = find_packed_sequence_indices
    model_class.warn_if_padding_and_no_attention_mask = warn_if_padding_and_no_attention_mask
    masking_utils._ignore_bidirectional_mask_sdpa = ignore_bidirectional_mask
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = real
        masking_utils._ignore_bidirectional_mask_sdpa = skip
        model_class.warn_if_padding_and_no_attention_mask = warn
