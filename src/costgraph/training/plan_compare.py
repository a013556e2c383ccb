"""Why ``plan`` prefers its first row to a given layout (issue 27 item 2): ``costgraph plan --compare``.

:func:`compare_layout` takes a plan's result (:class:`~costgraph.training.planning.PlanResult`) and a layout
(a published one, or any the user runs) and answers

* where the layout ranks among plan's rows (``rank``: the row with the same degrees, micro-batch, ZeRO stage,
  recompute policy, SP and schedule; ``shape_rank``: the first row with the same TP, PP, CP, EP, virtual stages
  and micro-batch; None: not among the rows shown);
* the two step times, each as ``costgraph train`` derives it (:func:`costgraph.training.api.train` on the
  layout, and on the first row's layout as its check command builds it: :func:`costgraph.training.plan_confirm.layout_of`),
  split into the same named parts (:class:`Gap`, :data:`PARTS`), so that the parts of each side sum to its step
  exactly: the compute by kernel class without recomputation (the per-kernel model's
  :class:`~costgraph.training.result_parts.ComputeByClass`; one ``compute`` part under a flat rate), the
  recomputation (the compute less that of the same layout with ``recompute = "none"``), the pipeline bubble,
  the optimizer step, each collective kind's exposed seconds (:mod:`costgraph.training.overlap`), the compute
  the hidden collectives slow (``contention``: :mod:`costgraph.training.contention`) and the
  rest (offload's host link beyond the compute, the CPU step: :func:`costgraph.training.steptime.combine`);
* the peak memory of the most-loaded device of each, against the capacity less the reserve;
* ``causes``: the parts that make the gap (given − first), largest first (at most 3, each at least 1% of it), and ``cause``, its dominant class
  (:data:`CAUSES`): the layout does not fit; it is not slower (plan's search lacks it: the settings it
  sets that plan does not search); else the class of the part that adds the most.

The layout is a :class:`~costgraph.parallel.layout.Layout` or a dict of its keywords (those of
:meth:`costgraph.Model.train`: ``t``, ``p``, ``v``, ``schedule``, ``zero``, ``recompute``, ...) with ``b``, the
micro-batch (default 1); the settings it leaves out are plan's (``gpus``, ``policy`` = plan's precision,
``optimizer``, ``attention``, ``overlap``, ``cross_entropy``, ``link_rate``). ``costgraph plan --compare`` takes
it as ``costgraph train``'s own layout flags (``"--tp 4 --pp 8 --virtual-stages 5 --schedule interleaved --zero 1
--sp --set b=1"``, the words of plan's ``check the first with`` line), parsed by the command.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

from ..layout_options import GIVEN
from ..result_fields import Part, quantity
from .plan_variants import VARIANT_FLAGS, degree_words

#: part name → (label, cause class): the step's parts in the order they are shown (module docstring);
#: a collective kind's exposed seconds are ``exposed:KIND`` (:data:`KIND_CAUSES` names their class)
PARTS = {
    "matmul": ("GEMMs", "compute efficiency"),
    "attention": ("fused attention cores", "compute efficiency"),
    "memory": ("memory-bound kernels (and the loss)", "compute efficiency"),
    "other": ("matrix FLOPs outside GEMMs", "compute efficiency"),
    "compute": ("compute (flat rate)", "compute efficiency"),
    "recompute": ("recomputation", "recompute"),
    "bubble": ("pipeline bubble", "bubble"),
    "optimizer": ("optimizer step", "optimizer"),
    "contention": ("compute slowed by hidden communication", "overlap contention"),
    "rest": ("offload and the rest", "offload"),
}
#: collective kind (:mod:`costgraph.parallel.communication`) → the cause class of its exposed seconds
KIND_CAUSES = {"tp": "TP exposed", "dp_grads": "exposed DP/ZeRO", "zero_reduce_scatter": "exposed DP/ZeRO",
               "zero_all_gather": "exposed DP/ZeRO", "fsdp": "exposed DP/ZeRO", "hsdp": "exposed DP/ZeRO",
               "pp": "PP exposed", "cp": "CP exposed", "ep": "EP exposed", "tied_embedding": "exposed DP/ZeRO"}
#: the cause classes, in the order a summary counts them: the two that no part names first
CAUSES = ("memory: does not fit", "not slower: outside plan's search", "bubble", "compute efficiency", "recompute",
          "TP exposed", "exposed DP/ZeRO", "PP exposed", "CP exposed", "EP exposed", "overlap contention", "optimizer",
          "offload", "other exposed")
#: the layout fields a row of plan shows, matched for ``rank`` (:class:`~costgraph.training.plan.Candidate`'s)
RANK_FIELDS = ("tp", "pp", "cp", "ep", "virtual_stages", "micro_batch", "zero", "recompute", "sp", "schedule")
#: those matched for ``shape_rank``: the parallel shape (the bench's, issue 27)
SHAPE_FIELDS = ("tp", "pp", "cp", "ep", "virtual_stages", "micro_batch")


@dataclass
class Gap(Part):
    """One part of the two steps (:data:`PARTS`, or ``exposed:KIND``): seconds per step of the given layout and
    of plan's first row, and their difference (given − first; positive: the given layout spends more)."""

    part: str = quantity(label="part")
    label: str = quantity(label="what it is")
    given: float = quantity("s", label="given layout")
    first: float = quantity("s", label="plan's first row")
    difference: float = quantity("s", label="given − first")
    cause: str = quantity(label="cause class (plan_compare.CAUSES)")


@dataclass
class Comparison(Part):
    """The given layout against plan's first row (module docstring); seconds and bytes per device."""

    layout: dict = quantity(label="the given layout (plan's row keys)")
    rank: int | None = quantity(label="its place among plan's rows (None: not shown)")
    shape_rank: int | None = quantity(label="the first row of its parallel shape (None: not shown)")
    shown: int = quantity("layouts", label="rows shown")
    given_step: float = quantity("s", label="step of the given layout")
    first_step: float = quantity("s", label="step of plan's first row")
    gap: float = quantity("s", label="given − first")
    given_bytes: int = quantity("bytes", label="peak of the given layout's most-loaded device")
    first_bytes: int = quantity("bytes", label="peak of the first row's most-loaded device")
    usable_bytes: int = quantity("bytes", label="capacity less the reserve (the given layout's)")
    given_fits: bool = quantity(label="the given layout fits")
    parts: list = quantity(label="the step's parts (Gap each)")
    causes: list = quantity(label="the parts that make the gap, largest first (at most 3, each at least 1% of it)")
    cause: str = quantity(label="the dominant cause class (plan_compare.CAUSES)")
    unsearched: list = quantity(label="the given layout's settings plan does not search")
    check: str | None = quantity(label="costgraph train words of the given layout", default=None)
    notes: list = quantity(label="notes", default_factory=list)

    def to_text(self) -> str:
        """The lines ``costgraph plan --compare`` prints under the table: the compared layout as train's flags
        (:meth:`flags`; ``--compare ""`` compares train's defaults), the parts, and the memory in GB (10^9 bytes,
        two decimals, as plan's table shows it)."""
        where = (f"rank {self.rank} of {self.shown} shown" if self.rank is not None else
                 f"not among the {self.shown} rows shown") + (
            f" (its shape first at row {self.shape_rank})" if self.shape_rank is not None else "")
        pct = self.gap / self.first_step if self.first_step else 0.0
        out = [f"compare: {where}; step {self.given_step:.4g} s against the first row's {self.first_step:.4g} s "
               f"({self.gap:+.3g} s, {pct:+.1%})",
               f"  layout compared: {self.flags()}"]
        w = max(len(g.label) for g in self.parts) if self.parts else 4
        out.append(f"  {'part'.ljust(w)}  {'given s':>10}  {'first s':>10}  {'difference':>10}")
        out += [f"  {g.label.ljust(w)}  {g.given:10.4g}  {g.first:10.4g}  {g.difference:+10.3g}" for g in self.parts
                if g.given or g.first]   # a part neither side has: in the JSON only
        out.append(f"  memory GB: {self.given_bytes / 1e9:.2f} against the first row's {self.first_bytes / 1e9:.2f} "
                   f"of {self.usable_bytes / 1e9:.2f} usable ({'fits' if self.given_fits else 'does not fit'})")
        why = ", ".join(f"{c['label']} {c['difference']:+.3g} s" for c in self.causes) or "no part is larger"
        out.append(f"  why: {why}; cause: {self.cause}")
        if self.unsearched:
            out.append(f"  not searched by plan: {', '.join(self.unsearched)}")
        out += [f"  note: {n}" for n in self.notes]
        return "\n".join(out)

    def flags(self) -> str:
        """The compared layout (:attr:`layout`, plan's row keys) as ``costgraph train``'s layout flags, in the order
        of plan's check command (:meth:`~costgraph.training.planning.PlanResult.check_command`): ``--tp --pp --cp
        --ep --zero --recompute`` always, ``--sp``, ``--schedule`` and ``--virtual-stages`` where set, then
        ``--set b=N`` and ``--micro-batches`` (m as train fills it from plan's global batch)."""
        r = self.layout
        words = degree_words(r)
        words.append(f"--set b={r['micro_batch']}")
        if r.get("micro_batches") is not None:
            words.append(f"--micro-batches {r['micro_batches']}")
        return " ".join(words)

    def to_json(self) -> dict:
        """JSON values only (the ``comparison`` key of ``costgraph plan --format json``)."""
        d = {k: v for k, v in self.items()}
        d["parts"] = [g.to_dict() for g in self.parts]
        return d


def compare_layout(model, values: dict, plan, layout, options=None) -> Comparison:
    """``layout`` (a :class:`~costgraph.parallel.layout.Layout` or a dict of its keywords with ``b``) against
    the first row of ``plan`` (a :class:`~costgraph.training.planning.PlanResult` of ``model`` at ``values``,
    with at least one row), both derived by ``costgraph train``'s path (module docstring); ``options``: the
    :class:`~costgraph.train_options.PlanOptions` the plan ran with (its device memory, reserve, efficiency and
    profile are train's options for both).

    Raises
    ------
    CostgraphValueError
        A plan without rows; a layout keyword that is no Layout field, or a layout train refuses (as
        ``costgraph train`` words it)."""
    from ..errors import CostgraphValueError

    if not plan.layouts:
        raise CostgraphValueError("--compare needs a plan with at least one row", hint="no layout fits: see the "
                                                                                      "refusals above")
    st = plan.settings
    first = plan.layouts[0]
    first_layout = _first_layout(first, plan)
    train_opts = _train_options(plan, options)
    try:   # the given layout, by train's path: each refusal of it says it is --compare's (issue 27)
        given, b = _given(layout, plan, st)
        g_parts, g_res = _parts(model, values, given, b, train_opts)
    except CostgraphValueError as e:
        raise _compare_refusal(e) from None
    f_parts, f_res = _parts(model, values, first_layout, first["micro_batch"], train_opts)
    names = [n for n in PARTS if n in g_parts or n in f_parts]
    names += sorted(n for n in {*g_parts, *f_parts} if n.startswith("exposed:"))
    gaps = [Gap(n, _label(n), g_parts.get(n, 0.0), f_parts.get(n, 0.0), g_parts.get(n, 0.0) - f_parts.get(n, 0.0),
                _cause(n)) for n in names]
    g_step, f_step = _num(g_res.step["total"], g_res.values), _num(f_res.step["total"], f_res.values)
    row = _row_of(g_res.layout, b)   # as train filled it: m from the global batch
    if row["micro_batches"] is not None and b * row["micro_batches"] * row["dp"] != plan.global_batch:
        raise CostgraphValueError(
            f"--compare: b·m·d = {b}·{row['micro_batches']}·{row['dp']} = {b * row['micro_batches'] * row['dp']:,} "
            f"sequences a step, where the plan's global batch is {plan.global_batch:,}",
            hint="leave --micro-batches out of --compare: the plan's global batch sets it")
    rank = next((i + 1 for i, r in enumerate(plan.layouts) if all(r.get(k) == row[k] for k in RANK_FIELDS)), None)
    shape = next((i + 1 for i, r in enumerate(plan.layouts) if all(r.get(k) == row[k] for k in SHAPE_FIELDS)), None)
    fits = g_res.fits is None or bool(g_res.fits["fits"])
    usable = (g_res.fits["capacity_bytes"] - g_res.fits["reserve_bytes"]) if g_res.fits is not None else 0
    # the parts that add to the given step, at least 1% of the gap each (a rounding's crumbs are no cause)
    adding = sorted((g for g in gaps if g.difference > 0 and g.difference >= 0.01 * abs(g_step - f_step)),
                    key=lambda g: -g.difference)[:3]
    unsearched = _unsearched(given, first_layout, plan)
    if not fits:
        cause = CAUSES[0]
    elif g_step <= f_step:
        cause = CAUSES[1]
    else:
        cause = adding[0].cause if adding else CAUSES[1]
    notes = []
    if abs(f_step - first["step_seconds"]) > 1e-9 * max(1.0, f_step):   # train's path is plan's confirmation
        notes.append(f"train gives the first row {f_step:.6g} s, plan {first['step_seconds']:.6g} s")
    return Comparison(row, rank, shape, len(plan.layouts), g_step, f_step, g_step - f_step,
                      _peak(g_res), _peak(f_res), int(usable), fits, gaps,
                      [{"part": g.part, "label": g.label, "difference": g.difference} for g in adding], cause,
                      unsearched, _check_words(plan, row, given), notes)


def _compare_refusal(e):
    """``e``, a refusal of the compared layout by train's path (``8 GPUs do not divide into t·p·c = 3``, a global
    batch that is no multiple of b·d), as ``--compare``'s: its message prefixed ``--compare: `` (once: one that
    names --compare, or the API's ``compare takes ...``, is kept), its location and hint kept."""
    from ..errors import CostgraphValueError

    if e.message.startswith(("--compare", "compare ")):
        return e
    return CostgraphValueError(f"--compare: {e.message}", loc=e.loc, hint=e.hint)


def _given(layout, plan, st) -> tuple:
    """``(Layout, b)`` of the given layout, plan's settings where it leaves them out."""
    from ..choices import OVERLAP
    from ..layout_options import given_settings, given_where_applies
    from ..parallel.layout import Layout

    base = {"gpus": plan.gpus, "policy": st["precision"], "optimizer": st["optimizer"], "attention": st["attention"],
            "overlap": st.get("overlap") or OVERLAP.default, **given_settings({k: st.get(k) for k in GIVEN})}
    if isinstance(layout, Layout):
        kw = {f.name: getattr(layout, f.name) for f in dataclasses.fields(Layout)}
        defaults = Layout()
        own = {k: v for k, v in kw.items() if v != getattr(defaults, k) or k not in base}
        return Layout(**{**given_where_applies({**base, **own}), **own}), 1
    if not isinstance(layout, dict):
        from ..errors import CostgraphValueError

        raise CostgraphValueError(f"compare takes a Layout or a dict of its keywords, not {type(layout).__name__}",
                                  hint='e.g. compare={"t": 4, "p": 8, "zero": 1, "b": 1}; costgraph plan --compare '
                                       'takes costgraph train\'s flags')
    kw = dict(layout)
    b = int(kw.pop("b", 1))
    if "v" in kw and int(kw["v"]) > 1 and "schedule" not in kw:   # train's default with virtual stages
        kw["schedule"] = "interleaved"
    # plan's given settings where they apply to the layout (--zero3-gathered at ZeRO 3); the layout's own kept
    return Layout(**{**given_where_applies({**base, **kw}), **kw}), b


def _first_layout(first: dict, plan):
    """The Layout of plan's first row, as its check command builds it (:func:`costgraph.training.plan_confirm.layout_of`)."""
    from .plan_confirm import layout_of

    st = plan.settings
    c = SimpleNamespace(**{"first_stage_layers": None, "last_stage_layers": None, "account_embedding": False,
                           "account_loss": False, "options": {}, "virtual_stages": 1, "schedule": "1f1b", **first})
    return layout_of(c, {"attention": st["attention"], "policy": st["precision"], "optimizer": st["optimizer"],
                         "gpus": plan.gpus, "overlap": st.get("overlap"), "pipeline_layout": st.get("pipeline_layout"),
                         **{k: st.get(k) for k in GIVEN}})


def _train_options(plan, options) -> dict:
    """Train's options for both sides: plan's hardware, batch, device memory, reserve, rate and profile."""
    o = options
    kw = {"hardware": plan.hardware, "global_batch": plan.global_batch}
    if o is not None:
        kw.update(memory=o.memory, reserve=o.reserve, efficiency=o.efficiency,
                  efficiency_profile=o.efficiency_profile, memory_convention=o.memory_convention)
    return kw


def _parts(model, values, layout, b, train_opts) -> tuple[dict, object]:
    """``(part → seconds, train's result)`` of ``layout`` at micro-batch ``b``: the parts sum to train's total."""
    vals = _with_b(model, values, b)
    if layout.m is not None:   # the first row's m (its check command's --micro-batches): no global batch then
        train_opts = {k: v for k, v in train_opts.items() if k != "global_batch"}
    res = model.train(layout, vals, **train_opts)
    step, v = res.step, res.values
    total = _num(step["total"], v)
    out = {}
    compute = _num(step["compute"], v)
    plain = compute
    if layout.recompute != "none" or layout.recompute_modules:
        bare = model.train(dataclasses.replace(layout, recompute="none", recompute_modules=None), vals, **train_opts)
        plain = _num(bare.step["compute"], bare.values)
        by = bare.compute.compute_by_class if bare.compute is not None else None
        out["recompute"] = compute - plain
    else:
        by = res.compute.compute_by_class if res.compute is not None else None
    if by is not None:
        out.update({k: _num(by[k], v) for k in ("matmul", "attention", "memory", "other")})
        plain_sum = sum(out[k] for k in ("matmul", "attention", "memory", "other"))
        if "recompute" in out:   # the classes of the bare layout sum to its compute; the recompute is the rest
            out["recompute"] = compute - plain_sum
    else:
        out["compute"] = plain
    out["bubble"] = _num(step["bubble"], v)
    if step.get("optimizer") is not None:
        out["optimizer"] = _num(step["optimizer"], v)
    for kind, c in (res.communication or {}).items():
        if c.get("exposed") is not None:
            out[f"exposed:{kind}"] = _num(c["exposed"], v)
    if step.get("contention"):   # the compute the hidden collectives slow (costgraph.training.contention)
        out["contention"] = _num(step["contention"], v)
    rest = total - sum(out.values())
    if abs(rest) > 1e-12 * max(1.0, total):
        out["rest"] = rest
    return out, res


def _with_b(model, values, b):
    """``values`` with the micro-batch ``b``."""
    import sympy

    if "b" not in model.graph.dims:
        return values
    sym = model.graph.dims["b"].symbol
    return {**{k: v for k, v in values.items() if k != sym}, sym: sympy.Integer(b)}


def _num(x, values) -> float:
    return float(x.xreplace(values)) if hasattr(x, "xreplace") else float(x)


def _peak(res) -> int:
    import math

    return int(math.ceil(_num(res.most_loaded().memory["total"], res.values)))


def _label(name: str) -> str:
    return PARTS[name][0] if name in PARTS else f"exposed {name.split(':', 1)[1]}"


def _cause(name: str) -> str:
    return PARTS[name][1] if name in PARTS else KIND_CAUSES.get(name.split(":", 1)[1], "other exposed")


def _row_of(layout, b: int) -> dict:
    """The given layout as plan's row keys (:data:`RANK_FIELDS`)."""
    L = layout.filled()
    return {"tp": L.t, "pp": L.p, "cp": L.c, "ep": L.e, "virtual_stages": L.v, "micro_batch": b, "zero": L.zero,
            "recompute": L.recompute, "sp": bool(L.sp), "schedule": L.schedule, "dp": L.d, "micro_batches": L.m}


def _unsearched(layout, first, plan) -> list[str]:
    """The settings where ``layout`` differs from plan's first row (``first``, a Layout) that plan does not
    search: a :class:`~costgraph.layout_options.LayoutOptions` field without a search domain (plan keeps it at
    its setting or default: the overlap convention, the loss, the attention kernel, activation offload, ...),
    a variant plan did not search, or a value outside the option's searched domain (``PlanResult.searched``: a
    recompute policy of another framework than ``--overlap``'s), as ``name=value``; not a setting plan was given
    that the first row leaves at ``auto`` because it does not apply there (``--zero3-gathered`` below ZeRO 3:
    :func:`costgraph.layout_options.given_where_applies`)."""
    from ..layout_options import LayoutOptions
    from ..option_fields import specs

    out = []
    # plan's split domain beyond the even split ((first, last, account_embedding, account_loss) = (None, None, F, F))
    uneven = any(tuple(v) != (None, None, False, False) for v in plan.searched.get("split", ()))
    for name, (_, spec) in specs(LayoutOptions).items():
        if name in _NOT_SETTINGS:
            continue
        if name in _SPLIT_FIELDS:
            searched = uneven
        else:
            key = spec.domain.key or name if spec.domain is not None else name
            searched = spec.domain is not None and (spec.domain.kind != "variant" or key in plan.searched)
            if searched and spec.domain.kind == "option" and key in plan.searched:   # a value outside its domain
                searched = getattr(layout, name) in plan.searched[key]   # (torchtitan-op under --overlap megatron)
        if name in GIVEN and getattr(layout, name) == plan.settings.get(name) and getattr(first, name) == "auto":
            continue   # plan's given setting, on a first row it does not apply to (--zero3-gathered below ZeRO 3)
        if not searched and getattr(layout, name) != getattr(first, name):
            out.append(f"{name}={_shown(getattr(layout, name))}")
    # a degree plan searches, at a value outside its domain (the CP degrees plan is given, 1, 2, 4, 8 by default,
    # and the larger ones options.context_degrees adds at long sequences: CP 16 of 8,192 tokens is none of them)
    for name in _DEGREES:
        vals = plan.searched.get(name)
        if name == "v" and vals:   # and the v of each chunk layout text plan tried ([v, text] pairs)
            vals = sorted(set(vals) | {x[0] for x in plan.searched.get("pipeline_layout", ())})
        if vals and getattr(layout, name) not in vals:
            out.append(f"{name}={getattr(layout, name)} (plan searches {', '.join(map(str, vals))})")
    return out


#: the degrees whose searched values ``PlanResult.searched`` lists (the Layout fields)
_DEGREES = ("t", "p", "c", "e", "v")


#: Layout fields that are no setting to compare (the device count, m, derived ones)
_NOT_SETTINGS = ("gpus", "m", "d", "precision", "tp_replicated", "etp", "lora_rank", "lora_targets", "lora_dropout",
                 "quantization")
#: Megatron's layer split: searched where plan's ``split`` domain holds more than the even split
_SPLIT_FIELDS = ("first_stage_layers", "last_stage_layers", "account_embedding", "account_loss")


def _shown(v) -> str:
    return ",".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v)


#: Layout fields plan's check command writes from the row and plan's settings (PlanResult.check_command)
_CHECKED = ("gpus", "t", "p", "c", "e", "sp", "zero", "recompute", "schedule", "v", "m", "attention", "policy",
            "optimizer", "overlap", *GIVEN, "pipeline_layout", *_SPLIT_FIELDS)
#: the row's variant fields plan's check command writes (costgraph.training.plan_variants.check_words)
_VARIANTS = ("recompute_modules", *VARIANT_FLAGS)


def _check_words(plan, row: dict, given=None) -> str | None:
    """``costgraph train`` words of the given layout (plan's check command of such a row, with the given
    layout's own settings where they are not plan's: its precision, loss, overlap, link rate, dispatcher, variant
    fields and every other layout flag it sets away from train's default), so that train gives its figures."""
    from ..layout_options import LayoutOptions
    from ..option_fields import specs
    from ..parallel.layout import Layout

    full = {"first_stage_layers": None, "last_stage_layers": None, "account_embedding": False, "account_loss": False,
            "options": {}, **row}
    if given is not None:
        full.update({k: getattr(given, k) for k in _SPLIT_FIELDS})
        full["options"] = {k: getattr(given, k) for k in _VARIANTS
                           if getattr(given, k) not in (None, ()) and getattr(given, k) != getattr(Layout(), k)}
        full["options"]["policy"] = given.policy
        plan = dataclasses.replace(plan, settings={
            **plan.settings, "attention": given.attention, "optimizer": given.optimizer, "overlap": given.overlap,
            **{k: getattr(given, k) for k in GIVEN},
            "pipeline_layout": given.pipeline_layout})
    try:
        words = [plan.check_command(full)]
    except (KeyError, TypeError):
        return None
    default = Layout()
    for name, (_, spec) in specs(LayoutOptions).items() if given is not None else ():
        value = getattr(given, name)
        if name in _CHECKED or name in _VARIANTS or name in _NOT_SETTINGS or spec.flag is None \
                or value == getattr(default, name):
            continue
        action = dict(spec.argparse).get("action")
        if action in ("store_true", "store_false"):
            words.append(spec.flag)
        else:
            words.append(f"{spec.flag} {' '.join(map(str, value)) if isinstance(value, (tuple, list)) else value}")
    return " ".join(words)
