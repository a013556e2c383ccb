"""Pipeline parallelism: which parts of the graph each stage holds, and how
many micro-batches of activations it keeps in flight.

Stages are read off the graph, not written per model:

* the **layers** are the iterations of the top-level repeat groups, taken in
  program order; with a numeric ``p`` they are split as Megatron-LM splits
  them (:mod:`costgraph.parallel.layer_split`: ``l/p`` each by default, or
  the first/last stages' own counts, or the embedding and loss counted as
  layers), and a model of several stacks (DeepSeek-V3's dense then MoE
  layers) is assigned contiguously: stage ``i`` holds the part of each
  stack its range of layers covers. With a symbolic ``p`` each stage holds
  the mean share ``count / p`` of every group. A layer *pattern* inside one
  group (Jamba's, Gemma 3's) is held as the group's mean per iteration;
* operators **before** the first group (embeddings, their dropout) sit on
  the first stage, operators **after** it (final norm, head) on the last; a
  table shared between them (a tied embedding and head) is held by both, as
  Megatron keeps a copy of the word embedding on the last stage;
* **micro-batches in flight** (activations kept at once) per schedule:
  :mod:`costgraph.parallel.schedules` (1F1B ``min(p − i, m)``; interleaved
  Megatron's warm-up + 1 chunks of ``l/(p·v)`` layers per rank, or
  Korthikanti's first-stage factor as a named convention; GPipe ``m``;
  ZB-H1 as 1F1B; DualPipe ``p + 1`` stage-sized units on a device holding
  stages ``i`` and ``p − 1 − i``).

``p`` may be a number (every stage is listed) or a symbol (the first and the
last stage are).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.graph import CostGraph

from ..choices import SCHEDULE, SCHEDULE_ACCOUNTING
from .layer_split import stage_shares
from .schedules import bubble_fraction, chunks_in_flight, in_flight

SCHEDULES = SCHEDULE.values


@dataclass
class Stage:
    """One pipeline stage: ``index`` (0-based; a symbol expression for the last
    stage when ``p`` is symbolic), ``layers`` (group path → iterations held),
    ``nodes`` (paths of operators outside the groups held here), ``weights``
    (ids of weights outside the groups held here, a tied table on both ends),
    ``in_flight`` (micro-batches of the stage's activations kept at once),
    ``chunks`` (the same in chunks: ``in_flight × v``; DualPipe ``× 2``) and
    ``head`` (whether it holds the output head, hence the loss's logits)."""

    index: sympy.Expr
    name: str
    layers: dict[str, sympy.Expr] = field(default_factory=dict)
    nodes: set[str] = field(default_factory=set)
    weights: set[str] = field(default_factory=set)
    in_flight: sympy.Expr = sympy.Integer(1)
    chunks: sympy.Expr = sympy.Integer(1)
    head: bool = False


@dataclass(frozen=True)
class Split:
    """Megatron's layer-split options (:mod:`costgraph.parallel.layer_split`):
    ``first``/``last`` layers on the first/last stage, the embedding and the
    loss counted as a layer each; ``g`` the interleaved group
    (``microbatch_group_size_per_vp_stage``, None: ``p``); ``accounting``
    the in-flight convention (:data:`costgraph.choices.SCHEDULE_ACCOUNTING`)."""

    first: object = None
    last: object = None
    embedding: bool = False
    loss: bool = False
    g: object = None
    accounting: str = SCHEDULE_ACCOUNTING.default


def split_of(layout) -> Split:
    """The :class:`Split` of a :class:`~costgraph.parallel.layout.Layout`."""
    return Split(layout.first_stage_layers, layout.last_stage_layers, layout.account_embedding,
                 layout.account_loss, layout.vp_group, layout.schedule_accounting)


def pipeline_stages(cg: CostGraph, p, m=None, schedule: str = SCHEDULE.default, v: int = 1,
                    split: Split | None = None) -> list[Stage]:
    """The stages of ``cg`` for ``p`` pipeline stages and ``m`` micro-batches
    (``m`` defaults to ``p``); see the module docstring. ``split``: Megatron's
    layer-split options (default: an even split, Megatron's in-flight counts).

    Raises
    ------
    ValueError
        Unknown schedule (callers check first).
    """
    if schedule not in SCHEDULES:
        raise ValueError(schedule)
    split = split or Split()
    p = sympy.Integer(p) if isinstance(p, int) else p
    m = p if m is None else (sympy.Integer(m) if isinstance(m, int) else m)
    top = [g for path, g in cg.groups.items() if "/" not in path]
    inside = {path for path, _ in cg.ops() if any(path.startswith(g.path + "/") for g in top)}
    order = [path for path, _ in cg.ops()]
    first_layer = min((order.index(x) for x in inside), default=len(order))
    before = {x for x in order[:first_layer] if x not in inside}
    after = {x for x in order[first_layer:] if x not in inside}

    def weights_of(nodes):
        out = set()
        for x in nodes:
            c = cg.nodes[x]["cost"]
            out |= set(c.weights) | set(c.tied)
        return out

    def stage(i, name, nodes, layers=None, head=False) -> Stage:
        chunks = chunks_in_flight(i, p, m, schedule, v, split.g, split.accounting)
        return Stage(i, name, layers or {g.path: g.count / p for g in top}, set(nodes), weights_of(nodes),
                     in_flight(i, p, m, schedule, v, split.g, split.accounting), chunks, head)

    if p == 1:
        return [stage(sympy.Integer(0), "stage 0 (the whole model)", before | after, head=True)]
    if p.is_Integer:
        n = int(p)
        shares = stage_shares([g.count for g in top], n, v if schedule == "interleaved" else 1, split.first,
                              split.last, split.embedding, split.loss) if top else [[]] * n

        def held(i):
            own = dict(zip([g.path for g in top], shares[i]))
            if schedule == "dualpipe" and n - 1 - i != i:   # the device also runs stage p − 1 − i
                own = {k: sympy.expand(x + y) for (k, x), y in zip(own.items(), shares[n - 1 - i])}
            return own

        def ends(i):
            ends = (before if i == 0 else set()) | (after if i == n - 1 else set())
            if schedule == "dualpipe":
                ends |= (before if i == n - 1 else set()) | (after if i == 0 else set())
            return ends

        return [stage(sympy.Integer(i), f"stage {i}" + (" (first)" if i == 0 else " (last)" if i == n - 1 else ""),
                      ends(i), held(i), head=(i == n - 1 or (schedule == "dualpipe" and i == 0)))
                for i in range(n)]
    return [stage(sympy.Integer(0), "stage 0 (first)", before, head=schedule == "dualpipe"),
            stage(p - 1, "stage p-1 (last)", after, head=True)]


def most_loaded_layers(stages: list[Stage], values: dict | None = None) -> Stage:
    """The stage holding the most layer iterations at ``values`` (symbol → int),
    the first on a tie or when a count has no number: the stage whose layers'
    FLOPs set the pipeline's pace."""
    best, best_n = stages[0], None
    for st in stages:
        n = sympy.Add(*st.layers.values())
        n = n.xreplace(values) if values else n
        if not n.is_number:
            return stages[0]
        if best_n is None or n > best_n:
            best, best_n = st, n
    return best


def bubble(schedule: str, p, m, v=1) -> sympy.Expr:
    """The pipeline bubble as a fraction of a step's compute time
    (:func:`costgraph.parallel.schedules.bubble_fraction`)."""
    return bubble_fraction(schedule, p, m, v)


def pace_factor(stages: list[Stage]) -> sympy.Expr:
    """How much longer the slowest stage's layers take than an even share:
    ``max_i layers_i / (Σ layers / p)`` (1 for an even split; the step time's
    compute, which divides FLOPs evenly over the stages, would be × this; the
    embedding and head are left out). For ``training/steptime.py`` to use."""
    counts = [sympy.Add(*st.layers.values()) for st in stages]
    total = sympy.Add(*counts)
    if total == 0 or len(stages) < 2:
        return sympy.Integer(1)
    return sympy.Max(*counts) * len(stages) / total
