"""Recognise T5's encoder-decoder (issue 28 item 2): two stacks of layers, the decoder's attending to the encoder.

transformers 5.24 modeling_t5.py ``T5Model`` holds one token table ``shared`` [V, h] and two ``T5Stack``
(``encoder``, ``decoder``: ``embed_tokens`` tied to ``shared``, ``block`` a ModuleList of ``T5Block``,
``final_layer_norm`` a ``T5LayerNorm``, an RMSNorm with a weight and no bias). Each ``T5Block.layer`` is a ModuleList:
``T5LayerSelfAttention`` (``layer_norm``, then ``SelfAttention``: ``T5Attention``'s ``q``, ``k``, ``v`` h → a·d and
``o`` a·d → h, no bias, no 1/√d scaling), in the decoder ``T5LayerCrossAttention`` (``layer_norm``, then
``EncDecAttention``: q from the decoder, k and v from the encoder's output), then ``T5LayerFF`` (``layer_norm``, then
``DenseReluDense``: ``wi`` h → i, ReLU, ``wo`` i → h; or MT5's ``DenseGatedActDense``: ``wi_0``, ``wi_1``, ``wo``),
each adding its residual. The first block's self-attention alone holds ``relative_attention_bias`` [nb, a]
(``has_relative_attention_bias = bool(i == 0)`` in ``T5Stack.__init__``): its bias [1, a, s, s] is computed once and
passed to every later layer (``T5Stack.forward``: ``position_bias = layer_outputs[1]``); the decoder's cross-
attention has no bias. UMT5's blocks each hold a table of their own (transformers 5.24 modeling_umt5.py
``UMT5Attention``: ``relative_attention_bias`` in every layer's self-attention, its bias computed in each call).
The encoder reads the ``s`` positions of ``input_ids``, the decoder the ``t`` of ``decoder_input_ids``
(:mod:`costgraph.drafting.inputs_seq2seq`).

The draft writes both stacks with a block of its own (:data:`T5_BLOCK`, as models/t5.cg writes T5's attention, without
the causal flag: PyTorch's eager attention computes every (query, key) pair of the decoder, masked).
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import _linear, is_norm, norm_call
from .facts import Module

#: the attention block a T5 draft defines: q from ``x`` [B, T, H], k and v from ``mem`` [B, S, H] (``x`` itself for
#: self-attention), ``bias`` [1, heads, T, S] added to the scores where given (Raffel et al. 2020 §2.1)
T5_BLOCK = """# T5's attention (Raffel et al. 2020; transformers 5.24 modeling_t5.py T5Attention): q from x, k and v
# from mem (the encoder's output in the decoder's cross-attention), `heads` heads of `head_dim`, no bias, no
# 1/sqrt(d) scaling, the relative position bias added to the scores where given, o back to H.
block t5_attention(x[B, T, H], mem[B, S, H2], heads, head_dim, pos_bias = none, with_bias = false) {
  q = split_heads(linear(x, heads * head_dim, bias = false, name = q), heads)
  k = split_heads(linear(mem, heads * head_dim, bias = false, name = k), heads)
  v = split_heads(linear(mem, heads * head_dim, bias = false, name = v), heads)
  k = cache(k, name = k_cache)
  v = cache(v, name = v_cache)
  scores = matmul(q, transpose(k))
  if with_bias { scores = scores + pos_bias }
  return linear(merge_heads(matmul(softmax(scores), v)), H, bias = false, name = o)
}"""


def _part(layer: Module, i: int, inner: tuple[str, ...]) -> tuple[Module, Module] | None:
    """(norm, module) of the ``i``-th sub-layer of a ``T5Block`` (its ``layer`` list): a ``layer_norm`` and one of
    ``inner``; else None."""
    parts = layer.child("layer")
    if parts is None or len(parts.children) <= i:
        return None
    sub = next((c for c in parts.children if c.name == str(i)), None)
    norm, mod = (sub.child("layer_norm"), sub.child(*inner)) if sub is not None else (None, None)
    return (norm, mod) if norm is not None and mod is not None and is_norm(norm) else None


def _heads(att: Module, hidden: int, heads: int | None = None) -> tuple[int, int] | None:
    """(heads, head size) of a ``T5Attention`` with q, k, v h → a·d and o back, no bias; the heads ``heads`` where
    given (the cross-attention's: the self-attention's), else its bias table's columns."""
    q, k, v, o = (_linear(att.child(n)) for n in ("q", "k", "v", "o"))
    if None in (q, k, v, o) or any(x != (hidden, q[1], False) for x in (q, k, v)) or o != (q[1], hidden, False):
        return None
    table = att.params.get("relative_attention_bias") or (att.child("relative_attention_bias") or Module("", "", "")) \
        .params.get("weight")
    if heads is None and table is not None and len(table) == 2:
        heads = table[1]
    if not isinstance(heads, int) or heads < 1 or q[1] % heads:
        return None
    return heads, q[1] // heads


def _mlp(norm: Module, ff: Module, hidden: int, sz) -> str | None:
    """The feed-forward sub-layer's call: ``relu_mlp`` for ``DenseReluDense`` (``wi``, ``wo``), ``geglu`` for
    ``DenseGatedActDense`` (``wi_0``, ``wi_1``, ``wo``: the gate's activation is no FLOP of the matmul convention)."""
    wo = _linear(ff.child("wo"))
    if wo is None or wo[1:] != (hidden, False):
        return None
    width = wo[0]
    if ff.child("wi") is not None and _linear(ff.child("wi")) == (hidden, width, False):
        return f"relu_mlp({norm_call(norm, 'x')}, {sz.size(width, 'MLP width')}, bias = false, name = {ff.name})"
    if all(_linear(ff.child(n)) == (hidden, width, False) for n in ("wi_0", "wi_1")):
        return f"geglu({norm_call(norm, 'x')}, {sz.size(width, 'MLP width')}, name = {ff.name})"
    return None


def _stack(stack: Module, sz, prefix: str, seq: str, cross: bool) -> list[str] | None:
    """The statements of one ``T5Stack``'s layers and final norm on ``x`` (its embeddings written before): the first
    block's bias table as ``{prefix}_bias = relative_position_bias(seq, seq, nb, a)``, every block reading it."""
    blocks, final = stack.child("block"), stack.child("final_layer_norm")
    if blocks is None or final is None or not blocks.children or not is_norm(final):
        return None
    hidden = final.params.get("weight", (0,))[0]
    first = blocks.children[0]
    att = _part(first, 0, ("SelfAttention",))
    ff = _part(first, 2 if cross else 1, ("DenseReluDense", "DenseGatedActDense"))
    xatt = _part(first, 1, ("EncDecAttention",)) if cross else None
    table = att[1].child("relative_attention_bias") if att is not None else None
    if att is None or ff is None or (cross and xatt is None) or table is None:
        return None
    shape = _heads(att[1], hidden)
    rows = table.params.get("weight")
    if shape is None or rows is None or len(rows) != 2 or rows[1] != shape[0] \
            or any(c.signature() != blocks.children[-1].signature() for c in blocks.children[1:]):
        return None
    tables = [_part(b, 0, ("SelfAttention",)) for b in blocks.children[1:]]
    tables = [p[1].child("relative_attention_bias") is not None if p else None for p in tables]
    if None in tables or len(set(tables)) > 1:
        return None
    per_layer = bool(tables and tables[0])     # UMT5's: every block's self-attention holds its own table
    if per_layer and any(c.signature() != first.signature() for c in blocks.children):
        return None
    a, d = sz.size(shape[0], "attention heads"), sz.size(shape[1], "attention head size")
    mlp = _mlp(replace(ff[0], name="ff_layer_norm"), ff[1], hidden, sz)
    if mlp is None or (cross and _heads(xatt[1], hidden, shape[0]) != shape):
        return None
    n = len(blocks.children)
    count = "l" if sz.probe.symbol_values().get("l") == n else str(n)
    if count == "l":
        sz.used.add("l")
    nb = sz.size(rows[0], "relative position buckets")
    bias = f"{prefix}_bias = relative_position_bias({seq}, {seq}, {nb}, {a}, name = {prefix}_relative_attention_bias)"
    body = [bias + "   # this block's own table (UMT5)"] if per_layer else []
    body += [f"u = {norm_call(replace(att[0], name='attn_layer_norm'), 'x')}",
             f"x = x + t5_attention(u, u, {a}, {d}, {prefix}_bias, with_bias = true, name = {att[1].name})"]
    if cross:
        u = norm_call(replace(xatt[0], name="cross_layer_norm"), "x")
        body.append(f"x = x + t5_attention({u}, enc, {a}, {d}, name = {xatt[1].name})")
    body.append(f"x = x + {mlp}")
    if T5_BLOCK not in sz.defined:
        sz.defined.append(T5_BLOCK)
    shared = [] if per_layer else [f"{bias}   # {table.cls} of the first block's self-attention: every block adds it"]
    return [*shared,
            f"repeat {count} as {stack.name} {{   # {blocks.children[0].cls}", *("  " + t for t in body), "}",
            f"x = {norm_call(final, 'x').replace(f'name = {final.name})', f'name = {stack.name}_{final.name})')}"]


def t5_body(root: Module, sz) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of a T5 encoder-decoder base model (``T5Model``, ``MT5Model``: no head; the
    decoder's normed output returned), else None."""
    enc, dec, shared = root.child("encoder"), root.child("decoder"), root.child("shared")
    if enc is None or dec is None or shared is None or len(shared.params.get("weight", ())) != 2:
        return None
    embeds = [s.child("embed_tokens") for s in (enc, dec)]     # tied to shared: the trace names the first holder
    holders = {shared.path, *(e.path for e in embeds if e is not None)}
    if any(e is None or e.params.get("weight") != shared.params["weight"] for e in embeds) \
            or embeds[1].tied.get("weight") not in holders:
        return None
    rows, width = shared.params["weight"]
    v, h = sz.size(rows, "embedding rows"), sz.size(width, "embedding width")
    lines_enc = _stack(enc, sz, "enc", "s", cross=False)
    lines_dec = _stack(dec, sz, "dec", "t", cross=True)
    if lines_enc is None or lines_dec is None:
        return None
    sz.used.add("t")
    inputs = ["input tokens[b, s]: index", "input decoder_tokens[b, t]: index"]
    lines = [f"x = embedding(tokens, {v}, {h}, name = {shared.name})   # {shared.cls}: the encoder's and the "
             "decoder's table",
             *lines_enc, "enc = x   # the encoder's output, read by every decoder block's cross-attention",
             f"x = embedding(decoder_tokens, {v}, {h}, tied = {shared.name}, name = decoder_embed_tokens)",
             *lines_dec, "return x"]
    return inputs, lines


#: the attention block a BART-like draft defines (transformers 5.24 modeling_m2m_100.py ``M2M100Attention``, BART's
#: ``BartAttention``): q from ``x``, k and v from ``mem``, each h → heads·head_dim with a bias where the model has
#: one, q scaled by 1/√head_dim (no FLOPs of the matmul convention), o back to H
BART_BLOCK = """# BART's attention (Lewis et al. 2020; transformers 5.24 modeling_m2m_100.py M2M100Attention): q from x,
# k and v from mem (the encoder's output in the decoder's cross-attention), `heads` heads of `head_dim`, q scaled
# by 1/sqrt(head_dim), out_proj back to H.
block bart_attention(x[B, T, H], mem[B, S, H2], heads, head_dim, qkv_bias = true, out_bias = true) {
  q = split_heads(linear(x, heads * head_dim, bias = qkv_bias, name = q_proj), heads)
  k = split_heads(linear(mem, heads * head_dim, bias = qkv_bias, name = k_proj), heads)
  v = split_heads(linear(mem, heads * head_dim, bias = qkv_bias, name = v_proj), heads)
  k = cache(k, name = k_cache)
  v = cache(v, name = v_cache)
  p = softmax(matmul(q, transpose(k)))
  return linear(merge_heads(matmul(p, v)), H, bias = out_bias, name = out_proj)
}"""


def _bart_attention(att: Module | None, hidden: int, sz, x: str, mem: str) -> str | None:
    """``bart_attention(x, mem, ...)`` of an attention with ``q_proj``, ``k_proj``, ``v_proj`` h → heads·d and
    ``out_proj`` back (biases alike on q, k, v), its heads ``num_heads``; else None."""
    if att is None:
        return None
    q, k, v, o = (_linear(att.child(n)) for n in ("q_proj", "k_proj", "v_proj", "out_proj"))
    heads = att.attrs.get("num_heads")
    if None in (q, k, v, o) or not isinstance(heads, int) or heads < 1 or q[1] % heads \
            or any(y != (hidden, q[1], q[2]) for y in (k, v)) or q[0] != hidden or o[:2] != (q[1], hidden):
        return None
    a, d = sz.size(heads, "attention heads"), sz.size(q[1] // heads, "attention head size")
    flags = "" if q[2] and o[2] else f", qkv_bias = {str(q[2]).lower()}, out_bias = {str(o[2]).lower()}"
    return f"bart_attention({x}, {mem}, {a}, {d}{flags}, name = {att.name})"


def _bart_layer(layer: Module, hidden: int, sz, cross: bool) -> list[str] | None:
    """The statements of a BART-like layer: self-attention, (cross-attention to ``enc``,) an MLP ``fc1``, its
    activation, ``fc2``, each block with its LayerNorm before it (``self_attn_layer_norm`` reads the layer's input:
    M2M-100, mBART, PEGASUS-X) or after its residual sum (BART, FSMT)."""
    names = ["self_attn", "self_attn_layer_norm", *(["encoder_attn", "encoder_attn_layer_norm"] if cross else []),
             "fc1", "fc2", "final_layer_norm"]
    kids = {c.name: c for c in layer.children if c.order is not None}
    if any(n not in kids for n in names) or layer.params \
            or any(c.param_count() for c in layer.children if c.name not in names) \
            or not all(is_norm(kids[n]) for n in names if n.endswith("norm")):
        return None
    pre = kids["self_attn_layer_norm"].src == "input"
    fc1, fc2 = _linear(kids["fc1"]), _linear(kids["fc2"])
    if fc1 is None or fc2 is None or fc1[0] != hidden or fc2 != (fc1[1], hidden, fc1[2]):
        return None
    act = str(layer.attrs.get("act", "")).lower()
    kind = "relu_mlp" if "relu" in act else "mlp" if "gelu" in act else None
    if kind is None:
        return None
    blocks = [("self_attn", "x"), *([("encoder_attn", "enc")] if cross else [])]
    lines = []
    for name, mem in blocks:
        norm = replace(kids[f"{name}_layer_norm"], name=f"{name}_layer_norm")
        x = norm_call(norm, "x") if pre else "x"
        call = _bart_attention(kids[name], hidden, sz, x, "u" if pre and name == "self_attn" else mem)
        if call is None:
            return None
        if pre and name == "self_attn":
            lines += [f"u = {x}", f"x = x + {call.replace(f'bart_attention({x}, u', 'bart_attention(u, u')}"]
        elif pre:
            lines.append(f"x = x + {call}")
        else:
            lines.append(f"x = {norm_call(norm, 'x + ' + call)}")
    norm = kids["final_layer_norm"]
    bias = "" if fc1[2] else ", bias = false"
    mlp = f"{kind}({'{}'}, {sz.size(fc1[1], 'MLP width')}{bias}{', dropout = false' if kind == 'mlp' else ''}, " \
          f"name = mlp)"
    lines.append(f"x = x + {mlp.format(norm_call(norm, 'x'))}" if pre
                 else f"x = {norm_call(norm, 'x + ' + mlp.format('x'))}")
    return lines


def _bart_stack(stack: Module, sz, ids: str, seq: str, cross: bool, tied: str | None) -> list[str] | None:
    """The statements of one BART-like stack (encoder or decoder): its token embedding (scaled where the class says
    so), a learned position table where it holds one, ``layernorm_embedding``, the layers, a final ``layer_norm``."""
    tokens, positions, layers = stack.child("embed_tokens"), stack.child("embed_positions"), stack.child("layers")
    if tokens is None or positions is None or layers is None or not layers.children \
            or len(tokens.params.get("weight", ())) != 2:
        return None
    rows, hidden = tokens.params["weight"]
    known = {"embed_tokens", "embed_positions", "layers", "layer_norm", "layernorm_embedding", "dropout"}
    if any(c.param_count() for c in stack.children if c.name not in known) or stack.params \
            or any(c.signature() != layers.children[0].signature() for c in layers.children):
        return None
    body = _bart_layer(layers.children[0], hidden, sz, cross)
    if body is None:
        return None
    v, h = sz.size(rows, "embedding rows"), sz.size(hidden, "embedding width")
    own = f"{stack.name}_embed_tokens"
    table = f"embedding({ids}, {v}, {h}{f', tied = {tied}' if tied else ''}, name = {own})"
    lines = [f"x = {f'scale({table}, name = {own}_scale)' if 'scaled' in tokens.cls.lower() else table}"]
    if positions.params:
        pos = positions.params.get("weight")
        if pos is None or len(pos) != 2 or pos[1] != hidden or len(positions.params) != 1:
            return None
        lines.append(f"x = x + embedding({stack.name}_positions, {sz.size(pos[0], 'embedding rows')}, {h}, "
                     f"name = {stack.name}_embed_positions)")
    m = stack.child("layernorm_embedding")      # BART's norm of the embeddings
    if m is not None and m.param_count():
        lines.append(f"x = {norm_call(replace(m, name=f'{stack.name}_layernorm_embedding'), 'x')}")
    n = len(layers.children)
    count = "l" if sz.probe.symbol_values().get("l") == n else str(n)
    if count == "l":
        sz.used.add("l")
    lines += [f"repeat {count} as {stack.name} {{   # {layers.children[0].cls}", *("  " + t for t in body), "}"]
    final = stack.child("layer_norm")
    if final is not None and final.param_count():
        lines.append(f"x = {norm_call(replace(final, name=f'{stack.name}_layer_norm'), 'x')}")
    return lines


def bart_body(root: Module, sz) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of a BART-like encoder-decoder base model (``M2M100Model``: no head; the
    decoder's output returned), the decoder's token table tied to the encoder's; else None."""
    enc, dec = root.child("encoder"), root.child("decoder")
    if enc is None or dec is None or enc.child("embed_tokens") is None or dec.child("embed_tokens") is None:
        return None
    first = enc.child("embed_tokens")
    if dec.child("embed_tokens").tied.get("weight") != first.path:
        return None
    lines_enc = _bart_stack(enc, sz, "tokens", "s", False, None)
    lines_dec = _bart_stack(dec, sz, "decoder_tokens", "t", True, f"{enc.name}_embed_tokens")
    if lines_enc is None or lines_dec is None:
        return None
    if BART_BLOCK not in sz.defined:
        sz.defined.append(BART_BLOCK)
    sz.used.add("t")
    inputs = ["input tokens[b, s]: index", "input decoder_tokens[b, t]: index"]
    inputs += [f"input {s.name}_positions[{n}]: index" for s, n in ((enc, "s"), (dec, "t"))
               if s.child("embed_positions").params]
    return inputs, [*lines_enc, "enc = x   # the encoder's output, read by every decoder layer's cross-attention",
                    *lines_dec, "return x"]
