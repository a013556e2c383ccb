"""The fields of the typed results (:mod:`costgraph.results`): a quantity's unit, label and JSON name
(:class:`Quantity`, declared on a dataclass field with :func:`quantity`, read back with
:func:`quantities`, written as JSON by :func:`json_fields`), and the cells of a result's table
(:class:`Q`, a number with its unit; :class:`Table`), which :mod:`costgraph.export.display` renders.

Light at import: the standard library only (no SymPy).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields


@dataclass(frozen=True)
class Quantity:
    """What a renderer needs to show one quantity: ``unit`` (``bytes``, ``s``, ``FLOP``, ``FLOP/token``,
    ``FLOP/s``, ``tokens``, ``tokens/s``, ``days``, ``GPU-hours``, ``PF-days``; ``""`` for a count, a
    ratio or a text), ``label`` (the words a table or the text report shows), ``json`` (its key in the
    command's JSON; None: not in the JSON), ``omit_none`` (left out of the JSON when None rather than
    written as ``null``)."""

    unit: str = ""
    label: str = ""
    json: str | None = ""
    omit_none: bool = False


def quantity(unit: str = "", *, label: str = "", json: str | None = "", omit_none: bool = False,
             default=MISSING, default_factory=MISSING, init: bool = True):
    """A dataclass field that is a quantity: its :class:`Quantity` (unit, label, JSON name) in the
    field's metadata (key ``"quantity"``; an empty ``label`` or ``json`` is the field's name, a
    ``json`` of None keeps the field out of the JSON)."""
    meta = {"quantity": Quantity(unit, label, json, omit_none)}
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
