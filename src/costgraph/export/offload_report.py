"""The renderer of CPU/NVMe offload (:class:`~costgraph.training.result_parts.TrainingOffload`, built by
:func:`costgraph.training.offload.offload_section`) in ``costgraph train``'s JSON and text
(:mod:`costgraph.export.training_report` calls it): host and NVMe bytes per device and per node, the host
link's bytes per step and, with a preset, its seconds and the CPU optimizer step under DeepSpeed's schedule
(:data:`costgraph.training.offload.SCHEDULE`). Each quantity written by the unit its field declares."""

from __future__ import annotations

import sympy

from ..engine.symbols import as_expr
from ..result_fields import json_fields, quantities
from ..training.offload import OFFLOAD_KEYS, SCHEDULE


def _value(expr, values):
    e = as_expr(expr).xreplace(values or {})
    return e if e.is_number else None


def offload_json(section, values, entry) -> dict:
    """The ``offload`` object of ``costgraph train --format json`` for
    :func:`offload_section`'s ``section`` (a :class:`~costgraph.training.result_parts.TrainingOffload`);
    ``entry(expr, values, unit)`` writes one quantity, ``unit`` the one its field declares (``bytes``:
    the report's bytes form; another: its number form)."""
    out = {"settings": json_fields(section.settings, lambda v, q: float(v))}
    unit = {name: q.unit for name, q in quantities(section)}
    for k in (*OFFLOAD_KEYS, "host_per_node", "nvme_per_node"):
        if k in section:
            out[k] = entry(section[k], values, unit[k])
    if section.devices_per_node is not None:
        out["devices_per_node"] = section.devices_per_node
        out["hardware"] = section.hardware
        seconds = section.seconds
        out["seconds"] = None if seconds is None else json_fields(seconds, lambda v, q: entry(v, values, q.unit))
    return out


def offload_text(section, values, show) -> list[str]:
    """The lines of ``costgraph train``'s offload section (``section``: a
    :class:`~costgraph.training.result_parts.TrainingOffload`); ``show(bytes)`` formats bytes."""
    s = section.settings
    act = s.activations
    lines = ["", f"offload (optimizer {s.optimizer}, parameters {s.params}, activations "
                 f"{act if act != 0 else 'none'}; the most-loaded device; costgraph.training.offload):"]
    for k, label in (("host", "host memory per device"), ("nvme", "NVMe per device"),
                     ("host_per_node", "host memory per node"), ("nvme_per_node", "NVMe per node"),
                     ("host_link_d2h", "device → host per step"), ("host_link_h2d", "host → device per step")):
        if k in section and (section[k] != 0 or k in ("host", "host_link_d2h", "host_link_h2d")):
            v = _value(section[k], values)
            lines.append(f"  {label:<24}" + (show(int(sympy.ceiling(v))) if v is not None else str(section[k])))
    if section.devices_per_node is not None:
        lines.append(f"  ({section.devices_per_node} devices per node on {section.hardware})")
        sec = section.seconds
        if sec is None:
            lines.append(f"  host link: {section.hardware} publishes no host-link bandwidth: transfers not timed")
        else:
            v = {k: _value(x, values) for k, x in sec.items()}
            if all(x is not None for x in v.values()):
                lines.append(f"  host link: {float(v['d2h']):.4g} s out, {float(v['h2d']):.4g} s back during the "
                             f"step (both directions at once, beside the compute: the busy time is at least "
                             f"{float(v['link']):.4g} s)")
                cpu = (f"the CPU optimizer step {float(v['cpu_step']):.4g} s (host memory "
                       f"{section.host_memory_bandwidth / 1e9:g} GB/s per node, shared by "
                       f"{section.devices_per_node} devices)" if section.host_memory_bandwidth
                       else f"the CPU optimizer step not timed ({section.hardware} publishes no host-memory "
                            "bandwidth)")
                lines.append(f"  after the backward, in series: {cpu} + the updated partition back "
                             f"{float(v['after']):.4g} s = {float(v['serial']):.4g} s")
                lines.append(f"  (schedule {SCHEDULE})"
                             + ("; NVMe reads and writes are not timed (no sourced rate)"
                                if section.get("nvme", 0) != 0 else ""))
    return lines
