"""The layout planner: which parallel layouts fit, and which is fastest.

``plan`` enumerates layouts — tensor ``t``, pipeline ``p``, context ``c`` and
expert ``e`` parallelism, data parallelism ``d = gpus/(t·p·c)``, ZeRO stage,
recomputation, sequence parallelism and the micro-batch ``b`` (with ``m =
B/(b·d)`` micro-batches for a global batch of ``B`` sequences) — keeps those
whose most-loaded device fits the device memory, and ranks them by step time.

The SymPy expressions stay the single source: for each ZeRO stage the model
states, for each (recomputation, SP) the activations, and for each
recomputation the hardware FLOPs are derived once with the degrees as symbols
(:func:`costgraph.training.memory.training_memory`,
:func:`costgraph.training.compute.training_flops`), compiled with
:func:`costgraph.numbers.evaluator.vectorized`, and evaluated over every numeric
layout at once (float64; the chosen layouts are re-derived exactly by
``costgraph train``).

Step time: :func:`costgraph.training.steptime.step_time` — compute at an
assumed fraction of the peak, the pipeline bubble, and the exposed TP, CP, EP
and pipeline communication on the preset's links (DP/ZeRO overlapped).

Validity (each reason counted when a layout is refused): ``d`` whole; every
axis tensor parallelism splits (heads, K/V heads, widths, vocabulary) divisible
by ``t``; the layers divisible by ``p`` (one stack) or at least ``p`` (several); ``s`` divisible by
``c``; experts divisible by ``e`` and ``e`` dividing ``d·c·t``; the global
batch divisible by ``b·d``; the memory of the most-loaded device at most the
capacity.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import sympy


from ..choices import ATTENTION, DEFAULT_OPTIMIZER, DEFAULT_POLICY, RECOMPUTE_SEARCHED, ZERO_STAGE
from ..numbers.evaluator import vectorized
from ..engine.graph import CostGraph
from ..engine.symbols import as_expr, dim
from ..parallel.layout import Layout
from ..parallel.placement import placement
from .compute import training_flops
from .memory import training_memory
from .validity import split_axes

T, P, C, EP, D, M = (dim(n) for n in ("N_t", "N_p", "N_c", "N_e", "N_d", "N_m"))
RECOMPUTE = RECOMPUTE_SEARCHED   # not the named conventions (choices.RECOMPUTE's others)
ZERO = ZERO_STAGE.values


@dataclass
class Candidate:
    """One layout and its figures (floats, from the compiled closed forms)."""

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

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Plan:
    """The ranked layouts that fit (``layouts``, fastest first), how many were
    considered, and how many were refused for each reason."""

    layouts: list[Candidate]
    considered: int
    refused: dict[str, int]
    efficiency: sympy.Rational
    capacity: int


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
         efficiency=sympy.Rational(1, 2), attention: str = ATTENTION.default, policy: str = DEFAULT_POLICY,
         optimizer: str = DEFAULT_OPTIMIZER, max_tp: int | None = None, micro_batches=(1, 2, 4, 8, 16, 32),
         cp_options=(1, 2, 4, 8), top: int = 10) -> Plan:
    """Rank the layouts of ``model`` on ``gpus`` devices of a ``hardware``
    preset (:mod:`costgraph.hardware`; ``capacity`` defaults to its memory)
    for a global batch of ``global_batch`` sequences (see the module
    docstring). ``values``: the model's dimension values (symbol → int; ``b``
    is replaced by each candidate micro-batch). TP stays within a scale-up
    domain (``max_tp`` defaults to its size, at most 8 × 8). A progress bar
    shows on stderr when the search takes over a second (:mod:`costgraph.export.progress`)."""
    from ..export.progress import progress

    # steps: the closed forms derived (memory, step time) and the (ZeRO, recompute, SP) evaluations
    steps = 2 * (3 * len(ZERO) + 2 * len(RECOMPUTE)) + 2 * (2 * len(RECOMPUTE) + len(ZERO)) + 1 \
        + 2 * len(ZERO) * len(RECOMPUTE)
    with progress("planning: deriving the closed forms", total=steps) as bar:
        return _plan(model, values, bar, gpus=gpus, hardware=hardware, global_batch=global_batch, capacity=capacity,
                     efficiency=efficiency, attention=attention, policy=policy, optimizer=optimizer, max_tp=max_tp,
                     micro_batches=micro_batches, cp_options=cp_options, top=top)


def _plan(model, values, bar, *, gpus, hardware, global_batch, capacity, efficiency, attention, policy, optimizer,
          max_tp, micro_batches, cp_options, top) -> Plan:
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
    syms = [T, P, C, EP, D, M] + ([b_sym] if b_sym is not None else [])
    base = dict(t=T, c=C, e=EP, d=D, m=M, attention=attention, policy=policy, optimizer=optimizer)
    forms = _Forms(cg, fixed, syms, base, bar, hardware, efficiency)
    bar.advance(description="planning: evaluating the layouts")
    candidates = _evaluate(forms, grid, b_sym is not None, refused, capacity=capacity, gpus=gpus,
                           peak=float(hardware.peak_flops_bf16))
    candidates.sort(key=lambda x: (x.step_seconds, x.memory_bytes))
    return Plan(candidates[:top], considered, refused, efficiency, capacity)


REFUSALS = ("d not whole", "t does not divide a split axis", "p does not divide the layers", "c does not divide s",
            "e does not divide the experts", "global batch not a multiple of b·d", "out of memory")


def _grid(cg: CostGraph, fixed: dict, refused: dict, *, gpus, global_batch, max_tp, micro_batches,
          cp_options) -> np.ndarray:
    """The numeric layouts that pass the validity rules (module docstring), one
    row ``(t, p, c, e, d, b, m)`` each; each refusal counted in ``refused``.
    The axes TP splits and the routed experts are read from the placement
    at symbolic degrees (:mod:`costgraph.parallel.placement`)."""
    pl = placement(cg, Layout(t=T, p=P, c=C, e=EP, d=D, m=M))
    counts = [int(g.count.xreplace(fixed)) for g in pl.top]
    seq = int(cg.dims["s"].symbol.xreplace(fixed)) if "s" in cg.dims else 1
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
        rows.append((t, p, c, e, d, b, global_batch // (b * d)))
    return np.array(rows, dtype=np.float64).reshape(-1, 7) if rows else np.zeros((0, 7))


class _Forms:
    """The closed forms, derived once with the degrees as symbols and compiled:
    per ZeRO stage the model states, per (recomputation, SP) the activations,
    the step time's parts and the model FLOPs; each for ``p = 1`` and a
    symbolic ``p`` (a pipeline: its sends), as in the memory forms."""

    def __init__(self, cg, fixed, syms, base, bar, hardware, efficiency):
        from .steptime import step_time

        self.cg, self.fixed, self.syms, self.base, self.bar = cg, fixed, syms, base, bar
        self._exprs: list = []
        self.states = {z: self._stage_totals(dict(zero=z), ("weights", "gradients", "optimizer"))
                       for z in ZERO}
        self.acts = {(r, sp): self._stage_totals(dict(recompute=r, sp=sp), ("activations",))[0]
                     for r in RECOMPUTE for sp in (False, True)}

        # The step's parts: compute + bubble and exposed communication depend on (recompute, SP), the
        # overlapped DP/ZeRO traffic on the ZeRO stage: derived apart, combined per layout as
        # max(busy, overlapped) + exposed (costgraph.training.steptime).
        flops: dict = {}   # training FLOPs depend on p and the recomputation, not on SP or the ZeRO stage

        def flops_of(layout):
            key = (layout.p, layout.recompute)
            if key not in flops:
                flops[key] = training_flops(cg, layout.filled())
            return flops[key]

        def parts(kw):
            bar.advance(2)
            layouts = [Layout(p=p_value, **{**base, **kw}) for p_value in (1, P)]
            return [step_time(cg, L, hardware, efficiency=efficiency, flops=flops_of(L), with_total=False)
                    for L in layouts]
        self.busy, self.exposed, self.overlapped = {}, {}, {}
        for r in RECOMPUTE:
            for sp in (False, True):
                st = parts({"recompute": r, "sp": sp})
                self.busy[(r, sp)] = [self.compiled(x["compute"] + x["bubble"]) for x in st]
                self.exposed[(r, sp)] = [self.compiled(x["communication_exposed"]) for x in st]
        for z in ZERO:
            self.overlapped[z] = [self.compiled(x["communication_overlapped"]) for x in parts({"zero": z})]
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
        """Per key: for p = 1 and symbolic p, each stage's form (memory derived once per layout)."""
        out = [[] for _ in keys]
        for p_value in (1, P):
            res = training_memory(self.cg, Layout(p=p_value, **{**self.base, **layout_kw}))
            self.bar.advance(len(keys))
            for i, key in enumerate(keys):
                out[i].append([self.compiled(st.memory[key]) for st in res.stages])
        return out


def _evaluate(forms: _Forms, grid: np.ndarray, with_b: bool, refused: dict, *, capacity, gpus,
              peak: float) -> list[Candidate]:
    """Every layout of ``grid`` under every (ZeRO, recomputation, SP) that fits
    ``capacity``: its memory (most-loaded stage), step time and MFU."""
    args = [grid[:, 0], grid[:, 1], grid[:, 2], grid[:, 3], grid[:, 4], grid[:, 6]] + ([grid[:, 5]] if with_b else [])
    pipelined = grid[:, 1] > 1
    candidates = []
    V = forms.evaluate(args) if len(grid) else []
    model_it = V[forms.model_flops] if len(grid) else np.zeros(0)

    def pick(pair):
        one, many = pair
        return np.where(pipelined, V[many], V[one])

    for z, r, sp in itertools.product(ZERO, RECOMPUTE, (False, True)):
        forms.bar.advance()
        if len(grid) == 0:
            break
        if sp and not np.any(grid[:, 0] > 1):
            continue
        mem = np.zeros(len(grid))
        for which in (0, 1):   # p = 1 forms, then p symbolic (first, last)
            per_stage = None
            for k in range(len(forms.states[z][0][which])):
                tot = sum(V[forms.states[z][q][which][k]] for q in range(3)) + V[forms.acts[(r, sp)][which][k]]
                per_stage = tot if per_stage is None else np.maximum(per_stage, tot)
            mem = np.where(pipelined if which == 1 else ~pipelined, per_stage, mem)
        valid = ((grid[:, 0] > 1) | (not sp)) & ((grid[:, 4] > 1) | (z == 0))   # SP needs t > 1; ZeRO needs d > 1
        step = np.maximum(pick(forms.busy[(r, sp)]), pick(forms.overlapped[z])) + pick(forms.exposed[(r, sp)])
        fits = valid & (mem <= capacity)
        refused["out of memory"] += int(np.count_nonzero(valid & ~fits))
        for i in np.nonzero(fits)[0]:
            candidates.append(Candidate(int(grid[i, 0]), int(grid[i, 1]), int(grid[i, 4]), int(grid[i, 2]),
                                        int(grid[i, 3]), z, r, sp, int(grid[i, 5]), int(grid[i, 6]),
                                        float(mem[i]), float(step[i]),
                                        float(model_it[i] / (step[i] * gpus * peak))))
    return candidates
