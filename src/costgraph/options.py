"""The planner's search space, generated from the option declarations (SymPy-free).

Each searched setting of a layout is declared once, as a field of
:class:`costgraph.layout_options.LayoutOptions` (the :class:`~costgraph.parallel.layout.Layout`'s
fields) whose spec carries a :class:`~costgraph.option_fields.Domain`: its kind, the name of its
**search domain** here (a function of the :class:`Space` — the model's layer and expert counts, the
device count, what the user allows — giving the values to try), why its other values are not searched
by default, and a variant's group and requirements. :func:`search_options` generates
:data:`TRAIN_OPTIONS` (one :class:`Option` per searched setting: the field's flag, help, default,
choices and unit with its domain) from those fields and :data:`NOT_FIELDS` (the micro-batch ``b``, a
dimension of the model); the planner's grid of degrees and the options it tries on every degree are
read from it (:mod:`costgraph.training.plan_grid`); an option with no domain is not searched, and
``not_searched`` says why (``costgraph plan`` prints both, its JSON says the same).

``kind``: ``degree`` (a column of the grid: the layout's degrees and the micro-batch),
``split`` (the pipeline's schedule and layer split, per ``p``), ``option`` (tried on every layout of
degrees: ZeRO, recomputation, SP), or ``variant`` (tried on every layout too, each value with
its own closed forms: Megatron's recompute modules, method and layer counts, the MoE's EP
overlap and node-limited routing, FP8 policies, offload; :func:`variants` gives their combinations
per group, the first value of each domain being the default, ``extra["requires"]`` what a value
needs of the other options; :mod:`costgraph.training.plan_variants` derives and screens them).
A new searched option is one field with a ``domain`` (``tests/test_option_fields.py`` adds one).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

from . import choices
from .layout_options import LayoutOptions
from .option_fields import specs


@dataclass(frozen=True)
class Space:
    """What the search domains read: ``gpus``; ``max_tp`` (the scale-up domain, at most 64);
    ``layers`` (the iterations of the model's top-level repeat groups together) and ``stacks``
    (how many such groups); ``experts`` (the expert count of each routed-expert group);
    ``micro_batches`` and ``cp`` (the candidate ``b`` and ``c``, as given to the planner); ``seq`` (the
    sequence length ``s`` the model is planned at, 0 where unknown: :func:`context_degrees` reads it);
    ``attention`` (the kernel: flash recomputes the attention core itself); ``modules``
    (Megatron's recompute modules found on the graph, :data:`costgraph.engine.recompute.MODULES`);
    ``top_k`` (the experts a token is routed to, 0 without routed experts); ``domains`` (the
    scale-up domains the devices span); ``fp8_policies`` (the FP8 precision policies, empty when
    the preset has no FP8 peak); ``allow_fp8``/``allow_offload`` (``plan --allow-fp8``,
    ``--allow-offload``); ``exhaustive`` (``plan --exhaustive``: the variants that each cost a
    derivation per value and are not searched by default); ``mtp`` (the MTP depths, which a
    pipeline layout text places with the loss)."""

    gpus: int
    max_tp: int
    layers: int
    stacks: int = 1
    experts: tuple = ()
    micro_batches: tuple = (1, 2, 4, 8, 16, 32)
    cp: tuple = (1, 2, 4, 8)
    seq: int = 0
    attention: str = choices.ATTENTION.default
    #: plan's ``--overlap``: the framework whose recompute policies are searched (:func:`recompute_policies`)
    overlap: str = choices.OVERLAP.default
    modules: tuple = ()
    top_k: int = 0
    domains: int = 1
    fp8_policies: tuple = ()
    allow_fp8: bool = False
    allow_offload: bool = False
    exhaustive: bool = False
    #: the model's MTP depths (the repeat groups after its output head, among ``layers``; Megatron's ``m``)
    mtp: int = 0


@dataclass(frozen=True)
class Option:
    """One training option (module docstring). ``domain(space)`` (or ``domain(space, p)`` for
    ``kind == "split"``) gives the values the planner tries; None: not searched, for the
    reason ``not_searched``."""

    field: str
    flag: str
    help: str
    default: object
    choices: tuple | None = None
    unit: str | None = None
    kind: str = "option"
    domain: Callable | None = None
    not_searched: str = ""
    extra: dict = field(default_factory=dict)


def powers_of_two(limit: int) -> tuple[int, ...]:
    """1, 2, 4, … up to ``limit``."""
    out, x = [], 1
    while x <= limit:
        out.append(x)
        x *= 2
    return tuple(out)


def divisors(n: int, limit: int | None = None) -> tuple[int, ...]:
    """The divisors of ``n`` (at most ``limit``), ascending (trial division up to √n)."""
    small, large, k = [], [], 1
    while k * k <= n:
        if n % k == 0:
            small.append(k)
            if k != n // k:
                large.append(n // k)
        k += 1
    out = small + large[::-1]
    return tuple(x for x in out if limit is None or x <= limit)


def expert_degrees(s: Space) -> tuple[int, ...]:
    """1, and every divisor > 1 of an expert count up to the device count."""
    return (1,) + tuple(sorted({k for n in s.experts for k in divisors(n, s.gpus) if k > 1}))


def virtual_stages(s: Space, p: int) -> tuple[int, ...]:
    """The interleaved schedule's model chunks per device: ``v > 1`` with ``p·v`` dividing the
    layers; none for ``p = 1``."""
    if p == 1 or s.layers % p:
        return ()
    return tuple(v for v in divisors(s.layers // p) if v > 1)


#: the pipeline schedules searched for ``p > 1`` (costgraph.parallel.schedules)
SCHEDULES_SEARCHED = ("1f1b", "interleaved", "zb-h1", "dualpipe", "gpipe")
#: schedule → (the schedule that dominates it, why): its rows are pruned by that bound, not derived. GPipe
#: runs 1F1B's bubble ((p − 1) micro-batch slots; Huang et al. 2019, Narayanan et al. 2021 §2.2) with every
#: micro-batch in flight (1F1B: at most p): its step time equals its 1F1B twin's, its memory is at least it
#: (tests/training/test_plan_variants.py checks both on train)
DOMINATED_SCHEDULES = {"gpipe": ("1f1b", "GPipe: its 1F1B twin has the same step time and no more memory")}


def schedules(s: Space, p: int) -> tuple[str, ...]:
    """The schedules tried at ``p``: none but 1F1B's (no pipeline) for ``p = 1``."""
    return ("1f1b",) if p == 1 else SCHEDULES_SEARCHED


def uneven_splits(s: Space, p: int) -> tuple[tuple, ...]:
    """The pipeline layer splits tried at ``p``: ``(first, last, embedding, loss)``. The even
    split always; where it is refused (``p`` does not divide the layers), Megatron's other
    splits that come out whole: the embedding and/or the loss counted as a layer
    (``--account-for-*``), and the most balanced first/last stage counts (both orders) with
    the rest even (``--decoder-first/last-pipeline-num-layers``). Validity is
    :func:`costgraph.parallel.layer_split.check_split`'s (the grid asks it)."""
    out = [(None, None, False, False)]
    if p == 1 or s.layers % p == 0:
        return tuple(out)
    out += [(None, None, e, l) for e, l in ((True, False), (False, True), (True, True))
            if (s.layers + e + l) % p == 0]
    if p > 2:
        for q in range(s.layers // p + 1, s.layers // (p - 2) + 1):   # the middle stages' count
            rest = s.layers - q * (p - 2)
            if 0 <= rest < 2 * q:
                f = rest // 2
                out += [(f, rest - f, False, False)] + ([(rest - f, f, False, False)] if rest - f != f else [])
                break
    return tuple(out)


def chunk_layout(layers: int, n: int, mtp: int = 0) -> str | None:
    """Megatron's ``--pipeline-model-parallel-layout`` text of ``layers`` Transformer layers over ``n``
    model chunks, written as Megatron-Bridge writes DeepSeek-V3's (Megatron-Bridge 067f987
    ``recipes/deepseek/deepseek_v3.py::_get_deepseek_v3_pipeline_layout``, and
    ``perf_recipes/deepseek/h100/deepseek_v3.py``'s ``"Et|(tt|)*30mL"`` for PP 8 × VP 4): every middle
    chunk ``q = ⌈layers/n⌉`` layers, the first chunk the embedding and as many of the remaining
    ``r = layers − (n − 2)·q`` as ``q`` allows, the last chunk the rest with the ``mtp`` MTP depths and
    the loss. The rule gives each of the map's seven layouts and the H100 text (tests/training/test_options.py).
    None where ``r < 0`` (more chunks than the layers fill) or ``n < 2``."""
    from .parallel.pipeline_layout import format_layout

    if n < 2 or layers < 1:
        return None
    q = -(-layers // n)
    rest = layers - (n - 2) * q
    if rest < 0:
        return None
    first = min(q, rest)
    return format_layout(["E" + "t" * first] + ["t" * q] * (n - 2) + ["t" * (rest - first) + "m" * mtp + "L"])


def chunk_layouts(s: Space, p: int) -> tuple[tuple[int, str], ...]:
    """The chunk layout texts tried at ``p`` where no even split exists: ``(v, text)`` of
    :func:`chunk_layout` for every ``v > 1`` whose ``p·v`` model chunks do not divide the model's
    Transformer layers (``layers`` less the ``mtp`` depths, which the text puts with the loss), up to
    one layer a chunk with the embedding and the loss each a chunk of their own (``p·v ≤ layers + 2``: the
    Llama 3 paper, arXiv 2407.21783 §3.3.2, "the first model chunk on the first stage has only the
    embedding, and the last model chunk on the last stage has only output projection and loss
    calculation": Llama 3 405B's 126 layers over PP 16 × V 8 as ``E|(t|)*126L``). ``v = 1`` is the
    first/last split's (:func:`uneven_splits`), a ``p·v`` that divides the layers the ``v`` domain's
    (:func:`virtual_stages`)."""
    from .parallel.pipeline_layout import MAX_STAGES

    L = s.layers - s.mtp
    if p == 1 or L < 1:
        return ()
    out = []
    for v in range(2, (L + 2) // p + 1):   # + 2: the embedding's and the loss's chunks, each alone
        text = chunk_layout(L, p * v, s.mtp) if L % (p * v) and p * v <= MAX_STAGES else None
        if text is not None:
            out.append((v, text))
    return tuple(out)


def _subsets(items: tuple) -> tuple[tuple, ...]:
    """Every non-empty subset of ``items`` (in their order), smallest first."""
    return tuple(c for k in range(1, len(items) + 1) for c in itertools.combinations(items, k))


def recompute_modules(s: Space) -> tuple:
    """None (each policy's default set), then every set of the recompute modules the graph has
    (Megatron's ``--recompute-modules``; ``core_attn`` only without flash, whose kernel
    recomputes the core itself) but the default ``core_attn`` alone: only with ``--exhaustive``."""
    if not s.exhaustive:
        return (None,)
    mods = tuple(m for m in s.modules if not (m == "core_attn" and s.attention == "flash"))
    return (None,) + tuple(x for x in _subsets(mods) if x != ("core_attn",))


def recompute_layers(s: Space) -> tuple:
    """None (every layer, Megatron's default ``uniform`` 1), then Megatron's ``--recompute-method``
    ``block`` with ``--recompute-num-layers`` N (the first N layers of each stage checkpointed) and
    ``uniform`` N from 2 (runs of N layers: fewer inputs kept, N layers live), N the powers of two
    below the layers (each value derives its own forms): only with ``--exhaustive``."""
    if not s.exhaustive:
        return (None,)
    ns = powers_of_two(max(s.layers - 1, 1))
    return (None,) + tuple(("block", n) for n in ns) + tuple(("uniform", n) for n in ns if n > 1)


def ep_overlaps(s: Space) -> tuple:
    """The EP overlap modes for a model with routed experts (only ``none`` without, or without
    ``--exhaustive``)."""
    return choices.EP_OVERLAP.values if s.experts and s.exhaustive else (choices.EP_OVERLAP.default,)


def route_nodes(s: Space) -> tuple:
    """None (unconfined), then every domain count below the token's ``top_k`` experts that the
    devices span more of (DeepSeek-V3's node-limited routing, §3.2): with routed experts on
    several scale-up domains, and ``--exhaustive``."""
    if not (s.experts and s.exhaustive) or s.domains < 2:
        return (None,)
    return (None,) + tuple(range(1, min(s.top_k, s.domains)))


def fp8_policies(s: Space) -> tuple:
    """The given precision (None), then each FP8 policy of ``policies.toml`` with ``--allow-fp8`` on a
    preset with an FP8 peak."""
    return (None,) + (s.fp8_policies if s.allow_fp8 else ())


def offload_devices(s: Space) -> tuple:
    """``none``, then ``cpu`` and ``nvme`` with ``--allow-offload``."""
    return choices.OFFLOAD_DEVICE.values if s.allow_offload else (choices.OFFLOAD_DEVICE.default,)


#: the share of the layers whose activations Megatron-Bridge's Llama-3-70B GB200 offload recipe sends to the host:
#: llama3_70b_pretrain_64gpu_gb200_fp8cs_config, cpu_offloading_num_layers 40 of Llama-3-70B's 80 (Megatron-Bridge
#: 067f987 docs/performance-summary-archive.md, 26.04.01, LLAMA3_70B DGX-GB200 FP8; bench/published_layouts.toml),
#: as the CLI writes it (--offload-activations 0.5). Not its only offload recipe: Megatron-Bridge @ 23571b8
#: src/megatron/bridge/recipes/llama/llama31_perf.py offloads 40, 10 and 92 of Llama 3.1 405B's 126 layers
#: (llama31_405b_pretrain_128gpu_gb300_bf16_config, ..._gb300_fp8cs_config, ..._gb200_fp8cs_config), fractions
#: plan does not search (one value, the bench row's)
OFFLOAD_FRACTION = "0.5"


def offload_fractions(s: Space) -> tuple:
    """Activation offload (Transformer Engine's ``cpu_offloading``): ``False`` (none), then with
    ``--allow-offload`` :data:`OFFLOAD_FRACTION` of the layers (Megatron's ``--cpu-offloading-num-layers``
    ``L/2``; its other counts, 1 to ``L − 1``, each a derivation of its own, are not searched)."""
    return (False,) + ((OFFLOAD_FRACTION,) if s.allow_offload else ())


def tensor_degrees(s: Space) -> tuple[int, ...]:
    """``t``: the powers of two up to the scale-up domain (at most 64) and the device count."""
    return powers_of_two(min(s.max_tp, s.gpus))


def pipeline_degrees(s: Space) -> tuple[int, ...]:
    """``p``: the divisors of the device count, at most the layers."""
    return divisors(s.gpus, max(s.layers, 1))


#: the fewest tokens of the sequence a CP rank holds in the published long-context layouts: the Llama 3 paper's
#: 131,072-token stage at CP 16 (arXiv 2407.21783 v3, §3.3.2 and Table 4, row "16,384 GPUs, CP 16": 131,072 / 16 =
#: 8,192 tokens a rank), below torchtitan's CP 8 at 262,144 (pytorch/torchtitan @ b5bcd76
#: benchmarks/llama3_h100_202412_torchtitan.md, Table 2: 32,768 a rank); bench/published_layouts.toml holds both rows
MIN_CP_TOKENS = 8192


def context_degrees(s: Space) -> tuple[int, ...]:
    """``c``: the candidates given to the planner (``cp_options``, 1, 2, 4, 8 by default), then every larger
    power of two up to the device count at which each CP rank still holds at least :data:`MIN_CP_TOKENS` of the
    ``seq`` tokens (``seq ≥ 8,192·c``: CP 16 at 131,072 tokens, as the Llama 3 paper ran it; none at 65,536 or
    less). Whether ``c`` divides the sequence (Megatron's load-balanced split in ``2c`` chunks) the grid asks
    train's check (:mod:`costgraph.training.plan_grid`)."""
    top = max(s.cp, default=0)
    return tuple(s.cp) + tuple(c for c in powers_of_two(s.gpus) if c > top and s.seq >= MIN_CP_TOKENS * c)


def micro_batches(s: Space) -> tuple[int, ...]:
    """``b``: the candidates given to the planner."""
    return s.micro_batches


def zero_stages(s: Space) -> tuple[int, ...]:
    """Every ZeRO stage."""
    return choices.ZERO_STAGE.values


def recompute_policies(s: Space) -> tuple[str, ...]:
    """The recompute policies searched: those the framework of plan's ``--overlap`` runs
    (:data:`costgraph.choices.RECOMPUTE_BY_OVERLAP`; all of :data:`~costgraph.choices.RECOMPUTE_PLANNED` under
    ``none``), not ``selective`` under flash attention (the kernel recomputes the same core; torchtitan's
    per-op SAC under either, its flash core's output on the save list)."""
    policies = choices.RECOMPUTE_BY_OVERLAP.get(s.overlap, choices.RECOMPUTE_PLANNED)
    return tuple(r for r in policies if not (r == "selective" and s.attention == "flash"))


def sequence_parallel(s: Space) -> tuple[bool, ...]:
    """SP off and on."""
    return (False, True)


#: the order of the kinds in :data:`TRAIN_OPTIONS` (the grid's columns, the options on every layout, the
#: per-``p`` splits, the variants), each kind in its declaration order
KINDS = ("degree", "option", "split", "variant")

#: Searched options that are no field of the layout (:mod:`costgraph.layout_options`): the micro-batch ``b``
#: (a dimension of the model, ``--set b=``). A new searched option of the layout is a field with a ``domain``.
NOT_FIELDS: tuple[Option, ...] = (
    Option("b", "--set b=", "micro-batch size", 1, unit="sequences", kind="degree", domain=micro_batches),
)


def search_options(cls=LayoutOptions, extra: tuple = NOT_FIELDS) -> tuple[Option, ...]:
    """The planner's search space, generated from the declarations (the one function the planner's
    domains are read through): an :class:`Option` for every field of ``cls`` whose spec has a
    :class:`~costgraph.option_fields.Domain` (its ``values`` a function here by name, or a callable; its
    key, flag, help, default, choices and unit the field's), and the ``extra`` options that are no field
    (:data:`NOT_FIELDS`, after the fields of their kind), ordered by :data:`KINDS`, each kind in
    declaration order."""
    out = []
    for name, (f, spec) in specs(cls).items():
        d = spec.domain
        if d is None:
            continue
        values = d.values if callable(d.values) else globals()[d.values]
        out.append(Option(d.key or name, d.flag or spec.flag, spec.help or name, f.default,
                          None if d.key else spec.values, spec.unit,
                          d.kind, values, d.not_searched, dict(d.extra or {})))
    return tuple(sorted(out + list(extra), key=lambda o: KINDS.index(o.kind)))


#: Every training option that changes memory or time, once (module docstring): generated from the fields
TRAIN_OPTIONS: tuple[Option, ...] = search_options()



def views(options: tuple[Option, ...]) -> tuple[dict, tuple, tuple]:
    """``(BY_FIELD, SEARCHED_OPTIONS, VARIANT_OPTIONS)`` of ``options``: by field name; the options tried
    on every layout of degrees (the screen derives their closed forms per value); the options each value
    of which gets its own closed forms (:func:`variants`)."""
    return ({o.field: o for o in options}, tuple(o for o in options if o.kind == "option" and o.domain),
            tuple(o for o in options if o.kind == "variant"))


#: by field name; the options on every layout of degrees; the variants (:func:`views`)
BY_FIELD, SEARCHED_OPTIONS, VARIANT_OPTIONS = views(TRAIN_OPTIONS)


def searched(space: Space) -> dict[str, list]:
    """Option → the values searched in ``space`` (JSON values; for the per-``p`` options —
    schedule, ``v``, layer split — every value tried at some ``p``; the grid keeps those
    train accepts; a variant searched with its default value only is left out: ``not_searched``
    names it)."""
    out = {o.field: list(o.domain(space)) for o in TRAIN_OPTIONS if o.domain and o.kind not in ("split", "variant")}
    for o in TRAIN_OPTIONS:
        if o.kind == "split" and o.domain:
            vals = list(dict.fromkeys(x for p in out["p"] for x in o.domain(space, p)))
            if o.field == "v":
                vals = [1] + sorted(vals)
            out[o.field] = [list(x) if isinstance(x, tuple) else x for x in vals]
    for o in VARIANT_OPTIONS:
        vals = o.domain(space)
        if len(vals) > 1:
            out[o.field] = [list(x) if isinstance(x, tuple) else x for x in vals]
    return out


def not_searched(space: Space | None = None) -> dict[str, str]:
    """Option → why it is not searched (the value used is the given or the default one): the
    options without a domain, and the variants whose domain in ``space`` is their default only
    (every variant without a ``space``)."""
    out = {o.field: o.not_searched for o in TRAIN_OPTIONS
           if not o.domain or (o.kind == "variant" and (space is None or len(o.domain(space)) < 2))}
    return out if space is None or len(variant_groups(space)) < 2 else {**out, "variant combinations": ACROSS_GROUPS}


def _requires(o: Option, value) -> dict:
    """What ``value`` of variant ``o`` needs of the other options (field → allowed values)."""
    req = o.extra.get("requires", {})
    if value is None or value == o.default:
        return {}
    return req.get(value, {}) if value in req or all(isinstance(v, dict) for v in req.values()) else req


#: the groups of variants searched together, every combination of their values, when each is searched: an FP8
#: policy with optimizer or parameter offload (Transformer Engine's FP8 GEMMs and DeepSpeed's offload are
#: independent settings of one run; a combination is allowed where both values' requirements meet)
JOINT_GROUPS = (("precision", "offload"),)
#: what ``not_searched`` says of the variants' combinations across groups
ACROSS_GROUPS = ("each group of variants (recompute, experts, precision, offload, activation offload) with the "
                 "others at their defaults, but FP8 policies with offload together when both are searched: the other "
                 "combinations across groups (recompute modules with FP8, …) are not searched")


def variant_groups(space: Space) -> tuple[str, ...]:
    """The groups (``extra["group"]``) of the variants searched in ``space``."""
    return tuple(dict.fromkeys(o.extra["group"] for o in VARIANT_OPTIONS if len(o.domain(space)) > 1))


def variants(space: Space) -> list[dict]:
    """The variants' combinations in ``space`` (field → value; the defaults left out: ``{}`` is the
    planner's base forms, first), each with ``"requires"`` (field → the values allowed, the
    intersection of what its values need): every combination of the values of one group's options
    (``extra["group"]``), the other groups at their defaults (:data:`ACROSS_GROUPS`: each value costs
    a derivation, and the product over the groups is thousands for a MoE), then the groups of
    :data:`JOINT_GROUPS` together (FP8 with offload) when each is searched; a combination whose
    requirements exclude each other is left out (train refuses it)."""
    out = [{"requires": {}}]
    groups = variant_groups(space)
    for group in groups:
        out += [v for v in _group_variants(space, group) if len(v) > 1]
    for joint in JOINT_GROUPS:   # FP8 with offload: each non-default combination of one with one of the other
        if all(g in groups for g in joint):
            out += _joint_variants([[v for v in _group_variants(space, g) if len(v) > 1] for g in joint])
    return out


def _joint_variants(per_group: list[list[dict]]) -> list[dict]:
    """Every combination of one variant of each group (:data:`JOINT_GROUPS`), its ``requires`` the
    intersection of theirs; a combination whose requirements exclude each other is left out."""
    out = []
    for combo in itertools.product(*per_group):
        chosen, need, ok = {}, {}, True
        for v in combo:
            chosen.update({k: x for k, x in v.items() if k != "requires"})
            for k, allowed in v["requires"].items():
                need[k] = tuple(x for x in need.get(k, allowed) if x in allowed)
                ok = ok and bool(need[k])
        if ok:
            out.append({**chosen, "requires": need})
    return out


def _group_variants(space: Space, group: str) -> list[dict]:
    """Every combination of the values of the variants of ``group``."""
    opts = [o for o in VARIANT_OPTIONS if o.extra["group"] == group and len(o.domain(space)) > 1]
    out = []
    for combo in itertools.product(*(o.domain(space) for o in opts)):
        chosen, need, ok = {}, {}, True
        for o, v in zip(opts, combo):
            if v is None or v == o.default:
                continue
            chosen[o.field] = v
            for k, allowed in _requires(o, v).items():
                need[k] = tuple(x for x in need.get(k, allowed) if x in allowed)
                ok = ok and bool(need[k])
        if ok:
            out.append({**chosen, "requires": need})
    return out
