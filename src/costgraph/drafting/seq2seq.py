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
