"""Data parallelism and ZeRO: the collectives of the gradients and parameters a device's DP group shares.

``dp_grads`` (ZeRO 0: one all-reduce of the gradients per step), ``zero_reduce_scatter`` and
``zero_all_gather`` (ZeRO 1, 2; Megatron's distributed optimizer), ``fsdp`` (ZeRO 3 and HSDP), dense
weights over the DP × CP group and routed experts over the expert-DP group: the conventions, bytes and
sources are the module docstring of :mod:`costgraph.parallel.communication`, which calls
:func:`dp_collectives`.
"""

from __future__ import annotations

from .collectives import Collective, Transfer
from .comm_step import ONE, ZERO, Expr, _Step, _trivial


def dp_collectives(x: _Step) -> dict[str, Collective]:
    """``dp_grads`` (ZeRO 0), ``zero_reduce_scatter`` + ``zero_all_gather``
    (ZeRO 1, 2) or ``fsdp`` (ZeRO 3, HSDP) of the stage's weights: dense ones
    over the DP × CP group, routed experts over the expert-DP group."""
    pl, L = x.pl, x.L
    dense, experts = ZERO, ZERO
    for wid, w in x.cg.weights.items():
        f = x.stage.weight_factor(wid)
        if f == 0 or (w.frozen and L.zero < 3):   # a frozen weight: no gradient to reduce, nothing updated
            continue
        el = w.count * w.numel / pl.weight_divisor(wid) * f
        if wid in pl.expert_weights:
            experts += el
        else:
            dense += el
    groups = ([("dense", dense, pl.groups["dp"])] if dense != 0 else []) + \
        ([("experts", experts, pl.groups["expert_dp"])] if experts != 0 else [])
    if not groups or (_trivial(L.d) and _trivial(L.c) and not experts):
        return {}
    if L.zero == 0:
        return {"dp_grads": Collective("dp_grads", tuple(
            Transfer(f"{lab} gradients (step)", "all-reduce", g.size, g.stride, el, x.grad_bytes, ONE, g.factors)
            for lab, el, g in groups))}
    rs, ag, fs = [], [], []
    for lab, el, g in groups:
        _zero(x, lab, el, g, rs, ag, fs)
    if L.zero == 3:
        return {"fsdp": Collective("fsdp", tuple(fs))}
    return {"zero_reduce_scatter": Collective("zero_reduce_scatter", tuple(rs)),
            "zero_all_gather": Collective("zero_all_gather", tuple(ag))}


def _zero(x: _Step, lab: str, el: Expr, group, rs: list, ag: list, fs: list) -> None:
    """The ZeRO 1–3 transfers of one DP group's ``el`` elements (module docstring)."""
    L, m, gb, wb = x.L, x.pl.degree("m"), x.grad_bytes, x.weight_bytes
    n, s = group.size, group.stride
    sharded = L.hsdp is not None and lab != "experts"
    g = x.pl.groups["hsdp"].size if sharded else n
    fsx = () if sharded else group.factors
    if L.zero == 3:
        units = x.stage.units()
        fs.append(Transfer(f"{lab} parameters (forward)", "all-gather", g, s, el / units, wb, m * units, fsx))
        fs.append(Transfer(f"{lab} parameters (backward)", "all-gather", g, s, el / units, wb, m * units, fsx))
        fs.append(Transfer(f"{lab} gradients (backward)", "reduce-scatter", g, s, el / units, gb, m * units, fsx))
    else:
        rs.append(Transfer(f"{lab} gradients ({'step' if L.zero == 1 else 'backward'})",
                           "reduce-scatter", g, s, el, gb, ONE if L.zero == 1 else m, fsx))
        ag.append(Transfer(f"{lab} parameters (step)", "all-gather", g, s, el, wb, ONE, fsx))
    if sharded:   # HSDP: the shard's gradients across the replicas
        rep = x.pl.groups["hsdp_replicas"]
        (fs if L.zero == 3 else rs).append(Transfer(
            f"{lab} gradient shard across {rep.size} replicas (step)", "all-reduce", rep.size, rep.stride, el / g,
            gb, m if L.zero == 2 else ONE))
