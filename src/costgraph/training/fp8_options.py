"""Options of the FP8 policies (:mod:`costgraph.training.fp8`): FP8 dot-product attention and
FP8 weight gradients, and what FP8 recipes refuse, as Transformer Engine and Megatron-LM run them.

Sources: Transformer Engine @ d0067d0d (TE), Megatron-LM @ d98e8a64 (Megatron).

``fp8_attention`` (``--fp8-dot-product-attention``; TE's recipe field ``fp8_dpa``, Megatron's
``TransformerConfig.fp8_dot_product_attention``, default False; at d98e8a64 Megatron gives it no
command-line argument: ``arguments.py`` lists it under "no CLI argument exists for these")
    TE's fused attention runs in FP8 (``backends.py::FusedAttnFunc``, the ``FP8`` backend; "FP8
    DPA currently is only supported in the FusedAttention backend", ``recipe/__init__.py``):

    * **compute**: the attention core's products (QKᵀ and probs·V, forward and backward —
      ``NVTE_FP8_DPA_BWD`` defaults to 1 — and the kernel's own recompute) at the FP8 peak;
    * **memory** (what the kernel saves for its backward, ``FusedAttnFunc.forward``): Q, K and V
      quantized by the QKV quantizer, row-wise only for per-tensor scaling
      (``utils.py::get_attention_quantizers``: ``set_usage(rowwise=True, columnwise=False)``), one
      FP8 byte an element and one fp32 ``scale_inv`` each; under MXFP8 Q and K also column-wise
      (``combine_and_quantize``: ``q_quantizer.columnwise_usage = True``, K row- and column-wise,
      V row-wise only) with one E8M0 byte per 32 values per copy (``mxfp8_tensor.py::get_scale_shape``
      padding; the head axis is the scaled one). The output O is saved in FP8 under
      delayed scaling (``fp8_tensors = (q_fp8, k_fp8, v_fp8, out_fp8)``) and in BF16 under current
      scaling (``NVTE_DPA_FP8CS_O_in_F16`` defaults to "1") and MXFP8 (``out_f16``): the recipe's
      ``fp8_dpa`` field in ``fp8.toml``. Where only the attention core keeps Q, K or V, its BF16
      copy goes; the softmax statistics (fp32 per row) are kept as by the BF16 kernel. Under a
      checkpointed core (selective ``core_attn``) or layer (full), the checkpoint keeps BF16
      inputs: what is saved is unchanged (the FP8 copies live during the recompute only).
    * refused: with eager attention (no fused kernel), with a recipe whose ``fp8_dpa`` is
      ``none`` (``Float8BlockScaling.__post_init__`` asserts ``not self.fp8_dpa and not
      self.fp8_mha``; Megatron's ``fp8_utils.py::get_fp8_recipe`` passes no ``fp8_dpa`` to it), with
      torchtitan's SAC policies (PyTorch SDPA, not TE's kernel), without an FP8 policy.

``fp8_wgrad`` (``--no-fp8-wgrad`` sets it False; Megatron ``TransformerConfig.fp8_wgrad = True``)
    False runs the FP8 linears' weight-gradient GEMMs in BF16: Megatron passes
    ``override_linear_precision=(False, False, not config.fp8_wgrad)`` to ``TEDelayedScaling``
    (``fp8_utils.py::get_fp8_recipe``), for the delayed recipe only (the other recipes are built
    without it: ``--no-fp8-wgrad`` would be ignored, so it is refused here; the recipe's
    ``wgrad_override`` field). TE ran it up to v1.13 (``module/linear.py``: the linear saves its
    high-precision input, ``saved_inputmat = inputmat_no_fp8``, instead of the FP8 transpose); TE
    2.0 removed the field (commit 544dd14b4), so a Megatron run at these commits needs TE ≤ 1.13.

    * **compute**: each FP8 linear's ``flops_backward_weight`` at the BF16 peak;
    * **memory**: no FP8 copies of the linears' inputs (:func:`costgraph.training.fp8.saved_inputs`
      returns none): the BF16 inputs stay.

**Delayed scaling and recompute modules**: Megatron's ``TransformerConfig.__post_init__``
(transformer_config.py, the ``if self.fp8:`` check under ``recompute_modules``) raises
``ValueError("Delayed scaling does not support moe_act and layernorm recompute for fp8.")``:
:func:`recompute_refusal` says so for a layout, :func:`check_fp8_options` raises it located.
"""

from __future__ import annotations

import sympy

from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from .data import DPA  # noqa: F401 (what a recipe's fp8_dpa may say, declared with fp8.toml's fields)

#: Megatron @ d98e8a64 transformer_config.py, TransformerConfig.__post_init__ (fp8 and recompute_modules)
MEGATRON_DELAYED_MESSAGE = "Delayed scaling does not support moe_act and layernorm recompute for fp8."
#: the recompute modules delayed scaling cannot re-run (their outputs are FP8 tensors with delayed scales)
DELAYED_REFUSES = ("moe_act", "layernorm")


def _recipe_of(policy):
    from .fp8 import policy_recipe

    return policy_recipe(policy)


def recompute_refusal(policy, recompute: str, modules) -> str | None:
    """Why FP8 ``policy`` cannot run Megatron's selective ``recompute`` of ``modules`` (None: it
    can). The planner's predicate: a layout for which this is not None is never offered.
    Delayed scaling (a recipe with an amax history) refuses ``moe_act`` and ``layernorm``."""
    rec = _recipe_of(policy)
    if rec is None or rec.amax_history == 0 or recompute != "selective":
        return None
    bad = [m for m in (modules or ()) if m in DELAYED_REFUSES]
    if not bad:
        return None
    return (f"precision '{policy}' (delayed scaling) cannot recompute module{'s' if len(bad) > 1 else ''} "
            f"{', '.join(bad)}: Megatron-LM refuses it (\"{MEGATRON_DELAYED_MESSAGE}\", "
            "TransformerConfig.__post_init__)")


def check_fp8_options(layout) -> None:
    """Check ``layout``'s FP8 options against its policy, recipe, attention and recompute (module
    docstring).

    Raises
    ------
    CostgraphValueError
        An FP8 option without an FP8 policy; an FP8 policy over a quantized base (``--quantize``);
        FP8 attention with eager attention, a recipe
        without FP8 attention, or torchtitan's SAC; ``fp8_wgrad`` False with a recipe that does not
        take it; delayed scaling with the ``moe_act`` or ``layernorm`` recompute modules."""
    rec = _recipe_of(layout.policy)
    attention, wgrad = getattr(layout, "fp8_attention", False), getattr(layout, "fp8_wgrad", True)
    if rec is None:
        if attention or not wgrad:
            flag = "--fp8-dot-product-attention" if attention else "--no-fp8-wgrad"
            raise CostgraphValueError(f"{flag} is an option of the FP8 policies; precision '{layout.policy}' "
                                      "runs no FP8 GEMMs",
                                      hint="--precision fp8-delayed, fp8-current, fp8-blockwise or fp8-mxfp8")
        return
    if getattr(layout, "quantization", None) is not None:
        # bitsandbytes' 4-/8-bit linears dequantize to the compute dtype (QLoRA, Dettmers et al. 2023 §3);
        # no FP8 GEMM, FP8 weight or transpose exists for them
        raise CostgraphValueError(f"--quantize {layout.quantization}: a quantized base runs its own kernels, not "
                                  f"the FP8 GEMMs of precision '{layout.policy}'",
                                  hint="--precision mixed (QLoRA computes in bf16), or drop --quantize")
    if attention:
        if fp8_dpa(rec) == "none":
            why = ("TE Float8BlockScaling asserts not fp8_dpa" if rec.scaling == "block" else   # the reason (fp8.toml)
                   "torchao's Float8Linear converts the linears only: attention stays in BF16"
                   if rec.weight_cache != "step" else "fp8.toml: fp8_dpa = none")
            raise CostgraphValueError(f"--fp8-dot-product-attention: the '{rec.name}' recipe has no FP8 attention "
                                      f"({why})",
                                      hint="--precision fp8-delayed, fp8-current or fp8-mxfp8")
        if layout.attention != "flash":
            raise CostgraphValueError("--fp8-dot-product-attention runs in Transformer Engine's fused attention "
                                      "kernel (FP8 DPA is only supported in the FusedAttention backend)",
                                      hint="--attention flash")
        if layout.recompute.startswith("torchtitan"):
            raise CostgraphValueError(f"--fp8-dot-product-attention is Transformer Engine's kernel; recompute "
                                      f"'{layout.recompute}' is torchtitan's (PyTorch SDPA)",
                                      hint="--recompute none, selective or full (Megatron-LM)")
    if not wgrad and not wgrad_override(rec):
        raise CostgraphValueError(f"--no-fp8-wgrad: Megatron-LM applies it to the delayed recipe only "
                                  f"(override_linear_precision of TEDelayedScaling); the '{rec.name}' recipe "
                                  "would run its weight gradients in FP8 regardless",
                                  hint="--precision fp8-delayed, or drop --no-fp8-wgrad")
    why = recompute_refusal(layout.policy, layout.recompute, getattr(layout, "recompute_modules", None))
    if why is not None:
        raise CostgraphValueError(why, hint="--precision fp8-current (per-tensor current scaling), fp8-blockwise or "
                                            "fp8-mxfp8; or drop moe_act/layernorm from --recompute-modules")


def fp8_dpa(rec) -> str:
    """The recipe's FP8 attention (one of :data:`DPA`; ``none`` where ``fp8.toml`` says nothing)."""
    return getattr(rec, "fp8_dpa", None) or "none"


def wgrad_override(rec) -> bool:
    """Whether the recipe runs ``--no-fp8-wgrad`` (its ``wgrad_override`` in ``fp8.toml``)."""
    return bool(getattr(rec, "wgrad_override", False))


def attention_products(cg) -> set[str]:
    """Paths of the attention cores' products: QKᵀ and probs·V of every region
    (:func:`costgraph.engine.recompute.attention_regions`)."""
    from ..engine.recompute import attention_regions

    return {p for core, closing in attention_regions(cg) for p in (core[0], closing)}


def precision_flops(cg, layout, rows, rerun: dict) -> tuple[sympy.Expr, sympy.Expr]:
    """``(model, hardware)`` FLOPs per micro-batch that run at the FP8 peak under ``layout``'s FP8
    policy: the FP8 linears' forward and backward (less their weight gradients with ``fp8_wgrad``
    False), the attention products' with ``fp8_attention``; hardware adds their share of
    ``rerun`` (op path → recompute FLOPs, :func:`costgraph.training.recompute_count.recompute_flops`)."""
    from .fp8 import fp8_linears

    fp8 = set(fp8_linears(cg))
    if getattr(layout, "fp8_attention", False):
        fp8 |= attention_products(cg)
    wgrad = not getattr(layout, "fp8_wgrad", True)
    model = sympy.Add(*[r["count"] * (r["flops_forward"] + r["flops_backward"]
                                      - (r["flops_backward_weight"] if wgrad else 0))
                        for r in rows if r["path"] in fp8])
    again = sympy.Add(*[f for p, f in rerun.items() if p in fp8])
    return sympy.expand(model), sympy.expand(model + again)


def _mx_scales(rows, cols, copies: int):
    """E8M0 scale bytes of an MXFP8 ``[rows, cols]`` tensor: row-wise ``[up128(rows), up4(cols // 32)]``
    and, with ``copies`` 2, column-wise ``[up4(rows // 32), up128(cols)]`` (TE mxfp8_tensor.py)."""
    from .fp8 import _up

    row = _up(rows, 128) * _up(sympy.floor(cols / 32), 4)
    col = _up(sympy.floor(rows / 32), 4) * _up(cols, 128)
    return row + (col if copies == 2 else 0)


def _copy_bytes(rec, numel, last, copies: int):
    """Bytes of the FP8 copy (``copies`` 1: row-wise; 2: row- and column-wise) of a tensor of
    ``numel`` elements whose last axis is ``last``."""
    data = rec.data_bytes * numel * copies
    if rec.scaling == "mx":
        return data + rec.scale_bytes * _mx_scales(numel / last, last, copies)
    return data + rec.scale_bytes   # one scale_inv per tensor (per-tensor scaling)


def dpa_saved(cg, layout, placement, stage, precision, savers: dict) -> tuple[sympy.Expr, sympy.Expr]:
    """``(FP8 bytes, change of activations)`` per device on ``stage`` of what FP8 attention saves
    (module docstring), per micro-batch in flight. ``savers``: storage id → the op paths that keep
    it (as :func:`costgraph.training.fp8.saved_inputs` builds it); ``precision``: the activations'."""
    zero = sympy.Integer(0)
    rec = _recipe_of(layout.policy)
    if rec is None or not getattr(layout, "fp8_attention", False):
        return zero, zero
    from ..engine.recompute import DEFAULT_MODULES, attention_regions, recompute_plan

    mods = getattr(layout, "recompute_modules", None) or DEFAULT_MODULES
    if layout.recompute in ("selective", "selective-korthikanti") and "core_attn" in mods:
        return zero, zero   # the checkpointed core keeps its BF16 inputs
    rest = sympy.Integer(1) - recompute_plan(cg, layout, layout.attention).layer_share
    if rest == 0:
        return zero, zero
    regions = attention_regions(cg)
    core_ops = {p for core, closing in regions for p in (*core, closing)}
    mx = rec.scaling == "mx"
    fp8, delta, seen = zero, zero, set()

    def scale(tid):
        ten = cg.tensors[cg.tensors[tid].storage]
        group = next((g for g in cg.groups if "/" not in g and ten.producer.startswith(g + "/")), None)
        if group is None:
            return None
        share = as_expr(stage.layers.get(group, 0)) / cg.groups[group].count
        div = placement.tensor_divisor(ten.id) * placement.sequence_divisor(ten.id)
        return ten.active * share * stage.in_flight * rest / div

    for core, closing in regions:
        first = core[0]
        q, k = cg.nodes[first]["inputs"][:2]
        v = next(t for t in cg.nodes[closing]["inputs"] if cg.tensors[t].producer not in core)
        d_qk = cg.tensors[q].shape[-1]   # K may be a transposed view: its head axis is Q's
        tensors = [(q, 2 if mx else 1, d_qk), (k, 2 if mx else 1, d_qk), (v, 1, cg.tensors[v].shape[-1])]
        if fp8_dpa(rec) == "fp8-output":
            out = cg.nodes[closing]["outputs"][0]
            tensors.append((out, 1, cg.tensors[out].shape[-1]))
        for tid, copies, last in tensors:
            s = scale(tid)
            if s is None:
                continue
            ten = cg.tensors[tid]
            fp8 += s * _copy_bytes(rec, ten.numel, last, copies)
            sid = ten.storage
            if tid in cg.nodes[closing]["outputs"] or sid in seen:
                continue
            seen.add(sid)
            if savers.get(sid, set()) <= core_ops:   # only the attention core kept it: its BF16 copy goes
                st = cg.tensors[sid]
                delta -= s * precision.bytes(st.role) * st.numel
    fp8 = sympy.expand(fp8)
    return fp8, sympy.expand(fp8 + delta)
