"""Pipeline parallelism: which parts of the graph each stage holds, and how
many micro-batches of activations it keeps in flight.

Stages are read off the graph, not written per model:

* the **layers** are the iterations of the top-level repeat groups; with
  ``p`` stages each stage holds ``count / p`` iterations of every group
  (``l / p`` layers; Megatron requires ``p | l``). A model of several stacks
  (DeepSeek-V3's dense then MoE layers, T5's encoder and decoder) is given
  the same share of each on every stage — the mean, exact for one stack;
  Megatron assigns contiguous layers, which this does not model;
* operators **before** the first group (embeddings, their dropout) sit on
  the first stage, operators **after** it (final norm, head) on the last; a
  table shared between them (a tied embedding and head) is held by both, as
  Megatron keeps a copy of the word embedding on the last stage;
* **micro-batches in flight** (activations kept at once), for ``m``
  micro-batches per step: ``1f1b`` — stage ``i`` (0-based) holds
  ``min(p − i, m)`` (Narayanan et al. 2021 §2.2; the first stage holds
  ``min(p, m)``); ``interleaved`` with ``v`` model chunks per device
  (virtual stages) — the first stage holds ``p`` micro-batches times
  ``1 + (p − 1)/(p·v)`` (Korthikanti et al. 2022 §4.2.3, who write ``m``
  for the number of chunks; Megatron's ``theoretical_memory_usage.py``),
  later stages as 1F1B; ``gpipe`` — every stage holds all
  ``m`` (Huang et al. 2019).

``p`` may be a number (every stage is listed) or a symbol (the first and the
last stage are).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..engine.graph import CostGraph

from ..choices import SCHEDULE

SCHEDULES = SCHEDULE.values


@dataclass
class Stage:
    """One pipeline stage: ``index`` (0-based; a symbol expression for the last
    stage when ``p`` is symbolic), ``layers`` (group path → iterations held),
    ``nodes`` (paths of operators outside the groups held here), ``weights``
    (ids of weights outside the groups held here, a tied table on both ends),
    ``in_flight`` (micro-batches whose activations are kept at once)."""

    index: sympy.Expr
    name: str
    layers: dict[str, sympy.Expr] = field(default_factory=dict)
    nodes: set[str] = field(default_factory=set)
    weights: set[str] = field(default_factory=set)
    in_flight: sympy.Expr = sympy.Integer(1)


def pipeline_stages(cg: CostGraph, p, m=None, schedule: str = SCHEDULE.default, v: int = 1) -> list[Stage]:
    """The stages of ``cg`` for ``p`` pipeline stages and ``m`` micro-batches
    (``m`` defaults to ``p``); see the module docstring.

    Raises
    ------
    ValueError
        Unknown schedule (callers check first).
    """
    if schedule not in SCHEDULES:
        raise ValueError(schedule)
    p = sympy.Integer(p) if isinstance(p, int) else p
    m = p if m is None else (sympy.Integer(m) if isinstance(m, int) else m)
    top = [g for path, g in cg.groups.items() if "/" not in path]
    inside = {path for path, _ in cg.ops() if any(path.startswith(g.path + "/") for g in top)}
    order = [path for path, _ in cg.ops()]
    first_layer = min((order.index(x) for x in inside), default=len(order))
    before = {x for x in order[:first_layer] if x not in inside}
    after = {x for x in order[first_layer:] if x not in inside}

    def weights_of(nodes):
        out = set()
        for x in nodes:
            c = cg.nodes[x]["cost"]
            out |= set(c.weights) | set(c.tied)
        return out

    def stage(i, name, nodes) -> Stage:
        return Stage(i, name, {g.path: g.count / p for g in top}, set(nodes), weights_of(nodes),
                     _in_flight(i, p, m, schedule, v))

    if p == 1:
        return [stage(sympy.Integer(0), "stage 0 (the whole model)", before | after)]
    if p.is_Integer:
        n = int(p)
        return [stage(sympy.Integer(i), f"stage {i}" + (" (first)" if i == 0 else " (last)" if i == n - 1 else ""),
                      before if i == 0 else after if i == n - 1 else set()) for i in range(n)]
    return [stage(sympy.Integer(0), "stage 0 (first)", before), stage(p - 1, "stage p-1 (last)", after)]


def _in_flight(i, p, m, schedule, v):
    if schedule == "gpipe":
        return m
    held = sympy.Min(p - i, m)
    if schedule == "interleaved" and i == 0:
        return p * (1 + (p - 1) / (p * v))
    return held
