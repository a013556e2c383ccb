"""The planner's screened rows, ranked as arrays and built as candidates only when read.

The screen keeps, of each option combination, the rows that fit and are no slower than its fastest
few (:func:`costgraph.training.plan._evaluate`); on a large grid that is hundreds of thousands of
rows (DeepSeek-V3 on 256 GB200: 232,000 uneven splits whose lower bound is below the kept rows'),
of which the confirmation derives a few dozen and counts the rest (:mod:`costgraph.training.plan_confirm`).
:class:`Rows` holds them as one :class:`Batch` of arrays per screened set, ranks them with one
:func:`numpy.lexsort` by the planner's order (``plan._order``: its every key, computed per row as the
candidate would give it) and builds a row's :class:`~costgraph.training.plan.Candidate` when it is
read: the same rows in the same order as sorting the built candidates (both sorts are stable, the
batches kept in the order they were screened), at the cost of arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..choices import RECOMPUTE_PLANNED
from .plan_grid import COL


@dataclass
class Batch:
    """The rows of one screened set that fit: ``idx`` (rows of ``grid``, in the screen's order), their
    ``mem``, ``step``, ``mfu``, ``low`` (their step's lower bound: an uneven split's bound, else the
    step), ``bounded`` and ``likely`` arrays, the option values ``option = (zero, recompute, sp)``, the
    ``forms`` they were screened with and the variant ``fields`` (``Candidate.options``) added to each;
    ``make(grid, i, z, r, sp, mem, step, mfu)``: the planner's candidate of row ``i``."""

    grid: object
    forms: object
    option: tuple
    idx: np.ndarray
    mem: np.ndarray
    step: np.ndarray
    mfu: np.ndarray
    low: np.ndarray
    bounded: np.ndarray
    likely: np.ndarray
    make: object
    fields: dict = field(default_factory=dict)

    def candidate(self, j: int):
        """The candidate of the ``j``-th row (as the screen built it: its forms and pipe, bound, likely)."""
        i, (z, r, sp) = int(self.idx[j]), self.option
        c = self.make(self.grid, i, z, r, sp, float(self.mem[j]), float(self.step[j]), float(self.mfu[j]))
        bounded = bool(self.bounded[j])
        c.screen = None if bounded else (self.forms, 0 if c.pp == 1 else int(self.grid.rows[i][COL["s"]]) + 1)
        c.bound, c.likely = (float(self.low[j]) if bounded else None), bool(self.likely[j])
        if self.fields:
            c.options = {**c.options, **self.fields}
        return c

    def keys(self, reprs: dict) -> list[np.ndarray]:
        """The planner's order's keys of each row (``plan._order``), primary first; ``reprs``: each
        options text → its rank among all of them (filled here with this batch's)."""
        rows = self.grid.rows[self.idx].astype(np.int64)
        n = len(self.idx)
        z, r, sp = self.option
        splits = [_options(s, self.fields) for s in self.grid.splits]
        for *_, text in splits:
            reprs.setdefault(text, None)
        k, si = rows[:, COL["k"]], rows[:, COL["s"]]

        def per_split(col):
            return np.array([s[col] for s in splits], dtype=object)[k] if n else np.zeros(0)
        late = np.array([s != "1f1b" for s in self.grid.schedules], dtype=np.int64)[si] if n else np.zeros(0)
        return [self.step, self.mem, np.full(n, z), np.full(n, RECOMPUTE_PLANNED.index(r)), np.full(n, int(sp)),
                late, *(rows[:, COL[name]] for name in ("v", "t", "p", "c", "e")),
                *(per_split(c) for c in range(5)), ("text", per_split(5))]


def _options(split: tuple, fields: dict) -> tuple:
    """``(first or 0, last or 0, embedding, loss, len(options), repr of its sorted items)`` of a row of
    layer split ``split`` (a chunk layout text its ``pipeline_layout`` option) with variant ``fields``."""
    first, last, emb, loss, *text = split
    options = {**({"pipeline_layout": text[0]} if text else {}), **fields}
    return first or 0, last or 0, int(emb), int(loss), len(options), repr(sorted(options.items()))


class Rows:
    """The screened rows (:class:`Batch` es, in the order screened), ranked by :meth:`sort`; iterating
    builds each row's candidate in that order."""

    def __init__(self):
        self.batches: list[Batch] = []
        self.order: np.ndarray | None = None   # (batch, row) pairs by rank, after sort()

    def add(self, batch: Batch) -> None:
        if len(batch.idx):
            self.batches.append(batch)
            self.order = None

    def extend(self, other: Rows, fields: dict | None = None) -> None:
        """``other``'s batches after these, each with the variant ``fields`` added to its own."""
        for b in other.batches:
            self.add(Batch(**{**b.__dict__, "fields": {**b.fields, **(fields or {})}}))

    def __len__(self) -> int:
        return sum(len(b.idx) for b in self.batches)

    def sort(self) -> None:
        """Rank the rows by the planner's order (stable: equal rows keep the order screened)."""
        reprs: dict = {}
        cols = [b.keys(reprs) for b in self.batches]
        rank = {text: n for n, text in enumerate(sorted(reprs))}
        keys = []
        for c in range(len(cols[0]) if cols else 0):
            parts = [k[c] for k in cols]
            if isinstance(parts[0], tuple):   # the options' texts, by their rank
                parts = [np.array([rank[t] for t in p[1]], dtype=np.int64) for p in parts]
            keys.append(np.concatenate([np.asarray(p, dtype=np.float64) for p in parts]))
        which = np.concatenate([np.stack([np.full(len(b.idx), n), np.arange(len(b.idx))], axis=1)
                                for n, b in enumerate(self.batches)]) if self.batches else np.zeros((0, 2), int)
        self.order = which[np.lexsort(keys[::-1])] if keys else which

    def _ranked(self) -> np.ndarray:
        if self.order is None:
            self.sort()
        return self.order

    def candidate(self, at: int):
        """The candidate ranked ``at`` (0: the first)."""
        n, j = self._ranked()[at]
        return self.batches[int(n)].candidate(int(j))

    def __iter__(self):
        return (self.candidate(at) for at in range(len(self._ranked())))

    def pool(self, start: int, deferred: list, lowest):
        """The rows ranked from ``start`` on, then the ``deferred`` candidates, by their least step
        (an uneven split's bound, else its step; ``lowest(candidate)`` for a deferred one), stable:
        ``(least step, bounded, the candidate or a function building it)`` each, built as read."""
        order = self._ranked()[start:]
        offsets = np.cumsum([0] + [len(b.idx) for b in self.batches])
        flat = offsets[order[:, 0]] + order[:, 1] if len(order) else np.zeros(0, np.int64)
        least = np.concatenate([np.zeros(0)] + [np.where(b.bounded, b.low, b.step) for b in self.batches])[flat]
        bounded = np.concatenate([np.zeros(0, bool)] + [b.bounded for b in self.batches])[flat]
        first = np.concatenate([least, np.array([lowest(c) for c in deferred], dtype=np.float64)])
        for k in np.argsort(first, kind="stable").tolist():
            if k < len(order):
                n, j = order[k]
                yield float(first[k]), bool(bounded[k]), _builder(self.batches[int(n)], int(j))
            else:
                c = deferred[k - len(order)]
                yield float(first[k]), c.bound is not None, c


def _builder(batch: Batch, j: int):
    return lambda: batch.candidate(j)


__all__ = ["Batch", "Rows"]
