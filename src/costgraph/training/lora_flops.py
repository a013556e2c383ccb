"""Training FLOPs of LoRA and QLoRA: a frozen base and its adapters.

Conventions (named in ``costgraph train``'s output as ``lora.model_flops``)
---------------------------------------------------------------------------
* **Trainable-aware model FLOPs.** The frozen base computes no weight
  gradient: its backward is the input gradients only (a linear: ``2·in·out``
  per token instead of ``4·in·out``; the base's matmuls ≈ ``4N`` per token
  instead of ``6N``). Every base operator keeps its forward and its input
  gradient (attention's products of two activations are unchanged).
  Not modelled: before the first adapter no tensor needs a gradient
  (PyTorch skips the input gradients there; counted here, an upper bound
  by part of layer 0), as :mod:`costgraph.training.lora` for the memory.
* **Adapters** (PEFT ``lora.Linear``): on a linear of ``in → out`` with
  rank ``r``, ``lora_A`` and ``lora_B`` add ``2·r·(in + out)`` forward FLOPs
  per token; their backward is the input gradients and the weight gradients
  (``2 ×`` the forward). Under the ``all`` convention also the ``· α/r``
  (``out``), the ``+`` (``out``) and the dropout (``in``, with
  ``lora_dropout``) forward, and ``out`` (+ ``in``) backward.
* **QLoRA dequantization** (bitsandbytes ``Linear4bit``/``MatMul4Bit``):
  each quantized weight is dequantized to 16 bits once in the forward and
  once in the backward (and once more where recomputation re-runs the
  forward): 1 FLOP per weight element each time (the multiply by the block's
  absmax; the 4-bit code lookup is not a FLOP). Counted under the ``all``
  convention, in the hardware FLOPs (work the model's math does not need);
  the ``matmul`` convention leaves it out.
"""

from __future__ import annotations

import sympy

from ..engine.graph import numel
from ..engine.precision import precision as get_precision
from ..engine.totals import MODEL_SCOPE, breakdown, expand_sum
from .result_parts import LoraCompute

MODEL_FLOPS = "trainable-aware: frozen base forward + input gradients; adapters forward + input and weight gradients"
DEQUANT = "bitsandbytes: 1 FLOP per quantized weight element per dequantization, forward and backward ('all' only)"


def lora_of(cg, layout):
    """The :class:`~costgraph.training.lora.LoRA` of a layout with ``lora_rank`` (None without)."""
    if layout.lora_rank is None:
        return None
    from .lora import lora

    return lora(cg, rank=layout.lora_rank, targets=layout.lora_targets, dropout=layout.lora_dropout)


def adapter_flops(lo, convention: str) -> dict[str, dict[str, sympy.Expr]]:
    """Per target path: the adapters' ``forward`` and ``backward`` FLOPs per
    micro-batch (all instances a token passes through), module docstring.
    Exact: the tokens × instances are read off the base linear's own forward
    product ``2·in·out`` per token."""
    rows = {r["path"]: r for r in breakdown(lo.base, MODEL_SCOPE, "matmul", get_precision("bf16"), leaves_only=True)}
    r = lo.rank
    out = {}
    for a in lo.adapters:
        base = rows[a.base]
        tokens = sympy.cancel(base["count"] * base["flops_forward"] / (2 * a.inputs * a.outputs))
        fwd = 2 * r * (a.inputs + a.outputs) * tokens
        bwd = 2 * fwd
        if convention == "all":
            drop = a.inputs if lo.dropout else 0
            fwd += (2 * a.outputs + drop) * tokens
            bwd += (a.outputs + drop) * tokens
        out[a.base] = {"forward": sympy.expand(fwd), "backward": sympy.expand(bwd)}
    return out


def dequant_flops(lo, quantization, convention: str, rerun: dict) -> sympy.Expr:
    """QLoRA's dequantization FLOPs per micro-batch (module docstring): 0
    without ``quantization`` or under the ``matmul`` convention; ``rerun``:
    op path → share re-run by recomputation (one more dequantization)."""
    if quantization is None or convention != "all":
        return sympy.Integer(0)
    from .lora import quantized_weights

    q = quantized_weights(lo.base)
    parts = []
    for p, d in lo.base.ops():
        for wid in d["cost"].weights:
            if wid in q:
                w = lo.base.weights[wid]
                parts.append(w.count * numel(w.shape) * (2 + rerun.get(p, 0)))
    return expand_sum(parts)


def lora_compute(cg, layout, rows, convention: str, rerun: dict) -> dict:
    """The LoRA parts of :func:`~costgraph.training.compute.training_flops`
    (per micro-batch): ``model`` (trainable-aware), ``recompute`` (the
    adapters' forward where their base re-runs), ``dequant`` (QLoRA),
    and ``info`` (a :class:`~costgraph.training.result_parts.LoraCompute`: rank, targets, trainable
    parameters, conventions)."""
    lo = lora_of(cg, layout)
    ad = adapter_flops(lo, convention)
    base = expand_sum([r["count"] * (r["flops_forward"] + r["flops_backward_input"]) for r in rows])
    adapters = expand_sum([v["forward"] + v["backward"] for v in ad.values()])
    recompute = expand_sum([rerun[p] * v["forward"] for p, v in ad.items() if p in rerun])
    quantized = layout.quantization is not None
    info = LoraCompute(lo.rank, list(lo.targets), lo.params, expand_sum([x.count for x in lo.adapters]), MODEL_FLOPS,
                       layout.quantization, DEQUANT if quantized else None)
    return {"model": sympy.expand(base + adapters), "adapters": adapters, "recompute": recompute,
            "dequant": dequant_flops(lo, layout.quantization, convention, rerun), "info": info}
