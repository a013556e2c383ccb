"""The context of a forward on meta tensors (:func:`meta_forward`): transformers' data-dependent branches
(mask creation, padding warnings) answered without data. Used by :mod:`costgraph.torch_measure` (the
``costgraph verify`` tier) and by ``costgraph import`` (:mod:`costgraph.drafting.api`). Needs the torch extra.

Scoped, not process-wide: the three transformers functions are replaced by wrappers while at least one
:func:`meta_forward` is open in the process (a count under a lock: the first entry installs them, the last exit
restores the originals, whatever order threads leave in), and a wrapper answers without data only where the
calling context is inside :func:`meta_forward` (a :class:`contextvars.ContextVar`: per thread and per asyncio
task). Any other caller meanwhile, meta tensors or not, runs transformers' own function.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading

#: True inside :func:`meta_forward` in this thread or task (a new thread starts outside)
_INSIDE: contextvars.ContextVar[bool] = contextvars.ContextVar("costgraph_meta_forward", default=False)
_LOCK = threading.Lock()
#: [how many meta_forward contexts are open in the process, the originals replaced (None when none is open)]
_OPEN: list = [0, None]


def _on_meta(t) -> bool:
    return _INSIDE.get() and t is not None and getattr(getattr(t, "device", None), "type", None) == "meta"


def _install():
    """Replace the three functions by wrappers; return what restores them."""
    from transformers import masking_utils, modeling_utils

    model_class = modeling_utils.PreTrainedModel
    real = masking_utils.find_packed_sequence_indices
    skip = masking_utils._ignore_bidirectional_mask_sdpa
    warn = model_class.warn_if_padding_and_no_attention_mask

    def find_packed_sequence_indices(position_ids, *args, **kwargs):
        if _on_meta(position_ids):
            return None
        return real(position_ids, *args, **kwargs)

    def ignore_bidirectional_mask(padding_mask, *args, **kwargs):
        if _on_meta(padding_mask):
            return False
        return skip(padding_mask, *args, **kwargs)

    def warn_if_padding_and_no_attention_mask(self, input_ids, attention_mask):
        if _on_meta(input_ids):
            return None
        return warn(self, input_ids, attention_mask)

    masking_utils.find_packed_sequence_indices = find_packed_sequence_indices
    masking_utils._ignore_bidirectional_mask_sdpa = ignore_bidirectional_mask
    model_class.warn_if_padding_and_no_attention_mask = warn_if_padding_and_no_attention_mask

    def restore():
        masking_utils.find_packed_sequence_indices = real
        masking_utils._ignore_bidirectional_mask_sdpa = skip
        model_class.warn_if_padding_and_no_attention_mask = warn
    return restore


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

    Only the thread (or asyncio task) inside this context gets these answers; the contexts nest and may be open in
    several threads at once (see the module's docstring).
    """
    with _LOCK:
        if _OPEN[0] == 0:
            _OPEN[1] = _install()
        _OPEN[0] += 1
    token = _INSIDE.set(True)
    try:
        yield
    finally:
        _INSIDE.reset(token)
        with _LOCK:
            _OPEN[0] -= 1
            if _OPEN[0] == 0:
                restore, _OPEN[1] = _OPEN[1], None
                restore()
