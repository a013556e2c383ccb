"""The planner's screen: train's closed forms with the degrees as symbols, over the grid.

For each value of the options of :data:`costgraph.options.SEARCHED_OPTIONS` the memory
(:func:`costgraph.training.memory.training_memory`: the states per ZeRO stage — the stage's
total less its activations, an FP8 policy's buffers among them —, the activations per
recomputation and SP) and the step time's parts
(:func:`costgraph.training.steptime.step_time` with ``with_total=False``) are derived once
with ``t, p, c, e, d, m, v`` (and ``b``) as symbols, for ``p = 1`` and each searched
schedule over a symbolic ``p`` (interleaved over a symbolic ``v`` too); compiled together with
:func:`costgraph.numbers.evaluator.vectorized` and evaluated over every row of the grid at
once (float64). Every part that is not a dict is compiled generically: an expression as
it is, a part of rules (the overlap model's :class:`~costgraph.training.overlap.Overlaps`) by
its ``mapped``: each value its rules depend on. The step's total is
:func:`costgraph.training.steptime.combine` of the evaluated parts (NumPy's maximum), per
pipeline: the planner does not restate the formula. Every part is taken from the derivation
at the row's recomputation and SP, except those of :data:`BY_ZERO` (the DP/ZeRO traffic, the
offload link), taken at its ZeRO stage.

A layout whose pipeline split is uneven (its first/last stage's own counts, the
embedding/loss counted as layers, a layout text) is screened with lower bounds of its
memory and step time from the even forms (:func:`uneven_bounds`): pruning by them never
drops a layout that would fit or be faster; its exact figures come from the confirmation.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from ..engine.symbols import dim
from ..layout_options import given_where_applies
from ..numbers.evaluator import safe_args, vectorized
from ..numbers.substitute import substitute
from ..parallel.layout import Layout
from .compute import training_flops
from .memory import training_memory
from .plan_grid import COL

T, P, C, EP, D, M, V = (dim(n) for n in ("N_t", "N_p", "N_c", "N_e", "N_d", "N_m", "N_v"))


def pipes(schedules) -> tuple[dict, ...]:
    """The pipelines the forms are derived for: none (``p = 1``), then each schedule of
    ``schedules`` over a symbolic ``p`` (interleaved over a symbolic ``v`` too)."""
    return (dict(p=1),) + tuple(dict(p=P, schedule=s, **({"v": V} if s == "interleaved" else {}))
                                for s in schedules)


PIPES = pipes(("1f1b", "interleaved"))
#: The parts of :func:`~costgraph.training.steptime.step_time` that depend on the ZeRO stage: each is
#: taken from the derivation at the row's ZeRO stage; every other part from the derivation at its
#: recomputation and SP (whatever its ZeRO stage). A step-time model whose other parts come to depend on
#: the ZeRO stage (exposed ZeRO-3 gathers) names them here.
#: ``part.kind``: one kind of a part of rules (its ``replaced``), the DP/ZeRO collectives of the overlap model.
BY_ZERO = ("offload", "offload_serial", "optimizer") + tuple(
    f"overlap.{k}" for k in ("dp_grads", "zero_reduce_scatter", "zero_all_gather", "fsdp"))


class Forms:
    """The closed forms (module docstring), derived once and compiled: ``states[z][pipe]``
    and ``acts[(r, sp)][pipe]`` (per stage form indices), ``parts[(r, sp)][name][pipe]``,
    ``overlapped[z][name][pipe]`` (the parts of :data:`BY_ZERO`), ``model_flops``. ``options``: field → values searched.
    ``args``: the compiled function's stand-ins of ``syms`` (:func:`costgraph.numbers.evaluator.safe_args`), in
    which :attr:`exprs` are written."""

    def __init__(self, cg, fixed, syms, base, bar, hardware, efficiency, options: dict, schedules=("1f1b",),
                 factors=None):
        self.cg, self.fixed, self.syms, self.base, self.bar = cg, fixed, syms, base, bar
        self.options = options
        self.pipes = pipes(schedules)
        self._exprs: list = []
        # the sizes fixed and the degrees renamed to the compiled function's stand-ins in one pass
        # (numbers.evaluator.safe_args: ``args``, in the order of ``syms``), once per distinct subexpression
        self.args, rename = safe_args(syms)
        self._mapping = {**fixed, **rename}
        self._memo: dict = {}
        zeros, recs, sps = options["zero"], options["recompute"], options["sp"]
        pairs = list(itertools.product(recs, sps))
        # The states depend on the ZeRO stage only, the activations on (recompute, SP) only: one derivation
        # serves a ZeRO stage and a (recompute, SP) pair at once (the two lists walked side by side).
        n = max(len(zeros), len(pairs))
        together = [(zeros[i % len(zeros)], pairs[i % len(pairs)]) for i in range(n)]
        self.states, self.acts = {}, {}
        for z, (r, sp) in together:
            states, acts = self._stage_totals(dict(zero=z, recompute=r, sp=sp))
            self.states.setdefault(z, states)
            self.acts.setdefault((r, sp), acts)
        def flops_of(layout):   # training FLOPs depend on p and the recomputation, not on SP or the ZeRO stage
            return derived(cg, ("flops", layout.p, layout.v, layout.recompute, repr(base)),
                           lambda: training_flops(cg, layout.filled()))

        def step(layout):
            return step_of(cg, layout, hardware, efficiency, factors, flops_of(layout))

        # The step's parts: each from the derivation at the row's (recompute, SP), the overlapped DP/ZeRO
        # traffic at its ZeRO stage (the same side-by-side walk).
        self.parts, self.overlapped = {}, {}
        for z, (r, sp) in together:
            bar.advance(len(self.pipes))
            st = [step(Layout(**given_where_applies({**base, "zero": z, "recompute": r, "sp": sp, **pipe})))
                  for pipe in self.pipes]
            if (r, sp) not in self.parts:   # per pipe: part → its compiled form(s)
                self.parts[(r, sp)] = [{k: self.part(v) for k, v in x.items() if _compiled_part(k, v)} for x in st]
            if z not in self.overlapped:
                tops = {b.split(".")[0] for b in BY_ZERO}
                self.overlapped[z] = [{k: self.part(v) for k, v in x.items() if k in tops and _compiled_part(k, v)}
                                      for x in st]
        self.model_flops = self.compiled(flops_of(Layout(**given_where_applies({**base, "p": P})))["model_per_iteration"])
        # every form in one compiled function: the parts the forms share are evaluated once per layout
        self._f = vectorized(self._exprs, self.args, renamed=True)

    def part(self, value):
        """One part of the step compiled: an expression's index (:meth:`compiled`), or a part of
        rules (a ``mapped`` method, :class:`~costgraph.training.overlap.Overlaps`) with every value
        it depends on replaced by its index."""
        return value.mapped(self.compiled) if hasattr(value, "mapped") else self.compiled(value)

    def compiled(self, expr) -> int:
        """Register ``expr`` with the model's sizes fixed and the degrees as :attr:`args`; its index in
        :meth:`evaluate`'s arrays."""
        from ..engine.symbols import as_expr

        self._exprs.append(substitute(as_expr(expr), self._mapping, self._memo))
        return len(self._exprs) - 1

    @property
    def exprs(self) -> list:
        """The registered forms (the model's sizes substituted, the degrees as :attr:`args`), by index."""
        return self._exprs

    def evaluate(self, args) -> list:
        """Every registered form over the grid's columns (the degrees, and ``b``)."""
        return self._f(*args)

    def _stage_totals(self, layout_kw) -> tuple[list, list]:
        """For each of ``self.pipes``, each stage's forms: the model states (weights, gradients and
        optimizer together) and the activations (memory derived once per layout)."""
        states, acts = [], []
        for pipe in self.pipes:
            layout = Layout(**given_where_applies({**self.base, **layout_kw, **pipe}))
            stages = memory_of(self.cg, layout)
            self.bar.advance(2)
            states.append([self.compiled(st) for st, _ in stages])
            acts.append([self.compiled(a) for _, a in stages])
        return states, acts


#: the most derivations kept per graph (a plan derives a few dozen)
DERIVED_SIZE = 1024


def store(cg, kind: str = "derived") -> dict:
    """The planner's cache ``kind`` of graph ``cg`` (``CostGraph.memo("plan." + kind)``: it lives and dies with
    the graph). ``"derived"``: train's derivations (memory, step parts, FLOPs) at symbolic degrees and sizes, by
    what each reads (the layout; the preset, flat efficiency and calibration of a step), the sizes substituted
    after (:meth:`Forms.compiled`), so a plan of the same model at other sizes, on another device count, over a
    subset of its schedules or with a variant's base derives none twice — the one cache of the screen's forms and
    the confirmation's derivations (:mod:`costgraph.training.plan_confirm`); ``"figures"``: the confirmation's
    exact figures by layout and sizes."""
    return cg.memo("plan." + kind)


def derived(cg, key: tuple, make, kind: str = "derived", size: int = DERIVED_SIZE):
    """``make()`` once per graph and ``key`` (the graph's store ``kind``, at most ``size`` entries): a full
    store evicts its least recently used entry (as :func:`functools.lru_cache` does; the store is a dict, in
    the order of last use: a hit moves its entry to the end), so a long session keeps the derivations it reads."""
    got = store(cg, kind)
    if key in got:
        value = got.pop(key)   # most recently used: last
    else:
        value = make()
        while len(got) >= size:
            del got[next(iter(got))]   # the least recently used: first
    got[key] = value
    return value


def memory_of(cg, layout: Layout) -> list[tuple]:
    """Each pipeline stage's ``(model states, activations)`` bytes of ``layout`` (the states: the stage's
    total of :func:`~costgraph.training.memory.training_memory` less its activations — the weights,
    gradients and optimizer, and an FP8 policy's weight copies, transposes and scales, which the total
    only adds), unexpanded; derived once per graph and layout (:func:`derived`)."""
    return derived(cg, ("memory", repr(layout)), lambda: [
        (st.memory["total"] - st.memory["activations"], st.memory["activations"])
        for st in training_memory(cg, layout, expand=False).stages])


def step_of(cg, layout: Layout, hardware, efficiency, factors, flops=None, expand: bool = True) -> dict:
    """The parts of :func:`~costgraph.training.steptime.step_time` (``with_total=False``) of ``layout`` on
    ``hardware`` at a flat ``efficiency`` (None: the preset's kernel table) and a calibration's ``factors``;
    derived once per graph and what it reads (:func:`derived`). ``flops``: the layout's training FLOPs
    (:func:`~costgraph.training.compute.training_flops`), if the caller has them. ``expand=False``: the
    per-kernel seconds unexpanded (the confirmation, which evaluates the parts at numbers; the screen compiles
    the expanded forms, whose float64 rounding the plan's MFU shows)."""
    from .steptime import step_time

    return derived(cg, ("step", repr(layout), repr(hardware), str(efficiency), repr(factors), expand),
                   lambda: step_time(cg, layout, hardware, efficiency=efficiency, flops=flops, with_total=False,
                                     factors=factors, expand=expand))


def shards(grid: np.ndarray, experts: bool) -> np.ndarray:
    """Whether ZeRO has a group to shard over: DP × CP, or (routed experts) the experts' DP group."""
    dense = grid[:, COL["d"]] * grid[:, COL["c"]]
    return (dense > 1) | (experts & (dense * grid[:, COL["t"]] > grid[:, COL["e"]]))


def screen(forms: Forms, grid: np.ndarray, with_b: bool, experts: bool, uneven: np.ndarray | None = None):
    """Every row of ``grid`` under every combination of the searched options: yields
    ``(option values, memory, step, model FLOPs per iteration, valid, (memory bound, step bound))`` arrays
    per combination (``valid``: the option changes something on that row — SP needs TP, ZeRO a group).

    ``uneven``: the rows whose pipeline split is not the even one the forms are derived for (Megatron's
    first/last stage counts, the embedding or loss counted as a layer, a layout text): their memory and
    step are the even forms' (an estimate, the planner's order), their bounds lower bounds
    (:func:`uneven_bounds`), never above their exact figures; the other rows' bounds are their figures."""
    from .steptime import combine

    args = [grid[:, COL[k]] for k in ("t", "p", "c", "e", "d", "m", "v")] + ([grid[:, COL["b"]]] if with_b else [])
    which = np.where(grid[:, COL["p"]] == 1, 0, grid[:, COL["s"]] + 1).astype(int)   # the pipe (forms.pipes) of each row
    values = forms.evaluate(args)
    n = len(grid)

    can_shard = shards(grid, experts)
    opts = forms.options
    for z, r, sp in itertools.product(opts["zero"], opts["recompute"], opts["sp"]):
        forms.bar.advance()
        mem = np.zeros(n)
        for w in range(len(forms.pipes)):
            per_stage = None
            for k in range(len(forms.states[z][w])):
                tot = values[forms.states[z][w][k]] + values[forms.acts[(r, sp)][w][k]]
                per_stage = tot if per_stage is None else np.maximum(per_stage, tot)
            mem = np.where(which == w, per_stage, mem)
        step, least = np.zeros(n), np.zeros(n)
        with np.errstate(all="ignore"):   # a row's value is taken from its own pipeline's forms only
            for w in range(len(forms.pipes)):
                parts = at_zero(forms.parts[(r, sp)][w], forms.overlapped[z][w])
                got = {k: evaluated(v, values, n) for k, v in parts.items()}
                step = np.where(which == w, combine(got, "compute", np.maximum), step)
                low = got["compute"] + got["bubble"] + (got["optimizer"] if "optimizer" in got else 0)
                least = np.where(which == w, low, least)
            bounds = (mem, step) if uneven is None or not uneven.any() else \
                uneven_bounds(forms, values, grid, uneven, (z, r, sp), mem, step, least)
        valid = ((grid[:, COL["t"]] > 1) | (not sp)) & (can_shard | (z == 0))
        yield (z, r, sp), mem, step, np.broadcast_to(values[forms.model_flops], (n,)), valid, bounds


def uneven_bounds(forms: Forms, values: list, grid: np.ndarray, uneven: np.ndarray, option, mem, step, least):
    """``(memory, step)`` with the ``uneven`` rows' replaced by lower bounds of their exact figures.

    * Memory: the most-loaded of ``p`` stages holds at least their mean, and the stages together hold
      at least what one stage holding every layer (the ``p = 1`` forms at the row's other degrees) does:
      the weights, gradients, optimizer states and one micro-batch's activations of each layer are on
      some stage (every stage has at least one micro-batch in flight), a per-layer maximum (a ZeRO-3
      gather, a recomputed layer) on the stage of that layer. So ``memory ≥ memory(p = 1) / p``.
    * Step: ``compute + bubble + optimizer`` of the row's own pipeline forms: the compute is the mean
      stage's (the per-kernel seconds × ``m / p``, :func:`costgraph.training.kernel_time.kernel_seconds`),
      which the busiest stage's pace (:func:`costgraph.parallel.pipeline.layout_pace`, ≥ 1) only raises,
      and the bubble is that compute × the schedule's bubble fraction; the optimizer step reads the
      states of the layers spread evenly over the ``p`` stages whatever the split
      (:func:`costgraph.training.step_kernels.device_states`), so it is the even forms'; the exposed
      communication (≥ 0) and an offload's host link (``busy`` is at least it) are left out."""
    z, r, sp = option
    one = None
    for k in range(len(forms.states[z][0])):   # the p = 1 pipe: every layer on one stage
        tot = values[forms.states[z][0][k]] + values[forms.acts[(r, sp)][0][k]]
        one = tot if one is None else np.maximum(one, tot)
    return np.where(uneven, one / grid[:, COL["p"]], mem), np.where(uneven, least, step)


def _compiled_part(name: str, value) -> bool:
    """Whether the screen compiles step_time's part ``name``: every value but the mappings (dicts and the
    typed ``ComputeByClass``: their entries are in the other parts) and the sums step_time leaves out
    without a total (None)."""
    return value is not None and not isinstance(value, Mapping)


def at_zero(parts: dict, zero_parts: dict) -> dict:
    """``parts`` (derived at the row's recomputation and SP) with those of :data:`BY_ZERO` taken
    from ``zero_parts`` (derived at its ZeRO stage): a whole part by its name, one kind of a part
    of rules (``part.kind``) by its ``replaced``; a part absent at that stage dropped."""
    out = dict(parts)
    kinds: dict = {}
    for name in BY_ZERO:
        top, _, kind = name.partition(".")
        if kind:
            kinds.setdefault(top, set()).add(kind)
        elif top in zero_parts:
            out[top] = zero_parts[top]
        else:
            out.pop(top, None)
    for top, names in kinds.items():
        if top in out and top in zero_parts:
            out[top] = out[top].replaced(zero_parts[top], names)
    return out


def evaluated(part, values: list, n: int):
    """A compiled part (:meth:`Forms.part`) over the grid: its index's array (broadcast to the ``n``
    rows), or its rules with each index replaced by its array."""
    def one(k):
        return np.broadcast_to(values[k], (n,))
    return part.mapped(one) if hasattr(part, "mapped") else one(part)
