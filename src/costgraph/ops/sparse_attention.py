"""DeepSeek Sparse Attention's lightning indexer (DeepSeek-AI 2025, "DeepSeek-V3.2: Pushing the
Frontier of Open Large Language Models", §2.1; transformers 5.24
``models/deepseek_v32/modeling_deepseek_v32.py::DeepseekV32Indexer``): a few small query heads score
every (query, key) pair against one shared key head, and each query keeps its ``top_k`` best keys
for the main attention. The scoring runs over all keys; the attention it feeds runs over the
``Min(S, top_k)`` kept ones (``matmul(..., window = top_k)`` in the model file counts those).
"""

from __future__ import annotations

import sympy

from ..engine.graph import Flops
from .elementwise import PER_ELEMENT
from .registry import op


@op("lightning_index", "DeepSeek-V3.2's lightning indexer: q [B, hi, S, d], one key head k [B, 1, T, d], "
    "head weights w [B, S, hi] → the top-k key ids [B, S, Min(T, top_k)] (index)",
    q="tensor", k="tensor", w="tensor", top_k="dim", causal=("bool", False), layout="whole")
def lightning_index(c):
    """``I[b, s, t] = Σ_h w[b, s, h] · ReLU(q[b, h, s]·k[b, t] / √d)``, then ``topk(I, top_k)``
    per query (transformers 5.24 ``DeepseekV32Indexer.forward``; the reference kernel's Hadamard
    rotation and FP8 scoring change no product count). FLOPs under ``matmul``: the scores
    ``2·B·hi·S·T·d`` and their weighted sum over heads ``2·B·S·hi·T`` (both fp32 products in
    transformers, what ``FlopCounterMode`` counts); ``T`` is every key, not ``top_k``. Under
    ``all`` also the ReLU and the scaling of each score and the top-k comparisons (``B·S·T``).
    ``causal = true`` records ``queries = S`` and ``keys = T`` so ``--causal half``/``exact``
    count the pairs a causal mask keeps, as for attention's own products.

    Backward: twice the forward products (the indexer is trained, DeepSeek-V3.2 §2.1.1, by a
    KL loss on its scores); transformers runs it under ``torch.no_grad``, which a model file
    says with the call keyword ``no_grad = true`` (models/deepseek_v32.cg: no backward, nothing
    kept). Keeps q, k and w. Errors: shapes that do not line up."""
    q, k, w, top_k = c["q"], c["k"], c["w"], c["top_k"]
    if len(q.shape) != 4 or len(k.shape) != 4 or len(w.shape) != 3:
        c.fail(f"lightning_index needs q [B, hi, S, d], k [B, 1, T, d] and w [B, S, hi], got "
               f"{q.shape_str()}, {k.shape_str()} and {w.shape_str()}")
    batch, heads, seq, dim = q.shape
    if not (c.same(k.shape[1], 1) and c.same(k.shape[-1], dim) and c.same(k.shape[0], batch)):
        c.fail(f"lightning_index: k {k.shape_str()} must be one key head [B, 1, T, d] = [{batch}, 1, T, {dim}]")
    if not (c.same(w.shape[0], batch) and c.same(w.shape[1], seq) and c.same(w.shape[2], heads)):
        c.fail(f"lightning_index: w {w.shape_str()} must be [B, S, hi] = [{batch}, {seq}, {heads}]")
    keys = k.shape[2]
    if c["causal"]:
        c.attr("queries", seq)
        c.attr("keys", keys)
    ids = c.output((batch, seq, sympy.Min(keys, top_k)), role="index")
    pairs = batch * seq * keys
    mm = 2 * pairs * heads * dim + 2 * pairs * heads
    other = pairs * heads * (PER_ELEMENT["relu"] + 1) + batch * seq * heads + PER_ELEMENT["topk"] * pairs
    c.forward(Flops(matmul=mm, other=other))
    c.backward_input(Flops(matmul=2 * mm, other=pairs * heads * (PER_ELEMENT["relu"] + 1)))
    c.save(q, k, w)
    return ids
