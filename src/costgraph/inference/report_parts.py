"""The settings and the serving figures of ``costgraph infer``
(:class:`~costgraph.inference.roofline.InferenceReport`'s ``settings`` and ``serving``), declared as typed
parts whose fields carry their unit and label (:func:`costgraph.result_fields.quantity`, the mechanism of
:mod:`costgraph.inference.quantities` and :mod:`costgraph.training.result_parts`); each is also the mapping it
replaced (:class:`costgraph.result_fields.Part`: ``rep.settings["tp"]``, ``"devices" in rep.settings``).

* :class:`InferenceSettings`: what the run was asked and the device figures it used, built by
  :func:`costgraph.inference.roofline.infer` (the device's by :func:`costgraph.inference.device.settings`,
  the usable memory by :mod:`costgraph.inference.capacity`, the runtime by :mod:`costgraph.inference.serving`,
  the parallel layout by :mod:`costgraph.inference.serving_report`, ``weights_source`` by ``costgraph infer``);
* :class:`ServingFigures`: vLLM's (or another runtime's) KV cache, prefix caching, chunked prefill and
  speculative decoding (:mod:`costgraph.inference.serving`), each present only when computed, each typed
  (the KV caches in :mod:`costgraph.inference.kv_parts`; :class:`PrefixCaching`, :class:`ChunkedPrefill`,
  :class:`Speculative`).

The JSON renderer (:mod:`costgraph.export.inference_report`) writes the present fields in their order.

Light at import: the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..result_fields import Part, quantity
from .kv_parts import RuntimeKvCache, VllmKvCache


def _opt(unit: str = "", label: str = ""):
    """A field present (a key) only when set (not None)."""
    return quantity(unit, label=label, omit_none=True, default=None)


@dataclass
class InferenceSettings(Part):
    """The settings of one ``infer`` run (the JSON's ``settings``). Counts are whole numbers; exact figures
    (``reserve``, the efficiencies, ``peak_flops``, ``memory_bandwidth``, ``link_bandwidth``) are text
    (``p/q`` where not whole) as the JSON writes them; None where absent (no preset: ``hardware``; a figure
    nobody gave). ``figures_from``: figure name → where it comes from. Set a field with :meth:`set`."""

    hardware: str | None = quantity(label="hardware preset", default=None)
    prompt: int = quantity("tokens", label="prompt P", default=0)
    generate: int = quantity("tokens", label="generated G", default=0)
    batch: int = quantity("sequences", label="batch b", default=0)
    tp: int = quantity(label="tensor-parallel degree", default=1)
    weights: str = quantity(label="weight dtype", default="")
    kv: str = quantity(label="KV cache dtype", default="")
    page_size: int = quantity("tokens", label="KV block size", default=16)
    reserve: str = quantity(label="memory reserve (fraction)", default="0")
    compute: str = quantity(label="compute dtype", default="")
    convention: str = quantity(label="FLOP convention", default="")
    causal: str = quantity(label="causal attention FLOPs", default="")
    activations: bool = quantity(label="activation traffic counted", default=False)
    compute_efficiency: str = quantity(label="compute efficiency", default="1")
    bandwidth_efficiency: str = quantity(label="bandwidth efficiency", default="1")
    peak_flops: str | None = quantity("FLOP/s", label="peak FLOP/s", default=None)
    memory_bandwidth: str | None = quantity("B/s", label="HBM bandwidth", default=None)
    device_memory: int | None = quantity("bytes", label="device memory", default=None)
    link_bandwidth: str | None = quantity("B/s", label="TP link bandwidth", default=None)
    figures_from: dict = quantity(label="where each figure comes from", default_factory=dict)
    memory_convention: str | None = _opt(label="memory convention of the preset")
    device_memory_from: str | None = _opt(label="where the device memory comes from")
    capacity_bytes: int | None = quantity("bytes", label="usable memory", default=None)
    runtime: str | None = quantity(label="serving runtime", default=None)
    quantized: str | None = quantity(label="quantized weights", default=None)
    ep: int | None = _opt(label="expert-parallel degree")
    dp_attention: int | None = _opt(label="data-parallel attention degree")
    pp: int | None = _opt(label="pipeline-parallel degree")
    tp_overlap: str | None = _opt(label="TP communication overlap")
    devices: int | None = _opt(label="devices")
    weights_source: str | None = _opt(label="where the weight dtype comes from")

    def set(self, **values) -> None:
        """Set fields by name (``rep.settings.set(runtime="vllm")``). Raises AttributeError for a name that
        is no field (a typo would otherwise add an attribute the JSON never writes)."""
        for name, value in values.items():
            if name not in self.__dataclass_fields__:
                raise AttributeError(f"InferenceSettings has no field {name!r}")
            setattr(self, name, value)


@dataclass
class PrefixCaching(Part):
    """Prefix caching (:mod:`costgraph.inference.prefill_modes`): ``quantities`` name → ``(expr, value)``
    (``kv_cache_bytes_paged`` and ``memory_bytes`` in bytes, ``time_to_first_token`` in s); the fit and the
    largest batch None without a device memory."""

    shared_prefix: int = quantity("tokens", label="shared prefix S", default=0)
    quantities: dict = quantity(label="KV cache, memory, time to first token", default_factory=dict)
    fits: bool | None = quantity(label="fits", default=None)
    max_batch: int | None = quantity("sequences", label="largest batch", default=None)


@dataclass
class ChunkedPrefill(Part):
    """Chunked prefill (:func:`costgraph.inference.prefill_modes.chunked_prefill_seconds`)."""

    chunk: int = quantity("tokens", label="chunk size", default=0)
    chunks: int = quantity(label="chunks", default=0)
    time_to_first_token: object = quantity("s", label="time to first token", default=None)


@dataclass
class Speculative(Part):
    """Speculative decoding (:mod:`costgraph.inference.speculative`): ``k`` proposed tokens, ``acceptance``
    α (exact text), the draft's name (``mtp``: the target's MTP heads); ``quantities`` name → ``(expr, value)``
    (tokens per step, step seconds, tokens/s, the draft's bytes); the fit with the draft's weights and KV cache
    (None without a device memory)."""

    k: int = quantity("tokens", label="proposed tokens k", default=0)
    acceptance: str = quantity(label="acceptance α", default="")
    draft: str = quantity(label="draft", default="")
    quantities: dict = quantity(label="speculative figures", default_factory=dict)
    fits_with_draft: bool | None = quantity(label="fits with the draft", default=None)
    max_batch_with_draft: int | None = quantity("sequences", label="largest batch with the draft", default=None)


@dataclass
class ServingFigures(Part):
    """What serving adds (the JSON's ``serving``), each present only when computed: ``vllm`` vLLM's KV cache
    (a :class:`~costgraph.inference.kv_parts.VllmKvCache`, :func:`costgraph.inference.capacity.vllm_kv_cache`),
    ``runtime`` another runtime's (a :class:`~costgraph.inference.kv_parts.RuntimeKvCache`,
    :func:`costgraph.inference.runtimes.runtime_kv`), ``prefix_caching``, ``chunked_prefill``,
    ``speculative``."""

    vllm: VllmKvCache | None = _opt(label="vLLM's KV cache")
    runtime: RuntimeKvCache | None = _opt(label="the runtime's KV cache")
    prefix_caching: PrefixCaching | None = _opt(label="prefix caching")
    chunked_prefill: ChunkedPrefill | None = _opt(label="chunked prefill")
    speculative: Speculative | None = _opt(label="speculative decoding")


__all__ = ["InferenceSettings", "ServingFigures", "PrefixCaching", "ChunkedPrefill", "Speculative"]
