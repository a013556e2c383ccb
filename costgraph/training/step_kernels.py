"""The kernels a training step runs outside the operator graph, timed as memory-bound kernels.

The per-kernel time model (:mod:`costgraph.training.kernel_time`) times each operator of the
graph; two kernels of every training step are no operator of a model file, and both move
many bytes at little arithmetic intensity, so they run at the kernel table's achieved HBM
bandwidth (``hbm_bandwidth`` of :mod:`costgraph.training.kernel_table`):

**The loss** (:func:`loss_seconds`, convention ``megatron-unfused``): the cross-entropy over
the logits in fp32, as Megatron-LM@d98e8a64:megatron/core/tensor_parallel/cross_entropy.py
(``_VocabParallelCrossEntropy``, the unfused path, ``cross_entropy_loss_fusion`` off) runs it,
per element of the logits one device holds (``[b, s, V]`` split by TP over the vocabulary and
by CP over the sequence, as :func:`costgraph.training.memory` keeps them), per micro-batch:

=====================================================  ==========================  =====
kernel (forward)                                       reads + writes (bytes)
=====================================================  ==========================  =====
``vocab_parallel_logits.float()``                      2 (bf16) + 4 (fp32)             6
``torch.max(..., dim=-1)``                             4                               4
``vocab_parallel_logits -= logits_max``                4 + 4                           8
``torch.exp(..., out=exp_logits)``                     4 + 4                           8
``exp_logits.sum(dim=-1)``                             4                               4
``exp_logits.div_(sum_exp_logits)`` (the softmax)      4 + 4                           8
=====================================================  ==========================  =====

38 bytes forward; backward ``grad_input.mul_(grad_output)`` (4 + 4) and the ``.float()``'s
gradient back to bf16 (4 + 2): 14 bytes (the one-element-per-row update at the target is
left out: ``s`` elements, not ``s·V``). :data:`LOSS_BYTES`.

**The optimizer step** (:func:`optimizer_bytes`, convention ``megatron``): once per step, as
Megatron-LM@d98e8a64:megatron/core/optimizer/optimizer.py::MixedPrecisionOptimizer.step runs
it on the parameters whose update the device owns (the distributed optimizer's shard under
ZeRO ≥ 1, all of the device's otherwise):

* ``get_grad_norm_fp32`` (``multi_tensor_l2norm``) reads the main gradients once,
  ``clip_grad_by_total_norm_fp32`` (``multi_tensor_scale``, ``clip_grad`` 1.0 by default)
  reads and writes them, and the fused optimizer (apex/TE ``FusedAdam``) reads them:
  ``4·G_s``;
* the fused optimizer reads and writes the master weights and the states: ``2·O``;
* ``_copy_main_params_to_model_params`` writes the model weights: ``W_s``;
* ``zero_grad`` (the DDP grad buffer's ``zero_()`` for the next step) writes the device's
  whole gradient buffer: ``G``.

``O``, ``G``: the device's optimizer-state and gradient bytes
(:func:`costgraph.training.memory.training_memory` at the layout); ``G_s``, ``W_s``: the
gradients and weights of the updated parameters, the device's bytes without ZeRO × ``O/O₀``
(``O₀`` the optimizer bytes without ZeRO: the share of the parameters it updates; exact when
every weight keeps the same bytes per parameter, as under one precision policy). Not counted:
the read of the master weights by the copy to the model weights (no figure for the master
alone here), the grad-norm's all-reduce (a few bytes) and, with an offloaded optimizer, the
step itself (it runs on the host: :mod:`costgraph.training.offload`).
"""

from __future__ import annotations

import sympy

#: bytes read and written per logit element by the fp32 cross-entropy: (forward, backward)
#: (module docstring; Megatron-LM@d98e8a64 tensor_parallel/cross_entropy.py, unfused)
LOSS_BYTES = (38, 14)
#: the conventions these terms follow, named in the step time's output
LOSS_CONVENTION = "megatron-unfused fp32 cross-entropy (Megatron-LM tensor_parallel/cross_entropy.py)"
OPTIMIZER_CONVENTION = "megatron (MixedPrecisionOptimizer.step: grad norm, clip, fused Adam, copy, zero_grad)"


def loss_elements(cg, pl) -> sympy.Expr:
    """Elements of the logits one device holds per micro-batch: each model output's elements
    split by TP (the vocabulary) and CP (the sequence), as the memory's fp32 logits."""
    return sympy.Add(*[cg.tensors[o].numel / (pl.tensor_divisor(o) * pl.sequence_divisor(o)) for o in cg.outputs])


def loss_seconds(cg, pl, bandwidth) -> tuple[sympy.Expr, sympy.Expr]:
    """``(forward, backward)`` seconds of the fp32 cross-entropy of one micro-batch on the
    device that holds the head, at ``bandwidth`` B/s (:data:`LOSS_BYTES`)."""
    n, bw = loss_elements(cg, pl), sympy.Integer(bandwidth)
    return LOSS_BYTES[0] * n / bw, LOSS_BYTES[1] * n / bw


def optimizer_bytes(memory: dict, memory_unsharded: dict) -> sympy.Expr:
    """Bytes the optimizer step reads and writes on one device (module docstring):
    ``2·O + 4·G_s + W_s + G``. ``memory``: the device's ``weights``, ``gradients``,
    ``optimizer`` bytes at the layout; ``memory_unsharded``: the same without ZeRO."""
    o, g = memory["optimizer"], memory["gradients"]
    o0 = memory_unsharded["optimizer"]
    share = o / o0 if o0 != 0 else sympy.Integer(1)
    return 2 * o + 4 * memory_unsharded["gradients"] * share + memory_unsharded["weights"] * share + g


def optimizer_seconds(cg, layout, bandwidth, stage: str = "first") -> sympy.Expr:
    """Seconds of the optimizer step on one device of ``stage`` (``first`` or ``last``) at
    ``bandwidth`` B/s; zero when the optimizer is offloaded to the host."""
    from dataclasses import replace

    from .memory import training_memory

    L = layout.filled()
    if getattr(L, "offload_optimizer", "none") != "none":
        return sympy.Integer(0)
    k = 0 if stage == "first" else -1
    mem = training_memory(cg, L, expand=False).stages[k].memory
    bare = replace(L, zero=0, hsdp=None, offload_params="none")   # the same device without ZeRO
    mem0 = training_memory(cg, bare, expand=False).stages[k].memory
    return optimizer_bytes(mem, mem0) / sympy.Integer(bandwidth)
