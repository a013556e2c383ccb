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

Not counted: the draft model's weights and KV cache in the capacity, rejection sampling's own
work, a draft whose vocabulary differs.
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
