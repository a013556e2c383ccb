"""What ``costgraph fit`` tries when no single change of ``costgraph train``'s fits (issue 29 item 5):
CPU offload, LoRA and QLoRA, and the fewest devices that would hold the job; and the host memory
per node that CPU offload needs, judged against a node's host memory.

Nothing is estimated here: every figure is :func:`costgraph.training.memory.training_memory` of the
changed layout, as ``costgraph train`` computes it (the peak of the most-loaded device, exact, rounded
up to a byte), and the host bytes are those of :mod:`costgraph.training.offload` (the most-loaded
device's host bytes × the devices of one node).

The steps (each one change from the layout, a change the layout already has left out):

* ``--zero 3 --offload-optimizer cpu`` (DeepSpeed's ``offload_optimizer``; ZeRO-Offload, Ren et al.
  2021), then with ``--offload-params cpu`` too (``offload_param``, ZeRO-Infinity, Rajbhandari et al.
  2021: parameter offload needs ZeRO 3, DeepSpeed's rule, :mod:`costgraph.parallel.layout`);
* ``--lora R`` (:data:`costgraph.choices.FIT_LORA_RANK`, PEFT's default rank) and QLoRA
  ``--lora R --quantize nf4`` (:data:`costgraph.choices.FIT_QLORA`);
* the fewest devices that fit at the layout's TP × PP × CP, at ZeRO 3 (and at the layout's own stage
  when it is 1 or 2): the memory with the data-parallel degree a symbol (``N_d``), evaluated exactly
  at each candidate, doubled then bisected over the integers; the first valid layout
  (:func:`costgraph.training.validity.check_layout`) at or above the smallest degree that fits;
* with offload, when the host memory of a node is what does not fit: NVMe for what went to the CPU.

Each step is a :class:`~costgraph.training.result_parts.FitChange` (as ``costgraph train``'s changes, with the
host bytes) and the host side of the verdict a :class:`HostVerdict`: typed parts
(:class:`costgraph.result_fields.Part`) whose fields carry their unit, read also as the mappings they were.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from ..result_fields import Part, quantity
from .result_parts import FitChange


@dataclass(frozen=True)
class HostVerdict(Part):
    """The host side of ``costgraph fit``'s training verdict (:func:`host_verdict`): ``need`` the host
    memory of one node with CPU offload (bytes; None without offload), ``capacity`` the host memory of a
    node (bytes; None when unknown), ``fits``, ``warnings``, ``further`` (:class:`~costgraph.training.result_parts.FitChange` s) and
    ``source`` (where ``capacity`` comes from, with offload; else None)."""

    need: int | None = quantity("bytes", label="host memory of one node (CPU offload)")
    capacity: int | None = quantity("bytes", label="host memory of a node")
    fits: bool = quantity(label="the host memory of a node holds it (or is not judged)")
    warnings: list = quantity(label="what was not judged or not used", default_factory=list)
    further: list = quantity(label="the further steps (FitChange each)", default_factory=list)
    source: str | None = quantity(label="where the capacity comes from", default=None)


def host_per_node(host_per_device, gpus, devices_per_node) -> int:
    """Host bytes of one node: the most-loaded device's ``host_per_device`` bytes × the devices of
    one node, ``min(devices_per_node, gpus)`` (:func:`costgraph.training.offload.offload_section`'s
    rule; ``devices_per_node`` None: every device on one node, as ``costgraph train --gpus-per-node``
    defaults without a preset). Rounded up to a byte."""
    n = gpus if devices_per_node is None else min(devices_per_node, gpus)
    return int(sympy.ceiling(as_expr(host_per_device) * n))


def judge(model, layout, values: dict, devices_per_node=None):
    """``(peak, host)`` of ``layout`` at ``values``: the most-loaded device's peak (bytes, rounded up)
    and, with CPU offload, the host bytes per node (else None); None when the model does not divide
    into the layout or a value is missing (a change that cannot be made is no step)."""
    from .memory import training_memory
    from .offload import offloaded
    from .validity import check_layout

    try:
        filled = layout.filled()
        check_layout(model.graph, filled, values)
        top = training_memory(model.graph, filled).most_loaded(values).memory
    except CostgraphValueError:
        return None
    total = top["total"].xreplace(values)
    if not total.is_number:
        return None
    host = None
    if offloaded(filled) and "host" in top:
        h = as_expr(top["host"]).xreplace(values)
        if not h.is_number:
            return None
        host = host_per_node(h, filled.gpus if isinstance(filled.gpus, int) else 1, devices_per_node)
    return int(sympy.ceiling(total)), host


def _step(change: str, options: str, judged, usable: int, host_capacity) -> FitChange | None:
    if judged is None:
        return None
    peak, host = judged
    fits = peak <= usable and (host is None or host_capacity is None or host <= host_capacity)
    return FitChange(change, options, peak, fits, host)


def further_steps(model, layout, values: dict, usable: int, *, host_capacity=None, devices_per_node=None,
                  host_short: bool = False) -> list[FitChange]:
    """The steps of the module docstring for ``layout`` (a :class:`~costgraph.parallel.layout.Layout`
    with ``gpus`` set) at ``values``: :class:`FitChange` s (``change, options, peak_bytes, host_bytes, fits``;
    (``host_bytes``: per node with CPU offload, else None; ``fits``: the peak at most ``usable`` bytes
    and the host bytes at most ``host_capacity`` where both are known). ``host_short``: the host
    memory is what does not fit (adds the NVMe steps)."""
    from .. import choices

    L, out = layout, []

    def attempt(change, options, new, new_values=values):
        s = _step(change, options, judge(model, new, new_values, devices_per_node), usable, host_capacity)
        if s is not None:
            out.append(s)

    if L.offload_optimizer == "none":
        attempt("ZeRO 3, optimizer offloaded to the CPU", "--zero 3 --offload-optimizer cpu",
                dataclasses.replace(L, zero=3, offload_optimizer="cpu"))
    if L.offload_params == "none":
        attempt("ZeRO 3, optimizer and parameters offloaded to the CPU",
                "--zero 3 --offload-optimizer cpu --offload-params cpu",
                dataclasses.replace(L, zero=3, offload_optimizer="cpu", offload_params="cpu"))
    if host_short:
        for field, flag in (("offload_optimizer", "--offload-optimizer"), ("offload_params", "--offload-params")):
            if getattr(L, field) == "cpu":
                attempt(f"{flag[2:].replace('-', ' ')} to NVMe", f"{flag} nvme",
                        dataclasses.replace(L, **{field: "nvme"}))
    rank = choices.FIT_LORA_RANK
    if L.lora_rank is None:
        attempt(f"LoRA rank {rank} (the base frozen)", f"--lora {rank}", dataclasses.replace(L, lora_rank=rank))
    if L.quantization is None:
        r = L.lora_rank or rank
        attempt(f"QLoRA rank {r}, the base in {choices.FIT_QLORA}",
                ("" if L.lora_rank else f"--lora {r} ") + f"--quantize {choices.FIT_QLORA}",
                dataclasses.replace(L, lora_rank=r, quantization=choices.FIT_QLORA))
    for zero in sorted({3, L.zero} - {0}):
        found = _fewest(model, dataclasses.replace(L, zero=zero), values, usable, host_capacity, devices_per_node)
        also = {"zero": 3} if zero != L.zero else {}
        if found is None and L.recompute != "full":   # activations alone too many: with full recomputation
            found = _fewest(model, dataclasses.replace(L, zero=zero, recompute="full"), values, usable,
                            host_capacity, devices_per_node)
            also["recompute"] = "full"
        step = None if found is None else _fewest_step(L, *found, also)
        if step is not None:
            out.append(step)
    return out


def _fewest_step(L, s: FitChange, d: int, also: dict) -> FitChange | None:
    """The fewest-devices step ``s`` (at data-parallel degree ``d``) with the options ``also`` it needs
    (``zero``, ``recompute``), none of them a no-op (trial 8: "1 devices" at ZeRO 3): ZeRO shards nothing
    over a data-parallel group of 1, and ``--gpus`` at the layout's own count changes nothing; None when
    nothing is left to change."""
    if d == 1:
        also = {k: v for k, v in also.items() if k != "zero"}
    moved = s.options != f"--gpus {L.gpus}"
    words = " and ".join(f"{'ZeRO' if k == 'zero' else 'recompute'} {v}" for k, v in also.items())
    if not moved and not words:
        return None
    change = (s.change + (f" at {words}" if words else "")) if moved else words
    options = "".join(f"--{k} {v} " for k, v in also.items()) + (s.options if moved else "")
    return dataclasses.replace(s, change=change, options=options.strip())


#: the most degrees past the smallest that fits tried for one the model divides into
_WALK = 64


def _devices_words(n: int, d: int) -> str:
    """``1 device``, ``8 devices``, ``16 devices (dp 2)``: the data-parallel degree named where above 1."""
    return "1 device" if n == 1 else f"{n} devices" + (f" (dp {d})" if d > 1 else "")


def _fewest(model, layout, values: dict, usable: int, host_capacity=None, devices_per_node=None):
    """``(step, d)``: the step to the fewest devices (``gpus = t·p·c·d``, ``layout``'s TP, PP and CP kept) on which
    ``layout`` fits, searched over the data-parallel degree ``d``: the memory computed once with
    ``d`` the symbol ``N_d`` (:data:`costgraph.parallel.layout.DP`), evaluated exactly at each
    candidate; None when no degree up to :data:`costgraph.parallel.layout.MAX_DEVICES` devices fits
    (what a device holds does not shrink below the usable bytes: activations, or ZeRO 0) or the
    model does not divide into the layout."""
    from ..parallel.layout import DP, MAX_DEVICES
    from .memory import training_memory
    from .offload import offloaded

    per = layout.t * layout.p * layout.c
    if layout.gpus is None or not isinstance(per, int) or layout.zero == 0:
        return None
    try:
        mem = training_memory(model.graph, dataclasses.replace(layout, gpus=None, d=None).filled())
    except CostgraphValueError:
        return None
    totals = [st.memory["total"].xreplace(values) for st in mem.stages]
    hosts = [as_expr(st.memory.get("host", 0)).xreplace(values) for st in mem.stages]
    if any(e.free_symbols - {DP} for e in totals + hosts):
        return None
    with_host = offloaded(mem.layout) and host_capacity is not None

    def fits(d: int) -> bool:
        at = {DP: sympy.Integer(d)}
        peaks = [e.xreplace(at) for e in totals]
        i = max(range(len(peaks)), key=lambda k: peaks[k])
        if peaks[i] > usable:
            return False
        return not with_host or host_per_node(hosts[i].xreplace(at), per * d, devices_per_node) <= host_capacity

    top = MAX_DEVICES // per
    lo, hi = 0, 1
    while hi <= top and not fits(hi):
        lo, hi = hi, hi * 2
    if hi > top:
        if not fits(top):
            return None
        hi = top
    while hi - lo > 1:   # the smallest degree that fits, past the last that does not
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    from .validity import check_layout

    for d in range(hi, min(hi + _WALK, top) + 1):   # the first the model divides into (EP, heads, ...)
        try:
            check_layout(model.graph, dataclasses.replace(layout, gpus=per * d).filled(), values)
        except CostgraphValueError:
            continue
        judged = judge(model, dataclasses.replace(layout, gpus=per * d), values, devices_per_node)
        s = _step(_devices_words(per * d, d), f"--gpus {per * d}", judged, usable, host_capacity)
        return (s, d) if s is not None and s.fits else None
    return None


def host_verdict(model, result, hardware, host_memory, peak: int, usable: int, any_step_fits: bool) -> HostVerdict:
    """The host side of ``costgraph fit``'s training verdict for ``result`` (a
    :class:`~costgraph.training.result.TrainingResult` at every value, ``gpus`` set; ``peak`` its
    most-loaded device's bytes, ``usable`` the device's less the reserve), a :class:`HostVerdict`: ``need`` the
    host bytes of one node with CPU offload (else None), ``capacity`` the host memory of a node
    (``host_memory``, bytes or a size floored to whole bytes; else the ``hardware`` preset's
    ``host_memory_bytes``; None when neither is known: then not judged, and a warning says so),
    ``fits``, ``warnings``, ``source`` (where ``capacity`` comes from, with offload), and ``further``: :func:`further_steps` when the device or the host
    does not fit and no step of ``costgraph train``'s (``any_step_fits``) fits, those that lower what
    does not fit (the peak, or the host bytes), else empty.

    Raises
    ------
    CostgraphValueError
        ``host_memory`` that is not a size; an unknown preset."""
    from .fit import floored_note, memory_size

    device_fits = peak <= usable
    hw = None
    if hardware is not None:
        from ..hardware import preset

        hw = preset(hardware)
    warnings, capacity, source = [], None, None
    if host_memory is not None:
        capacity, floored = memory_size(host_memory, "--host-memory")
        source = "--host-memory"
        if floored:
            warnings.append(floored_note(host_memory, capacity, "--host-memory"))
    elif hw is not None and hw.host_memory_bytes is not None:
        capacity, source = hw.host_memory_bytes, f"{hw.key}'s node: {hw.source('host_memory_bytes')}"
    L, dpn = result.layout, hw.devices_per_node if hw is not None else None
    need = None
    if result.offload is not None:
        need = host_per_node(as_expr(result.offload["host"]).xreplace(result.values), L.gpus, dpn)
        if capacity is None:
            warnings.append(f"the host memory per node ({need:,} bytes) is not judged: "
                            + (f"{hw.key} publishes no node's host memory" if hw is not None else "no preset")
                            + "; give --host-memory (e.g. 2TB, a DGX H100's)")
    elif host_memory is not None:
        warnings.append("--host-memory judges CPU offload: this layout offloads nothing to the host")
    fits = need is None or capacity is None or need <= capacity
    further = []
    if not (device_fits and fits) and not any_step_fits:   # the steps that lower what does not fit
        further = [s for s in further_steps(model, L, result.values, usable, host_capacity=capacity,
                                            devices_per_node=dpn, host_short=not fits)
                   if (not device_fits and s.peak_bytes < peak) or (not fits and s.host_bytes is None)
                   or (not fits and s.host_bytes < need)]
    return HostVerdict(need, capacity, fits, warnings, further, source if need is not None else None)
