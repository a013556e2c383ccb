"""The token permutation kernels an MoE layer runs around its experts, timed as memory-bound copies.

No operator of a model file is the dispatch of tokens to their experts (``std/moe.cg`` writes the
experts as a repeat group of which ``top_k`` copies are active: the FLOPs and the bytes of the
experts themselves). But every MoE layer copies each token's hidden vector to its ``k`` experts
and back, with kernels that do no arithmetic: this module derives them from the graph's
routed-expert groups (:func:`costgraph.parallel.placement.expert_groups`) and the layout, and the
per-kernel model (:mod:`costgraph.training.kernel_time`) times them at the kernel table's
achieved HBM bandwidth (``hbm_bandwidth``), one row ``GROUP (moe permute)`` per group.

Convention ``te-fused`` (Megatron-LM's ``--moe-permute-fusion``, which Megatron-Bridge's MoE
providers and recipes set: ``moe_permute_fusion = True``), as
Megatron-LM@d98e8a64:megatron/core/transformer/moe/token_dispatcher.py ``MoEAlltoAllTokenDispatcher``
runs it (dropless, no capacity factor), with Transformer Engine's fused kernels
(TransformerEngine@d0067d0d:transformer_engine/common/triton/permutation.py). Per MoE layer and
micro-batch, ``T`` the tokens the device holds at the layer's input (``b·s``, ÷ CP, ÷ TP under
SP), ``H`` their width, ``k`` experts a token, ``a`` bytes per activation element, ``R = k·T`` the
rows a device sends and (perfect balance) receives, ``R' = etp·R`` after the expert-TP gather:

==========================================================  ==============================  ==============
kernel (Megatron function → TE kernel)                      forward bytes                   backward bytes
==========================================================  ==============================  ==============
permutation 1: ``dispatch_preprocess`` → ``moe_utils.permute``   ``(T + R)·H·a``: reads each  ``(R + T)·H·a``
(``fused_permute_with_probs`` → ``_permute_kernel``)        token once, writes its ``k``    (``_unpermute_kernel``
                                                            copies                          sums them back)
permutation 2: ``dispatch_postprocess`` →                   ``2·R'·H·a``                    ``2·R'·H·a``
``sort_chunks_by_idxs`` (``_sort_chunks_by_map_kernel``),
only with more than one local expert (``E/e > 1``)
unpermutation 2: ``combine_preprocess`` → the same          ``2·R'·H·a``                    ``2·R'·H·a``
unpermutation 1: ``combine_postprocess`` →                  ``(R + T)·H·a``                 ``(T + R)·H·a``
``moe_utils.unpermute`` (``fused_unpermute`` →                                              (``permute_with_mask_map``)
``_unpermute_kernel``, no merging probs: the dispatcher
passes none, the experts apply them)
==========================================================  ==============================  ==============

Forward ``2·(T + R)·H·a + 4·R'·H·a`` (the two sorts only when ``E/e > 1``), backward the same
(:func:`permute_bytes`). Not counted: the routing probabilities permuted beside the tokens (``4k``
bytes a token against ``2H(1 + k)``), the row-id map (``make_row_id_map``: ``T × E`` int32 over
three small kernels) and the all-to-all itself (communication, :mod:`costgraph.parallel.communication`).
A recompute of the experts' GEMMs (full recomputation, Megatron's ``moe`` module) runs the
dispatch's forward again: the row's re-run share is that of the group's first GEMM.
"""

from __future__ import annotations

import sympy

#: the convention of the dispatch copies, named in the step time's output
PERMUTE_CONVENTION = ("te-fused (Megatron-LM MoEAlltoAllTokenDispatcher with --moe-permute-fusion: "
                      "Transformer Engine's permute, chunk-sort and unpermute kernels)")
#: the operator kind of the rows (no operator of a model file)
KIND = "moe_permute"


def permute_bytes(tokens_h, k, etp, sorted_chunks: bool) -> sympy.Expr:
    """Bytes one direction (forward, or backward: the same) of one MoE layer's dispatch and
    combine copies move per micro-batch (module docstring), in activation elements × bytes:
    ``tokens_h`` = ``T·H·a`` (the device's input bytes at the layer), ``k`` experts a token,
    ``etp`` the expert-TP degree, ``sorted_chunks``: whether the dispatcher sorts by local
    expert (``E/e > 1``)."""
    rows = k * tokens_h
    out = 2 * (tokens_h + rows)
    if sorted_chunks:
        out += 4 * etp * rows
    return out


def _first_gemm(cg, group: str, gemm_kinds):
    return next((p for p, d in cg.ops() if p.startswith(group + "/") and d["kind"] in gemm_kinds), None)


def permute_rows(cg, pl, precision, bandwidth, gemm_kinds=("linear",), launch=0) -> list:
    """``(row, closing)`` per routed-expert group (module docstring), in
    :func:`costgraph.training.kernel_time.kernel_ops`'s form: class ``memory``, kind
    :data:`KIND`, path ``GROUP (moe permute)``, ``active`` the group's calls per model pass,
    ``forward``/``backward`` the seconds of one call on one device at ``bandwidth`` B/s;
    ``closing`` the group's first GEMM (whose re-run share the copies follow). ``pl``: the
    layout's :class:`~costgraph.parallel.placement.Placement`; ``precision``: bytes per role;
    ``gemm_kinds``: the operator kinds timed as GEMMs (:data:`costgraph.training.kernel_time.GEMM_KINDS`);
    ``launch``: the fixed seconds of one memory-bound kernel (the table's ``memory_launch_ns``), once
    per kernel: 4 each way, 2 without the sorts."""
    rows, bw = [], sympy.Integer(bandwidth)
    e, etp = pl.degree("e"), pl.degree("etp")
    for path, g in pl.experts.items():
        if not g.inputs:
            continue
        x = g.inputs[0]
        t = cg.tensors[x]
        tokens_h = t.numel * precision.bytes(t.role) / (pl.tensor_divisor(x) * pl.sequence_divisor(x))
        local = sympy.cancel(g.count / e)
        sort = permute_bytes(tokens_h, g.active, etp, True) / bw + 4 * launch
        flat = permute_bytes(tokens_h, g.active, etp, False) / bw + 2 * launch
        if local.is_number:
            secs = sort if local > 1 else flat
        else:   # symbolic e (the planner's forms): the sorts only where more than one expert is local
            secs = sympy.Piecewise((sort, local > 1), (flat, True))
        rows.append(({"path": f"{path} (moe permute)", "kind": KIND, "class": "memory", "active": g.calls,
                      "forward": secs, "backward": secs}, _first_gemm(cg, path, gemm_kinds) or path))
    return rows
