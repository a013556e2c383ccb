"""The renderer of :class:`~costgraph.inference.roofline.InferenceReport` as text and JSON (``costgraph
infer``; its ``to_text()`` and ``to_dict()`` through :mod:`costgraph.export.present`).

JSON contract (stable)::

    {"costgraph": VERSION, "model": NAME,
     "settings": {hardware, prompt, generate, batch, tp, weights, kv, page_size, reserve,
                  compute, convention, causal, activations, compute_efficiency,
                  bandwidth_efficiency, capacity_bytes, quantized[, weights_source]},
     "symbols": {NAME: meaning, ..., "P": "prompt tokens", "G": "generated tokens", ...},
     "values": {symbol: int, ...},
     "kv_cache_bytes", "kv_cache_bytes_paged", "kv_cache_bytes_per_token", "weight_bytes",
     "memory_bytes":   {expr, latex, value},
     "prefill", "decode": {"flops", "bytes", "weight_bytes", "kv_read_bytes", "kv_written_bytes",
                          "activation_bytes", "intensity", "seconds"[, "communication_seconds"]}
                          each {expr, latex, value},
     "time_to_first_token", "time_per_output_token", "time_per_output_token_mean",
     "tokens_per_second", "tokens_per_second_per_device": {expr, latex, value},
     "compute_bound_batch": {expr, latex, value} (value null: never; expr absent for a mixture),
     "decode_total_seconds": {expr, latex, value} (the G - 1 decode steps; closed form),
     "max_batch": int | null, "max_context": int | null, "fits": bool,
     "max_context_memory": int (only when a learned position table, s_max, caps max_context:
                           the positions memory alone would hold),
     "state_bytes": {expr, latex, value} (only with a recurrent state: b sequences' fixed-size
                    states, inside kv_cache_bytes), "context_unbounded": bool (only then: memory
                    does not grow with the context; max_context null),
     "assumptions": [text, ...], "warnings": [text, ...] (P + G longer than s_max),
     "absent": {"seconds": why, "capacity": why} (the answers left out for want of a device
               figure; empty with a preset)}
    (prefill and decode add "seconds_at_least": {expr, latex, value} when seconds are absent
     but a peak or a bandwidth is known: FLOPs/peak or bytes/bandwidth, a lower bound)

Without a preset (``--hardware`` optional; ``--peak``, ``--bandwidth``, ``--memory``,
``--link-bandwidth`` give or replace figures): ``settings.hardware`` null; ``settings``
adds ``peak_flops``, ``memory_bandwidth``, ``link_bandwidth`` (exact text, null where
absent), ``device_memory`` (int | null) and ``figures_from`` (figure → preset key or flag).
With no rate each seconds entry (the steps' ``seconds``, ``time_*``, ``tokens_per_second*``)
is ``{"value": null, "absent": why}`` and ``compute_bound_batch.value`` null; with no device
memory ``fits``, ``max_batch``, ``max_context`` and ``settings.capacity_bytes`` are null.
     "parallel": {NAME: {expr, latex, value}} (only with --ep/--dp-attention/--pp/--tp-overlap:
                experts_per_device, decode.distinct_experts_read_per_device, {phase}.all_to_all_bytes,
                {phase}.all_gather_bytes, {phase}.send_recv_bytes, decode.slowest_stage_seconds),
     "assumptions": [text, ...], "warnings": [text, ...] (P + G longer than s_max)}

``expr`` is SymPy/Python infix in the model's symbols and ``P``, ``G``;
``value`` an int when whole, else a float (seconds, ratios). Per device under ``--tp``.
``settings.quantized``: which weights a quantized dtype applies to (``linear``, ``linear+head``,
``all``, ``experts``); ``settings.weights_source`` (a config.json only): where the weight dtype
came from (``--weights``, or the file's ``quantization_config`` / ``torch_dtype``).
"""

from __future__ import annotations

import json

import sympy

from ..engine.symbols import as_expr

from .printing import field_order, to_latex, to_python, to_text
from ..inference.quantities import InferenceFigures, StepFigures
from ..numbers.units import fixed
from ..result_fields import OMIT, document_json, plain, quantities

#: one phase's step: the fields of costgraph.inference.quantities.StepFigures (each with its unit), in order
STEP_FIELDS = tuple(name for name, _ in quantities(StepFigures))
#: parallel serving's figures (costgraph.inference.serving_report.report_serving), under "serving"
SERVING = ("experts_per_device", "decode.distinct_experts_read_per_device", "prefill.all_to_all_bytes",
           "decode.all_to_all_bytes", "prefill.all_gather_bytes", "decode.all_gather_bytes",
           "prefill.send_recv_bytes", "decode.send_recv_bytes", "decode.slowest_stage_seconds")
_SERVING_LABEL = {"experts_per_device": "experts per device", "decode.distinct_experts_read_per_device":
                  "distinct experts read/step", "prefill.all_to_all_bytes": "prefill EP all-to-all",
                  "decode.all_to_all_bytes": "decode EP all-to-all", "prefill.all_gather_bytes": "prefill DP gather",
                  "decode.all_gather_bytes": "decode DP gather", "prefill.send_recv_bytes": "prefill PP sends",
                  "decode.send_recv_bytes": "decode PP sends", "decode.slowest_stage_seconds": "slowest stage (decode)"}
#: the report's top-level quantities: the fields of costgraph.inference.quantities.InferenceFigures, in order
TOP = tuple(name for name, _ in quantities(InferenceFigures))


def _num(v):
    if v is None:
        return None
    v = as_expr(v)
    return int(v) if v.is_integer else float(v)


def _entry(expr, value) -> dict:
    expr = as_expr(expr)
    try:
        ordered = field_order(expr) if expr.is_Add and expr.is_polynomial() else expr
    except Exception:
        ordered = expr
    from .exprtree import to_tree

    out = {"expr": to_python(ordered), "tree": to_tree(ordered), "latex": to_latex(ordered)}
    out["value"] = _num(value)
    return out


def to_dict(rep, symbols: dict | None = None) -> dict:
    """The JSON contract of the module docstring (schema ``costgraph schema infer``): each
    quantity as ``expr``/``tree``/``latex`` and its value (FLOP, bytes, seconds), the settings,
    assumptions and warnings; ``symbols``: the model's dimension meanings (default: the report's).
    The keys are the report's ``DOCUMENT`` (:class:`~costgraph.inference.roofline.InferenceReport`), each
    written by the writer of its kind (:data:`WRITERS`; :func:`costgraph.result_fields.document_json`)."""
    if symbols is not None and symbols is not rep.symbols:
        import dataclasses

        rep = dataclasses.replace(rep, symbols=symbols)
    return document_json(rep, WRITERS)


def _version(rep, _):
    from ..version import __version__

    return __version__


def _phase(phase: str):
    """The writer of one phase's step (``prefill``, ``decode``): the fields of its
    :class:`~costgraph.inference.quantities.StepFigures` present, seconds absent without a rate, and the lower
    bound ``seconds_at_least`` where there is one."""
    def write(rep, _):
        q, v, step = rep.quantities, rep.values, getattr(rep, phase)
        out = {f: _entry(getattr(step, f), v.get(f"{phase}.{f}")) for f in step}
        if "seconds" not in out:
            out["seconds"] = _absent(rep)
        if f"{phase}.seconds_at_least" in q:   # without a rate: FLOPs/peak or bytes/bandwidth, a lower bound
            out["seconds_at_least"] = _entry(q[f"{phase}.seconds_at_least"], v.get(f"{phase}.seconds_at_least"))
        return out
    return write


def _compute_bound_batch(rep, _) -> dict:
    q, v = rep.quantities, rep.values
    if "compute_bound_batch" in q:
        return {**_entry(q["compute_bound_batch"], None), "value": v.get("compute_bound_batch")}
    return {"value": v.get("compute_bound_batch")}


def _capacity(rep, _) -> dict:
    """:data:`~costgraph.inference.quantities.CAPACITY`'s answers, the memory-bound context, and the
    recurrent state (a model whose context is unbounded)."""
    q, v = rep.quantities, rep.values
    out = {"max_batch": v["max_batch"], "max_context": v["max_context"], "fits": v["fits"]}
    if "max_context_memory" in v:
        out["max_context_memory"] = v["max_context_memory"]
    if "state_bytes" in q:
        out["state_bytes"] = _entry(q["state_bytes"], v.get("state_bytes"))
        out["context_unbounded"] = bool(v.get("context_unbounded", False))
    return out


def _parallel(rep, _):
    q, v = rep.quantities, rep.values
    serving = {k: _entry(q[k], v.get(k)) for k in SERVING if k in q}   # parallel serving (inference/parallel.py)
    return serving or OMIT


def _decode_total(rep, _) -> dict:
    # the G - 1 decode steps in closed form (inference/decode.py); without a rate, absent with the reason
    q = rep.quantities
    return _entry(q["decode_total_seconds"], rep.values.get("decode_total_seconds")) \
        if "decode_total_seconds" in q else _absent(rep)


#: the writer of each kind of value of InferenceReport.DOCUMENT: ``(report, value) -> JSON``
WRITERS = {
    "version": _version,
    "symbols": lambda rep, symbols: {**symbols, "P": "prompt tokens per sequence", "G": "generated tokens per sequence"},
    "values": lambda rep, subs: {str(k): int(x) for k, x in subs.items()},
    "top": lambda rep, _: _top(rep, rep.figures),
    "prefill": _phase("prefill"), "decode": _phase("decode"),
    "compute_bound_batch": _compute_bound_batch, "capacity": _capacity,
    "serving": lambda rep, sv: _serving_doc(sv) if sv else OMIT,
    "to_dict": lambda rep, rw: None if rw is None else rw.to_dict(),   # weights as vLLM loads them
    "parallel": _parallel, "decode_total": _decode_total,
}


def _top(rep, figures) -> dict:
    """The report's top-level quantities, the fields of its :class:`~costgraph.inference.quantities.InferenceFigures`
    in order: each ``{expr, tree, latex, value}``, a seconds figure without a rate absent with the reason."""
    return {k: _entry(getattr(figures, k), rep.values.get(k)) if k in figures else _absent(rep) for k in TOP}


def _absent(rep) -> dict:
    """A seconds entry without a rate: value null and why (no preset, no --peak/--bandwidth)."""
    return {"value": None, "absent": getattr(rep, "absent", {}).get("seconds", "no rate")}


def to_json(rep, symbols: dict) -> str:
    """:func:`to_dict` as indented JSON text."""
    return json.dumps(to_dict(rep, symbols), indent=2)


def _bytes(n) -> str:
    from ..numbers.units import with_unit

    return with_unit("kv_cache_bytes", int(sympy.ceiling(n)))


def _flops(n) -> str:
    from ..numbers.units import with_unit

    return with_unit("flops_forward", int(n))


def _sec(x) -> str:
    x = float(x)
    return f"{x * 1e3:.4g} ms" if x < 1 else f"{x:.4g} s"


def blocks_label(page: int) -> str:
    """The label of the paged KV cache row, within the text's 28-character label column:
    ``paged (blocks of 16)``, ``paged (blocks of 1,048,576)``; from 10 characters on the block size
    is written with an SI prefix (``paged (blocks of 1.000 T)`` for 10^12 tokens; the exact size is
    ``settings.page_size``)."""
    from ..numbers.units import count

    shown = f"{page:,}"
    return f"paged (blocks of {shown if len(shown) <= 9 else count(page)})"


def _short(expr, limit=110) -> str:
    try:
        text = to_text(field_order(expr) if expr.is_Add and expr.is_polynomial() else expr)
    except Exception:
        text = to_text(expr)
    return text if len(text) <= limit else ""


def to_text_doc(rep) -> str:
    """The text ``costgraph infer`` prints: prefill and decode (FLOPs, bytes read and written,
    intensity, roofline time), latency and throughput, capacity (decimal GB and binary GiB),
    the assumptions and warnings."""
    q, v, st = rep.quantities, rep.values, rep.settings
    lines = [f"{rep.model}: inference on {_device(st)}" + (f" × {st.tp} (tensor parallel)" if st.tp > 1 else ""),
             f"batch b = {st.batch} sequences, prompt P = {st.prompt}, generate G = {st.generate}; "
             f"weights {st.weights} (compute {st.compute}), KV cache {st.kv}; "
             f"'{st.convention}' FLOPs, attention {st.causal}",
             ("figures per device; " if st.tp > 1 else "") + "symbols: P prompt, G generated, b batch", ""]
    if st.weights_source is not None:   # issue 17 item 5: where a config.json's weight dtype came from
        lines.insert(2, f"weights from {st.weights_source}")

    def row(label, key, fmt):
        if key not in q:   # a seconds row without a rate (rep.absent says why)
            lines.append(f"  {label:<28}— (absent)")
            return
        expr = q[key]
        val = v.get(key)
        text = _short(expr)
        shown = fmt(val) if val is not None else "?"
        lines.append(f"  {label:<28}{text + ' = ' if text else ''}{shown}")

    lines.append("KV cache (P + G positions per sequence)")
    row("per token", "kv_cache_bytes_per_token", _bytes)
    row("b sequences", "kv_cache_bytes", _bytes)
    if "state_bytes" in q:
        row("of which recurrent state", "state_bytes", _bytes)
    row(blocks_label(st.page_size), "kv_cache_bytes_paged", _bytes)
    row("weights in memory", "weight_bytes", _bytes)
    for phase, title in (("prefill", "prefill (q = P new tokens, n = 0 cached)"),
                         ("decode", "decode step (q = 1, n = P + G - 2 cached: the last step)")):
        if phase == "decode" and st.generate < 2:   # G = 1: the one token comes from the prefill
            lines += ["", "decode step: none (G = 1: the only generated token comes from the prefill)"]
            continue
        lines += ["", title]
        row("FLOPs", f"{phase}.flops", _flops)
        row("weight bytes read", f"{phase}.weight_bytes", _bytes)
        row("KV bytes read", f"{phase}.kv_read_bytes", _bytes)
        row("KV bytes written", f"{phase}.kv_written_bytes", _bytes)
        row("activation traffic" + ("" if st.activations else " (apart)"), f"{phase}.activation_bytes", _bytes)
        row("bytes moved", f"{phase}.bytes", _bytes)
        row("intensity (FLOP/byte)", f"{phase}.intensity", lambda x: f"{float(x):.4g}")
        if f"{phase}.communication_seconds" in q:
            row("TP all-reduces" if st.devices is None else "collectives", f"{phase}.communication_seconds", _sec)
        row("roofline time", f"{phase}.seconds", _sec)
        if f"{phase}.seconds_at_least" in q:
            row("at least (no full roofline)", f"{phase}.seconds_at_least", _sec)
    lines += ["", "latency and throughput"]
    if "time_to_first_token" not in v:
        lines += _absent_lines(rep)
    else:
        _latency(lines, v, st)
        if st.generate < 2:   # G = 1: no decode step (costgraph.inference.decode)
            lines[-1] = f"  {'compute-bound from b =':<26}no decode step (G = 1)"
    if st.devices is not None:   # parallel serving (costgraph.inference.parallel)
        lines += ["", f"parallel serving: {st.devices} devices (tp {st.tp}, ep {st.ep}, "
                      f"dp-attention {st.dp_attention}, pp {st.pp}, tp-overlap {st.tp_overlap})"]
        for k in SERVING:
            if k in q:
                row(_SERVING_LABEL.get(k, k), k, _sec if k.endswith("seconds") else
                    _bytes if k.endswith("bytes") else lambda x: f"{float(x):.4g}")
    lines += _capacity_lines(rep, v, st)
    rw = getattr(rep, "runtime_weights", None)
    lines += (rw.lines() if rw is not None else []) + _serving_lines(rep.serving)
    lines += ["", "assumptions:"] + [f"  - {n}" for n in rep.notes]
    lines += [f"warning: {w}" for w in rep.warnings]
    return "\n".join(lines)


def _device(st) -> str:
    """The device of the header: the preset, the figures given instead of or over it, or none."""
    shown = {"peak_flops": ("peak", 10**12, "TFLOP/s"), "memory_bandwidth": ("HBM", 10**9, "GB/s"),
             "device_memory": ("memory", 10**9, "GB"), "link_bandwidth": ("link", 10**9, "GB/s")}
    origin = st.figures_from
    given = [f"{label} {_figure(getattr(st, k), unit)} {name}" + (" (floored to whole bytes)" if "floored" in origin[k] else "")
             for k, (label, unit, name) in shown.items() if str(origin.get(k, "")).startswith("--")]
    if st.hardware is None:
        return ("a device of " + ", ".join(given)) if given else "no device (bytes and FLOPs only)"
    return st.hardware + (f" with {', '.join(given)} given" if given else "")


def _figure(x, unit: int) -> str:
    """An exact figure (text ``p/q`` or an int) in ``unit``s, short."""
    return f"{float(sympy.Rational(str(x)) / unit):.6g}" if x is not None else "?"


def _absent_lines(rep) -> list[str]:
    """Why there are no seconds: the figure missing and how to give it."""
    return [f"  {rep.absent.get('seconds', 'seconds: no rate')}",
            "  (time to first token, time per output token, tokens/s and the compute-bound batch need both)"]


def _latency(lines: list, v: dict, st) -> None:
    """The latency and throughput lines with a rate."""
    lines.append(f"  {'time to first token':<26}{_sec(v['time_to_first_token'])}")
    if v.get("time_per_output_token") is None:   # G = 1
        lines.append(f"  {'time per output token':<26}none: G = 1, no decode step")
    else:
        lines.append(f"  {'time per output token':<26}{_sec(v['time_per_output_token'])} (last step); "
                     + (f"mean over G - 1 steps {_sec(v['time_per_output_token_mean'])}"
                        if "time_per_output_token_mean" in v else "mean: G = 1, no decode step"))
    if v.get("decode_total_seconds") is not None and st.generate > 1:
        lines.append(f"  {'decode, G - 1 steps':<26}{_sec(v['decode_total_seconds'])} in total "
                     f"(closed form: a sum over the steps, split where each op's roofline switches)")
    if "tokens_per_second" in v:
        lines.append(f"  {'tokens/s':<26}{fixed(v['tokens_per_second'], 1)} in total, "
                     f"{fixed(v['tokens_per_second_per_device'], 1)} per device")
    cb = v.get("compute_bound_batch")
    lines.append(f"  {'compute-bound from b =':<26}" + (f"{cb:,}" if cb is not None else
                 "never (the bytes each sequence reads — its KV cache or recurrent state — grow as fast as its FLOPs)")
                 + (" (exact root of FLOPs/peak = bytes/bandwidth at the last step)" if cb is not None else ""))


def _capacity_lines(rep, v: dict, st) -> list[str]:
    """The capacity lines: the fit against the device memory, or why there is none."""
    if st.capacity_bytes is None:
        return ["", "capacity", f"  {'memory at this batch':<26}{_bytes(v['memory_bytes'])}" if v.get("memory_bytes")
                is not None else f"  {'memory at this batch':<26}?",
                f"  {rep.absent.get('capacity', 'capacity: no device memory given')}: no fit verdict, "
                "largest batch or longest context"]
    device = "the device"   # --memory: as given; a preset's: its GiB and the convention it is read under, named
    if st.device_memory_from not in (None, "--memory") and st.device_memory is not None:
        device = f"{st.device_memory / 2**30:,.2f} GiB, " + st.device_memory_from.split(":", 1)[0]
    return ["", f"capacity ({st.capacity_bytes:,} bytes usable: reserve {st.reserve} of {device})",
              f"  {'memory at this batch':<26}{_bytes(v['memory_bytes'])}: " + ("fits" if v["fits"] else "does NOT fit"),
              f"  {'largest batch':<26}" + (f"{v['max_batch']:,} sequences of P + G tokens" if v["max_batch"] else "none fits"),
              f"  {'longest context':<26}" + (f"{v['max_context']:,} tokens per sequence at b = {st.batch}"
                                               + (f" (s_max: the learned position table; memory would hold "
                                                  f"{v['max_context_memory']:,})" if "max_context_memory" in v else "")
                                               if v["max_context"] else "unbounded (the cache is a "
                                               "fixed-size recurrent state)" if v.get("context_unbounded")
                                               else "none fits")]


# --- serving: vLLM's KV cache, prefix caching, chunked prefill, speculative decoding ------------
# (costgraph.inference.capacity, .prefill_modes, .speculative; the JSON key "serving")

def _serving_doc(sv) -> dict:
    """``serving``: ``vllm`` (vLLM's KV cache: numbers; ``max_concurrency`` a float, exact
    fraction in ``max_concurrency_exact``), ``prefix_caching`` and ``speculative`` (quantities as
    ``{expr, tree, latex, value}``), ``chunked_prefill`` (``time_to_first_token`` a number)."""
    out = {}   # sv: a ServingFigures (costgraph.inference.report_parts)
    if sv.vllm is not None:   # a VllmKvCache (inference/kv_parts.py): its present fields in order
        v = plain(sv.vllm)   # nested parts (V0's SamplerPeak) as dicts
        mc = sv.vllm.max_concurrency
        v["max_concurrency"] = None if mc is None else float(mc)
        v["max_concurrency_exact"] = None if mc is None else str(mc)
        out["vllm"] = v
    if sv.runtime is not None:   # a RuntimeKvCache (inference/kv_parts.py): numbers, and SymPy numbers as text
        out["runtime"] = {k: (str(x) if isinstance(x, sympy.Basic) else x) for k, x in sv.runtime.to_dict().items()}
    if (p := sv.prefix_caching) is not None:
        out["prefix_caching"] = {"shared_prefix": p.shared_prefix, "fits": p.fits, "max_batch": p.max_batch,
                                 **{k: _entry(e, val) for k, (e, val) in p.quantities.items()}}
    if (c := sv.chunked_prefill) is not None:
        out["chunked_prefill"] = {"chunk": c.chunk, "chunks": c.chunks,
                                  "time_to_first_token": _num(c.time_to_first_token)}
    if (sp := sv.speculative) is not None:
        out["speculative"] = {"k": sp.k, "acceptance": sp.acceptance, "draft": sp.draft,
                              **{k: _entry(e, val) for k, (e, val) in sp.quantities.items()},
                              "fits_with_draft": sp.fits_with_draft, "max_batch_with_draft": sp.max_batch_with_draft}
    return out


def _serving_lines(sv) -> list[str]:
    """The text of ``serving`` (a ServingFigures, after the capacity)."""
    from ..inference.capacity import vllm_lines

    if (rt := sv.runtime) is not None:   # --runtime sglang, trtllm, llamacpp (inference/runtimes.py): its block
        lines = ["", f"{rt.runtime} KV cache (as its start-up log reports it)"] + [f"  {x}" for x in rt.lines]
    else:
        lines = vllm_lines(sv.vllm) if sv.vllm is not None else []
    if (p := sv.prefix_caching) is not None:
        q = {k: val for k, (_, val) in p.quantities.items()}
        lines += ["", f"prefix caching (S = {p.shared_prefix:,} prompt tokens shared by every sequence; "
                      "full blocks stored once)",
                  f"  {'KV cache, paged':<26}{_bytes(q['kv_cache_bytes_paged'])}",
                  f"  {'memory at this batch':<26}{_bytes(q['memory_bytes'])}" + (
                      "" if p.fits is None else ": fits" if p.fits else ": does NOT fit"),
                  f"  {'largest batch':<26}" + ("— (no device memory)" if p.fits is None else
                                                f"{p.max_batch:,} sequences" if p.max_batch else "none fits"),
                  f"  {'time to first token':<26}{_sec(q['time_to_first_token'])} (the first sequence's whole "
                  "prompt, then the others' unshared part)"]
    if (c := sv.chunked_prefill) is not None:
        lines += ["", f"chunked prefill ({c.chunks:,} chunks of up to {c.chunk:,} tokens)",
                  f"  {'time to first token':<26}{_sec(c.time_to_first_token)}"]
    if (sp := sv.speculative) is not None:
        q = {k: val for k, (_, val) in sp.quantities.items()}
        lines += ["", f"speculative decoding (draft {sp.draft}, k = {sp.k} proposed tokens, acceptance "
                      f"{sp.acceptance})",
                  f"  {'tokens per step':<26}{float(q['tokens_per_step']):.4g} (1 - a^(k+1))/(1 - a)",
                  f"  {'draft step (one token)':<26}{_sec(q['draft_step_seconds'])}",
                  f"  {'verify step (q = k + 1)':<26}{_sec(q['verify_seconds'])}",
                  f"  {'time per output token':<26}{_sec(q['time_per_output_token'])} (last step; plain decode "
                  "above)",
                  f"  {'tokens/s':<26}{fixed(q['tokens_per_second'], 1)} in total",
                  f"  {'draft weights':<26}{_bytes(q['draft_weight_bytes'])}" + (
                      " (MTP layers; embedding and head shared)" if sp.draft == "mtp" else ""),
                  f"  {'draft KV cache':<26}{_bytes(q['draft_kv_cache_bytes'])} (its layers in every cached token)"]
        if "memory_bytes_with_draft" in q:
            fits, best = sp.fits_with_draft, sp.max_batch_with_draft
            lines += [f"  {'memory with the draft':<26}{_bytes(q['memory_bytes_with_draft'])}: "
                      + ("fits" if fits else "does NOT fit") + "; largest batch "
                      + (f"{best:,} sequences" if best else "none fits")]
    return lines
