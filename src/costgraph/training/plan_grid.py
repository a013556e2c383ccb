"""The planner's grid: every layout of degrees ``costgraph train`` accepts.

The values tried come from the declarations of :mod:`costgraph.options` (``t``, ``p``,
``c``, ``e``, ``b`` and, per ``p``, ``v`` and the layer split); validity is train's own
code, asked once per value of each axis (each rule reads one axis):

* :func:`costgraph.training.validity.check_layout` on a layout with only that axis set
  (TP's split axes, the pipeline's layer split — :func:`costgraph.parallel.layer_split.check_split`
  —, CP's sequence, EP's experts);
* :func:`costgraph.parallel.schedules.check_schedule` per ``(p, m, v)`` (Megatron's
  interleaved micro-batch groups);
* the rules of :meth:`costgraph.parallel.layout.Layout.filled` that join axes (``d`` whole,
  ``e·etp`` dividing ``d·c·t``) and of :func:`costgraph.training.api.micro_batches` (the
  global batch a multiple of ``b·d``), as the same arithmetic on the grid.

Every layout the planner shows is then built and checked whole by train's path
(:mod:`costgraph.training.plan_confirm`), so a layout ``train`` refuses is never shown.
K/V heads fewer than ``t`` (which ``train`` replicates) are refused here with their own
reason: the screen's closed forms do not model the replicated heads.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np

from ..errors import CostgraphValueError
from ..options import BY_FIELD, DOMINATED_SCHEDULES, Space
from ..parallel.layout import Layout
from ..parallel.schedules import check_schedule

#: the grid's columns: degrees, micro-batch, micro-batches, virtual stages, layer-split index, schedule index
COLUMNS = ("t", "p", "c", "e", "d", "b", "m", "v", "k", "s")
#: each column's index in a row (``rows[:, COL["k"]]``, the layer-split index), named where a column is read
COL = {name: i for i, name in enumerate(COLUMNS)}

REFUSALS = ("d not whole", "t does not divide a split axis", "t above the K/V heads (replicated K/V not screened)",
            "p does not split the layers", "c does not divide s", "e does not divide the experts",
            "e·etp does not divide d·c·t", "global batch not a multiple of b·d",
            "the interleaved schedule's micro-batch groups", "DualPipe's micro-batches (even, at least 2p)",
            "out of memory")


def _refused(check) -> bool:
    """Whether ``check()`` raises train's :class:`CostgraphValueError`."""
    try:
        check()
    except CostgraphValueError:
        return True
    return False


class Grid:
    """The grid of ``cg`` at ``values`` (symbol → int, ``b`` left out) for ``space``.

    ``rows``: one row per layout (:data:`COLUMNS`, float64); ``splits``: the layer splits
    ``(first, last, embedding, loss)`` the column ``k`` indexes (a fifth item: Megatron's chunk
    layout text, :func:`costgraph.options.chunk_layouts`); ``schedules``: the schedules
    the column ``s`` indexes; ``refused``: reason → count; ``pipeline``: ``p`` → its
    (schedule index, ``v``, split index) as searched; ``explicit``: whether Megatron's layout text was given
    (:func:`uneven`)."""

    def __init__(self, cg, values: dict, space: Space, *, global_batch: int, placement, pipeline_layout=None):
        from ..parallel.tensor import with_kv_replication
        from .validity import check_layout

        self.refused = dict.fromkeys(REFUSALS, 0)
        self.splits: list[tuple] = []
        self.pipeline: dict = {}
        self.pruned: dict = {}   # reason → rows of degrees not screened (a dominated schedule)
        dominated: dict = {}     # p → its valid pipelines of a dominated schedule
        gpus = space.gpus

        def ok(layout) -> bool:
            return not _refused(lambda: check_layout(cg, layout.filled(), values, placement=placement))

        t_ok = {}
        for t in BY_FIELD["t"].domain(space):
            rep = with_kv_replication(cg, Layout(t=t), values)
            t_ok[t] = ("t above the K/V heads (replicated K/V not screened)" if rep.tp_replicated else
                       None if ok(rep) else "t does not divide a split axis")
        c_ok = {c: None if ok(Layout(c=c)) else "c does not divide s" for c in BY_FIELD["c"].domain(space)}
        e_ok = {e: None if e == 1 or ok(Layout(e=e)) else "e does not divide the experts"
                for e in BY_FIELD["e"].domain(space)}
        p_ok = {}   # p → [(schedule index, v, split index)] train accepts
        self.schedules: list[str] = []
        explicit = _explicit(cg, values, pipeline_layout)
        for p in BY_FIELD["p"].domain(space):
            found = []
            for sched, split, v in (_pipes(space, p) if explicit is None else explicit.get(p, ())):
                text = split[4] if len(split) > 4 else pipeline_layout   # a generated chunk layout, or the user's
                lay = Layout(p=p, v=v, schedule=sched, pipeline_layout=text, first_stage_layers=split[0],
                             last_stage_layers=split[1], account_embedding=split[2], account_loss=split[3])
                if sched in DOMINATED_SCHEDULES:   # counted, never screened (its twin is)
                    if ok(lay):
                        dominated.setdefault(p, []).append(DOMINATED_SCHEDULES[sched][1])
                    continue
                if not ok(lay):
                    continue
                for name, seq in ((sched, self.schedules), (split, self.splits)):
                    if name not in seq:
                        seq.append(name)
                found.append((self.schedules.index(sched), v, self.splits.index(split)))
            p_ok[p] = found
            self.pipeline[p] = found
        rows = []
        for t, p, c, e, b in itertools.product(t_ok, p_ok, c_ok, e_ok, BY_FIELD["b"].domain(space)):
            d = gpus // (t * p * c)
            why = ("d not whole" if gpus % (t * p * c) else t_ok[t] or
                   (None if p_ok[p] else "p does not split the layers") or c_ok[c] or e_ok[e] or
                   ("e·etp does not divide d·c·t" if (d * c * t) % e else
                    "global batch not a multiple of b·d" if global_batch % (b * d) else None))
            if why is not None:
                self.refused[why] += 1
                continue
            m = global_batch // (b * d)
            kept = []
            for si, v, k in p_ok[p]:
                why = _schedule_refusal(p, m, v, self.schedules[si])
                if why is None:
                    kept.append((si, v, k))
                else:
                    self.refused[why] += 1
            rows += [(t, p, c, e, d, b, m, v, k, si) for si, v, k in kept]
            for why in dominated.get(p, ()):
                self.pruned[why] = self.pruned.get(why, 0) + 1
        self.rows = np.array(rows, dtype=np.float64).reshape(-1, len(COLUMNS)) if rows \
            else np.zeros((0, len(COLUMNS)))
        self.explicit = explicit is not None   # Megatron's layout text given: every pipeline row follows it


def uneven(grid) -> np.ndarray:
    """Per row of ``grid`` (a :class:`Grid`, or a variant's rows with its ``splits``): whether its pipeline
    split is not the even one (Megatron's first/last stage counts, the embedding or loss counted as a layer,
    a layout text — generated or the user's, ``grid.explicit``)."""
    rows = grid.rows
    if len(rows) == 0:
        return np.zeros(0, dtype=bool)
    odd = np.array([tuple(s[:4]) != (None, None, False, False) or len(s) > 4 or getattr(grid, "explicit", False)
                    for s in grid.splits], dtype=bool)
    return odd[rows[:, COL["k"]].astype(int)] & (rows[:, COL["p"]] > 1)


def _pipes(space: Space, p: int):
    """``(schedule, split, v)`` tried at ``p``, from the option declarations (:mod:`costgraph.options`);
    Megatron's chunk layout texts (:func:`costgraph.options.chunk_layouts`, interleaved) as the split
    ``(None, None, False, False, text)``."""
    for sched in BY_FIELD["schedule"].domain(space, p):
        for split in BY_FIELD["split"].domain(space, p):
            for v in (BY_FIELD["v"].domain(space, p) if sched == "interleaved" else (1,)):
                yield sched, split, v
        if sched == "interleaved":
            for v, text in BY_FIELD["pipeline_layout"].domain(space, p):
                yield sched, (None, None, False, False, text), v


def _explicit(cg, values: dict, text: str | None) -> dict | None:
    """With Megatron's layout ``text`` (:mod:`costgraph.parallel.pipeline_layout`): ``p`` →
    ``[(schedule, split, v)]``, one per ``p`` dividing its stages (``v`` = stages / ``p``, the
    interleaved schedule when ``v > 1``, the even split: the layout gives every stage's layers);
    None without one.

    Raises
    ------
    CostgraphValueError
        The text does not parse, or places other layer counts than the model's (checked at one stage per rank)."""
    if text is None:
        return None
    from ..parallel.pipeline_layout import pipeline_layout_for
    from .validity import check_pipeline_stacks

    from types import SimpleNamespace

    check_pipeline_stacks(cg, SimpleNamespace(p=None, pipeline_layout=text))   # CLIP: no layers to place, as train
    n = len(pipeline_layout_for(text, SimpleNamespace(graph=cg), values).stages)   # a Model's graph, as train's
    return {p: [("interleaved" if n // p > 1 else "1f1b", (None, None, False, False), n // p)]
            for p in range(1, n + 1) if n % p == 0 and (p > 1 or n == 1)}


@functools.lru_cache(maxsize=4096)
def _schedule_refusal(p: int, m: int, v: int, schedule: str) -> str | None:
    """Why train refuses ``schedule`` with ``m`` micro-batches on ``p`` stages (:func:`costgraph.parallel.
    schedules.check_schedule`: Megatron's interleaved groups, DualPipe's even ``m ≥ 2p``), None if it does not."""
    if schedule == "interleaved" and v > 1:
        return "the interleaved schedule's micro-batch groups" if _refused(
            lambda: check_schedule(p, m, "interleaved", v)) else None
    if schedule == "dualpipe":
        return "DualPipe's micro-batches (even, at least 2p)" if _refused(
            lambda: check_schedule(p, m, "dualpipe", v)) else None
    return None
