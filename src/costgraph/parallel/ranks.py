"""Rank order and scale-up domains: which ranks each group of devices spans,
and how many of its members share a scale-up (NVLink) domain.

Rank order (Megatron-LM @ d98e8a64, ``megatron/core/parallel_state.py``,
``RankGenerator`` / ``generate_masked_orthogonal_rank_groups``)
    A rank is a mixed-radix number over the parallel dimensions in the
    layout's ``rank_order`` (``tp-cp-ep-dp-pp`` by default; Megatron's
    ``--use-tp-pp-dp-mapping`` gives ``tp-cp-ep-pp-dp``): the first name
    varies fastest, so a dimension's stride is the product of the sizes
    before it. Two grids share the order: the dense one ``(tp=t, cp=c, ep=1,
    dp=d, pp=p)`` and the expert one ``(tp=etp, cp=1, ep=e, dp=edp, pp=p)``
    with ``edp = d·c·t/(e·etp)``. A group (TP, CP, DP × CP, EP, expert DP,
    PP) is one or more *factors* ``(size, stride)``; factors one after the
    other in the order (``stride₂ = size₁·stride₁``) merge into one.
Scale-up domains (:func:`ranks_per_domain`)
    A domain holds ``R`` consecutive ranks. ``R`` is the layout's
    ``domain_ranks`` when given, else the largest power of two not above the
    preset's ``scale_up_domain`` (the **power-of-two fill** convention: a job
    of power-of-two degrees fills 64 of an NVL72 rack's 72 GPUs — 16 of its
    18 trays — and 8 of an HGX node's 8; ``--domain-ranks 72`` asks for
    consecutive ranks over all 72).
Members per domain (:func:`domain_members`)
    Of a factor ``(n, σ)``, each block of ``n·σ`` consecutive ranks holds
    ``σ`` of its groups. All ``n`` members share a domain when ``R`` is a
    multiple of ``n·σ`` (aligned blocks: no group crosses a boundary);
    ``R/σ`` of them when ``n·σ`` is a multiple of ``R`` and ``R`` of ``σ``;
    otherwise a group straddles a boundary and is counted as ``1`` (its
    worst-placed member alone: the ring or the all-to-all goes at the NIC's
    pace). When all ``W`` ranks fit one domain (``W`` at most ``domain_ranks``,
    or without it the preset's whole domain: a 72-GPU job on one NVL72) every
    group is inside it. The product over a group's factors; with symbolic degrees a
    ``Piecewise`` on the same conditions (``Mod``), so the planner's
    compiled forms and ``train`` give the same verdict for every layout.
"""

from __future__ import annotations

import sympy

from ..errors import CostgraphValueError
from ..engine.symbols import as_expr
from ..numbers.minmax import smin

Expr = sympy.Expr
ONE = sympy.Integer(1)

#: the parallel dimensions of a rank order
NAMES = ("tp", "cp", "ep", "dp", "pp")
#: Megatron's default order (``initialize_model_parallel(order="tp-cp-ep-dp-pp")``)
DEFAULT_ORDER = "tp-cp-ep-dp-pp"
#: Megatron's ``--use-tp-pp-dp-mapping``
TP_PP_DP_ORDER = "tp-cp-ep-pp-dp"


def check_order(order) -> str:
    """``order`` (``"tp-cp-ep-dp-pp"``: each of tp, cp, ep, dp, pp once, first
    fastest), lower-cased.

    Raises
    ------
    CostgraphValueError
        Not a string, or not a permutation of the five names.
    """
    names = order.lower().split("-") if isinstance(order, str) else None
    if names is None or sorted(names) != sorted(NAMES):
        raise CostgraphValueError(f"unknown rank order {order!r}",
                                  hint=f"the five names tp, cp, ep, dp, pp joined by '-', the first varying "
                                       f"fastest: {DEFAULT_ORDER} (Megatron's default) or {TP_PP_DP_ORDER}")
    return "-".join(names)


def strides(order: str, sizes: dict) -> dict:
    """Name → stride of each dimension of ``order`` with ``sizes`` (name →
    size): the product of the sizes before it (Megatron's ``prefix_product``)."""
    out, acc = {}, ONE
    for name in order.split("-"):
        out[name] = acc
        acc = acc * as_expr(sizes[name])
    return out


def factors(order: str, sizes: dict, names) -> tuple[tuple[Expr, Expr], ...]:
    """The ``(size, stride)`` factors of the group over ``names`` (Megatron's
    ``get_ranks("dp-cp")``), in the order's sequence; sizes known to be 1
    dropped, neighbours merged (module docstring)."""
    st = strides(order, sizes)
    out: list[tuple[Expr, Expr]] = []
    for name in order.split("-"):
        n = as_expr(sizes[name])
        if name not in names or n == 1:
            continue
        if out and sympy.expand(out[-1][0] * out[-1][1] - st[name]) == 0:
            out[-1] = (out[-1][0] * n, out[-1][1])
        else:
            out.append((n, st[name]))
    return tuple(out)


def ranks_per_domain(hardware, domain_ranks=None) -> int:
    """``R``, the consecutive ranks one scale-up domain holds: ``domain_ranks``
    when given, else the largest power of two ≤ ``hardware.scale_up_domain``
    (module docstring)."""
    dom = int(hardware.scale_up_domain)
    if domain_ranks is not None:
        if int(domain_ranks) > dom:
            raise CostgraphValueError(f"--domain-ranks {domain_ranks} is more than the {dom} devices of one scale-up "
                                      f"domain of {hardware.name}", hint=f"at most {dom}")
        return int(domain_ranks)
    return 1 << (dom.bit_length() - 1)


def _nonzero(x: Expr) -> Expr:
    """``max(x, 1)``: a symbolic span or stride that is 0 where the group is
    absent (the tied-embedding pair at ``p = 1``) never divides by 0 in the
    planner's compiled forms."""
    return sympy.Max(x, ONE)


def _factor_local(n: Expr, s: Expr, R: int) -> Expr:
    """Members of one factor ``(n, σ)`` that share a domain of ``R`` ranks."""
    span = n * s
    if span.is_Integer and s.is_Integer:
        if R % int(span) == 0:
            return n
        if int(span) % R == 0 and R % int(s) == 0:
            return sympy.Integer(R) / s
        return ONE
    full = sympy.Eq(sympy.Mod(R, _nonzero(span)), 0)
    part = sympy.And(sympy.Eq(sympy.Mod(span, R), 0), sympy.Eq(sympy.Mod(R, _nonzero(s)), 0))
    # R / max(σ, 1): the same where the branch holds (σ ≥ 1 there), and no division by a stride of 0 where
    # the group is absent (numpy evaluates every branch of the planner's compiled forms)
    return sympy.Piecewise((n, full), (sympy.Integer(R) / _nonzero(s), part), (ONE, True))


def one_domain(hardware, domain_ranks=None) -> int:
    """The most ranks a job may have and still sit in one domain:
    ``domain_ranks`` when given, else the preset's whole ``scale_up_domain``
    (a 72-GPU job fills one NVL72; a 6144-chip one a TPU v5p slice)."""
    return int(domain_ranks) if domain_ranks is not None else int(hardware.scale_up_domain)


def _all_in_one(world, R: int):
    """``world ≤ R`` (all ranks in one domain): ``True``/``False``, a SymPy
    condition for a symbolic ``world``, ``False`` when ``world`` is None."""
    if world is None:
        return sympy.false
    w = as_expr(world)
    return sympy.true if w.is_Integer and int(w) <= R else sympy.false if w.is_Integer else \
        sympy.Le(w, R)


def domain_members(fs, R: int, world=None, limit: int | None = None) -> Expr:
    """Members of a group of factors ``fs`` (``((size, stride), …)``) that
    share the worst-placed member's domain of ``R`` ranks, ``world`` ranks in
    all, all of them in one domain when ``world ≤ limit`` (default ``R``;
    :func:`one_domain`) (module docstring): the group size when it stays
    inside domains, ``1`` when every member is in its own."""
    whole = sympy.Mul(*[as_expr(n) for n, _ in fs]) if fs else ONE
    one = _all_in_one(world, R if limit is None else limit)
    if one == sympy.true:
        return whole
    local = sympy.Mul(*[_factor_local(as_expr(n), as_expr(s), R) for n, s in fs]) if fs else ONE
    return local if one == sympy.false else sympy.Piecewise((whole, one), (local, True))


def link_bandwidths(hw, rate: str = "nccl") -> tuple:
    """``(scale-up, scale-out)`` B/s per direction per device that collectives are timed at on ``hw``
    (a :class:`costgraph.hardware.Hardware`, or any object with its link fields): under ``rate`` ``nccl``
    (:data:`costgraph.choices.LINK_RATE`'s default) the bus bandwidth NCCL reaches
    (``scale_up_busbw``, ``scale_out_busbw``: nccl-tests' busbw, NCCL's src/graph/topo.h) where the
    preset gives it, else the line rate (a line rate of 0, no such link, stays 0); under ``line`` the vendors' line rates (``scale_up_bandwidth``,
    ``scale_out_bandwidth``: the Scaling Book's and Calculon's convention)."""
    line = (hw.scale_up_bandwidth, hw.scale_out_bandwidth)
    if rate == "line":
        return line
    bus = (getattr(hw, "scale_up_busbw", None), getattr(hw, "scale_out_busbw", None))
    return tuple(a if b is None or a == 0 else b for a, b in zip(line, bus))   # a line rate of 0: no link


def ring_scale_out(fs, R: int, out_bw, up_bw) -> Expr:
    """Bytes per second per device of a ring collective (all-reduce, all-gather,
    reduce-scatter) whose group of factors ``fs`` crosses scale-up domains of ``R``
    ranks: ``min(r·B_out, B_up)``, ``r`` the group's members on the worst-placed
    member's domain (:func:`domain_members`), ``B_out`` the scale-out bandwidth per
    device (one NIC each on an HGX node), ``B_up`` the scale-up one.

    How NCCL runs it (NVIDIA/nccl @ 5067397): an inter-node ring channel is
    ``NET n -> GPU a -> … -> GPU x -> NET m`` (``src/graph/search.cc``, the patterns
    above ``ncclTopoSearchParams``): each channel enters and leaves a node once, its
    channels take the NICs local to the communicator's GPUs in turn
    (``ncclTopoPrefNetsChannelFirst``), and the ring's bus bandwidth is
    ``nChannels · bwInter`` (``src/graph/tuning.cc``, ``ncclTopoTuneModel``), so it
    adds up over the NICs of the members on the node. Measured with nccl-tests: "with
    rings, you should get ~12 GB/s with each NIC, then ~24 when using 2 NICs, etc."
    (S. Jeaugey, NVIDIA, NVIDIA/nccl#307, DGX-1); "for NDR @ 400Gbps you should see
    46-48GB/s per NIC" (NVIDIA/nccl-tests#290, two 8×H100 nodes, ``NCCL_ALGO=RING``);
    1.6 GB all-reduces over 8 DGX-2 V100s with ``NCCL_ALGO=RING`` took 363 ms at one
    GPU per node, 173 ms at two and 132 ms at four (NVIDIA/nccl#569). The groups of a
    layout that run the same collective at once hold disjoint members, so each takes
    its own members' NICs and no NIC is counted twice. A group straddling a domain's
    boundary counts ``r = 1`` (:func:`domain_members`). Send/recv (pipeline) and the
    all-to-all (:mod:`costgraph.parallel.ep_time`) are not rings: they keep one NIC
    per device.
    """
    return smin(domain_members(fs, R) * as_expr(out_bw), as_expr(up_bw))   # SymPy's Min (numbers.minmax)


def intra_domain(fs, R: int, world=None, limit: int | None = None):
    """Whether the group of factors ``fs`` stays inside scale-up domains of
    ``R`` ranks: ``True``/``False`` with numeric degrees, a SymPy condition
    with symbolic ones (all ``world`` ranks in one domain — ``world ≤ limit``,
    default ``R`` — or every factor aligned: ``R mod (n·σ) = 0``)."""
    conds = []
    for n, s in fs:
        span = as_expr(n) * as_expr(s)
        conds.append(sympy.Eq(sympy.Mod(R, _nonzero(span)), 0) if not span.is_Integer else
                     sympy.true if R % int(span) == 0 else sympy.false)
    return sympy.Or(_all_in_one(world, R if limit is None else limit), sympy.And(*conds))


def no_zero_link(down: tuple[Expr, Expr], hardware, n) -> tuple[Expr, Expr]:
    """``down`` (the scale-out ``(latency, bandwidth)``) for a group of ``n`` devices that crosses
    nodes; a CostgraphValueError when the preset's ``scale_out_bandwidth`` is 0 (a user table may
    say so for a one-node machine) and the group has traffic (``n`` ≠ 1): its seconds would be
    bytes / 0, an undefined time, not a number (issue 30)."""
    if down[1] == 0 and as_expr(n) != 1:
        raise CostgraphValueError(
            f"hardware {hardware.key!r} has scale_out_bandwidth = 0, but this layout sends traffic between "
            f"nodes (a group of {n} devices crosses its scale-up domain)",
            hint="give the preset a scale-out bandwidth in B/s per direction (a COSTGRAPH_DATA hardware.toml), "
                 "or choose degrees whose groups stay inside one node")
    return down
