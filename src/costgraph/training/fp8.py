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
    when ``is_first_microbatch`` is not None, as Megatron passes it); none under a policy
    with ``fp8_params`` (Megatron-LM ``--fp8-param-gather``): the weight itself is the FP8
    tensor, counted in ``weights`` at 1 byte an element (:func:`fp8_param_bytes`), and no
    16-bit weight is kept;
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

  - under a recipe with ``weight_cache = "saved"`` (torchao's ``Float8Linear``, torchtitan's float8:
    ao @ eab345c ``float8_linear.py``, ``ctx.save_for_backward(input_fp8, weight_fp8_t)``), the FP8
    weight is cast at each forward and saved for that micro-batch's backward: one copy per
    micro-batch in flight, none under full recomputation (the layer's forward re-runs in its
    backward), no transpose buffer (``weight_fp8_t`` is a transposed view); with ``weight_cache =
    "recomputed"`` (``force_recompute_fp8_weight_in_bwd``: ``checkpoint.checkpoint(self.cast_weight_to_float8_t,
    ...)``) none is kept: the backward casts it again.

* **saved inputs** (:func:`saved_inputs`): TE saves each FP8 linear's input for the
  weight gradient in FP8, column-wise only (``module/linear.py``: ``inputmat.update_usage(
  rowwise_usage=False, columnwise_usage=True)``), with its scales. Where only FP8 linears
  keep that tensor, its copy at the activation precision goes; where another operator keeps
  it too (flash attention's output, read by the output projection), the FP8 copy comes on
  top. ``activations`` changes by the difference; ``fp8 saved inputs`` names the FP8 bytes.
  Not under full recomputation (the layer's input only is kept; the recomputed layer's
  FP8 inputs live during its backward only), nor with ``fp8_wgrad`` False. A storage the
  recompute policy frees (``moe_act``: the experts' down-projection input, the SwiGLU's
  output) is already out of ``activations``: only its FP8 copy comes, nothing more goes.

* **the policy's low-precision storage** (:func:`low_precision_saved`, DeepSeek-V3 report §3.3.3):
  ``moe_act_input_bits`` (the SwiGLU's inputs, where ``moe_act`` frees its output) and
  ``attention_output_bits`` (the output projection's input, one copy for the attention's backward
  and the projection's: no FP8 copy beside a BF16 one), each with an fp32 scale per 1×128 tile.

* **options** (:mod:`costgraph.training.fp8_options`): FP8 dot-product attention
  (``fp8_attention``: the attention products at the FP8 peak, Q/K/V (and O) saved in FP8,
  ``fp8 attention saved``), BF16 weight gradients (``fp8_wgrad`` False), and what delayed
  scaling refuses (the ``moe_act`` and ``layernorm`` recompute modules).
"""

from __future__ import annotations

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from .data import Recipe, policies as get_policies, policy as get_policy, recipe, recipes  # noqa: F401 (fp8.toml is read and validated in data.py)

#: the weight transpose of tensor scaling: a separate buffer (Hopper) or none (Blackwell+: one buffer);
#: ``auto`` resolved from the hardware by :func:`transpose_for` (``separate`` without a preset)
TRANSPOSE = ("separate", "shared", "auto")
#: the parts of FP8 memory, in the order they are shown (the FP8 buffers added to the total)
PARTS = ("fp8 weight copy", "fp8 weight transpose", "fp8 scales", "fp8 amax history")
#: the FP8 copies of the linears' inputs saved for backward: inside ``activations``
SAVED = "fp8 saved inputs"
#: the FP8 Q, K, V (and O) FP8 attention saves for its backward: inside ``activations``
ATTENTION_SAVED = "fp8 attention saved"


def transpose_for(hardware) -> str:
    """The weight transpose Transformer Engine keeps on ``hardware`` (a
    :class:`~costgraph.hardware.Hardware` or None): ``shared`` where its FP8 GEMMs take non-TN
    layouts, ``separate`` elsewhere (and without a preset or a compute capability).

    Source: TE @ d0067d0d ``pytorch/utils.py::is_non_tn_fp8_gemm_supported``: ``(10, 0) <=
    capability < (12, 0) or capability >= (13, 0)``; ``tensor/float8_tensor.py::inner_tensor_specs``
    keeps the ``_transpose`` buffer only where that is false (B200, GB200, B300, GB300: none;
    H100, H200, L40S, RTX 5090 (sm_120): one)."""
    cc = getattr(hardware, "compute_capability", None)
    return "shared" if cc is not None and (100 <= cc < 120 or cc >= 130) else "separate"


def on_hardware(layout, hardware):
    """``layout`` as it runs on ``hardware`` (a :class:`~costgraph.hardware.Hardware` or None): the one
    place a layout meets a preset before its memory and step time are derived (``costgraph train``,
    :func:`costgraph.training.api.train`; the calculator page, :mod:`costgraph.export.web_steps`). An FP8
    recipe the GPU cannot run is refused (:func:`check_supported`, as Transformer Engine refuses it) and
    ``fp8_transpose = "auto"`` becomes the transpose TE keeps there (:func:`transpose_for`); any other
    layout is returned as given.

    Raises
    ------
    CostgraphValueError
        The policy's FP8 recipe does not run on ``hardware``."""
    import dataclasses

    check_supported(layout.policy, hardware)
    if getattr(layout, "fp8_transpose", None) == "auto":
        return dataclasses.replace(layout, fp8_transpose=transpose_for(hardware))
    return layout


def resolved_transpose(layout, hardware) -> str:
    """``layout.fp8_transpose`` with ``auto`` replaced by :func:`transpose_for` ``(hardware)``."""
    value = getattr(layout, "fp8_transpose", "auto")
    return transpose_for(hardware) if value == "auto" else value


def unsupported(rec: Recipe, hardware) -> str | None:
    """Why Transformer Engine refuses recipe ``rec`` on ``hardware`` (a
    :class:`~costgraph.hardware.Hardware` or None), or None where it runs (or the preset names no
    compute capability). The bounds are ``fp8.toml``'s ``min_compute_capability`` and
    ``below_compute_capability``; source: TE @ d0067d0d ``pytorch/quantization.py::check_recipe_support``."""
    cc = getattr(hardware, "compute_capability", None)
    low, below = rec.min_compute_capability, rec.below_compute_capability
    if cc is None or ((low is None or cc >= low) and (below is None or cc < below)):
        return None
    need = f"compute capability {low / 10:.1f}" + (" or higher" if below is None else f" up to {below / 10:.1f} (excluded)")
    return f"the FP8 recipe '{rec.name}' needs {need}; {hardware.key} has {cc / 10:.1f} (Transformer Engine refuses it)"


def check_supported(policy, hardware) -> None:
    """Refuse precision ``policy`` (a name or Policy) on ``hardware`` where its FP8 recipe does not
    run (:func:`unsupported`). Raises CostgraphValueError, its hint the FP8 policies that run there."""
    rec = policy_recipe(policy)   # a preset without an FP8 peak: refused by its peak (Hardware.peak_flops)
    why = None if rec is None or not getattr(hardware, "peak_flops_fp8", None) else unsupported(rec, hardware)
    if why is not None:
        others = [n for n, p in get_policies().items() if p.fp8 and unsupported(recipe(p.fp8), hardware) is None]
        raise CostgraphValueError(why, hint="--precision " + (", ".join(others) if others else "mixed (no FP8 policy runs "
                                                                                              "there)"))


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


def fp8_param_bytes(cg, policy) -> dict[str, int]:
    """Weight id → bytes of one element for the weights kept in FP8 by a policy with
    ``fp8_params`` (Megatron-LM ``--fp8-param-gather``: the model is built under TE's
    ``quantized_model_init``, so each FP8 linear's weight *is* its FP8 copy, ``data_bytes``
    an element, and no 16-bit weight is kept beside it); empty for other policies. Biases
    and 1-D weights stay at the policy's precision (they are not quantized)."""
    pol = get_policy(policy)
    if not pol.fp8_params:
        return {}
    rec = recipe(pol.fp8)
    return {wid: int(rec.data_bytes) for path in fp8_linears(cg) for wid in cg.nodes[path]["cost"].weights
            if len(cg.weights[wid].shape) == 2}


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
        raise CostgraphValueError(f"unknown fp8_transpose {transpose!r}",
                                  hint="separate (Hopper), shared (Blackwell+) or auto (from the hardware)")
    transpose = "separate" if transpose == "auto" else transpose   # no preset: Hopper's (transpose_for)
    M, K, n = as_expr(rows), as_expr(cols), as_expr(rows) * as_expr(cols)
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
    return {"fp8 weight copy": copy, "fp8 weight transpose": trans, "fp8 scales": as_expr(scales),
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
    params = get_policy(layout.policy).fp8_params   # the copy is the parameter: counted in weights
    transpose = resolved_transpose(layout, None)   # ``auto`` is resolved from the preset by train (api.py)
    out = {k: sympy.Integer(0) for k in PARTS}
    for path in sorted(fp8_linears(cg)):
        group = next(g for g in cg.groups if "/" not in g and path.startswith(g + "/"))
        share = as_expr(stage.layers.get(group, 0)) / cg.groups[group].count
        for wid in cg.nodes[path]["cost"].weights:
            w = cg.weights[wid]
            if len(w.shape) != 2:
                continue   # a bias: not quantized
            sh = placement.shards.get(wid)
            axes = sh.axes if sh is not None else (1, 1)
            copies = w.count / (sh.experts if sh is not None else 1)
            parts = weight_buffers(rec, w.shape[0] / axes[0], w.shape[1] / axes[1], transpose)
            if params:
                parts["fp8 weight copy"] = sympy.Integer(0)
            if rec.weight_cache != "step":   # torchao: saved with the activations, or recast (module docstring)
                parts["fp8 weight transpose"] = sympy.Integer(0)
                kept = rec.weight_cache == "saved" and layout.recompute != "full"
                parts["fp8 weight copy"] *= as_expr(stage.in_flight) if kept else 0
            for k in PARTS:
                out[k] += copies * share * parts[k]
    return {k: sympy.expand(v) for k, v in out.items()}


def input_copy(rec: Recipe, rows, cols) -> sympy.Expr:
    """Bytes of the FP8 copy of a linear's input ``[rows, cols]`` (2-D: tokens × features) saved for
    backward, column-wise (TE @ d0067d0d ``module/linear.py``): the data, 1 byte an element, and
    its column-wise scales — one fp32 ``scale_inv`` (tensor scaling), ``[⌈rows/128⌉, up4(cols)]``
    fp32 (1×128 blocks, ``float8_blockwise_tensor.py::get_scale_shape``), ``[up4(rows // 32),
    up128(cols)]`` E8M0 (``mxfp8_tensor.py::get_scale_shape``)."""
    M, K = as_expr(rows), as_expr(cols)
    if rec.scaling == "tensor":
        scales = rec.scale_bytes
    elif rec.scaling == "block":
        scales = rec.scale_bytes * sympy.ceiling(M / rec.block) * _up(K, rec.scale_pad_inner)
    else:
        scales = rec.scale_bytes * _up(sympy.floor(M / rec.block), rec.scale_pad_inner) * _up(K, rec.scale_pad_outer)
    return rec.data_bytes * M * K + scales


def saved_inputs(cg, layout, placement, stage, precision, plan=None) -> tuple[sympy.Expr, sympy.Expr]:
    """``(FP8 bytes, change of activations)`` per device on ``stage`` for the inputs the FP8
    linears save (module docstring), per micro-batch in flight (× ``stage.in_flight``).
    ``precision``: the activations' :class:`~costgraph.engine.precision.Precision`; ``plan``: the
    layout's :class:`~costgraph.engine.recompute.RecomputePlan` (derived when None): a storage it
    frees is not in ``activations``, so only the kept share of its 16-bit bytes goes. The policy's
    ``attention_output_bits`` (module docstring) replaces the FP8 copy of the output projection's
    input by :func:`tile_copy` and lets its 16-bit copy go; ``moe_act_input_bits``:
    :func:`low_precision_saved`."""
    rec = policy_recipe(layout.policy)
    zero = sympy.Integer(0)
    if rec is None or layout.recompute == "full" or not getattr(layout, "fp8_wgrad", True):
        return zero, zero   # --no-fp8-wgrad: the linears save their BF16 inputs (TE ≤ 1.13 linear.py)
    from ..engine.activations import attention_cores

    if plan is None:
        from ..engine.recompute import recompute_plan

        plan = recompute_plan(cg, layout, layout.attention)
    o_bits = get_policy(layout.policy).attention_output_bits
    linears = fp8_linears(cg)
    savers = saved_by(cg)
    core = {n for _, nodes in attention_cores(cg) for n in nodes}
    dropped: set = set()
    if layout.recompute == "selective" or layout.attention == "flash":
        dropped = {tid for tid, t in cg.tensors.items() if t.producer in core and tid not in cg.nodes}
    o_fp8 = getattr(layout, "fp8_attention", False) and rec.fp8_dpa == "fp8-output"
    pv = {path for path, d in cg.ops()
          if d["kind"] == "matmul" and any(cg.tensors[i].producer in core for i in d["inputs"])}
    # the output projection's inputs: scores·V's output with the heads merged
    o_inputs = {cg.tensors[cg.nodes[p]["inputs"][0]].storage for p in linears
                if _reads_attention_output(cg, cg.nodes[p]["inputs"][0], pv)}
    if layout.attention == "flash" and layout.recompute == "none" and not o_fp8:
        # the fused kernel keeps its output O for its backward (FlashAttention; TE's fused attention)
        for sid in o_inputs:
            savers.setdefault(sid, set()).add("flash attention output")
    fp8, delta = zero, zero
    for sid in sorted({cg.tensors[cg.nodes[p]["inputs"][0]].storage for p in linears}):
        keepers = savers.get(sid, set())
        if sid in dropped or not keepers & linears:
            continue
        ten = cg.tensors[sid]
        group = next((g for g in cg.groups if "/" not in g and ten.producer.startswith(g + "/")), None)
        if group is None:
            continue   # the layers' first input: kept at the activation precision by what reads it
        share = as_expr(stage.layers.get(group, 0)) / cg.groups[group].count
        n = ten.numel / (placement.tensor_divisor(sid) * placement.sequence_divisor(sid))
        tp = placement.tp
        K = ten.shape[-1] / (tp.t if tp is not None and sid in tp.split else 1)   # features: split by TP or whole
        kept = plan.share(sid)   # the share of its 16-bit instances still in activations (None: freed)
        kept = zero if kept is None else kept
        if o_bits is not None and sid in o_inputs and not o_fp8:
            # one copy at the policy's bits for the attention's backward and the projection's (§3.3.3 (1))
            copy, gone = tile_copy(rec, o_bits, n / K, K), precision.bytes(ten.role) * n * kept
        else:
            copy = input_copy(rec, n / K, K)
            gone = precision.bytes(ten.role) * n * kept if not keepers - linears else zero
        scale = ten.active * share * stage.in_flight
        fp8 += scale * copy
        delta += scale * (copy - gone)
    return sympy.expand(fp8), sympy.expand(delta)


def tile_copy(rec: Recipe, bits, rows, cols) -> sympy.Expr:
    """Bytes of an activation ``[rows, cols]`` (tokens × features) stored at ``bits`` an element in
    1×``rec.block`` tiles (per token, per 128 channels), one ``rec.scale_bytes`` scale a tile:
    ``bits/8 · rows · cols + scale_bytes · rows · ⌈cols/block⌉``. Source: DeepSeek-V3 report
    (arXiv 2412.19437 v2) §3.3.1 ("we group and scale elements on a 1x128 tile basis (i.e., per token
    per 128 channels)") and §3.3.3 (the stored activations); the recipe's ``block`` (128) and fp32
    ``scale_bytes`` (TE @ d0067d0d ``Float8BlockQuantizer``, the ``blockwise`` recipe of ``fp8.toml``)."""
    M, K = as_expr(rows), as_expr(cols)
    return sympy.Rational(bits, 8) * M * K + rec.scale_bytes * M * sympy.ceiling(K / rec.block)


def low_precision_saved(cg, layout, placement, stage, precision, plan) -> sympy.Expr:
    """Change of ``activations`` (bytes, per device on ``stage``, × ``stage.in_flight``) from the
    policy's ``moe_act_input_bits``: the inputs the MoE activation keeps (the SwiGLU's gate and up
    projections' outputs: what an ``expert_act`` operator saves that no ``expert_act`` operator
    produced), stored by :func:`tile_copy` instead of at the activation ``precision``, where the
    recompute ``plan`` re-runs that operator (``moe_act``). DeepSeek-V3 report §3.3.3 (2): "we cache
    the inputs of the SwiGLU operator and recompute its output in the backward pass. These
    activations are also stored in FP8 with our fine-grained quantization method". Zero for a policy
    without the field and without the selective ``moe_act`` module."""
    from ..ops.registry import has_role

    zero = sympy.Integer(0)
    bits = get_policy(layout.policy).moe_act_input_bits
    rec = policy_recipe(layout.policy)
    mods = getattr(layout, "recompute_modules", None) or ()
    if bits is None or rec is None or not layout.recompute.startswith("selective") or "moe_act" not in mods:
        return zero
    acts = {p for p, d in cg.ops() if has_role(d["kind"], "expert_act") and p in plan.rerun}
    sids = {cg.tensors[tid].storage for p in acts for tid in cg.nodes[p]["cost"].saved
            if cg.tensors[cg.tensors[tid].storage].producer not in acts}
    delta = zero
    for sid in sorted(sids):
        kept = plan.share(sid)
        ten = cg.tensors[sid]
        group = next((g for g in cg.groups if "/" not in g and ten.producer.startswith(g + "/")), None)
        if kept is None or group is None:
            continue
        share = as_expr(stage.layers.get(group, 0)) / cg.groups[group].count
        n = ten.numel / (placement.tensor_divisor(sid) * placement.sequence_divisor(sid))
        tp = placement.tp
        K = ten.shape[-1] / (tp.t if tp is not None and sid in tp.split else 1)
        delta += ten.active * share * stage.in_flight * kept * (tile_copy(rec, bits, n / K, K)
                                                                 - precision.bytes(ten.role) * n)
    return sympy.expand(delta)


def saved_by(cg) -> dict[str, set]:
    """Storage id → the op paths that keep it for the backward (their ``saved`` tensors)."""
    savers: dict[str, set] = {}
    for path, d in cg.ops():
        for tid in d["cost"].saved:
            savers.setdefault(cg.tensors[tid].storage, set()).add(path)
    return savers


def _reads_attention_output(cg, tid, pv: set, steps: int = 4) -> bool:
    """Whether tensor ``tid`` is a product scores·V's output (a node of ``pv``), directly or through
    up to ``steps`` one-input operators (merging the heads, a transpose, a view)."""
    for _ in range(steps):
        node = cg.tensors[tid].producer
        if node in pv:
            return True
        d = cg.nodes.get(node)
        if d is None or d["kind"] == "input" or len(d["inputs"]) != 1 or d["cost"].weights:
            return False
        tid = d["inputs"][0]
    return False
