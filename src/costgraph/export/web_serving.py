"""The serving side of the calculator page (:mod:`costgraph.export.web`): the KV cache, the weights, the
memory of a batch and the largest batch that fits one device, as ``costgraph infer --tp T --weights W
--kv K`` computes them (:meth:`costgraph.Model.infer`: vLLM's paged KV cache in blocks of 16 tokens; with
``--tp T`` the memory of one of the T devices).

``infer``'s closed forms are in the prompt ``P``, the tokens generated ``G`` and the batch ``b`` (the
page's inputs *prompt*, *generate*, *batch*; ``b`` is not training's micro-batch there). Its memory is
``weights + KV cache`` (checked for every call here, else that tensor-parallel degree is left out): the
weights depend on the TP degree and the weight dtype (:data:`WEIGHTS`), the KV cache on the TP degree and
the KV dtype (:data:`KV_DTYPES`), so the page carries one closed form per (TP, weight dtype) and per (TP,
KV dtype) — ``infer`` called once per TP degree and pair ``(WEIGHTS[i], KV_DTYPES[i])`` — and adds them.
The KV cache is split as ``base + b × per_sequence`` (linear in ``b``: checked, else the largest batch is
left out), so the page computes the largest batch on the preset chosen,
``floor((capacity − weights − base) / per_sequence)`` with ``capacity = (1 − reserve) × device memory`` —
``infer``'s ``max_batch``.
"""

from __future__ import annotations

from ..choices import DEFAULT_KV

#: the KV cache dtypes the page offers (``costgraph infer --kv``; the default first)
KV_DTYPES = (DEFAULT_KV, "fp16", "fp8", "int8")

#: the weight dtypes the page offers (``costgraph infer --weights``: bf16, the default, and the common
#: quantized ones; as many as :data:`KV_DTYPES`, paired with them in one ``infer`` call each)
WEIGHTS = ("bf16", "fp8", "int8", "int4")

#: the tensor-parallel degrees the page offers (``costgraph infer --tp``; vLLM's usual 1 to 8 GPUs of a node)
SERVE_TP = (1, 2, 4, 8)

#: infer's symbols beside the model's (the page's inputs prompt and generate; the batch is b)
SERVING_DIMS = {"P": "prompt tokens per sequence (serving)", "G": "tokens generated per sequence (serving)"}

#: the serving inputs' first values: prompt and generated tokens, batch, TP degree, weight dtype
START = {"prompt": 2048, "generate": 512, "batch": 8, "serve_tp": 1, "weights": WEIGHTS[0]}


def serving_table(model, add, values, hardware: str) -> dict:
    """The page's serving table (module docstring): ``{"tp": {T: {"kv": {dtype: {part: {"fn"}}},
    "weights": {dtype: {"fn"}}}}, "reserve": [p, q]}`` (KV parts ``kv_per_token``, ``kv``,
    ``base``, ``per_sequence``; a TP degree ``infer`` refuses for the model: ``{"absent": why}``), or
    ``{"absent": why}`` where ``infer`` has no answer for the model (not decoder-only, a dimension named
    ``P`` or ``G``, no values to build it at). ``add`` as :func:`costgraph.export.web_training.training_table`'s.
    ``infer`` is called without a preset: its weights and KV cache read none (the page checks them against
    ``infer --hardware`` on four presets: ``tests/export/test_web.py``), and without one it derives no step
    times (the page shows none: 2.9 s of the 3.3 s of CPU of the thirteen calls for GPT-2); where a size
    is missing (the memory at ``values`` has symbols besides P, G and b: no number,
    :func:`costgraph.inference.device.no_capacity`), again on the page's first preset ``hardware``, as
    before: ``infer --hardware`` names the sizes its memory verdict lacks, and the page says so. (Where
    every size has a value the preset changes none of the closed forms the page reads: the weights, the
    KV cache and their sum; the second call, with the step times a preset brings, is not made: it was
    12 of GPT-2's 25 calls and ~1 s of the page's CPU.)"""
    import sympy

    from ..errors import CostgraphError

    clash = sorted({"P", "G"} & {str(s) for s in model.symbols})
    if clash:
        return {"absent": f"the model has a dimension named {clash[0]}, which infer's formulas use for the prompt "
                          "or the tokens generated"}
    out: dict = {"tp": {}}
    report = None
    for tp in SERVE_TP:
        cell: dict = {"kv": {}, "weights": {}}
        for kv, weights in zip(KV_DTYPES, WEIGHTS):
            try:
                kw = {"prompt": 1, "generate": 1, "batch": 1, "values": values, "kv": kv, "tp": tp, "weights": weights}
                report = model.infer(hardware=None, **kw)
                if report.values.get("memory_bytes") is None:   # a size missing at the values (device.no_capacity)
                    report = model.infer(hardware=hardware, **kw)   # infer --hardware's answer: it names them
            except CostgraphError as e:
                if tp == 1:
                    return {"absent": f"costgraph infer: {e.message}"}
                cell = {"absent": f"costgraph infer --tp {tp}: {e.message}"}
                break
            q = report.quantities
            if sympy.expand(q["memory_bytes"] - q["weight_bytes"] - q["kv_cache_bytes_paged"]) != 0:
                cell = {"absent": f"costgraph infer --tp {tp}: its memory is more than weights and KV cache"}
                break
            cell["weights"][weights] = add(f"serve_weights_tp{tp}_{weights}", f"serve/tp{tp}", "weights", "B",
                                           f"weight bytes per device ({weights}, TP {tp})", q["weight_bytes"])
            cell["kv"][kv] = _kv(add, q, tp, kv)
        out["tp"][str(tp)] = cell
    reserve = sympy.Rational(report.settings.reserve)
    out["reserve"] = [str(reserve.p), str(reserve.q)]     # infer's reserve, a fraction of the device
    return out


def _kv(add, q, tp: int, kv: str) -> dict:
    """One (TP, KV dtype)'s KV parts: per token, of the batch, and the batch's split ``base + b × per``."""
    import sympy

    out = {key: add(f"serve_{key}_tp{tp}_{kv}", f"serve/tp{tp}/{kv}", key, "B", f"{what} (KV {kv}, TP {tp})", q[name])
           for key, name, what in (("kv_per_token", "kv_cache_bytes_per_token", "KV cache bytes per token"),
                                   ("kv", "kv_cache_bytes_paged", "KV cache bytes of the batch (paged)"))}
    paged = q["kv_cache_bytes_paged"]
    b = next((x for x in paged.free_symbols if str(x) == "b"), sympy.Symbol("b", integer=True, positive=True))
    base, per = paged.subs(b, 0), sympy.diff(paged, b)
    if sympy.expand(paged - base - b * per) == 0 and not per.has(b):
        out["base"] = add(f"serve_base_tp{tp}_{kv}", f"serve/tp{tp}/{kv}", "base", "B",
                          f"KV cache bytes without a sequence (KV {kv}, TP {tp})", base)
        out["per_sequence"] = add(f"serve_per_sequence_tp{tp}_{kv}", f"serve/tp{tp}/{kv}", "per_sequence", "B",
                                  f"KV cache bytes per sequence of P + G tokens (KV {kv}, TP {tp})", per)
    return out


__all__ = ["KV_DTYPES", "SERVE_TP", "SERVING_DIMS", "START", "WEIGHTS", "serving_table"]
