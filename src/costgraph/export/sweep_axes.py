"""The axes of a sweep: ``--over NAME=...`` read (:func:`parse_axis`, :func:`parse_axes`) into :class:`Axis`.

Range grammar, read with a regular expression, never ``eval``; numbers are positive whole numbers
(``_`` allowed between groups of three digits, as every number the command line reads:
:func:`costgraph.arguments.ascii_number`; at most 40 digits):

* ``NAME=a:b:xK`` — geometric: a, a·K, a·K², … up to b (K ≥ 2);
* ``NAME=a:b:+K`` — arithmetic: a, a + K, … up to b (K ≥ 1), a :class:`range` never listed;
* ``NAME=a,b,c`` — a list (one value is a list of one).

The rows (the product of the axes' lengths) are capped at :data:`MAX_ROWS` (``--max-rows``) before
anything is listed or evaluated. Every mistake is a :class:`~costgraph.errors.CostgraphValueError` with
:data:`HINT`. Read by :mod:`costgraph.export.sweep`, which evaluates the rows; its names stay importable
from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..arguments import ascii_number
from ..errors import CostgraphValueError

MAX_ROWS = 10 ** 7

_NUM = r"[0-9][0-9_]*"
_AXIS = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_RANGE = re.compile(rf"^({_NUM}):({_NUM}):([x+])({_NUM})$")
_LIST = re.compile(rf"^{_NUM}(,{_NUM})*$")

HINT = "write NAME=a:b:xK (geometric), NAME=a:b:+K (arithmetic) or NAME=a,b,c, with positive whole numbers"


@dataclass(frozen=True)
class Axis:
    """One swept dimension: ``name`` and its ``values`` (positive ints, in order):
    a tuple (a list or a geometric range), or a :class:`range` (arithmetic: any
    length, never listed in memory)."""

    name: str
    values: Sequence[int]


def _int(text: str, spec: str) -> int:
    if len(text) > 40:
        raise CostgraphValueError(f"--over {spec[:40]!r}...: a number of more than 40 digits", hint=HINT)
    v = int(text.replace("_", ""))
    if v <= 0:
        raise CostgraphValueError(f"--over {spec!r}: {v} is not positive; a dimension counts something",
                                  hint=HINT)
    return v


def axis_length(spec: str) -> int:
    """How many values ``spec`` (``NAME=...``) stands for, without listing them."""
    name, start, stop, kind, step, listed = _parse(spec)
    if listed is not None:
        return len(listed)
    if kind == "+":
        return (stop - start) // step + 1
    n, v = 0, start
    while v <= stop:
        n, v = n + 1, v * step
    return n


def _parse(spec: str):
    ascii_number(spec, "--over", pair=True)
    m = _AXIS.match(spec)
    if not m:
        raise CostgraphValueError(f"cannot read --over {spec[:60]!r}: expected NAME=VALUES", hint=HINT)
    name, body = m.groups()
    body = body.strip()
    r = _RANGE.match(body)
    if r:
        start, stop, kind, step = _int(r[1], spec), _int(r[2], spec), r[3], _int(r[4], spec)
        if stop < start:
            raise CostgraphValueError(f"--over {spec!r}: the range ends ({stop}) before it starts ({start})",
                                      hint="write the smaller bound first: a:b with a ≤ b")
        if kind == "x" and step < 2:
            raise CostgraphValueError(f"--over {spec!r}: a geometric step must multiply by 2 or more",
                                      hint="e.g. s=512:32768:x2")
        return name, start, stop, kind, step, None
    if _LIST.match(body):
        values = [_int(t, spec) for t in body.split(",")]
        if len(set(values)) != len(values):
            raise CostgraphValueError(f"--over {spec!r} lists a value twice", hint="give each value once")
        return name, None, None, None, None, values
    raise CostgraphValueError(f"cannot read --over {spec[:60]!r}", hint=HINT)


def parse_axis(spec: str, max_values: int = MAX_ROWS) -> Axis:
    """``"s=512:32768:x2"`` → ``Axis("s", (512, 1024, ..., 32768))``.

    Raises
    ------
    CostgraphValueError
        Text outside the grammar, a bound that is not a positive whole
        number, an empty or reversed range, a step below 2 (geometric) or 1
        (arithmetic), a repeated value, or more than ``max_values`` values.
    """
    n = axis_length(spec)
    if n > max_values:
        raise CostgraphValueError(f"--over {spec!r} has {n:,} values, more than the {max_values:,} rows allowed",
                                  hint="use a coarser step, or raise the cap with --max-rows")
    name, start, stop, kind, step, listed = _parse(spec)
    if listed is not None:
        return Axis(name, tuple(listed))
    if kind == "+":
        return Axis(name, range(start, stop + 1, step))      # never listed: any length in constant memory
    values, v = [], start
    while v <= stop:
        values.append(v)
        v *= step
    return Axis(name, tuple(values))


def parse_axes(specs: Sequence[str], max_rows: int = MAX_ROWS) -> list[Axis]:
    """Every ``--over``; the product of their lengths must not pass ``max_rows``."""
    total = 1
    for spec in specs:
        total *= axis_length(spec)
    if total > max_rows:
        raise CostgraphValueError(f"the sweep has {total:,} rows, more than the cap of {max_rows:,}",
                                  hint="sweep fewer values, or raise the cap with --max-rows N")
    axes = [parse_axis(s, max_rows) for s in specs]
    seen = set()
    for a in axes:
        if a.name in seen:
            raise CostgraphValueError(f"--over gives '{a.name}' twice", hint="one --over per dimension")
        seen.add(a.name)
    return axes
