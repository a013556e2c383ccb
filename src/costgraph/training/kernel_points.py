"""Which measured points each kernel table of ``kernels.toml`` is fitted to: its own, or another preset's.

A measurement is stored once, with its source, in the table of the preset it was measured on (or
published for); a table whose curves are fitted to another preset's measurements names it with
``points_from = "<preset>"`` instead of a copy (the GB300's GEMMs: XLA's B200 table; the B200's
attention and HBM rows: cuDNN's GB200 benchmarks). Every ``*_points`` field a table calls for and does
not give is then taken from that preset, following its own ``points_from`` in turn; an attention
kernel's points are that kernel's wherever the other table keeps them (its ``attention_{d}_points``
when its ``attention_kernel`` is that kernel, else its ``attention_{kernel}_{d}_points``). The
table's own parameters stay its own: they are fitted to the points at its own preset's peak.

Refused, each located at its table's line (``kernels.toml:N:C: [gb300] ...``): points the table
needs that neither it nor its chain gives, a chain that runs in a cycle, and points given without the
parameters fitted to them. ``points_from`` naming no table is refused by :mod:`costgraph.datafiles`
(a ``ref`` field).
"""

from __future__ import annotations

from ..choices import ATTENTION_KERNEL

#: the attention kernels a table may hold curves of (as :data:`costgraph.training.kernel_table.ATTENTION_KERNELS`)
KERNELS = tuple(k for k in ATTENTION_KERNEL.values if k != "auto")
DIRECTIONS = ("forward", "backward")


def _main(entry) -> str:
    """The kernel of the entry's ``attention_forward/backward_*`` curves."""
    return entry["attention_kernel"] if "attention_kernel" in entry else ATTENTION_KERNEL.auto


#: every points field → the parameter fitted to it (a table calls for the points of each parameter it gives)
LEADS = {"gemm_points": "gemm_efficiency", "gemm_fp8_points": "gemm_fp8_efficiency", "memory_points": "memory_launch_ns",
         "gemm_sustained_points": "gemm_sustained_derate",
         **{f"attention_{d}_points": f"attention_{d}_efficiency" for d in DIRECTIONS},
         **{f"attention_{k}_{d}_points": f"attention_{k}_{d}_efficiency" for k in (*KERNELS, "fp8") for d in DIRECTIONS}}


def needed(entry) -> list[str]:
    """The points fields ``entry`` calls for: those of the parameters it gives."""
    return [key for key, lead in LEADS.items() if lead in entry]


def _measurement(entry, key: str) -> tuple:
    """What ``key`` of ``entry`` measures, the same wherever a table keeps it: an attention kernel's
    direction (``("attention", kernel, direction)``), else the key itself."""
    parts = key.split("_")
    if len(parts) == 3 and parts[0] == "attention":                    # attention_forward_points
        return ("attention", _main(entry), parts[1])
    if len(parts) == 4 and parts[0] == "attention" and parts[1] in KERNELS:   # attention_fa3_forward_points
        return ("attention", parts[1], parts[2])
    return (key,)


def _key(entry, measurement: tuple) -> str:
    """The key under which ``entry`` keeps ``measurement``."""
    if measurement[0] != "attention":
        return measurement[0]
    _, kernel, direction = measurement
    return f"attention_{direction}_points" if _main(entry) == kernel else f"attention_{kernel}_{direction}_points"


def resolve(entries) -> dict[str, dict[str, tuple]]:
    """``{table: {points field: (the entry that holds the points, its key)}}`` for every table of
    ``entries`` (validated :class:`costgraph.datafiles.Entry` s by preset), ``points_from`` followed.

    Raises CostgraphValueError (located at the table) for needed points that no table of the chain
    gives, a ``points_from`` chain that runs in a cycle, and points given without their parameters."""
    out: dict = {}
    for name, entry in entries.items():
        for key, lead in LEADS.items():
            if key in entry and lead not in entry:
                raise entry.error(f"gives {key} without {lead}", key,
                                  hint="measured points come with the parameters fitted to them")
        out[name] = {key: _find(entries, name, _measurement(entry, key), key) for key in needed(entry)}
    return out


def _find(entries, name: str, measurement: tuple, key: str) -> tuple:
    """``(entry, key)`` holding ``measurement`` for table ``name``: its own, else along ``points_from``."""
    chain, at = [name], entries[name]
    while _key(at, measurement) not in at:
        ref = at["points_from"] if "points_from" in at else None
        if ref is None:
            via = f" (nor {' → '.join(chain[1:])}, through points_from)" if len(chain) > 1 else ""
            raise entries[name].error(f"has no {key}{via}", "points_from" if len(chain) > 1 else "",
                                      hint=f"give {key} (the measured points), or points_from = \"<preset>\" "
                                           "naming the table that holds them")
        if ref in chain:
            raise entries[name].error(f"points_from runs in a cycle for {key} ({' → '.join(chain + [ref])})",
                                      "points_from", hint="a points_from chain ends at a table that holds the points")
        chain.append(ref)
        at = entries[ref]
    return at, _key(at, measurement)
