"""Hugging Face ``config.json`` → a bundled model, its options and dimension values.

The mapping is data: ``costgraph/hf_mapping.toml`` names, for each
``model_type``, the model file and where each option and dimension comes
from. Values are read from the parsed JSON and checked (positive whole
numbers, true/false); nothing is evaluated as code.

>>> import costgraph
>>> m = costgraph.from_hf_config({"model_type": "llama", "hidden_size": 4096,
...     "num_attention_heads": 32, "num_hidden_layers": 32, "intermediate_size": 11008,
...     "vocab_size": 32000, "max_position_embeddings": 4096})
>>> m.costs().evaluate(**m.values)["params"]          # Llama-2-7B
6738415616
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from .. import arguments
from ..arguments import shown
from ..errors import CostgraphValueError
from ..model import Costs, Model, load, loads
from .hf_mapping import HF_MAPPING, mapping, supported_model_types  # noqa: F401 (the mapping's readers import them from here)
from .hf_json import (MAX_JSON_BYTES, MAX_JSON_DEPTH, DuplicateKeyWarning,  # noqa: F401 (callers import them from here)
                      _json_shown, keyed, located_at_key, parse_json, read_config, read_text)



@dataclass
class HFModel:
    """A model built from a ``config.json``: ``model`` (a :class:`Model`),
    ``values`` (dimension name → int, from the config and defaults),
    ``model_type`` and ``source`` (the file)."""

    model: Model
    values: dict[str, int]
    model_type: str
    source: str
    config: dict | None = field(default=None, repr=False)
    #: where the model file comes from when no bundled file maps the model_type: "drafted from
    #: transformers 5.24.0 `PhiForCausalLM`" (:mod:`costgraph.drafting.on_the_fly`); None for a bundled one
    origin: str | None = None

    def costs(self, scope: str = "model", **kwargs) -> Costs:
        return self.model.costs(scope, **kwargs)

    def shipped(self):
        """The weight storage the config.json describes (``quantization_config``, ``torch_dtype``):
        a :class:`costgraph.language.hf_quant.Shipped` (its dtype name, scope, kept modules, source).

        Raises CostgraphValueError for a malformed ``quantization_config`` (named, with the file)."""
        from .hf_quant import shipped

        return shipped(self.config or {}, self.source)


_MISSING = object()


def nested_get(config: dict, key: str):
    """``config[key]``, else, for a dotted key ``"text_config.hidden_size"`` that is not itself a
    key, the value inside the nested objects (LLaVA's ``text_config`` / ``vision_config``);
    None when absent or when a step is not an object."""
    if key in config or "." not in key:
        return config.get(key, None)
    v = config
    for part in key.split("."):
        if not isinstance(v, dict):
            return None
        v = v.get(part, None)
    return v


def _holds(config: dict, key: str) -> bool:
    """Whether ``config`` has ``key`` (dotted: inside its nested objects), whatever its value (null too)."""
    if key in config or "." not in key:
        return key in config
    head, _, last = key.rpartition(".")
    parent = nested_get(config, head)
    return isinstance(parent, dict) and last in parent


class _Reader:
    def __init__(self, config: dict, source: str):
        self.config = config
        self.source = source

    def fail(self, message: str, hint: str | None = None, key: str | None = None):
        """Refuse the config: ``SOURCE: message``; ``key``, the config key it is about (dotted where nested), is
        where :func:`load_hf_config` locates it in the file (``FILE:LINE:COLUMN``, hf_json.located_at_key)."""
        raise keyed(CostgraphValueError(f"{self.source}: {message}", hint=hint), key, message)

    def import_hint(self, why: str) -> str:
        """A hint for a config the bundled model file cannot read but transformers builds: ``why``, then the
        draft of its own PyTorch model (``costgraph import``, :mod:`costgraph.drafting`), which reads the sizes
        as PyTorch does (``hidden_size // num_attention_heads``: ``floor(h / a)``)."""
        path = self.source if self.source.endswith(".json") else "CONFIG.json"
        return f"{why}; costgraph import {path} -o model.cg drafts this model from its PyTorch code (the torch " \
               "extra), which takes the sizes as transformers does; then give model.cg"

    def raw(self, key: str, default=_MISSING):
        if "." in key and key not in self.config:
            self._nested_tables(key)
        v = nested_get(self.config, key)
        if v is None:
            if default is _MISSING:
                if _holds(self.config, key):   # trial 9: DeepseekV2Config()'s num_experts_per_tok, written null
                    self.fail(f"key '{key}' is null: the config leaves it unset",
                              hint=f"a transformers class's default config may leave '{key}' unset (None); write "
                                   "the released model's value into the config.json", key=key)
                self.fail(f"missing key '{key}'", hint="is this a complete config.json?")
            return default
        return v

    #: sub-configs that may be missing or null, read as their class's defaults (the mapping entry's
    #: ``nested_defaults``: CLIPConfig builds CLIPTextConfig() for a missing text_config)
    nested_defaults: frozenset = frozenset()

    def _nested_tables(self, key: str) -> None:
        """Every level above a dotted key's last (``text_config`` of ``text_config.hidden_size``) is an
        object in the config. A non-object level is refused (transformers refuses it too); a missing or
        null one is refused unless the entry's ``nested_defaults`` names it: LlavaConfig builds its own
        vision tower for a missing vision_config (1024 wide, 24 layers, patch 14), not
        CLIPVisionConfig's defaults the mapping falls back to."""
        v, path = self.config, []
        for part in key.split(".")[:-1]:
            path.append(part)
            v = v.get(part, None)
            if v is None and ".".join(path) in self.nested_defaults:
                return
            if not isinstance(v, dict):
                where = ".".join(path)
                got = "nothing (missing or null)" if v is None else shown(v)
                self.fail(f"key '{where}' must be an object (the nested configuration), got {got}",
                          hint=f"a config.json of this model_type has a '{where}' object, as transformers saves it",
                          key=where)

    def spec(self, spec, what: str):
        """Evaluate one value spec of the mapping (see hf_mapping.toml)."""
        if isinstance(spec, str):
            return self.raw(spec)
        if "value" in spec:
            return spec["value"]
        if "present" in spec:
            return self.config.get(spec["present"]) is not None
        if "quotient" in spec:
            num, den = (self.number(s, what) for s in spec["quotient"])
            if den == 0 or num % den:
                top, bottom = (f"{k} = {v}" if isinstance(k, str) else str(v) for k, v in zip(spec["quotient"], (num, den)))
                self.fail(f"{what}: {top} is not divisible by {bottom}", hint=self.import_hint(
                    "the bundled model file reads a whole quotient (a released model's config.json divides evenly)"),
                    key=next((k for k in spec["quotient"] if isinstance(k, str)), None))
            return num // den
        if "ceil_quotient" in spec:     # MambaConfig's "auto" rank of Δ: ceil(hidden_size / 16)
            num, den = (self.number(s, what) for s in spec["ceil_quotient"])
            return -(-num // den)
        if "product" in spec:
            x, y = (self.number(s, what, whole=False) for s in spec["product"])
            v = x * y
            if not math.isfinite(v) or v >= arguments._LIMIT:
                self.fail(f"{what}: {shown(x)} × {shown(y)} is too large")
            if v != int(v):
                self.fail(f"{what}: {shown(x)} × {shown(y)} = {shown(v)} is not a whole number")
            return int(v)
        if "if_key" in spec:
            flag = self.raw(spec["if_key"], False)
            if not isinstance(flag, bool):
                self.fail(f"key '{spec['if_key']}' must be true or false, got {shown(flag)}", key=spec["if_key"])
            return self.spec(spec["then"] if flag else spec["else"], what)
        if "contains" in spec:   # { contains = "k", item = X }: true when the list k (absent: empty) holds X
            items = self.raw(spec["contains"], [])
            return isinstance(items, list) and spec["item"] in items
        if "swiglu_width" in spec:   # { swiglu_width = SPEC }: DINOv2's SwiGLUFFN, ⌊2v/3⌋ up to a multiple of 8
            return ((2 * self.number(spec["swiglu_width"], what)) // 3 + 7) // 8 * 8
        if "isqrt" in spec:    # { isqrt = SPEC }: its whole square root (Gemma 3's image tokens per side)
            v = self.number(spec["isqrt"], what)
            root = math.isqrt(v)
            if root * root != v:
                self.fail(f"{what}: {v} is not a perfect square", hint="a square number of image tokens (256)")
            return root
        if "length" in spec:   # { length = "k", default = V }: the number of entries of k (ViT's id2label)
            if "fallback" in spec:   # { length = "k", fallback = SPEC }: k absent or null → SPEC (Kimi Linear)
                v = self.raw(spec["length"], None)
                return len(v) if isinstance(v, (dict, list)) else self.spec(spec["fallback"], what)
            v = self.raw(spec["length"], spec.get("default", _MISSING))
            return len(v) if isinstance(v, (dict, list)) else v
        if "count" in spec:    # { count = "k", of = [...], kinds = [...] }: entries of list k in `of` (absent: 0;
            # `required = true`: absent is refused; `fallback = SPEC`: absent or null → SPEC)
            if "fallback" in spec and self.raw(spec["count"], None) is None:
                return self.spec(spec["fallback"], what)
            v = self.raw(spec["count"], _MISSING if spec.get("required") else [])
            if not isinstance(v, list) or not all(isinstance(x, str) and x in spec["kinds"] for x in v):
                self.fail(f"key '{spec['count']}' must be a list of {', '.join(spec['kinds'])}, got {shown(v)}",
                          key=spec["count"])
            return sum(1 for x in v if x in spec["of"])
        if "layer_config" in spec:   # { layer_config = "k", layer = N, fallback = SPEC }: Gemma 4's full layers
            return self._layer_config(spec, what)
        if "equals" in spec:   # { key = "k", default = V, equals = X }: true when k (or V) is X
            return self.raw(spec["key"], spec.get("default", _MISSING)) == spec["equals"]
        if "differs" in spec:  # { key = "k", default = V, differs = X }: true when k (or V) is not X (Gemma 4's
            return self.raw(spec["key"], spec.get("default", _MISSING)) != spec["differs"]   # num_kv_shared_layers)
        if "key" in spec:
            if "fallback" in spec:
                v = self.raw(spec["key"], None)
                return v if v is not None else self.spec(spec["fallback"], what)
            v = self.raw(spec["key"], spec.get("default", _MISSING))
            if "auto" in spec and v == "auto":   # { key = "k", auto = SPEC }: the config's "auto" is SPEC
                return self.spec(spec["auto"], what)
            return v
        raise AssertionError(spec)

    def _layer_config(self, spec, what: str):
        """Key ``k`` of layer N's entry in ``per_layer_config`` (transformers' HeterogeneousConfigMixin; saved
        with zero-padded layer numbers, "05" of 30 layers, "5" of 6); no such entry or key: the fallback."""
        table = self.config.get("per_layer_config")
        if table is not None and not isinstance(table, dict):
            self.fail(f"key 'per_layer_config' must be an object (layer number → overrides), got {shown(table)}",
                      key="per_layer_config")
        entry = next((e for k, e in (table or {}).items() if arguments.digits(str(k)) and int(k) == spec["layer"]), None)
        v = entry.get(spec["layer_config"]) if isinstance(entry, dict) else None
        return v if v is not None else self.spec(spec["fallback"], what)

    def number(self, spec, what: str, whole: bool = True):
        v = self.spec(spec, what)
        name = spec if isinstance(spec, str) else spec.get("key", what)
        key = name if isinstance(spec, str) or "key" in spec else None   # else a value derived from several
        if (isinstance(v, bool) or not isinstance(v, (int, float)) or (whole and not isinstance(v, int))
                or not v > 0 or (isinstance(v, float) and not math.isfinite(v))):   # `not v > 0`: NaN too
            kind = "a positive whole number" if whole else "a positive finite number"
            self.fail(f"key '{name}' must be {kind}, got {shown(v)}",
                      hint=f"write '{name}' as the released config.json does: a JSON number above 0"
                           + (" without a fraction" if whole else ""), key=key)
        if v >= arguments._LIMIT:
            self.fail(f"key '{name}' is too large: {shown(v)} (at most {arguments.MAX_DIGITS} digits)", key=key)
        if name in FRACTION_KEYS and v > 1:   # as the model file's rope(x, r) refuses r above the head size
            self.fail(f"key '{name}' is the fraction of each head that is rotated, at most 1, got {shown(v)}",
                      hint="write a number in (0, 1]: 1 rotates the whole head (Pythia's rotary_pct is 0.25)", key=key)
        return v


#: config keys holding a fraction of each attention head (the rotated part): in (0, 1]
FRACTION_KEYS = ("rotary_pct", "partial_rotary_factor")


#: config keys holding a dropout probability (GPT-2, OPT, T5, Falcon, LLaMA-style
#: ``attention_dropout``, ...); an entry's ``dropout_keys`` in the mapping replaces them
DROPOUT_KEYS = ("attn_pdrop", "embd_pdrop", "resid_pdrop", "summary_first_dropout", "dropout", "dropout_rate",
                "attention_dropout", "hidden_dropout", "activation_dropout", "classifier_dropout")


def dropout_in(config: dict, keys=DROPOUT_KEYS) -> bool:
    """The rule for ``dropout=None``: dropout is on when any of the config's dropout
    probabilities is set and above 0 (costgraph's dropout is one switch: every
    ``dropout(...)`` of the model file keeps its mask; the rate changes no cost)."""
    for k in keys:
        v = nested_get(config, k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            return True
    return False


def _model_type(config: dict, source: str) -> str:
    """The config's ``model_type``, one the mapping supports."""
    model_type = config.get("model_type")
    if model_type is None and "_class_name" in config:
        return _diffusers_type(config, source)
    if model_type is None:
        raise CostgraphValueError(f"{source}: no 'model_type' key",
                                  hint="a Hugging Face config.json names its architecture in model_type; "
                                       "supported: " + ", ".join(supported_model_types()))
    if not isinstance(model_type, str) or model_type not in mapping():
        said = f"unsupported model_type {shown(model_type)}"
        raise keyed(CostgraphValueError(f"{source}: {said}", hint="supported: " + ", ".join(supported_model_types())),
                    "model_type", said)
    return model_type


def _diffusers_type(config: dict, source: str) -> str:
    """The mapping entry of a diffusers ``config.json``, which names its class in ``_class_name``
    (``DiTTransformer2DModel``, ``SD3Transformer2DModel``) instead of a ``model_type``: the entry
    whose ``class_names`` holds it. The legacy ``Transformer2DModel`` (the released DiT-XL-2
    configs) is DiT only with ``norm_type`` "ada_norm_zero", as diffusers builds it."""
    name = config["_class_name"]
    known = {c: t for t, e in mapping().items() for c in e.get("class_names", ())}
    if not isinstance(name, str) or name not in known:
        raise CostgraphValueError(f"{source}: unsupported diffusers class (_class_name) {shown(name)}",
                                  hint="supported: " + ", ".join(sorted(known)))
    if name == "Transformer2DModel" and config.get("norm_type") != "ada_norm_zero":
        raise CostgraphValueError(
            f"{source}: a Transformer2DModel with norm_type {shown(config.get('norm_type', 'layer_norm'))} is not DiT",
            hint="costgraph maps Transformer2DModel only as DiT (norm_type \"ada_norm_zero\", the DiT-XL-2 releases)")
    return known[name]


def _check_unsupported(r: _Reader, config: dict, entry: dict) -> None:
    """Refuse a variant the mapped model file does not describe (the entry's ``unsupported`` rules)."""
    for rule in entry.get("unsupported", ()):
        v = nested_get(config, rule["key"])
        if v is None:
            continue
        if "cycle" in rule:
            _check_cycle(r, rule, v, entry["model"])
        elif "last_layer" in rule:   # ERNIE 4.5's moe_layer_end_index: -1 or the last layer's index
            n = r.number(rule["last_layer"], rule["last_layer"])
            if v not in (-1, n - 1) or isinstance(v, bool):
                r.fail(f"{rule['key']} = {_json_shown(v)} is a variant costgraph's '{entry['model']}' model does not "
                       f"describe (supported: -1 or {n - 1}, the last layer)", key=rule["key"])
        elif "at_least" in rule:     # Jamba's num_experts = 1: dense MLPs everywhere, not a 1-expert MoE
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v < rule["at_least"]:
                r.fail(f"{rule['key']} = {_json_shown(v)} is a variant costgraph's '{entry['model']}' model does not "
                       f"describe (supported: {rule['at_least']} or more)", key=rule["key"])
        elif v not in rule["allowed"]:
            r.fail(f"{rule['key']} = {_json_shown(v)} is a variant costgraph's '{entry['model']}' model does not "
                   f"describe (supported: {', '.join(json.dumps(a) for a in rule['allowed']) or 'null or absent'})",
               key=rule["key"])


def _drafted(config: dict, source: str, dropout, profile: str) -> HFModel:
    """An unmapped model_type, drafted from transformers and checked against PyTorch, or refused
    (issue 28: :func:`costgraph.drafting.on_the_fly.draft_text`); its values are the draft's
    configuration ``imported`` (s the context length, b 1)."""
    from ..drafting.on_the_fly import draft_text
    from .hf_sizes import refuse_bad_sizes

    refuse_bad_sizes(config, source)   # before transformers: at FILE:LINE:COLUMN, not a PyTorch constructor's error
    text, _, origin = draft_text(config, source, "bundled: " + ", ".join(supported_model_types()))
    model = loads(text, path=f"<{origin}>", config="imported", profile=profile,
                  dropout=dropout_in(config) if dropout is None else dropout)
    values = {str(k): int(v) for k, v in model.values("imported").items()}
    return HFModel(model, values, str(config["model_type"]), source, config, origin=origin)


def from_hf_config(config: dict, *, source: str = "<config>", dropout: bool | None = None,
                   profile: str = "korthikanti", model: str | None = None, options: dict | None = None) -> HFModel:
    """Map a parsed ``config.json`` to a bundled model and dimension values.

    ``dropout=None`` (the default) follows the config: dropout on when any of
    its dropout rates (``attention_dropout``, ``hidden_dropout``,
    ``resid_pdrop``, ``dropout``, ... : :data:`DROPOUT_KEYS`) is above 0, so
    its masks are counted; off otherwise (most released decoder configs set
    them to 0). ``True``/``False`` force it. ``model`` (a bundled name or a
    ``.cg`` path) replaces the mapped model file: the mapping's options that
    it declares and its dimensions are taken from the config as usual.
    ``options`` (name → true/false) set the model's options over the mapping's
    (DeepSeek-V3's ``{"mtp": True}``: its MTP depths from
    ``num_nextn_predict_layers``).

    Raises
    ------
    CostgraphValueError
        Unknown ``model_type`` (the message lists the supported ones); a
        missing or ill-typed key (named, with the file); a variant the
        bundled model files do not describe (``unsupported`` in the mapping).
    """
    source = arguments.text(source, "source")
    options_given = options
    if dropout is not None:
        dropout = arguments.flag(dropout, "dropout")
    profile = arguments.text(profile, "profile")
    if not isinstance(config, dict):
        raise CostgraphValueError(f"{source}: a config.json holds a JSON object, got {shown(config)}",
                                  hint="a config.json is one JSON object {...} (from Python: pass a dict, or the "
                                       "file's path to load_hf_config)")
    unmapped = config.get("model_type")
    if model is None and isinstance(unmapped, str) and unmapped not in mapping() and "_class_name" not in config:
        return _drafted(config, source, dropout, profile)
    model_type = _model_type(config, source)
    entry = mapping()[model_type]
    r = _Reader(config, source)
    r.nested_defaults = frozenset(entry.get("nested_defaults", ()))
    _check_unsupported(r, config, entry)
    options = {}
    for name, spec in entry.get("options", {}).items():
        v = r.spec(spec, name)
        if not isinstance(v, bool):
            r.fail(f"option '{name}' needs true or false from the config, got {shown(v)}",
                   key=spec if isinstance(spec, str) else spec.get("key"))
        options[name] = v
    options.update(options_given or {})
    for rule in entry.get("layer_indices", ()):
        _check_layer_indices(r, rule, entry["model"])
    for key in entry.get("dropout_keys", DROPOUT_KEYS):   # a probability, even when dropout is forced
        v = nested_get(config, key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1):
            r.fail(f"key '{key}' must be a dropout probability, a number in [0, 1), got {shown(v)}", key=key)
    if dropout is None:
        dropout = dropout_in(config, entry.get("dropout_keys", DROPOUT_KEYS))
    if model is None:
        model = load(entry["model"], dropout=dropout, options=options, profile=profile)
    else:
        declared = load(model, dropout=dropout, profile=profile).graph.options
        model = load(model, dropout=dropout, profile=profile,
                     options={k: v for k, v in options.items() if k in declared})
    values = {}   # in the model file's order of its dimensions
    specs = entry.get("dims", {})
    for name, dim in model.graph.dims.items():
        if name in specs and dim.derived is None:
            values[name] = r.number(specs[name], name)
    missing = [n for n in model.symbols if n not in values]
    if missing:
        r.fail(f"no value for {', '.join(missing)} in the mapping of {model_type}")
    model.values(**values)   # checks shapes come out whole
    return HFModel(model, values, model_type, source, config)


def _check_cycle(r: _Reader, rule: dict, v, model: str) -> None:
    """An ``unsupported`` rule ``{ key = "k", cycle = [...], length = "n" }``:
    the list ``k`` (Hugging Face's per-layer ``layer_types``) must be ``cycle``
    repeated and cut to the value of key ``length`` — the layer pattern the
    model file writes with ``if j % len(cycle) == ...``. Anything else is a
    variant the model does not describe (refused, with the expected list)."""
    cycle, key = rule["cycle"], rule["key"]
    n = r.number(rule["length"], rule["length"]) if "length" in rule else (len(v) if isinstance(v, list) else 0)
    want = [cycle[j % len(cycle)] for j in range(n)]
    if v != want:
        r.fail(f"{key} = {_json_shown(v)} is a variant costgraph's '{model}' model does not describe "
               f"(supported: {json.dumps(cycle)} repeated over the {n} layers)", key=key)


def _check_layer_indices(r: _Reader, rule: dict, model: str) -> None:
    """A ``layer_indices`` rule ``{ key = "k", every = SPEC, length = SPEC }``:
    the list of layer numbers ``k`` (Llama 4's ``moe_layers``), when set, must
    be every ``every``-th layer — ``every − 1, 2·every − 1, …`` below
    ``length`` — the pattern the model file writes with ``if j % every ==
    every − 1`` (and what transformers derives from
    ``interleave_moe_layer_step`` when the key is absent). ``first = F``
    starts the layers at ``F`` instead (``j % every == F``: Mllama's
    cross-attention layers 3, 8, 13, …); ``default = [...]`` is checked when
    the key is absent (what the config class then sets). A dotted key reads a
    nested config. Anything else is a variant the model does not describe
    (refused, with the expected list)."""
    v = nested_get(r.config, rule["key"])
    if v is None:
        if "default" not in rule:
            return
        v = rule["default"]   # what the config class sets when the key is absent (Mllama's [3, 8, ..., 38])
    step, n = r.number(rule["every"], "every"), r.number(rule["length"], "length")
    first = rule.get("first", step - 1)   # { first = F }: the layers F, F + every, ... (Mllama: 3)
    want = list(range(first, n, step))
    if v != want:
        r.fail(f"{rule['key']} = {_json_shown(v)} is a variant costgraph's '{model}' model does not describe "
               f"(supported: the layers j with j % {step} == {first}, {json.dumps(want)})", key=rule["key"])


def load_hf_config(path: str, *, dropout: bool | None = None, profile: str = "korthikanti",
                   model: str | None = None, options: dict | None = None) -> HFModel:
    """Read a ``config.json`` file and map it (see :func:`from_hf_config`).

    Raises
    ------
    CostgraphValueError
        Unreadable file, invalid JSON (with line and column), or as
        :func:`from_hf_config`.
    """
    path = arguments.path_like(path, "path", hint="the path of a config.json file")
    if dropout is not None:
        dropout = arguments.flag(dropout, "dropout")
    profile = arguments.text(profile, "profile")
    text = read_text(path)
    try:
        return from_hf_config(parse_json(text, path), source=path, dropout=dropout, profile=profile, model=model,
                              options=options)
    except CostgraphValueError as e:   # a key's value refused: at its FILE:LINE:COLUMN in the file
        raise located_at_key(e, text, path) from None
