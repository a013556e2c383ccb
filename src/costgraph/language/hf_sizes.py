"""The size fields of a config.json that costgraph drafts (a model_type no bundled file maps), checked before
transformers reads them, so that a bad value is refused at its ``FILE:LINE:COLUMN`` with a hint rather than as the
error of a PyTorch constructor (``Trying to create tensor with negative dimension -5``) or of transformers' strict
dataclass validation (``StrictDataclassFieldValidationError``).

The fields are the draft's probed sizes (:data:`costgraph.drafting.probe.FIELDS`: ``hidden_size``,
``num_hidden_layers``, ...), at the top level and in a nested sub-config (``text_config``, ``encoder_config``). A
value is refused when it is a number below 0 (of :data:`NEVER_NEGATIVE`; below 1 of :data:`NEVER_ZERO`), not whole
(``4096.5``), not finite (``NaN``, ``Infinity``), a boolean or a string. 0 is let through elsewhere (a draft reads a 0
as a part the config leaves out: ``num_experts = 0``), and so are a list or a table (a per-layer size, Gemma 3n's
``intermediate_size``), which transformers checks.
"""

from __future__ import annotations

import math

from ..errors import CostgraphValueError
from .hf_json import _json_shown, keyed


#: the sizes no config sets below 0: a -1 elsewhere can be a switch (transformers 5.24 Phi4MultimodalAudioConfig's
#: ``chunk_size = -1``, the one negative default of a probed field among the 820 default configs of its CONFIG_MAPPING)
NEVER_NEGATIVE = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
                  "vocab_size", "head_dim", "image_size", "patch_size", "num_channels", "max_position_embeddings")

#: of those, the sizes a model has at least 1 of (a 0 there is no part left out but a model of no width: hidden_size 0
#: failed in ALBERT's PyTorch constructor, "0.0 cannot be raised to a negative power"); an image field at 0 is
#: the drafter's own refusal (drafting/api.py ``_refuse_image_fields``)
NEVER_ZERO = ("hidden_size", "num_attention_heads")


def refuse_bad_sizes(config: dict, source: str) -> None:
    """Raise :class:`CostgraphValueError` (marked with the key, for ``hf_json.located_at_key``) for the first size
    field of ``config`` (or of a sub-config one level down, the key dotted) that no model can have (see the module's
    docstring); return None where every one is a whole number ≥ 0, a list, a table or null."""
    from ..drafting.probe import FIELDS

    tables = [("", config)] + [(f"{k}.", v) for k, v in config.items() if isinstance(v, dict)]
    for prefix, table in tables:
        for field in FIELDS:
            if field not in table:
                continue
            v = table[field]
            least = 1 if field in NEVER_ZERO else 0
            bad = isinstance(v, (bool, str)) or (isinstance(v, float) and not (math.isfinite(v) and v.is_integer())) \
                or (field in NEVER_NEGATIVE and isinstance(v, (int, float)) and not isinstance(v, bool) and v < least)
            if bad:
                key = prefix + field
                message = f"key '{key}' must be a whole number of {least} or more, got {_json_shown(v)}"
                raise keyed(CostgraphValueError(
                    f"{source}: {message}",
                    hint=f"write '{field}' as the released config.json does: a JSON number without a fraction "
                         "(a size: hidden_size 768, num_hidden_layers 12)"), key, message)
