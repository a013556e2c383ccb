"""Recognise a module instance called from several layers (issue 28 item 3): Zamba2's shared transformer block.

transformers 5.24 modeling_zamba2.py builds one ``Zamba2AttentionDecoderLayer`` per hybrid layer and ties the
weights of every ``layers.{j}.shared_transformer`` to the first of its ``block_id`` (``Zamba2Model.get_layers``:
``_tied_weights_keys``, ``num_mem_blocks`` blocks in turn): the trace sees each later call's parameters as tied to
the first holder (:attr:`costgraph.drafting.facts.Module.tied`). The draft calls the block the first time with
``name = shared_transformer`` and again with ``reuse = shared_transformer`` (the language's shared instance: weights
counted once, FLOPs and activations per call); each call's LoRA adapters (``linear_*_adapter_list[g]``,
``gate_up_proj_adapter_list[g]`` of hybrid layer g) are its own, ``own = true`` inside the block.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns statements, or None.
"""

from __future__ import annotations

import re

from .blocks import _linear, activation, is_norm, norm_call
from .facts import Module
from .recurrent import mixer_call

#: the name of the shared block's first call, which the later calls' ``reuse =`` names (renamed with the branch's
#: suffix when the layers fold: :func:`reuse_names`)
SHARED = "shared_transformer"


def _adapter_rank(lists: list[Module | None], fan_in: int, fan_out: int) -> int | None:
    """The rank r of the adapters (``Sequential(Linear(fan_in, r), Linear(r, fan_out))``, none with a bias) the
    lists hold, equal in every list; None when a list holds none or another form."""
    ranks = set()
    for lst in lists:
        seqs = [c for c in (lst.children if lst is not None else []) if c.cls == "Sequential"]
        if not seqs:
            return None
        for s in seqs:
            parts = [_linear(c) for c in s.children]
            if len(parts) != 2 or None in parts or parts[0][2] or parts[1][2] or parts[0][0] != fan_in \
                    or parts[1][1] != fan_out or parts[0][1] != parts[1][0]:
                return None
            ranks.add(parts[0][1])
    return ranks.pop() if len(ranks) == 1 else None


def zamba2_shared_call(m: Module, d, rotary: bool) -> str | None:
    """A ``Zamba2AttentionDecoderLayer`` (``input_layernorm`` [2H], ``self_attn`` of q/k/v_proj 2H → heads · 2H/a
    and o_proj → H, its adapter lists when ``use_shared_attention_adapter``, ``pre_ff_layernorm`` [H], a gated GELU
    ``feed_forward`` of ``gate_up_proj`` H → 2w with its adapter list, ``down_proj``) as the draft's
    ``zamba2_shared`` call on ``x`` and ``emb``; ``reuse = shared_transformer`` where its parameters are tied to an
    earlier layer's. None for another form."""
    attn, ff = m.child("self_attn"), m.child("feed_forward")
    n1, n2 = m.child("input_layernorm"), m.child("pre_ff_layernorm")
    if None in (attn, ff, n1, n2) or m.params or len(m.children) != 4 or not is_norm(n1) or not is_norm(n2):
        return None
    q, k, v, o = (_linear(attn.child(n)) for n in ("q_proj", "k_proj", "v_proj", "o_proj"))
    gu, dn = _linear(ff.child("gate_up_proj")), _linear(ff.child("down_proj"))
    if None in (q, k, v, o, gu, dn) or any(x[2] for x in (q, k, v, o)) or activation(ff) != "gelu":
        return None
    hidden, head = o[1], attn.attrs.get("head_dim")
    if not isinstance(head, int) or q[:2] != (2 * hidden, 2 * hidden) or o[0] != 2 * hidden or head <= 0 \
            or 2 * hidden % head or k[1] % head or k != v or n1.params.get("weight") != (2 * hidden,):
        return None
    heads, kv = 2 * hidden // head, k[1] // head
    if gu[0] != hidden or dn[1] != hidden or gu[1] != 2 * dn[0] or gu[2] != dn[2]:
        return None
    lists = [attn.child(f"linear_{n}_adapter_list") for n in "qkv"]
    attn_adapters = all(lst is not None for lst in lists)
    rank = _adapter_rank([ff.child("gate_up_proj_adapter_list")], hidden, gu[1])
    if rank is None or (attn_adapters and _adapter_rank(lists, 2 * hidden, 2 * hidden) != rank):
        return None
    if any(lst is not None for lst in lists) and not attn_adapters:
        return None
    # the block's own weights (the adapters aside: each call's adapter is first held by the layer that calls it, the
    # trace ties the others to it) are all tied to an earlier layer's (a later call) or none is (the first call)
    main = [(node, p) for node in m.walk() if "adapter_list" not in node.path for p in node.params]
    tied = sum(1 for node, p in main if p in node.tied)
    if tied not in (0, len(main)):
        return None       # some weights shared, some not: not one shared block
    d.blocks.add("zamba2_shared")
    sizes = [d.size(heads, "attention heads"), d.size(kv, "key/value heads"), d.size(dn[0], "MLP width"),
             d.size(rank, "adapter rank")]
    opts = (", attn_adapters = true" if attn_adapters else "") + (", rotary = true" if rotary else "") \
        + (", mlp_bias = true" if gu[2] else "")
    whose = f"reuse = {SHARED}, name = {m.name}" if tied else f"name = {SHARED}"
    return f"zamba2_shared(x, emb, {', '.join(sizes)}{opts}, {whose})"


def hybrid_lines(layer: Module, sz, rotary: bool) -> list[str] | None:
    """A Zamba2 hybrid layer (``Zamba2HybridLayer``: ``t = linear(shared_transformer(x, emb))``, then the Mamba-2
    layer ``x + mamba(input_layernorm(x + t))``) as statements on ``x``, or None."""
    st, lin, dec = layer.child("shared_transformer"), _linear(layer.child("linear")), layer.child("mamba_decoder")
    if st is None or lin is None or dec is None or layer.params or len(layer.children) != 3 or lin[2] \
            or lin[0] != lin[1]:
        return None
    norm, mixer = dec.child("input_layernorm"), dec.child("mamba")
    if norm is None or mixer is None or not is_norm(norm) or dec.params or len(dec.children) != 2:
        return None
    shared = zamba2_shared_call(st, sz.quiet(), rotary)
    mamba = mixer_call(mixer, norm_call(norm, "x + t"), sz.quiet(), rotary)
    if shared is None or mamba is None:
        return None
    shared = zamba2_shared_call(st, sz, rotary)
    return [f"t = linear({shared}, {sz.size(lin[1], 'hidden size')}, bias = false, name = linear)",
            f"x = x + {mixer_call(mixer, norm_call(norm, 'x + t'), sz, rotary)}"]


def reuse_names(lines: list[str]) -> list[str]:
    """The folded layers' statements with ``reuse = shared_transformer`` naming the first call as the folding named
    it (``shared_transformer_at6`` in the branch of layers 6, 12, ...); unchanged when no line reuses."""
    if not any(f"reuse = {SHARED}" in line for line in lines):
        return lines
    owners = {m.group(1) for line in lines if "reuse =" not in line
              for m in re.finditer(rf"name = ({SHARED}\w*)", line)}
    if len(owners) != 1:
        return lines        # the language then says which call has no source
    owner = owners.pop()
    return [re.sub(rf"reuse = {SHARED}\b", f"reuse = {owner}", line) for line in lines]


#: the blocks a draft defines itself when it uses them
SHARED_BLOCKS = {"zamba2_shared": """# Zamba2's shared transformer block (Glorioso et al. 2024, arXiv 2411.15242, Fig. 2; transformers' Zamba2AttentionDecoderLayer):
# attention over the residual stream and the embeddings' output side by side ([B, S, 2H], heads of 2H / heads;
# o_proj back to H), then a gated GELU MLP (gate_up_proj, gelu(gate) * up, down_proj), no residual of its own. One
# instance serves several layers (reuse = NAME: its weights counted once); each call adds adapters of rank r of its
# own (own = true): to Q, K and V (attn_adapters: use_shared_attention_adapter) and to gate_up_proj.
block zamba2_shared(x[B, S, H], emb, heads, kv_heads, width, rank, attn_adapters = false, rotary = false,
                    mlp_bias = false) {
  u = rmsnorm(concat(x, emb), name = input_layernorm)
  q = linear(u, 2 * H, bias = false, name = q_proj)
  k = linear(u, kv_heads * (2 * H / heads), bias = false, name = k_proj)
  v = linear(u, kv_heads * (2 * H / heads), bias = false, name = v_proj)
  if attn_adapters {
    q = q + linear(linear(u, rank, bias = false, name = q_adapter_in, own = true), 2 * H, bias = false,
                   name = q_adapter_out, own = true)
    k = k + linear(linear(u, rank, bias = false, name = k_adapter_in, own = true), 2 * H, bias = false,
                   name = k_adapter_out, own = true)
    v = v + linear(linear(u, rank, bias = false, name = v_adapter_in, own = true), 2 * H, bias = false,
                   name = v_adapter_out, own = true)
  }
  q = split_heads(q, heads)
  k = split_heads(k, kv_heads)
  v = split_heads(v, kv_heads)
  if rotary {
    q = rope(q)
    k = rope(k)
  }
  k = repeat_kv(cache(k, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true)
  y = rmsnorm(linear(merge_heads(matmul(p, v, causal = true)), H, bias = false, name = o_proj), name = pre_ff_layernorm)
  gu = linear(y, 2 * width, bias = mlp_bias, name = gate_up_proj)
       + linear(linear(y, rank, bias = false, name = gate_up_adapter_in, own = true), 2 * width, bias = false,
                name = gate_up_adapter_out, own = true)
  g, up = split(gu, 2)
  return linear(gelu(g) * up, H, bias = mlp_bias, name = down_proj)
}"""}
