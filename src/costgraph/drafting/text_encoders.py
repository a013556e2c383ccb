"""Recognise the parts of text encoders no std block reads (issue 28 item 2, task k28text13), as blocks the draft
defines itself (:data:`TEXT_ENCODER_BLOCKS`, added to the draft's ``sz.defined`` where used) or statements.

- GTE's MLP (transformers 5.24 modeling_gte.py ``GteMLP``): ``down_proj(act(gate_proj(x)) * up_proj(x))``, the gate
  and up projections h → i without bias, ``down_proj`` i → h with one ("Unlike GemmaMLP, `down_proj` carries a
  bias"): :func:`gated_mlp_call`, block ``gated_mlp_down_bias`` (GELU, GTE's ``hidden_act``; the activation's and
  the product's elementwise work are no FLOP of the matmul convention).
- ESM C's attention (transformers 5.24 modeling_esmc.py ``EsmcAttention``): q, k, v, o without bias, a LayerNorm
  without bias over the whole Q and K projections (``q_norm``, ``k_norm``: ``EsmcLayerNorm(config.hidden_size,
  bias=False)``), rotary, bidirectional: :func:`ln_proj_norm_call`, block ``ln_proj_norm_attention`` (OLMo 2's
  ``proj_norm_attention`` with a LayerNorm for the RMSNorm).
- ALBERT's one layer instance called by all l layers (modeling_albert.py ``AlbertTransformer.forward``): written once,
  then ``reuse =`` (weights once, FLOPs per call): :func:`albert_group_lines`, block ``albert_layer``.
- LUKE's layer (modeling_luke.py ``LukeSelfAttention``): BERT's, its entity-aware queries uncalled by a forward of token
  ids alone as ``param`` statements: :func:`uncalled_query_lines`.
- I-BERT's quantisation observers (ibert/quant_modules.py ``QuantAct``): left out of the facts, identities without
  weights where ``quant_mode`` is False: :func:`without_observers`.
- MarkupLM's xpath embeddings beside the tokens' (modeling_markuplm.py ``XPathEmbeddings``): :func:`xpath_front`.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call (or statements) as
model-language text, or None (the module is another recogniser's, or a TODO).
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import K, O, Q, QK_NORMS, V, _linear, _window, activation, head_sizes, is_norm
from .facts import Module

#: the blocks a text-encoder draft defines itself
TEXT_ENCODER_BLOCKS = {"gated_mlp_down_bias": """# A gated MLP whose down projection alone has a bias (transformers 5.24 modeling_gte.py GteMLP):
# down_proj(gelu(gate_proj(x)) * up_proj(x)).
block gated_mlp_down_bias(x[B, S, H], width) {
  g = gelu(linear(x, width, bias = false, name = gate_proj))
  return linear(g * linear(x, width, bias = false, name = up_proj), H, bias = true, name = down_proj)
}""", "ln_proj_norm_attention": """# Attention with a LayerNorm without bias over the whole Q and K projections (transformers 5.24
# modeling_esmc.py EsmcAttention: q_norm, k_norm of hidden_size), rotary, no projection bias; an encoder's
# (EsmcAttention.is_causal = False): no causal mask, no K/V cache.
block ln_proj_norm_attention(x[B, S, H], heads, kv_heads, head_dim, window = none) {
  q = layernorm(linear(x, heads * head_dim, bias = false, name = q_proj), bias = false, name = q_norm)
  k = layernorm(linear(x, kv_heads * head_dim, bias = false, name = k_proj), bias = false, name = k_norm)
  v = linear(x, kv_heads * head_dim, bias = false, name = v_proj)
  q = rope(split_heads(q, heads))
  k = repeat_kv(rope(split_heads(k, kv_heads)), heads / kv_heads)
  v = repeat_kv(split_heads(v, kv_heads), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), window = window, causal = false)), fp32 = true)
  return linear(merge_heads(matmul(p, v, window = window, causal = false)), H, bias = false, name = o_proj)
}""", "albert_layer": """# ALBERT's layer (Lan et al. 2020; transformers 5.24 modeling_albert.py AlbertLayer.forward): post-norm
# attention (AlbertAttention: query, key, value, dense with biases, LayerNorm(x + output_dropout(dense(...)))), then
# full_layer_layer_norm(ffn_output(act(ffn(x))) + x); one instance called by every layer (reuse =).
block albert_layer(x[B, S, H], heads, head_dim, width, dropout = false) {
  y = gqa_attention(x, heads, heads, head_dim, qkv_bias = true, out_bias = true, rotary = false, causal = false,
                    name = attention)      # AlbertAttention.is_causal = False: no mask, no K/V cache
  if dropout { y = dropout(y, name = output_dropout) }
  x = layernorm(x + y, name = attention_LayerNorm)
  return layernorm(x + mlp(x, width, dropout = false, name = ffn), name = full_layer_layer_norm)
}"""}


def _define(d, block: str) -> None:
    if TEXT_ENCODER_BLOCKS[block] not in d.defined:
        d.defined.append(TEXT_ENCODER_BLOCKS[block])


def gated_mlp_call(m: Module, arg: str, d) -> str | None:
    """``gated_mlp_down_bias`` for a module of exactly ``gate_proj``, ``up_proj`` (h → w, no bias) and ``down_proj``
    (w → h, with bias), its activation GELU (``hidden_act``: GTE's default); else None (a gated MLP of one bias setting is
    :func:`costgraph.drafting.blocks.mlp_call`'s ``swiglu``/``geglu``)."""
    gate, up, down = (_linear(m.child(n)) for n in ("gate_proj", "up_proj", "down_proj"))
    if None in (gate, up, down) or m.params or gate[2] or up[2] or not down[2] or gate[:2] != up[:2] \
            or down[:2] != (up[1], up[0]) or activation(m) != "gelu" \
            or len([c for c in m.children if c.param_count()]) != 3:
        return None
    _define(d, "gated_mlp_down_bias")
    return f"gated_mlp_down_bias({arg}, {d.size(up[1], 'MLP width')}, name = {m.name})"


def ln_proj_norm_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """``ln_proj_norm_attention`` for an attention of q, k, v, o without bias whose ``q_norm`` and ``k_norm`` are
    LayerNorms without bias over the whole projections (a weight of q's and of k's columns), rotary; else None."""
    q, k, v, o = (_linear(m.child(*names)) for names in (Q, K, V, O))
    norms = [c for c in m.children if c.name in QK_NORMS]
    head_dim = m.attrs.get("head_dim")
    if None in (q, k, v, o) or not rotary or any(x[2] for x in (q, k, v, o)) or not isinstance(head_dim, int) \
            or head_dim < 1 or len(norms) != 2 or m.params or k[1] != v[1] or q[1] % head_dim or k[1] % head_dim:
        return None
    if any("rms" in c.cls.lower() or "norm" not in c.cls.lower() or set(c.params) != {"weight"} for c in norms) \
            or sorted(c.params["weight"][0] for c in norms) != sorted((q[1], k[1])) \
            or len([c for c in m.children if c.param_count()]) != 6:
        return None
    _define(d, "ln_proj_norm_attention")
    sizes = head_sizes(d, q[1] // head_dim, k[1], head_dim)
    return f"ln_proj_norm_attention({arg}, {', '.join(sizes + _window(m, d))}, name = {m.name})"


def text_encoder_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """The first recogniser of this module that reads ``m``, else None."""
    return gated_mlp_call(m, arg, d) or ln_proj_norm_call(m, arg, d, rotary)


#: the quantisation observers I-BERT wraps around every tensor (transformers 5.24 ibert/quant_modules.py ``QuantAct``:
#: no parameter, only buffers ``x_min``, ``x_max``, ``act_scaling_factor``; its forward returns its input unchanged
#: with ``quant_mode`` False, the config's default): no weight and no FLOP of the matmul convention
OBSERVERS = ("QuantAct",)


def without_observers(root: Module) -> Module:
    """``root`` with every parameter-free :data:`OBSERVERS` child left out, so that I-BERT's ``IntLayerNorm`` (a
    LayerNorm whose ``activation`` is a ``QuantAct``: quant_modules.py ``IntLayerNorm.forward`` computes the float
    LayerNorm where ``quant_mode`` is False) reads as a norm and its layer as BERT's (:mod:`.encoder`). ``root``
    itself where it holds no observer (every other model: the same facts)."""
    if not any(m.cls in OBSERVERS for m in root.walk()):
        return root

    def strip(m: Module) -> Module:
        kept = [strip(c) for c in m.children if not (c.cls in OBSERVERS and not c.param_count())]
        return replace(m, children=kept)

    return strip(root)


def albert_group_lines(group: Module, d, rotary: bool) -> list[str] | None:
    """The statements of ALBERT's one layer group (transformers 5.24 modeling_albert.py ``AlbertTransformer.forward``:
    ``for i in range(num_hidden_layers)``, ``self.albert_layer_groups[group_idx]``, with ``num_hidden_groups`` 1 and
    ``inner_group_num`` 1, the defaults: one ``AlbertLayer`` called by all l layers): its first call ``name =
    albert_layer``, the l − 1 others ``reuse = albert_layer`` (weights counted once, FLOPs per call; issue 28 item 3).
    None for any other module, a group called another number of times than l (several groups), or a layer group of
    several layers."""
    inner = group.child("albert_layers")
    calls = 1 + len(group.again)
    if inner is None or len(inner.children) != 1 or group.params or d.probe.symbol_values().get("l") != calls \
            or any(c.param_count() for c in group.children if c is not inner):
        return None
    layer = inner.children[0]
    att, norm = layer.child("attention"), layer.child("full_layer_layer_norm")
    ffn, out = _linear(layer.child("ffn")), _linear(layer.child("ffn_output"))
    if None in (att, norm, ffn, out) or layer.params or not is_norm(norm) or activation(layer) != "gelu" \
            or any(c.param_count() for c in layer.children if c.name not in ("attention", "ffn", "ffn_output",
                                                                          "full_layer_layer_norm")):
        return None
    hidden = norm.params["weight"][0]
    q, k, v, o = (_linear(att.child(n)) for n in ("query", "key", "value", "dense"))
    heads, ln = att.attrs.get("num_attention_heads"), att.child("LayerNorm")
    if None in (q, k, v, o, ln) or not isinstance(heads, int) or heads < 1 or hidden % heads or not is_norm(ln) \
            or any(x != (hidden, hidden, True) for x in (q, k, v, o)) or ffn[0] != hidden or not ffn[2] \
            or out != (ffn[1], hidden, True) or att.params or set(ln.params) != {"weight", "bias"} \
            or set(norm.params) != {"weight", "bias"} or rotary:
        return None
    drop = att.child("output_dropout")
    _define(d, "albert_layer")
    sizes = ", ".join([d.size(heads, "query heads"), d.size(hidden // heads, "head size"), d.size(ffn[1], "MLP width")]
                      + (["dropout = true"] if drop is not None and drop.attrs.get("p", 0) else []))
    count = d.size(calls, "layer calls", count="l")
    return [f"x = albert_layer(x, {sizes}, name = albert_layer)   # {layer.cls}: one instance, every layer calls it",
            f"repeat {count} - 1 as albert_calls {{",
            f"  x = albert_layer(x, {sizes}, reuse = albert_layer, name = again)",
            "}"]


def _param_lines(m: Module, base: Module, d) -> list[str]:
    """``param`` statements for every parameter of ``m`` and its descendants, named by their path below ``base``."""
    out = []
    for k in m.walk():
        for pname, shape in k.params.items():
            if pname in k.tied:
                continue
            name = (k.path[len(base.path) + 1:] + "." + pname).replace(".", "_")
            out.append(f"param {name}[{', '.join(d.size(n, f'{k.path}.{pname}') for n in shape)}]")
    return out


def uncalled_query_lines(layer: Module, d, rotary: bool) -> list[str] | None:
    """A BERT-style layer (:func:`costgraph.drafting.encoder.bert_lines`) whose self-attention holds linears its
    forward never calls: LUKE's entity-aware queries (transformers 5.24 modeling_luke.py ``LukeSelfAttention``:
    ``w2e_query``, ``e2w_query``, ``e2e_query`` h → h, read only ``if self.use_entity_aware_attention and
    entity_hidden_states is not None``; a forward of token ids alone runs ``query`` on the words). Written as BERT's
    layer, the uncalled linears as ``param`` statements (counted as ``sum(p.numel())`` counts them, no FLOPs); None for
    any other layer."""
    from .encoder import bert_lines

    att = layer.child("attention")
    selfatt = att.child("self") if att is not None else None
    idle = [c for c in (selfatt.children if selfatt is not None else []) if c.order is None and c.param_count()]
    if not idle or any(_linear(c) is None for c in idle):
        return None
    kept = replace(selfatt, children=[c for c in selfatt.children if c not in idle])
    bare = replace(layer, children=[replace(att, children=[kept if c is selfatt else c for c in att.children])
                                    if c is att else c for c in layer.children])
    lines = bert_lines(bare, d, rotary)
    if lines is None:
        return None
    params = [line for c in idle for line in _param_lines(c, layer, d)]
    return [*lines, f"# built but never called by a forward of token ids alone (parameters only): "
                    f"{', '.join(c.name for c in idle)}", *params]


def text_layer_lines(layer: Module, d, rotary: bool) -> list[str] | None:
    """The statements of a text encoder's layer of a form :mod:`.encoder` does not read: ALBERT's shared layer,
    LUKE's layer with its entity-aware queries; else None."""
    return albert_group_lines(layer, d, rotary) or uncalled_query_lines(layer, d, rotary)


def xpath_front(root: Module, pre: list[Module], d, names) -> tuple[list[str], list[str], list[Module]] | None:
    """(inputs, statements, the modules before the layers left) of MarkupLM's embeddings (transformers 5.24
    modeling_markuplm.py ``MarkupLMEmbeddings.forward``: ``words + positions + token_type + xpath``), else None.
    ``XPathEmbeddings.forward``: at each of ``max_depth`` depths a tag table [max_xpath_tag_unit_embeddings, u] and a
    subscript table [max_xpath_subs_unit_embeddings, u] (u: ``xpath_unit_hidden_size``), each list's outputs
    concatenated (``torch.cat(..., dim=-1)``: depth · u), the two sums added, then ``inner2emb(dropout(relu(
    xpath_unitseq2_inner(...))))`` (depth · u → 4h → h). A forward of token ids alone runs them on the default xpath
    ids (``tag_pad_id``, ``subs_pad_id``); the draft takes one input of ids per depth and list."""
    xp = root.find("embeddings.xpath_embeddings")
    emb = root.child("embeddings")
    if xp is None or emb is None:
        return None
    tags, subs = xp.child("xpath_tag_sub_embeddings"), xp.child("xpath_subs_sub_embeddings")
    inner, out = _linear(xp.child("xpath_unitseq2_inner")), _linear(xp.child("inner2emb"))
    tables = [emb.child(n) for n in ("word_embeddings", "position_embeddings", "token_type_embeddings")]
    if tags is None or subs is None or None in (inner, out) or None in tables or not tags.children \
            or len(tags.children) != len(subs.children) or not (inner[2] and out[2]):
        return None
    shapes = [{c.params.get("weight") for c in lst.children} for lst in (tags, subs)]
    if any(len(s) != 1 or None in s for s in shapes) or any(c.order is None for c in (*tags.children, *subs.children)):
        return None
    (tag_rows, unit), (sub_rows, unit2) = next(iter(shapes[0])), next(iter(shapes[1]))
    depth = len(tags.children)
    hidden = tables[0].params["weight"][1]
    if unit != unit2 or inner[0] != depth * unit or out != (inner[1], hidden, True) \
            or any(len(t.params.get("weight", ())) != 2 or t.params["weight"][1] != hidden for t in tables):
        return None
    rows = [d.size(t.params["weight"][0], "embedding rows") for t in tables]
    h = d.size(hidden, "embedding width")
    inputs = ["input tokens[b, s]: index", "input positions[s]: index", "input token_type_ids[b, s]: index"]
    inputs += [f"input xpath_{k}_{j}[b, s]: index" for k in ("tags", "subs") for j in range(depth)]
    lines = [f"x = embedding(tokens, {rows[0]}, {h}, name = word_embeddings) + embedding(positions, {rows[1]}, {h}, "
             f"name = position_embeddings) + embedding(token_type_ids, {rows[2]}, {h}, name = token_type_embeddings)"]
    for k, var, n in (("tags", "t", tag_rows), ("subs", "u", sub_rows)):
        for j in range(depth):
            table = f"embedding(xpath_{k}_{j}, {n}, {unit}, name = xpath_{k}_{j}_table)"
            lines.append(f"{var} = {table}" if j == 0 else f"{var} = concat({var}, {table})")
    drop = xp.child("dropout")
    act = f"relu(linear(t + u, {d.size(inner[1], 'xpath inner width')}, bias = true, name = xpath_unitseq2_inner))"
    if drop is not None and drop.attrs.get("p", 0):
        act = f"dropout({act}, name = xpath_dropout)"
    lines.append(f"x = x + linear({act}, {h}, bias = true, name = inner2emb)   # {xp.cls}: {depth} depths")
    used = {id(m) for m in (*tables, *xp.walk())}
    return inputs, lines, [m for m in pre if id(m) not in used]
