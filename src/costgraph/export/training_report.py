"""The renderer of :class:`~costgraph.training.result.TrainingResult` as text and JSON (``costgraph train``;
:meth:`TrainingResult.to_text`, :meth:`TrainingResult.to_dict` through :mod:`costgraph.export.present`).

The JSON document is a stable contract:

.. code-block:: text

    {
      "costgraph": "0.1.0", "model": "llama", "scope": "model",
      "plan": {"gpus": 8, "tp": 2, "pp": 2, "dp": 2, "cp": 1, "ep": 1, "etp": 1, "sp": false,
               "zero": 1, "hsdp": null, "micro_batches": 2, "schedule": "1f1b", "virtual_stages": 1,
               "recompute": "none", "attention": "eager", "precision": "mixed", "optimizer": "adam",
               "activation_precision": "bf16", "loss": true, "profile": "korthikanti", "dropout": true,
               "memory": null},
      "symbols": {"b": "micro-batch size (sequences)", ...},
      "values": {"h": 4096, ...},
      "memory": {"weights": {"expr": ..., "latex": ..., "value": ...},
                 "gradients": ..., "optimizer": ..., "activations": ..., "total": ...},
      "most_loaded_stage": 0,
      "stages": [{"stage": 0, "name": "stage 0 (first)", "memory": {...},
                  "experts": {...}}, ...],   # experts: routed experts' states, where the model has them
      "fits": {"capacity_bytes": 80000000000, "fits": true, "headroom_bytes": ...,
               "largest_b": 3, "largest_s": 12288},
      "megatron": {"megatron": {...}, "costgraph": {...}, "difference": {...}},  # with --megatron
      "flops": {"model_per_iteration": {expr, latex, value}, "hardware_per_iteration": ..., "per_token": ...,
                "model_per_device": ..., "hardware_per_device": ..., "six_n": ..., "eight_n": ...,
                "six_n_non_embedding": ..., "per_token_minus_six_n": ...},
      "time": {"step_seconds": ..., "steps": ..., "train_seconds": ..., "train_days": ..., "gpu_hours": ...,
               "pf_days": ..., "cost": ...},      # with --mfu (and a peak) or --achieved; --tokens; --price
      "mfu": {...}, "hfu": {...},
      "communication": {"tp": {"bytes": {...}, "seconds": {...}, "op": "all-reduce", "group": "8"}, ...},
      "step": {"compute": ..., "bubble": ..., "communication_exposed": ..., "communication_overlapped": ...,
               "total": ..., "efficiency": 0.5}           # with --hardware (costgraph.training.steptime)
    }

``flops``, ``time``, ``mfu``, ``hfu``: ``value`` is a number (an int when
whole, else a float); conventions in :mod:`costgraph.training.compute`.
``memory`` is the most-loaded device's; bytes, exact integers. ``fits``
(with ``--memory``): the verdict for the most-loaded device, and the largest
micro-batch ``b`` and the longest sequence ``s`` that fit on every stage with
the other values as given (``null`` when 1 does not fit). With
``scope = "layer"``, ``memory`` is one layer on one device and ``stages``
holds that one entry. ``value`` appears when every symbol has a value.
"""

from __future__ import annotations

import json

import sympy

from ..choices import ATTENTION, CROSS_ENTROPY, OVERLAP
from ..engine.recompute import describe
from ..engine.symbols import as_expr
from ..hardware import links_lines
from ..numbers import units
from .layout_lines import _expert_placement_line, _options_lines
from ..result_fields import document_json, json_fields, plain, quantities
from .offload_report import offload_json, offload_text
from ..training.compute import FLOPS, RATIOS, TIME
from ..training.fp8 import ATTENTION_SAVED, PARTS, SAVED
from ..training.memory import MEMORY_KEYS, TrainingMemory
from ..version import __version__
from .printing import field_order, printed, to_text
from .tables import table

FP8_PARTS = (*PARTS, SAVED, ATTENTION_SAVED)   # the FP8 buffers (in the total), then what is saved (in activations)

LABELS = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer states",
          "activations": "activations", "total": "total"}


def _entry(expr: sympy.Expr, values) -> dict:
    """``{expr, latex, value}``; a per-device share of a table padded to a
    multiple of t (a vocabulary not divisible by t) is rounded up, and then
    ``"rounded_up": true``."""
    out = printed(expr, True)
    if values is not None and expr.free_symbols <= set(values):
        v = expr.xreplace(values)
        out["value"] = int(sympy.ceiling(v))
        if not v.is_integer:
            out["rounded_up"] = True
    return out


def plan_dict(result: TrainingMemory, extra: dict) -> dict:
    L = result.layout
    def num(x):
        return int(x) if isinstance(x, int) or (isinstance(x, sympy.Expr) and x.is_Integer) else str(x)
    return {"gpus": L.gpus, "tp": num(L.t), "pp": num(L.p), "dp": num(L.d), "cp": num(L.c), "ep": num(L.e),
            "etp": num(L.etp), "sp": L.sp, "zero": L.zero, "hsdp": None if L.hsdp is None else num(L.hsdp),
            "micro_batches": num(L.m), "schedule": L.schedule, "virtual_stages": L.v,
            "pipeline_layout": getattr(L, "pipeline_layout", None),
            "recompute": L.recompute, "attention": L.attention, "precision": L.policy,
            "optimizer": L.optimizer, "activation_precision": L.precision, "loss": L.loss,
            # expert placement (costgraph.parallel.ranks, costgraph.parallel.ep_time)
            "rank_order": L.rank_order, "domain_ranks": L.domain_ranks, "link_rate": L.link_rate,
            "ep_overlap": L.ep_overlap, "ep_dispatcher": L.ep_dispatcher, "route_nodes": L.route_nodes, "overlap": L.overlap,
            "attention_kernel": L.attention_kernel, "cp_comm_type": L.cp_comm_type, "gemm_rate": L.gemm_rate,
            "overlap_contention": L.overlap_contention,
            # FP8 options (costgraph.training.fp8_options) and the recompute FLOP count (.recompute_count)
            "fp8_attention": L.fp8_attention, "fp8_wgrad": L.fp8_wgrad, "recompute_count": L.recompute_count,
            # memory conventions (costgraph.training.fp8, .memory, .states)
            "fp8_transpose": L.fp8_transpose, "cross_entropy": L.cross_entropy, "zero3_gathered": L.zero3_gathered,
            **extra}


def _number(expr: sympy.Expr, values) -> dict:
    """``{expr, latex, value}`` with ``value`` a number: an int when whole, else a float."""
    expr = as_expr(expr)
    out = printed(expr, bool(expr.free_symbols))
    if values is not None and expr.free_symbols <= set(values) or not expr.free_symbols:
        v = expr.xreplace(values or {})
        out["value"] = int(v) if v.is_integer else float(v)
    return out


def _compute_json(compute, values) -> dict:
    """The compute sections of the JSON, from the fields of ``compute``
    (:class:`~costgraph.training.result_parts.TrainingCompute`)."""
    out = {"flops": json_fields(compute.flops, lambda v, q: _number(v, values))}
    if compute.time is not None:
        out["time"] = json_fields(compute.time, lambda v, q: _number(v, values))
    for k in ("mfu", "hfu"):
        if getattr(compute, k) is not None:
            out[k] = _number(getattr(compute, k), values)
    if compute.lora is not None:   # LoRA on: rank, targets, trainable parameters, FLOP conventions (LoraCompute)
        out["lora"] = json_fields(compute.lora, lambda v, q: list(v) if isinstance(v, list) else _number(v, values))
    if compute.communication is not None:
        out["communication"] = {k: json_fields(c, lambda v, q: str(v) if not q.unit else _number(
            sympy.expand(v) if q.unit == "bytes" else v, values)) for k, c in compute.communication.items()}
    if compute.step is not None:
        out["step"] = json_fields(compute.step, lambda v, q: _number(v, values))
        rate = compute.rate
        out["step"]["efficiency"] = None if compute.efficiency is None else float(compute.efficiency)
        out["step"]["hardware"] = compute.hardware
        out["step"]["overlap"] = compute.overlap   # the convention (costgraph.training.overlap)
        if compute.overlap_contention is not None:   # the convention of step.contention (training.contention)
            out["step"]["overlap_contention"] = compute.overlap_contention
        out["step"]["rate"] = {"kind": rate.kind, "value": float(rate.value), "covers": rate.covers,
                               "peaks": {k: int(v) for k, v in rate.peaks.items()}}
        out["step"]["time_model"] = rate.model
        if compute.attention_kernel is not None:   # the per-kernel model's flash-core curves (choices.ATTENTION_KERNEL)
            out["step"]["attention_kernel"] = compute.attention_kernel
        if compute.gemm_rate is not None:   # the per-kernel model's GEMM rate (choices.GEMM_RATE)
            out["step"]["gemm_rate"] = compute.gemm_rate
        if compute.userbuffers_sms is not None:   # kernel_time.userbuffers_margin (UserbuffersSMs: SMs)
            out["step"]["userbuffers_sms"] = json_fields(compute.userbuffers_sms, lambda v, q: int(v))
        if compute.compute_by_class is not None:   # the per-kernel model (ComputeByClass: seconds by kernel class)
            out["step"]["compute_by_class"] = json_fields(compute.compute_by_class, lambda v, q: _number(v, values))
    if compute.calibration is not None:   # --efficiency-profile (Calibrated: training.calibration_profile.calibrated)
        out["calibration"] = json_fields(compute.calibration, lambda v, q: plain(v))
    return out


#: the labels of the compute sections, declared with their units beside the code that fills them
_COMPUTE_LABELS = {k: q.label for k, q in {**FLOPS, **TIME, **RATIOS}.items()}


def _rule_of_thumb_labels(flops: dict) -> dict[str, str]:
    """:data:`_COMPUTE_LABELS`, with a mixture of experts' rule of thumb on the active parameters:
    6N per token counts the parameters a token passes through (k of E experts), the total beside it."""
    if "six_n_active" not in flops:
        return _COMPUTE_LABELS
    return {**_COMPUTE_LABELS, "six_n_active": "6N per token (rule of thumb; N active, MoE)",
            "six_n": "6N, all parameters (not per token: MoE)", "eight_n": "8N, all parameters (MoE)",
            "per_token_minus_six_n_active": "exact per token − 6N active",
            "per_token_minus_six_n": "exact per token − 6N, all parameters"}


def _compute_text(compute, values, link_rate: str = "nccl", dispatcher: str = "alltoall") -> list[str]:
    """The compute, communication and step-time sections of the text, from the fields of ``compute``
    (:class:`~costgraph.training.result_parts.TrainingCompute`); the links at ``link_rate``, the EP all-to-all's
    line under ``dispatcher`` where the layout has one."""
    out = ["", "compute ('matmul' FLOPs unless --convention all; B = b·m·d sequences per iteration; time from "
                "the step time below; MFU and HFU of the BF16 peak):"]
    # (name, unit, value): the units declared on the fields (costgraph.training.result_parts); MFU, HFU as "%"
    items = [(k, q.unit, getattr(part, k)) for part in (compute.flops, compute.time) if part is not None
             for k, q in quantities(part) if k in part and k != "step_seconds"] \
        + [(k, "%", getattr(compute, k)) for k in ("mfu", "hfu") if getattr(compute, k) is not None]
    labels = _rule_of_thumb_labels(compute.flops)
    flops = compute.flops
    if flops.six_n_active is not None:   # a mixture of experts: the rule's N is the active one, shown first
        active = [("six_n_active", "FLOP/token", flops.six_n_active),
                  ("per_token_minus_six_n_active", "FLOP/token", sympy.expand(flops.per_token - flops.six_n_active))]
        items = [x for x in items if x[0] != "six_n_active" for x in (active + [x] if x[0] == "six_n" else [x])]
    cells = []
    for k, unit, e in items:
        e = as_expr(e)
        line = to_text(field_order(e)) if e.free_symbols and not e.has(sympy.Max) else ""   # a Max: the value only
        if values is not None and e.free_symbols <= set(values) or not e.free_symbols:
            v = e.xreplace(values or {})
            if unit.startswith("FLOP"):
                shown = units.with_unit("flops_forward", int(v)) if v.is_integer else f"{float(v):.6g} FLOP"
            elif unit == "%":
                shown = f"{float(v):.2%}"
            else:
                shown = f"{int(v):,}" if v.is_integer else f"{float(v):,.4g}"
            line += (" = " if line else "") + shown
        cells.append([labels.get(k, _COMPUTE_LABELS.get(k, k)), line])
    out += table(cells)
    if compute.lora is not None:   # LoRA on: what is trained and how its FLOPs are counted (a LoraCompute)
        lo = compute.lora
        n, k = (as_expr(x).xreplace(values or {}) for x in (lo.trainable_parameters, lo.adapted_linears))
        shown = [f"{int(x):,}" if x.is_number else to_text(field_order(as_expr(x))) for x in (n, k)]
        out += [f"LoRA on: rank {lo.rank}, targets {', '.join(t.rsplit('/', 1)[-1] for t in lo.targets)} "
                f"({shown[1]} linears), {shown[0]} trainable parameters"
                + (f", base quantized {lo.quantization}" if lo.quantization is not None else ""),
                f"  model FLOPs (for MFU): {lo.model_flops}"]
        if lo.dequantization is not None:
            out.append(f"  QLoRA dequantization (hardware FLOPs): {lo.dequantization}")
    if compute.communication is not None:
        out += ["", "communication per device per step (ring algorithms; bytes sent):"] + links_lines(
            compute.hardware, link_rate, dispatcher if "ep" in compute.communication else None)
        cells = []
        for k, c in compute.communication.items():   # a CollectiveCost each
            e = sympy.expand(c.bytes)
            v = e.xreplace(values or {})
            secs = as_expr(c.seconds).xreplace(values or {}) if c.seconds is not None else None
            shown = units.with_unit("activation_bytes", int(sympy.ceiling(v))) if v.is_number else to_text(field_order(e))
            when = f", {float(secs):.4g} s" if secs is not None and secs.is_number else ""
            shown_x = as_expr(c.exposed).xreplace(values or {}) if c.exposed is not None else None
            if shown_x is not None and shown_x.is_number and secs.is_number:   # costgraph.training.overlap
                when += f" (exposed {float(shown_x):.4g} s, hidden {float(secs - shown_x):.4g} s: {c.overlap_rule})"
            cells.append([k, f"{c.op} over {c.group}: {shown}{when}"])
        out += table(cells)
    if compute.step is not None:
        out += _step_text(compute, values)
    return out


def _changes_text(changes) -> list[str]:
    """The fit verdict's ``changes`` (:func:`costgraph.training.fit.fit_changes`) as lines."""
    if changes is None:
        return []
    if not changes:
        return ["  no single change tried (recompute, ZeRO stage, micro-batch, TP, PP, devices) lowers the peak"]
    out = ["  what would make it fit, one change at a time (peak of the most-loaded device):"]
    cells = [[c.change, units.with_unit("activation_bytes", c.peak_bytes),   # FitChange (training.result_parts)
              "fits" if c.fits else "does not fit", c.options] for c in changes]
    return out + ["  " + line for line in table(cells)]


def _contention_line(compute, st) -> str:
    """The overlap contention convention and what it added (costgraph.training.contention)."""
    from ..choices import OVERLAP_CONTENTION

    from ..training.contention import FILE, entries

    c = compute.overlap_contention
    missing = c != "none" and compute.hardware not in entries()   # said, never a silent 0 (training.contention)
    return (f"  overlap contention: {c}" + (" (default)" if c == OVERLAP_CONTENTION.default else "")
            + f" ({OVERLAP_CONTENTION.meaning(c)}; --overlap-contention): {float(st.get('contention', 0)):.4g} s"
            + (f" (no {FILE} entry for {compute.hardware}: none counted; a COSTGRAPH_DATA {FILE} may add one)"
               if missing else ""))


def _step_text(compute, values) -> list[str]:
    """The one step time: the rate that set it, and its parts."""
    st = {k: as_expr(x).xreplace(values or {}) for k, x in compute.step.items()}
    rate = compute.rate
    where = f" on {compute.hardware}" if compute.hardware else ""
    head = [f"step time model{where} (rate: {rate.describe()}" + ("" if rate.covers == "step" else
            f"; communication overlap {compute.overlap}"
            + (" (default)" if compute.overlap == OVERLAP.default else "")) + "):"]
    if not all(x.is_number for x in st.values()):
        total = as_expr(compute.step["total"])
        # with overlap rules (Max of sums) expanding is slow and reads no better: printed as derived
        shown = total if total.has(sympy.Max, sympy.Min) else field_order(total)
        return ["", *head, f"  {to_text(shown)} s"]
    if rate.covers == "step":
        line = f"  compute {float(st['total']):.4g} s (the rate covers the whole step)"
    else:
        busy = f"compute {float(st['compute']):.4g} s + bubble {float(st['bubble']):.4g} s"
        if "offload" in st:
            busy = f"max({busy}, offload {float(st['offload']):.4g} s)"
        if "optimizer" in st:   # the per-kernel model's optimizer step (costgraph.training.step_kernels)
            busy += f" + optimizer step {float(st['optimizer']):.4g} s"
        if "offload_serial" in st:   # the CPU optimizer step and the partition back (costgraph.training.offload)
            busy = f"{busy} + CPU step and partition back {float(st['offload_serial']):.4g} s"
        slowed = f" + contention {float(st['contention']):.4g} s" if st.get("contention", 0) != 0 else ""
        line = (f"  {busy} + exposed communication {float(st['communication_exposed']):.4g} s{slowed} = "
                f"{float(st['total']):.4g} s (hidden behind the computation: "
                f"{float(st['communication_overlapped']):.4g} s)")
    extra = [f"  (with offload, compute + bubble is at least the host link's {float(st['offload']):.4g} s)"] \
        if "offload" in st and rate.covers != "step" else []   # CPU/NVMe offload (costgraph.training.offload)
    if compute.overlap_contention is not None and rate.covers != "step":   # costgraph.training.contention
        extra.append(_contention_line(compute, st))
    if compute.compute_by_class is not None:   # the per-kernel model: compute by kernel class (seconds, its fields)
        by = compute.compute_by_class
        parts = {k: as_expr(getattr(by, k)).xreplace(values or {}) for k, _ in quantities(by)}
        extra.insert(0, "  compute by kernel class: " + ", ".join(
            f"{k} {float(v):.4g} s" for k, v in parts.items() if v != 0))
        from ..training.cross_entropy import implementation
        from ..training.step_kernels import OPTIMIZER_CONVENTION, QUANTIZE_CONVENTION

        ce = compute.cross_entropy   # the memory's convention names the kernel timed; None: --no-loss
        loss = None if ce is None else f"--cross-entropy {ce}" + (" (default)" if ce == CROSS_ENTROPY.default else "") \
            + f": {implementation(ce).kernel}"
        extra.insert(1, "  outside the graph, at the table's HBM bandwidth: "
                     + ("no loss (--no-loss)" if loss is None else f"the loss ({loss}, in memory)")
                     + (f"; {QUANTIZE_CONVENTION} (in memory)" if "fp8" in rate.peaks else "")
                     + (f"; the optimizer step ({OPTIMIZER_CONVENTION})" if "optimizer" in st else "")
                     + (f"; the MoE token dispatch copies ({compute.moe_permute}, in memory)"
                        if compute.moe_permute is not None else ""))
        if compute.attention_kernel is not None:   # which fused attention kernel's curves (choices.ATTENTION_KERNEL)
            from ..choices import ATTENTION_KERNEL

            k = compute.attention_kernel
            extra.insert(2, f"  attention kernel: {k}" + (" (default)" if k == ATTENTION_KERNEL.auto else "")
                         + f" ({ATTENTION_KERNEL.meaning(k)}; --attention-kernel)")
        if compute.userbuffers_sms is not None:   # kernel_time.userbuffers_margin
            u = compute.userbuffers_sms
            extra.insert(3, f"  TP-overlapped GEMMs (row-parallel forward; column-parallel dgrad, wgrad) on {u.gemm} of "
                         f"{u.device} SMs: Transformer Engine's default userbuffers take 16 (pipeline and bulk methods)")
        if compute.gemm_rate is not None:   # which GEMM rate (choices.GEMM_RATE; kernel_table.rated)
            from ..choices import GEMM_RATE
            from ..training.kernel_table import sustained_note

            g, note = compute.gemm_rate, sustained_note(rate.table, compute.gemm_rate)
            at = 2 + (compute.attention_kernel is not None) + (compute.userbuffers_sms is not None)
            extra.insert(at, f"  GEMM rate: {g}" + (" (default)" if g == GEMM_RATE.default else "")
                         + f" ({note or GEMM_RATE.meaning(g)}; --gemm-rate)")
    if compute.calibration is not None:   # --efficiency-profile (costgraph.training.calibration)
        from ..training.calibration_profile import calibrated_text

        extra.append("  " + calibrated_text(compute.calibration))
    return ["", *head, line, *extra]


def _beside(beside, values) -> dict:
    """``--megatron``'s :class:`~costgraph.training.result_parts.MegatronBeside`: each side's bytes
    (its :class:`~costgraph.training.result_parts.MemoryEstimate` fields) as ``{expr, latex, value}``."""
    return {who: json_fields(getattr(beside, who), lambda v, q: _entry(v, values)) for who, _ in quantities(beside)}


def _memory_json(st, values) -> dict:
    """A stage's :data:`MEMORY_KEYS` and, under an FP8 policy, ``fp8``: each buffer's bytes."""
    out = {k: _entry(st.memory[k], values) for k in MEMORY_KEYS}
    if "fp8" in st.memory:
        out["fp8"] = {k: _entry(st.memory[k], values) for k in FP8_PARTS if k in st.memory}
    return out


def to_dict(r) -> dict:
    """The JSON contract of the module docstring, as a dict of JSON values, for ``r`` a
    :class:`~costgraph.training.result.TrainingResult`: its ``DOCUMENT``'s keys, in order, each written by
    the writer of its kind (:data:`WRITERS`; :func:`costgraph.result_fields.document_json`)."""
    return document_json(r, WRITERS)


def _offload(r, section) -> dict:
    return offload_json(section, r.values, lambda e, v, unit: _entry(e, v) if unit == "bytes" else _number(e, v))


def _top(r, result: TrainingMemory):
    return result.most_loaded(r.values)


#: the writer of each kind of value of TrainingResult.DOCUMENT: ``(result, value) -> JSON``
WRITERS = {
    "version": lambda r, _: __version__,
    "plan": lambda r, result: plan_dict(result, r.settings or {}),
    "values": lambda r, values: {str(k): int(v) for k, v in (values or {}).items()},
    "top_memory": lambda r, result: _memory_json(_top(r, result), r.values),
    "top_index": lambda r, result: result.stages.index(_top(r, result)),
    "stages": lambda r, result: [{"stage": i, "name": st.name, "memory": _memory_json(st, r.values),
                                  **({"experts": _entry(st.memory["experts"], r.values)}
                                     if st.memory["experts"] != 0 else {}),
                                  **_stage_load(st, r.values)} for i, st in enumerate(result.stages)],
    "top_reason": lambda r, result: _top(r, result).why(r.values),
    "beside": lambda r, beside: _beside(beside, r.values),
    "compute": lambda r, compute: _compute_json(compute, r.values),
    "offload": _offload,
}


def _stage_load(st, values) -> dict:
    """A stage's ``layers`` (iterations of the stacks it holds) and ``in_flight`` (micro-batches kept)."""
    return {"layers": _number(as_expr(st.layers), values), "in_flight": _number(as_expr(st.in_flight), values)}


def to_json_doc(r) -> str:
    """:func:`to_dict` as indented JSON text (what ``costgraph train --format json`` prints)."""
    return json.dumps(to_dict(r), indent=2, ensure_ascii=False)


def _fits_text(fits) -> list[str]:
    """The fit verdict (:func:`costgraph.training.api.training_fits`, a
    :class:`~costgraph.training.result_parts.FitVerdict`) as lines: capacity less the reserve, the
    verdict, the largest b and s that fit, and what would make it fit."""
    if fits is None:
        return []
    cap = fits.capacity_bytes
    verdict = "fits" if fits.fits else "does NOT fit"
    held = fits.reserve_bytes or 0
    out = ["", f"device memory {units.with_unit('activation_bytes', cap)}"
           + (f" ({fits.capacity_from})" if fits.capacity_from else "")
           + (f" less a reserve of {units.with_unit('activation_bytes', held)} ("
              + (fits.reserve_from or "--reserve") + ")" if held or fits.reserve_parts else "")
           + f": the most-loaded device {verdict}"
           + (f" (headroom {units.with_unit('activation_bytes', fits.headroom_bytes)})" if fits.fits else "")]
    for name, what in (("b", "micro-batch b"), ("s", "sequence length s")):
        if name in fits.searched:
            v = getattr(fits, f"largest_{name}")
            out.append(f"  largest {what} that fits (the rest as given): "
                       + (f"{v:,}" if v else f"none ({name} = 1 does not fit)"))
    return out + _changes_text(fits.changes)


def to_text_doc(r) -> str:
    """What ``costgraph train`` prints for ``r`` (a :class:`~costgraph.training.result.TrainingResult`):
    a per-device table of weights, gradients, optimizer, activations, total (formula, and bytes in
    GB and GiB when every symbol has a value) per stage, then the fit, compute, communication,
    step time and Megatron sections present in ``r``."""
    result, values, scope, fits = r.memory, r.values, r.scope, r.fits
    L = result.layout
    plan = plan_dict(result, r.settings)
    head = [f"{r.model}: training memory per device" + (" (one layer)" if scope == "layer" else ""),
            f"layout: {plan['gpus'] or '?'} GPUs = tp {plan['tp']} × pp {plan['pp']} × cp {plan['cp']} × dp "
            f"{plan['dp']}; ep {plan['ep']}" + (", sequence parallel" if L.sp else "")
            + f"; ZeRO {L.zero}" + (f" (HSDP groups of {plan['hsdp']})" if L.hsdp is not None else ""),
            f"precision '{L.policy}', optimizer '{L.optimizer}', activations {L.precision}; recompute "
            f"{describe(L)}, attention {L.attention}" + (" (default)" if L.attention == ATTENTION.default else "")
            + (f", cross-entropy {L.cross_entropy}" + (" (default)" if L.cross_entropy == CROSS_ENTROPY.default else "")
               if L.loss else "")
            + f"; micro-batches in a step m = {plan['micro_batches']}, schedule {L.schedule}"
            + (f" (v = {L.v})" if L.v != 1 else "")
            + (f"; pipeline layout {L.pipeline_layout}" if getattr(L, "pipeline_layout", None) else "")]
    placed = _expert_placement_line(L)
    if placed:
        head.append(placed)
    head += _options_lines(L)
    out = head
    top = result.most_loaded(values)
    for st in result.stages:
        title = st.name + ("  ← most loaded" if st is top and len(result.stages) > 1 else "")
        out += ["", title] + ([f"  {st.why(values)}"] if len(result.stages) > 1 else [])
        cells = []
        fp8 = tuple(k for k in FP8_PARTS if k in st.memory) if "fp8" in st.memory else ()
        for k in (*MEMORY_KEYS[:-1], *fp8, MEMORY_KEYS[-1]):
            e = st.memory[k]
            cells.append([LABELS.get(k, k) + (" (in activations)" if k in (SAVED, ATTENTION_SAVED) else ""),
                          to_text(field_order(e))])
            if values is not None and e.free_symbols <= set(values):
                v = e.xreplace(values)
                cells.append(["", f"= {units.with_unit('activation_bytes', int(sympy.ceiling(v)))}"
                              + ("" if v.is_integer else " (rounded up: a table padded to a multiple of t)")])
        ex = st.memory.get("experts", 0)
        if ex != 0:
            line = to_text(field_order(ex))
            if values is not None and ex.free_symbols <= set(values):
                line += f" = {units.with_unit('activation_bytes', int(ex.xreplace(values)))}"
            cells.append(["  routed experts", line + f" (÷ ep {plan['ep']}"
                          + (f" × etp {plan['etp']})" if plan["etp"] != 1 else ")")])
        out += table(cells)
    if len(result.stages) > 1:
        out += ["", f"most loaded: {top.name}: {top.why(values)}"]
    if values is not None and not all(st.memory["total"].free_symbols <= set(values) for st in result.stages):
        missing = sorted({str(x) for st in result.stages for x in st.memory["total"].free_symbols} -
                         {str(k) for k in values})
        out += ["", f"(no numbers: no value for {', '.join(missing)})"]
    out += _fits_text(fits)
    if getattr(r, "offload", None) is not None:   # CPU/NVMe offload (costgraph.training.offload)
        out += offload_text(r.offload, values, lambda b: units.with_unit("activation_bytes", b))
    if r.compute is not None:
        out += _compute_text(r.compute, values, L.link_rate, L.ep_dispatcher)
    beside = r.megatron
    if beside is not None:
        out += ["", "Megatron-LM's estimate (theoretical_memory_usage.py; first stage) beside costgraph's:"]
        for k, _ in quantities(beside.megatron):   # the MemoryEstimate's fields, bytes
            row = []
            for who, _ in quantities(beside):   # megatron, costgraph, difference
                e = getattr(getattr(beside, who), k)
                shown = (units.with_unit("activation_bytes", int(e.xreplace(values)))
                         if values is not None and e.free_symbols <= set(values) and e.xreplace(values).is_integer
                         else to_text(field_order(e.xreplace(values or {}))))
                row.append(f"{who} {shown}")
            out.append(f"  {k}: " + "; ".join(row))
        out.append("  why they differ: costgraph.training.megatron.DIFFERENCES (README, Training memory)")
    out += [f"warning: {w}" for w in r.warnings or []]
    return "\n".join(out)
