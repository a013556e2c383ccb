"""What ``costgraph infer`` adds for serving, into an InferenceReport's ``serving``: the fit and vLLM's
KV cache (:mod:`costgraph.inference.capacity`), another runtime's KV cache (:mod:`costgraph.inference.runtimes`),
prefix caching and chunked prefill (:mod:`costgraph.inference.prefill_modes`) and speculative decoding
(:mod:`costgraph.inference.speculative`). :func:`serve` is called by
:func:`costgraph.inference.roofline.infer`, which passes it the step time (this module imports no roofline)."""

from __future__ import annotations

from ..choices import RUNTIME, SGLANG_FRACTION, VLLM_ENGINE
from ..errors import CostgraphValueError
from .exact import exact_value as _exact
from .phases import Inference
from .report_parts import ChunkedPrefill, PrefixCaching, Speculative


def _whole(name: str, v):
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise CostgraphValueError(f"--{name} must be a positive whole number, not {v!r}")
    return v


def serve(rep, inf: Inference, m, sec, t: int, page: int, reserve, prompt: int, generate: int, batch: int,
          opts: dict) -> None:
    """The fit and vLLM's KV cache (:func:`costgraph.inference.capacity.capacity`), then prefix
    caching, chunked prefill and speculative decoding when asked, into ``rep.serving`` (``rep`` an
    :class:`~costgraph.inference.roofline.InferenceReport`, ``m`` its
    :class:`~costgraph.inference.roofline.Machine`; ``sec``: a step's seconds on ``m`` at TP ``t``)."""
    from .capacity import VllmSettings, capacity, parse_bytes, with_drafter
    from .runtime_weights import attach

    engine = opts.get("vllm_engine", VLLM_ENGINE.default)   # checked by roofline.infer before the analysis
    # rep.runtime_weights: the weights the KV sizing subtracts (vLLM V1's attention scalars under vLLM only)
    attach(rep, inf, opts["max_position"], engine if opts["runtime"][0] == "vllm" else None)

    kvm = opts["kv_memory"]
    if kvm is not None and opts["runtime"][0] == "llamacpp":   # it was ignored without a word
        raise CostgraphValueError("--kv-memory sizes vLLM's, SGLang's or TensorRT-LLM's KV pool; llama.cpp allocates "
                                  "n_ctx cells per sequence, not a memory budget",
                                  hint="--max-model-len N (llama.cpp's n_ctx) and --batch, or drop --kv-memory")
    non_torch, non_torch_from = _non_torch(opts, m, t)
    vs = VllmSettings(1 - reserve, None if kvm is None else parse_bytes(kvm, "--kv-memory"),
                      _whole("max-num-batched-tokens", opts["max_num_batched_tokens"]),
                      _whole("max-num-seqs", opts["max_num_seqs"]), non_torch,
                      _whole("max-model-len", opts["max_model_len"]), engine)
    if m.memory is not None and opts["non_torch_memory"] is not None and vs.non_torch >= m.memory:
        raise CostgraphValueError(f"--non-torch-memory {vs.non_torch:,} bytes is not less than the device memory "
                                  f"{int(m.memory):,} bytes", hint="the memory outside PyTorch (CUDA context, NCCL "
                                  "buffers): a few hundred MiB to a few GiB, e.g. 0.35GiB (the default)")
    if m.memory is not None:
        capacity(rep, inf, m, page, reserve, prompt, generate, batch, vs)
    else:   # no device memory: only vLLM's KV cache from --kv-memory (costgraph.inference.device.no_capacity did the rest)
        with_drafter(rep, inf, m, page, vs, prompt + generate)
    rep.serving.vllm.non_torch_from, rep.serving.vllm.engine = non_torch_from, engine
    runtime, rule, pp = opts["runtime"]
    for choice, value in ((RUNTIME, runtime), (SGLANG_FRACTION, rule)):
        try:
            choice.check(value)
        except ValueError as e:
            raise CostgraphValueError(str(e), hint=choice.hint()) from None
    if rule != SGLANG_FRACTION.default and runtime != "sglang":   # it was ignored without a word
        raise CostgraphValueError(f"--sglang-fraction {rule} is SGLang's default mem_fraction_static; --runtime "
                                  f"{runtime} has none", hint="add --runtime sglang, or drop --sglang-fraction")
    if engine != VLLM_ENGINE.default and runtime != "vllm":   # it was ignored without a word (trial 8)
        raise CostgraphValueError(f"--vllm-engine {engine} picks vLLM's engine; --runtime {runtime} is not vLLM",
                                  hint="add --runtime vllm, or drop --vllm-engine")
    rep.settings.runtime = runtime
    if runtime != "vllm":   # another runtime's KV cache (inference/runtimes.py)
        from .runtimes import runtime_kv

        rw = rep.runtime_weights
        rep.serving.runtime = runtime_kv(runtime, inf, m.memory, rep.subs, rw.bytes if rw else None,
                                            tp=t, non_torch=vs.non_torch, fraction=None if opts["fraction"] is None else 1 - reserve,
                                            n_ctx=vs.max_model_len or prompt + generate, batch=batch, kv_name=inf.kv.name,
                                            kv_memory=vs.kv_memory, rule=rule, pp=pp)
    timed = [o for o in ("shared_prefix", "chunk", "speculative_tokens") if opts[o] is not None]
    if timed and not m.timed:
        raise CostgraphValueError(f"--{timed[0].replace('_', '-')} answers in seconds, which need a device",
                                  hint="give --hardware NAME, or --peak FLOP/s and --bandwidth B/s")
    if opts["shared_prefix"] is not None:
        rep.serving.prefix_caching = _prefix(rep, inf, sec, page, opts["shared_prefix"], prompt, batch)
    if opts["chunk"] is not None:
        from .prefill_modes import check_chunk, chunked_prefill_seconds

        check_chunk(opts["chunk"])
        rep.serving.chunked_prefill = ChunkedPrefill(
            opts["chunk"], -(-prompt // opts["chunk"]),
            chunked_prefill_seconds(inf, sec, rep.subs, prompt, opts["chunk"]))
    if any(opts[o] is not None for o in ("speculative_tokens", "draft", "acceptance")):   # none of them alone
        rep.serving.speculative, d = _speculative(rep, inf, sec, t, {**opts, "page": page})
        if d is not None:   # vLLM loads the drafter, caches its layers, then sizes the cache
            with_drafter(rep, inf, m, page, vs, prompt + generate, d)
            rep.serving.vllm.non_torch_from, rep.serving.vllm.engine = non_torch_from, engine   # rebuilt: named again


def _non_torch(opts: dict, m, t: int) -> tuple[int, str]:
    """``(bytes, words)``: the memory outside PyTorch that the runtime's sizing subtracts:
    ``--non-torch-memory`` when given; for vLLM, the logged figure of the device at TP ``t`` (NCCL's
    buffers added by TP degree: :func:`costgraph.runtime_memory.vllm_non_torch`); for the other
    runtimes :data:`costgraph.choices.NON_TORCH_MEMORY`."""
    from ..choices import NON_TORCH_MEMORY
    from ..runtime_memory import vllm_non_torch
    from .capacity import parse_bytes

    if opts["non_torch_memory"] is not None:
        return parse_bytes(opts["non_torch_memory"], "--non-torch-memory"), "given: --non-torch-memory"
    default = parse_bytes(NON_TORCH_MEMORY, "--non-torch-memory")
    if opts["runtime"][0] != "vllm":
        return default, f"the default --non-torch-memory {NON_TORCH_MEMORY}"
    return vllm_non_torch(m.name, t, default)


def _prefix(rep, inf, sec, page, shared, prompt, batch) -> PrefixCaching:
    """Prefix caching (:mod:`costgraph.inference.prefill_modes`), quantities ``{name: (expr, value)}``."""
    from ..training.fit import largest_fitting
    from .prefill_modes import check_prefix, prefix_kv_bytes, prefix_prefill_seconds

    check_prefix(inf, shared, prompt)
    kv = prefix_kv_bytes(inf, shared, page)
    mem = rep.quantities["weight_bytes"] + kv
    q = {"kv_cache_bytes_paged": kv, "memory_bytes": mem,
         "time_to_first_token": prefix_prefill_seconds(inf, sec, shared, batch)}
    out = PrefixCaching(shared, {k: (e, _exact(e, rep.subs)) for k, e in q.items()})
    cap = rep.settings.capacity_bytes   # None: no device memory, no fit
    out.fits = None if cap is None else bool(out.quantities["memory_bytes"][1] <= cap)
    out.max_batch = None if cap is None else largest_fitting(mem, inf.b, rep.subs, cap)
    return out


def _speculative(rep, inf, sec, t: int, opts: dict) -> tuple:
    """Speculative decoding (:mod:`costgraph.inference.speculative`): ``(Speculative, the drafter vLLM
    loads or None)``, quantities ``{name: (expr, value)}``."""
    from ..parallel.tensor import kv_replication
    from .speculative import parse_acceptance, speculative, with_draft

    k, draft, values = opts["speculative_tokens"], opts["draft"], opts["draft_values"] or {}
    if k is None or draft is None:
        raise CostgraphValueError("speculative decoding needs --speculative-tokens k, --acceptance and --draft",
                                  hint="--draft MODEL (a draft model, --draft-config its configuration) or "
                                       "--draft mtp (the target's multi-token-prediction heads)")
    if not hasattr(draft, "graph"):
        raise CostgraphValueError(f"the draft must be a model (costgraph.Model), not {type(draft).__name__}",
                                  hint="costgraph.load('llama'), its dimensions in draft_values")
    alpha = parse_acceptance(opts["acceptance"])
    if rep.settings.generate == 1:   # its steps sit at n = P + G - 2: a decode step G = 1 does not have
        raise CostgraphValueError("speculative decoding speeds up decode steps: --generate 1 has none "
                                  "(its one token comes from the prefill)", hint="--generate 2 or more")
    rep_kv = kv_replication(getattr(draft, "graph", draft), t, values) if values else ()
    dinf = Inference(draft, weights=inf.weights, kv=inf.kv, t=t, convention=inf.convention, causal=inf.causal,
                     activations=inf.activations, replicate=rep_kv)
    q = speculative(inf, sec, k, alpha, dinf, sec, values, opts["draft_mtp"])
    mem = with_draft(rep, inf, dinf, opts["draft_mtp"], values, opts["page"])   # the draft's weights and KV cache
    vllm_draft = mem.pop("vllm_draft")
    quantities = {n: (e, _exact(e, rep.subs)) for n, e in {**q, **mem.pop("quantities")}.items()}
    return Speculative(k, str(alpha), "mtp" if opts["draft_mtp"] else dinf.cg.name, quantities, **mem), vllm_draft
