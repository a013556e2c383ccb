"""The mapping of Hugging Face ``config.json`` files to model files: ``costgraph/hf_mapping.toml``
read and checked by :mod:`costgraph.datafiles`, each entry's ``like`` resolved (issue 31 item 5: one
base per family instead of the same keys in every entry). :mod:`costgraph.language.hf_config`
reads configs with it."""

from __future__ import annotations

from functools import cache

from .. import datafiles


#: ``hf_mapping.toml``: a mapping (config.json keys → a model's options and dimensions), not numbers.
#: ``like = "llama"`` takes that entry's keys (its ``dims`` and ``options`` merged key by key, the
#: other keys replaced by the entry's own) except ``model``, which is the entry's own name unless it
#: says; the dimensions of :data:`DEFAULT_DIMS` are read as there unless an entry says, and ``s`` (the
#: sequence) as the entry's own ``s_max`` (the context length) where it gives that and no ``s``. ``allowed``
#: (``[KEY, VALUE, ...]`` pairs) is a short form of the leading ``unsupported`` rules: an entry that
#: gives either replaces its base's rules.
HF_MAPPING = datafiles.Schema("hf_mapping.toml", "costgraph", entries=datafiles.Kind("model_type", (
    datafiles.Field("model", "text", required=False), datafiles.Field("like", "ref", required=False),
    datafiles.Field("dims", "table", required=False),
    datafiles.Field("options", "table", required=False), datafiles.Field("allowed", "list", required=False),
    datafiles.Field("unsupported", "list", required=False),
    datafiles.Field("layer_indices", "list", required=False), datafiles.Field("dropout_keys", "names", required=False),
    datafiles.Field("nested_defaults", "names", required=False),
    datafiles.Field("class_names", "names", required=False))))

#: What an entry of ``hf_mapping.toml`` reads for a dimension it does not name (a dimension its
#: model file lacks is skipped): one sequence (``--set b=N``), and transformers' usual keys of the
#: vocabulary, layer count and query heads (``PretrainedConfig`` subclasses' common names).
DEFAULT_DIMS = {"b": {"value": 1}, "V": "vocab_size", "l": "num_hidden_layers", "a": "num_attention_heads"}
#: The keys whose tables ``like`` merges key by key (the others an entry replaces whole).
_MERGED = ("dims", "options")


def _checks(entry) -> list | None:
    """The entry's own ``unsupported`` rules: its ``allowed`` pairs first, each ``[KEY, V, ...]`` read as
    ``{ key = KEY, allowed = [V, ...] }`` (``[KEY]`` alone: only absent or null), then its ``unsupported``
    list; None when it gives neither (then ``like``'s rules hold). A pair that is not a list starting with
    a key is refused, located at the entry's ``allowed``."""
    pairs, rules = entry.values.get("allowed"), entry.values.get("unsupported")
    if pairs is None:
        return None if rules is None else list(rules)
    out = []
    for pair in pairs:
        if not (isinstance(pair, list) and pair and isinstance(pair[0], str) and pair[0]):
            raise entry.error("allowed holds an item that is not [KEY, VALUE, ...]", "allowed",
                              hint='write allowed = [["hidden_act", "silu"], ["attention_bias", false]]')
        out.append({"key": pair[0], "allowed": list(pair[1:])})
    return out + list(rules or ())


@cache
def mapping() -> dict:
    """The parsed ``hf_mapping.toml``: model_type → entry (its keys checked by
    :mod:`costgraph.datafiles` against :data:`HF_MAPPING`), each ``like`` resolved and
    :data:`DEFAULT_DIMS` filled in (:func:`resolve_entries`)."""
    return resolve_entries(datafiles.bundled(HF_MAPPING).entries)


def resolve_entries(entries) -> dict:
    """``{model_type: entry}`` of validated ``entries`` (:class:`costgraph.datafiles.Entry`), with
    ``like`` resolved, ``model`` defaulting to the entry's name, ``allowed`` read into the leading
    ``unsupported`` rules (:func:`_checks`), ``s`` read as the entry's own ``s_max`` where it gives no ``s``
    and :data:`DEFAULT_DIMS` filled in.

    Raises CostgraphValueError (located at the entry's ``like``) for a cycle of ``like``, and (at its
    ``allowed``) for an ``allowed`` item that is not ``[KEY, VALUE, ...]``."""
    out: dict = {}

    def resolve(name: str, chain: tuple = ()) -> dict:
        if name in out:
            return out[name]
        entry = entries[name]
        own = {k: (list(v) if k == "dropout_keys" else v) for k, v in entry.values.items()
               if k not in ("like", "allowed", "unsupported")}
        checks = _checks(entry)
        if checks is not None:
            own["unsupported"] = checks
        if "s_max" in own.get("dims", {}) and "s" not in own["dims"]:   # the sequence: the context length
            own["dims"] = {**own["dims"], "s": own["dims"]["s_max"]}
        own.setdefault("model", name)
        base = entry.values.get("like")
        if base is None:
            merged = own
        elif base in chain or base == name:
            raise entry.error(f"like = {base!r} runs in a cycle ({' → '.join(chain + (name, base))})", "like",
                              hint="a like chain ends at an entry without like")
        else:
            merged = dict(resolve(base, chain + (name,)))
            for k, v in own.items():
                merged[k] = {**merged.get(k, {}), **v} if k in _MERGED else v
        if "dims" not in merged:
            raise entry.error("no 'dims' (neither its own nor through like)", "dims")
        merged["dims"] = {**merged["dims"], **{d: v for d, v in DEFAULT_DIMS.items() if d not in merged["dims"]}}
        out[name] = merged
        return merged

    for name in entries:
        resolve(name)
    return out


def supported_model_types() -> tuple[str, ...]:
    """The ``model_type`` values ``hf_mapping.toml`` maps, sorted."""
    return tuple(sorted(mapping()))
