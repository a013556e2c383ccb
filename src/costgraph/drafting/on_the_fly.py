"""A ``config.json`` whose ``model_type`` no bundled file maps, drafted on the fly (issue 28 item 2).

:func:`costgraph.language.hf_config.from_hf_config` calls :func:`draft_text` for such a config: with
the ``torch`` extra the draft of :func:`costgraph.drafting.api.draft_model` is used when it is exact
(parameters and forward FLOPs equal PyTorch's at both probes, no TODO, both probes the same file),
else refused with what differs; without the extra the refusal names it. Drafts are cached in
``$XDG_CACHE_HOME/costgraph/drafts/<sha256 of the config>.cg`` (default ``~/.cache``) with their
values, so a second run imports no torch. Never a silent wrong number.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..arguments import shown
from ..errors import CostgraphValueError

#: what a drafted model's note says
ORIGIN = "drafted from transformers {version} `{cls}`"


def _cache_dir() -> Path | None:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "costgraph" / "drafts" if base and not base.startswith("~") else None


def _key(config: dict) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _differences(draft) -> str:
    said = []
    for c in draft.checks:
        for what, t, g in (("parameters", c.params_torch, c.params_draft),
                           ("forward FLOPs", c.forward_flops_torch, c.forward_flops_draft)):
            if t != g:
                said.append(f"{what} at probe {c.probe + 1}: torch {t:,}, draft {g:,}")
    if len(draft.config_params) == 2 and draft.config_params[0] != draft.config_params[1]:
        t, g = draft.config_params
        said.append(f"parameters at the config's own sizes: torch {t:,}, draft {g:,}")
    elif len(draft.config_params) != 2 and draft.checks:     # not built or not evaluated there: the warning says why
        said += [w for w in draft.warnings if "config's own sizes" in w][:1]
    if draft.todos:
        said.insert(0, "not recognised: " + ", ".join(draft.todos[:4]) + ("…" if len(draft.todos) > 4 else ""))
    if not draft.confirmed:
        said.append("the second probe drafted another file")
    return "; ".join(said[:4]) or "not checked"


def draft_text(config: dict, source: str, listed: str) -> tuple[str, dict, str]:
    """(model file text, values, origin) of an exact draft of ``config``, from the cache or drafted now.
    ``listed``: the bundled model types, for the refusals' hint.

    Raises
    ------
    CostgraphValueError
        Without the torch extra (the hint names it), or when the draft is not exact (what differs)."""
    from ..torch_measure import TorchMissing

    model_type = config.get("model_type")
    cache = _cache_dir()
    path = cache / f"{_key(config)}.json" if cache is not None else None
    if path is not None and path.is_file():
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
            return saved["text"], {k: int(v) for k, v in saved["values"].items()}, saved["origin"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass    # an unreadable cache entry is drafted again
    from .api import draft_model

    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except ImportError:
        CONFIG_MAPPING_NAMES = None
    if CONFIG_MAPPING_NAMES is not None and model_type not in CONFIG_MAPPING_NAMES:
        raise CostgraphValueError(f"{source}: unsupported model_type {shown(model_type)}: no bundled model file maps it, "
                                  "and the installed transformers does not know it", hint=listed)
    try:
        draft = draft_model(config)
    except TorchMissing:
        raise CostgraphValueError(
            f"{source}: unsupported model_type {shown(model_type)}: no bundled model file maps it",
            hint="with the torch extra (pip install -e '.[torch]') costgraph drafts one from transformers and "
                 f"checks it against PyTorch; or write a model file (docs: a new architecture in ten minutes); {listed}") \
            from None
    origin = ORIGIN.format(version=draft.versions.split("transformers ")[-1], cls=draft.torch_class)
    if not draft.exact:
        raise CostgraphValueError(
            f"{source}: model_type {shown(model_type)} is not bundled, and its draft ({origin}) is not exact: "
            f"{_differences(draft)}",
            hint=f"costgraph import {source} -o model.cg writes the draft with its TODOs; edit it, then give the .cg file")
    values = dict(draft.values)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"text": draft.text, "values": values, "origin": origin}), encoding="utf-8")
        except OSError:
            pass    # no cache: drafted again next time
    return draft.text, values, origin
