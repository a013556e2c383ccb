"""Capacity of a serving device: what fits, and vLLM's KV cache as its start-up log reports it.

:func:`capacity` is the one entry point (``costgraph infer`` calls it through
:func:`costgraph.inference.roofline.infer`). It fills two things:

**The fit**: weights + KV cache (paged, blocks of ``k``) ≤ ``(1 − reserve) ×`` the device memory (the
same total as vLLM's block below: :func:`costgraph.runtime_memory.device_memory` under the memory
convention); the largest batch and context that fit; a learned position table's bound. ``reserve`` is ``1 − gpu_memory_utilization`` (the same setting,
:data:`costgraph.choices.GPU_MEMORY_UTILIZATION`).

**vLLM's KV cache** (the V1 engine's two log lines ``GPU KV cache size: N tokens`` and
``Maximum concurrency for L tokens per request: X``), computed as vLLM computes them:

* available KV memory (vllm @ 35d5cda1 ``vllm/v1/worker/gpu_worker.py::Worker.determine_available_memory``)
  = ``total × gpu_memory_utilization − (weights + torch activation peak + non-torch memory)``, ``total``
  the device memory (``--memory``, else the preset's under ``infer``'s memory convention: by default what CUDA
  reports where ``runtime_memory.toml`` names it, ``[visible.NAME]``: 79.22 GiB on an H100 SXM; :func:`vllm_total`),
  or ``kv_cache_memory_bytes`` when given (``--kv-memory``: vLLM's option, which wins over the
  profile; also the way to reproduce a log from its own ``Available KV cache memory`` line).
  The **activation peak is an estimate**: vLLM measures it in a profile run, a forward of
  ``max_num_batched_tokens`` tokens (and the sampler over ``max_num_seqs`` rows); here the
  tensors alive at once at that forward's fullest operator (one sequence, ``n = 0``:
  :mod:`costgraph.inference.profile_peak`), the output head over ``min(max_num_seqs, tokens)``
  rows (vLLM computes logits only for the rows it samples); under V0 the larger of that and its sampler's
  buffers (:mod:`costgraph.inference.sampler_peak`: ``max_num_seqs`` 256 rows, sorted and masked). ``max_num_batched_tokens`` / ``max_num_seqs`` default as ``vllm serve`` sets them
  (vllm @ 99d7eb5d ``vllm/engine/arg_utils.py::EngineArgs._set_default_args``, the
  ``OPENAI_API_SERVER`` context: 8192 / 1024 on a device of ≥ 70 GiB that is not an A100,
  else 2048 / 256). The non-torch memory is ``--non-torch-memory`` when given, else the figure vLLM
  logged on the device's preset, NCCL's buffers added by TP degree
  (:func:`costgraph.runtime_memory.vllm_non_torch`, ``runtime_memory.toml``); CUDA graphs are captured after the KV cache is
  sized and are not subtracted at that commit.
* KV cache groups and blocks (vllm @ 001cabc1 ``vllm/v1/core/kv_cache_utils.py``): layers with
  the same spec form a group (one group for a uniform model; a hybrid of full and
  sliding-window layers is split into groups of ``group_size`` layers,
  ``_get_kv_cache_groups_uniform_page_size``); the page of one layer is
  ``block_size × bytes per token of that layer`` (vllm @ bc8282e6
  ``vllm/v1/kv_cache_interface.py::FullAttentionSpec.page_size_bytes``: ``block · kv_heads ·
  (head_size + head_size_v) · dtype bytes``; MLA: ``block · head_size · dtype bytes``, here from
  the graph's cached tensors); ``num_blocks = available // page // group_size``
  (``get_num_blocks``); ``tokens = num_blocks // groups × block_size``
  (``_report_kv_cache_config``); ``max concurrency = num_blocks / Σ_groups blocks per request``
  (``get_max_concurrency_for_kv_cache_config``), a full-attention group needing
  ``⌈max_model_len / block⌉`` blocks and a sliding-window group
  ``⌈min(w − 1 + max_num_batched_tokens, max_model_len) / block⌉ + 1``
  (``SlidingWindowSpec.max_memory_usage_bytes``).

Layers of one type (all full attention, or one window) with different pages — a draft model's
beside the target's — are one group whose block holds a page of every layer
(``UniformTypeKVCacheSpecs``, :func:`_groups`). A speculative drafter's weights and layers join
the target's (``draft`` of :func:`vllm_kv_cache`).

Not modelled (reported as ``null`` with a note): recurrent states (vLLM's ``MambaSpec``) and
hybrids whose layer kinds have different windows and page sizes (vLLM then scales block sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError, no_value
from .exact import exact_value as _exact
from .kv_parts import VllmKvCache
from .phases import G, P
from .profile_peak import activation_estimate  # noqa: F401  (the profile run's peak: its own module)

GIB = 2**30
#: vLLM's refusal when no memory is left for the KV cache (vllm v1/core/kv_cache_utils.py::check_enough_kv_cache_memory:
#: "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
NO_MEMORY = "vLLM would not start: No available memory for the cache blocks"


@dataclass(frozen=True)
class VllmSettings:
    """vLLM's settings of :func:`vllm_kv_cache` (``None``: vLLM's default, module docstring).

    ``utilization``: ``gpu_memory_utilization`` (a Rational in (0, 1]); ``kv_memory``: bytes of
    ``kv_cache_memory_bytes`` (replaces the profile); ``max_num_batched_tokens``,
    ``max_num_seqs``: the scheduler's budget; ``non_torch``: bytes; ``max_model_len``: tokens per
    request (default ``P + G``)."""

    utilization: sympy.Rational
    kv_memory: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    non_torch: int = 0
    max_model_len: int | None = None
    #: the vLLM engine (``v0``, ``v1``: each one's sampler in the profile run, :mod:`costgraph.inference.sampler_peak`)
    engine: str = "v1"


def parse_bytes(text, what: str) -> int:
    """A size as vLLM's logs print it, floored to whole bytes: ``"6.51GiB"`` → 6,990,059,274
    (6.51 × 2³⁰ = 6,990,059,274.24), ``"80GB"``, ``"141e9"``, an int as is; 0 allowed
    (:func:`costgraph.training.fit.parse_size` with ``floor=True``).

    Raises
    ------
    CostgraphValueError
        Text that is not a non-negative number with an optional unit (B, KB, MB, GB, TB, KiB,
        MiB, GiB, TiB)."""
    from ..training.fit import parse_size

    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    return parse_size(text if isinstance(text, str) else repr(text), what=what, floor=True, minimum=0)


def batch_defaults(m) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` as ``vllm serve`` sets them for device ``m``
    (vllm @ 99d7eb5d ``vllm/engine/arg_utils.py::EngineArgs._set_default_args``,
    ``UsageContext.OPENAI_API_SERVER``): 8192 and 1024 when the device has ≥ 70 GiB and is not
    an A100, else 2048 and 256."""
    if m.memory >= 70 * GIB and "a100" not in (m.name or "").lower():   # no preset: no name, not an A100
        return 8192, 1024
    return 2048, 256


def capacity(rep, inf, m, page: int, reserve, prompt: int, generate: int, batch: int,
             vllm: VllmSettings | None = None) -> None:
    """Fill ``rep`` (an :class:`~costgraph.inference.roofline.InferenceReport`) with the fit
    (``memory_bytes``, ``fits``, ``max_batch``, ``max_context``) on device ``m`` less ``reserve``
    (a Rational fraction), and, with ``vllm``, vLLM's KV cache (``rep.serving.vllm``, a
    :class:`~costgraph.inference.kv_parts.VllmKvCache`: module docstring). ``page``: KV block size in
    tokens; ``inf``: the
    :class:`~costgraph.inference.phases.Inference`. Raises CostgraphValueError where vLLM's
    ``kv_memory`` is not less than the device memory (vLLM allocates it on each device)."""
    _fit(rep, inf, m, page, reserve, prompt, generate, batch)
    if vllm is not None and vllm.kv_memory is not None and vllm.kv_memory >= m.memory:   # allocated on each device
        raise CostgraphValueError(f"--kv-memory {vllm.kv_memory:,} bytes is not less than the device memory "
                                  f"{int(m.memory):,} bytes", hint="the KV cache memory per device, as the "
                                  "runtime's start-up log reports it (e.g. 6.51GiB); or drop it: the runtime sizes it")
    if vllm is not None:
        with_drafter(rep, inf, m, page, vllm, prompt + generate)


def with_drafter(rep, inf, m, page: int, vllm: VllmSettings, positions: int, draft: dict | None = None) -> None:
    """``rep.serving.vllm`` (:func:`vllm_kv_cache`) on device ``m`` (its memory None: from
    ``--kv-memory`` only), the weights as the runtime loads them (``rep.runtime_weights``, else
    the checkpoint's), ``max_model_len`` ``positions`` unless set; with a speculative drafter's
    weights and layers when ``draft`` is given."""
    if vllm.max_model_len is not None and vllm.max_model_len < positions:   # vLLM's OpenAI server refuses it:
        # "This model's maximum context length is N tokens. However, you requested M tokens" (serving_engine)
        rep.warnings.append(f"P + G = {positions:,} positions is longer than max_model_len = {vllm.max_model_len:,}: "
                            "the server refuses such a request (its maximum context length)")
    weights = rw.bytes if (rw := rep.runtime_weights) else rep.values.get("weight_bytes")
    rep.serving.vllm = vllm_kv_cache(inf, m if getattr(m, "memory", None) is not None else None, rep.subs, page,
                                       vllm, vllm.max_model_len or positions, weights, draft)


def _fit(rep, inf, m, page: int, reserve, prompt: int, generate: int, batch: int) -> None:
    """Memory, fit, the largest batch and context that fit, and the learned position table's bound."""
    from ..training.fit import largest_fitting

    qd, vals, subs, b = rep.quantities, rep.values, rep.subs, inf.b
    cap = int((1 - reserve) * m.memory // 1)
    rep.settings.capacity_bytes = cap
    mem_b = qd["weight_bytes"] + inf.kv_cache_bytes(P + G, batch=b, page=page)
    qd["memory_bytes"] = mem_b
    vals["memory_bytes"] = _exact(mem_b, subs)
    if vals["memory_bytes"] is None:   # a size nobody gave: the located "no value" error, not a TypeError
        raise no_value(as_expr(mem_b).xreplace(subs).free_symbols)
    vals["fits"] = bool(vals["memory_bytes"] <= cap)
    vals["max_batch"] = largest_fitting(mem_b, b, subs, cap)
    x = sympy.Symbol("x_positions", positive=True, integer=True)
    mem_s = qd["weight_bytes"] + inf.kv_cache_bytes(x, batch=b, page=page)
    if x in mem_s.free_symbols:
        vals["max_context"] = largest_fitting(mem_s, x, subs, cap)
    else:   # only recurrent states: memory does not grow with the context
        vals["max_context"] = None
        vals["context_unbounded"] = vals["fits"]
    # a learned position table (s_max rows; t_max for Whisper's decoder over t) bounds the positions a
    # sequence can have, as `costgraph derive` warns for s > s_max (costgraph.export.text_report.warnings):
    # the table of the growing sequence axis, named `<axis>_max`
    name = f"{inf.s}_max"
    s_max = next((int(v) for k, v in subs.items() if str(k) == name), None)
    if s_max is not None:
        if prompt + generate > s_max:
            rep.warnings.append(f"P + G = {prompt + generate:,} positions is longer than {name} = {s_max:,}: the "
                                f"learned position table has {name} rows, so the model cannot read that many "
                                f"tokens as built")
        if vals.get("max_context") is not None and vals["max_context"] > s_max:
            vals["max_context_memory"] = vals["max_context"]
            vals["max_context"] = s_max


# ---------------------------------------------------------------- vLLM's KV cache

def _known(value):
    """``value`` when it is a number; a size nobody gave (no --config, no --set) raises the
    located "no value for ..." error (exit 2), not SymPy's TypeError."""
    if getattr(value, "free_symbols", None):
        raise no_value(value.free_symbols)
    return value


def kv_layer_kinds(inf, subs: dict, prefix: str | None = None) -> list[dict]:
    """The KV cache's layer kinds, as vLLM groups layers by spec: ``[{layers, window,
    token_bytes}]`` with ``token_bytes`` one position of one sequence in one layer of the kind
    (every cached tensor of the layer's attention: K and V, or MLA's latent), per device;
    ``window`` None for full attention. The cached tensors of one attention module (the entries
    under one parent path) make a layer; modules with the same window and bytes per token are
    one kind (DeepSeek-V3's 3 dense and 58 MoE layers: one kind of 61). ``prefix``: only the
    entries under that path (an MTP drafter's ``mtp_layers``)."""
    modules: dict = {}
    for e in inf.kv_entries:
        if prefix is not None and not e.path.startswith(prefix + "/"):
            continue
        layers = int(_known(as_expr(inf.cg.nodes[e.path]["count"]).xreplace(subs)))
        window = None if e.window is None else int(_known(as_expr(e.window).xreplace(subs)))
        mod = modules.setdefault((e.path.rsplit("/", 1)[0], window), {"layers": layers, "window": window, "bytes": 0})
        mod["bytes"] += _known(sympy.nsimplify(as_expr(inf._entry_position_bytes(e)).xreplace(subs)))
    return merge_kinds({"layers": m["layers"], "window": m["window"], "token_bytes": m["bytes"] / m["layers"]}
                       for m in modules.values())


def merge_kinds(kinds) -> list[dict]:
    """Layer kinds (``{layers, window, token_bytes}``) with the same window and bytes per token
    summed into one, as vLLM groups layers of one spec (a drafter's layers join the target's)."""
    out: dict = {}
    for k in kinds:
        m = out.setdefault((k["window"], k["token_bytes"]), {"layers": 0, "window": k["window"],
                                                               "token_bytes": k["token_bytes"]})
        m["layers"] += k["layers"]
    return list(out.values())


def _blocks_per_request(kind: dict, block: int, max_len: int, batched: int) -> int:
    """Blocks of one kind's group a request of ``max_len`` tokens may hold (vllm @ bc8282e6
    ``FullAttentionSpec`` / ``SlidingWindowSpec.max_memory_usage_bytes``)."""
    if kind["window"] is None:
        return -(-max_len // block)
    return -(-min(kind["window"] - 1 + batched, max_len) // block) + 1


def _whole_page(x) -> int:
    x = sympy.nsimplify(x)
    return int(x) if x.is_integer else int(sympy.ceiling(x))


def _groups(kinds: list, block: int, pages: set) -> tuple:
    """``(page, group_size, [(kind, groups)])`` as vLLM groups the layers (vllm @ 001cabc1
    ``kv_cache_utils.get_kv_cache_groups``): one page for every layer, ``group_size`` layers per
    group (``_get_kv_cache_groups_uniform_page_size``); layers of one type (all full attention, or
    one window) with different pages (a drafter's beside the target's) are one group whose block
    holds one page of every layer (``UniformTypeKVCacheSpecs``, ``get_kv_cache_config_from_groups``:
    ``num_blocks = available // Σ page``): there ``page`` is that sum and ``group_size`` 1."""
    if len(pages) > 1:
        return sum(k["layers"] * _whole_page(k["token_bytes"] * block) for k in kinds), 1, [(kinds[0], 1)]
    lo, hi = min(k["layers"] for k in kinds), max(k["layers"] for k in kinds)
    group_size = hi if hi < lo * sympy.Rational(3, 2) else lo   # _get_kv_cache_groups_uniform_page_size
    return _whole_page(pages.pop()), group_size, [(k, -(-k["layers"] // group_size)) for k in kinds]


def vllm_total(m) -> tuple[int, str | None]:
    """``(bytes, words)``: the device memory vLLM multiplies by ``gpu_memory_utilization`` on device ``m``:
    the total CUDA reports (``torch.cuda.mem_get_info``, vllm @ 35d5cda1 ``gpu_worker.py::Worker.init_device``:
    ``requested_memory = total × gpu_memory_utilization``; logged as ``total_gpu_memory``). It is ``m.memory``,
    the memory the capacity line takes too, read once by :func:`costgraph.runtime_memory.device_memory` under
    ``infer``'s memory convention (``cuda`` by default: H100 SXM 79.22 GiB, ``runtime_memory.toml``
    ``[visible.NAME]``, not the vendor's 80 GB); words None for ``--memory``."""
    source = getattr(getattr(m, "figures", None), "memory_from", None)
    return int(m.memory), None if source is None or source.convention == "given" else source.source


def vllm_kv_cache(inf, m, subs: dict, block: int, s: VllmSettings, max_len: int, weights=None,
                  draft: dict | None = None) -> VllmKvCache:
    """vLLM's KV cache on device ``m`` (module docstring), a
    :class:`~costgraph.inference.kv_parts.VllmKvCache` (bytes, tokens, counts): ``available_bytes``,
    ``requested_bytes``, ``weight_bytes``, ``activation_bytes``, ``non_torch_bytes``, ``page_bytes``,
    ``groups``, ``group_size``, ``num_blocks``, ``tokens``, ``blocks_per_request``, ``max_concurrency``
    (a Rational), ``max_model_len``, ``max_num_batched_tokens``, ``max_num_seqs``, ``kv_memory_given``,
    ``note``; ``tokens`` and ``max_concurrency`` None where the model is outside what is modelled
    (``note`` says why). ``block``: vLLM's ``block_size``; ``max_len``: ``max_model_len``. ``draft``: a
    speculative drafter's ``{weight_bytes, kinds}`` (:func:`costgraph.inference.speculative.vllm_draft`):
    its weights loaded with the target's before the profile (added to ``weight_bytes``; also
    ``draft_weight_bytes``) and its attention layers in the KV cache groups beside the target's
    (``draft_layers``)."""
    batched, seqs = batch_defaults(m) if m is not None else (2048, 256)
    from .sampler_peak import engine_max_num_seqs

    seqs = engine_max_num_seqs(s.engine) or seqs   # V0's one default (sampler_peak.toml); V1's by device
    batched = s.max_num_batched_tokens or batched
    seqs = min(s.max_num_seqs or seqs, batched)
    out = VllmKvCache(max_model_len=max_len, max_num_batched_tokens=batched, max_num_seqs=seqs,
                      utilization=str(s.utilization), kv_memory_given=s.kv_memory is not None)
    if s.kv_memory is not None:
        out.available_bytes = s.kv_memory
    elif m is None or getattr(m, "memory", None) is None:   # no device memory known: only --kv-memory answers
        out.note = "no device memory: give --kv-memory"
        return out
    else:
        _sized(out, inf, m, subs, s, batched, seqs, weights, draft)
    kinds = kv_layer_kinds(getattr(inf, "attn", inf), subs)   # the attention side holds the KV cache
    if draft is not None:
        out.draft_weight_bytes = draft["weight_bytes"]
        out.draft_layers = sum(k["layers"] for k in draft["kinds"])
        kinds = merge_kinds([*kinds, *draft["kinds"]])
    pages = {k["token_bytes"] * block for k in kinds}
    fixed = getattr(getattr(inf, "attn", inf), "fixed", ())
    one_type = len({k["window"] for k in kinds}) == 1   # UniformTypeKVCacheSpecs: different pages, one type
    if inf.states or fixed or not kinds or not one_type and len(pages) != 1 or out.available_bytes is None:
        out.note = ("recurrent states (vLLM's MambaSpec) are not modelled" if inf.states else
                    "K/V cached once per request (vLLM's CrossAttentionSpec) are not modelled" if fixed else
                    "layer kinds of different windows and page sizes (vLLM scales their block sizes) are not "
                    "modelled" if len(pages) > 1 else "no weight bytes: every dimension needs a value")
        if out.available_bytes == 0 and not out.kv_memory_given:   # whatever the cache's layout: no memory
            # vllm v1/core/kv_cache_utils.py::check_enough_kv_cache_memory: available_memory <= 0 raises
            out.note = (f"{NO_MEMORY}: the weights, the activation peak and the non-torch memory take all of "
                        f"the requested memory (the cache's layout aside: {out.note})")
        return out
    mixed = len(pages) > 1
    page, group_size, groups = _groups(kinds, block, set(pages))
    n_groups = sum(g for _, g in groups)
    num_blocks = out.available_bytes // page // group_size
    per_request = sum(g * _blocks_per_request(k, block, max_len, batched) for k, g in groups)
    out.page_bytes, out.groups, out.group_size, out.one_type = page, n_groups, group_size, mixed
    out.num_blocks = num_blocks
    out.tokens, out.blocks_per_request = num_blocks // n_groups * block, per_request
    out.max_concurrency = sympy.Rational(num_blocks, per_request)
    if num_blocks <= 0 or per_request > num_blocks:   # vLLM's start-up check (kv_cache_utils.check_enough_kv_cache_memory)
        out.note = (NO_MEMORY if num_blocks <= 0 else
                    f"vLLM would not start: one request of max_model_len {max_len:,} does not fit the KV cache")
    return out


def _sized(out: VllmKvCache, inf, m, subs: dict, s: VllmSettings, batched: int, seqs: int, weights, draft) -> None:
    """The memory vLLM's profile leaves the cache on device ``m`` (module docstring), into ``out``: the
    requested memory less the weights (with a drafter's), the activation peak and the non-torch memory."""
    total, total_from = vllm_total(m)
    out.total_bytes, out.total_from = total, total_from
    # a parallel serving layout (inference/parallel.py): the full TP group runs the widest ops
    act = activation_estimate(getattr(inf, "full", inf), subs, batched, seqs)
    from .sampler_peak import sampler_peak

    sp = sampler_peak(getattr(inf, "full", inf), subs, batched, seqs, s.engine)   # the profile run samples too
    if sp is not None:   # V0 and V1 read the peak over the whole profile run: the larger of the two
        out.forward_activation_bytes, out.sampler_bytes, out.sampler = act, sp.bytes, sp
        act = max(act, sp["bytes"])
    w = int(sympy.ceiling(weights)) + (draft or {}).get("weight_bytes", 0) if weights is not None else None
    out.requested_bytes = int(sympy.floor(total * s.utilization))
    out.weight_bytes, out.activation_bytes, out.non_torch_bytes = w, act, s.non_torch
    out.available_bytes = None if w is None else max(out.requested_bytes - w - act - s.non_torch, 0)


def vllm_lines(v: VllmKvCache) -> list[str]:
    """The text lines of :func:`vllm_kv_cache`'s result, vLLM's log lines among them."""
    gib = lambda x: f"{x / GIB:.2f} GiB"   # noqa: E731
    v0 = v.engine == "v0"   # V0 prints "# GPU blocks: N": the blocks below (one group of a uniform model)
    lines = ["", "vLLM KV cache (V0 engine, as its start-up log reports it: # GPU blocks)" if v0 else
             "vLLM KV cache (V1 engine, as its start-up log reports it)"]
    if v.kv_memory_given:
        lines.append(f"  {'available KV memory':<26}{v.available_bytes:,} bytes ({gib(v.available_bytes)}, given: "
                     "--kv-memory)")
    elif v.available_bytes is not None:
        u = float(sympy.Rational(v.utilization))
        share = f"memory x {u:g}" if not v.total_from else f"{u:g} x {gib(v.total_bytes)}, {v.total_from}"
        lines.append(f"  {'requested':<26}{gib(v.requested_bytes)} ({share}); weights "
                     f"{gib(v.weight_bytes)}, activation peak {gib(v.activation_bytes)} (estimate: "
                     f"{v.max_num_batched_tokens:,} batched tokens), non-torch {gib(v.non_torch_bytes)}")
        if (sp := v.sampler) is not None:   # the larger of the forward's peak and its sampler's
            lines.append(f"  {'activation peak of':<26}the forward {gib(v.forward_activation_bytes)}, the sampler "
                         f"{gib(sp.bytes)} ({sp.rows:,} rows x {sp.vocab:,} logits x {sp.per_logit} B "
                         f"+ hidden states {gib(sp.hidden_bytes)}): the larger")
        if v.non_torch_from:
            lines.append(f"  {'non-torch memory from':<26}{v.non_torch_from}")
        lines.append(f"  {'Available KV cache memory':<26}{gib(v.available_bytes)}")
    if v.draft_layers is not None:   # speculative decoding's drafter (inference/speculative.py vllm_draft)
        lines.append(f"  {'drafter':<26}{v.draft_layers} layer(s) cached beside the target's; weights "
                     f"{gib(v.draft_weight_bytes)}" + (" (in the weights above)" if not v.kv_memory_given else ""))
    if v.tokens is None:
        lines.append(f"  {v.note}" if v.note.startswith(NO_MEMORY) else f"  {'not computed':<26}{v.note}")
        return lines
    per = (f"{v.page_bytes:,} bytes over all layers, one group" if v.group_size == 1 and v.one_type
           else f"{v.page_bytes:,} bytes per layer, {v.groups} group(s) of {v.group_size} layers")
    lines.append(f"  {'GPU KV cache size':<26}{v.tokens:,} tokens ({v.num_blocks:,} blocks of {per})")
    lines.append(f"  Maximum concurrency for {v.max_model_len:,} tokens per request: "
                 f"{float(v.max_concurrency):.2f}x")
    if v.note:
        lines.append(f"  {v.note}")
    return lines
