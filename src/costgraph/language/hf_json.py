"""Reading a Hugging Face ``config.json``: the file (:func:`read_config`: bounded size, UTF-8 text,
links checked) and its JSON (:func:`parse_json`: located errors, bounded depth and digits,
``Infinity``/``NaN`` read as Python's ``json`` reads them, duplicate keys warned).

Split from :mod:`costgraph.language.hf_config` (which maps the parsed object to a model and
re-exports these names)."""

from __future__ import annotations

import json
import math
import re
import warnings
from collections import Counter
from pathlib import Path

from .. import arguments
from ..arguments import shown
from ..errors import CostgraphValueError, Location
from ..opened import record
from .hf_hub import check_link

# A config.json is a few kB; these bounds sit far above any real one.
MAX_JSON_BYTES = 16 * 1024 * 1024
MAX_JSON_DEPTH = 100


def read_config(path: str):
    """The parsed JSON of a ``config.json`` file (errors as :func:`costgraph.language.hf_config.load_hf_config`;
    the file as :func:`read_text` reads it)."""
    return parse_json(read_text(path), path)


def read_text(path: str) -> str:
    """The text of a ``config.json`` file (errors as :func:`costgraph.language.hf_config.load_hf_config`).

    A symbolic link is followed only inside its folder, or, in a Hugging Face cache snapshot,
    into that cache entry's ``blobs/`` (:func:`check_link`); a file that is not regular UTF-8
    text holding no NUL byte is refused without being quoted."""
    p = Path(path)
    try:
        check_link(p, path)
        record(p)   # the -o writer never replaces it (costgraph/opened.py)
        if p.is_dir():
            raise IsADirectoryError(path)
        if p.exists() and not p.is_file():   # a device or a pipe: could be endless, or block
            raise CostgraphValueError(f"{path} is not a regular file", hint="give the path of a config.json file")
        with open(p, "rb") as f:
            data = f.read(MAX_JSON_BYTES + 1)
        if len(data) > MAX_JSON_BYTES:
            raise CostgraphValueError(f"{path} is too large for a config.json (over {MAX_JSON_BYTES} bytes)",
                                      hint="a config.json is a few kB of settings: give the model's config.json, "
                                           "not its weights or a log")
        text = data.decode("utf-8-sig")   # a byte-order mark some editors write is dropped
        if "\x00" in text:   # JSON holds no NUL; a binary file or /proc/self/environ is not quoted
            raise CostgraphValueError(f"{path} is not a text file (it holds NUL bytes)",
                                      hint="give a config.json: UTF-8 JSON text, as transformers saves it")
    except FileNotFoundError:
        raise CostgraphValueError(f"no such file: {path}", hint="check the path: give the path of a config.json "
                                                                 "file") from None
    except IsADirectoryError:
        raise CostgraphValueError(f"{path} is a directory", hint="give the config.json inside it") from None
    except (OSError, ValueError) as e:   # ValueError: UnicodeDecodeError, a NUL byte in the path
        what = "not UTF-8 text" if isinstance(e, UnicodeDecodeError) else shown(str(e))[1:-1]
        raise CostgraphValueError(f"cannot read {path}: {what}",
                                  hint="give a config.json: UTF-8 JSON text, as transformers saves it") from None
    return text


def _json_shown(v) -> str:
    try:
        return shown(json.dumps(v))[1:-1]
    except (TypeError, ValueError, RecursionError):   # not JSON data (a dict given to from_hf_config)
        return shown(v)


# JSON's tokens outside strings: a string, a bracket, or a run of other characters
_JSON_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}]|[^\s"\[\]{},:]+')


class _BadToken(Exception):
    def __init__(self, token: str, message: str, hint: str):
        self.token, self.message, self.hint = token, message, hint


def _constant(token: str) -> float:
    """``Infinity``, ``-Infinity`` and ``NaN``, as Python's ``json`` and transformers read them
    (``Mamba2Config.time_step_limit`` defaults to ``(0.0, inf)``, written ``[0.0, Infinity]``): a
    value where a config holds one; where a size is read it is refused by name (``hf_config._Reader.number``)."""
    return {"Infinity": math.inf, "-Infinity": -math.inf}.get(token, math.nan)


def _float(token: str) -> float:
    v = float(token)
    if not math.isfinite(v):
        raise _BadToken(token, f"{shown(token)[1:-1]} is too large for a number", "write a finite number")
    return v


def _int(token: str) -> int:
    digits = len(token.lstrip("-"))
    if digits > arguments.MAX_DIGITS:
        raise _BadToken(token, f"number too large: it has {digits} digits (at most {arguments.MAX_DIGITS})",
                        "a config.json's numbers are sizes and counts")
    return int(token)


class DuplicateKeyWarning(UserWarning):
    """A config.json object with a key given twice: the last value is used, as Python's
    ``json`` and Transformers' ``PretrainedConfig`` (which reads it with ``json.loads``) do."""


def _object(pairs: list, text: str, path: str) -> dict:
    """A JSON object from its pairs, warning (:class:`DuplicateKeyWarning`, located at the
    key's last occurrence in ``text``) for each key given more than once."""
    out = dict(pairs)
    if len(out) < len(pairs):
        counts = Counter(k for k, _ in pairs)
        for k in (k for k, n in counts.items() if n > 1):
            offset = max(text.rfind(json.dumps(k)), 0)
            warnings.warn_explicit(
                f"duplicate key {shown(k)} in {path}: it is given {counts[k]} times; "
                f"the last value, {_json_shown(out[k])}, is used (as Python and Transformers do)",
                DuplicateKeyWarning, path, text.count("\n", 0, offset) + 1)
    return out


def _location(text: str, path: str, offset: int) -> Location:
    """The line and column of ``offset`` in ``text`` (1-based), with its line (at most 400 characters) shown."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return Location(path, text.count("\n", 0, offset) + 1, offset - start + 1, text[start:end if end >= 0 else len(text)][:400])


# a JSON string or a bracket (numbers and literals are skipped: no key is one)
_KEY_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}]')
_COLON = re.compile(r"\s*:")


def key_offset(text: str, key: str) -> int | None:
    """Where config key ``key`` (dotted for a nested config: ``text_config.hidden_size``) is written in a
    config.json's ``text`` (valid JSON): the offset of its last occurrence in the objects its path names (the value
    used, as Python's ``json`` reads a duplicate key), or None where the text does not hold it. One pass over the
    text's strings and brackets, bounded by :data:`MAX_JSON_BYTES` (``read_text``)."""
    want, keys, found = key.split("."), [], None   # keys: per open container, the key being read (None: an array)
    for m in _KEY_TOKEN.finditer(text):
        t = m.group()
        if t in "{[":
            keys.append("" if t == "{" else None)
        elif t in "]}":
            keys.pop() if keys else None
        elif t[0] == '"' and keys and keys[-1] is not None and _COLON.match(text, m.end()):   # a key, not a value
            keys[-1] = json.loads(t)
            if len(keys) == len(want) and keys == want:
                found = m.start()
    return found


def keyed(error: CostgraphValueError, key: str | None, message: str) -> CostgraphValueError:
    """``error`` marked with the config key it is about and its ``message`` without the file's name, for
    :func:`located_at_key` to locate in the file's text."""
    error.config_key, error.unlocated = key, message
    return error


def located_at_key(error: CostgraphValueError, text: str, path: str) -> CostgraphValueError:
    """``error`` at ``FILE:LINE:COLUMN`` of the key :func:`keyed` marked it with, where ``text`` holds that key;
    else ``error`` as it is (a missing key, a value derived from several)."""
    key = getattr(error, "config_key", None)
    offset = key_offset(text, key) if key else None
    if offset is None:
        return error
    return CostgraphValueError(error.unlocated, _location(text, path, offset), hint=error.hint)


def parse_json(text: str, path: str):
    """Parse a config.json's text. ``Infinity``, ``-Infinity`` and ``NaN`` are read as
    Python's ``json`` reads them (transformers writes them: ``Mamba2Config.time_step_limit``),
    refused by name where a size is read. Errors are located: invalid JSON, numbers beyond
    float range or :data:`arguments.MAX_DIGITS` digits, nesting deeper than :data:`MAX_JSON_DEPTH`."""
    def located(message: str, offset: int, hint: str | None = None):
        return CostgraphValueError(message, _location(text, path, offset), hint=hint)

    depth = 0
    for m in _JSON_TOKEN.finditer(text):
        t = m.group()
        if t == "[" or t == "{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise located(f"JSON nested too deeply (more than {MAX_JSON_DEPTH} levels)", m.start(),
                              hint="a config.json is a shallow object of settings")
        elif t == "]" or t == "}":
            depth -= 1
    try:
        return json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int,
                          object_pairs_hook=lambda pairs: _object(pairs, text, path))
    except json.JSONDecodeError as e:
        raise located(f"invalid JSON: {e.msg}", e.pos,
                      hint="a config.json is one JSON object: {\"model_type\": ..., ...}") from None
    except _BadToken as e:
        offset = next((m.start() for m in _JSON_TOKEN.finditer(text) if m.group() == e.token), 0)
        raise located(f"invalid JSON: {e.message}", offset, e.hint) from None
    except (RecursionError, ValueError) as e:   # backstop; the checks above come first
        raise CostgraphValueError(f"{path}: cannot read the JSON: {shown(str(e))[1:-1]}") from None
