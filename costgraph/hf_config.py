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
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path

from .errors import CostgraphValueError, Location
from .model import Costs, Model, load


@dataclass
class HFModel:
    """A model built from a ``config.json``: ``model`` (a :class:`Model`),
    ``values`` (dimension name → int, from the config and defaults),
    ``model_type`` and ``source`` (the file)."""

    model: Model
    values: dict[str, int]
    model_type: str
    source: str

    def costs(self, scope: str = "model", **kwargs) -> Costs:
        return self.model.costs(scope, **kwargs)


@cache
def mapping() -> dict:
    """The parsed ``hf_mapping.toml``: model_type → entry."""
    return tomllib.loads((files("costgraph") / "hf_mapping.toml").read_text(encoding="utf-8"))


def supported_model_types() -> tuple[str, ...]:
    return tuple(sorted(mapping()))


_MISSING = object()


class _Reader:
    def __init__(self, config: dict, source: str):
        self.config = config
        self.source = source

    def fail(self, message: str, hint: str | None = None):
        raise CostgraphValueError(f"{self.source}: {message}", hint=hint)

    def raw(self, key: str, default=_MISSING):
        v = self.config.get(key, None)
        if v is None:
            if default is _MISSING:
                self.fail(f"missing key '{key}'", hint="is this a complete config.json?")
            return default
        return v

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
                self.fail(f"{what}: {num} is not divisible by {den}")
            return num // den
        if "product" in spec:
            x, y = (self.number(s, what, whole=False) for s in spec["product"])
            v = x * y
            if v != int(v):
                self.fail(f"{what}: {x} × {y} = {v} is not a whole number")
            return int(v)
        if "if_key" in spec:
            flag = self.raw(spec["if_key"], False)
            if not isinstance(flag, bool):
                self.fail(f"key '{spec['if_key']}' must be true or false, got {flag!r}")
            return self.spec(spec["then"] if flag else spec["else"], what)
        if "key" in spec:
            if "fallback" in spec:
                v = self.raw(spec["key"], None)
                return v if v is not None else self.spec(spec["fallback"], what)
            return self.raw(spec["key"], spec.get("default", _MISSING))
        raise AssertionError(spec)

    def number(self, spec, what: str, whole: bool = True):
        v = self.spec(spec, what)
        name = spec if isinstance(spec, str) else spec.get("key", what)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or (whole and not isinstance(v, int)) or v <= 0:
            kind = "a positive whole number" if whole else "a positive number"
            self.fail(f"key '{name}' must be {kind}, got {v!r}")
        return v


def from_hf_config(config: dict, *, source: str = "<config>", dropout: bool = False,
                   profile: str = "korthikanti") -> HFModel:
    """Map a parsed ``config.json`` to a bundled model and dimension values.

    Dropout is off by default (inference and modern training recipes).

    Raises
    ------
    CostgraphValueError
        Unknown ``model_type`` (the message lists the supported ones); a
        missing or ill-typed key (named, with the file); a variant the
        bundled model files do not describe (``unsupported`` in the mapping).
    """
    if not isinstance(config, dict):
        raise CostgraphValueError(f"{source}: a config.json holds a JSON object")
    model_type = config.get("model_type")
    table = mapping()
    if model_type is None:
        raise CostgraphValueError(f"{source}: no 'model_type' key",
                                  hint="a Hugging Face config.json names its architecture in model_type; "
                                       "supported: " + ", ".join(supported_model_types()))
    if not isinstance(model_type, str) or model_type not in table:
        raise CostgraphValueError(
            f"{source}: unsupported model_type {model_type!r}",
            hint="supported: " + ", ".join(supported_model_types()))
    entry = table[model_type]
    r = _Reader(config, source)
    for rule in entry.get("unsupported", ()):
        v = config.get(rule["key"], None)
        if v is not None and v not in rule["allowed"]:
            r.fail(f"{rule['key']} = {json.dumps(v)} is a variant costgraph's '{entry['model']}' model does not "
                   f"describe (supported: {', '.join(json.dumps(a) for a in rule['allowed'])})")
    options = {}
    for name, spec in entry.get("options", {}).items():
        v = r.spec(spec, name)
        if not isinstance(v, bool):
            r.fail(f"option '{name}' needs true or false from the config, got {v!r}")
        options[name] = v
    model = load(entry["model"], dropout=dropout, options=options, profile=profile)
    values = {}
    for name, spec in entry.get("dims", {}).items():
        if name not in model.graph.dims or model.graph.dims[name].derived is not None:
            continue
        values[name] = r.number(spec, name)
    missing = [n for n in model.symbols if n not in values]
    if missing:
        r.fail(f"no value for {', '.join(missing)} in the mapping of {model_type}")
    model.values(**values)   # checks shapes come out whole
    return HFModel(model, values, model_type, source)


def load_hf_config(path: str, *, dropout: bool = False, profile: str = "korthikanti") -> HFModel:
    """Read a ``config.json`` file and map it (see :func:`from_hf_config`).

    Raises
    ------
    CostgraphValueError
        Unreadable file, invalid JSON (with line and column), or as
        :func:`from_hf_config`.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CostgraphValueError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise CostgraphValueError(f"{path} is a directory", hint="give the config.json inside it") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CostgraphValueError(f"cannot read {path}: {e}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        lines = text.splitlines()
        src = lines[e.lineno - 1] if 0 < e.lineno <= len(lines) else ""
        raise CostgraphValueError(f"invalid JSON: {e.msg}", Location(path, e.lineno, e.colno, src)) from None
    return from_hf_config(config, source=path, dropout=dropout, profile=profile)
