"""The KV cache a serving runtime sizes at start-up, as typed parts of ``costgraph infer``'s ``serving``
(:class:`~costgraph.inference.report_parts.ServingFigures`): vLLM's (:class:`VllmKvCache`, built by
:func:`costgraph.inference.capacity.vllm_kv_cache`) and SGLang's, TensorRT-LLM's and llama.cpp's
(:class:`SglangKvCache`, :class:`TrtllmKvCache`, :class:`LlamacppKvCache`, subclasses of
:class:`RuntimeKvCache`, built by :func:`costgraph.inference.runtimes.runtime_kv`). Each field carries its
unit (:func:`costgraph.result_fields.quantity`: ``bytes``, ``tokens``, ``sequences``; ``""`` for a count, a
text or a flag); each part is also the mapping it replaced (:class:`costgraph.result_fields.Part`:
``rep.serving["vllm"]["tokens"]``). A figure that a case does not compute is no key (``omit_none``), as
the dicts had it; the JSON (:mod:`costgraph.export.inference_report`) writes the keys in field order.

Light at import: the standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..result_fields import Part, quantity


def _opt(unit: str = "", label: str = ""):
    """A field present (a key) only when set (not None)."""
    return quantity(unit, label=label, omit_none=True, default=None)


def _sized(unit: str, label: str):
    """A figure of vLLM's cache that is a key exactly when the device memory sized it (``requested_bytes``
    set: ``VllmKvCache.SIZED``), None or not."""
    return quantity(unit, label=label, present_with="requested_bytes", default=None)


@dataclass
class SamplerPeak(Part):
    """What vLLM's sampler (V0's or V1's: :class:`VllmKvCache`'s ``engine``) holds at its peak in the profile
    run, on the driver rank (:func:`costgraph.inference.sampler_peak.sampler_peak`, which names the vLLM
    sources): ``rows`` × ``vocab`` logits of ``per_logit`` bytes each, plus the hidden states alive."""

    bytes: int = quantity("bytes", label="the sampler's peak", default=0)
    rows: int = quantity("rows", label="rows sampled (min(max_num_seqs, tokens))", default=0)
    vocab: int = quantity("logits", label="logits per row (the output head's, whole)", default=0)
    per_logit: int = quantity("bytes", label="bytes alive per logit", default=0)
    hidden_bytes: int = quantity("bytes", label="the hidden states alive ([T, h]; V1 also two [R, h])", default=0)


@dataclass
class VllmKvCache(Part):
    """vLLM's KV cache on one device (:func:`costgraph.inference.capacity.vllm_kv_cache`, which names the
    vLLM sources). Always keys: the scheduler's limits, ``utilization`` (``gpu_memory_utilization``, exact
    text), ``kv_memory_given`` (``--kv-memory``), ``note`` (None, or why the cache is not computed or vLLM
    would not start), ``available_bytes`` (None without a device memory or the weights), ``num_blocks``,
    ``tokens`` and ``max_concurrency`` (a SymPy Rational; the three None where not modelled). Keys when the
    device memory sized the cache (``SIZED``, declared ``present_with`` on each: ``requested_bytes`` set): the total, where it comes from
    (None for ``--memory``), the requested memory and what the profile subtracts from it. ``sampler``: V0's
    sampler peak (:class:`SamplerPeak`, V0's and V1's). ``draft_*``: a speculative
    drafter's weights and cached layers. The cache's layout (``page_bytes``, ``groups``, ``group_size``,
    ``one_type``, ``blocks_per_request``) where modelled; ``non_torch_from`` and ``engine`` set by
    :func:`costgraph.inference.serving.serve`."""

    max_model_len: int = quantity("tokens", label="max_model_len", default=0)
    max_num_batched_tokens: int = quantity("tokens", label="max_num_batched_tokens", default=0)
    max_num_seqs: int = quantity("sequences", label="max_num_seqs", default=0)
    utilization: str = quantity(label="gpu_memory_utilization", default="")
    kv_memory_given: bool = quantity(label="KV memory given (--kv-memory)", default=False)
    note: str | None = quantity(label="note", default=None)
    total_bytes: int | None = _sized("bytes", "total device memory")
    total_from: str | None = _sized("", "where the total comes from")
    forward_activation_bytes: int | None = _opt("bytes", "activation peak of the forward")
    sampler_bytes: int | None = _opt("bytes", "activation peak of the sampler")
    sampler: SamplerPeak | None = _opt(label="the sampler's peak")
    requested_bytes: int | None = _sized("bytes", "requested memory")
    weight_bytes: int | None = _sized("bytes", "weights")
    activation_bytes: int | None = _sized("bytes", "activation peak (estimate)")
    non_torch_bytes: int | None = _sized("bytes", "non-torch memory")
    available_bytes: int | None = quantity("bytes", label="Available KV cache memory", default=None)
    draft_weight_bytes: int | None = _opt("bytes", "the drafter's weights")
    draft_layers: int | None = _opt(label="the drafter's cached layers")
    page_bytes: int | None = _opt("bytes", "page (one layer's block, or every layer's)")
    groups: int | None = _opt(label="KV cache groups")
    group_size: int | None = _opt(label="layers per group")
    num_blocks: int | None = quantity(label="blocks", default=None)
    one_type: bool | None = _opt(label="one type, different pages: one group")
    tokens: int | None = quantity("tokens", label="GPU KV cache size", default=None)
    blocks_per_request: int | None = _opt(label="blocks per request of max_model_len")
    max_concurrency: object = quantity(label="maximum concurrency (requests of max_model_len)", default=None)
    non_torch_from: str | None = _opt(label="where the non-torch memory comes from")
    engine: str | None = _opt(label="vLLM engine")

    def __iter__(self):
        # the one order the declared fields cannot give: where the cache's layout is not modelled, num_blocks
        # (a key, None) comes after max_concurrency, as the JSON always had it (a modelled cache: in field order)
        names = list(super().__iter__())
        if self.page_bytes is None:
            names.remove("num_blocks")
            names.insert(names.index("max_concurrency") + 1, "num_blocks")
        return iter(names)


@dataclass
class RuntimeKvCache(Part):
    """The KV cache another runtime sizes (:func:`costgraph.inference.runtimes.runtime_kv`, which names the
    sources): ``runtime`` its name, ``cell_bytes`` one token of every layer on one device, the memory outside
    PyTorch and the weights it loaded (None: not known). Each runtime's subclass adds its figures, then
    ``tokens`` (None without a device memory) and ``lines`` (its log lines as costgraph prints them)."""

    runtime: str = quantity(label="serving runtime", default="")
    cell_bytes: int = quantity("bytes", label="KV bytes of one token, all layers", default=0)
    non_torch_bytes: int = quantity("bytes", label="non-torch memory", default=0)
    weight_bytes: int | None = quantity("bytes", label="weights as loaded", default=None)


@dataclass
class SglangKvCache(RuntimeKvCache):
    """SGLang's (``mem_fraction_static`` exact text; ``rest_bytes`` the KV pool)."""

    mem_fraction_static: str | None = _opt(label="mem_fraction_static")
    mem_fraction_rule: str | None = _opt(label="rule of the default mem_fraction_static")
    total_bytes: int | None = _opt("bytes", "memory less non-torch")
    rest_bytes: int | None = _opt("bytes", "KV pool")
    tokens: int | None = quantity("tokens", label="max_total_num_tokens", default=None)
    kv_bytes: int | None = _opt("bytes", "KV cache")
    kv_memory_given: bool | None = _opt(label="KV memory given (--kv-memory)")
    lines: list = quantity(label="start-up lines", default_factory=list)


@dataclass
class TrtllmKvCache(RuntimeKvCache):
    """TensorRT-LLM's (``free_gpu_memory_fraction`` exact text; ``free_bytes`` after loading and the profile)."""

    free_gpu_memory_fraction: str | None = _opt(label="free_gpu_memory_fraction")
    activation_bytes: int | None = _opt("bytes", "activation peak of the profile run (estimate)")
    free_bytes: int | None = _opt("bytes", "free memory after loading and the profile run")
    kv_bytes: int | None = _opt("bytes", "paged KV cache")
    blocks: int | None = _opt(label="KV blocks")
    tokens: int | None = quantity("tokens", label="max tokens in paged KV cache", default=None)
    kv_memory_given: bool | None = _opt(label="KV memory given (--kv-memory)")
    lines: list = quantity(label="start-up lines", default_factory=list)


@dataclass
class LlamacppKvCache(RuntimeKvCache):
    """llama.cpp's: ``n_ctx`` cells per sequence, ``cells`` in all (one per token)."""

    n_ctx: int = quantity("tokens", label="n_ctx", default=0)
    cells: int = quantity(label="cells", default=0)
    kv_bytes: int = quantity("bytes", label="KV self size", default=0)
    tokens: int | None = quantity("tokens", label="cells (tokens)", default=None)
    lines: list = quantity(label="start-up lines", default_factory=list)


#: the fields of :class:`VllmKvCache` that are keys exactly when the device memory sized the cache
#: (``requested_bytes`` set), declared so on each field (``present_with``)
VllmKvCache.SIZED = tuple(f.name for f in fields(VllmKvCache) if f.metadata.get("present_with") == "requested_bytes")

#: the part of each runtime of :func:`costgraph.inference.runtimes.runtime_kv`
RUNTIME_PARTS = {"sglang": SglangKvCache, "trtllm": TrtllmKvCache, "llamacpp": LlamacppKvCache}

__all__ = ["VllmKvCache", "RuntimeKvCache", "SglangKvCache", "TrtllmKvCache", "LlamacppKvCache", "RUNTIME_PARTS"]
