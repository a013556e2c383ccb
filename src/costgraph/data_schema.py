"""The schema of a data file and what it validates into: :class:`Field`, :class:`Kind`, :class:`Schema`;
:class:`Entry`, :class:`DataSet`.

A data file's reader declares its :class:`Schema` once (which entries the file holds, and for each kind
of entry its :class:`Field` s: name, type of :data:`TYPES`, unit, required or optional, positive);
:mod:`costgraph.datafiles` reads and validates the file against it into a :class:`DataSet` of
:class:`Entry` s, each remembering its file and the line of each key, so that a reader's own check says
``FILE:LINE:COLUMN: [ENTRY] KEY ...`` (:meth:`Entry.error`). Every name here is importable from
:mod:`costgraph.datafiles`. This module imports no SymPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .errors import CostgraphValueError

#: Field types: ``int`` (a non-negative TOML integer), ``decimal`` (a string such as
#: "406.4", read exactly), ``ratio`` ({numerator, denominator}), ``text``, ``flag``
#: (true/false), ``names`` (a list of strings), ``ref`` (the name of another entry of the
#: same kind), ``table``, ``list`` and ``spec`` (any value: a mapping its reader interprets).
TYPES = ("int", "decimal", "ratio", "text", "flag", "names", "ref", "table", "list", "spec")
#: The types that are numbers and so need a source.
NUMBER_TYPES = ("int", "decimal", "ratio")

@dataclass(frozen=True)
class Field:
    """One key of an entry: ``name``, ``type`` (one of :data:`TYPES`), ``unit``
    (for display: "B", "FLOP/s", "bits"), ``required``, ``positive`` (a number
    that must be > 0, else ≥ 0), ``maximum`` (the largest number it may be, None for
    no bound; ``above`` says why, as a reader is told on refusal) and a one-line ``doc``."""

    name: str
    type: str = "int"
    unit: str = ""
    required: bool = True
    positive: bool = False
    doc: str = ""
    maximum: int | None = None
    above: str = ""

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"unknown field type {self.type!r}")
        if self.maximum is not None and (self.type not in NUMBER_TYPES or not self.above):
            raise ValueError(f"{self.name}: a maximum needs a number type and the reason (above)")


@dataclass(frozen=True)
class Kind:
    """A kind of entry: ``what`` it is called in messages ("hardware preset"),
    its ``fields``, and ``together``: groups of keys an entry gives all or none of."""

    what: str
    fields: tuple[Field, ...]
    together: tuple[tuple[str, ...], ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        """The field names, in declared order."""
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field:
        """The field called ``name``."""
        return next(f for f in self.fields if f.name == name)


@dataclass(frozen=True, eq=False)
class Schema:
    """The layout of one data file: ``file`` name and ``package`` (where it is
    bundled); ``entries``: the kind of its freely named tables ``[NAME]``;
    ``groups``: ``(GROUP, kind)`` for tables ``[GROUP.NAME]``; ``records``:
    ``(NAME, kind)`` for tables of fixed name, all required; ``top``: top-level
    keys; ``user``: whether a ``COSTGRAPH_DATA`` file may add entries. Schemas
    compare by identity (each is declared once, by its reader)."""

    file: str
    package: str
    entries: Kind | None = None
    groups: tuple[tuple[str, Kind], ...] = ()
    records: tuple[tuple[str, Kind], ...] = ()
    top: tuple[Field, ...] = ()
    user: bool = False


@dataclass(frozen=True, eq=False)
class Entry:
    """One validated entry: ``values`` (key → int, Fraction, str, bool, tuple
    of names, or the raw value of a mapping field), ``sources`` (number key →
    its source), and where it was read (``file``, ``where`` as ``[NAME]``,
    ``lines``: key → line, ``""`` → the table's header)."""

    name: str
    values: Mapping[str, object]
    sources: Mapping[str, str]
    file: str
    where: str
    lines: Mapping[str, int]
    bundled: bool = True

    def __getitem__(self, key: str):
        return self.values[key]

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def get(self, key: str, default=None):
        """The value of ``key``, or ``default`` when the entry does not give it."""
        return self.values.get(key, default)

    def error(self, message: str, key: str = "", hint: str | None = None) -> CostgraphValueError:
        """A :class:`CostgraphValueError` ``FILE:LINE:COLUMN: [NAME] message``, at
        ``key`` (or at the table's header; ``FILE: ...`` where neither is known)."""
        at = self.lines.get(key) or self.lines.get("")
        return CostgraphValueError(f"{self.file}{':%d:%d' % at if at else ''}: {self.where} {message}", hint=hint)


@dataclass(frozen=True, eq=False)
class DataSet:
    """A validated data file (or a bundled one with a user's entries added):
    ``entries`` by name in file order, ``groups`` (group → name → entry),
    ``records`` (name → entry) and ``top`` (the top-level keys, as an entry)."""

    file: str
    entries: Mapping[str, Entry]
    groups: Mapping[str, Mapping[str, Entry]]
    records: Mapping[str, Entry]
    top: Entry
