"""Step time of a training iteration on a hardware preset: compute, pipeline
bubble and exposed communication — a named, simple model.

* **compute** = hardware FLOPs per device (:func:`costgraph.training.compute.training_flops`,
  recomputation included) / (peak × ``efficiency``), ``efficiency`` the
  fraction of the dense BF16 peak the kernels reach (an assumption, shown);
* **bubble** = compute × (p − 1)/(v·m): the idle time of a 1F1B or
  interleaved pipeline (Narayanan et al. 2021 §2.2; GPipe the same);
* **communication** (:mod:`costgraph.parallel.communication` on the preset's
  links): tensor, context and expert parallelism and pipeline sends are on
  the critical path (exposed); the data-parallel gradient reduction and
  ZeRO/FSDP traffic overlap the computation (Megatron's and FSDP's overlap)
  but cannot take less than their own time;
* **total** = max(compute + bubble, overlapped communication) + exposed
  communication; with CPU/NVMe offload, compute + bubble is at least the
  host-link seconds (:func:`costgraph.training.offload.offload_link_seconds`:
  the transfers run beside the computation), ``offload`` in the result.
"""

from __future__ import annotations

import sympy

from ..parallel.communication import comm_time, communication
from ..parallel.placement import Placement, placement as place
from .compute import training_flops
from .offload import offload_link_seconds, offloaded

EXPOSED = ("tp", "cp", "ep", "pp", "tied_embedding")


def step_time(cg, layout, hardware, *, efficiency=sympy.Rational(1, 2), flops: dict | None = None,
              stage: str = "first", placement: Placement | None = None,
              collectives: dict | None = None, with_total: bool = True) -> dict[str, sympy.Expr]:
    """Seconds per step: ``compute``, ``bubble``, ``communication_exposed``,
    ``communication_overlapped`` (not added), ``total``, and ``by_kind``
    (seconds of each collective kind). ``layout`` filled; ``hardware`` a
    :class:`costgraph.hardware.Hardware`; ``placement`` the layout's
    :class:`~costgraph.parallel.placement.Placement` if the caller has it;
    ``collectives``: ``communication(cg, layout, stage=stage)`` when the caller
    has it already (it is not computed again); ``with_total=False``: the parts
    only, without ``total`` (the planner takes the max per layout numerically)."""
    L = layout.filled()
    f = flops if flops is not None else training_flops(cg, L)
    compute = f["hardware_per_device"] / (sympy.Integer(hardware.peak_flops_bf16) * efficiency)
    p, v, m = (sympy.Integer(x) if isinstance(x, int) else x for x in (L.p, L.v, L.m))
    bubble = compute * (p - 1) / (v * m)
    if collectives is None and L.lora_rank is None:
        pl = placement if placement is not None else place(cg, L)
        collectives = communication(cg, L, stage=stage, placement=pl)
    kinds = comm_time(collectives, hardware, L) if L.lora_rank is None else {}
    exposed = sympy.Add(*[t for k, t in kinds.items() if k in EXPOSED])
    overlapped = sympy.Add(*[t for k, t in kinds.items() if k not in EXPOSED])
    busy = compute + bubble
    link = None
    if offloaded(L):   # CPU/NVMe offload (costgraph.training.offload): host-link transfers beside the compute
        from .memory import training_memory

        link = offload_link_seconds(training_memory(cg, L).stages[0 if stage == "first" else -1].memory, hardware)
    if link is not None:
        busy = sympy.Max(busy, link)
    if not with_total:   # the planner combines the parts per layout itself (SymPy's Max of two long sums is slow)
        return {"compute": compute, "bubble": bubble, "communication_exposed": exposed,
                "communication_overlapped": overlapped, "by_kind": kinds,
                **({"offload": link} if link is not None else {})}
    total = (sympy.Max(busy, overlapped) if overlapped != 0 else busy) + exposed
    return {"compute": compute, "bubble": bubble, "communication_exposed": exposed,
            "communication_overlapped": overlapped, "total": total, "by_kind": kinds,
            **({"offload": link} if link is not None else {})}
