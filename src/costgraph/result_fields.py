"""The fields of the typed results (:mod:`costgraph.results`): a quantity's unit, label and JSON name
(:class:`Quantity`, declared on a dataclass field with :func:`quantity`, read back with
:func:`quantities`, written as JSON by :func:`json_fields`), and the cells of a result's table
(:class:`Q`, a number with its unit; :class:`Table`), which :mod:`costgraph.export.display` renders; a
result's JSON document, declared as its ``DOCUMENT`` of :class:`Key` (JSON name, source field, unit,
label, the kind of value) and written by :func:`document_json` with the renderer's writers.

Light at import: the standard library only (no SymPy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields


@dataclass(frozen=True)
class Quantity:
    """What a renderer needs to show one quantity: ``unit`` (``bytes``, ``s``, ``FLOP``, ``FLOP/token``,
    ``FLOP/s``, ``tokens``, ``tokens/s``, ``days``, ``GPU-hours``, ``PF-days``, ``SMs``, ``parameters``;
    ``""`` for a count, a ratio or a text), ``label`` (the words a table or the text report shows),
    ``json`` (its key in the command's JSON; None: not in the JSON), ``omit_none`` (left out of the JSON
    when None rather than written as ``null``)."""

    unit: str = ""
    label: str = ""
    json: str | None = ""
    omit_none: bool = False


def quantity(unit: str = "", *, label: str = "", json: str | None = "", omit_none: bool = False,
             present_with: str | None = None, default=MISSING, default_factory=MISSING, init: bool = True):
    """A dataclass field that is a quantity: its :class:`Quantity` (unit, label, JSON name) in the
    field's metadata (key ``"quantity"``; an empty ``label`` or ``json`` is the field's name, a
    ``json`` of None keeps the field out of the JSON). ``present_with``: the name of another field; this
    one is a key of a :class:`Part` only while that one is not None (metadata key ``"present_with"``:
    vLLM's figures of a cache the device memory sized, keys exactly when ``requested_bytes`` is set)."""
    meta = {"quantity": Quantity(unit, label, json, omit_none)}
    if present_with is not None:
        meta["present_with"] = present_with
    return field(default=default, default_factory=default_factory, init=init, metadata=meta)


def quantities(result) -> list[tuple[str, Quantity]]:
    """The quantity fields of a dataclass (or its instance), in their order: ``(field name, Quantity)``
    with the label and the JSON name filled in (the field's name where none is given)."""
    out = []
    for f in fields(result):
        q = f.metadata.get("quantity")
        if q is not None:
            out.append((f.name, Quantity(q.unit, q.label or f.name, f.name if q.json == "" else q.json, q.omit_none)))
    return out


def json_fields(result, number) -> dict:
    """The JSON of ``result``'s quantity fields, by their JSON names in field order: each value through
    ``number(value, quantity)`` (the caller's conversion of an exact number, which may read the unit:
    a float, an int, a text), None as ``null`` (or left out: ``omit_none``), text and bools as they are."""
    out = {}
    for name, q in quantities(result):
        v = getattr(result, name)
        if q.json is None or (v is None and q.omit_none):
            continue
        out[q.json] = v if v is None or isinstance(v, (str, bool)) else number(v, q)
    return out


#: what a writer of :func:`document_json` returns for a key to leave out of the document
OMIT = object()


@dataclass(frozen=True)
class Key:
    """One key of a result's JSON document, declared on the result class in its ``DOCUMENT`` (a tuple of
    keys in the document's order, made with :func:`key`): ``json`` the key; ``source`` the result's
    attribute the value is written from (a field, a property, or a method called without arguments; None:
    the result itself); ``unit`` and ``label`` as a :class:`Quantity`'s; ``write`` the kind of value, the
    name of the renderer's writer (``plain``: a JSON value as it is, containers copied); ``omit_none``:
    left out where the source is None; ``spread``: the writer's object merged into the document (its
    keys the document's: the compute sections of ``costgraph train``)."""

    json: str
    source: str | None
    unit: str = ""
    label: str = ""
    write: str = "plain"
    omit_none: bool = False
    spread: bool = False


def key(json: str, unit: str = "", *, source: str | None = "", label: str = "", write: str = "plain",
        omit_none: bool = False, spread: bool = False) -> Key:
    """A :class:`Key` (``source`` and ``label`` the JSON name where not given)."""
    return Key(json, json if source == "" else source, unit, label or json, write, omit_none, spread)


class Part(Mapping):
    """A typed part of a result (a dataclass whose fields are :func:`quantity` fields, each with its unit),
    readable also as the mapping it replaces (a :class:`collections.abc.Mapping`): ``part["name"]``,
    ``part.get("name")``, ``"name" in part``, ``dict(part)``, ``{**part}``. Its keys are the field names
    present, in field order: a field of ``json=None`` is no key, a field declared ``omit_none`` is a key
    only when it is not None (override :meth:`present` for another rule); ``part[name]`` of a name that is
    no key raises KeyError, as the dict did; a field declared ``present_with`` another is a key only while
    that one is not None. Read-only as a mapping: set an attribute instead."""

    def present(self, name: str) -> bool:
        """Whether the field ``name`` is a key of the mapping (see the class)."""
        meta = self.__dataclass_fields__[name].metadata
        q, other = meta["quantity"], meta.get("present_with")
        return q.json is not None and (not q.omit_none or getattr(self, name) is not None) and \
            (other is None or getattr(self, other) is not None)

    def __getitem__(self, name: str):
        f = self.__dataclass_fields__.get(name) if isinstance(name, str) else None
        if f is None or "quantity" not in f.metadata or not self.present(name):
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self):
        return (f.name for f in fields(self) if "quantity" in f.metadata and self.present(f.name))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def to_dict(self) -> dict:
        """The present keys and their values, in field order (values as they are: SymPy, nested parts)."""
        return dict(self.items())


def plain(value):
    """A JSON value as it is: dicts and lists (tuples too) copied as dicts and lists, a :class:`Part` as the
    dict of its present keys, the rest as it is."""
    if isinstance(value, Part):
        value = value.to_dict()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def document_json(result, writers: dict) -> dict:
    """The JSON document of ``result`` generated from its class's ``DOCUMENT`` (:class:`Key`): each key's
    value read from its source and written by ``writers[key.write](result, value)`` (``plain`` built
    in), in the declared order; a writer's :data:`OMIT` leaves the key out."""
    out = {}
    for k in type(result).DOCUMENT:
        value = result if k.source is None else getattr(result, k.source)
        if k.source is not None and callable(value):
            value = value()
        if value is None and k.omit_none:
            continue
        value = plain(value) if k.write == "plain" else writers[k.write](result, value)
        if value is OMIT:
            continue
        if k.spread:
            out.update(value)
        else:
            out[k.json] = value
    return out


def document_units(cls) -> dict[str, Quantity]:
    """JSON key → :class:`Quantity` (unit, label, JSON name) of the keys of ``cls``'s ``DOCUMENT``."""
    return {k.json: Quantity(k.unit, k.label, k.json) for k in cls.DOCUMENT}


@dataclass(frozen=True)
class Q:
    """A number and its unit (``bytes``, ``s``, ``FLOP``, ``FLOP/s``, ``tokens/s``; ``""`` for none)."""

    value: object
    unit: str = ""


@dataclass
class Table:
    """A titled table: ``heads`` the column names, ``rows`` tuples of cells (plain or :class:`Q`)."""

    title: str
    heads: tuple
    rows: list = field(default_factory=list)
