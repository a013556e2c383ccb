"""The quantities of ``costgraph infer`` (:class:`~costgraph.inference.roofline.InferenceReport`), by
their JSON name: unit and label, declared once beside the analysis that fills them. The JSON renderer
(:mod:`costgraph.export.inference_report`) writes them in this order, the table (``print``, Jupyter,
``to_pandas()``: :func:`costgraph.export.results_html.inference_table`) takes their units from here.
"""

from __future__ import annotations

from ..result_fields import Quantity


def _declared(*rows) -> dict[str, Quantity]:
    return {k: Quantity(unit, label, k) for k, unit, label in rows}


#: the report's top-level quantities (each ``{expr, tree, latex, value}`` in the JSON)
TOP = _declared(
    ("kv_cache_bytes", "bytes", "KV cache"), ("kv_cache_bytes_paged", "bytes", "KV cache, paged"),
    ("kv_cache_bytes_per_token", "bytes", "KV cache per token"), ("weight_bytes", "bytes", "weights"),
    ("memory_bytes", "bytes", "memory at this batch"), ("time_to_first_token", "s", "time to first token"),
    ("time_per_output_token", "s", "time per output token"),
    ("time_per_output_token_mean", "s", "time per output token (mean)"),
    ("tokens_per_second", "tokens/s", "tokens per second"),
    ("tokens_per_second_per_device", "tokens/s", "tokens per second per device"))

#: one phase's step (``prefill`` and ``decode`` in the JSON)
STEP = _declared(
    ("flops", "FLOP", "FLOPs"), ("bytes", "bytes", "bytes moved"), ("weight_bytes", "bytes", "weights read"),
    ("kv_read_bytes", "bytes", "KV cache read"), ("kv_written_bytes", "bytes", "KV cache written"),
    ("activation_bytes", "bytes", "activations moved"), ("intensity", "FLOP/byte", "arithmetic intensity"),
    ("seconds", "s", "step time"), ("communication_seconds", "s", "communication time"))

#: the capacity's answers (plain numbers in the JSON)
CAPACITY = _declared(("fits", "", "fits"), ("max_batch", "", "largest batch"),
                     ("max_context", "tokens", "longest context"))
