"""Sweeps: a model's costs over a grid of dimension values, as rows.

``costgraph sweep MODEL --over s=512:32768:x2 --over b=1,2,4`` evaluates the
scope's quantities at every combination of the axes (the cartesian product,
the first axis varying slowest), the other dimensions fixed by
``--config``/``--set``, with the compiled evaluator
(:meth:`costgraph.Costs.compile`, :func:`costgraph.numbers.evaluator.vectorized`),
in chunks, and writes CSV (the :mod:`csv` module) or JSON.

Range grammar (:func:`parse_axis`, in :mod:`costgraph.export.sweep_axes`), read with a regular expression, never
``eval``; numbers are positive whole numbers (``_`` allowed as a separator):

* ``NAME=a:b:xK`` — geometric: a, a·K, a·K², … up to b (K ≥ 2);
* ``NAME=a:b:+K`` — arithmetic: a, a + K, … up to b (K ≥ 1);
* ``NAME=a,b,c`` — a list (one value is a list of one).

Every size of the graph (``h/a`` whole, repeat counts positive, top-k ≤
experts) is checked at every row; the first row that fails is reported.
Rows are capped (:data:`MAX_ROWS`, ``--max-rows``) before anything is
evaluated: a cap on the output's size, not on memory.

Memory does not grow with the number of rows: :func:`plan` checks and
compiles, :meth:`Plan.chunks` evaluates :data:`CHUNK` rows at a time, and
:func:`csv_pieces`/:func:`json_pieces` turn each chunk into text (the JSON
array's brackets and commas written as it goes, so the document stays strict
JSON); an arithmetic axis is a :class:`range`, never listed. The command
writes each piece as it comes (to the ``-o`` temporary file, or stdout).
:func:`sweep` still collects every row, for use in process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..errors import CostgraphValueError
from ..hints import them
from .display import Tabular
from .sweep_axes import HINT, MAX_ROWS, Axis, axis_length, parse_axes, parse_axis

CHUNK = 1 << 17          # rows evaluated at a time
WRITE_CHUNK = 1 << 14    # rows turned into text at a time (Python values: about 30 bytes each)
DTYPES = ("int64", "float64", "exact")


@dataclass(repr=False)
class Sweep(Tabular):
    """The result: ``columns`` (axis names, then quantities), one NumPy array
    per column (``arrays``), the ``fixed`` values of the other dimensions, and
    the ``dtype`` the quantities were evaluated in. In a notebook (and ``print``) a table
    (:class:`~costgraph.export.display.Tabular`; at most :data:`SHOWN_ROWS` rows, the first and the
    last half); ``to_pandas()`` every row."""

    columns: list[str]
    arrays: list
    axes: list[Axis]
    quantities: list[str]
    fixed: dict[str, int]
    dtype: str

    @property
    def rows(self) -> int:
        return len(self.arrays[0]) if self.arrays else 0

    def _table(self, every: bool = False):
        """The rows as a :class:`~costgraph.export.display.Table`: axis values, then each quantity with
        its unit; all of them (``every``) or the first and last ``SHOWN_ROWS // 2``, an ellipsis between."""
        from ..numbers.units import UNITS
        from .display import Q, Table

        n, half = self.rows, SHOWN_ROWS // 2
        picked = range(n) if every or n <= SHOWN_ROWS else [*range(half), None, *range(n - half, n)]
        units = [UNITS.get(c, "") for c in self.columns]
        rows = [tuple("…" for _ in self.columns) if i is None else
                tuple(Q(_plain(a[i]), u) if u else _plain(a[i]) for a, u in zip(self.arrays, units)) for i in picked]
        fixed = ", ".join(f"{k} = {v:,}" for k, v in self.fixed.items() if k not in self.columns)
        shown = "" if len(picked) == n else f", the first and last {half}"
        return Table(f"sweep over {', '.join(a.name for a in self.axes)}: {n:,} rows{shown}"
                     + (f" ({fixed})" if fixed else ""), tuple(self.columns), rows)

    def to_pandas(self):
        """Every row as a :class:`pandas.DataFrame` (the ``notebook`` extra; units in ``unit`` columns)."""
        from .display import frame

        return frame(self._table(every=True))

    def __str__(self) -> str:
        from .display import text

        return text(self._shown())


#: the rows a notebook or ``print`` shows of a :class:`Sweep` (its first and last half)
SHOWN_ROWS = 40


def _plain(v):
    """A NumPy scalar as a Python number (ints exact)."""
    return v.item() if hasattr(v, "item") else v


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


def _axis_chunk(a: Axis, fixed_array, idx, dtype: str):
    """Axis ``a``'s values at positions ``idx`` (an int64 array): from the
    precomputed array ``fixed_array`` for a listed or geometric axis, computed
    as start + i·step for an arithmetic one (a :class:`range`, never listed)."""
    import numpy as np

    if fixed_array is not None:
        return fixed_array[idx]
    r = a.values
    if dtype == "exact":
        return np.asarray([r.start + int(i) * r.step for i in idx], dtype=object)
    return np.int64(r.start) + idx * np.int64(r.step)


def _top(a: Axis) -> int:
    """The largest value of ``a`` (the last of an arithmetic range: no scan)."""
    return a.values[-1] if isinstance(a.values, range) else max(a.values)


def _bottom(a: Axis) -> int:
    """The smallest value of ``a`` (the first of an arithmetic range: no scan)."""
    return a.values[0] if isinstance(a.values, range) else min(a.values)


@dataclass
class Plan:
    """A checked sweep, not yet evaluated: ``columns`` (axis names, then
    ``quantities``), the ``fixed`` values of the other dimensions, the
    ``dtype``, and ``rows`` (the product of the axes' lengths).
    :meth:`chunks` evaluates it, :data:`CHUNK` rows at a time, so that memory
    does not grow with the number of rows (:func:`plan` builds one)."""

    columns: list[str]
    axes: list[Axis]
    quantities: list[str]
    fixed: dict[str, int]
    dtype: str
    rows: int
    _f: object
    _checker: object
    _names: list[str]
    _model: object

    def chunks(self, progress=None):
        """Yield, per chunk of at most :data:`CHUNK` rows (first axis slowest),
        one array per column (axes, then quantities). ``progress``: None or
        ``progress(done, total)``, called after each chunk.

        Raises
        ------
        CostgraphValueError
            A row whose sizes are not whole (``h/a``; the first such row, by
            number), or int64 overflow (from the compiled evaluator)."""
        import numpy as np

        whole = object if self.dtype == "exact" else np.int64
        shape = tuple(len(a.values) for a in self.axes)
        small = [None if isinstance(a.values, range) else np.asarray(a.values, dtype=whole) for a in self.axes]
        chunk_size = CHUNK
        for start in range(0, self.rows, chunk_size):
            idx = np.arange(start, min(start + chunk_size, self.rows), dtype=np.int64)
            point = np.unravel_index(idx, shape) if shape else ()
            chunk = {a.name: _axis_chunk(a, v, i, self.dtype) for a, v, i in zip(self.axes, small, point)}
            self._check(chunk, start, idx)
            got = self._f(**{k: v for k, v in chunk.items() if k in self._f.symbols})
            yield [chunk[a.name] for a in self.axes] + [np.broadcast_to(got[q], idx.shape) for q in self.quantities]
            if progress is not None:
                progress(int(idx[-1]) + 1, self.rows)

    def _check(self, chunk: dict, start: int, idx) -> None:
        """Refuse the chunk's first row whose sizes are not positive whole numbers."""
        import numpy as np

        if self._checker is None:
            return
        fixed, axes = self.fixed, self.axes
        args = [chunk[n] if n in chunk else (fixed[n] if self.dtype == "exact" else np.int64(fixed[n]))
                for n in self._names]
        good = self._checker(*args)
        if np.all(good):
            return
        bad = int(np.flatnonzero(~np.broadcast_to(good, idx.shape))[0])
        where = ", ".join(f"{a.name}={chunk[a.name][bad]}" for a in axes)
        try:   # the located message of the first size that fails
            self._model._int_values(None, {**fixed, **{a.name: int(chunk[a.name][bad]) for a in axes}})
        except CostgraphValueError as e:
            raise CostgraphValueError(f"at row {start + bad + 1} ({where}): {e.message}", hint=e.hint) from None
        raise CostgraphValueError(f"at row {start + bad + 1} ({where}) a size is not a positive whole number")


def plan(model, costs, axes: Sequence[Axis], fixed: dict[str, int], quantities: Sequence[str] | None = None,
         dtype: str = "int64") -> Plan:
    """Check a sweep of ``costs`` (a :class:`costgraph.Costs` of ``model``) over
    the product of ``axes``, the other dimensions from ``fixed``, and compile
    it; nothing is evaluated (:meth:`Plan.chunks` does, chunk by chunk).

    Raises
    ------
    CostgraphValueError
        An axis that is no dimension of the model (or a derived one), an
        unknown quantity or dtype, a dimension of the quantities with no
        value, a value past int64 for ``int64``/``float64``, or more rows
        than can be indexed (2⁶³ − 1)."""
    import math

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
                                  hint=f"give {them(missing)} with --config, --set NAME=VALUE or --over NAME=...")
    # int64 and float64 sweeps take the dimensions as int64 arrays; exact ones as Python ints
    # (object arrays, as Costs.compile(dtype="exact")), at any size
    limit = 2 ** 63
    if dtype != "exact":
        big = [(n, v) for n, v in [*((a.name, _top(a)) for a in axes), *fixed.items()] if v >= limit]
        if big:
            raise CostgraphValueError(f"{big[0][0]} = {big[0][1]} is past the int64 range (at most 2^63 - 1) "
                                      f"that --dtype {dtype} evaluates in",
                                      hint="--dtype exact evaluates in Python integers, at any size")
    rows = math.prod(len(a.values) for a in axes)
    if rows >= limit:
        raise CostgraphValueError(f"the sweep has {rows:,} rows; at most 2^63 - 1 can be numbered",
                                  hint="sweep fewer values")
    f = Compiled(exprs, syms, dtype, {str(x): fixed[str(x)] for x in syms if str(x) in fixed})
    names = list(dict.fromkeys(swept + list(fixed)))
    return Plan(swept + quantities, list(axes), quantities, fixed, dtype, rows, f,
                _size_check(model, names, dtype), names, model)


def sweep(model, costs, axes: Sequence[Axis], fixed: dict[str, int], quantities: Sequence[str] | None = None,
          dtype: str = "int64", progress=None) -> Sweep:
    """Evaluate ``costs`` (a :class:`costgraph.Costs` of ``model``) at every
    point of the product of ``axes``, the other dimensions from ``fixed``,
    into memory (every row; :func:`plan` and :func:`write_csv`/:func:`write_json`
    stream instead).

    ``progress``: None, or a callable ``progress(done, total)`` called after
    each chunk of :data:`CHUNK` rows (:class:`Progress` draws it).

    Returns a :class:`Sweep`; each quantity an array of ``dtype`` (int64,
    float64, or object of Python ints for ``exact``).

    Raises
    ------
    CostgraphValueError
        As :func:`plan` and :meth:`Plan.chunks`.
    """
    import numpy as np

    p = plan(model, costs, axes, fixed, quantities, dtype)
    parts = list(p.chunks(progress))
    whole = object if dtype == "exact" else np.int64
    arrays = [np.concatenate(c) if c else np.empty(0, dtype=whole) for c in zip(*parts)] if parts else \
        [np.empty(0, dtype=whole) for _ in p.columns]
    return Sweep(p.columns, arrays, p.axes, p.quantities, p.fixed, dtype)


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


def csv_pieces(columns: Sequence[str], chunks, dtype: str):
    """The CSV text (header row, then one row per point; the :mod:`csv`
    module, ``\\n`` line ends) as pieces: the header, then one piece per chunk
    of ``chunks`` (each a list of column arrays, as :meth:`Plan.chunks` yields)."""
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(columns)
    yield buf.getvalue()
    for cols in _write_slices(chunks):
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows(zip(*[_column_values(a, dtype) for a in cols]))
        yield buf.getvalue()


def _write_slices(chunks):
    """Each chunk's columns cut to :data:`WRITE_CHUNK` rows (the text of one slice at a time)."""
    for cols in chunks:
        n = len(cols[0]) if cols else 0
        for start in range(0, n, WRITE_CHUNK):
            yield [a[start:start + WRITE_CHUNK] for a in cols]


def _json_ints(values) -> object:
    """A JSON array of the ints ``values`` (a tuple, or a :class:`range` of any
    length, written :data:`CHUNK` values at a time), as pieces."""
    if not isinstance(values, range):
        yield "[" + ",".join(str(int(v)) for v in values) + "]"
        return
    for i in range(0, len(values), CHUNK):
        yield ("[" if i == 0 else ",") + ",".join(map(str, values[i:i + CHUNK]))
    yield "]"


def json_pieces(head: dict, axes: Sequence[Axis], columns: Sequence[str], units: dict, chunks, dtype: str):
    """One JSON object, strict and compact (``json.dumps(doc, separators=(",", ":"))``, byte for
    byte), as pieces: ``head`` (``model``, ``scope``, ``conventions``, ``dtype``, ``fixed``), then
    ``over`` (each axis's values), ``columns``, ``units`` and ``rows`` (lists in the order of
    ``columns``), the rows written chunk by chunk, brackets and commas included."""
    import json

    sep = (",", ":")
    yield json.dumps(head, separators=sep)[:-1] + ',"over":{'
    for i, a in enumerate(axes):
        yield ("," if i else "") + json.dumps(a.name) + ":"
        yield from _json_ints(a.values)
    yield '},"columns":' + json.dumps(list(columns), separators=sep)
    yield ',"units":' + json.dumps(units, separators=sep) + ',"rows":['
    first = True
    for cols in _write_slices(chunks):
        rows = [list(r) for r in zip(*[_column_values(a, dtype) for a in cols])]
        if rows:
            yield ("" if first else ",") + json.dumps(rows, separators=sep)[1:-1]
            first = False
    yield "]}"


def _slices(result: Sweep):
    """``result``'s arrays, :data:`CHUNK` rows at a time."""
    n = result.rows
    for start in range(0, n, CHUNK):
        yield [a[start:start + CHUNK] for a in result.arrays]


def to_csv(result: Sweep, out, progress=None) -> None:
    """Write ``result`` to the text stream ``out`` as CSV (header row, then
    one row per point; the :mod:`csv` module), in chunks of :data:`CHUNK`
    rows, calling ``progress(done, total, "writing")`` after each."""
    n, done = result.rows, 0
    for i, piece in enumerate(csv_pieces(result.columns, _slices(result), result.dtype)):
        out.write(piece)
        if i and progress is not None:
            done = min(done + CHUNK, n)
            progress(done, n, "writing")


def json_head(model_name: str, scope: str, conventions: dict, dtype: str, fixed: dict) -> dict:
    """The fields of the JSON document before ``over`` (see :func:`json_pieces`)."""
    return {"model": model_name, "scope": scope, "conventions": conventions, "dtype": dtype, "fixed": fixed}


def to_json(result: Sweep, model_name: str, scope: str, conventions: dict, out) -> None:
    """Write ``result`` as one JSON object: ``model``, ``scope``,
    ``conventions``, ``dtype``, ``fixed`` (the other dimensions' values),
    ``over`` (each axis's values), ``columns``, ``units`` (per quantity) and
    ``rows`` (lists in the order of ``columns``)."""
    from ..numbers.units import UNITS

    head = json_head(model_name, scope, conventions, result.dtype, result.fixed)
    units = {q: UNITS[q] for q in result.quantities}
    for piece in json_pieces(head, result.axes, result.columns, units, _slices(result), result.dtype):
        out.write(piece)


__all__ = ["Axis", "MAX_ROWS", "Plan", "Progress", "Sweep", "csv_pieces", "json_head", "json_pieces", "parse_axes",
           "parse_axis", "plan", "sweep", "to_csv", "to_json"]
