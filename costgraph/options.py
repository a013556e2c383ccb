"""The training options, declared once with their search domain (SymPy-free).

Each :class:`Option` names a :class:`~costgraph.parallel.layout.Layout` field (or the
micro-batch ``b``), its ``costgraph train`` flag, a help line, its choices (from
:mod:`costgraph.choices`), its default and unit, and — where the planner searches it —
its **search domain**: a function of the :class:`Space` (the model's layer and expert
counts, the device count, what the user allows) giving the values to try. The planner's
grid of degrees and the options it tries on every degree are generated from
:data:`TRAIN_OPTIONS` (:mod:`costgraph.training.plan_grid`); an option with no domain is
not searched, and ``not_searched`` says why (``costgraph plan`` prints both).

``kind``: ``degree`` (a column of the grid: the layout's degrees and the micro-batch),
``split`` (the pipeline's layer split, per ``p``), or ``option`` (tried on every layout of
degrees: ZeRO, recomputation, SP). Issue 31 item 1 (typed options) starts here for
training: the argparse sections and the API keywords still have their own lists.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from . import choices


@dataclass(frozen=True)
class Space:
    """What the search domains read: ``gpus``; ``max_tp`` (the scale-up domain, at most 64);
    ``layers`` (the iterations of the model's top-level repeat groups together) and ``stacks``
    (how many such groups); ``experts`` (the expert count of each routed-expert group);
    ``micro_batches`` and ``cp`` (the candidate ``b`` and ``c``, as given to the planner);
    ``attention`` (the kernel: flash recomputes the attention core itself)."""

    gpus: int
    max_tp: int
    layers: int
    stacks: int = 1
    experts: tuple = ()
    micro_batches: tuple = (1, 2, 4, 8, 16, 32)
    cp: tuple = (1, 2, 4, 8)
    attention: str = choices.ATTENTION.default


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


def _expert_degrees(s: Space) -> tuple[int, ...]:
    """1, and every divisor > 1 of an expert count up to the device count."""
    return (1,) + tuple(sorted({k for n in s.experts for k in divisors(n, s.gpus) if k > 1}))


def virtual_stages(s: Space, p: int) -> tuple[int, ...]:
    """The interleaved schedule's model chunks per device: ``v > 1`` with ``p·v`` dividing the
    layers; none for ``p = 1``."""
    if p == 1 or s.layers % p:
        return ()
    return tuple(v for v in divisors(s.layers // p) if v > 1)


#: the pipeline schedules searched for ``p > 1`` (costgraph.parallel.schedules; GPipe keeps every
#: micro-batch in flight at 1F1B's bubble: never better, not searched)
SCHEDULES_SEARCHED = ("1f1b", "interleaved", "zb-h1", "dualpipe")


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


#: Every training option that changes memory or time, once (module docstring).
TRAIN_OPTIONS: tuple[Option, ...] = (
    Option("t", "--tp", "tensor-parallel degree", 1, unit="devices", kind="degree",
           domain=lambda s: powers_of_two(min(s.max_tp, s.gpus))),
    Option("p", "--pp", "pipeline-parallel degree", 1, unit="stages", kind="degree",
           domain=lambda s: divisors(s.gpus, max(s.layers, 1))),
    Option("c", "--cp", "context-parallel degree", 1, unit="devices", kind="degree", domain=lambda s: s.cp),
    Option("e", "--ep", "expert-parallel degree", 1, unit="devices", kind="degree", domain=_expert_degrees),
    Option("b", "--set b=", "micro-batch size", 1, unit="sequences", kind="degree",
           domain=lambda s: s.micro_batches),
    Option("v", "--virtual-stages", "model chunks per device (the interleaved schedule)", 1, kind="split",
           domain=virtual_stages),
    Option("split", "--decoder-first/last-pipeline-num-layers, --account-for-*", "the pipeline's layer split",
           None, kind="split", domain=uneven_splits),
    Option("zero", "--zero", "ZeRO stage", choices.ZERO_STAGE.default, choices.ZERO_STAGE.values,
           domain=lambda s: choices.ZERO_STAGE.values),
    Option("recompute", "--recompute", "recompute policy", choices.RECOMPUTE.default, choices.RECOMPUTE.values,
           domain=lambda s: tuple(r for r in choices.RECOMPUTE_SEARCHED
                                  if not (r == "selective" and s.attention == "flash"))),
    Option("sp", "--sp", "sequence parallelism (needs t > 1)", False, (False, True), domain=lambda s: (False, True)),
    Option("schedule", "--schedule", "pipeline schedule", choices.SCHEDULE.default, choices.SCHEDULE.values,
           kind="split", domain=schedules),
    Option("recompute_modules", "--recompute-modules", "Megatron's selective modules", None,
           not_searched="the default module set of each policy only"),
    Option("recompute_num_layers", "--recompute-num-layers", "Megatron's full-recompute layer count", None,
           not_searched="every layer only"),
    Option("ep_overlap", "--ep-overlap", "EP all-to-all overlap", choices.EP_OVERLAP.default,
           choices.EP_OVERLAP.values, not_searched="the default (none) only"),
    Option("route_nodes", "--route-nodes", "nodes a token's experts are confined to", None,
           not_searched="unconfined only"),
    Option("policy", "--precision", "precision policy (FP8 policies)", choices.DEFAULT_POLICY,
           not_searched="the given --precision only (FP8 not searched)"),
    Option("offload_optimizer", "--offload-optimizer", "optimizer offload", choices.OFFLOAD_DEVICE.default,
           choices.OFFLOAD_DEVICE.values, not_searched="never offloaded"),
)

#: by field name
BY_FIELD: dict[str, Option] = {o.field: o for o in TRAIN_OPTIONS}
#: the options tried on every layout of degrees (the screen derives their closed forms per value)
SEARCHED_OPTIONS: tuple[Option, ...] = tuple(o for o in TRAIN_OPTIONS if o.kind == "option" and o.domain)


def searched(space: Space) -> dict[str, list]:
    """Option → the values searched in ``space`` (JSON values; for the per-``p`` options —
    schedule, ``v``, layer split — every value tried at some ``p``; the grid keeps those
    train accepts)."""
    out = {o.field: list(o.domain(space)) for o in TRAIN_OPTIONS if o.domain and o.kind != "split"}
    for o in TRAIN_OPTIONS:
        if o.kind == "split" and o.domain:
            vals = list(dict.fromkeys(x for p in out["p"] for x in o.domain(space, p)))
            if o.field == "v":
                vals = [1] + sorted(vals)
            out[o.field] = [list(x) if isinstance(x, tuple) else x for x in vals]
    return out


def not_searched() -> dict[str, str]:
    """Option → why it is not searched (the value used is the given or the default one)."""
    return {o.field: o.not_searched for o in TRAIN_OPTIONS if not o.domain}
