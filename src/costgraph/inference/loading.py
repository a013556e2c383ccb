"""Loading a model for inference: :func:`costgraph.load` (and ``load_hf_config``) with
dropout off and the key axis of cached tensors split (:func:`costgraph.inference.phases.split_keys`).
Apart from :mod:`.phases`, which does not import the model, so that
:meth:`costgraph.Model.infer` can use the analyses without an import cycle."""

from __future__ import annotations

from ..choices import PROFILE
from .phases import _wrap_build_error, split_keys


def load(model: str, *, options=None, profile: str = PROFILE.default, config: str | None = None):
    """:func:`costgraph.load` for inference: dropout off, the key axis split (:func:`split_keys`).
    ``config``: a named configuration whose options (``bias = false``) the model is built with,
    as ``costgraph.load(..., config=)``; ``options`` take precedence."""
    from ..errors import CostgraphSemanticError
    from ..model import load as _load

    with split_keys():
        try:
            return _load(model, dropout=False, options=options, profile=profile, config=config)
        except CostgraphSemanticError as e:
            _wrap_build_error(e)


def load_hf_config(path: str, *, profile: str = PROFILE.default):
    """:func:`costgraph.load_hf_config` for inference (the key axis split)."""
    from ..errors import CostgraphSemanticError
    from ..language.hf_config import load_hf_config as _load

    with split_keys():
        try:
            return _load(path, profile=profile)
        except CostgraphSemanticError as e:
            _wrap_build_error(e)
