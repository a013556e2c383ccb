"""Recognise multi-head latent attention of other forms than std ``mla``: a full-rank query projection with rotary
(DeepSeek-V2-Lite, Sarvam-M's MLA), and DeepSeek Sparse Attention (MLA with a lightning indexer: DeepSeek-V3.2,
GLM-5's ``GlmMoeDsa``), as a block the draft defines (:data:`MLA_BLOCKS`) or std ``dsa.cg``'s ``mla_dsa``.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call as model-language text,
or None; the blocks follow transformers 5.24's modeling code of each attention.
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import _linear, is_norm, mla_call
from .facts import Module

#: MLA's projections with a query rank (DeepseekV3Attention's)
RANKED = ("q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj")
#: MLA's projections with a full-rank query (DeepSeek-V2-Lite's q_proj)
FULL_Q = ("q_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "o_proj")


def mla_full_q_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """MLA with a full-rank query projection and rotary (transformers 5.24 ``DeepseekV3Attention`` and
    ``DeepseekV2Attention`` with ``q_lora_rank`` None: ``q_proj`` H → a·(d_n + d_r), the latent
    ``kv_a_proj_with_mqa`` H → r_kv + d_r, ``kv_a_layernorm``, ``kv_b_proj`` r_kv → a·(d_n + d_v), ``o_proj``; no
    bias): the draft's ``mla_full_q`` (models/deepseek_v2.cg's), or None."""
    q, kva, kvb, o = (_linear(m.child(n)) for n in ("q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"))
    kvn = m.child("kv_a_layernorm")
    heads = m.attrs.get("num_heads") or m.attrs.get("num_attention_heads")
    if not rotary or None in (q, kva, kvb, o, kvn) or not isinstance(heads, int) or m.params or not is_norm(kvn) \
            or any(x[2] for x in (q, kva, kvb, o)) or {c.name for c in m.children if c.param_count()} != set(FULL_Q):
        return None
    kv_rank = kvn.params.get("weight", (0,))[0]
    rope, v_dim = kva[1] - kv_rank, o[0] // heads
    nope = kvb[1] // heads - v_dim
    if q[1] != heads * (nope + rope) or kvb[0] != kv_rank or kvb[1] != heads * (nope + v_dim) \
            or o[0] != heads * v_dim or min(rope, nope, v_dim) < 1:
        return None
    d.blocks.add("mla_full_q")
    sizes = [d.size(heads, "attention heads"), d.size(kv_rank, "latent rank"), d.size(nope, "head size without "
             "rotary"), d.size(rope, "rotary head size"), d.size(v_dim, "value head size")]
    return f"mla_full_q({arg}, {', '.join(sizes)}, name = {m.name})"


def dsa_call(m: Module, arg: str, d) -> str | None:
    """DeepSeek Sparse Attention (transformers 5.24 modeling_deepseek_v32.py ``DeepseekV32Attention``, and
    modeling_glm_moe_dsa.py's copy): std MLA with a query rank plus a lightning ``indexer`` (``wq_b`` r_q → hi·di,
    ``wk`` H → di, ``k_norm`` a LayerNorm [di] with bias, ``weights_proj`` H → hi; under ``torch.no_grad``) choosing
    each query's ``index_topk`` keys. transformers' eager path computes the full square with the unselected keys
    masked (what FlopCounterMode counts): std ``mla_dsa`` with no window. None when ``m`` is not that."""
    idx = m.child("indexer")
    if idx is None or {c.name for c in m.children if c.param_count()} != {*RANKED, "indexer"}:
        return None
    wq, wk, wp = (_linear(idx.child(n)) for n in ("wq_b", "wk", "weights_proj"))
    kn = idx.child("k_norm")
    top_k = idx.attrs.get("index_topk")
    if None in (wq, wk, wp) or kn is None or idx.params or any(x[2] for x in (wq, wk, wp)) \
            or not isinstance(top_k, int) or kn.cls != "LayerNorm" \
            or kn.params != {"weight": (wk[1],), "bias": (wk[1],)} or len(idx.children) != 4:
        return None
    hi, di = wp[1], wk[1]
    core = replace(m, children=[c for c in m.children if c is not idx])
    mla, q_rank = mla_call(core, arg, d.quiet(), True), _linear(m.child("q_a_proj"))[1]
    if mla is None or not mla.startswith("mla(") or wq != (q_rank, hi * di, False) or wp[0] != wk[0]:
        return None
    call = mla_call(core, arg, d, True)
    d.imports.add("std/dsa.cg")
    inner = call[len("mla("):call.rindex(", name = ")]
    extra = [d.size(hi, "indexer heads"), d.size(di, "indexer head size"), d.size(top_k, "index top-k", count="t_k")]
    return f"mla_dsa({inner}, {', '.join(extra)}, name = {m.name})"


#: the blocks a draft defines itself when it uses them
MLA_BLOCKS = {"mla_full_q": """# MLA with a full-rank query projection (DeepSeek-V2-Lite's q_proj; models/deepseek_v2.cg's mla_full_q).
block mla_full_q(x[B, S, H], heads, kv_rank, nope_dim, rope_dim, v_dim) {
  q = split_heads(linear(x, heads * (nope_dim + rope_dim), bias = false, name = q_proj), heads)
  q_nope = slice(q, nope_dim)
  q_pe = rope(slice(q, rope_dim))
  latent = cache(split_heads(linear(x, kv_rank + rope_dim, bias = false, name = kv_a_proj_with_mqa), 1),
                 name = kv_cache)
  c = rmsnorm(slice(latent, kv_rank), name = kv_a_layernorm)
  k_pe = rope(slice(latent, rope_dim))
  kv = split_heads(linear(merge_heads(c), heads * (nope_dim + v_dim), bias = false, name = kv_b_proj), heads)
  k = concat(slice(kv, nope_dim), k_pe)
  v = slice(kv, v_dim)
  scores = scale(matmul(concat(q_nope, q_pe), transpose(k), causal = true))
  y = merge_heads(matmul(softmax(scores, fp32 = true), v, causal = true))
  return linear(y, H, bias = false, name = o_proj)
}"""}
