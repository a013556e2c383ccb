"""Reading a transformers config for ``costgraph import`` (:func:`costgraph.drafting.api.draft_model`): the config
dict from a source (a dict, a config.json, a model_type, a class name), transformers' config object, and the size
fields of :data:`~costgraph.drafting.probe.FIELDS` it holds, on itself or its language model's ``text_config``.
"""

from __future__ import annotations

import os

from ..arguments import shown
from ..errors import CostgraphValueError
from .probe import FIELDS, MAMBA2_OWN, STEM, VISION


def _config(source) -> tuple[dict, str | None]:
    """(config dict with model_type, transformers class name or None) from a dict, a config.json path,
    a model_type or a transformers class name."""
    import transformers

    if isinstance(source, dict):
        cfg = dict(source)
    elif isinstance(source, str) and (source.endswith(".json") or os.path.isfile(source)):
        cfg = _read(source)
    elif isinstance(source, str) and hasattr(transformers, source) and hasattr(getattr(transformers, source),
                                                                               "config_class"):
        cls = getattr(transformers, source)
        return {"model_type": cls.config_class.model_type}, source
    elif isinstance(source, str):
        cfg = {"model_type": source}
    else:
        raise CostgraphValueError(f"cannot draft from a {type(source).__name__}",
                                  hint="give a config.json path, a model_type (llama) or a transformers class")
    if not isinstance(cfg.get("model_type"), str):
        raise CostgraphValueError("the config has no model_type", hint='a config.json names it: "model_type": "llama"')
    return cfg, None


def _read(path: str) -> dict:
    """A config.json's object (not through language.hf_config, which imports this package's on_the_fly)."""
    import json

    try:
        with open(path, "rb") as f:
            data = f.read(1 << 24)
        cfg = json.loads(data.decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CostgraphValueError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}",
                                  hint="give the path of a config.json file") from None
    if not isinstance(cfg, dict):
        raise CostgraphValueError(f"{path}: a config.json holds a JSON object", hint='{"model_type": "llama", ...}')
    from ..language.hf_json import located_at_key
    from ..language.hf_sizes import refuse_bad_sizes

    try:   # a size no model has, at its FILE:LINE:COLUMN before transformers reads it
        refuse_bad_sizes(cfg, path)
    except CostgraphValueError as e:
        raise located_at_key(e, data.decode("utf-8-sig"), path) from None
    return cfg


def _config_object(cfg: dict):
    from transformers import AutoConfig

    rest = {k: v for k, v in cfg.items() if k not in ("model_type", "auto_map", "architectures")}
    if rest.get("quantization_config") is not None:
        rest["quantization_config"] = None
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    try:
        return AutoConfig.for_model(cfg["model_type"], **rest)
    except Exception as e:  # noqa: BLE001 - transformers' refusal, worded for the user
        known = CONFIG_MAPPING_NAMES.get(cfg["model_type"]) if isinstance(cfg["model_type"], str) else None
        if known:   # a field its configuration class refuses (Wav2Vec2Config: conv lists of different lengths)
            raise CostgraphValueError(
                f"transformers cannot build a config of model_type {shown(cfg['model_type'])}: {type(e).__name__}: "
                f"{str(e)[:600]}",
                hint=f"transformers' {known} refuses a field of the config (named above): write it as the released "
                     "config.json of this model type does") from None
        raise CostgraphValueError(f"transformers cannot build a config of model_type {shown(cfg['model_type'])}: "
                                  f"{type(e).__name__}: {str(e)[:200]}",
                                  hint="give a model_type of the installed transformers, or a config.json") from None


def _field(config, name: str):
    """``config.name``, or None where the config refuses a global read (Gemma 4's per-layer fields)."""
    try:
        return getattr(config, name, None)
    except Exception:  # noqa: BLE001 - AmbiguousGlobalPerLayerAttributeError and kin: not a global field
        return None


def _declared(config) -> set[str] | None:
    """The field names ``config``'s class declares (a dataclass's fields), or None for another class."""
    import dataclasses

    return {f.name for f in dataclasses.fields(type(config))} if dataclasses.is_dataclass(type(config)) else None


def _computed_alias(config, name: str) -> bool:
    """Whether ``name`` is a head size the config's ``attribute_map`` aliases to an attribute its class does not
    declare, computed in ``__post_init__`` (Zamba2: ``head_dim`` → ``attention_head_dim = 2 h / a``, transformers
    5.24 configuration_zamba2.py): set as a probe field it would override that relation."""
    alias = (getattr(type(config), "attribute_map", {}) or {}).get(name)
    declared = _declared(config)
    return name == "head_dim" and alias is not None and declared is not None and alias not in declared


#: fields probed only where the config class declares them: Zamba2's ``attention_hidden_size`` is no field of its
#: own, set to 2·h by ``__post_init__`` (transformers 5.24 configuration_zamba2.py), where RWKV's is declared
DECLARED_ONLY = ("attention_hidden_size",)


def _undeclared(config, name: str) -> bool:
    """Whether ``name`` is one of :data:`DECLARED_ONLY` that ``config``'s class does not declare."""
    declared = _declared(config)
    return name in DECLARED_ONLY and declared is not None and name not in declared


def present_fields(config, pixels: bool = False) -> list[str]:
    """The :data:`~costgraph.drafting.probe.FIELDS` the config holds as whole numbers. ``pixels``: the model reads
    images, not tokens (its forward takes ``pixel_values`` and no ``input_ids``): its image fields are probed even
    where the config holds a vocabulary (BEiT's, for its masked-image-modeling head: transformers 5.24
    configuration_beit.py ``vocab_size``, which ``BeitModel`` never reads)."""
    out = []
    settable = set(config.to_dict()) | set(getattr(type(config), "attribute_map", {}) or {})
    for f in (*FIELDS, *MAMBA2_OWN):
        if f not in settable or _computed_alias(config, f) or _undeclared(config, f):   # computed by the config
            continue
        v = _field(config, f)   # None where a per-layer field refuses a global read (Gemma 4): not probed
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:    # 0: a part the config leaves out
            out.append(f)
    if "vocab_size" in settable and not pixels:     # a model of tokens: its image fields (a multimodal config's) are not probed
        out = [f for f in out if f not in VISION]
    return out


#: sub-configs of a multimodal wrapper whose language model a text forward runs (Gemma 3's, Qwen3.5's, Llama 4's)
SUB_CONFIGS = ("text_config",)


def probed_config(config) -> tuple[str | None, object]:
    """(the sub-config's name or None, the config whose fields are probed): the config itself, or the
    ``text_config`` of a wrapper whose own fields hold no hidden size (a vision-language model: the text
    forward of its ``…ForConditionalGeneration`` runs the language model alone)."""
    if "hidden_size" in present_fields(config):
        return None, config
    for name in SUB_CONFIGS:
        sub = _field(config, name)
        if sub is not None and hasattr(sub, "to_dict") and "hidden_size" in present_fields(sub):
            return name, sub
    sub = _field(config, "encoder_config")     # k28speech13: a FastConformer's CTC wrapper (transformers 5.24
    if sub is not None and hasattr(sub, "to_dict") and STEM in present_fields(sub):   # ParakeetCTCConfig): its encoder
        return "encoder_config", sub
    return None, config


def rounded_widths(config, probe_values: dict) -> list[tuple[str, int]]:
    """(text, value at the probe) of the MLP widths a config derives from ``intermediate_size`` by rounding, which no
    product of primes names: LFM2's (transformers 5.24 modeling_lfm2.py ``Lfm2MLP.__init__``, with
    ``block_auto_adjust_ff_dim``: ``int(2 · intermediate_size / 3)``, then, with ``block_ffn_dim_multiplier`` set,
    times it and rounded up to a multiple of ``block_multiple_of``). Only a whole multiplier is read (a float times
    an int, truncated, is no exact closed form); else none."""
    i = probe_values.get("i")
    if _field(config, "block_auto_adjust_ff_dim") is not True or not isinstance(i, int):
        return []
    mult, of = _field(config, "block_ffn_dim_multiplier"), _field(config, "block_multiple_of")
    if mult is None:
        return [("floor(2 * i / 3)", 2 * i // 3)]
    if not isinstance(mult, (int, float)) or isinstance(mult, bool) or mult != int(mult) or mult < 1 \
            or not isinstance(of, int) or isinstance(of, bool) or of < 1:
        return []
    inner = "floor(2 * i / 3)" if mult == 1 else f"{int(mult)} * floor(2 * i / 3)"
    width = int(mult) * (2 * i // 3)
    return [(f"{of} * ceil({inner} / {of})", of * -(-width // of))]
