"""One table of a data file validated into an :class:`~costgraph.data_schema.Entry`: :func:`make_entry`.

:func:`scan` reads what TOML drops from the text (the ``# source: ...`` comment of each key, continued on
lines that start with ``#`` and three spaces, and the line of each key and header); :func:`make_entry`
checks a table's keys against its :class:`~costgraph.data_schema.Kind` (unknown, missing, keys that go
together), each value against its field's type (exact integers below ``10**MAX_DIGITS``, decimal
strings read as :class:`fractions.Fraction`, ratios, names, flags), and that every number has a source.
Messages name the file, the entry and the key, and repeat no value of a user's file. Read by
:func:`costgraph.datafiles.parse`; :func:`scan` and :func:`make_entry` are importable from
:mod:`costgraph.datafiles`. This module imports no SymPy.
"""

from __future__ import annotations

import difflib
import re
from fractions import Fraction
from types import MappingProxyType
from typing import Mapping

from .arguments import MAX_DIGITS
from .data_schema import NUMBER_TYPES, Entry, Field, Kind
from .errors import CostgraphValueError

_DECIMAL = re.compile(r"[0-9]{1,30}(\.[0-9]{1,30})?")
_LIMIT = 10 ** MAX_DIGITS

_FIELD_HINT = "the key's type is in docs/data-files.md (a decimal in quotes: \"0.797\"; an integer bare: 6351)"


# ---------------------------------------------------------------- comments and lines

#: the names a user's file may give its entries (so that each can be typed on a command line)
_USER_NAME = re.compile(r"(?!.*\.toml$)[a-z0-9][a-z0-9._+-]{0,63}")
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY_LINE = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=\s*([^#]*?)\s*(#.*)?$")
_SOURCE = re.compile(r"#\s*source:\s*(.*\S)\s*$")


_HEADER_PART = re.compile(r"\s*(\"[^\"]*\"|'[^']*'|[^.\"']+)\s*(?:\.|$)")


def _header(text: str) -> tuple[str, ...]:
    """The parts of a table header's dotted key; a quoted part keeps its dots (``["x.toml"]`` is one part)."""
    return tuple(part.strip().strip('"').strip("'") for part in _HEADER_PART.findall(text))


def scan(text: str) -> tuple[dict, dict]:
    """``(sources, lines)`` of a TOML text: ``sources[(table, key)]`` is the
    ``# source:`` comment on the key's line (continued on following lines
    starting with ``#`` and three spaces), ``lines[(table, key)]`` its 1-based
    (line, column) (the column of the key); ``table`` is the header's parts as a tuple
    (``()`` at the top level) and ``lines[(table, "")]`` the header's (line, column of ``[``). Only ``key = value`` lines
    with a bare key are seen."""
    sources: dict = {}
    lines: dict = {}
    table: tuple[str, ...] = ()
    last = None
    for number, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            table = _header(m.group(1))
            lines.setdefault((table, ""), (number, line.index("[") + 1))
            last = None
            continue
        m = _KEY_LINE.match(line)
        if m:
            lines.setdefault((table, m.group(1)), (number, m.start(1) + 1))
            src = _SOURCE.search(m.group(3) or "")
            last = (table, m.group(1)) if src else None
            if src:
                sources[last] = src.group(1)
            continue
        if last and line.startswith("#   ") and line[4:].strip():
            sources[last] += " " + line[4:].strip()
            continue
        last = None
    return sources, lines


# ---------------------------------------------------------------- values

_TOML_TYPE = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "an array",
              dict: "a table"}


def _said(key: str, value, show: bool) -> str:
    """``key = value`` for a bundled file; ``key (a float)`` for a user's, whose values are never repeated."""
    if show:
        return f"{key} = {value!r}"
    return f"{key} ({_TOML_TYPE.get(type(value), 'a date or time')})"


def _value(entry: Entry, f: Field, v, show: bool):
    """The value of field ``f`` checked and converted; an error names the key."""
    bad = None
    if f.type == "int":
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise entry.error(f"{_said(f.name, v, show)} is not a non-negative integer", f.name,
                              hint=f"write an exact integer{' in ' + f.unit if f.unit else ''} "
                                   "(underscores allowed: 312_000_000_000_000)")
        if v >= _LIMIT:
            raise entry.error(f"{f.name} is too large (at most {MAX_DIGITS} digits)", f.name,
                              hint=f"write the number{' in ' + f.unit if f.unit else ''} as the source gives it")
        out = v
    elif f.type == "decimal":
        if not isinstance(v, str) or not _DECIMAL.fullmatch(v):
            bad = "is not a decimal number in a string (\"406.4\")"
        out = Fraction(v) if bad is None else None
    elif f.type == "ratio":
        ok = (isinstance(v, dict) and set(v) == {"numerator", "denominator"}
              and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < _LIMIT for x in v.values())
              and v["denominator"] > 0)
        bad = None if ok else "must be { numerator = N, denominator = D } with integers N ≥ 0, D > 0"
        out = Fraction(v["numerator"], v["denominator"]) if ok else None
    elif f.type in ("text", "ref"):
        if not isinstance(v, str) or (f.required and not v.strip()) or (f.type == "ref" and not v):
            bad = "is not a non-empty string" if f.required or f.type == "ref" else "is not a string"
        out = v
    elif f.type == "flag":
        bad = None if isinstance(v, bool) else "must be true or false"
        out = v
    elif f.type == "names":
        ok = isinstance(v, list) and all(isinstance(x, str) and x for x in v)
        bad = None if ok else "must be a list of names ([\"a\", \"b\"])"
        out = tuple(v) if ok else None
    else:
        want = {"table": dict, "list": list}.get(f.type, object)
        bad = None if isinstance(v, want) else f"must be {_TOML_TYPE[want]}"
        out = v
    if bad:
        raise entry.error(f"{_said(f.name, v, show)} {bad}", f.name, hint=_FIELD_HINT)
    if f.positive and out == 0:
        raise entry.error(f"{f.name} = 0 must be positive" if show else f"{f.name} must be positive", f.name,
                          hint=f"a measured or published value above 0{' (' + f.unit + ')' if f.unit else ''}")
    if f.maximum is not None and out > f.maximum:
        most = f"{f.maximum:,}{' ' + f.unit if f.unit else ''}"
        raise entry.error(f"{f.name} is above {most} ({f.above})", f.name,
                          hint=f"at most {most}, the figure as its source gives it")
    return out


def _check_keys(entry: Entry, table: dict, kind: Kind) -> None:
    unknown = sorted(set(table) - set(kind.keys))
    if unknown:
        close = difflib.get_close_matches(unknown[0], kind.keys, n=1)
        raise entry.error(f"has unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}", unknown[0],
                          hint=(f"did you mean '{close[0]}'? " if close else "") + "known keys: " + ", ".join(kind.keys))
    missing = [f.name for f in kind.fields if f.required and f.name not in table]
    if missing:
        raise entry.error(f"is missing {', '.join(missing)}",
                          hint=f"keys of {_article(kind.what)} {kind.what}: " + ", ".join(kind.keys))


def _article(noun: str) -> str:
    """``a`` or ``an`` before ``noun`` (by its first letter)."""
    return "an" if noun[:1].lower() in "aeiou" else "a"


def _plural(noun: str) -> str:
    """``noun`` in the plural (``precision policies``, ``hardware presets``)."""
    return noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"


def _present(values: Mapping, key: str) -> bool:
    return key in values and values[key] != ()


def make_entry(name: str, table, kind: Kind, file: str, path: tuple[str, ...], scanned: tuple[dict, dict],
               show: bool = True, bundled: bool = True) -> Entry:
    """Validate one table ``table`` of ``file`` (at header ``path``) as a ``kind``
    and return its :class:`Entry`; ``scanned`` is :func:`scan` of the text."""
    sources, lines = scanned
    if not bundled and path and not _USER_NAME.fullmatch(name):
        at = lines.get((path, ""))
        raise CostgraphValueError(f"{file}{':%d:%d' % at if at else ''}: a table name is not a name",
                                  hint="name each entry in lower case with digits and '-' (my-gpu, adam-4bit), "
                                       "at most 64 characters, not ending in .toml")
    where = "[" + ".".join(path) + "]"
    keys = {k: lines[(path, k)] for k in (*kind.keys, "", *(table if isinstance(table, dict) else ()))
            if (path, k) in lines}
    entry = Entry(name, {}, {}, file, where, MappingProxyType(keys), bundled)
    if not isinstance(table, dict):     # located at its key (``x = 1`` where a [x] table was meant)
        at = lines.get((path[:-1], path[-1])) if path else None
        raise CostgraphValueError(f"{file}{':%d:%d' % at if at else ''}: '{'.'.join(path)}' is not a table",
                                  hint=f"write each {kind.what} as [{'.'.join(path)}] with its keys")
    _check_keys(entry, table, kind)
    values = {f.name: _value(entry, f, table[f.name], show) for f in kind.fields if f.name in table}
    shared = values.get("source") if "source" in kind.keys else None
    found = {}
    for f in kind.fields:
        if f.type in NUMBER_TYPES and f.name in values:
            src = sources.get((path, f.name)) or shared
            if not src:
                raise entry.error(f"{f.name} has no '# source: ...' comment on its line"
                                  + (" and the entry no source string" if "source" in kind.keys else ""), f.name,
                                  hint="every number names where it comes from (datasheet and table, "
                                       "or 'assumption: ...')")
            found[f.name] = src
    for group in kind.together:
        have = [k for k in group if _present(values, k)]
        if have and len(have) < len(group):
            raise entry.error(f"gives {', '.join(have)} without {', '.join(k for k in group if k not in have)}",
                              have[0], hint=f"{' and '.join(group)} go together")
    return Entry(name, MappingProxyType(values), MappingProxyType(found), file, where, entry.lines, bundled)
