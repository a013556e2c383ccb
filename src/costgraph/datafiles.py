"""Sourced data tables: one loader for the TOML files of numbers beside the code.

Each data file (``hardware.toml``, ``training/policies.toml``,
``training/optimizers.toml``, ``training/quantization.toml``, ``training/fp8.toml``,
``inference/dtypes.toml``, ``symbolic/scaling_laws.toml``, and the mappings
``training/megatron_args.toml`` and ``hf_mapping.toml``) is described by a
:class:`Schema` that its reader declares: which entries it holds, and for each
kind of entry its :class:`Field` s (name, type, unit, required or optional,
positive). :func:`load` reads the bundled file, validates it against the
schema, and adds the entries of a user file of the same name found in the
folder named by the ``COSTGRAPH_DATA`` environment variable;
:func:`read_file` validates a user's file given by path (``--hardware
my-gpu.toml``). Nothing read is evaluated: numbers are TOML integers (exact),
decimal strings (``"0.34"``, read as :class:`fractions.Fraction`) or
``{numerator, denominator}`` ratios.

**Every number has a source**: the ``# source: ...`` comment on its own line
(continued on following lines that start with ``#`` and three spaces), or else
the ``source`` string of its entry. TOML drops comments, so they are read from
the text here, with the line of each key, which error messages give.

**User entries add, never replace**: an entry of a ``COSTGRAPH_DATA`` file
whose name is already bundled is refused (two tables answering to one name
would make a published figure depend on the environment). A user file is read
under the limits of a ``config.json`` (a regular file, at most
:data:`MAX_BYTES`, UTF-8), and its errors name the file, the entry and the key
but never repeat a value from it.

Every mistake is a :class:`~costgraph.errors.CostgraphValueError` (exit status
2 from the CLI) of the form ``FILE: [ENTRY] KEY ... (line N)``. This module
imports no SymPy.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
import tomllib
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from .arguments import MAX_DIGITS
from .errors import CostgraphValueError
from .opened import record
from .hints import listing

#: The environment variable naming a folder of user data files.
ENV = "COSTGRAPH_DATA"
#: Largest user data file read, in bytes (as ``hf_config.MAX_JSON_BYTES`` for a config.json).
MAX_BYTES = 16 * 1024 * 1024
#: The files a ``COSTGRAPH_DATA`` folder may hold (each adds entries to the bundled file of that name).
USER_FILES = ("hardware.toml", "policies.toml", "optimizers.toml", "quantization.toml", "dtypes.toml",
              "kernels.toml", "runtime_memory.toml")

#: Field types: ``int`` (a non-negative TOML integer), ``decimal`` (a string such as
#: "406.4", read exactly), ``ratio`` ({numerator, denominator}), ``text``, ``flag``
#: (true/false), ``names`` (a list of strings), ``ref`` (the name of another entry of the
#: same kind), ``table``, ``list`` and ``spec`` (any value: a mapping its reader interprets).
TYPES = ("int", "decimal", "ratio", "text", "flag", "names", "ref", "table", "list", "spec")
#: The types that are numbers and so need a source.
NUMBER_TYPES = ("int", "decimal", "ratio")

_DECIMAL = re.compile(r"[0-9]{1,30}(\.[0-9]{1,30})?")
_LIMIT = 10 ** MAX_DIGITS


@dataclass(frozen=True)
class Field:
    """One key of an entry: ``name``, ``type`` (one of :data:`TYPES`), ``unit``
    (for display: "B", "FLOP/s", "bits"), ``required``, ``positive`` (a number
    that must be > 0, else ≥ 0) and a one-line ``doc``."""

    name: str
    type: str = "int"
    unit: str = ""
    required: bool = True
    positive: bool = False
    doc: str = ""

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"unknown field type {self.type!r}")


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
        """A :class:`CostgraphValueError` ``FILE: [NAME] message (line N)``, the
        line of ``key`` (or of the table's header) when known."""
        line = self.lines.get(key) or self.lines.get("")
        return CostgraphValueError(f"{self.file}: {self.where} {message}" + (f" (line {line})" if line else ""),
                                   hint=hint)


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


# ---------------------------------------------------------------- comments and lines

#: the names a user's file may give its entries (so that each can be typed on a command line)
_USER_NAME = re.compile(r"(?!.*\.toml$)[a-z0-9][a-z0-9._+-]{0,63}")
_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_KEY_LINE = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=\s*([^#]*?)\s*(#.*)?$")
_SOURCE = re.compile(r"#\s*source:\s*(.*\S)\s*$")


def _header(text: str) -> tuple[str, ...]:
    return tuple(part.strip().strip('"').strip("'") for part in text.split("."))


def scan(text: str) -> tuple[dict, dict]:
    """``(sources, lines)`` of a TOML text: ``sources[(table, key)]`` is the
    ``# source:`` comment on the key's line (continued on following lines
    starting with ``#`` and three spaces), ``lines[(table, key)]`` its 1-based
    line; ``table`` is the header's parts as a tuple (``()`` at the top level)
    and ``lines[(table, "")]`` the header's line. Only ``key = value`` lines
    with a bare key are seen."""
    sources: dict = {}
    lines: dict = {}
    table: tuple[str, ...] = ()
    last = None
    for number, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            table = _header(m.group(1))
            lines.setdefault((table, ""), number)
            last = None
            continue
        m = _KEY_LINE.match(line)
        if m:
            lines.setdefault((table, m.group(1)), number)
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
        line = lines.get((path, ""))
        raise CostgraphValueError(f"{file}: a table name is not a name{f' (line {line})' if line else ''}",
                                  hint="name each entry in lower case with digits and '-' (my-gpu, adam-4bit), "
                                       "at most 64 characters, not ending in .toml")
    where = "[" + ".".join(path) + "]"
    keys = {k: lines[(path, k)] for k in (*kind.keys, "", *(table if isinstance(table, dict) else ()))
            if (path, k) in lines}
    entry = Entry(name, {}, {}, file, where, MappingProxyType(keys), bundled)
    if not isinstance(table, dict):
        raise CostgraphValueError(f"{file}: '{'.'.join(path)}' is not a table",
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


# ---------------------------------------------------------------- files

_TOML_HINT = "TOML: [table] headers, then key = value lines (strings in quotes); docs/data-files.md"
_FIELD_HINT = "the key's type is in docs/data-files.md (a decimal in quotes: \"0.797\"; an integer bare: 6351)"


def _toml(text: str, file: str, show: bool) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        if not show:    # tomllib repeats one offending character: not in a message about a user's file
            message = re.sub(r"(character) (?:'[^']*'|\"[^\"]*\")", r"\1", message)
        raise CostgraphValueError(f"{file}: not valid TOML: {message}", hint=_TOML_HINT) from None
    except (RecursionError, ValueError):    # nesting past Python's stack; an integer of thousands of digits
        raise CostgraphValueError(f"{file}: not valid TOML: nested too deeply or a number too long",
                                  hint=_TOML_HINT) from None


def _top(schema: Schema, data: dict, file: str, scanned, show: bool, bundled: bool) -> Entry:
    kind = Kind("top-level key", schema.top)
    mine = {k: v for k, v in data.items() if k in kind.keys}
    if not bundled and mine:
        raise CostgraphValueError(f"{file}: {', '.join(mine)} is set by the bundled {schema.file} only",
                                  hint="a user file adds entries; it does not change the file's settings")
    if not bundled:
        return Entry("", MappingProxyType({}), MappingProxyType({}), file, "(top level)", MappingProxyType({}), False)
    entry = make_entry("", mine, kind, file, (), scanned, show, bundled)
    return Entry("", entry.values, entry.sources, file, "(top level)", entry.lines, bundled)


def parse(text: str, file: str, schema: Schema, *, show: bool = True, bundled: bool = True) -> DataSet:
    """Validate the TOML ``text`` of ``file`` against ``schema``.

    ``show``: whether messages may repeat a value (never for a user's file);
    ``bundled``: a file of the package, which may set the top-level keys and
    fixed tables, where a user's file only adds entries.

    Raises
    ------
    CostgraphValueError
        Invalid TOML, an unknown or missing key, a value of the wrong type, a
        negative number, a zero where a positive one is needed, a number
        without a source, keys that go together given alone, a ``ref`` naming
        no entry: each message names the file, the entry and the key.
    """
    data = _toml(text, file, show)
    scanned = scan(text)
    groups = dict(schema.groups)
    records = dict(schema.records)
    tops = {f.name for f in schema.top}
    out: dict = {"entries": {}, "groups": {g: {} for g in groups}, "records": {}}
    for key, value in data.items():
        if key in tops:
            continue                                    # read by _top
        if key in groups:
            if not isinstance(value, dict):
                raise CostgraphValueError(f"{file}: '{key}' is not a table", hint=f"write [{key}.NAME] tables")
            for name, table in value.items():
                out["groups"][key][name] = make_entry(name, table, groups[key], file, (key, name), scanned, show, bundled)
        elif key in records:
            if not bundled:
                raise CostgraphValueError(f"{file}: [{key}] is set by the bundled {schema.file} only",
                                          hint="a user file adds entries; it does not change the file's settings")
            out["records"][key] = make_entry(key, value, records[key], file, (key,), scanned, show, bundled)
        elif schema.entries is not None:
            out["entries"][key] = make_entry(key, value, schema.entries, file, (key,), scanned, show, bundled)
        else:
            raise CostgraphValueError(f"{file}: unknown key '{key}'",
                                      hint="known: " + listing([*groups, *records, *tops]))
    missing = [r for r in records if r not in out["records"]] if bundled else []
    if missing:
        raise CostgraphValueError(f"{file}: is missing the table{'s' if len(missing) > 1 else ''} "
                                  + ", ".join(f"[{m}]" for m in missing))
    top = _top(schema, data, file, scanned, show, bundled)
    if schema.entries is not None and not out["entries"] and not schema.groups:
        raise CostgraphValueError(f"{file}: no {schema.entries.what} in it",
                                  hint=f"write each {schema.entries.what} as a table: [name] with its keys")
    return DataSet(file, MappingProxyType(out["entries"]),
                   MappingProxyType({g: MappingProxyType(e) for g, e in out["groups"].items()}),
                   MappingProxyType(out["records"]), top)


def check_refs(entries: Mapping[str, Entry], kind: Kind) -> None:
    """Check that every ``ref`` field of ``entries`` names another entry of them."""
    refs = [f.name for f in kind.fields if f.type == "ref"]
    for name, entry in entries.items():
        for key in refs:
            if key in entry and (entry[key] == name or entry[key] not in entries):
                said = f"{key} = {entry[key]!r}" if entry.bundled else key    # a user's values are not repeated
                raise entry.error(f"{said} names no other {kind.what}", key,
                                  hint=f"{_plural(kind.what)}: " + ", ".join(entries))


def read_text(path: str | os.PathLike, what: str = "data file") -> str:
    """The text of a user's file at ``path`` under the limits of a config.json:
    a regular file (not a folder, device or pipe), at most :data:`MAX_BYTES`,
    UTF-8 (a byte-order mark is dropped). Errors name the path, never the content."""
    if not str(path).strip():   # Path("") is ".": the folder, not what the user meant
        raise CostgraphValueError("the path is empty", hint=f"give the path of a {what}")
    p = Path(path)
    try:
        mode = p.stat().st_mode
        if stat.S_ISDIR(mode):
            raise CostgraphValueError(f"{path} is a folder", hint=f"give the path of a {what}")
        if not stat.S_ISREG(mode):   # a device or a pipe: could be endless, or block
            raise CostgraphValueError(f"{path} is not a regular file", hint=f"give the path of a {what}")
        record(p)   # the -o writer never replaces it (costgraph/opened.py)
        with open(p, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise CostgraphValueError(f"no such file: {path}") from None
    except (OSError, ValueError) as e:   # ValueError: a NUL byte in the path
        raise CostgraphValueError(f"cannot read {path}: {getattr(e, 'strerror', None) or type(e).__name__}") from None
    if len(data) > MAX_BYTES:
        raise CostgraphValueError(f"{path} is too large for a {what} (over {MAX_BYTES} bytes)",
                                  hint=f"give the path of a {what}, not of another file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise CostgraphValueError(f"{path} is not UTF-8 text", hint=f"save the {what} as UTF-8 text") from None


def read_file(path: str | os.PathLike, schema: Schema) -> DataSet:
    """A user's file at ``path`` validated against ``schema`` (see
    :func:`read_text` for the limits; messages never repeat its values). It
    may add entries only: top-level settings and fixed tables stay the
    bundled file's. Its ``ref`` fields may name bundled entries, so they are
    checked by :func:`merge`."""
    text = read_text(path, f"TOML file of {schema.entries.what if schema.entries else 'entries'}s")
    return parse(text, str(path), schema, show=False, bundled=False)   # refs: checked once merged (merge)


@cache
def bundled(schema: Schema) -> DataSet:
    """The bundled file of ``schema``, validated (cached)."""
    text = (files(schema.package) / schema.file).read_text(encoding="utf-8")
    data = parse(text, schema.file, schema)
    if schema.entries is not None:
        check_refs(data.entries, schema.entries)
    for name, kind in schema.groups:
        check_refs(data.groups[name], kind)
    return data


def _add(mine: Mapping[str, Entry], theirs: Mapping[str, Entry], kind: Kind, schema: Schema) -> Mapping:
    for name, entry in theirs.items():
        if name in mine:
            raise entry.error(f"is a bundled {kind.what} already (costgraph's {schema.file})", hint=(
                f"entries of {ENV} files add to the bundled ones and never replace them: give yours another name"))
    merged = {**mine, **theirs}
    check_refs(merged, kind)
    return MappingProxyType(merged)


def merge(base: DataSet, user: DataSet, schema: Schema) -> DataSet:
    """``base`` with the entries of ``user`` added; a name in both is refused."""
    entries = _add(base.entries, user.entries, schema.entries, schema) if schema.entries else base.entries
    groups = {g: _add(base.groups[g], user.groups[g], kind, schema) for g, kind in schema.groups}
    return DataSet(base.file, entries, MappingProxyType(groups), base.records, base.top)


def user_folder() -> Path | None:
    """The folder named by ``COSTGRAPH_DATA`` (None when unset or empty); a
    :class:`CostgraphValueError` when it is not a folder or holds a ``.toml``
    file of another name than :data:`USER_FILES`."""
    folder = os.environ.get(ENV, "")
    if not folder:
        return None
    p = Path(folder)
    if not p.is_dir():
        raise CostgraphValueError(f"{ENV}={folder} is not a folder",
                                  hint="name a folder holding some of: " + ", ".join(USER_FILES))
    try:
        names = sorted(x.name for x in p.iterdir() if x.name.lower().endswith(".toml"))
    except OSError as e:
        raise CostgraphValueError(f"cannot read {ENV}={folder}: {e.strerror or type(e).__name__}") from None
    other = [n for n in names if n not in USER_FILES]
    if other:
        raise CostgraphValueError(f"{ENV}={folder} holds {', '.join(other)}, which is no costgraph data file",
                                  hint="its TOML files are named as the bundled ones: " + ", ".join(USER_FILES))
    return p


def _stamp(path: Path) -> tuple:
    try:
        s = path.stat()
    except OSError:
        return ()
    return (s.st_mtime_ns, s.st_size, s.st_ino)


@cache
def _with_user(schema: Schema, path: str, stamp: tuple) -> DataSet:
    return merge(bundled(schema), read_file(path, schema), schema)


def load(schema: Schema) -> DataSet:
    """The bundled file of ``schema`` with the entries of the same-named file
    in ``$COSTGRAPH_DATA`` added (when the schema allows user entries and the
    file is there). Cached per file state: an edited user file is read again."""
    folder = user_folder() if schema.user else None
    if folder is None or not (folder / schema.file).exists():
        return bundled(schema)
    path = folder / schema.file
    return _with_user(schema, str(path), _stamp(path))


@cache
def _file(schema: Schema, path: str, stamp: tuple) -> DataSet:
    return read_file(path, schema)


def load_file(path: str | os.PathLike, schema: Schema) -> DataSet:
    """:func:`read_file`, cached per file state (the same path read twice, unchanged, is one :class:`DataSet`)."""
    return _file(schema, str(path), _stamp(Path(path)))


__all__ = ["Field", "Kind", "Schema", "Entry", "DataSet", "load", "load_file", "read_file", "read_text", "parse",
           "bundled", "merge", "check_refs", "scan", "user_folder", "ENV", "MAX_BYTES", "USER_FILES", "TYPES"]
