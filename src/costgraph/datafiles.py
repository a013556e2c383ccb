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
2 from the CLI) of the form ``FILE:LINE:COLUMN: [ENTRY] KEY ...``. This module
imports no SymPy.

The schema's types are :mod:`costgraph.data_schema`'s, one table's validation
:mod:`costgraph.data_entries`'s; every public name stays importable from here.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from functools import cache
from importlib.resources import files
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from .data_entries import _plural, make_entry, scan
from .data_schema import NUMBER_TYPES, TYPES, DataSet, Entry, Field, Kind, Schema
from .errors import CostgraphValueError
from .opened import record
from .hints import listing

#: The environment variable naming a folder of user data files.
ENV = "COSTGRAPH_DATA"
#: Largest user data file read, in bytes (as ``hf_config.MAX_JSON_BYTES`` for a config.json).
MAX_BYTES = 16 * 1024 * 1024
#: The files a ``COSTGRAPH_DATA`` folder may hold (each adds entries to the bundled file of that name).
USER_FILES = ("hardware.toml", "policies.toml", "optimizers.toml", "quantization.toml", "dtypes.toml",
              "kernels.toml", "runtime_memory.toml", "contention.toml")


# ---------------------------------------------------------------- files

_TOML_HINT = "TOML: [table] headers, then key = value lines (strings in quotes); docs/data-files.md"


def _toml(text: str, file: str, show: bool) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        if not show:    # tomllib repeats one offending character: not in a message about a user's file
            message = re.sub(r"(character) (?:'[^']*'|\"[^\"]*\")", r"\1", message)
        message, line, column = _toml_position(message, text)
        raise CostgraphValueError(f"{file}:{line}:{column}: not valid TOML: {message}", hint=_TOML_HINT) from None
    except (RecursionError, ValueError):    # nesting past Python's stack; an integer of thousands of digits
        raise CostgraphValueError(f"{file}: not valid TOML: nested too deeply or a number too long",
                                  hint=_TOML_HINT) from None


def _toml_position(message: str, text: str) -> tuple[str, int, int]:
    """``(message, line, column)`` of a ``tomllib`` error message, 1-based: its ``(at line L, column C)``
    taken out, or ``(at end of document)`` read as the position after the last character (Python 3.11's
    ``tomllib._parser.coord_repr`` writes one or the other), as every other error of a data file is located."""
    m = re.search(r" \(at line (\d+), column (\d+)\)$", message)
    if m:
        return message[:m.start()], int(m.group(1)), int(m.group(2))
    end = " (at end of document)"
    if message.endswith(end):
        return message[:-len(end)], text.count("\n") + 1, len(text) - text.rfind("\n")
    return message, 1, 1


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
                at = scanned[1].get(((), key))
                raise CostgraphValueError(f"{file}{':%d:%d' % at if at else ''}: '{key}' is not a table",
                                          hint=f"write [{key}.NAME] tables")
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
            at = scanned[1].get(((), key)) or scanned[1].get(((key,), ""))
            raise CostgraphValueError(f"{file}{':%d:%d' % at if at else ''}: unknown key '{key}'",
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
        raise CostgraphValueError(f"no such file: {path}", hint=f"check the path: give the path of a {what}") from None
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
