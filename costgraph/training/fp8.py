"""FP8 training as NVIDIA Transformer Engine runs it: which FLOPs run at the
FP8 peak, and the buffers each FP8 linear keeps.

A precision policy of ``policies.toml`` with ``fp8 = "RECIPE"`` (``fp8-delayed``,
``fp8-current``, ``fp8-blockwise``, ``fp8-mxfp8``) keeps Megatron's model states
(bf16 parameters, fp32 main gradients, fp32 master copy and Adam moments, as
Megatron-LM runs with TE) and runs the GEMMs of the **FP8 linears** in FP8:

* the FP8 linears: every operator with the ``matrix`` role (a ``linear``) inside a
  layer (a top-level repeat group), except MoE routers — the modules Megatron-LM
  builds from TE (``TELinear``, ``TELayerNormColumnParallelLinear``, grouped
  experts). The output head (Megatron's ``output_layer`` is a plain
  ``ColumnParallelLinear``) and the attention core's products stay in BF16, as do
  norms, activations and the rest;
* **compute**: those operators' FLOPs (under the FLOP convention; recomputed ones
  included) at the preset's ``peak_flops_fp8``, the rest at the BF16 peak
  (:mod:`costgraph.training.steptime`);
* **memory** per FP8 linear (one GEMM), per device (its TP/EP shard), in the
  recipe's terms (``fp8.toml``, from TE @ d0067d0d):

  - ``fp8 weight copy``: the quantized weight, 1 byte an element, cached across
    the micro-batches of a step (``module/linear.py``: ``_fp8_workspaces["weight"]``
    when ``is_first_microbatch`` is not None, as Megatron passes it);
  - ``fp8 weight transpose``: the column-wise copy the backward's data gradient
    reads: a separate buffer for tensor scaling on Hopper (``fp8_transpose =
    "separate"``), none on Blackwell and later (``"shared"``: one buffer serves
    both, ``float8_tensor.py::inner_tensor_specs``); block and MXFP8 scaling
    always keep both copies;
  - ``fp8 scales``: the weight's ``scale_inv`` (one fp32 per tensor; fp32 per
    128×128 block; one E8M0 byte per 32 values, padded as TE pads them);
  - ``fp8 amax history``: delayed scaling only: per module and GEMM, 3 forward and
    2 backward quantizers, each an fp32 scale and ``1024`` fp32 amax entries
    (``module/base.py::set_meta_tensor``, ``quantization.py::DelayedScalingRecipeState``).

Not counted: the FP8 copies of the activations TE saves for backward (the
linear inputs, ``module/linear.py`` keeps them column-wise in FP8): the
activation analysis keeps them at the activation precision.
"""

from __future__ import annotations

import sympy

from ..errors import CostgraphValueError
from .data import Recipe, policy as get_policy, recipe, recipes  # noqa: F401 (fp8.toml is read and validated in data.py)

#: the weight transpose of tensor scaling: a separate buffer (Hopper) or none (Blackwell+: one buffer)
TRANSPOSE = ("separate", "shared")
#: the parts of FP8 memory, in the order they are shown
PARTS = ("fp8 weight copy", "fp8 weight transpose", "fp8 scales", "fp8 amax history")


def policy_recipe(policy) -> Recipe | None:
    """The FP8 recipe of a precision policy (a name or :class:`~costgraph.training.data.Policy`), or None."""
    name = get_policy(policy).fp8
    return None if name is None else recipe(name)


def fp8_linears(cg) -> set[str]:
    """Paths of the operators whose GEMMs run in FP8: ``matrix``-role operators with a
    weight inside a top-level repeat group (a layer), MoE routers excepted (module docstring)."""
    from ..ops.registry import has_role
    from .compute import routers

    top = [p for p in cg.groups if "/" not in p]
    skip = routers(cg)
    return {path for path, d in cg.ops()
            if has_role(d["kind"], "matrix") and d["cost"].weights and path not in skip
            and any(path.startswith(g + "/") for g in top)}


def fp8_flops(rows, linears: set[str]) -> sympy.Expr:
    """The FLOPs of ``rows`` (rows of :func:`costgraph.engine.totals.breakdown`, forward +
    backward, × count) that belong to the FP8 linears ``linears``."""
    return sympy.expand(sympy.Add(*[r["count"] * (r["flops_forward"] + r["flops_backward"])
                                    for r in rows if r["path"] in linears]))


def _up(x, k):
    """``x`` rounded up to a multiple of ``k`` (TE's ``round_up_to_nearest_multiple``)."""
    return x if k == 1 else sympy.ceiling(sympy.Rational(1, 1) * x / k) * k


def weight_buffers(rec: Recipe, rows, cols, transpose: str = "separate") -> dict[str, sympy.Expr]:
    """Bytes of the FP8 buffers of one linear (one GEMM) whose weight shard is ``rows × cols``
    (``[out, in]``, PyTorch's layout; TE quantizes it as a 2-D ``[M, K]``): :data:`PARTS`.

    Source: TE @ d0067d0d ``float8_tensor.py`` (tensor scaling: ``_data``, ``_transpose``
    unless Blackwell+, ``_scale_inv`` (1,) fp32), ``float8_blockwise_tensor.py::get_scale_shape``
    (2-D: ``[⌈M/128⌉, up4(⌈K/128⌉)]`` row-wise, ``[⌈K/128⌉, up4(⌈M/128⌉)]`` column-wise),
    ``mxfp8_tensor.py::get_scale_shape`` (``[up128(M), up4(K // 32)]``, ``[up4(M // 32), up128(K)]``),
    ``quantization.py::DelayedScalingRecipeState`` and ``base.py::set_meta_tensor``."""
    if transpose not in TRANSPOSE:
        raise CostgraphValueError(f"unknown fp8_transpose {transpose!r}", hint="separate (Hopper) or shared (Blackwell+)")
    M, K, n = sympy.sympify(rows), sympy.sympify(cols), sympy.sympify(rows) * sympy.sympify(cols)
    copy = rec.data_bytes * n
    both = rec.columnwise == "always" or transpose == "separate"
    trans = rec.data_bytes * n if both else sympy.Integer(0)
    B, pi, po = rec.block, rec.scale_pad_inner, rec.scale_pad_outer
    if rec.scaling == "tensor":
        scales = rec.scale_bytes   # one _scale_inv, shared by data and transpose
    elif rec.scaling == "block":
        if rec.weight_block_dims == 2:
            row = sympy.ceiling(M / B) * _up(sympy.ceiling(K / B), pi)
            col = sympy.ceiling(K / B) * _up(sympy.ceiling(M / B), pi)
        else:
            row = sympy.ceiling(K / B) * _up(M, pi)
            col = sympy.ceiling(M / B) * _up(K, pi)
        scales = rec.scale_bytes * (row + col)
    else:
        row = _up(M, po) * _up(sympy.floor(K / B), pi)
        col = _up(sympy.floor(M / B), pi) * _up(K, po)
        scales = rec.scale_bytes * (row + col)
    quantizers = rec.forward_quantizers + rec.backward_quantizers
    history = quantizers * rec.meta_bytes * (1 + rec.amax_history) if rec.amax_history else sympy.Integer(0)
    return {"fp8 weight copy": copy, "fp8 weight transpose": trans, "fp8 scales": sympy.sympify(scales),
            "fp8 amax history": history}


def fp8_memory(cg, layout, placement, stage) -> dict[str, sympy.Expr]:
    """FP8 buffers per device on one pipeline ``stage`` (a
    :class:`~costgraph.parallel.pipeline.Stage`) under ``layout`` (filled), ``placement`` its
    :class:`~costgraph.parallel.placement.Placement`: :data:`PARTS`, bytes; empty for a policy
    without FP8. Each FP8 linear's weight as TP/EP shard it (the copy is of the gathered weight
    under ZeRO-3: TE quantizes the weight the GEMM reads); the stage holds ``stage.layers[g]`` of
    each layer group's ``count`` iterations."""
    rec = policy_recipe(layout.policy)
    if rec is None:
        return {}
    transpose = getattr(layout, "fp8_transpose", "separate")
    out = {k: sympy.Integer(0) for k in PARTS}
    for path in sorted(fp8_linears(cg)):
        group = next(g for g in cg.groups if "/" not in g and path.startswith(g + "/"))
        share = sympy.sympify(stage.layers.get(group, 0)) / cg.groups[group].count
        for wid in cg.nodes[path]["cost"].weights:
            w = cg.weights[wid]
            if len(w.shape) != 2:
                continue   # a bias: not quantized
            sh = placement.shards.get(wid)
            axes = sh.axes if sh is not None else (1, 1)
            copies = w.count / (sh.experts if sh is not None else 1)
            parts = weight_buffers(rec, w.shape[0] / axes[0], w.shape[1] / axes[1], transpose)
            for k in PARTS:
                out[k] += copies * share * parts[k]
    return {k: sympy.expand(v) for k, v in out.items()}
