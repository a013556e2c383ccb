"""The planner's confirmation: each shown layout derived exactly by ``costgraph train``'s path.

A screened row becomes the :class:`~costgraph.parallel.layout.Layout` its check command
builds (:func:`layout_of`), meets the preset as train's does (:func:`costgraph.training.fp8.on_hardware`:
an FP8 recipe the GPU cannot run refused, ``--fp8-transpose auto`` resolved as Transformer Engine decides
it there: no second FP8 copy of the weights on Blackwell), is checked whole as
:func:`costgraph.training.api.train` checks it (K/V replication,
:func:`costgraph.training.validity.check_layout`, :meth:`Layout.filled`), and gets train's exact
figures (:func:`exact_figures`). A row train
refuses is dropped and counted; the figures are cached by layout, so a second ``plan`` on the
same model (a larger ``--top`` in a notebook) derives no layout twice. Each layout is derived at its own
numbers, as train derives it (:func:`_concrete`), the model's sizes substituted exactly after. Both live in
the planner's one cache, per graph and dropped with it (:func:`costgraph.training.plan_forms.derived`): the
derivations beside the screen's, the exact figures in a store of their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import sympy

from ..choices import OVERLAP
from ..layout_options import GIVEN, given_settings, given_where_applies

from ..errors import CostgraphValueError
from ..numbers.substitute import exact_value
from ..parallel.layout import Layout
from .fp8 import on_hardware
from .plan_forms import derived, memory_of, step_of
from .steptime import combine

#: the most exact figures kept per graph (by layout and sizes: :func:`_key`)
FIGURES_SIZE = 4096
#: the rows left underived once the confirmation's budget is spent (:func:`confirm`)
UNPROVEN = ("uneven split not derived: its lower bound is below the rows shown (past the confirmation budget; "
            "it might be faster)")


def layout_of(c, settings: dict) -> Layout:
    """The :class:`Layout` ``costgraph train`` builds for candidate ``c``'s check command
    (:func:`costgraph.commands._analysis.train_layout`); ``settings``: ``attention``,
    ``policy``, ``optimizer``, ``gpus``, ``overlap``, ``pipeline_layout`` and the given settings
    (:data:`costgraph.layout_options.GIVEN`: their defaults where absent, ``auto`` on a row they do not apply to:
    :func:`~costgraph.layout_options.given_where_applies`); the candidate's variant
    fields (``c.options``, :mod:`costgraph.training.plan_variants`: an FP8 ``policy`` among them) last."""
    extra = dict(getattr(c, "options", None) or {})
    pol = extra.pop("policy", settings["policy"])
    return Layout(**given_where_applies(dict(
        t=c.tp, p=c.pp, c=c.cp, e=c.ep, gpus=settings["gpus"], sp=c.sp, zero=c.zero, m=c.micro_batches,
        schedule=c.schedule, v=c.virtual_stages, recompute=c.recompute, attention=settings["attention"],
        policy=pol, optimizer=settings["optimizer"],
        first_stage_layers=c.first_stage_layers, last_stage_layers=c.last_stage_layers,
        account_embedding=c.account_embedding, account_loss=c.account_loss,
        overlap=settings.get("overlap", OVERLAP.default),
        **given_settings({k: settings.get(k) for k in GIVEN}),
        pipeline_layout=extra.pop("pipeline_layout", settings.get("pipeline_layout")), **extra)))


def checked(model, layout: Layout, values: dict) -> Layout:
    """``layout`` as :func:`costgraph.training.api.train` checks it: K/V heads fewer than ``t``
    replicated (:func:`costgraph.parallel.tensor.with_kv_replication`), then
    :func:`costgraph.training.validity.check_layout` on the filled layout.

    Raises
    ------
    CostgraphValueError
        What ``costgraph train`` would refuse the layout with."""
    from ..parallel.tensor import with_kv_replication
    from .validity import check_layout

    layout = with_kv_replication(model.graph, layout, values)
    check_layout(model.graph, layout.filled(), values)
    return layout


def _key(layout: Layout, values: dict, *more) -> tuple:
    """The exact figures' key within the graph's store (:func:`costgraph.training.plan_forms.derived`, which
    keys by the graph, weakly: a freed graph's entries are dropped with it, never met by another)."""
    return (repr(layout), tuple(sorted((str(k), int(v)) for k, v in values.items())), *more)


def _figures(model, key: tuple, make):
    """``make()`` once per graph and ``key``: the exact figures, in the graph's own store beside train's
    derivations (:func:`costgraph.training.plan_forms.derived`)."""
    return derived(model.graph, key, make, kind="figures", size=FIGURES_SIZE)


def _concrete(layout: Layout) -> Layout:
    """``layout`` with its filled ``m``: the layout train derives, at its own numbers (the degrees, ``m``, ``p``,
    ``v``; ``b`` among the values each figure substitutes after: :func:`exact_memory`, :func:`exact_figures`).

    Why numbers, not symbols shared by the layouts of one structure (this module derived ``m``, ``b`` and the
    degrees above 1 as symbols until issue 27 item 6's speed work): with numbers SymPy's ``Min``, ``Max`` and
    ``ceiling`` of the degrees and ``m`` fold as they are built, where over symbols each is proved per call
    (the interleaved schedule's in-flight chunks ``Min(Min(K, v·m) + 1, v·m)``: about 10 ms each, 82 of them
    for Llama-3-70B's ``--top 5``): the confirmation cost half as much (Llama-3-70B on 64 H100s: 1.13 s of
    CPU → 0.43 s; Llama-3-8B ``--top 100``: 2.12 s → 1.34 s) for the same exact figures (the substitution
    of whole numbers gives the number the derivation at those numbers gives)."""
    return dataclasses.replace(layout, m=layout.filled().m)


def flops_at(cg, layout: Layout) -> dict:
    """:func:`~costgraph.training.compute.training_flops` of the concrete ``layout`` (:func:`_concrete`), derived
    once per graph for the layouts that differ only in the ZeRO stage and SP, which it does not read (the
    screen's forms share it the same way: :class:`costgraph.training.plan_forms.Forms`), through the planner's
    one cache (:func:`costgraph.training.plan_forms.derived`)."""
    from .compute import training_flops

    key = tuple((f.name, repr(getattr(layout, f.name))) for f in dataclasses.fields(layout) if f.name not in _NOT_READ)
    return derived(cg, ("flops", key), lambda: training_flops(cg, layout.filled()))


#: the layout fields :func:`flops_at` shares its derivation across (a layout with them changed may be one train
#: refuses, an optimizer offload without ZeRO 2: the first row met derives it)
_NOT_READ = ("zero", "sp")


def exact_memory(model, layout: Layout, values: dict) -> int:
    """Bytes of the most-loaded device of ``layout`` at ``values``, exact: the total of
    :func:`~costgraph.training.memory.training_memory`'s largest stage, rounded up, as
    :func:`costgraph.training.api.train` reports it (``TrainingMemory.most_loaded``). Derived
    once for the layouts that differ only in ``m`` and ``b`` (:func:`exact_figures`), through the
    planner's one cache of train's derivations (:func:`costgraph.training.plan_forms.memory_of`: each
    stage's states and activations, whose sum is the stage's total)."""
    def make():
        memo: dict = {}
        return int(sympy.ceiling(max(exact_value(s, values, memo) + exact_value(a, values, memo)
                                     for s, a in memory_of(model.graph, _concrete(layout)))))
    return _figures(model, ("memory", *_key(layout, values)), make)


def exact_figures(model, layout: Layout, values: dict, hardware, efficiency,
                  factors=None) -> tuple[int, sympy.Expr]:
    """``(bytes of the most-loaded device, step seconds)`` of ``layout`` at ``values``, exact,
    by the calls :func:`costgraph.training.api.train` makes: the memory of
    :func:`~costgraph.training.memory.training_memory` (its most-loaded stage, :func:`exact_memory`),
    the step time of :func:`~costgraph.training.steptime.step_time` over
    :func:`~costgraph.parallel.communication.communication` of the filled layout, its parts
    combined by :func:`~costgraph.training.steptime.combine` at ``values`` (Python's ``max``: the
    number train's Max gives at those values); ``factors``: a calibration's multipliers.

    The derivation is at the layout's numbers (:func:`_concrete`), the model's sizes (``values``, ``b``
    among them) substituted exactly after: whole numbers, so the
    substitution gives the exact value the derivation at those numbers gives. The derivation is the
    planner's one (:func:`costgraph.training.plan_forms.step_of`), the figures cached by layout."""
    from ..engine.symbols import as_expr

    def make():
        at = _concrete(layout)
        parts = step_of(model.graph, at, hardware, efficiency, factors, flops_at(model.graph, at), expand=False)
        memo: dict = {}

        def sub(x):   # the exact number x.xreplace(full) gives, without its symbolic intermediates
            return exact_value(as_expr(x), values, memo)
        # train's total, max(...) taken of the parts' values: SymPy's Max of long sums, then the values, is
        # the same number (and slow to build)
        step = combine({n: v.mapped(sub) if hasattr(v, "mapped") else sub(v) for n, v in parts.items()
                        if v is not None and not isinstance(v, Mapping)}, "compute", max)
        return exact_memory(model, layout, values), step
    more = (repr(hardware), str(efficiency), repr(factors))
    return _figures(model, ("figures", *_key(layout, values), *more), make)


def confirm(model, vals, b_sym, candidates, settings, hardware, efficiency, usable, limit, bar, refused,
            order, factors=None, budget: int | None = None) -> list:
    """The screened ``candidates`` (fastest first by the screen's step) that train accepts and that fit
    when derived exactly, their figures replaced by train's exact ones and ranked again by ``order``; a
    duplicate row is dropped. The exact figures are :func:`exact_figures`', or the row's own forms
    evaluated exactly where its structure's first row showed them equal
    (:class:`costgraph.training.plan_exact.Checked`).

    Two passes. First, in the screen's order, the candidates whose estimated memory fits (``c.likely``)
    until ``limit`` are confirmed. Then the others whose least step (an uneven split's bound ``c.bound``,
    :func:`costgraph.training.plan_forms.uneven_bounds`; else the screened step) is not above the
    ``limit``-th fastest exact step, by that least step, at most ``budget`` uneven splits (None: all): so
    a bound never drops a faster row; those left past the budget are counted under :data:`UNPROVEN` in
    ``refused`` (they might be faster: not derived). Refusals are counted in ``refused`` ("refused by train", "out of memory (exact)")."""
    from .plan_exact import Checked

    state = dict(out=[], seen=set(), same=Checked())
    deferred = []
    for c in candidates:
        if not c.likely:   # an uneven split whose estimated memory does not fit: only by its bound, later
            deferred.append(c)
            continue
        _confirm_one(model, vals, b_sym, c, settings, hardware, efficiency, usable, bar, refused, factors, state)
        if len(state["out"]) >= limit:
            break
    # not walked (plan._Walked: built as read), then the deferred, by their least step
    pool = candidates.pool(deferred, _lowest) if hasattr(candidates, "pool") else \
        ((_lowest(c), c.bound is not None, c) for c in sorted(deferred, key=_lowest))
    spent, kth, size = 0, float("inf"), 0
    for lowest, bounded, c in pool:   # an even split's screened step is its own (exact) figure
        out = state["out"]
        if len(out) != size:   # the limit-th fastest exact step so far
            size = len(out)
            kth = sorted(x.step_seconds for x in out)[limit - 1] if size >= limit else float("inf")
        if lowest > kth:
            break
        if bounded:
            if budget is not None and spent >= budget:   # counted, not derived: the plan says so
                refused[UNPROVEN] = refused.get(UNPROVEN, 0) + 1
                continue
            spent += 1
        c = c() if callable(c) else c   # a row of the screen, built now (plan_rows.Rows.pool)
        _confirm_one(model, vals, b_sym, c, settings, hardware, efficiency, usable, bar, refused, factors, state)
    out = state["out"]
    out.sort(key=order)
    return out


def _lowest(c) -> float:
    """The least step candidate ``c`` can have: its bound (an uneven split), else its screened step."""
    return c.step_seconds if c.bound is None else c.bound


def _confirm_one(model, vals, b_sym, c, settings, hardware, efficiency, usable, bar, refused, factors, state):
    """Candidate ``c`` checked and derived exactly (:func:`confirm`), appended to ``state["out"]`` unless
    train refuses it, it does not fit, or its row is already there."""
    at = {**vals, b_sym: sympy.Integer(c.micro_batch)} if b_sym is not None else vals
    limit = usable(c) if callable(usable) else usable   # a row's own reserve (train's runtime reserve)
    try:
        # the layout on the preset, as train meets it (training.fp8.on_hardware: an FP8 recipe the GPU cannot run
        # refused, the FP8 weight transpose `auto` resolved as TE decides there)
        layout = checked(model, on_hardware(layout_of(c, settings), hardware), at)
    except CostgraphValueError:
        refused["refused by train"] = refused.get("refused by train", 0) + 1
        return
    bar.advance()

    def derive():
        mem = exact_memory(model, layout, at)
        if mem > limit:   # the step time is not derived then
            return mem, None
        return exact_figures(model, layout, at, hardware, efficiency, factors)
    mem, step = state["same"].figures(c, derive)
    if mem > limit:
        refused["out of memory (exact)"] = refused.get("out of memory (exact)", 0) + 1
        return
    peak, gpus = float(hardware.peak_flops_bf16), settings["gpus"]
    model_flops = c.mfu * c.step_seconds * gpus * peak
    exact = dataclasses.replace(c, memory_bytes=mem, step_seconds=float(step), bound=None,
                                mfu=model_flops / (float(step) * gpus * peak))
    if exact.key() not in state["seen"]:
        state["seen"].add(exact.key())
        state["out"].append(exact)
