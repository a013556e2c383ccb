"""The layout planner: which parallel layouts fit, and which is fastest.

``plan`` enumerates layouts — tensor ``t``, pipeline ``p``, context ``c`` and
expert ``e`` parallelism, data parallelism ``d = gpus/(t·p·c)``, the
micro-batch ``b`` (with ``m = B/(b·d)`` micro-batches for a global batch of
``B`` sequences), interleaved virtual stages ``v`` (``v`` dividing the layers of
a stage) — and for each the options of :data:`SEARCHED` (ZeRO stage,
recomputation, sequence parallelism); keeps those whose most-loaded device fits
the device memory less a reserve (:data:`costgraph.choices.DEFAULT_RESERVE`),
and ranks them by step time.

Two passes:

1. **Screen.** The SymPy expressions stay the single source: for each ZeRO
   stage the model states, for each (recomputation, SP, schedule) the
   activations and the step time's parts are derived once with the degrees as
   symbols (:func:`costgraph.training.memory.training_memory`,
   :func:`costgraph.training.steptime.step_time`), compiled with
   :func:`costgraph.numbers.evaluator.vectorized`, and evaluated over every
   numeric layout at once (float64).
2. **Confirm.** The fastest screened layouts are derived again exactly, one
   layout at a time, by the functions ``costgraph train`` calls on that layout
   (:func:`exact_figures`: the same placement, memory, communication and step
   time), and only those are reported, ranked by their exact figures: a
   reported layout equals ``train`` on it (tests/test_planner_fidelity.py).

Validity (each reason counted when a layout is refused): ``d`` whole; every
axis tensor parallelism splits (heads, K/V heads, widths, vocabulary) divisible
by ``t``; the layers divisible by ``p`` (one stack) or at least ``p`` (several); ``s`` divisible by
``c``; experts divisible by ``e`` and ``e`` dividing ``d·c·t``; the global
batch divisible by ``b·d``; the memory of the most-loaded device at most the
capacity less the reserve. Options that change nothing are not offered (no
duplicate rows): ZeRO when the group it shards over (DP × CP, and the experts'
DP group) is one device — it is offered at ``d = 1`` when ``c > 1`` (FSDP over the
CP ranks, as torchtitan's ``dp_shard_cp`` mesh and Megatron's DP × CP optimizer
group); ``selective`` recomputation under flash attention (the kernel recomputes
the same core); SP without TP. Interleaving (Megatron-LM's
``--num-layers-per-virtual-pipeline-stage``) needs ``m`` a multiple of ``p``
(schedules.py: the micro-batch group of a virtual stage is ``p``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import sympy

from ..choices import ATTENTION, DEFAULT_OPTIMIZER, DEFAULT_POLICY, OVERLAP, RECOMPUTE_SEARCHED, ZERO_STAGE
from ..numbers.evaluator import vectorized
from ..engine.graph import CostGraph
from ..engine.symbols import as_expr, dim
from ..parallel.layout import Layout
from ..parallel.placement import placement
from .compute import training_flops
from .memory import training_memory
from .validity import split_axes

T, P, C, EP, D, M, V = (dim(n) for n in ("N_t", "N_p", "N_c", "N_e", "N_d", "N_m", "N_v"))
RECOMPUTE = RECOMPUTE_SEARCHED   # not the named conventions (choices.RECOMPUTE's others)
ZERO = ZERO_STAGE.values

#: The training options the search tries on every layout of degrees, each ``(Layout field, values)``;
#: :class:`_Forms` derives the closed forms once per value (the states per ``zero``, the activations
#: and step time per the others). The pipeline schedule is a grid column (``v``: 1 is 1F1B, more
#: is interleaved). New options (schedules, FP8 policies, offload, recompute modules: issue 16
#: items 1–8) are added here, with the forms they change in :class:`_Forms`.
SEARCHED = (("zero", ZERO), ("recompute", RECOMPUTE), ("sp", (False, True)))
#: the grid's columns
COLUMNS = ("t", "p", "c", "e", "d", "b", "m", "v")
#: how many screened layouts beyond ``top`` are confirmed exactly (the screen's order can differ in ties)
MARGIN = 5


@dataclass
class Candidate:
    """One layout and its figures: ``memory_bytes`` (the most-loaded device, an exact int
    once confirmed), ``step_seconds`` and ``mfu`` (floats)."""

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
    memory_bytes: float
    step_seconds: float
    mfu: float
    virtual_stages: int = 1

    def as_dict(self) -> dict:
        return dict(self.__dict__)

    @property
    def schedule(self) -> str:
        """``interleaved`` with virtual stages, else ``1f1b``."""
        return "interleaved" if self.virtual_stages > 1 else "1f1b"

    def key(self) -> tuple:
        """The degrees and figures: two candidates with the same key are one row."""
        return (self.tp, self.pp, self.dp, self.cp, self.ep, self.micro_batch, self.micro_batches,
                self.virtual_stages, round(self.memory_bytes), round(self.step_seconds, 12))


@dataclass
class Plan:
    """The ranked layouts that fit (``layouts``, fastest first, confirmed exactly), how many
    were considered, how many were refused for each reason, ``divisible`` (layouts of degrees
    every divisibility rule allows: 0 means no layout divides evenly) and ``least`` (the
    layout needing the least memory, screened, when none fits)."""

    layouts: list[Candidate]
    considered: int
    refused: dict[str, int]
    efficiency: sympy.Rational
    capacity: int
    reserve: int = 0
    divisible: int = 0
    least: Candidate | None = None
    settings: dict = field(default_factory=dict)


def _powers_of_two(limit: int) -> list[int]:
    out, x = [], 1
    while x <= limit:
        out.append(x)
        x *= 2
    return out


def _divisors(n: int, limit: int) -> list[int]:
    """Divisors of ``n`` up to ``limit`` (by factorization: fast for any n)."""
    return [int(k) for k in sympy.divisors(n) if k <= limit]


def plan(model, values: dict, *, gpus: int, hardware, global_batch: int, capacity: int | None = None,
         efficiency=None, attention: str = ATTENTION.default, policy: str = DEFAULT_POLICY,
         optimizer: str = DEFAULT_OPTIMIZER, max_tp: int | None = None, micro_batches=(1, 2, 4, 8, 16, 32),
         cp_options=(1, 2, 4, 8), top: int = 10, reserve: int = 0, factors=None,
         overlap: str = OVERLAP.default) -> Plan:
    """Rank the layouts of ``model`` on ``gpus`` devices of a ``hardware``
    preset (:mod:`costgraph.hardware`; ``capacity`` defaults to its memory; ``reserve``:
    bytes kept free on each device) for a global batch of ``global_batch`` sequences (see
    the module docstring). ``values``: the model's dimension values (symbol → int; ``b``
    is replaced by each candidate micro-batch). TP stays within a scale-up
    domain (``max_tp`` defaults to its size, at most 8 × 8). A progress bar
    shows on stderr when the search takes over a second (:mod:`costgraph.export.progress`).
    ``efficiency``: a flat fraction of the peak for every kernel; None (default): the per-kernel
    time model of the preset's kernel table (:mod:`costgraph.training.kernel_time`), else 1/2.
    ``factors``: a calibration's multipliers of the step's parts (:mod:`costgraph.training.calibration`).
    ``overlap``: the communication overlap convention of every layout (:mod:`costgraph.training.overlap`)."""
    from ..export.progress import progress

    # steps: the closed forms derived (memory, step time), the option evaluations, the confirmations
    n = len(_PIPES)
    steps = n * (3 * len(ZERO) + 2 * len(RECOMPUTE)) + n * 2 * len(RECOMPUTE) + 2 * len(ZERO) + 1 \
        + 2 * len(ZERO) * len(RECOMPUTE) + 1 + top + MARGIN
    with progress("planning: deriving the closed forms", total=steps) as bar:
        out = _plan(model, values, bar, gpus=gpus, hardware=hardware, global_batch=global_batch, capacity=capacity,
                    efficiency=efficiency, attention=attention, policy=policy, optimizer=optimizer, max_tp=max_tp,
                    micro_batches=micro_batches, cp_options=cp_options, top=top, reserve=reserve, overlap=overlap,
                    factors=factors)
        bar.update(steps)
        return out


def _plan(model, values, bar, *, gpus, hardware, global_batch, capacity, efficiency, attention, policy, optimizer,
          max_tp, micro_batches, cp_options, top, reserve, overlap, factors=None) -> Plan:
    capacity = hardware.memory_bytes if capacity is None else capacity
    max_tp = min(hardware.scale_up_domain, 64) if max_tp is None else max_tp
    cg: CostGraph = model.graph
    vals = {k: sympy.Integer(int(v)) for k, v in values.items()}
    b_sym = cg.dims["b"].symbol if "b" in cg.dims else None
    fixed = {k: v for k, v in vals.items() if k != b_sym}
    refused = dict.fromkeys(REFUSALS, 0)
    grid = _grid(cg, fixed, refused, gpus=gpus, global_batch=global_batch, max_tp=max_tp,
                 micro_batches=micro_batches, cp_options=cp_options)
    considered = sum(refused.values()) + len(grid) * len(ZERO) * len(RECOMPUTE) * 2
    syms = [T, P, C, EP, D, M, V] + ([b_sym] if b_sym is not None else [])
    base = dict(t=T, c=C, e=EP, d=D, m=M, attention=attention, policy=policy, optimizer=optimizer, overlap=overlap,
                precision="fp32" if policy == "fp32" else "bf16")   # as costgraph train's layout options
    forms = _Forms(cg, fixed, syms, base, bar, hardware, efficiency, factors)
    bar.advance(description="planning: evaluating the layouts")
    usable = capacity - reserve
    candidates, least = _evaluate(forms, grid, b_sym is not None, refused, capacity=usable, gpus=gpus,
                                  peak=float(hardware.peak_flops_bf16), attention=attention)
    candidates.sort(key=_order)
    bar.advance(description="planning: confirming the fastest layouts exactly")
    settings = dict(attention=attention, policy=policy, optimizer=optimizer, gpus=gpus, overlap=overlap)
    confirmed = _confirm(model, vals, b_sym, candidates, settings, hardware, efficiency, usable, top + MARGIN, bar,
                         factors)
    return Plan(confirmed[:top], considered, refused, efficiency, capacity, reserve, len(grid),
                None if confirmed else least, settings)


def _order(c: Candidate) -> tuple:
    """Fastest first; at equal time the least memory, then the simpler settings."""
    return (c.step_seconds, c.memory_bytes, c.zero, RECOMPUTE.index(c.recompute), c.sp, c.virtual_stages,
            c.tp, c.pp, c.cp, c.ep)


REFUSALS = ("d not whole", "t does not divide a split axis", "p does not divide the layers", "c does not divide s",
            "e does not divide the experts", "global batch not a multiple of b·d", "out of memory")


def layout_of(c: Candidate, settings: dict) -> Layout:
    """The :class:`~costgraph.parallel.layout.Layout` ``costgraph train`` builds for ``c``'s
    options (:func:`costgraph.commands._analysis.train_layout`); ``settings``: ``attention``,
    ``policy``, ``optimizer``, ``gpus``."""
    pol = settings["policy"]
    return Layout(t=c.tp, p=c.pp, c=c.cp, e=c.ep, gpus=settings["gpus"], sp=c.sp, zero=c.zero, m=c.micro_batches,
                  schedule=c.schedule, v=c.virtual_stages, recompute=c.recompute, attention=settings["attention"],
                  policy=pol, optimizer=settings["optimizer"], precision="fp32" if pol == "fp32" else "bf16",
                  overlap=settings.get("overlap", OVERLAP.default))


def step_rate_of(hardware, policy: str, efficiency):
    """The :class:`~costgraph.training.steptime.Rate` the planner and ``train`` share: None for a flat
    ``efficiency`` (``step_time``'s own), the per-kernel rate of the preset's kernel table when
    ``efficiency`` is None (:func:`costgraph.training.rate.kernel_rate`), else None (flat 1/2)."""
    if efficiency is not None:
        return None
    from .steptime import default_peaks, kernel_rate

    return kernel_rate(hardware, default_peaks(hardware, policy))


def exact_figures(model, layout: Layout, values: dict, hardware, efficiency, factors=None) -> tuple[int, sympy.Expr]:
    """``(bytes of the most-loaded device, step seconds)`` of ``layout`` at ``values``, exact,
    by the calls :func:`costgraph.training.api.train` makes: the memory of
    :func:`~costgraph.training.memory.training_memory` (its most-loaded stage), the step time
    of :func:`~costgraph.training.steptime.step_time` over
    :func:`~costgraph.parallel.communication.communication` of the filled layout."""
    from ..parallel.communication import communication
    from .steptime import step_time

    mem = training_memory(model.graph, layout)
    total = mem.most_loaded(values).memory["total"].xreplace(values)
    cols = communication(model.graph, layout.filled())
    step = step_time(model.graph, layout, hardware, efficiency=efficiency, collectives=cols, factors=factors)["total"]
    return int(sympy.ceiling(total)), step.xreplace(values)


def _confirm(model, vals, b_sym, candidates, settings, hardware, efficiency, usable, limit, bar,
             factors=None) -> list[Candidate]:
    """The first ``limit`` screened candidates that fit when derived exactly, their figures
    replaced by :func:`exact_figures`' and ranked again; a duplicate row is dropped."""
    out, seen = [], set()
    peak, gpus = float(hardware.peak_flops_bf16), settings["gpus"]
    for c in candidates:
        if len(out) >= limit:
            break
        at = {**vals, b_sym: sympy.Integer(c.micro_batch)} if b_sym is not None else vals
        mem, step = exact_figures(model, layout_of(c, settings), at, hardware, efficiency, factors)
        bar.advance()
        if mem > usable:
            continue
        model_flops = c.mfu * c.step_seconds * gpus * peak
        exact = Candidate(**{**c.as_dict(), "memory_bytes": mem, "step_seconds": float(step),
                             "mfu": model_flops / (float(step) * gpus * peak)})
        if exact.key() in seen:
            continue
        seen.add(exact.key())
        out.append(exact)
    out.sort(key=_order)
    return out


def _grid(cg: CostGraph, fixed: dict, refused: dict, *, gpus, global_batch, max_tp, micro_batches,
          cp_options) -> np.ndarray:
    """The numeric layouts that pass the validity rules (module docstring), one
    row ``(t, p, c, e, d, b, m, v)`` each (:data:`COLUMNS`); each refusal counted in ``refused``.
    The axes TP splits and the routed experts are read from the placement
    at symbolic degrees (:mod:`costgraph.parallel.placement`). Interleaved rows (``v > 1``) for
    a single stack whose layers ``p·v`` divides, with ``m`` a multiple of ``p``."""
    pl = placement(cg, Layout(t=T, p=P, c=C, e=EP, d=D, m=M))
    counts = [int(g.count.xreplace(fixed)) for g in pl.top]
    seq = int(cg.dim_expr("s").xreplace(fixed)) if "s" in cg.dims else 1
    split_sizes = set()   # axes TP splits, as numbers: each must divide by t (costgraph.training.validity)
    for _, size in split_axes(cg, pl):
        n = as_expr(size).xreplace(fixed)
        if n.is_Integer:
            split_sizes.add(int(n))
    n_experts = [int(g.count.xreplace(fixed)) for g in pl.experts.values()]
    rows = []
    e_options = [1] + sorted({k for n in n_experts for k in _divisors(n, gpus) if k > 1}) if pl.experts else [1]
    for t, p, c, e, b in itertools.product(_powers_of_two(min(max_tp, gpus)), _divisors(gpus, gpus),
                                           cp_options, e_options, micro_batches):
        d = gpus // (t * p * c)
        why = ("d not whole" if gpus % (t * p * c) else
               "t does not divide a split axis" if any(n % t for n in split_sizes) else
               "p does not divide the layers" if (len(counts) == 1 and counts[0] % p) or sum(counts) < p else
               "c does not divide s" if seq % c else
               "e does not divide the experts" if e > 1 and (any(n % e for n in n_experts) or (d * c * t) % e) else
               "global batch not a multiple of b·d" if global_batch % (b * d) else None)
        if why is not None:
            refused[why] += 1
            continue
        m = global_batch // (b * d)
        rows.append((t, p, c, e, d, b, m, 1))
        if p > 1 and len(counts) == 1 and m % p == 0:
            rows += [(t, p, c, e, d, b, m, v) for v in _divisors(counts[0] // p, counts[0]) if v > 1]
    return np.array(rows, dtype=np.float64).reshape(-1, len(COLUMNS)) if rows else np.zeros((0, len(COLUMNS)))


class _Forms:
    """The closed forms, derived once with the degrees as symbols and compiled:
    per ZeRO stage the model states, per (recomputation, SP) the activations,
    the step time's parts and the model FLOPs; each for ``p = 1``, a symbolic
    ``p`` (1F1B) and a symbolic ``p`` interleaved over ``v`` virtual stages, as in the memory forms."""

    def __init__(self, cg, fixed, syms, base, bar, hardware, efficiency, factors=None):
        from .steptime import step_time

        self.cg, self.fixed, self.syms, self.base, self.bar = cg, fixed, syms, base, bar
        self._exprs: list = []
        self.states = {z: self._stage_totals(dict(zero=z), ("weights", "gradients", "optimizer"))
                       for z in ZERO}
        self.acts = {(r, sp): self._stage_totals(dict(recompute=r, sp=sp), ("activations",))[0]
                     for r in RECOMPUTE for sp in (False, True)}

        # The step's parts (costgraph.training.steptime, costgraph.training.overlap): compute + bubble, the
        # forward/backward compute and the overlap rules of TP/CP/EP/PP depend on (recompute, SP), those of
        # DP/ZeRO on the ZeRO stage: derived apart, each rule's forms compiled; combined per layout as
        # busy + Σ_kind exposed(forward, backward) with numpy's maximum (_exposed).
        flops: dict = {}   # training FLOPs depend on p and the recomputation, not on SP or the ZeRO stage

        def flops_of(layout):
            key = (layout.p, layout.v, layout.recompute)
            if key not in flops:
                flops[key] = training_flops(cg, layout.filled())
            return flops[key]

        def parts(kw, schedules=3):
            bar.advance(schedules)
            layouts = [Layout(**{**base, **kw, **pipe}) for pipe in _PIPES[:schedules]]
            return [step_time(cg, L, hardware, efficiency=efficiency, flops=flops_of(L), with_total=False,
                              factors=factors)
                    for L in layouts]

        def rules(x, keep):
            return [(o, [self.compiled(sympy.sympify(e)) for e in o.forms()])
                    for k, o in x["overlap"].kinds.items() if keep(k)]
        self.busy, self.compute, self.exposed, self.overlapped = {}, {}, {}, {}
        for r in RECOMPUTE:
            for sp in (False, True):
                st = parts({"recompute": r, "sp": sp})
                self.busy[(r, sp)] = [self.compiled(x["compute"] + x["bubble"]) for x in st]
                self.compute[(r, sp)] = [(self.compiled(x["overlap"].forward), self.compiled(x["overlap"].backward))
                                         for x in st]
                self.exposed[(r, sp)] = [rules(x, lambda k: k not in _DP_KINDS) for x in st]
        for z in ZERO:
            self.overlapped[z] = [rules(x, lambda k: k in _DP_KINDS) for x in parts({"zero": z}, 2)]
        self.overlapped = {z: o + [o[1]] for z, o in self.overlapped.items()}   # DP traffic: as 1F1B's
        self.model_flops = self.compiled(flops_of(Layout(p=P, **base))["model_per_iteration"])
        # every form in one compiled function: the parts the forms share are evaluated once per layout
        self._f = vectorized(self._exprs, self.syms)

    def compiled(self, expr) -> int:
        """Register ``expr`` with the model's sizes fixed; its index in :meth:`evaluate`'s arrays."""
        self._exprs.append(expr.xreplace(self.fixed))
        return len(self._exprs) - 1

    def evaluate(self, args) -> list:
        """Every registered form over the grid's columns (the degrees, and ``b``)."""
        return self._f(*args)

    def _stage_totals(self, layout_kw, keys):
        """Per key: for each of :data:`_PIPES`, each stage's form (memory derived once per layout)."""
        out = [[] for _ in keys]
        for pipe in _PIPES:
            res = training_memory(self.cg, Layout(**{**self.base, **layout_kw, **pipe}))
            self.bar.advance(len(keys))
            for i, key in enumerate(keys):
                out[i].append([self.compiled(st.memory[key]) for st in res.stages])
        return out


#: the collective kinds whose rules depend on the ZeRO stage (derived per stage, the others per (recompute, SP))
_DP_KINDS = ("dp_grads", "zero_reduce_scatter", "zero_all_gather", "fsdp")
#: the pipelines the forms are derived for: none, 1F1B over symbolic p, interleaved over symbolic p and v
_PIPES = (dict(p=1), dict(p=P), dict(p=P, schedule="interleaved", v=V))


def _shards(grid: np.ndarray, experts: bool) -> np.ndarray:
    """Whether ZeRO has a group to shard over: DP × CP, or (routed experts) the experts' DP group."""
    dense = grid[:, 4] * grid[:, 2]
    return (dense > 1) | (experts & (dense * grid[:, 0] > grid[:, 3]))


def _exposed(forms: _Forms, V_, which, r, sp, z, n) -> np.ndarray:
    """Σ over the collective kinds of their exposed seconds (:meth:`KindOverlap.exposed` with numpy's
    maximum), each row under its pipeline's forms: TP/CP/EP/PP per (recompute, SP), DP/ZeRO per stage."""
    out = np.zeros(n)
    with np.errstate(all="ignore"):   # a row's value is taken from its own pipeline's forms only
        for w in range(len(_PIPES)):
            fwd, bwd = (np.broadcast_to(V_[k], (n,)) for k in forms.compute[(r, sp)][w])
            total = np.zeros(n)
            for o, idx in forms.exposed[(r, sp)][w] + forms.overlapped[z][w]:
                total = total + o.rebuilt([np.broadcast_to(V_[k], (n,)) for k in idx]).exposed(fwd, bwd, np.maximum)
            out = np.where(which == w, total, out)
    return out


def _evaluate(forms: _Forms, grid: np.ndarray, with_b: bool, refused: dict, *, capacity, gpus,
              peak: float, attention: str) -> tuple[list[Candidate], Candidate | None]:
    """Every layout of ``grid`` under every option of :data:`SEARCHED` that fits
    ``capacity`` (the device memory less the reserve): its memory (most-loaded stage), step
    time and MFU; and the layout of least memory (whether it fits or not)."""
    args = [grid[:, k] for k in range(len(COLUMNS)) if COLUMNS[k] != "b"] + ([grid[:, 5]] if with_b else [])
    which = np.where(grid[:, 1] == 1, 0, np.where(grid[:, 7] == 1, 1, 2))   # the _PIPES form of each row
    candidates, least = [], None
    V_ = forms.evaluate(args) if len(grid) else []
    model_it = V_[forms.model_flops] if len(grid) else np.zeros(0)
    experts = bool(forms.cg is not None and placement(forms.cg, Layout()).experts)
    shards = _shards(grid, experts) if len(grid) else np.zeros(0, dtype=bool)

    def pick(forms_of):
        return np.choose(which, [np.broadcast_to(V_[k], (len(grid),)) for k in forms_of])

    for z, r, sp in itertools.product(*(values for _, values in SEARCHED)):
        forms.bar.advance()
        if len(grid) == 0:
            continue
        if sp and not np.any(grid[:, 0] > 1) or (r == "selective" and attention == "flash"):
            continue   # SP needs TP; flash recomputes the attention core already: selective is none
        mem = np.zeros(len(grid))
        for w in range(len(_PIPES)):
            per_stage = None
            for k in range(len(forms.states[z][0][w])):
                tot = sum(V_[forms.states[z][q][w][k]] for q in range(3)) + V_[forms.acts[(r, sp)][w][k]]
                per_stage = tot if per_stage is None else np.maximum(per_stage, tot)
            mem = np.where(which == w, per_stage, mem)
        valid = ((grid[:, 0] > 1) | (not sp)) & (shards | (z == 0))
        step = pick(forms.busy[(r, sp)]) + _exposed(forms, V_, which, r, sp, z, len(grid))
        fits = valid & (mem <= capacity)
        refused["out of memory"] += int(np.count_nonzero(valid & ~fits))
        rows = [int(i) for i in np.nonzero(fits)[0]]
        low = np.nonzero(valid)[0]
        if len(low) and (least is None or mem[low].min() < least.memory_bytes):
            rows.append(int(low[np.argmin(mem[low])]))
        for i in dict.fromkeys(rows):
            c = Candidate(int(grid[i, 0]), int(grid[i, 1]), int(grid[i, 4]), int(grid[i, 2]), int(grid[i, 3]), z, r,
                          sp, int(grid[i, 5]), int(grid[i, 6]), float(mem[i]), float(step[i]),
                          float(model_it[i] / (step[i] * gpus * peak)), int(grid[i, 7]))
            if fits[i]:
                candidates.append(c)
            if least is None or c.memory_bytes < least.memory_bytes:
                least = c
    return candidates, least
