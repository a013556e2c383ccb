"""The memory the calculator page (:mod:`costgraph.export.web`) keeps free on each device for its fit
verdict, as ``costgraph train --reserve`` keeps it (:func:`costgraph.training.api.training_fits`):

* ``runtime`` (:data:`costgraph.choices.RUNTIME_RESERVE`, train's and fit's default): the named parts of
  :func:`costgraph.runtime_memory.training_reserve` — the CUDA context of the preset's GPU class,
  PyTorch's cuBLAS and cuBLASLt workspaces (``base``, per preset) and NCCL's buffers of one
  communicator per parallel group of more than one device (``group`` bytes each, per preset: RCCL's on
  AMD, none where the vendor's runtime has no source; the page counts ``TP``, ``PP`` and ``DP`` above 1) — on the device memory CUDA reports where ``runtime_memory.toml``
  gives it (``capacity``, per preset), else the preset's;
* a fraction of the device memory (``0.1``: rounded up to a byte) or a size (``8GB``), read by
  :func:`costgraph.training.fit.reserve_bytes` as train reads it; the device memory is train's, what CUDA
  reports (:func:`costgraph.runtime_memory.device_memory`; the page's ``serve_memory`` per preset).
"""

from __future__ import annotations


def reserve_table(reserve: str | None) -> dict:
    """The page's reserve (module docstring): ``{"rule": "runtime", "text", "presets": {key: {"capacity",
    "capacity_from", "base", "group"}}}``, ``{"rule": "fraction", "text", "fraction": [p, q]}`` or
    ``{"rule": "size", "text", "bytes"}`` (numbers as decimal text); ``reserve``: ``--reserve``'s text,
    None for train's default.

    Raises
    ------
    CostgraphValueError
        As ``costgraph train --reserve`` for the same text (neither ``runtime``, a fraction below 1 nor a
        size; a bare number above 1 without its unit)."""

    from ..arguments import text as checked_text
    from ..choices import RUNTIME_RESERVE
    from ..hardware import presets
    from ..runtime_memory import parallel_groups, training_reserve
    from ..training.fit import reserve_bytes, reserve_fraction

    text = RUNTIME_RESERVE if reserve is None else checked_text(reserve, "--reserve").strip()
    if text == RUNTIME_RESERVE:
        out = {}
        for key, hw in presets().items():
            if not hw.peak_flops_bf16:
                continue
            r = training_reserve(hw, {}, hw.memory_bytes, False)
            # one parallel group's buffers on this preset, as train counts them (none where the vendor's
            # runtime has no source: runtime_memory.training_parts), the same for any group of 2+ devices
            group = training_reserve(hw, parallel_groups(2, 1, 1, 1, 1), hw.memory_bytes, False).bytes - r.bytes
            out[key] = {"capacity": str(r.capacity), "capacity_from": r.capacity_from or "", "base": str(r.bytes),
                        "group": str(group)}
        return {"rule": "runtime", "text": text, "presets": out}
    q = reserve_fraction(text)   # train's reading and refusal (1 or more keeps the whole device free)
    if q is not None:
        return {"rule": "fraction", "text": text, "fraction": [str(q.p), str(q.q)]}
    held = reserve_bytes(text, 2**63)   # train's reading and refusals (a size: the page says where it is too large)
    return {"rule": "size", "text": text, "bytes": str(held)}


__all__ = ["reserve_table"]
