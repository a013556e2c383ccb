"""``costgraph.load``: a model by any name a user has for it — a bundled model name, a ``.cg``
file, a Hugging Face ``config.json`` (its path, its snapshot folder, or a Hub id read from the
local cache: :mod:`costgraph.language.hf_hub`), or the parsed config as a dict.

>>> import costgraph
>>> m = costgraph.load({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
...     "num_hidden_layers": 32, "intermediate_size": 11008, "vocab_size": 32000,
...     "max_position_embeddings": 4096})
>>> m.costs().evaluate(HF_CONFIG)["params"]                 # doctest: +SKIP
6738415616
"""

from __future__ import annotations

import os
from typing import Mapping

from .choices import PROFILE

#: the configuration under which a model loaded from a config.json holds that config's dimension values
HF_CONFIG = "hf"


def load(model, *, dropout: bool | str = "auto", options: Mapping[str, object] | None = None,
         profile: str = PROFILE.default, config: str | None = None, allow_download: bool = False,
         input_grads: bool = False, revision: str | None = None):
    """Load and build a model (:class:`costgraph.Model`).

    ``model``: a bundled name (``"gpt"``), a ``.cg`` path, a ``config.json`` path, a model snapshot
    folder (its ``config.json``), a Hub id ``"org/name"`` or ``"org/name@revision"`` found in the
    local Hugging Face cache (``HF_HUB_CACHE`` / ``HF_HOME``; needs the extra ``hub``), or a
    ``config.json`` already parsed (a dict). ``allow_download``: fetch a Hub id's ``config.json``
    (that file only) when it is not cached and ``HF_HUB_OFFLINE`` is not set. ``revision``: a branch,
    a tag or a commit hash of a Hub id, as ``from_pretrained(..., revision=)`` spells it (the same as
    ``"org/name@revision"``).

    From a config.json, the model's dimension values are its configuration ``"hf"`` (:data:`HF_CONFIG`:
    ``model.values("hf")``, ``costs().evaluate("hf")``, and unnamed: ``values()``, ``evaluate()``) and ``model.hf`` is the
    :class:`~costgraph.language.hf_config.HFModel` (``values``, ``model_type``, ``source``, and
    ``shipped()``: the weight dtype its ``torch_dtype``/``quantization_config`` give). ``dropout``:
    True, False, or ``"auto"`` (default): on for a model file, the config's dropout rates for a config.json.
    ``options``, ``profile``, ``config``, ``input_grads``: as :func:`costgraph.model.load` (``config``
    and ``input_grads`` apply to a model file only: a config.json's model keeps the default, its
    inputs needing no gradient).

    Raises
    ------
    CostgraphValueError
        A Hub id not in the cache without ``allow_download`` (the hint says how to fetch it), ``revision`` with
        no Hub id or another ``@revision``, an unreadable or unsupported config (as
        :func:`costgraph.load_hf_config`), or any error of :func:`costgraph.model.load`.
    """
    from . import model as _model
    from .errors import CostgraphValueError

    if input_grads is not False and (isinstance(model, Mapping) or (
            isinstance(model, (str, os.PathLike)) and not os.fspath(model).endswith(".cg")
            and _config_source(os.fspath(model)))):
        raise CostgraphValueError("input_grads applies to a model file; a config.json's model keeps the default "
                                  "(its inputs need no gradient, as PyTorch's data loaders yield them)",
                                  hint="leave input_grads out, or load the bundled model file by name")
    if isinstance(model, Mapping):
        return _from_config(dict(model), "<dict>", _auto(dropout), options, profile, config)
    if revision is not None:
        from .language.hf_hub import with_revision

        model = with_revision(model if isinstance(model, str) else repr(model)[:80], revision, "revision=")
    if isinstance(model, (str, os.PathLike)):
        from .language.hf_hub import config_path

        path = config_path(os.fspath(model), download=_flag(allow_download), api=True)
        if path is not None:
            return _from_config(path, path, _auto(dropout), options, profile, config)
    else:
        raise CostgraphValueError(f"a model is named by a string or a path (or a config dict), not {type(model).__name__}",
                                  hint="costgraph.load('gpt'), load('config.json'), load('org/name'), load({...})")
    return _model.load(model, dropout=True if dropout == "auto" else dropout, options=options, profile=profile,
                       config=config, input_grads=input_grads)


def _config_source(name: str) -> bool:
    """Whether ``name`` names a config.json (a path, a snapshot folder or a Hub id), not a model file."""
    from .language.hf_hub import is_hub_id

    return name.endswith(".json") or os.path.isdir(name) or is_hub_id(name)


def _auto(dropout):
    """``"auto"`` → None (from_hf_config follows the config); anything else as given (checked there)."""
    return None if isinstance(dropout, str) and dropout == "auto" else dropout


def _flag(value) -> bool:
    from .arguments import flag

    return flag(value, "allow_download")


def _from_config(config, source: str, dropout, options, profile, name):
    """A model from a config.json (``config``: its path, or the parsed dict), values as configuration ``"hf"``."""
    from .errors import CostgraphValueError
    from .language.hf_config import from_hf_config, read_config

    if name is not None:
        raise CostgraphValueError("config= names a configuration of a model file; a config.json is one already",
                                  hint="leave config out: the values are model.values('hf')")
    data = read_config(config) if isinstance(config, str) else config
    hf = from_hf_config(data, source=source, dropout=dropout, profile=profile, options=options)
    hf.model.graph.configs[HF_CONFIG] = dict(hf.values)
    hf.model.graph.default_config = HF_CONFIG     # values(), costs().evaluate() and compile() use them unnamed
    hf.model.default_config = HF_CONFIG       # values(), costs().evaluate() and compile() use them unnamed
    hf.model.hf = hf
    return hf.model
