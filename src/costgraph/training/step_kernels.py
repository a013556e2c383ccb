"""The kernels a training step runs outside the operator graph, timed as memory-bound kernels.

The per-kernel time model (:mod:`costgraph.training.kernel_time`) times each operator of the
graph; three kinds of kernels of every training step are no operator of a model file, and all move
many bytes at little arithmetic intensity, so they run at the kernel table's achieved HBM
bandwidth (``hbm_bandwidth`` of :mod:`costgraph.training.kernel_table`):

**The loss** (:func:`loss_seconds`): the cross-entropy over the logits, as the layout's
``cross_entropy`` implementation runs it (:mod:`costgraph.training.cross_entropy`: the bytes its
kernels read and write per logit element, forward and backward, each with its source in
``training/cross_entropy.toml``), per element of the logits one device holds (``[b, s, V]`` split
by TP over the vocabulary and by CP over the sequence, as :func:`costgraph.training.memory` keeps
them), per micro-batch. Megatron-LM@d98e8a64:megatron/core/tensor_parallel/cross_entropy.py
(``_VocabParallelCrossEntropy``, the unfused path, Megatron-LM's default; ``megatron`` and the
default ``logits``):

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
left out: ``s`` elements, not ``s·V``).

Fused (``megatron-fused``: Megatron-LM's ``--cross-entropy-loss-fusion``,
Megatron-LM@d98e8a64:megatron/core/fusions/fused_cross_entropy.py, the ``native`` implementation,
the only one Megatron-LM accepts): the same steps in four ``@jit_fuser`` functions
(``megatron/core/jit.py``: ``torch.compile`` from PyTorch 2.2), each one kernel that reads its
inputs and writes its outputs once, a row reduction in the pass that reads the row:
``calculate_logits_max`` (the bf16 read, the fp32 copy written, the max: 2 + 4),
``calculate_predicted_logits`` (``exp(x - max)`` written in place, the row sum: 4 + 4),
``calculate_cross_entropy_loss`` (the softmax ``div_`` in place: 4 + 4): 22 bytes forward;
``calculate_gradients`` reads the saved softmax, writes back its in-place ``mul_`` (a mutated
input ``torch.compile`` keeps) and the bf16 gradient it returns (4 + 4 + 2): 10 bytes backward.

Transformer Engine (``te``: ``--cross-entropy-fusion-impl te``, Megatron-Bridge's performance recipes;
TransformerEngine@v2.17:transformer_engine/common/triton/cross_entropy.py on the bf16 logits):
``online_softmax_kernel`` reads the row once (2), ``cross_entropy_kernel`` reads it again and stores
the gradient over it (2 + 2): 6 bytes forward; ``element_mul_kernel`` scales it in place by the
per-token loss gradient (2 + 2): 4 bytes backward. From TE 2.18 (``te-fp32grad``) the gradient goes
to a new fp32 buffer (2 + 2 + 4 forward) and autograd casts it back (4 + 4, 4 + 2 backward).

PyTorch (``pytorch``: ``F.cross_entropy`` on fp32-upcast logits, torchtitan): ``.float()`` (2 + 4),
``log_softmax``'s ``cunn_SoftMaxForward`` (reads the row for the max, again for the sum of
exponentials, and once more to write the output: 4 + 4 + 4 + 4): 22 bytes forward; ``nll_loss``'s
backward zero-fills its dense gradient (4), ``cunn_SoftMaxBackward`` reads the gradient for its sum
and again with the output to write the input gradient (4 + 4 + 4 + 4), the ``.float()``'s gradient
(4 + 2): 26 bytes backward (pytorch/pytorch SoftMax.cu, Loss.cu; the file names the commits).
Without the upcast (``pytorch-bf16``: AutoModel's ``fp32_upcast: false``) the same kernels run on the
bf16 row (``host_softmax`` with ``half_to_float`` false: input and output in bf16): 2 + 2 + 2 + 2 = 8
bytes forward; the zero-fill 2, ``cunn_SoftMaxBackward`` 2 + 2 + 2 + 2, no cast: 10 bytes backward.

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

``O``, ``G``: the device's optimizer-state and gradient bytes (:func:`device_states`: the
model states as :func:`costgraph.training.memory.training_memory` counts them, the layers
spread evenly over the stages); ``G_s``, ``W_s``: the
gradients and weights of the updated parameters, the device's bytes without ZeRO × ``O/O₀``
(``O₀`` the optimizer bytes without ZeRO: the share of the parameters it updates; exact when
every weight keeps the same bytes per parameter, as under one precision policy). Not counted:
the read of the master weights by the copy to the model weights (no figure for the master
alone here), the grad-norm's all-reduce (a few bytes) and, with an offloaded optimizer, the
step itself (it runs on the host: :mod:`costgraph.training.offload`).

**FP8 quantization** (:func:`quantize_rows`, under an FP8 policy): Transformer Engine quantizes
each FP8 linear's input in the forward and its output gradient in the backward with
memory-bound kernels of their own (TransformerEngine@d0067d0d:transformer_engine/pytorch/csrc/
quantizer.cpp): per element of the 16-bit tensor (:func:`quantize_bytes`), a read for the cast
(``nvte_quantize_v2``) and, under current scaling (tensor scaling without an amax history),
one more for the amax (``Float8CurrentScalingQuantizer::quantize_impl`` runs
``nvte_compute_amax_with_config`` first); the FP8 data written row-wise and column-wise (one
copy for tensor scaling with ``fp8_transpose = "shared"``, Blackwell). The block scales (one per
32 or 128 values) are not counted. An input that a norm produces is quantized inside the norm
kernel (``module/layernorm_linear.py``: ``with_quantized_norm``, Megatron's
``TELayerNormColumnParallelLinear``): no kernel of its own. An input read by several FP8
linears (q, k and v) is quantized once.
"""

from __future__ import annotations

import sympy

from ..choices import CROSS_ENTROPY

#: the conventions these terms follow, named in the step time's output (the loss's: its implementation's
#: ``kernel``, costgraph.training.cross_entropy)
OPTIMIZER_CONVENTION = "megatron (MixedPrecisionOptimizer.step: grad norm, clip, fused Adam, copy, zero_grad)"
QUANTIZE_CONVENTION = "Transformer Engine's FP8 quantize kernels of each FP8 linear's input and output gradient"


def loss_elements(cg, pl) -> sympy.Expr:
    """Elements of the logits one device holds per micro-batch: each model output's elements
    split by TP (the vocabulary) and CP (the sequence), as the memory's fp32 logits."""
    return sympy.Add(*[cg.tensors[o].numel / (pl.tensor_divisor(o) * pl.sequence_divisor(o)) for o in cg.outputs])


def loss_seconds(cg, pl, bandwidth, convention: str = CROSS_ENTROPY.default, launch=0) -> tuple[sympy.Expr, sympy.Expr]:
    """``(forward, backward)`` seconds of the cross-entropy of one micro-batch on the device that
    holds the head, at ``bandwidth`` B/s; ``convention`` the layout's ``cross_entropy``
    (:data:`costgraph.choices.CROSS_ENTROPY`): its ``forward_bytes`` and ``backward_bytes`` per logit
    element (:mod:`costgraph.training.cross_entropy`); ``launch``: the fixed seconds of one
    memory-bound kernel (the kernel table's ``memory_launch_ns``), times the implementation's
    ``forward_kernels`` and ``backward_kernels``."""
    from .cross_entropy import implementation

    impl = implementation(convention)
    n, bw = loss_elements(cg, pl), sympy.Integer(bandwidth)
    return (impl.forward_bytes * n / bw + impl.forward_kernels * launch,
            impl.backward_bytes * n / bw + impl.backward_kernels * launch)


def optimizer_bytes(memory: dict, memory_unsharded: dict) -> sympy.Expr:
    """Bytes the optimizer step reads and writes on one device (module docstring):
    ``2·O + 4·G_s + W_s + G``. ``memory``: the device's ``weights``, ``gradients``,
    ``optimizer`` bytes at the layout; ``memory_unsharded``: the same without ZeRO."""
    o, g = memory["optimizer"], memory["gradients"]
    o0 = memory_unsharded["optimizer"]
    share = o / o0 if o0 != 0 else sympy.Integer(1)
    return 2 * o + 4 * memory_unsharded["gradients"] * share + memory_unsharded["weights"] * share + g


def device_states(cg, layout, pl, zero) -> dict:
    """``weights``, ``gradients``, ``optimizer`` bytes of one device at ZeRO stage ``zero``: the
    model's states as the placement ``pl`` shards them (routed experts over their expert-DP
    group, as :func:`costgraph.training.memory.training_memory` does), the layers spread evenly
    over the ``p`` stages as the per-kernel model spreads their kernels
    (:func:`costgraph.training.kernel_time.kernel_seconds`)."""
    from ..engine.symbols import as_expr
    from .fp8 import fp8_param_bytes
    from .states import model_states

    L, wb = layout, fp8_param_bytes(cg, layout.policy)
    out = dict.fromkeys(("weights", "gradients", "optimizer"), sympy.Integer(0))
    for is_expert, group in ((False, "dp"), (True, "expert_dp")):
        sel = (lambda w, x=is_expert: (w in pl.expert_weights) == x)
        if not any(sel(w) for w in cg.weights):
            continue
        st = model_states(cg, policy=L.policy, optimizer=L.optimizer, zero=zero, dp=pl.groups[group].size,
                          hsdp_group=L.hsdp if zero else None, shard=dict(pl.shards), select=sel, weight_bytes=wb)
        for k in out:
            out[k] += st[k] / as_expr(L.p)
    return out


def optimizer_seconds(cg, layout, bandwidth) -> sympy.Expr:
    """Seconds of the optimizer step on one device at ``bandwidth`` B/s (:func:`optimizer_bytes` of
    :func:`device_states` at the layout's ZeRO stage and without ZeRO); zero when the optimizer
    is offloaded to the host."""
    from ..parallel.placement import placement

    L = layout.filled()
    if getattr(L, "offload_optimizer", "none") != "none":
        return sympy.Integer(0)
    pl = placement(cg, L)
    return optimizer_bytes(device_states(cg, L, pl, L.zero), device_states(cg, L, pl, 0)) / sympy.Integer(bandwidth)


#: operators whose output TE's norm kernels write quantized (``with_quantized_norm``)
NORM_KINDS = ("layernorm", "rmsnorm")


def quantize_bytes(rec, act_bytes, transpose: str = "separate") -> sympy.Expr:
    """Bytes per element one FP8 quantize kernel reads and writes (module docstring): ``rec`` a
    :class:`~costgraph.training.data.Recipe`, ``act_bytes`` the 16-bit tensor's bytes per element,
    ``transpose`` the layout's ``fp8_transpose``."""
    current = rec.scaling == "tensor" and rec.amax_history == 0
    copies = 1 if rec.scaling == "tensor" and transpose == "shared" else 2
    return sympy.Integer(act_bytes) * (2 if current else 1) + rec.data_bytes * copies


def quantize_rows(cg, linears: set, split, act_bytes, rec, transpose, bandwidth, launch=0) -> list:
    """``(row, closing)`` per FP8 linear with a quantize kernel (module docstring): ``row`` in
    :func:`costgraph.training.kernel_time.kernel_ops`'s form, class ``memory``, path ``PATH
    (fp8 quantize)``, forward = its input's quantize (none if a norm writes it or another
    linear's already did), backward = its output gradient's; ``closing`` the linear (a recompute
    of the linear re-runs its quantize). ``split(tid)``: the devices sharing tensor ``tid``; ``launch``:
    the fixed seconds of one memory-bound kernel, once per quantize (twice under current scaling: the
    amax kernel, then the cast)."""
    per = quantize_bytes(rec, act_bytes, transpose) / sympy.Integer(bandwidth)
    fixed = launch * (2 if rec.scaling == "tensor" and rec.amax_history == 0 else 1)
    producer = {o: d["kind"] for _, d in cg.ops() for o in d["outputs"]}
    done, rows = set(), []
    for path, d in cg.ops():
        if path not in linears:
            continue
        x, y = d["inputs"][0], d["outputs"][0]
        base = cg.tensors[x].storage
        fwd = sympy.Integer(0)
        if producer.get(base) not in NORM_KINDS and base not in done:
            done.add(base)
            fwd = cg.tensors[x].numel / split(x) * per + fixed
        back = cg.tensors[y].numel / split(y) * per + fixed if d["cost"].backward_input.matmul != 0 \
            else sympy.Integer(0)
        if fwd != 0 or back != 0:
            rows.append(({"path": f"{path} (fp8 quantize)", "kind": "fp8_quantize", "class": "memory",
                          "active": d["active"], "forward": fwd, "backward": back}, path))
    return rows
