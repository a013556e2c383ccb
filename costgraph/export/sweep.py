"""Sweeps: a model's costs over a grid of dimension values, as rows.

``costgraph sweep MODEL --over s=512:32768:x2 --over b=1,2,4`` evaluates the
scope's quantities at every combination of the axes (the cartesian product,
the first axis varying slowest), the other dimensions fixed by
``--config``/``--set``, with the compiled evaluator
(:meth:`costgraph.Costs.compile`, :func:`costgraph.numbers.evaluator.vectorized`),
in chunks, and writes CSV (the :mod:`csv` module) or JSON.

Range grammar (:func:`parse_axis`), read with a regular expression, never
``eval``; numbers are positive whole numbers (``_`` allowed as a separator):

* ``NAME=a:b:xK`` — geometric: a, a·K, a·K², … up to b (K ≥ 2);
* ``NAME=a:b:+K`` — arithmetic: a, a + K, … up to b (K ≥ 1);
* ``NAME=a,b,c`` — a list (one value is a list of one).

Every size of the graph (``h/a`` whole, repeat counts positive, top-k ≤
experts) is checked at every row; the first row that fails is reported.
Rows are capped (:data:`MAX_ROWS`, ``--max-rows``) before anything is
evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..errors import CostgraphValueError

MAX_ROWS = 10 ** 7
CHUNK = 1 << 17          # rows evaluated at a time
DTYPES = ("int64", "float64", "exact")

_NUM = r"[0-9][0-9_]*"
_AXIS = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_RANGE = re.compile(rf"^({_NUM}):({_NUM}):([x+])({_NUM})$")
_LIST = re.compile(rf"^{_NUM}(,{_NUM})*$")

HINT = "write NAME=a:b:xK (geometric), NAME=a:b:+K (arithmetic) or NAME=a,b,c, with positive whole numbers"


@dataclass(frozen=True)
class Axis:
    """One swept dimension: ``name`` and its ``values`` (positive ints, in order)."""

    name: str
    values: tuple[int, ...]


def _int(text: str, spec: str) -> int:
    if text.endswith("_") or "__" in text:
        raise CostgraphValueError(f"cannot read --over {spec!r}: misplaced '_' in {text!r}", hint=HINT)
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
        return Axis(name, tuple(range(start, stop + 1, step)))
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


@dataclass
class Sweep:
    """The result: ``columns`` (axis names, then quantities), one NumPy array
    per column (``arrays``), the ``fixed`` values of the other dimensions, and
    the ``dtype`` the quantities were evaluated in."""

    columns: list[str]
    arrays: list
    axes: list[Axis]
    quantities: list[str]
    fixed: dict[str, int]
    dtype: str

    @property
    def rows(self) -> int:
        return len(self.arrays[0]) if self.arrays else 0


def _size_check(model, names: Sequence[str], dtype: str = "int64"):
    """A float64 function of the named dimensions' arrays (exact integers, point by
    point, for ``dtype = "exact"``): a boolean array,
    True where every size of the graph that uses only these names is a
    positive whole number and no group has more active copies than copies
    (as :meth:`costgraph.Model._check_whole`, vectorized)."""
    import numpy as np

    from ..numbers.evaluator import ExactEvaluator, NotWhole, vectorized

    syms = [model.graph.dims[n].symbol for n in names]
    have = set(syms)
    sizes = [e for e, *_ in model._sizes() if e.free_symbols <= have]
    pairs = [g.count - g.active for g in model.graph.groups.values()
             if (g.count.free_symbols | g.active.free_symbols) <= have]
    if not sizes and not pairs:
        return None
    if dtype == "exact":
        exact = ExactEvaluator(sizes + pairs, syms)

        def ok_exact(*arrays):
            arrays = np.broadcast_arrays(*[np.asarray(a, dtype=object) for a in arrays])
            good = np.ones(arrays[0].shape if arrays else (), dtype=bool)
            for idx in np.ndindex(good.shape):
                try:
                    out = exact(tuple(int(a[idx]) for a in arrays))
                except NotWhole:
                    good[idx] = False
                    continue
                good[idx] = all(v > 0 for v in out[:len(sizes)]) and all(v >= 0 for v in out[len(sizes):])
            return good
        return ok_exact
    f = vectorized(sizes + pairs, syms, "float64")

    def ok(*arrays):
        out = f(*arrays)
        good = np.ones(np.broadcast(*arrays).shape if arrays else (), dtype=bool)
        for v in out[:len(sizes)]:
            good &= (v > 0) & (v == np.round(v))
        for v in out[len(sizes):]:
            good &= v >= 0
        return good
    return ok


def _checked_request(model, costs, axes: Sequence[Axis], quantities: Sequence[str] | None) -> list[str]:
    """Refuse an axis that is no free dimension of ``model`` or an unknown quantity;
    the quantities to sweep (all of ``costs``' when none are named)."""
    dims = model.graph.dims
    for a in axes:
        if a.name not in dims:
            raise CostgraphValueError(f"model '{model.name}' has no dimension '{a.name}' to sweep",
                                      hint="its dimensions: " + ", ".join(model.symbols))
        if dims[a.name].derived is not None:
            raise CostgraphValueError(f"'{a.name}' is derived ({dims[a.name].derived}); sweep what it depends on")
    quantities = list(quantities or costs.quantities)
    unknown = [q for q in quantities if q not in costs.quantities]
    if unknown:
        raise CostgraphValueError(f"unknown quantity {unknown[0]!r}", hint="quantities: " + ", ".join(costs.quantities))
    return quantities


def sweep(model, costs, axes: Sequence[Axis], fixed: dict[str, int], quantities: Sequence[str] | None = None,
          dtype: str = "int64", progress=None) -> Sweep:
    """Evaluate ``costs`` (a :class:`costgraph.Costs` of ``model``) at every
    point of the product of ``axes``, the other dimensions from ``fixed``.

    ``progress``: None, or a callable ``progress(done, total)`` called after
    each chunk of :data:`CHUNK` rows (:class:`Progress` draws it).

    Returns a :class:`Sweep`; each quantity an array of ``dtype`` (int64,
    float64, or object of Python ints for ``exact``).

    Raises
    ------
    CostgraphValueError
        An axis that is no dimension of the model (or a derived one), an
        unknown quantity or dtype, a dimension of the quantities with no
        value, a row whose sizes are not whole (``h/a``), or int64 overflow.
    """
    import numpy as np

    from ..numbers.evaluator import Compiled

    if dtype not in DTYPES:
        raise CostgraphValueError(f"unknown dtype {dtype!r}", hint="int64 (exact, default), float64 or exact")
    quantities = _checked_request(model, costs, axes, quantities)
    exprs = {q: costs.quantities[q] for q in quantities}
    swept = [a.name for a in axes]
    fixed = {k: v for k, v in fixed.items() if k not in swept}
    syms = sorted(set().union(*(e.free_symbols for e in exprs.values())), key=str)
    missing = [str(x) for x in syms if str(x) not in swept and str(x) not in fixed]
    if missing:
        raise CostgraphValueError(f"no value for {', '.join(missing)}",
                                  hint="give them with --config, --set NAME=VALUE or --over NAME=...")
    # int64 and float64 sweeps take the dimensions as int64 arrays; exact ones as Python ints
    # (object arrays, as Costs.compile(dtype="exact")), at any size
    limit = 2 ** 63
    if dtype != "exact":
        big = [(n, v) for n, v in [*((a.name, max(a.values)) for a in axes), *fixed.items()] if v >= limit]
        if big:
            raise CostgraphValueError(f"{big[0][0]} = {big[0][1]} is past the int64 range (at most 2^63 - 1) "
                                      f"that --dtype {dtype} evaluates in",
                                      hint="--dtype exact evaluates in Python integers, at any size")
    whole = object if dtype == "exact" else np.int64
    f = Compiled(exprs, syms, dtype, {str(x): fixed[str(x)] for x in syms if str(x) in fixed})
    shape = tuple(len(a.values) for a in axes)
    total = int(np.prod(shape, dtype=np.int64)) if shape else 1
    values = [np.asarray(a.values, dtype=whole) for a in axes]
    names = list(dict.fromkeys(swept + list(fixed)))
    checker = _size_check(model, names, dtype)
    outs = {q: [] for q in quantities}
    cols = [[] for _ in axes]
    for start in range(0, total, CHUNK):
        idx = np.arange(start, min(start + CHUNK, total), dtype=np.int64)
        point = np.unravel_index(idx, shape) if shape else ()
        chunk = {a.name: v[i] for a, v, i in zip(axes, values, point)}
        for c, a in zip(cols, axes):
            c.append(chunk[a.name])
        if checker is not None:
            args = [chunk[n] if n in chunk else (fixed[n] if dtype == "exact" else np.int64(fixed[n]))
                    for n in names]
            good = checker(*args)
            if not np.all(good):
                bad = int(np.flatnonzero(~np.broadcast_to(good, idx.shape))[0])
                where = ", ".join(f"{a.name}={chunk[a.name][bad]}" for a in axes)
                try:   # the located message of the first size that fails
                    model._int_values(None, {**fixed, **{a.name: int(chunk[a.name][bad]) for a in axes}})
                except CostgraphValueError as e:
                    raise CostgraphValueError(f"at row {start + bad + 1} ({where}): {e.message}",
                                              hint=e.hint) from None
                raise CostgraphValueError(f"at row {start + bad + 1} ({where}) a size is not a positive whole number")
        got = f(**{k: v for k, v in chunk.items() if k in f.symbols})
        for q in quantities:
            outs[q].append(np.broadcast_to(got[q], idx.shape))
        if progress is not None:
            progress(int(idx[-1]) + 1, total)
    arrays = [np.concatenate(c) if c else np.empty(0, dtype=whole) for c in cols]
    arrays += [np.concatenate(outs[q]) for q in quantities]
    return Sweep(swept + quantities, arrays, list(axes), quantities, fixed, dtype)


class Progress:
    """The sweep's progress bar (:mod:`costgraph.export.progress`: on stderr, only once the sweep has
    run for ``after`` seconds and stderr is a terminal or ``console`` is given); call it with
    ``(done, total)`` or ``(done, total, "writing")`` and :meth:`close` at the end."""

    def __init__(self, label: str, after: float = 1.0, console=None):
        from .progress import _Bar

        self.label = label
        self._bar = _Bar(label, None, after, False, console)

    def __call__(self, done: int, total: int, what: str = "evaluating") -> None:
        if not self._bar.shown and done >= total and what == "writing":
            return
        self._bar.update(done, total, f"{self.label}: {what}")

    def close(self) -> None:
        self._bar.close()


def _column_values(a, dtype: str) -> list:
    """A column as Python values for the writers: ints, exactly; float64
    values as ints while whole and below 2⁵³ (exact), else floats."""
    import numpy as np

    if a.dtype == np.float64:
        exact = (np.abs(a) < 2.0 ** 53) & (a == np.round(a))
        if np.all(exact):
            return a.astype(np.int64).tolist()
        return [int(v) if e else v for v, e in zip(a.tolist(), exact.tolist())]
    return a.tolist()


def to_csv(result: Sweep, out, progress=None) -> None:
    """Write ``result`` to the text stream ``out`` as CSV (header row, then
    one row per point; the :mod:`csv` module), in chunks of :data:`CHUNK`
    rows, calling ``progress(done, total, "writing")`` after each."""
    import csv

    w = csv.writer(out, lineterminator="\n")
    w.writerow(result.columns)
    n = result.rows
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        w.writerows(zip(*[_column_values(a[start:stop], result.dtype) for a in result.arrays]))
        if progress is not None:
            progress(stop, n, "writing")


def to_json(result: Sweep, model_name: str, scope: str, conventions: dict, out) -> None:
    """Write ``result`` as one JSON object: ``model``, ``scope``,
    ``conventions``, ``dtype``, ``fixed`` (the other dimensions' values),
    ``over`` (each axis's values), ``columns``, ``units`` (per quantity) and
    ``rows`` (lists in the order of ``columns``)."""
    import json

    from ..numbers.units import UNITS

    cols = [_column_values(a, result.dtype) for a in result.arrays]
    doc = {"model": model_name, "scope": scope, "conventions": conventions, "dtype": result.dtype,
           "fixed": result.fixed, "over": {a.name: list(a.values) for a in result.axes},
           "columns": result.columns, "units": {q: UNITS[q] for q in result.quantities},
           "rows": [list(r) for r in zip(*cols)]}
    json.dump(doc, out, separators=(",", ":"))


__all__ = ["Axis", "MAX_ROWS", "Progress", "Sweep", "parse_axes", "parse_axis", "sweep", "to_csv", "to_json"]
