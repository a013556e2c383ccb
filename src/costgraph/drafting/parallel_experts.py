"""Recognise JetMoE's two mixtures of experts (Shen et al. 2024, "JetMoE: Reaching Llama2 Performance with 0.1M
Dollars", arXiv:2404.07413 §2): the mixture of attention heads (MoA, Zhang et al. 2022) and the MoE MLP, both of
stacked expert matrices (transformers 5.24 modeling_jetmoe.py ``JetMoeParallelExperts``: ``weight`` [E, out, in])
behind a top-k router (``JetMoeTopKGating``: ``layer`` H → E, softmax over the k chosen logits), each with an output
bias [H] of its own.

The router reads its routed counts back to Python (``expert_size.tolist()``): the trace runs with a balanced split
standing in (:mod:`costgraph.drafting.routing`); the products' count is the same at any routing (``T·k`` rows through
each stacked projection), which the blocks' ``repeat E as experts active k`` writes.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call as model-language text, or
None; the blocks' text (:data:`PARALLEL_EXPERT_BLOCKS`) follows transformers 5.24's modeling_jetmoe.py.
"""

from __future__ import annotations

from .blocks import _linear, activation
from .facts import Module


def _router(m: Module | None) -> tuple[int, int, int] | None:
    """(E, H, k) of JetMoE's ``JetMoeTopKGating`` (``layer``: a Linear H → E without bias; ``top_k``,
    ``num_experts``), else None."""
    if m is None or m.params or len(m.children) != 1:
        return None
    lin, k, e = _linear(m.child("layer")), m.attrs.get("top_k"), m.attrs.get("num_experts")
    if lin is None or lin[2] or not isinstance(k, int) or not isinstance(e, int) or lin[1] != e or not 0 < k <= e:
        return None
    return e, lin[0], k


def _stacked(m: Module | None, experts: int) -> tuple[int, int] | None:
    """(out, in) of a ``JetMoeParallelExperts`` of ``experts`` matrices (``weight`` [E, out, in] alone), else
    None."""
    if m is None or m.children or set(m.params) != {"weight"} or len(m.params["weight"]) != 3 \
            or m.params["weight"][0] != experts:
        return None
    return m.params["weight"][1], m.params["weight"][2]


def moa_attention_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """JetMoE's attention (``JetMoeAttention``: ``kv_proj`` H → 2·kv·d without bias, and ``experts``, a
    ``JetMoeMoA``: its router, ``input_linear`` [E, kv·d, H] (each token's k chosen query projections: k·kv query
    heads of size d), ``output_linear`` [E, H, kv·d] (each head group projected back by its expert, the k outputs
    weighted and summed), ``bias`` [H]; rotary on q and k; K and V repeated k times) as the draft's
    ``moa_attention``, or None."""
    moa, kv = m.child("experts"), _linear(m.child("kv_proj"))
    heads, head_dim, top = m.attrs.get("num_key_value_heads"), m.attrs.get("head_dim"), m.attrs.get("top_k")
    if moa is None or kv is None or kv[2] or m.params or len(m.children) != 2 or not rotary \
            or not isinstance(heads, int) or not isinstance(head_dim, int) or set(moa.params) != {"bias"} \
            or len(moa.children) != 3:
        return None
    router = _router(moa.child("router"))
    if router is None:
        return None
    experts, hidden, k = router
    width = heads * head_dim
    if k != top or kv != (hidden, 2 * width, False) or moa.params["bias"] != (hidden,) \
            or _stacked(moa.child("input_linear"), experts) != (width, hidden) \
            or _stacked(moa.child("output_linear"), experts) != (hidden, width):
        return None
    d.blocks.add("moa_attention")
    sizes = [d.size(experts, "experts"), d.size(k, "top-k", count="k"), d.size(heads, "key/value heads"),
             d.size(head_dim, "head size")]
    return f"moa_attention({arg}, {', '.join(sizes)}, name = {m.name})"


def parallel_moe_call(m: Module, arg: str, d) -> str | None:
    """JetMoE's MoE MLP (``JetMoeMoE``: its router, ``input_linear`` [E, 2w, H] (gate and up, chunked in that
    order), SiLU, ``output_linear`` [E, H, w], ``bias`` [H]) as the draft's ``parallel_moe``, or None."""
    if set(m.params) != {"bias"} or activation(m) != "silu" \
            or {c.name for c in m.children if c.param_count()} != {"router", "input_linear", "output_linear"}:
        return None
    router = _router(m.child("router"))
    if router is None:
        return None
    experts, hidden, k = router
    up, down = _stacked(m.child("input_linear"), experts), _stacked(m.child("output_linear"), experts)
    if up is None or down is None or m.params["bias"] != (hidden,) or up[1] != hidden or up[0] % 2 \
            or down != (hidden, up[0] // 2):
        return None
    d.blocks.add("parallel_moe")
    sizes = [d.size(experts, "experts"), d.size(k, "top-k", count="k"), d.size(down[1], "expert width")]
    return f"parallel_moe({arg}, {', '.join(sizes)}, name = {m.name})"


#: the blocks a draft defines itself when it uses them
PARALLEL_EXPERT_BLOCKS = {"moa_attention": """# JetMoE's mixture of attention heads (transformers 5.24 modeling_jetmoe.py JetMoeAttention, JetMoeMoA): a
# router (H -> experts) picks top_k experts per token, softmax over their k logits; each chosen expert projects the
# token to kv_heads query heads of head_dim (input_linear), so a token has top_k * kv_heads query heads; one kv_proj
# gives K and V of kv_heads heads, repeated top_k times; rotary on q and k; each chosen expert projects its heads'
# output back to H (output_linear), weighted and summed, plus a bias [H]. The k query projections are written as
# one accumulator of kv_heads * head_dim repeated to top_k * kv_heads heads, the k output projections as one slice
# of the heads' output: the same parameters (experts copies of each) and products (top_k of each per token).
block moa_attention(x[B, S, H], experts, top_k, kv_heads, head_dim) {
  param bias[H]
  top, ids = topk(linear(x, experts, bias = false, name = router), top_k)     # [B, S, k] logits and expert ids
  weights = softmax(top, fp32 = true)                                         # over the k chosen, in fp32
  kv = linear(x, 2 * kv_heads * head_dim, bias = false, name = kv_proj)
  k = rope(split_heads(slice(kv, kv_heads * head_dim), kv_heads))             # [B, kv, S, d]
  v = split_heads(slice(kv, kv_heads * head_dim), kv_heads)
  q = zeros(slice(kv, kv_heads * head_dim))
  repeat experts as query_experts active top_k {
    q = q + linear(x, kv_heads * head_dim, bias = false, name = input_linear)
  }
  q = rope(repeat_kv(split_heads(q, kv_heads), top_k))                        # [B, k kv, S, d]
  k = repeat_kv(cache(k, name = k_cache), top_k)
  v = repeat_kv(cache(v, name = v_cache), top_k)
  p = softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true)
  y = slice(merge_heads(matmul(p, v, causal = true)), kv_heads * head_dim)    # one chosen expert's heads
  o = zeros(x)
  repeat experts as output_experts active top_k {
    o = o + linear(y, H, bias = false, name = output_linear)
  }
  return o + bias
}""", "parallel_moe": """# JetMoE's MoE MLP (transformers 5.24 modeling_jetmoe.py JetMoeMoE): a router (H -> experts) picks top_k experts per
# token, softmax over their k logits; each expert a SwiGLU of width (input_linear [experts, 2 width, H]: gate and up;
# output_linear [experts, H, width]); the k outputs weighted and summed, plus a bias [H].
block parallel_moe(x[B, S, H], experts, top_k, width) {
  param bias[H]
  top, ids = topk(linear(x, experts, bias = false, name = router), top_k)
  weights = softmax(top, fp32 = true)                                         # over the k chosen, in fp32
  y = zeros(x)
  repeat experts as experts active top_k {
    y = y + swiglu(x, width, name = expert)
  }
  return y + bias
}"""}
