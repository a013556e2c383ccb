"""Pipeline schedules: what each stage keeps in flight, and the bubble.

For ``p`` stages (ranks ``i = 0 … p−1``), ``m`` micro-batches per step and,
interleaved, ``v`` model chunks per device run in groups of ``g``
micro-batches per chunk (Megatron's ``microbatch_group_size_per_vp_stage``,
default ``p``):

``1f1b``
    Megatron-LM @ d98e8a64, ``megatron/core/pipeline_parallel/schedules.py::
    get_pp_rank_microbatches``: ``warm-up = p − i − 1`` forwards, capped at
    ``m`` (then every forward is warm-up); the steady state runs one more
    forward before the first backward, so the peak is ``min(p − i, m)``
    micro-batches of the stage's layers (Narayanan et al. 2021 §2.2).
``interleaved``
    the same function, interleaved branch: ``warm-up = 2(p − i − 1) + (v − 1)·g``
    *chunks* (a chunk: ``l/(p·v)`` layers of one micro-batch), capped at the
    ``m·v`` chunks of the step; peak ``min(warm-up + 1, m·v)`` chunks, that is
    ``chunks / v`` micro-batches of the stage's ``l/p`` layers. Megatron
    refuses ``g < p`` or ``g > m`` (ValueError) and ``0 < m mod g < p``
    (RuntimeError) in ``forward_backward_pipelining_with_interleaving``.
    The named convention ``korthikanti`` (``schedule_accounting``) keeps
    Korthikanti et al. 2022 §4.2.3 and Megatron's
    ``theoretical_memory_usage.py``: the first stage holds
    ``p·(1 + (p − 1)/(p·v))`` micro-batches, later stages as 1F1B.
``gpipe``
    every stage holds all ``m`` (Huang et al. 2019).
``zb-h1``
    Qi et al. 2023, *Zero Bubble Pipeline Parallelism* (arXiv 2401.10241)
    §3.1: ZB-H1 splits the backward into input (B) and weight (W) gradients
    and keeps 1F1B's peak activation memory, ``min(p − i, m)`` on stage ``i``;
    its bubble is ``(p − 1)(T_F + T_B − T_W)`` against 1F1B's
    ``(p − 1)(T_F + T_B + T_W)`` — with ``m ≥ p`` micro-batches, the paper's setting (its Figure 3: the
    deferred W passes of the steady state fill the cool-down). With ``m < p`` no steady state forms: the
    last stage alternates F and B (1F1B's memory: one micro-batch), so the B passes reach stage 0 two
    slots apart, the last one at ``(2p + 2m − 2)·T`` (``T_F = T_B = T_W = T``), and stage 0's m − 1 earlier W
    passes fill the gaps between its B passes, its last W after: a step of ``(2p + 2m − 1)·T`` against
    ``3m·T`` of work, a bubble of ``(2p − m − 1)·T`` (``m = 1``: ``(p − 1)(T_F + T_B)``, nothing to defer;
    ``m = p``: the paper's ``(p − 1)·T``). Both: ``(p − 1 + max(0, p − m))·T``.
``dualpipe``
    DeepSeek-V3 technical report (arXiv 2412.19437) §3.2.1 and Table 2:
    each device holds stage ``i`` and stage ``p − 1 − i`` (two copies of the
    parameters' share), and ``p + 1`` micro-batches' activations of a stage;
    bubble ``(p/2 − 1)(F&B + B − 3W)``. Needs an even ``p``.

Bubbles (:func:`bubble_fraction`) are fractions of the compute time of a
step, with the backward twice the forward and split evenly into input and
weight gradients (``T_F = T_B = T_W``, the zero-bubble paper's setting):
1F1B and GPipe ``(p − 1)/m``, interleaved ``(p − 1)/(v·m)``, ZB-H1
``(p − 1 + max(0, p − m))/(3m)`` (``(p − 1)/(3m)`` for ``m ≥ p``), DualPipe ``(p − 2)/(3m)``
(``F&B`` counted as ``F + B``, no overlap gain; it needs ``m ≥ 2p``).
"""

from __future__ import annotations

import functools

import sympy

from ..choices import SCHEDULE, SCHEDULE_ACCOUNTING
from ..errors import CostgraphValueError
from ..numbers.minmax import smax, smin


def _e(x):
    return sympy.Integer(x) if isinstance(x, int) else x


def interleaved_warmup(i, p, m, v, g=None):
    """Warm-up chunks of rank ``i`` in Megatron's interleaved schedule, capped
    at ``m·v`` (``get_pp_rank_microbatches``, no MoE overlap); ``g`` defaults to ``p``."""
    i, p, m, v = (_e(x) for x in (i, p, m, v))
    g = p if g is None else _e(g)
    return smin(2 * (p - i - 1) + (v - 1) * g, m * v)


def chunks_in_flight(i, p, m, schedule: str = SCHEDULE.default, v=1, g=None,
                     accounting: str = SCHEDULE_ACCOUNTING.default) -> sympy.Expr:
    """Peak activations rank ``i`` keeps, in chunks of one micro-batch
    (a chunk: the stage's layers ÷ ``v``; ``v = 1`` outside ``interleaved``,
    and for ``dualpipe`` a chunk is one of the device's two stages). Computed once per arguments
    (:func:`_chunks`: SymPy's ``Min`` of a symbolic ``m`` proves its order per call, about a millisecond;
    the planner asks for the same stages of every layer split, ZeRO stage and recomputation; the ``Min`` is
    :func:`costgraph.numbers.minmax.smin`'s, SymPy's object without the proof where the order changes with ``m``).

    Raises
    ------
    ValueError
        Unknown schedule or accounting (callers check first).
    """
    return _chunks(i, p, m, schedule, v, g, accounting)


@functools.lru_cache(maxsize=4096)
def _chunks(i, p, m, schedule, v, g, accounting) -> sympy.Expr:
    """:func:`chunks_in_flight`, cached (its arguments are numbers, SymPy expressions and names: a pure function
    of them)."""
    SCHEDULE.check(schedule)
    SCHEDULE_ACCOUNTING.check(accounting)
    i, p, m, v = (_e(x) for x in (i, p, m, v))
    if schedule == "gpipe":
        return m * v
    if schedule == "dualpipe":
        return p + 1
    if schedule == "interleaved":
        if accounting == "korthikanti":
            return p * v + p - 1 if i == 0 else v * smin(p - i, m)
        w = interleaved_warmup(i, p, m, v, g)
        return smin(w + 1, m * v)
    return smin(p - i, m)   # 1f1b, zb-h1: warm-up p − i − 1, +1 in the steady state, capped at m


def in_flight(i, p, m, schedule: str = SCHEDULE.default, v=1, g=None,
              accounting: str = SCHEDULE_ACCOUNTING.default) -> sympy.Expr:
    """Micro-batches of the stage's activations rank ``i`` keeps at its peak:
    :func:`chunks_in_flight` ÷ ``v`` (interleaved) or ÷ 2 (``dualpipe``: a
    device's two stages are its unit)."""
    c = chunks_in_flight(i, p, m, schedule, v, g, accounting)
    if schedule == "interleaved":
        return c / _e(v)
    if schedule == "dualpipe":
        return c / 2
    return c


def bubble_fraction(schedule: str, p, m, v=1) -> sympy.Expr:
    """Idle time of a step as a fraction of its compute time (module docstring).

    Raises
    ------
    ValueError
        Unknown schedule.
    """
    SCHEDULE.check(schedule)
    p, m, v = (_e(x) for x in (p, m, v))
    if schedule == "interleaved":
        return (p - 1) / (v * m)
    if schedule == "zb-h1":   # m < p: no steady state to defer W into (module docstring)
        return (p - 1 + smax(0, p - m)) / (3 * m)
    if schedule == "dualpipe":
        return (p - 2) / (3 * m)
    return (p - 1) / m


def check_schedule(p, m, schedule: str, v=1, g=None) -> None:
    """Refuse what Megatron refuses for a numeric layout: the interleaved group
    ``g`` (default ``p``) outside ``[p, m]`` or ``0 < m mod g < p``
    (``forward_backward_pipelining_with_interleaving``); DualPipe with an odd ``p``, or with ``m`` odd or
    below ``2p`` (deepseek-ai/DualPipe @ 3da1bbe ``dualpipe.py`` ``DualPipe.step``: ``num_ranks % 2 == 0``,
    ``num_chunks % 2 == 0 and num_chunks >= num_ranks * 2``: half the micro-batches enter from each end).

    Raises
    ------
    CostgraphValueError
        With a hint.
    """
    if schedule == "dualpipe" and isinstance(p, int) and p > 1 and p % 2:
        raise CostgraphValueError(f"DualPipe pairs stage i with stage p−1−i: it needs an even p, got {p}",
                                  hint="--pp an even number")
    if schedule == "dualpipe" and isinstance(p, int) and isinstance(m, int) and p > 1 and (m % 2 or m < 2 * p):
        raise CostgraphValueError(
            f"DualPipe feeds half the micro-batches from each end of the pipeline: it needs an even m of at least "
            f"2p = {2 * p}, got m = {m} (deepseek-ai/DualPipe dualpipe.py DualPipe.step)",
            hint=f"--micro-batches {max(2 * p, m + m % 2)}")
    if schedule != "interleaved" or not (isinstance(p, int) and isinstance(m, int)) or p == 1:
        return
    g = p if g is None else g
    if not isinstance(g, int):
        return
    if g > m or g < p:
        raise CostgraphValueError(
            f"the interleaved schedule runs groups of g = {g} micro-batches per model chunk, which must lie in "
            f"[p, m] = [{p}, {m}] (Megatron-LM forward_backward_pipelining_with_interleaving)",
            hint=f"--micro-batches at least {g}" if g > m else f"a group of at least p = {p}")
    if 0 < m % g < p:
        raise CostgraphValueError(
            f"m mod g = {m % g} with m = {m} micro-batches in groups of g = {g}: Megatron requires 0 or at least "
            f"p = {p} (a smaller last group leaves dependency bubbles)",
            hint=f"--micro-batches a multiple of {g}")
