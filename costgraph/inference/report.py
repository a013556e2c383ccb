"""Text and JSON of ``costgraph infer``.

JSON contract (stable)::

    {"costgraph": VERSION, "model": NAME,
     "settings": {hardware, prompt, generate, batch, tp, weights, kv, page_size, reserve,
                  compute, convention, causal, activations, compute_efficiency,
                  bandwidth_efficiency, capacity_bytes},
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
     "assumptions": [text, ...], "warnings": [text, ...] (P + G longer than s_max)}

``expr`` is SymPy/Python infix in the model's symbols and ``P``, ``G``;
``value`` an int when whole, else a float (seconds, ratios). Per device under ``--tp``.
"""

from __future__ import annotations

import json

import sympy

from ..engine.symbols import as_expr

from ..export.printing import field_order, to_latex, to_python, to_text

STEP_FIELDS = ("flops", "bytes", "weight_bytes", "kv_read_bytes", "kv_written_bytes", "activation_bytes",
               "intensity", "seconds", "communication_seconds")
TOP = ("kv_cache_bytes", "kv_cache_bytes_paged", "kv_cache_bytes_per_token", "weight_bytes", "memory_bytes",
       "time_to_first_token", "time_per_output_token", "time_per_output_token_mean", "tokens_per_second",
       "tokens_per_second_per_device")


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
    from ..export.exprtree import to_tree

    out = {"expr": to_python(ordered), "tree": to_tree(ordered), "latex": to_latex(ordered)}
    out["value"] = _num(value)
    return out


def to_dict(rep, symbols: dict) -> dict:
    """The JSON contract of the module docstring (schema ``costgraph schema infer``): each
    quantity as ``expr``/``tree``/``latex`` and its value (FLOP, bytes, seconds), the settings,
    assumptions and warnings; ``symbols``: the model's dimension meanings."""
    from ..version import __version__

    q, v = rep.quantities, rep.values
    doc = {"costgraph": __version__, "model": rep.model, "settings": rep.settings,
           "symbols": {**symbols, "P": "prompt tokens per sequence", "G": "generated tokens per sequence"},
           "values": {str(k): int(x) for k, x in rep.subs.items()}}
    for k in TOP:
        doc[k] = _entry(q[k], v.get(k))
    for phase in ("prefill", "decode"):
        doc[phase] = {f: _entry(q[f"{phase}.{f}"], v.get(f"{phase}.{f}")) for f in STEP_FIELDS
                      if f"{phase}.{f}" in q}
    cb = {"value": v.get("compute_bound_batch")}
    if "compute_bound_batch" in q:
        cb = {**_entry(q["compute_bound_batch"], None), "value": v.get("compute_bound_batch")}
    doc["compute_bound_batch"] = cb
    doc["max_batch"], doc["max_context"], doc["fits"] = v["max_batch"], v["max_context"], v["fits"]
    if "max_context_memory" in v:
        doc["max_context_memory"] = v["max_context_memory"]
    if "state_bytes" in q:
        doc["state_bytes"] = _entry(q["state_bytes"], v.get("state_bytes"))
        doc["context_unbounded"] = bool(v.get("context_unbounded", False))
    if "decode_total_seconds" in q:   # the G - 1 decode steps in closed form (inference/decode.py)
        doc["decode_total_seconds"] = _entry(q["decode_total_seconds"], v.get("decode_total_seconds"))
    doc["assumptions"] = rep.notes
    doc["warnings"] = rep.warnings
    return doc


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
    lines = [f"{rep.model}: inference on {st['hardware']}" + (f" × {st['tp']} (tensor parallel)" if st["tp"] > 1 else ""),
             f"batch b = {st['batch']} sequences, prompt P = {st['prompt']}, generate G = {st['generate']}; "
             f"weights {st['weights']} (compute {st['compute']}), KV cache {st['kv']}; "
             f"'{st['convention']}' FLOPs, attention {st['causal']}",
             ("figures per device; " if st["tp"] > 1 else "") + "symbols: P prompt, G generated, b batch", ""]

    def row(label, key, fmt):
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
    row(f"paged (blocks of {st['page_size']})", "kv_cache_bytes_paged", _bytes)
    row("weights in memory", "weight_bytes", _bytes)
    for phase, title in (("prefill", "prefill (q = P new tokens, n = 0 cached)"),
                         ("decode", "decode step (q = 1, n = P + G - 2 cached: the last step)")):
        if phase == "decode" and st["generate"] < 2:   # G = 1: the one token comes from the prefill
            lines += ["", "decode step: none (G = 1: the only generated token comes from the prefill)"]
            continue
        lines += ["", title]
        row("FLOPs", f"{phase}.flops", _flops)
        row("weight bytes read", f"{phase}.weight_bytes", _bytes)
        row("KV bytes read", f"{phase}.kv_read_bytes", _bytes)
        row("KV bytes written", f"{phase}.kv_written_bytes", _bytes)
        row("activation traffic" + ("" if st["activations"] else " (apart)"), f"{phase}.activation_bytes", _bytes)
        row("bytes moved", f"{phase}.bytes", _bytes)
        row("intensity (FLOP/byte)", f"{phase}.intensity", lambda x: f"{float(x):.4g}")
        if f"{phase}.communication_seconds" in q:
            row("TP all-reduces", f"{phase}.communication_seconds", _sec)
        row("roofline time", f"{phase}.seconds", _sec)
    lines += ["", "latency and throughput"]
    lines.append(f"  {'time to first token':<26}{_sec(v['time_to_first_token'])}")
    if v.get("time_per_output_token") is None:   # G = 1
        lines.append(f"  {'time per output token':<26}none: G = 1, no decode step")
    else:
        lines.append(f"  {'time per output token':<26}{_sec(v['time_per_output_token'])} (last step); "
                     + (f"mean over G - 1 steps {_sec(v['time_per_output_token_mean'])}"
                        if "time_per_output_token_mean" in v else "mean: G = 1, no decode step"))
    if v.get("decode_total_seconds") is not None and st["generate"] > 1:
        lines.append(f"  {'decode, G - 1 steps':<26}{_sec(v['decode_total_seconds'])} in total "
                     f"(closed form: a sum over the steps, split where each op's roofline switches)")
    if "tokens_per_second" in v:
        lines.append(f"  {'tokens/s':<26}{float(v['tokens_per_second']):,.1f} in total, "
                     f"{float(v['tokens_per_second_per_device']):,.1f} per device")
    cb = v.get("compute_bound_batch")
    lines.append(f"  {'compute-bound from b =':<26}" + (f"{cb:,}" if cb is not None else
                 "never (the bytes each sequence reads — its KV cache or recurrent state — grow as fast as its FLOPs)")
                 + (" (exact root of FLOPs/peak = bytes/bandwidth at the last step)" if cb is not None else ""))
    if st["generate"] < 2:   # G = 1: no decode step
        lines[-1] = f"  {'compute-bound from b =':<26}no decode step (G = 1)"
    lines += ["", f"capacity ({st['capacity_bytes']:,} bytes usable: reserve {st['reserve']} of the device)",
              f"  {'memory at this batch':<26}{_bytes(v['memory_bytes'])}: " + ("fits" if v["fits"] else "does NOT fit"),
              f"  {'largest batch':<26}" + (f"{v['max_batch']:,} sequences of P + G tokens" if v["max_batch"] else "none fits"),
              f"  {'longest context':<26}" + (f"{v['max_context']:,} tokens per sequence at b = {st['batch']}"
                                               + (f" (s_max: the learned position table; memory would hold "
                                                  f"{v['max_context_memory']:,})" if "max_context_memory" in v else "")
                                               if v["max_context"] else "unbounded (the cache is a "
                                               "fixed-size recurrent state)" if v.get("context_unbounded")
                                               else "none fits"),
              "", "assumptions:"] + [f"  - {n}" for n in rep.notes]
    lines += [f"warning: {w}" for w in rep.warnings]
    return "\n".join(lines)
