"""What the hardware FLOPs add for recomputation, per operator, under a named counting
convention (``layout.recompute_count``, :data:`costgraph.choices.RECOMPUTE_COUNT`).

``rerun`` (default)
    each operator the policy re-runs (:func:`costgraph.engine.recompute.recompute_plan`)
    adds its forward FLOPs × the share of its instances re-run, once. Selective
    recomputation (Megatron ``core_attn``) re-runs QKᵀ, scale, softmax, dropout and
    probs·V: ``4Bs²h`` per layer under the matmul convention and ``--causal full``
    (``2Bs²h`` under ``selective-korthikanti``, which re-runs QKᵀ → dropout only).
``korthikanti-eq8``
    Korthikanti et al. 2022 (arXiv 2205.05198) App. A: model FLOPs
    ``72BLsh²(1 + s/6h + V/12hL)`` (Eq. 7), hardware FLOPs with selective
    recomputation ``72BLsh²(1 + s/3h + V/12hL)`` (Eq. 8). Their difference,
    ``72BLsh² · s/6h = 12BLs²h``, is the whole s² part of Eq. 7: the forward *and
    backward* of QKᵀ and probs·V (``4Bs²h`` forward + ``8Bs²h`` backward per layer)
    counted once more. So under this convention every attention core that a selective
    policy re-runs (the ``core_attn`` module, under ``selective`` and
    ``selective-korthikanti``) adds its operators' forward + backward FLOPs (QKᵀ through
    probs·V, at the causal convention of the model count); every other re-run operator
    counts as under ``rerun`` (for full recomputation Eq. 8 is not defined; Narayanan et
    al. 2021 Eq. 3, ``96BLsh²(1 + s/6h + V/16hL)``, is the rerun count).

Why the two differ (GPT-3 175B: 2.69% against 0.45% of the model FLOPs with
``selective-korthikanti``): what runs again in the backward of a selectively recomputed
layer is the core's *forward* only — 2Bs²h (QKᵀ → softmax → dropout, what rebuilds the
dropped s × s tensors: ``selective-korthikanti``) or 4Bs²h (with probs·V, Megatron's
``core_attn``) — while
Eq. 8 adds 12Bs²h, six times the former and three times the latter: the backward of
the attention products (8Bs²h) is counted again although it runs once in either case.
"""

from __future__ import annotations

import sympy

from ..engine.recompute import DEFAULT_MODULES, module_regions

SELECTIVE = ("selective", "selective-korthikanti")


def eq8_cores(cg, layout) -> set[str]:
    """Op paths of the attention cores (QKᵀ through probs·V) that ``layout``'s selective policy
    re-runs as Megatron's ``core_attn`` module: what ``korthikanti-eq8`` counts forward +
    backward. Empty for other policies and for the ``rerun`` convention."""
    if getattr(layout, "recompute_count", "rerun") != "korthikanti-eq8" or layout.recompute not in SELECTIVE:
        return set()
    if "core_attn" not in (getattr(layout, "recompute_modules", None) or DEFAULT_MODULES):
        return set()
    return {p for region in module_regions(cg, "core_attn") for p in region}


def recompute_flops(cg, layout, rows, plan) -> dict[str, sympy.Expr]:
    """Op path → the FLOPs its recomputation adds per micro-batch (× its count), for ``rows``
    (leaf rows of :func:`costgraph.engine.totals.breakdown`) under ``plan`` (the
    :class:`~costgraph.engine.recompute.RecomputePlan` of ``layout``), counted under
    ``layout.recompute_count`` (module docstring)."""
    cores = eq8_cores(cg, layout)
    out = {}
    for r in rows:
        p = r["path"]
        if p in cores:
            out[p] = r["count"] * (r["flops_forward"] + r["flops_backward"])
        elif p in plan.rerun:
            out[p] = r["count"] * r["flops_forward"] * plan.rerun[p]
    return out
