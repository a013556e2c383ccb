"""The serving side of the calculator page (:mod:`costgraph.export.web`): the KV cache, the memory of a
batch and the largest batch that fits one device, as ``costgraph infer`` computes them
(:meth:`costgraph.Model.infer`: weights bf16, one device, vLLM's paged KV cache in blocks of 16 tokens).

``infer``'s closed forms are in the prompt ``P``, the tokens generated ``G`` and the batch ``b`` (the
page's inputs *prompt*, *generate*, *batch*; ``b`` is not training's micro-batch there). For each KV
cache dtype the page offers (:data:`KV_DTYPES`) it carries the KV bytes per token, the paged KV cache of
the batch, the weights, the memory at the batch, and that memory split as ``base + b × per_sequence``
(``infer``'s memory is linear in ``b``: checked here, else the largest batch is left out), so the page
computes the largest batch on the preset chosen, ``floor((capacity − base) / per_sequence)`` with
``capacity = (1 − reserve) × device memory`` — ``infer``'s ``max_batch``.
"""

from __future__ import annotations

from ..choices import DEFAULT_KV

#: the KV cache dtypes the page offers (``costgraph infer --kv``; the default first)
KV_DTYPES = (DEFAULT_KV, "fp16", "fp8", "int8")

#: infer's symbols beside the model's (the page's inputs prompt and generate; the batch is b)
SERVING_DIMS = {"P": "prompt tokens per sequence (serving)", "G": "tokens generated per sequence (serving)"}

#: the serving inputs' first values: prompt and generated tokens, batch
START = {"prompt": 2048, "generate": 512, "batch": 8}

_PARTS = (("kv_per_token", "kv_cache_bytes_per_token", "KV cache bytes per token"),
          ("kv", "kv_cache_bytes_paged", "KV cache bytes of the batch (paged)"),
          ("weights", "weight_bytes", "weight bytes in memory"),
          ("memory", "memory_bytes", "memory at this batch: weights and KV cache"))


def serving_table(model, add, values, hardware: str) -> dict:
    """The page's serving table (module docstring): ``{"kv": {dtype: {part: {"fn", "formula"}}}}``, or
    ``{"absent": why}`` where ``infer`` has no answer for the model (not decoder-only, a dimension named
    ``P`` or ``G``, no values to build it at). ``add`` as :func:`costgraph.export.web_training.training_table`'s."""
    import sympy

    from ..errors import CostgraphError

    clash = sorted({"P", "G"} & {str(s) for s in model.symbols})
    if clash:
        return {"absent": f"the model has a dimension named {clash[0]}, which infer's formulas use for the prompt "
                          "or the tokens generated"}
    out: dict = {"kv": {}}
    for kv in KV_DTYPES:
        try:
            report = model.infer(hardware=hardware, prompt=1, generate=1, batch=1, values=values, kv=kv)
        except CostgraphError as e:
            return {"absent": f"costgraph infer: {e.message}"}
        q = report.quantities
        cell = {key: add(f"serve_{key}_{kv}", f"serve/{kv}", key, "B", f"{what} (KV {kv})", q[name])
                for key, name, what in _PARTS}
        b = sympy.Symbol("b", integer=True, positive=True)
        b = next((x for x in q["memory_bytes"].free_symbols if str(x) == "b"), b)
        memory = q["memory_bytes"]
        base, per = memory.subs(b, 0), sympy.diff(memory, b)
        if sympy.expand(memory - base - b * per) == 0 and not per.has(b):
            cell["base"] = add(f"serve_base_{kv}", f"serve/{kv}", "base", "B",
                               f"memory without a sequence (KV {kv})", base)
            cell["per_sequence"] = add(f"serve_per_sequence_{kv}", f"serve/{kv}", "per_sequence", "B",
                                       f"memory per sequence of P + G tokens (KV {kv})", per)
        out["kv"][kv] = cell
    reserve = sympy.Rational(report.settings["reserve"])
    out["reserve"] = [str(reserve.p), str(reserve.q)]     # infer's reserve, a fraction of the device
    return out


__all__ = ["KV_DTYPES", "SERVING_DIMS", "START", "serving_table"]
