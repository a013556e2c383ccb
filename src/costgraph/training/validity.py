"""Is a parallel layout possible for this model at these sizes?

Each rule reads the graph; none is typed per model:

* every axis tensor parallelism splits (:mod:`costgraph.parallel.tensor`:
  heads, K/V heads, widths) must divide by ``t`` — Megatron requires it; the
  vocabulary need not (frameworks pad it; per-device bytes of a padded
  table are rounded up in reports); K/V heads fewer than ``t`` are replicated as Megatron
  replicates them (``layout.tp_replicated``, :func:`costgraph.parallel.tensor.kv_replication`),
  which needs ``t`` a multiple of them;
* the layers (the iterations of every stack together; the MTP depths after
  the head are not among them: they sit on the last stage) must split into
  stages as Megatron splits them (:func:`costgraph.parallel.layer_split.check_split`:
  evenly, or with the first/last stages' own counts, or the embedding and
  loss counted as layers), or as an explicit ``--pipeline-layout`` lists them
  (Megatron's ``validate_layer_layout``); ``p`` must not exceed the layers; a model with no
  top-level repeat group (CLIP's and SigLIP's towers repeat inside ``vision_model`` and ``text_model``)
  has no layers to split: ``p > 1`` refused at any sizes (:func:`check_pipeline_stacks`);
* every sequence length must divide by ``c`` (context parallelism);
* expert parallelism needs routed experts (a ``repeat E as ... active k``
  group), ``E`` divisible by ``e``, and ``e·etp`` dividing ``d·c·t``; the options of the EP exchange
  (``--ep-overlap``, ``--ep-dispatcher``, ``--route-nodes``) given on a model without routed experts change
  nothing: warned, not refused (:func:`expert_option_warnings`);
* HSDP shards ZeRO's states: it needs ZeRO ≥ 1, and its group must divide ``d``.
"""

from __future__ import annotations

import sympy

from ..engine.symbols import as_expr

from ..errors import CostgraphValueError
from ..engine.graph import CostGraph
from ..parallel.layout import Layout
from ..parallel.placement import Placement, expert_groups, placement as place


def split_axes(cg: CostGraph, placement: Placement | None = None) -> list[tuple[str, sympy.Expr]]:
    """``(tensor id, size of its TP-split axis)`` for every tensor TP splits
    (read from ``placement``, or from the placement at a symbolic ``t``: which
    axes TP splits does not depend on its degree)."""
    if placement is None or placement.tp is None:
        placement = place(cg, Layout(t=sympy.Symbol("N_t", positive=True, integer=True)))
    return [(tid, cg.tensors[tid].shape[axis]) for tid, axis in placement.tp.split.items()]


def expert_counts(cg: CostGraph) -> list[sympy.Expr]:
    """The number of experts ``E`` of each routed-expert group
    (:func:`costgraph.parallel.placement.expert_groups`)."""
    return [g.count for g in expert_groups(cg).values()]


#: the layout fields of the EP exchange (no degree): field → (flag, the value that asks for nothing)
EXPERT_EXCHANGE = {"ep_overlap": ("--ep-overlap", "none"), "ep_dispatcher": ("--ep-dispatcher", "alltoall"),
                   "route_nodes": ("--route-nodes", None)}


def expert_option_warnings(cg: CostGraph, layout) -> list[str]:
    """What ``train`` and ``plan`` warn of when ``layout`` sets an option of the EP exchange
    (:data:`EXPERT_EXCHANGE`) on a model without routed experts: each such flag with its value and
    what was assumed (no EP all-to-all, so nothing timed), empty otherwise. An EP degree above 1 on
    such a model is refused instead (:func:`check_layout`)."""
    if expert_counts(cg):
        return []
    given = [f"{flag} {getattr(layout, name)}" for name, (flag, off) in EXPERT_EXCHANGE.items()
             if getattr(layout, name, off) != off]
    if not given:
        return []
    return [f"{', '.join(given)}: '{cg.name}' has no routed experts, so there is no EP all-to-all to time: "
            f"ignored (the step time is the same without {'it' if len(given) == 1 else 'them'})"]


def check_layout(cg: CostGraph, layout, values: dict, *, placement: Placement | None = None) -> None:
    """Raise :class:`CostgraphValueError` naming the first rule (module
    docstring) that ``layout`` (filled) breaks at ``values`` (symbol → int).
    ``placement``: the layout's :class:`~costgraph.parallel.placement.Placement`
    if the caller has it."""
    def num(e):
        v = as_expr(e).xreplace(values)
        return int(v) if v.is_Integer else None

    t, p, c, e = layout.t, layout.p, layout.c, layout.e
    if isinstance(t, int) and t > 1:
        seen = set()
        vocab = {str(cg.tensors[o].shape[-1]) for o in cg.outputs if cg.tensors[o].shape}
        pl = placement if placement is not None else place(cg, layout)
        rep = {cg.dims[n].symbol for n in layout.tp_replicated if n in cg.dims}
        for tid, size in split_axes(cg, pl):
            if str(size) in vocab:
                continue   # the vocabulary: frameworks pad it to a multiple of t (Megatron: of 128·t)
            if rep & set(sympy.Mul.make_args(sympy.factor(size))):
                continue   # replicated K/V heads: one per device (kv_replication checked t % kv)
            n = num(size)
            if n is not None and n % t and (str(size), n) not in seen:
                seen.add((str(size), n))
                raise CostgraphValueError(
                    f"tensor parallelism t = {t} splits an axis of {n} ({size}, tensor '{tid}') unevenly",
                    hint="t must divide the heads, K/V heads and widths it splits"
                         + ("; K/V heads fewer than t are replicated (as Megatron) when t is a multiple of them"
                            if n < t else ""))
    if isinstance(p, int) and (p > 1 or getattr(layout, "pipeline_layout", None) is not None):
        _check_pipeline_split(cg, layout, num)   # a one-stage layout is checked too ('E' alone lacks the layers)
    if isinstance(c, int) and c > 1:
        for sdim in (placement.sequence if placement is not None else place(cg, layout).sequence):
            n = num(sdim)
            if n is not None and n % c:
                raise CostgraphValueError(f"context parallelism c = {c} does not divide the sequence {sdim} = {n}")
    experts = expert_counts(cg)
    if isinstance(e, int) and e > 1:
        if not experts:
            raise CostgraphValueError(f"expert parallelism (e = {e}) needs routed experts; '{cg.name}' has none",
                                      hint="drop --ep, or use a mixture of experts (mixtral, deepseek_v3, qwen3_moe)")
        for n in map(num, experts):
            if n is not None and n % e:
                raise CostgraphValueError(f"expert parallelism e = {e} does not divide the {n} experts",
                                          hint="--ep is one of the experts' divisors: "
                                               + ", ".join(str(k) for k in range(1, n + 1) if n % k == 0)
                                          if n <= 4096 else f"--ep divides {n}")
    if layout.hsdp is not None:
        if layout.zero == 0:
            raise CostgraphValueError("HSDP shards ZeRO's states within groups: it needs --zero 1, 2 or 3")
        if isinstance(layout.d, int) and isinstance(layout.hsdp, int) and layout.d % layout.hsdp:
            raise CostgraphValueError(f"the HSDP group {layout.hsdp} does not divide d = {layout.d}")


def _check_pipeline_split(cg: CostGraph, layout, num) -> None:
    """The layers split into ``p`` stages as Megatron splits them: the explicit layout checked
    against the model (:meth:`~costgraph.parallel.pipeline_layout.PipelineLayout.validate`),
    else :func:`~costgraph.parallel.layer_split.check_split`. The groups after the head (MTP
    depths, :func:`~costgraph.parallel.pipeline.layer_groups`) are not split: they sit on
    the last stage with the loss, as Megatron puts them."""
    from ..parallel.pipeline import layer_groups

    p = layout.p
    check_pipeline_stacks(cg, layout)
    stacks, post = layer_groups(cg)
    counts = [num(g.count) for g in stacks]
    if getattr(layout, "pipeline_layout", None) is not None:
        from ..parallel.pipeline_layout import parse_pipeline_layout

        depths = [num(g.count) for g in post]
        if None not in counts + depths:
            parse_pipeline_layout(layout.pipeline_layout, p).validate(sum(counts), sum(depths), f"'{cg.name}'")
        return
    if stacks and None not in counts and sum(counts) >= p:   # Megatron's split (costgraph.parallel.layer_split)
        from ..parallel.layer_split import check_split

        check_split(sum(counts), p, layout.v if layout.schedule == "interleaved" else 1,
                    layout.first_stage_layers, layout.last_stage_layers, layout.account_embedding,
                    layout.account_loss, what="iterations of " + " and ".join(f"'{g.path}'" for g in stacks))
    if None not in counts and sum(counts) < p:
        raise CostgraphValueError(f"{p} pipeline stages for {sum(counts)} layers: a stage would hold none",
                                  hint=f"p at most {sum(counts)}")


def check_pipeline_stacks(cg: CostGraph, layout) -> None:
    """Refuse ``p > 1`` pipeline stages (``layout.p`` a whole number) for a model without top-level
    repeat groups (:func:`~costgraph.parallel.pipeline.layer_groups`): the stages split the iterations
    of those groups, as Megatron-LM splits its decoder layers, and a model whose repeats are all nested
    (CLIP's and SigLIP's ``vision_model/layers`` and ``text_model/layers``) has none, so every stage
    but the first would hold nothing; nor a ``--pipeline-layout`` (it places those layers). Needs no sizes:
    ``Model.train`` checks it without values too."""
    from ..parallel.pipeline import layer_groups

    p, given = layout.p, getattr(layout, "pipeline_layout", None)
    if (given is None and (not isinstance(p, int) or p <= 1)) or any(layer_groups(cg)):
        return
    nested = [path for path, g in cg.groups.items() if "/" in path and "/" not in path.split("/", 1)[1]]
    raise CostgraphValueError(
        f"'{cg.name}' has no top-level repeated layers "
        + (f"to split into {p} pipeline stages" if given is None else "for --pipeline-layout to place")
        + (f" (its repeats are nested: {', '.join(nested[:4])})" if nested else ""),
        hint=("--pp 1" if given is None else "drop --pipeline-layout") + ": pipeline stages split a model's "
             "top-level layer stacks, as Megatron-LM splits its decoder layers; spread the devices with --tp, --zero "
             "and data parallelism (--gpus) instead")
