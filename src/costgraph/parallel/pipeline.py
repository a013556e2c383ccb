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
from .layer_split import ZERO, layer_groups, stage_shares
from .schedules import bubble_fraction, chunks_in_flight, in_flight
from ..engine.symbols import as_expr

#: the most stages split over symbolic layer counts (twice the largest published PP, 64: Narayanan et al.
#: 2021's 1T-parameter run); with known counts, the layers bound the stages (layer_split.check_split)
MAX_SYMBOLIC_STAGES = 128

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
    layout: object = None   # a bound PipelineLayout (costgraph.parallel.pipeline_layout): Megatron's explicit split


def split_of(layout) -> Split:
    """The :class:`Split` of a :class:`~costgraph.parallel.layout.Layout` (its
    ``pipeline_layout`` text parsed and bound to its ``p``)."""
    explicit = None
    if getattr(layout, "pipeline_layout", None) is not None:
        from .pipeline_layout import parse_pipeline_layout

        explicit = parse_pipeline_layout(layout.pipeline_layout, int(layout.p))
    return Split(layout.first_stage_layers, layout.last_stage_layers, layout.account_embedding,
                 layout.account_loss, layout.vp_group, layout.schedule_accounting, explicit)


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
    main, post = layer_groups(cg)
    top = main + post
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

    # the tables the post groups (MTP) read from outside them (the tied embedding): held where they are
    post_tied = {w for w in weights_of(x for x in inside if any(x.startswith(g.path + "/") for g in post))
                 if w in cg.weights and not any(w.startswith(g.path + "/") for g in top)}

    def stage(i, name, nodes, layers, head=False, tied=frozenset()) -> Stage:
        chunks = chunks_in_flight(i, p, m, schedule, v, split.g, split.accounting)
        return Stage(i, name, layers, set(nodes), weights_of(nodes) | set(tied),
                     in_flight(i, p, m, schedule, v, split.g, split.accounting), chunks, head)

    if p == 1:
        return [stage(sympy.Integer(0), "stage 0 (the whole model)", before | after,
                      {g.path: g.count for g in top}, head=True, tied=post_tied)]
    if not p.is_Integer:
        if schedule == "dualpipe":   # each device runs stages i and p − 1 − i: two shares, both ends, the MTP
            both = {**{g.path: 2 * g.count / p for g in main}, **{g.path: g.count for g in post}}
            return [stage(sympy.Integer(0), "stage 0 (first)", before | after, both, head=True, tied=post_tied),
                    stage(p - 1, "stage p-1 (last)", before | after, both, head=True, tied=post_tied)]
        even = {g.path: g.count / p for g in main}
        return [stage(sympy.Integer(0), "stage 0 (first)", before, {**even, **{g.path: ZERO for g in post}}),
                stage(p - 1, "stage p-1 (last)", after, {**even, **{g.path: g.count for g in post}}, head=True,
                      tied=post_tied)]
    n = int(p)
    if n > MAX_SYMBOLIC_STAGES and any(as_expr(g.count).free_symbols for g in main):
        from ..errors import CostgraphValueError

        raise CostgraphValueError(
            f"{n:,} pipeline stages over symbolic layer counts: at most {MAX_SYMBOLIC_STAGES} (each stage's closed "
            "form is derived; 1,024 stages of Qwen2-VL ran for minutes)",
            hint="give the layer counts (--config NAME or --set l=N): a known count bounds the stages itself")
    rows = _shares(main, post, n, v if schedule == "interleaved" else 1, split)

    def held(i):
        if schedule == "dualpipe" and n - 1 - i != i:   # the device also runs stage p − 1 − i
            return {k: sympy.expand(x + rows[n - 1 - i][k]) for k, x in rows[i].items()}
        return rows[i]

    def ends(i):
        ends = (before if i == 0 else set()) | (after if i == n - 1 else set())
        if schedule == "dualpipe":
            ends |= (before if i == n - 1 else set()) | (after if i == 0 else set())
        return ends

    def name(i):
        return f"stage {i}" + (" (first)" if i == 0 else " (last)" if i == n - 1 else "") + \
            (f" [{split.layout.rank_text(i)}]" if split.layout is not None else "")

    return [stage(sympy.Integer(i), name(i), ends(i), held(i), head=(i == n - 1 or (schedule == "dualpipe" and i == 0)),
                  tied=post_tied if any(held(i)[g.path] != 0 for g in post) else ())
            for i in range(n)]


def _shares(main, post, n: int, v: int, split: Split) -> list[dict]:
    """``rows[r]``: group path → iterations rank ``r`` holds: the ``main`` groups split as
    Megatron splits them (the explicit layout's counts, or :func:`stage_shares`'s), every
    ``post`` group (MTP) whole on one rank: the layout's ``m`` rank, else the last."""
    sizes = split.layout.chunk_sizes() if split.layout is not None else None
    shares = stage_shares([g.count for g in main], n, v, split.first, split.last, split.embedding, split.loss,
                          sizes=sizes) if main else [[]] * n
    at = split.layout.mtp_rank() if split.layout is not None and split.layout.mtp else n - 1
    return [{**dict(zip([g.path for g in main], shares[r])), **{g.path: g.count if r == at else ZERO for g in post}}
            for r in range(n)]


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


def stage_flops(cg: CostGraph, stages: list[Stage], rows: list[dict]) -> list[sympy.Expr]:
    """FLOPs (forward + backward, per micro-batch) each stage's device runs: every leaf row of
    :func:`costgraph.engine.totals.breakdown` (``leaves_only``) inside a top-level group × the
    stage's share of the group's iterations, and the rows outside the groups the stage holds
    (embedding on the first, head on the last). Their sum over the stages is the model's."""
    top = [g for path, g in cg.groups.items() if "/" not in path]
    per_group = {g.path: [] for g in top}   # FLOPs of all of a group's iterations, then of the rest by path
    outside = {}
    for r in rows:
        f = r["count"] * (r["flops_forward"] + r["flops_backward"])
        g = next((g for g in top if r["path"].startswith(g.path + "/")), None)
        if g is not None:
            per_group[g.path].append(f)
        else:
            outside[r["path"]] = outside.get(r["path"], 0) + f
    one = {g.path: sympy.expand(sympy.Add(*per_group[g.path]) / g.count) for g in top if g.count != 0}
    return [sympy.Add(*[st.layers.get(k, 0) * f for k, f in one.items()],
                      *[f for path, f in outside.items() if path in st.nodes]) for st in stages]


def flops_pace(cg: CostGraph, stages: list[Stage], rows: list[dict], values: dict | None = None) -> sympy.Expr:
    """How much longer the busiest device's share takes than the mean: ``max_i F_i / mean_i F_i``
    over :func:`stage_flops` (1 for one stage). The step time's compute (FLOPs / devices) × this
    is the busiest stage's, which sets the pipeline's pace (Narayanan et al. 2021 §2.2: every
    stage waits for the slowest). ``values``: symbol → int, to compare numbers."""
    if len(stages) < 2:
        return sympy.Integer(1)
    work = [sympy.expand(w.xreplace(values)) if values else w for w in stage_flops(cg, stages, rows)]
    total = sympy.Add(*work)
    if total == 0:
        return sympy.Integer(1)
    # symbolic: left unevaluated (SymPy's pairwise comparisons of long sums are slow); numbers compare
    return sympy.Max(*work, evaluate=all(w.is_number for w in work)) * len(work) / total


def layout_pace(cg: CostGraph, layout, stages: list[Stage], convention: str | None = None,
                causal: str | None = None) -> sympy.Expr:
    """The step time's pace factor (:func:`flops_pace`) where the split is uneven by
    construction: an explicit ``pipeline_layout``, or MTP depths on one stage
    (:func:`layer_groups`); 1 otherwise (the even split's mean, as the step time has always
    taken it). ``convention``/``causal``: the FLOP conventions (defaults: the choices')."""
    from ..choices import CAUSAL, CONVENTION
    from ..engine.precision import precision
    from ..engine.totals import MODEL_SCOPE, breakdown

    p = as_expr(layout.p, "the pipeline degree")
    if not p.is_Integer or p < 2 or (getattr(layout, "pipeline_layout", None) is None and not layer_groups(cg)[1]):
        return sympy.Integer(1)
    rows = breakdown(cg, MODEL_SCOPE, convention or CONVENTION.default, precision("bf16"),
                     causal or CAUSAL.default, leaves_only=True)
    return flops_pace(cg, stages, rows)
