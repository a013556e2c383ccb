"""The planner's variants: the options whose every value gets its own closed forms.

The variants are declared in :mod:`costgraph.options` (``kind = "variant"``: Megatron's
recompute modules, method and layer counts, the MoE's EP overlap and node-limited routing,
the FP8 policies with ``plan --allow-fp8``, optimizer, parameter and activation offload with
``plan --allow-offload``); :func:`costgraph.options.variants` gives their combinations. For
each combination but the base (every variant at its default, the planner's own forms) this
module derives the screen's forms (:class:`~costgraph.training.plan_forms.Forms`) with the
variant's Layout fields in the base layout, restricted to what the variant requires (ZeRO 2
or 3 to offload the optimizer, ZeRO 3 the parameters, ``selective`` for a module set,
``full`` for a layer count, Megatron's EP overlap: no full recomputation and, for ``p > 1``,
the interleaved schedule; DualPipe's: its schedule and ``p > 1`` —
:func:`costgraph.parallel.ep_time.check_overlap`), and screens the
grid's rows that meet them. A variant train refuses when its forms are derived (an FP8
recipe the preset cannot run, a recompute module delayed scaling cannot re-run) is counted,
with train's message, in ``refused``.

Each screened row carries the variant's fields (``Candidate.options``), which its check
command repeats (``--recompute-modules``, ``--recompute-method``, ``--recompute-num-layers``,
``--ep-overlap``, ``--route-nodes``, ``--precision``, ``--offload-optimizer``,
``--offload-params``, ``--offload-activations``) and :func:`costgraph.training.plan_confirm.layout_of` builds.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np

from ..errors import CostgraphValueError
from ..options import Space, variants
from .plan_grid import COL
from .plan_rows import Rows


def layout_fields(variant: dict) -> dict:
    """The :class:`~costgraph.parallel.layout.Layout` fields of a variant (``requires`` left out;
    ``recompute_layers`` ``(method, n)`` as ``recompute_method`` and ``recompute_num_layers``;
    an FP8 ``policy`` with its BF16 activations)."""
    out = {k: v for k, v in variant.items() if k not in ("requires", "recompute_layers")}
    if "recompute_layers" in variant:
        out["recompute_method"], out["recompute_num_layers"] = variant["recompute_layers"]
    if "recompute_modules" in out:
        out["recompute_modules"] = tuple(out["recompute_modules"])
    return out


def space_facts(cg, fixed: dict, hardware, gpus: int, attention: str) -> dict:
    """What the variants' domains read of the model and the preset (:class:`~costgraph.options.Space`'s
    ``modules``, ``top_k``, ``domains``, ``fp8_policies``, and ``mtp``: the MTP depths a chunk layout
    text places with the loss)."""
    from ..engine.recompute import MODULES, module_regions
    from ..parallel.placement import expert_groups
    from ..parallel.ranks import ranks_per_domain
    from .data import policies, policy

    groups = expert_groups(cg).values()
    top_k = max((int(g.active.xreplace(fixed)) for g in groups), default=0)
    per_domain = max(1, int(ranks_per_domain(hardware, None)))
    from .fp8 import recipe, unsupported

    fp8 = tuple(n for n, p in policies().items() if p.fp8 and unsupported(recipe(p.fp8), hardware) is None) \
        if getattr(hardware, "peak_flops_fp8", None) else ()   # the recipes the preset's GPU runs (TE's check)
    from ..engine.symbols import as_expr
    from ..parallel.layer_split import layer_groups

    mtp = sum(int(as_expr(g.count).xreplace(fixed)) for g in layer_groups(cg)[1])   # the MTP depths
    return dict(modules=tuple(m for m in MODULES if module_regions(cg, m)), top_k=top_k,
                domains=-(-gpus // per_domain), fp8_policies=fp8, mtp=mtp)


#: the variants of the expert all-to-all: they change nothing without expert parallelism (``e = 1``)
EXPERT_FIELDS = ("ep_overlap", "route_nodes")


def _rows_meeting(grid, need: dict, experts: bool = False):
    """The grid's rows that meet a variant's schedule requirement (``p = 1`` always does, but where the
    variant needs a pipeline: ``requires`` ``pipelined``) and, for a
    variant of :data:`EXPERT_FIELDS` (``experts``), have ``e > 1``, as a grid of its own: ``rows`` with
    the schedule column renumbered, ``splits``, ``schedules``."""
    schedules = [s for s in grid.schedules if s in need.get("schedule", grid.schedules)]
    if len(grid.rows) == 0:
        return SimpleNamespace(rows=grid.rows, splits=grid.splits, schedules=schedules, derived=tuple(schedules),
                               explicit=grid.explicit)
    names = np.array(grid.schedules, dtype=object)[grid.rows[:, COL["s"]].astype(int)]
    keep = ((grid.rows[:, COL["p"]] == 1) | np.isin(names, schedules)) & ((grid.rows[:, COL["e"]] > 1) | (not experts))
    if "p" in need:   # a variant that needs given pipeline degrees (Megatron's activation offload: p = 1)
        keep &= np.isin(grid.rows[:, COL["p"]], need["p"])
    if "pipelined" in need:   # a variant that needs a pipeline (DualPipe's EP overlap: p > 1)
        keep &= grid.rows[:, COL["p"]] > 1
    rows = grid.rows[keep].copy()
    if len(rows):
        rows[:, COL["s"]] = [schedules.index(n) if n in schedules else len(schedules) for n in names[keep]]
    # the forms are derived for the schedules the variant allows (``derived``); a p = 1 row is named 1F1B
    # (its forms are the first, whatever its index), after them when 1F1B is not among them
    return SimpleNamespace(rows=rows, splits=grid.splits, derived=tuple(schedules), explicit=grid.explicit,
                           schedules=schedules + ([] if "1f1b" in schedules else ["1f1b"]))


def search_variants(space: Space, grid, options: dict, derive, evaluate, refused: dict) -> tuple[Rows, object, dict]:
    """The candidates of every variant but the base (:class:`~costgraph.training.plan_rows.Rows`), each with its
    fields in ``Candidate.options``:
    ``(candidates, least, pruned)`` as the planner's evaluation returns them, summed over the
    variants. ``derive(base_fields, options, schedules)`` builds a variant's forms, ``evaluate(forms,
    grid)`` screens a grid with them (the planner's own functions); ``options``: the searched
    options' values of the base forms; a variant refused when derived is counted in ``refused``."""
    found, least, pruned = Rows(), None, {}
    for variant in variants(space):
        fields = layout_fields(variant)
        if not fields:
            continue
        need = variant["requires"]
        # the base's values that the variant allows; those it needs where the base has none of them
        # (``selective`` for a module set under flash: the base leaves it out as changing nothing)
        opts = {k: tuple(v for v in vals if v in need.get(k, vals)) or tuple(need.get(k, ()))
                for k, vals in options.items()}
        sub = _rows_meeting(grid, need, any(k in fields for k in EXPERT_FIELDS))
        if not all(opts.values()) or len(sub.rows) == 0:
            continue
        # the base layout at a policy and schedule the variant accepts (each layout sets its own; the base
        # serves the model FLOPs, over a symbolic p)
        at = {k: need[k][0] for k in ("schedule",) if k in need} | (
            {"recompute": opts["recompute"][0]} if "recompute" in need else {})
        try:
            forms = derive({**fields, **at}, opts, sub.derived)
        except CostgraphValueError as err:
            why = f"refused by train: {_words(fields)} ({err.args[0] if err.args else err})"
            refused[why] = refused.get(why, 0) + len(sub.rows)
            continue
        cands, low, pr = evaluate(forms, sub)
        found.extend(cands, fields)   # each row with the variant's fields (a chunk layout kept)
        if low is not None and (least is None or low.memory_bytes < least.memory_bytes):
            least = dataclasses.replace(low, options={**low.options, **fields})
        for k, n in pr.items():
            pruned[k] = pruned.get(k, 0) + n
    return found, least, pruned


def _words(fields: dict) -> str:
    """A variant's fields as ``name value`` pairs (for a refusal's reason)."""
    return ", ".join(f"{k} {' '.join(v) if isinstance(v, tuple) else v}" for k, v in fields.items())


def degree_words(row: dict) -> list[str]:
    """``costgraph train``'s flags of a plan row's degrees (plan's row keys): ``--tp --pp --cp --ep --zero
    --recompute`` always, ``--sp``, ``--schedule`` and ``--virtual-stages`` where set; the words of
    :meth:`costgraph.training.planning.PlanResult.check_command` and of ``plan --compare``'s layout line."""
    words = [f"--tp {row['tp']}", f"--pp {row['pp']}", f"--cp {row['cp']}", f"--ep {row['ep']}", f"--zero {row['zero']}",
             f"--recompute {row['recompute']}"] + (["--sp"] if row.get("sp") else [])
    if row.get("schedule", "1f1b") != "1f1b":
        words.append(f"--schedule {row['schedule']}")
    if (row.get("virtual_stages") or 1) > 1:
        words.append(f"--virtual-stages {row['virtual_stages']}")
    return words


#: a row's variant fields written as one flag and its value (:func:`check_words`; ``recompute_modules`` and
#: ``pipeline_layout`` are written apart)
VARIANT_FLAGS = {"recompute_method": "--recompute-method", "recompute_num_layers": "--recompute-num-layers",
                 "ep_overlap": "--ep-overlap", "route_nodes": "--route-nodes", "offload_optimizer": "--offload-optimizer",
                 "offload_params": "--offload-params", "offload_activations": "--offload-activations"}


def check_words(options: dict) -> list[str]:
    """The ``costgraph train`` words of a row's variant fields (``Candidate.options``)."""
    words = []
    if options.get("pipeline_layout"):   # a chunk layout text the planner generated (options.chunk_layouts)
        import shlex

        words.append(f"--pipeline-layout {shlex.quote(options['pipeline_layout'])}")
    if options.get("recompute_modules"):
        words.append("--recompute-modules " + " ".join(options["recompute_modules"]))
    words += [f"{flag} {options[k]}" for k, flag in VARIANT_FLAGS.items() if options.get(k) is not None]
    return words
