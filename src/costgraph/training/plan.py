"""The layout planner: which parallel layouts fit, and which is fastest.

``plan`` searches the layouts of degrees — tensor ``t``, pipeline ``p``, context ``c``,
expert ``e``, data ``d = gpus/(t·p·c)``, the micro-batch ``b`` (``m = B/(b·d)``
micro-batches for a global batch of ``B`` sequences), interleaved virtual stages ``v`` and
the pipeline's layer split — and on each the options of
:data:`costgraph.options.SEARCHED_OPTIONS` (ZeRO stage, recomputation, SP). The values
tried are generated from the option declarations of :mod:`costgraph.options`; it keeps
the layouts whose most-loaded device fits the device memory less a reserve
(:data:`costgraph.choices.DEFAULT_RESERVE`), and ranks them by step time.

Three steps, each a module:

1. **Grid** (:mod:`costgraph.training.plan_grid`): the layouts of degrees, valid by train's
   own checks (:func:`costgraph.training.validity.check_layout`, Megatron's layer split, the
   interleaved schedule's groups); each refusal counted by reason.
2. **Screen** (:mod:`costgraph.training.plan_forms`): train's closed forms derived once with
   the degrees as symbols, compiled and evaluated over every layout at once (float64).
3. **Confirm** (:mod:`costgraph.training.plan_confirm`): the fastest screened layouts, as
   many as are shown, built as their check command builds them, checked whole and derived
   exactly by train's path, ranked again by their exact figures: a shown row equals
   ``costgraph train`` on it (tests/training/test_plan_equals_train.py).

Pruning: a layout whose screened memory exceeds the capacity less the reserve is not
confirmed ("out of memory"); options that change nothing are not offered (no duplicate rows):
ZeRO when the group it shards over (DP × CP, and the experts' DP group) is one device — it
is offered at ``d = 1`` when ``c > 1`` (FSDP over the CP ranks, as torchtitan's
``dp_shard_cp`` mesh and Megatron's DP × CP optimizer group); ``selective`` recomputation
under flash attention (the kernel recomputes the same core); SP without TP.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy

from ..choices import ATTENTION, DEFAULT_OPTIMIZER, DEFAULT_POLICY, OVERLAP, RECOMPUTE_PLANNED
from ..layout_options import given_settings
from ..engine.graph import CostGraph
from ..errors import CostgraphValueError
from ..options import Space, SEARCHED_OPTIONS, searched
from ..parallel.layout import Layout
from ..parallel.placement import placement
from ..result_fields import quantity
from .fp8 import transpose_for
from .plan_confirm import confirm, exact_figures, layout_of   # noqa: F401  (public: the planner's API)
from .plan_forms import Forms, T, P, C, EP, D, M, V, screen
from .plan_grid import COLUMNS, REFUSALS, Grid, uneven   # noqa: F401
from .plan_rows import Batch, Rows
from .plan_variants import search_variants, space_facts

RECOMPUTE = RECOMPUTE_PLANNED   # not the named conventions (choices.RECOMPUTE's others)
#: The training options the search tries on every layout of degrees, each ``(Layout field, values)``,
#: generated from :data:`costgraph.options.SEARCHED_OPTIONS` (their full domains).
SEARCHED = tuple((o.field, tuple(o.domain(Space(1, 1, 1, attention="eager")))) for o in SEARCHED_OPTIONS)
#: how many screened layouts beyond ``top`` are confirmed exactly (the screen's order can differ in ties)
MARGIN = 2
#: the most rows ``plan`` shows (each is derived exactly)
MAX_TOP = 100
#: the reasons of the uneven splits' bounds (:func:`costgraph.training.plan_forms.uneven_bounds`)
BOUND_OOM = "out of memory by a lower bound (uneven split: at least one stage's memory / p)"
BOUND_SLOWER = ("uneven split slower than the rows shown by a lower bound (compute + bubble + optimizer step; "
                "not derived exactly)")
#: the confirmation's budget past the rows shown: the uneven splits whose lower bound is below the rows shown
#: are derived up to this many, the rest counted (plan_confirm.UNPROVEN), not derived
BUDGET = 8
#: the largest global batch ``plan`` searches: 2^53, below which its grid's float64 columns hold every count exactly
MAX_GLOBAL_BATCH = 2 ** 53


@dataclass
class Candidate:
    """One layout and its figures (a row of ``costgraph plan``; their units declared on the fields,
    which the row's table reads): ``memory_bytes`` (the most-loaded device, an exact int
    once confirmed), ``step_seconds`` and ``mfu`` (floats); the pipeline's layer split
    (``first_stage_layers``, ``last_stage_layers``, ``account_embedding``, ``account_loss``:
    Megatron's options, None/False for the even split)."""

    tp: int
    pp: int
    dp: int
    cp: int
    ep: int
    zero: int
    recompute: str
    sp: bool
    micro_batch: int
    micro_batches: int
    memory_bytes: float = quantity("bytes", label="memory")
    step_seconds: float = quantity("s", label="step time")
    mfu: float = quantity(label="MFU")
    virtual_stages: int = 1
    schedule: str = "1f1b"
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_embedding: bool = False
    account_loss: bool = False
    options: dict = field(default_factory=dict)
    #: the screen's forms and the row's pipe index in them (:mod:`costgraph.training.plan_exact`); not shown
    screen: tuple | None = field(default=None, repr=False, compare=False)
    #: an uneven split's step lower bound (``step_seconds`` its estimate; None: the screen is exact) and
    #: whether its estimated memory fits (the confirmation's first pass); not shown
    bound: float | None = field(default=None, repr=False, compare=False)
    likely: bool = field(default=True, repr=False, compare=False)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("screen", "bound", "likely")}

    def key(self) -> tuple:
        """The degrees and figures: two candidates with the same key are one row (the first by the
        planner's order: the simpler settings, the fewer variant options)."""
        return (self.tp, self.pp, self.dp, self.cp, self.ep, self.micro_batch, self.micro_batches,
                self.virtual_stages, self.schedule, self.first_stage_layers, self.last_stage_layers, self.account_embedding,
                self.account_loss, round(self.memory_bytes), round(self.step_seconds, 12))


@dataclass
class Plan:
    """The ranked layouts that fit (``layouts``, fastest first, confirmed exactly), how many
    were considered, how many were refused (or pruned) for each reason, ``divisible`` (layouts
    of degrees every divisibility rule allows: 0 means no layout divides evenly), ``least``
    (the layout needing the least memory, screened, when none fits), ``searched``
    (option → the values tried) and ``pruned`` (reason → layouts not confirmed)."""

    layouts: list[Candidate]
    considered: int
    refused: dict[str, int]
    efficiency: sympy.Rational
    capacity: int
    reserve: int = 0
    divisible: int = 0
    least: Candidate | None = None
    settings: dict = field(default_factory=dict)
    searched: dict = field(default_factory=dict)
    pruned: dict = field(default_factory=dict)


def plan(model, values: dict, *, gpus: int, hardware, global_batch: int, capacity: int | None = None,
         efficiency=None, attention: str = ATTENTION.default, policy: str = DEFAULT_POLICY,
         optimizer: str = DEFAULT_OPTIMIZER, max_tp: int | None = None, micro_batches=(1, 2, 4, 8, 16, 32),
         cp_options=(1, 2, 4, 8), top: int = 10, reserve: int = 0, factors=None,
         overlap: str = OVERLAP.default, pipeline_layout: str | None = None, allow_fp8: bool = False,
         allow_offload: bool = False, exhaustive: bool = False, reserve_of=None,
         **given) -> Plan:
    """Rank the layouts of ``model`` on ``gpus`` devices of a ``hardware``
    preset (:mod:`costgraph.hardware`; ``capacity`` defaults to its memory; ``reserve``:
    bytes kept free on each device; ``reserve_of``: a row's own reserve, called with the candidate, when
    it differs by layout (train's runtime reserve; ``reserve`` is then the least of them, the screen's
    bound)) for a global batch of ``global_batch`` sequences (see
    the module docstring). ``values``: the model's dimension values (symbol → int; ``b``
    is replaced by each candidate micro-batch; ``micro_batches`` and ``cp_options``: the candidate ``b`` and ``c``,
    to which the CP domain adds the larger degrees of a long sequence, :func:`costgraph.options.context_degrees`).
    TP stays within a scale-up
    domain (``max_tp`` defaults to its size, at most 8 × 8). ``top``: rows shown, at most
    :data:`MAX_TOP`. A progress bar shows on stderr when the search takes over a second
    (:mod:`costgraph.export.progress`, through :func:`costgraph.results.progress`).
    ``efficiency``: a flat fraction of the peak for every kernel; None (default): the per-kernel
    time model of the preset's kernel table (:mod:`costgraph.training.kernel_time`), else 1/2.
    ``factors``: a calibration's multipliers of the step's parts (:mod:`costgraph.training.calibration`).
    ``overlap``: the communication overlap convention of every layout (:mod:`costgraph.training.overlap`).
    ``given``: the settings of :data:`costgraph.layout_options.GIVEN` (the fields declared ``given``), each passed to
    every layout as it is, never searched: ``cross_entropy`` (the loss's implementation: what it holds at the loss's
    peak and what its kernels move, :mod:`costgraph.training.cross_entropy`), ``link_rate`` (the bandwidth the
    collectives run at: NCCL's busbw by default, or the line rates), ``ep_dispatcher`` (the kernels of the EP dispatch
    and combine), ``attention_kernel`` (the flash core's kernel: fa2 under PyTorch's SDPA as torchtitan runs it),
    ``cp_comm_type`` (Megatron's ``--cp-comm-type``) and ``gemm_rate`` (the per-kernel model's GEMM rate); each
    defaults to its declaration's default (:mod:`costgraph.choices`).
    ``pipeline_layout``: Megatron's pipeline layout text (:mod:`costgraph.parallel.pipeline_layout`): only
    the ``(p, v)`` its stages allow, every row with it (screened with the even forms, confirmed exactly).
    ``allow_fp8`` (the FP8 policies, on a preset with an FP8 peak), ``allow_offload`` (optimizer and
    parameter offload), ``exhaustive`` (Megatron's recompute modules, method and layer counts; the EP
    overlap and node-limited routing of a MoE): the variants searched besides
    (:mod:`costgraph.training.plan_variants`), each value with its own closed forms.

    Raises
    ------
    CostgraphValueError
        ``top`` above :data:`MAX_TOP`; ``global_batch`` above :data:`MAX_GLOBAL_BATCH`."""
    from ..results import progress

    if global_batch > MAX_GLOBAL_BATCH:   # the grid's float64 columns: m = B/(b·d) was rounded (10²⁰ − 1 → 10²⁰)
        raise CostgraphValueError(f"--global-batch {global_batch:,}: plan searches up to {MAX_GLOBAL_BATCH:,} sequences "
                                  "(2^53, where its grid's counts stay exact)", hint="a smaller --global-batch")
    if top > MAX_TOP:
        raise CostgraphValueError(f"--top {top:,}: plan shows at most {MAX_TOP} layouts (each is derived exactly)",
                                  hint=f"--top {MAX_TOP} or fewer; --format json lists how many were considered")
    n = 5
    steps = n * (3 * 4 + 2 * 6) + n * 2 * 6 + 2 * 4 + 1 + 4 * 6 + 1 + top + MARGIN
    with progress("planning: deriving the closed forms", total=steps) as bar:
        out = _plan(model, values, bar, gpus=gpus, hardware=hardware, global_batch=global_batch, capacity=capacity,
                    efficiency=efficiency, attention=attention, policy=policy, optimizer=optimizer, max_tp=max_tp,
                    micro_batches=micro_batches, cp_options=cp_options, top=top, reserve=reserve, overlap=overlap,
                    reserve_of=reserve_of, given=given_settings(given), factors=factors, pipeline_layout=pipeline_layout,
                    allow=dict(allow_fp8=allow_fp8, allow_offload=allow_offload, exhaustive=exhaustive))
        bar.update(steps)
        return out


def _space(cg: CostGraph, fixed: dict, **kw) -> tuple[Space, object]:
    """The :class:`~costgraph.options.Space` of ``cg`` at ``fixed`` and the placement at symbolic degrees."""
    pl = placement(cg, Layout(t=T, p=P, c=C, e=EP, d=D, m=M))
    counts = [int(g.count.xreplace(fixed)) for g in pl.top]
    experts = tuple(int(g.count.xreplace(fixed)) for g in pl.experts.values())
    return Space(layers=sum(counts), stacks=len(counts), experts=experts, **kw), pl


def _plan(model, values, bar, *, gpus, hardware, global_batch, capacity, efficiency, attention, policy, optimizer,
          max_tp, micro_batches, cp_options, top, reserve, overlap=OVERLAP.default, factors=None, reserve_of=None,
          pipeline_layout=None, allow=None, given=None) -> Plan:
    given = given_settings(given or {})
    capacity = hardware.memory_bytes if capacity is None else capacity
    _one_node(hardware, gpus)
    max_tp = min(hardware.scale_up_domain, 64) if max_tp is None else max_tp
    cg: CostGraph = model.graph
    vals = {k: sympy.Integer(int(v)) for k, v in values.items()}
    b_sym = cg.dims["b"].symbol if "b" in cg.dims else None
    fixed = {k: v for k, v in vals.items() if k != b_sym}
    seq = int(fixed[cg.dims["s"].symbol]) if "s" in cg.dims and cg.dims["s"].symbol in fixed else 0
    space, pl = _space(cg, fixed, gpus=gpus, max_tp=max_tp, micro_batches=tuple(micro_batches),
                       cp=tuple(cp_options), seq=seq, attention=attention, overlap=overlap, **(allow or {}),
                       **space_facts(cg, fixed, hardware, gpus, attention))
    options = {o.field: tuple(o.domain(space)) for o in SEARCHED_OPTIONS}
    grid = Grid(cg, fixed, space, global_batch=global_batch, placement=pl, pipeline_layout=pipeline_layout)
    syms = [T, P, C, EP, D, M, V] + ([b_sym] if b_sym is not None else [])
    # the FP8 weight transpose TE keeps on the preset, as train resolves `auto` (training.fp8.on_hardware: shared on
    # Blackwell, no second FP8 copy of the weights); each confirmed row meets the preset the same way (plan_confirm)
    base = dict(t=T, c=C, e=EP, d=D, m=M, attention=attention, policy=policy, optimizer=optimizer, overlap=overlap,
                fp8_transpose=transpose_for(hardware), **given)   # the activations' precision: Layout.filled()
    derived: dict = {}   # the variants' forms, derived once (a second screen keeps more rows, not new forms)

    def derive(fields, opts, schedules):
        key = (repr(sorted(fields.items())), repr(sorted(opts.items())), tuple(schedules))
        if key not in derived:
            derived[key] = forms_of(cg, fixed, syms, {**base, **fields}, bar, hardware, efficiency, opts, schedules,
                                    factors)
        return derived[key]
    forms = derive({}, options, grid.schedules)
    screen = _Screen(grid, options, forms, derive, space, b_sym is not None, capacity=capacity - reserve, gpus=gpus,
                     peak=float(hardware.peak_flops_bf16), bar=bar)
    settings = dict(attention=attention, policy=policy, optimizer=optimizer, gpus=gpus, overlap=overlap,
                    pipeline_layout=pipeline_layout, **given)
    limit = top + MARGIN
    keep = 4 * limit + 16   # the fastest rows of each screened set that are ranked (all of them if needed)
    while True:
        candidates, least, pruned, refused = screen.run(keep)
        bar.advance(description="planning: confirming the fastest layouts exactly")
        walked = _Walked(candidates)
        usable = capacity - reserve if reserve_of is None else (lambda c: capacity - reserve_of(c))
        confirmed = confirm(model, vals, b_sym, walked, settings, hardware, efficiency, usable, limit,
                            bar, refused, _order, factors, budget=BUDGET)
        if not screen.truncated or walked.count <= keep:   # every row it walked is in the full ranking's order
            break
        # more rows of each set, not all of them: every fitting row of a large grid built as a candidate cost more
        # than the confirmation (DeepSeek-V3 on 256 GB200: 410,000 candidates, 3.5 s of a 26 s profile)
        keep = max(walked.count, keep) * 8
    shown_bounded = sum(1 for c in confirmed if c.screen is None)
    pruned[BOUND_SLOWER] = max(0, screen.bounded - shown_bounded)
    pruned["slower than the rows shown (screened, not derived exactly)"] = max(
        0, screen.fitting - screen.bounded - (len(confirmed) - shown_bounded))
    return Plan(confirmed[:top], screen.considered, refused, efficiency, capacity, reserve, len(grid.rows),
                None if confirmed else least, settings, searched(space), pruned)


class _Walked:
    """The ranked candidates (:class:`~costgraph.training.plan_rows.Rows`) as ``confirm`` walks them, counting how
    many it took (``count``)."""

    def __init__(self, candidates: Rows):
        self.candidates, self.count = candidates, 0

    def __iter__(self):
        for c in self.candidates:
            self.count += 1
            yield c

    def pool(self, deferred: list, lowest):
        """The candidates not walked yet (not counted), then ``deferred``, by their least step
        (:meth:`~costgraph.training.plan_rows.Rows.pool`)."""
        return self.candidates.pool(self.count, deferred, lowest)


class _Screen:
    """The screen of the grid under the base forms and every variant (:mod:`costgraph.training.plan_variants`):
    :meth:`run` ranks, of each screened set, the ``keep`` fastest rows that fit (all rows with ``keep`` None)
    and counts what it refused, pruned and considered afresh each time. ``fitting``: the rows that fit
    (all of them, ranked or not); ``truncated``: whether some set had more than ``keep``."""

    def __init__(self, grid, options, forms, derive, space, with_b, *, capacity, gpus, peak, bar):
        self.grid, self.options, self.forms, self.derive, self.space = grid, options, forms, derive, space
        self.kw = dict(with_b=with_b, capacity=capacity, gpus=gpus, peak=peak)
        self.bar, self.base_refused = bar, dict(grid.refused)
        self.considered = self.fitting = self.bounded = 0
        self.truncated = False
        self.screened: dict = {}   # the screen's arrays per (forms, grid), for a second run with a larger keep

    def run(self, keep):
        grid, refused = self.grid, dict(self.base_refused)
        self.fitting, self.bounded, self.truncated = 0, 0, False
        n_options = _combinations(self.options)
        self.considered = sum(refused.values()) + (len(grid.rows) + sum(grid.pruned.values())) * n_options
        self.bar.advance(description="planning: evaluating the layouts")
        candidates, least, pruned = self._evaluate(self.forms, grid, refused, keep)
        pruned.update({why: n * n_options for why, n in grid.pruned.items()})

        def evaluate(forms, sub):
            self.considered += len(sub.rows) * _combinations(forms.options)
            return self._evaluate(forms, sub, refused, keep)
        self.bar.advance(description="planning: the variants (plan_variants)")
        more, low, pruned_more = search_variants(self.space, grid, self.options, self.derive, evaluate, refused)
        candidates.extend(more)
        least = low if least is None or (low is not None and low.memory_bytes < least.memory_bytes) else least
        for k, n in pruned_more.items():
            pruned[k] = pruned.get(k, 0) + n
        candidates.sort()   # by _order, as arrays (plan_rows)
        return candidates, least, pruned, refused

    def _evaluate(self, forms, grid, refused, keep):
        stats = {}
        out = _evaluate(forms, grid, self.kw["with_b"], refused, capacity=self.kw["capacity"], gpus=self.kw["gpus"],
                        peak=self.kw["peak"], keep=keep, stats=stats, memo=self.screened)
        self.fitting += stats.get("fitting", 0)
        self.bounded += stats.get("bounded", 0)
        self.truncated |= stats.get("truncated", False)
        return out


#: the screen's forms by model and settings, across ``plan`` calls: (graph, forms) by key; kept small
_FORMS: dict = {}
_FORMS_SIZE = 8


def forms_of(cg, fixed, syms, base, bar, hardware, efficiency, opts, schedules, factors) -> Forms:
    """The :class:`~costgraph.training.plan_forms.Forms` of ``cg`` at ``fixed`` (the sizes) for the layout
    options ``base``, the searched values ``opts`` and ``schedules`` on ``hardware``: derived once per
    process (a second ``plan`` of the same model and settings on another device count or batch derives
    nothing again; the forms do not depend on the device count, the batch or the grid), ``bar`` the
    calling plan's progress bar."""
    key = (id(cg), tuple(sorted((str(k), int(v)) for k, v in fixed.items())), tuple(str(x) for x in syms),
           repr(sorted(base.items())), repr(hardware), str(efficiency), repr(sorted(opts.items())), tuple(schedules),
           repr(factors))
    got = _FORMS.get(key)
    if got is None or got[0] is not cg:
        if len(_FORMS) >= _FORMS_SIZE:
            _FORMS.pop(next(iter(_FORMS)))
        got = _FORMS[key] = (cg, Forms(cg, fixed, syms, base, bar, hardware, efficiency, opts, schedules, factors))
    got[1].bar = bar
    return got[1]


def _combinations(options: dict) -> int:
    n = 1
    for vs in options.values():
        n *= len(vs)
    return n


def _order(c: Candidate) -> tuple:
    """Fastest first; at equal time the least memory, then the simpler settings."""
    return (c.step_seconds, c.memory_bytes, c.zero, RECOMPUTE.index(c.recompute), c.sp, c.schedule != "1f1b",
            c.virtual_stages,
            c.tp, c.pp, c.cp, c.ep, c.first_stage_layers or 0, c.last_stage_layers or 0, c.account_embedding,
            c.account_loss, len(c.options), repr(sorted(c.options.items())))


def _evaluate(forms: Forms, grid: Grid, with_b: bool, refused: dict, *, capacity, gpus,
              peak: float, keep: int | None = None, stats: dict | None = None,
              memo: dict | None = None) -> tuple[list[Candidate], Candidate | None, dict]:
    """Every layout of ``grid`` under every searched option that fits ``capacity`` (the device
    memory less the reserve): its memory (most-loaded stage), step time and MFU; the layout of
    least memory (whether it fits or not); and the options pruned because they change nothing.
    ``keep``: of each option combination, only the rows no slower than its ``keep``-th fastest
    that fits (None: all; every row of the ``keep`` first by :func:`_order` is among them);
    ``stats`` (when given) gets ``fitting`` (the rows that fit) and ``truncated`` (some were left).
    ``memo``: the screen's arrays (:func:`~costgraph.training.plan_forms.screen`) by ``(forms, grid)``, kept
    for a second call with another ``keep`` (the planner's second run: DeepSeek-V3 on 256 GB200s, ~0.3 s
    of CPU); it holds both, so their ids are not reused while it lives."""
    rows = grid.rows
    candidates, least = Rows(), None
    pruned = {"option changes nothing (SP without TP, ZeRO without a group)": 0}
    stats = {} if stats is None else stats
    stats.setdefault("fitting", 0)
    stats.setdefault("truncated", False)
    if len(rows) == 0:
        return candidates, least, pruned
    experts = bool(placement(forms.cg, Layout()).experts)
    bounded = uneven(grid)   # screened with lower bounds (plan_forms.uneven_bounds)
    stats.setdefault("bounded", 0)
    got = None if memo is None else memo.get((id(forms), id(grid)))
    if got is None:
        got = (forms, grid, list(screen(forms, rows, with_b, experts, bounded)))
        if memo is not None:
            memo[(id(forms), id(grid))] = got
    for (z, r, sp), mem, step, model_it, valid, (low_mem, low_step) in got[2]:
        pruned["option changes nothing (SP without TP, ZeRO without a group)"] += int(np.count_nonzero(~valid))
        fits = valid & (low_mem <= capacity)   # by the memory's lower bound: never drops one that fits
        likely = fits & (mem <= capacity)      # by the estimate: the order of the confirmation's first pass
        refused["out of memory"] += int(np.count_nonzero(valid & ~fits & ~bounded))
        refused[BOUND_OOM] = refused.get(BOUND_OOM, 0) + int(np.count_nonzero(valid & ~fits & bounded))
        idx = np.nonzero(fits)[0]
        stats["fitting"] += len(idx)
        stats["bounded"] += int(np.count_nonzero(fits & bounded))
        if keep is not None and len(idx) > keep:
            limit = np.partition(step[idx], keep - 1)[keep - 1]
            idx = idx[(step[idx] <= limit) | (low_step[idx] <= limit)]
            stats["truncated"] = True
        # the rows that fit, as arrays (plan_rows.Batch: each built as a Candidate when the confirmation reads it)
        mfu = model_it[idx] / (step[idx] * gpus * peak)
        candidates.add(Batch(grid, forms, (z, r, sp), idx, mem[idx], step[idx], mfu, low_step[idx], bounded[idx],
                             likely[idx], _candidate))
        low = np.nonzero(valid)[0]
        if len(low) and (least is None or mem[low].min() < least.memory_bytes):
            # the least memory of the rows seen (a fitting one first, as the walk in the screen's order meets them)
            i = int(idx[np.argmin(mem[idx])]) if len(idx) and mem[idx].min() <= mem[low].min() else \
                int(low[np.argmin(mem[low])])
            c = _candidate(grid, i, z, r, sp, float(mem[i]), float(step[i]),
                           float(model_it[i] / (step[i] * gpus * peak)))
            c.screen = None if bounded[i] else (forms, 0 if c.pp == 1 else int(grid.rows[i][9]) + 1)
            c.bound, c.likely = (float(low_step[i]) if bounded[i] else None), bool(likely[i])
            if least is None or c.memory_bytes < least.memory_bytes:
                least = c
    return candidates, least, pruned


def _candidate(grid: Grid, i: int, z, r, sp, mem: float, step: float, mfu: float) -> Candidate:
    t, p, c, e, d, b, m, v, k, si = (int(x) for x in grid.rows[i])
    first, last, emb, loss, *text = grid.splits[k]   # a chunk layout text (options.chunk_layouts) as a variant field
    return Candidate(t, p, d, c, e, z, r, sp, b, m, mem, step, mfu, v, grid.schedules[si], first, last, emb, loss,
                     options={"pipeline_layout": text[0]} if text else {})


def _one_node(hardware, gpus: int) -> None:
    """A preset whose ``scale_out_bandwidth`` is 0 (a user's table for a one-node machine) plans no
    more devices than one scale-up domain holds: past it some group crosses nodes over no link."""
    from ..parallel.ranks import no_zero_link, one_domain

    if gpus > one_domain(hardware):
        no_zero_link((0, sympy.Integer(hardware.scale_out_bandwidth)), hardware, gpus)


def step_rate_of(hardware, policy: str, efficiency):
    """The :class:`~costgraph.training.steptime.Rate` the planner and ``train`` share: None for a flat
    ``efficiency`` (``step_time``'s own), the per-kernel rate of the preset's kernel table when
    ``efficiency`` is None (:func:`costgraph.training.steptime.kernel_rate`), else None (flat 1/2)."""
    if efficiency is not None:
        return None
    from .steptime import default_peaks, kernel_rate

    return kernel_rate(hardware, default_peaks(hardware, policy))
