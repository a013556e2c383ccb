"""What a recomputation policy keeps and what it re-runs — one description,
read by the activation memory (:mod:`costgraph.engine.activations`) and by
the hardware FLOPs (:mod:`costgraph.training.compute`).

A policy is found on the graph as a :class:`RecomputePlan`:

``rerun``
    op path → the share of its instances whose forward runs again in the
    backward pass (its forward FLOPs × that share are added to the hardware
    FLOPs). Each op re-runs at most once (a flash kernel's own recompute of
    the attention core is not added on top of a policy that re-runs it).
``freed``
    storage id → the share of its instances *not* kept for the backward.
``extras``
    ``(storage id, share)`` kept by a checkpoint although no operator keeps
    it (a layer's input; an output torchtitan's op-level SAC caches).
``live``
    layers whose activations are live again while a checkpointed run is
    re-run (Megatron ``uniform``: the N layers of a run; otherwise 1; 0
    without layer checkpointing).
``layer_share``
    the share of layers checkpointed at their input (0 without layer
    checkpointing; 1 for ``torchtitan-op``, whose blocks keep only what
    they cache).

Policies (``choices.RECOMPUTE`` and the Layout fields ``recompute_modules``,
``recompute_num_layers``, ``recompute_method``, ``recompute_frequency``):

``selective`` (Megatron-LM ``--recompute-granularity selective``)
    each module of ``recompute_modules`` (default ``core_attn``) as
    Megatron @ d98e8a64 checkpoints it (:data:`MODULES`: where the graph has
    it). ``core_attn`` (``attention.py::Attention._checkpointed_attention_forward``
    around ``_run_core_attention``): Q, K, V (after RoPE) kept; QKᵀ, scale,
    mask, softmax, dropout *and* probs·V re-run.
``selective-korthikanti``
    the memory of ``core_attn`` with Korthikanti et al. 2022's FLOP
    accounting: the re-run is QKᵀ → scale → softmax → dropout, without
    probs·V (``2 b s² h`` per layer under the matmul convention instead of
    ``4 b s² h``).
``full`` (``--recompute-granularity full``)
    ``recompute_method`` ``uniform`` (default) with ``recompute_num_layers`` N
    (default 1): runs of N consecutive layers, only each run's input kept
    (``ceil(L/N)`` of the ``L`` layers of a stage), N layers live while a run
    is re-run; ``block``: the first N layers of each stage (and model chunk)
    checkpointed at their input, the rest keep everything
    (``megatron/core/transformer/transformer_block.py::_checkpointed_forward``).
    Layers per stage are taken as ``l / (p · v)`` (an even split).
``torchtitan-op`` (torchtitan @ 1f029641 ``_apply_op_sac``)
    every block checkpointed, caching the outputs of the save-list ops
    (``_op_sac_save_list``: ``mm``/``linear`` and SDPA; a flash core's output
    and log-sum-exp) except every second matmul (the 2nd, 4th, … linear of
    the block in graph order) and the MoE router (``moe.router.gate``,
    always recomputed); every other op re-runs (torch replays the forward).
``torchtitan-layer`` (``_apply_layer_sac`` with ``selective_ac_option = n``)
    every n-th block (``recompute_frequency``, default 2) fully checkpointed:
    ``floor(l/n)`` of ``l`` blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from .. import choices
from ..errors import CostgraphValueError

ONE = sympy.Integer(1)

#: Megatron-LM's ``--recompute-modules`` on the graph, declared in one place:
#: module → (what a checkpoint frees, how the graph finds it). ``inside``: an
#: ordinary checkpoint — the module's inputs kept, what it keeps for itself
#: freed; ``outputs``: the outputs of the module's operators freed after use
#: and rebuilt in the backward (``moe_act``, ``layernorm``, ``mla_up_proj``).
#: Finders: ``attention`` the attention core and its probs·V; ``subtree`` the
#: operators under a path component matching one of the names (``dense``:
#: without routed experts; ``moe``: with); ``names`` operators whose last
#: path component matches; ``expert_act`` the operators with that role (``@op(roles=...)``)
#: inside a routed-expert group.
MODULES = {
    "core_attn": ("inside", "attention", ()),
    "mlp": ("inside", "subtree-dense", ("mlp", "feed_forward", "ffn")),
    "moe": ("inside", "subtree-moe", ("mlp", "feed_forward", "ffn", "block_sparse_moe")),
    "shared_experts": ("inside", "subtree", ("shared_expert", "shared_experts", "shared_mlp")),
    "moe_act": ("outputs", "expert_act", ()),
    "layernorm": ("outputs", "names", ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                                       "ln_1", "ln_2", "attention_norm", "ffn_norm")),
    "mla_up_proj": ("outputs", "names", ("q_b_proj", "kv_b_proj", "rope", "rope_1")),
}
#: allowed by Megatron @ d98e8a64 ``TransformerConfig.__post_init__`` but not found on a graph here
MEGATRON_ONLY = ("gdn_norm_out", "gdp_in_proj", "gdp_qkv", "mhc")
RECOMPUTE_METHOD = ("uniform", "block")
DEFAULT_MODULES = ("core_attn",)
DEFAULT_FREQUENCY = 2    # torchtitan @ 1f029641 config: selective_ac_option "2"


@dataclass
class RecomputePlan:
    """What one policy keeps and re-runs on one graph (module docstring)."""

    policy: str
    rerun: dict = field(default_factory=dict)
    freed: dict = field(default_factory=dict)
    extras: list = field(default_factory=list)
    live: sympy.Expr = sympy.Integer(0)
    layer_share: sympy.Expr = sympy.Integer(0)
    warnings: list = field(default_factory=list)

    def share(self, sid: str):
        """The share of storage ``sid``'s instances kept (None: none)."""
        f = self.freed.get(sid)
        if f is None:
            return ONE
        return None if f == 1 else ONE - f


def check_recompute(layout) -> None:
    """Check the recompute fields of a Layout as Megatron's ``TransformerConfig``
    does (full needs no module list, selective no layer count, …).

    Raises
    ------
    CostgraphValueError
        An unknown module or method, a count that is not a positive whole
        number, or a field that the policy does not read.
    """
    r, mods = layout.recompute, layout.recompute_modules
    if mods is not None:
        if isinstance(mods, str):
            mods = (mods,)
        if not isinstance(mods, (list, tuple)):   # 3.5 was a TypeError ('float' object is not iterable)
            raise CostgraphValueError(f"recompute_modules is a list of module names, not {mods!r}",
                                      hint="e.g. recompute_modules=('core_attn', 'mlp'); one of: " + ", ".join(MODULES))
        mods = tuple(mods)
        bad = [m for m in mods if not isinstance(m, str) or (m not in MODULES and m not in MEGATRON_ONLY)]
        if bad:
            raise CostgraphValueError(f"unknown recompute module {bad[0]!r}", hint="one of: " + ", ".join(MODULES))
        only = [m for m in mods if m in MEGATRON_ONLY]
        if only:
            raise CostgraphValueError(f"recompute module {only[0]!r} has no operators in costgraph's models",
                                      hint="one of: " + ", ".join(MODULES))
        if r != "selective":
            raise CostgraphValueError("recompute modules are checkpointed under selective recompute",
                                      hint="add --recompute selective")
        layout.recompute_modules = mods
    for name, flag in (("recompute_num_layers", "--recompute-num-layers"),
                       ("recompute_frequency", "--recompute-frequency")):
        v = getattr(layout, name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise CostgraphValueError(f"{name} ({flag}) must be a positive whole number, got {v!r}",
                                      hint=f"a whole number above 0, e.g. {flag} 2 ({name}=2 in Python)")
    if layout.recompute_method is not None and layout.recompute_method not in RECOMPUTE_METHOD:
        raise CostgraphValueError(f"unknown recompute method {layout.recompute_method!r}", hint="uniform or block")
    if r != "full" and (layout.recompute_num_layers is not None or layout.recompute_method is not None):
        raise CostgraphValueError("recompute_num_layers and recompute_method choose the layers of full recompute "
                                  "(Megatron: selective forbids them)", hint="add --recompute full")
    if r != "torchtitan-layer" and layout.recompute_frequency is not None:
        raise CostgraphValueError("recompute_frequency is torchtitan's layer SAC option",
                                  hint="add --recompute torchtitan-layer")


def describe(layout) -> str:
    """The policy in words: ``selective (core_attn, mlp)``, ``full (block, 2 layers per stage)``,
    ``torchtitan-layer (every 2nd block)``; the bare name otherwise."""
    r = layout.recompute
    if r in ("selective", "selective-korthikanti"):
        return f"{r} ({', '.join(getattr(layout, 'recompute_modules', None) or DEFAULT_MODULES)})"
    if r == "full":
        n = getattr(layout, "recompute_num_layers", None) or 1
        method = getattr(layout, "recompute_method", None) or "uniform"
        return f"full ({method}, {n} layer{'s' if n != 1 else ''} " \
               f"{'per checkpointed run' if method == 'uniform' else 'checkpointed per stage'})"
    if r == "torchtitan-layer":
        return f"torchtitan-layer (1 block in {getattr(layout, 'recompute_frequency', None) or DEFAULT_FREQUENCY})"
    return r


# ---------------------------------------------------------------- finding modules on the graph


def _consumers(cg) -> dict:
    out: dict[str, list[str]] = {}
    for producer, consumer, _, _ in cg.edges:
        out.setdefault(producer, []).append(consumer)
    return out


def attention_regions(cg) -> list[tuple[list[str], str]]:
    """Each attention core: ``([QKᵀ and the operators up to probs·V], probs·V)``:
    a ``matmul`` of two activations and every operator on the paths from it
    to the next ``matmul`` (scale, mask, softmax, dropout), and that one."""
    consumers, out, seen = _consumers(cg), [], set()
    for path, d in cg.ops():
        if d["kind"] != "matmul" or path in seen:
            continue
        core, stack, closing, visited = [path], list(consumers.get(path, ())), None, {path}
        while stack:
            n = stack.pop()
            if n in visited:
                continue
            visited.add(n)
            if cg.nodes[n]["kind"] == "matmul":
                seen.add(n)
                closing = closing or n
                continue
            core.append(n)
            stack.extend(consumers.get(n, ()))
        if closing is not None:
            out.append((core, closing))
    return out


def _experts(cg) -> list[str]:
    return [p for p, g in cg.groups.items() if sympy.expand(g.count - g.active) != 0]


def _subtrees(cg, names, moe):
    ops = [p for p, _ in cg.ops()]
    roots = sorted({"/".join(p.split("/")[:i + 1]) for p in ops for i, part in enumerate(p.split("/")[:-1])
                    if part in names})
    roots = [r for r in roots if not any(r.startswith(o + "/") for o in roots)]   # outermost
    experts = _experts(cg)
    out = []
    for r in roots:
        has = any(e.startswith(r + "/") for e in experts)
        if moe is None or has == moe:
            out.append([p for p in ops if p.startswith(r + "/")])
    return out


def module_regions(cg, module: str) -> list[list[str]]:
    """The regions (lists of op paths) of Megatron module ``module`` on ``cg``
    (:data:`MODULES`); empty when the model has none."""
    _, how, names = MODULES[module]
    if how == "attention":
        return [core + [closing] for core, closing in attention_regions(cg)]
    if how.startswith("subtree"):
        return _subtrees(cg, names, {"subtree": None, "subtree-dense": False, "subtree-moe": True}[how])
    if how == "expert_act":
        from ..ops.registry import has_role

        ex = _experts(cg)
        return [[p for p, d in cg.ops() if has_role(d["kind"], "expert_act")
                 and any(p.startswith(e + "/") for e in ex)]] \
            if ex else []
    hits = [p for p, _ in cg.ops() if p.rsplit("/", 1)[-1] in names]
    if module == "mla_up_proj":   # RoPE of an MLA only (a q_b_proj / kv_b_proj beside it)
        mla = {p.rsplit("/", 1)[0] for p in hits if p.endswith("_b_proj")}
        hits = [p for p in hits if p.rsplit("/", 1)[0] in mla]
    elif module == "layernorm":   # the layer's own norms (inside a repeat), not the final one
        hits = [p for p in hits if "/" in p]
    return [hits] if hits else []


def _freed(cg, region, how) -> set[str]:
    """Storages a checkpoint of ``region`` frees (``how``: ``inside`` or ``outputs``)."""
    inside = set(region)
    made = {tid for tid, ten in cg.tensors.items() if ten.producer in inside and ten.storage == tid
            and tid not in cg.nodes}
    if how == "outputs":
        return made
    outside_saved = {cg.tensors[t].storage for p, d in cg.ops() if p not in inside for t in d["cost"].saved}
    return made - outside_saved


# ---------------------------------------------------------------- the plan


def _stage_layers(cg, layout):
    top = [g for p, g in cg.groups.items() if "/" not in p]
    total = sympy.Add(*[g.count for g in top]) if top else ONE
    return top, total / (_expr(getattr(layout, "p", 1)) * _expr(getattr(layout, "v", 1)))


def _expr(v):
    return sympy.Integer(v) if isinstance(v, int) else v


def recompute_plan(cg, layout, attention: str = "eager") -> RecomputePlan:
    """The :class:`RecomputePlan` of ``layout``'s policy on ``cg`` (a filled
    :class:`~costgraph.parallel.layout.Layout`, or any object with its
    ``recompute*`` fields, ``p`` and ``v``; a bare policy name is accepted
    too). ``attention``: ``flash`` frees and re-runs the attention core as
    the kernel does (its log-sum-exp is :mod:`costgraph.engine.activations`')."""
    if isinstance(layout, str):
        layout = _Bare(layout)
    r = layout.recompute
    choices.RECOMPUTE.check(r)
    plan = RecomputePlan(r)
    if attention == "flash":
        for core, _ in attention_regions(cg):
            _add(plan, core, _freed(cg, core, "outputs"))
    if r in ("selective", "selective-korthikanti"):
        mods = getattr(layout, "recompute_modules", None) or DEFAULT_MODULES
        if attention == "flash" and "core_attn" in mods:   # Megatron @ d98e8a64 TransformerConfig.__post_init__
            plan.warnings.append("recompute module 'core_attn' under flash attention: the kernel already "
                                 "recomputes the attention core (Megatron warns the same)")
        for m in mods:
            regions = module_regions(cg, m)
            if not regions:
                plan.warnings.append(f"recompute module '{m}' is not in model '{cg.name}': nothing recomputed for it")
            for region in regions:
                if m == "core_attn" and r == "selective-korthikanti":
                    _add(plan, region[:-1], _freed(cg, region, "inside"))
                else:
                    _add(plan, region, _freed(cg, region, MODULES[m][0]))
        return plan
    if r in ("full", "torchtitan-op", "torchtitan-layer"):
        _layers(cg, layout, plan, attention)
    return plan


def _add(plan, ops, storages, share=ONE):
    for p in ops:
        plan.rerun[p] = share
    for s in storages:
        plan.freed[s] = share


@dataclass
class _Bare:
    recompute: str
    p: int = 1
    v: int = 1
    recompute_modules: tuple | None = None
    recompute_num_layers: int | None = None
    recompute_method: str | None = None
    recompute_frequency: int | None = None


def _layers(cg, layout, plan, attention):
    """Layer checkpointing: the share ``f`` of layers checkpointed, the share
    of their inputs kept, the outputs cached inside them, the layers live."""
    top, per_stage = _stage_layers(cg, layout)
    if not top:
        return
    n = getattr(layout, "recompute_num_layers", None) or 1
    carried_share, f, plan.live = ONE, ONE, ONE
    if plan.policy == "full" and (getattr(layout, "recompute_method", None) or "uniform") == "uniform":
        carried_share = sympy.ceiling(per_stage / n) / per_stage if n != 1 else ONE
        plan.live = sympy.Min(n, per_stage) if n != 1 else ONE   # the longest run: N layers, or the stage's
    elif plan.policy == "full":
        f = sympy.Min(ONE, n / per_stage)
    elif plan.policy == "torchtitan-layer":
        f = layer_frequency_share(cg, layout)
    plan.layer_share = f
    cached = torchtitan_saved(cg, attention) if plan.policy == "torchtitan-op" else set()
    carried = {f"{g.path}/{name}@in" for g in top for name in g.carried}
    keep = carried | {cg.tensors[o].storage for p in cached for o in cg.nodes[p]["outputs"]}
    saved = set()
    for p, d in cg.ops():
        if not any(p.startswith(g.path + "/") for g in top):
            continue
        if p not in cached and plan.rerun.get(p) != 1:
            plan.rerun[p] = f
        for tid in d["cost"].saved:
            sid = cg.tensors[tid].storage
            saved.add(sid)
            if sid in carried:
                if carried_share != 1:
                    plan.freed[sid] = ONE - carried_share
            elif sid not in keep:
                plan.freed[sid] = f if plan.freed.get(sid) != 1 else ONE
    for sid in sorted(keep - saved):
        if sid in cg.tensors:
            plan.extras.append((sid, f * (carried_share if sid in carried else ONE)))


def layer_frequency_share(cg, layout) -> sympy.Expr:
    """``torchtitan-layer``'s share of the blocks checkpointed: ``floor(l/n) / l`` of the ``l`` top-level
    blocks, ``n`` the layout's ``recompute_frequency`` (default :data:`DEFAULT_FREQUENCY`)."""
    top = [g for p, g in cg.groups.items() if "/" not in p]
    if not top:
        return sympy.Integer(0)
    k = getattr(layout, "recompute_frequency", None) or DEFAULT_FREQUENCY
    total = sympy.Add(*[g.count for g in top])
    return sympy.floor(total / k) / total


def collective_rerun(cg, layout, kind: str, op: str) -> sympy.Expr:
    """The share of a layer's forward collectives of parallelism ``kind`` (``tp``, ``cp``, ``ep``) and collective
    ``op`` (``all-gather``, ``reduce-scatter``, ``all-reduce``, ``all-to-all``) that run again in the backward
    under ``layout``'s recompute policy (a recomputed layer replays its forward, its collectives with it):

    - ``full``: 1 (Megatron-LM's ``checkpointed_forward`` and torchtitan's full AC re-run the whole layer);
    - ``torchtitan-layer``: :func:`layer_frequency_share` (its checkpointed blocks replay everything);
    - ``torchtitan-op``: what is not on the save list re-runs (torchtitan @ 9dec370 parallelize_llama.py
      ``_save_list``, @ 1f029641 models/llama3/parallelize.py ``_op_sac_save_list``:
      ``_c10d_functional.reduce_scatter_tensor`` and, at 1f029641, ``all_to_all_single`` are on it,
      ``all_gather_into_tensor`` and ``all_reduce`` are not): TP's forward all-gathers (the sequence-parallel
      inputs of the column-parallel linears) and all-reduces 1, its reduce-scatters 0; EP's all-to-all 0;
      CP's K/V exchange 0 (inside the attention op, whose output is saved);
    - otherwise 0 (Megatron's selective modules re-run no collective)."""
    r = layout.recompute
    if r == "full":
        return ONE
    if r == "torchtitan-layer":
        return layer_frequency_share(cg, layout)
    if r == "torchtitan-op" and kind == "tp" and op in ("all-gather", "all-reduce"):
        return ONE
    return sympy.Integer(0)


def torchtitan_saved(cg, attention: str = "eager") -> list[str]:
    """The ops whose outputs torchtitan's op-level SAC caches (torchtitan @
    1f029641 ``_apply_op_sac``): in each top-level layer, the ``linear``\\ s
    counted in graph order, the 1st, 3rd, 5th, … saved (``mm_count % 2 == 0``
    recomputed), the MoE router never (``force_recompute_mm_shapes_by_fqns``
    = ``moe.router.gate``, not counted); with ``attention = flash`` the
    attention core's output (SDPA is on the save list; a ``bmm`` of the
    eager graph is not)."""
    from ..ops.registry import has_role

    top = [g.path for p, g in cg.groups.items() if "/" not in p]
    out = []
    for g in top:
        count = 0
        for p, d in cg.ops():
            if not p.startswith(g + "/") or d["kind"] != "linear":
                continue
            if has_role(d["kind"], "router") and _is_router(cg, p):
                continue
            count += 1
            if count % 2 == 1:
                out.append(p)
    if attention == "flash":
        out += [closing for _, closing in attention_regions(cg)]
    return out


def _is_router(cg, path) -> bool:
    last = cg.tensors[cg.nodes[path]["outputs"][0]].shape[-1] if cg.nodes[path]["outputs"] else None
    return last is not None and any(sympy.expand(last - cg.groups[e].count) == 0 for e in _experts(cg))
