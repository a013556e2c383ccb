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
    bias): the draft's ``mla_full_q`` (models/deepseek_v2.cg's), or None. With ``g_proj`` H → a besides (Bailing's
    ``BailingHybridAttention``, transformers 5.24 modeling_bailing_hybrid.py: ``attn_output * sigmoid(g_proj(x))``, one
    gate per head, before ``o_proj``): ``head_gate = true``."""
    q, kva, kvb, o = (_linear(m.child(n)) for n in ("q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"))
    kvn = m.child("kv_a_layernorm")
    heads = m.attrs.get("num_heads") or m.attrs.get("num_attention_heads")
    held = {c.name for c in m.children if c.param_count()}
    gate = _linear(m.child("g_proj")) if held == {*FULL_Q, "g_proj"} else None
    if not rotary or None in (q, kva, kvb, o, kvn) or not isinstance(heads, int) or m.params or not is_norm(kvn) \
            or any(x[2] for x in (q, kva, kvb, o)) or (held != set(FULL_Q) and gate != (q[0], heads, False)):
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
    gated = ", head_gate = true" if gate is not None else ""
    return f"mla_full_q({arg}, {', '.join(sizes)}{gated}, name = {m.name})"


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


#: A.X-K2's attention's projections (AXK2Attention: no q_b_proj; q_gate_proj reads the query latent and its norm)
GATED_Q = ("q_a_proj", "q_a_layernorm", "q_gate_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj", "indexer",
           "o_proj")


def _indexer(idx: Module, q_rank: int, hidden: int) -> tuple[int, int, int] | None:
    """(heads, head size, top-k) of a lightning indexer reading the query latent of rank ``q_rank`` (DeepSeek-V3.2's,
    A.X-K2's: ``wq_b`` r_q → hi·di, ``wk`` H → di, ``k_norm`` a LayerNorm [di] with bias, ``weights_proj`` H → hi),
    else None."""
    wq, wk, wp = (_linear(idx.child(n)) for n in ("wq_b", "wk", "weights_proj"))
    kn, top_k = idx.child("k_norm"), idx.attrs.get("index_topk")
    if None in (wq, wk, wp) or kn is None or idx.params or any(x[2] for x in (wq, wk, wp)) \
            or not isinstance(top_k, int) or kn.cls != "LayerNorm" or len(idx.children) != 4 \
            or kn.params != {"weight": (wk[1],), "bias": (wk[1],)} or wk[0] != hidden or wp[0] != hidden \
            or wq != (q_rank, wp[1] * wk[1], False):
        return None
    return wp[1], wk[1], top_k


def gated_dsa_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """A.X-K2's attention (transformers 5.24 modeling_axk2.py ``AXK2Attention``): MLA whose query comes from
    ``q_gate_proj`` (2·r_q → a·(d_n + d_r + d_v)) over the query latent ``q_a_proj(x)`` beside its norm
    ``q_a_layernorm``, each head's last d_v outputs a sigmoid gate on that head's attention output; the latent K and V
    as DeepSeek-V3's; a lightning indexer over the normed latent (``AXK2Indexer``, under ``torch.no_grad``) whose
    top-k masks the scores of the eager path (the full square computed); ``o_proj``; no bias. The draft's
    ``gated_mla_dsa``, or None."""
    if not rotary or m.params or {c.name for c in m.children if c.param_count()} != set(GATED_Q):
        return None
    qa, qg, kva, kvb, o = (_linear(m.child(n)) for n in ("q_a_proj", "q_gate_proj", "kv_a_proj_with_mqa",
                                                           "kv_b_proj", "o_proj"))
    qn, kvn = m.child("q_a_layernorm"), m.child("kv_a_layernorm")
    heads = m.attrs.get("num_heads")
    if None in (qa, qg, kva, kvb, o) or not isinstance(heads, int) or heads < 1 or any(x[2] for x in (qa, qg, kva,
                                                                                                    kvb, o)) \
            or not (is_norm(qn) and is_norm(kvn)) or qn.params != {"weight": (qa[1],)}:
        return None
    q_rank, kv_rank, hidden = qa[1], kvn.params.get("weight", (0,))[0], qa[0]
    rope, v_dim = kva[1] - kv_rank, o[0] // heads
    nope = kvb[1] // heads - v_dim
    index = _indexer(m.child("indexer"), q_rank, hidden)
    if index is None or qg != (2 * q_rank, heads * (nope + rope + v_dim), False) or kva[0] != hidden \
            or kvb[0] != kv_rank or kvb[1] != heads * (nope + v_dim) or o != (heads * v_dim, hidden, False) \
            or min(rope, nope, v_dim) < 1:
        return None
    d.blocks.add("gated_mla_dsa")
    d.imports.add("std/dsa.cg")
    sizes = [d.size(heads, "attention heads"), d.size(q_rank, "query rank"), d.size(kv_rank, "latent rank"),
             d.size(nope, "head size without rotary"), d.size(rope, "rotary head size"),
             d.size(v_dim, "value head size"), d.size(index[0], "indexer heads"), d.size(index[1], "indexer head size"),
             d.size(index[2], "index top-k", count="t_k")]
    return f"gated_mla_dsa({arg}, {', '.join(sizes)}, name = {m.name})"


#: the blocks a draft defines itself when it uses them
MLA_BLOCKS = {"gated_mla_dsa": """# A.X-K2's attention (transformers 5.24 modeling_axk2.py AXK2Attention): MLA whose query and gate come from one
# q_gate_proj over the query latent beside its norm (no q_b_proj); each head's gate, sigmoid of its last v_dim
# outputs, scales that head's attention output; DeepSeek Sparse Attention's lightning indexer (std/dsa.cg) over the
# normed latent, its top-k masking the scores of the eager path, which computes the full square.
block gated_mla_dsa(x[B, S, H], heads, q_rank, kv_rank, nope_dim, rope_dim, v_dim, index_heads, index_dim, top_k) {
  q_c = linear(x, q_rank, bias = false, name = q_a_proj)
  q_latent = rmsnorm(q_c, name = q_a_layernorm)
  qg = split_heads(linear(concat(q_latent, q_c), heads * (nope_dim + rope_dim + v_dim), bias = false,
                          name = q_gate_proj), heads)                                  # [B, heads, S, n + r + v]
  q_nope = slice(qg, nope_dim)
  q_pe = rope(slice(qg, rope_dim))
  gate = sigmoid(slice(qg, v_dim))
  latent = cache(split_heads(linear(x, kv_rank + rope_dim, bias = false, name = kv_a_proj_with_mqa), 1),
                 name = kv_cache)
  c = rmsnorm(slice(latent, kv_rank), name = kv_a_layernorm)
  k_pe = rope(slice(latent, rope_dim))
  kv = split_heads(linear(merge_heads(c), heads * (nope_dim + v_dim), bias = false, name = kv_b_proj), heads)
  k = concat(slice(kv, nope_dim), k_pe)
  v = slice(kv, v_dim)
  selected = lightning_indexer(x, q_latent, index_heads, index_dim, rope_dim, top_k, name = indexer, no_grad = true)
  scores = scale(matmul(concat(q_nope, q_pe), transpose(k), causal = true))
  y = matmul(softmax(scores, fp32 = true), v, causal = true) * gate
  return linear(merge_heads(y), H, bias = false, name = o_proj)
}""", "mla_full_q": """# MLA with a full-rank query projection (DeepSeek-V2-Lite's q_proj; models/deepseek_v2.cg's mla_full_q);
# head_gate: each head's output times sigmoid(g_proj(x)), g_proj H -> heads (Bailing's BailingHybridAttention).
block mla_full_q(x[B, S, H], heads, kv_rank, nope_dim, rope_dim, v_dim, head_gate = false) {
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
  y = matmul(softmax(scores, fp32 = true), v, causal = true)
  if head_gate { y = y * sigmoid(split_heads(linear(x, heads, bias = false, name = g_proj), heads)) }
  return linear(merge_heads(y), H, bias = false, name = o_proj)
}"""}
