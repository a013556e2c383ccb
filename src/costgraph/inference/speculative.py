"""Speculative decoding: a draft proposes ``k`` tokens, the target verifies them in one step.

* **Expected tokens per step** with a per-token acceptance rate ``α`` (each proposed token
  accepted with probability ``α`` independently, the first rejection ending the run, and the
  target's own token always kept): ``(1 − α^(k+1)) / (1 − α)`` (Leviathan, Kalman & Matias
  2023, "Fast Inference from Transformers via Speculative Decoding", eq. 1); ``k + 1`` at
  ``α = 1``.
* **Verify step**: the target's :meth:`~costgraph.inference.phases.Inference.step` with
  ``q = k + 1`` new tokens per sequence (the last accepted token and the ``k`` proposals)
  against ``n`` cached positions.
* **Draft steps**: ``k`` steps of ``q = 1`` of the draft — either a separate draft model
  (``--draft MODEL``, on the same device, its weights and KV cache in the target's dtypes), or
  the target's own multi-token-prediction heads (``--draft mtp``: the operators of the model
  built with ``option mtp`` whose path is under ``mtp_layers``, one depth per proposed token,
  as vLLM runs DeepSeek-V3's single MTP layer ``k`` times). All at the same ``n`` (the
  draft's own growth over ``k`` positions is not counted).
* **Time per output token** = ``(k · draft step + verify step) / expected tokens``, at the
  last decode position ``n = P + G − 2`` as ``time_per_output_token``.

* **Memory**: the draft's weights and its layers' KV cache beside the target's, as vLLM holds
  them (:func:`draft_memory`: an MTP drafter's own layers only, embedding and head shared), and
  the fit with them (:func:`with_draft`; issue 29 item 4).

* **vLLM's KV cache** with the drafter (:func:`vllm_draft`): its weights in the memory vLLM
  sizes the cache from, its layers in the "GPU KV cache size" line.

Not counted: rejection sampling's own work, a draft whose vocabulary differs, a separate draft
whose layers' pages differ from the target's (vLLM's hybrid page sizes: said not modelled).
"""

from __future__ import annotations

from dataclasses import replace

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from .phases import G, P

MTP_PREFIX = "mtp_layers"
#: the most tokens a draft may propose per step (exact α^(k+1) stays small; runtimes propose a few)
MAX_SPECULATIVE_TOKENS = 1024


def parse_acceptance(value):
    """The acceptance rate ``α`` as an exact Rational in [0, 1]: a decimal (``0.7``) or an exact
    fraction ``p/q`` (``1/3``; :func:`costgraph.arguments.parse_fraction`), never evaluated; a
    ``fractions.Fraction`` as is.

    Raises
    ------
    CostgraphValueError
        Missing, unreadable, a zero denominator, or outside [0, 1]."""
    from ..arguments import parse_fraction, rational

    if value is None:
        raise CostgraphValueError("--speculative-tokens needs --acceptance, the per-token acceptance rate",
                                  hint="a fraction in [0, 1], e.g. 0.7 or 1/3")
    a = parse_fraction(value, "--acceptance") if isinstance(value, str) else rational(value, "--acceptance")
    if not 0 <= a <= 1:
        raise CostgraphValueError(f"--acceptance must be a fraction in [0, 1], not {a}",
                                  hint="the probability that the target accepts a proposed token")
    return a


def expected_tokens(k: int, alpha) -> sympy.Expr:
    """Tokens per verify step: ``(1 − α^(k+1)) / (1 − α)``, ``k + 1`` at ``α = 1`` (Leviathan et
    al. 2023, eq. 1)."""
    alpha = as_expr(alpha)
    if alpha == 1:
        return sympy.Integer(k + 1)
    return (1 - alpha ** (k + 1)) / (1 - alpha)


def mtp_step(step, depths):
    """The part of a step of the model built with ``option mtp`` that is its MTP module (the
    operators and all-reduces under ``mtp_layers``), per depth (÷ ``depths``)."""
    ops = [replace(o, flops=o.flops / depths, weight_bytes=o.weight_bytes / depths, kv_bytes=o.kv_bytes / depths,
                   activation_bytes=o.activation_bytes / depths)
           for o in step.ops if o.path.startswith(MTP_PREFIX)]
    if not ops:
        raise CostgraphValueError("--draft mtp: the model has no multi-token-prediction module",
                                  hint="a model with 'option mtp' (deepseek_v3)")
    ar = [replace(a, calls=a.calls / depths) for a in step.allreduce if a.path.startswith(MTP_PREFIX)]
    return replace(step, ops=ops, allreduce=ar)


def speculative(inf, seconds, k: int, alpha, draft_inf, draft_seconds, draft_subs: dict, mtp: bool) -> dict:
    """The quantities of speculative decoding (module docstring), name → expression in the
    target's symbols and ``P``, ``G``, ``b``: ``tokens_per_step``, ``draft_step_seconds``
    (one proposed token), ``verify_seconds``, ``time_per_output_token``, ``tokens_per_second``.
    ``seconds``/``draft_seconds`` map a step to its time; ``draft_inf`` the draft's
    :class:`~costgraph.inference.phases.Inference` (the target built with ``option mtp`` when
    ``mtp``), its dimension values ``draft_subs`` substituted here.

    Raises
    ------
    CostgraphValueError
        ``k`` not a whole number from 1 to :data:`MAX_SPECULATIVE_TOKENS`."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SPECULATIVE_TOKENS:
        raise CostgraphValueError(f"--speculative-tokens must be a whole number from 1 to "
                                  f"{MAX_SPECULATIVE_TOKENS:,}, not {k!r}",
                                  hint="tokens the draft proposes per step, e.g. 3 (vLLM's num_speculative_tokens)")
    n = P + G - 2
    e = expected_tokens(k, alpha)
    verify = as_expr(seconds(inf.step(k + 1, n)))
    st = draft_inf.step(1, n)
    if mtp:
        depths = next((v for s, v in draft_subs.items() if str(s) == "D"), 1)
        st = mtp_step(st, sympy.Integer(depths))
    own = {s: v for s, v in draft_subs.items() if s not in (draft_inf.b, draft_inf.s)}
    draft = as_expr(draft_seconds(st)).xreplace(own).xreplace({draft_inf.b: inf.b})
    tpot = (k * draft + verify) / e
    return {"tokens_per_step": e, "draft_step_seconds": draft, "verify_seconds": verify,
            "time_per_output_token": tpot, "tokens_per_second": inf.b / tpot}


def draft_memory(dinf, mtp: bool, positions, batch, page) -> dict:
    """The draft's memory per device beside the target's, as vLLM holds it: ``draft_weight_bytes``
    and ``draft_kv_cache_bytes`` (``batch`` sequences of ``positions`` tokens, paged in blocks of
    ``page``), name → expression.

    * vLLM loads the drafter in the same worker as the target, before it sizes the KV cache
      (vllm/v1/worker/gpu_model_runner.py ``load_model``: "Loading drafter model...", then "Model
      loading took X GiB"): its weights are the draft's every weight, in the target's dtypes. An MTP
      drafter shares the target's embedding and output head (vllm/v1/spec_decode/eagle.py
      ``EagleProposer._maybe_share_embeddings``: "Detected MTP model. Sharing target model embedding
      weights with the draft model", and ``_maybe_share_lm_head``): only the weights under
      ``mtp_layers`` count (the model file ties ``embed`` and ``shared_head`` to the target's).
    * Its attention layers join the KV cache config beside the target's (``EagleProposer.load_model``:
      the draft's layers are every attention layer less the target's; ``get_kv_cache_spec`` takes each
      ``AttentionLayerBase``): every cached token holds them too — a separate draft its own layers, an
      MTP drafter its ``mtp_layers`` (DeepSeek-V3: one more MLA layer, 576 values a token)."""
    if not mtp:
        return {"draft_weight_bytes": dinf.weight_memory(),
                "draft_kv_cache_bytes": dinf.kv_cache_bytes(positions, batch=batch, page=page)}
    from ..engine.totals import expand_sum

    weights = [dinf.cg.weights[w].count * dinf.weight_copy_bytes(w) for w in dinf.cg.weights
               if w.startswith(MTP_PREFIX + "/")]
    kept = sympy.ceiling(as_expr(positions) / page) * page
    kv = [batch * kept * dinf._entry_position_bytes(e) + dinf._entry_fixed_bytes(e)   # noqa: SLF001 - one cache's
          for e in dinf.kv_entries if e.path.startswith(MTP_PREFIX + "/")]          # bytes, as kv_cache_bytes sums
    return {"draft_weight_bytes": expand_sum(weights), "draft_kv_cache_bytes": expand_sum(kv)}


def with_draft(rep, inf, dinf, mtp: bool, draft_subs: dict, page) -> dict:
    """The serving fit with the draft's memory (:func:`draft_memory`) beside the target's:
    ``quantities`` (``draft_weight_bytes``, ``draft_kv_cache_bytes``, ``memory_bytes_with_draft``,
    name → expression in the target's symbols), ``fits_with_draft`` and ``max_batch_with_draft``
    against ``rep``'s capacity (None without a device memory)."""
    from ..training.fit import largest_fitting

    own = {s: v for s, v in draft_subs.items() if s not in (dinf.b, dinf.s)}
    q = {k: as_expr(e).xreplace(own).xreplace({dinf.b: inf.b})
         for k, e in draft_memory(dinf, mtp, P + G, dinf.b, page).items()}
    vd = vllm_draft(dinf, mtp, draft_subs, q["draft_weight_bytes"].xreplace(rep.subs))
    cap = rep.settings.capacity_bytes
    if "memory_bytes" not in rep.quantities or cap is None:
        return {"quantities": q, "fits_with_draft": None, "max_batch_with_draft": None, "vllm_draft": vd}
    q["memory_bytes_with_draft"] = mem = rep.quantities["memory_bytes"] + q["draft_weight_bytes"] + \
        q["draft_kv_cache_bytes"]
    return {"quantities": q, "fits_with_draft": bool(mem.xreplace(rep.subs) <= cap),
            "max_batch_with_draft": largest_fitting(mem, inf.b, rep.subs, cap), "vllm_draft": vd}


def vllm_draft(dinf, mtp: bool, draft_subs: dict, weight_bytes) -> dict | None:
    """The drafter as vLLM's KV cache sizing sees it (``draft`` of
    :func:`costgraph.inference.capacity.vllm_kv_cache`): ``{weight_bytes, kinds}``, its weights
    per device (:func:`draft_memory`'s, whole bytes) and its attention layers by kind
    (:func:`~costgraph.inference.capacity.kv_layer_kinds`; an MTP drafter's ``mtp_layers`` only);
    None when a size has no value.

    vLLM loads the drafter inside ``GPUModelRunner.load_model`` ("Loading drafter model...") before
    ``determine_available_memory`` profiles (vllm/v1/worker/gpu_model_runner.py), so "Model loading
    took X GiB" and the memory the cache is sized from hold it; ``get_kv_cache_spec`` takes every
    ``AttentionLayerBase`` of the forward context, the drafter's among them (vllm/v1/spec_decode/
    eagle.py ``EagleProposer.load_model``: ``draft_attn_layer_names`` = every attention layer less the
    target's), and ``kv_cache_utils.get_num_blocks`` divides the memory by the page of one layer
    times the number of layers: DeepSeek-V3's one MTP layer makes 62 MLA layers where 61 were."""
    from .capacity import kv_layer_kinds

    weight_bytes = as_expr(weight_bytes)
    if weight_bytes.free_symbols:
        return None
    try:
        kinds = kv_layer_kinds(dinf, draft_subs, MTP_PREFIX if mtp else None)
    except CostgraphValueError:
        return None
    return {"weight_bytes": int(sympy.ceiling(weight_bytes)), "kinds": kinds}
