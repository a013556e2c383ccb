"""Recognise ProphetNet's n-gram decoder (Qi et al. 2020, "ProphetNet: Predicting Future N-gram for
Sequence-to-Sequence Pre-training", arXiv:2001.04063 §2.2) as blocks the draft defines itself.

transformers 5.24 modeling_prophetnet.py:

* ``ProphetNetDecoder.forward``: besides the main stream (token and position embeddings, [b, s, h]) it runs
  ``ngram`` predicting streams, each ``ngram_embeddings.weight[j]`` plus the position table read at ``position_ids + 1``
  (additions: no product), all concatenated along the sequence before ``embeddings_layer_norm``: every layer then runs
  on ``(1 + ngram)·s`` tokens (:func:`stream_lines`). ``ngram_embeddings`` is an ``nn.Embedding`` whose weight is read
  directly, never called: the trace sees it uncalled (:func:`streams_module`).
* ``ProphetNetNgramSelfAttention.forward``: q, k, v and the relative position logits
  (``relative_pos_embeddings``: H → num_buckets·heads) over all ``(1 + ngram)·s`` tokens; the main stream attends to
  itself (``s × s`` per head); each predicting stream attends to the main stream's keys and its own, ``2s`` keys
  (``torch.cat([main_key_states, key], 2)``); the bucket logits are gathered into the scores (a gather and an
  addition: no product); ``out_proj`` on every stream (:func:`ngram_attention_call`, :data:`NGRAM_BLOCKS`).
* ``ProphetNetForCausalLM.forward``: ``lm_head`` reads the predicting streams alone (``outputs[1]``, ``ngram·s``
  tokens; ``logits`` is its first stream's), not the main stream (:func:`head_lines`).

Torch-free: reads :class:`costgraph.drafting.facts.Module` facts.
"""

from __future__ import annotations

from .blocks import _linear
from .facts import Module

#: ProphetNetNgramSelfAttention's projections, by name
PROJECTIONS = ("query_proj", "key_proj", "value_proj", "out_proj")


def _streams(m: Module) -> int | None:
    n = m.attrs.get("ngram")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def ngram_attention_call(m: Module, arg: str, d) -> str | None:
    """``ngram_attention`` for a module of ``ngram`` predicting streams (``m.attrs``: ``ngram``, ``num_attn_heads``,
    ``num_buckets``) holding ``query_proj``, ``key_proj``, ``value_proj``, ``out_proj`` (H → H, each with a bias) and
    ``relative_pos_embeddings`` (H → num_buckets·heads, with a bias), nothing else; else None."""
    n, heads, buckets = _streams(m), m.attrs.get("num_attn_heads"), m.attrs.get("num_buckets")
    projections = [_linear(m.child(p)) for p in PROJECTIONS]
    rel = _linear(m.child("relative_pos_embeddings"))
    if n is None or not isinstance(heads, int) or not isinstance(buckets, int) or None in projections or rel is None \
            or m.params or len([c for c in m.children if c.param_count()]) != 5:
        return None
    h = projections[0][0]
    if any(p[:2] != (h, h) or not p[2] for p in projections) or rel[:2] != (h, buckets * heads) or not rel[2] \
            or h % heads:
        return None
    d.blocks.add("ngram_attention")
    sizes = [d.size(heads, "query heads"), d.size(n, "predicting streams"),
             d.size(buckets, "relative position buckets")]
    return f"ngram_attention({arg}, {', '.join(sizes)}, s, name = {m.name})"


def streams_module(root: Module, layers: Module) -> Module | None:
    """The uncalled ``ngram_embeddings`` table [ngram, H] of a decoder whose layers' self-attention runs ``ngram``
    predicting streams (:func:`ngram_attention_call`'s module), else None."""
    table = next((c for c in root.walk() if c.name == "ngram_embeddings" and c.order is None), None)
    attention = next((c for layer in layers.children for c in layer.children if _streams(c) is not None), None)
    if table is None or attention is None or len(table.params.get("weight", ())) != 2 \
            or table.params["weight"][0] != _streams(attention):
        return None
    return table


def stream_lines(table: Module, sz, position_table: str) -> list[str]:
    """The statements that append the predicting streams to ``x`` (the main stream's embeddings), before the
    embeddings' norm."""
    n, width = table.params["weight"]
    streams, h = sz.size(n, "predicting streams"), sz.size(width, "embedding width")
    return [
        f"# the {streams} predicting streams (ProphetNetDecoder.forward): ngram_embeddings[j] + the position table at",
        "# positions + 1 (additions), after the main stream along the sequence: the layers run on (1 + n_g) s tokens",
        f"param {table.name}[1, {streams}, 1, {h}]",
        f"xp = {table.name} + embedding(positions, s_max, {h}, tied = {position_table}, name = predicting_positions)",
        "x = concat_seq(x, merge_seq(xp))"]


def head_lines(table: Module, sz) -> list[str]:
    """The statements before the head: ProphetNetForCausalLM's ``lm_head`` reads the predicting streams alone."""
    streams = sz.size(table.params["weight"][0], "predicting streams")
    return ["main = slice_seq(x, s)     # the main stream: the head does not read it",
            f"x = slice_seq(x, {streams} * s)     # the predicting streams, which lm_head reads (logits: the first's)"]


#: the block a draft defines itself
NGRAM_BLOCKS = {"ngram_attention": """# ProphetNet's n-gram self-attention (Qi et al. 2020 §2.2; transformers 5.24 ProphetNetNgramSelfAttention):
# x holds the main stream's seq tokens, then `streams` predicting streams of seq tokens each. q (scaled), k, v and the
# relative position logits (H -> buckets * heads, gathered into the scores by bucket: no product) on every token; the
# main stream attends to itself, each predicting stream to the main stream's keys and its own (2 seq keys).
block ngram_attention(x[B, T, H], heads, streams, buckets, seq) {
  q = split_heads(scale(linear(x, H, name = query_proj)), heads)
  k = split_heads(linear(x, H, name = key_proj), heads)
  v = split_heads(linear(x, H, name = value_proj), heads)
  r = linear(x, buckets * heads, name = relative_pos_embeddings)
  qm = slice_seq(q, seq)
  qp = split_seq(slice_seq(q, streams * seq), streams)          # [B, heads, streams, seq, d]
  km = slice_seq(k, seq)
  kp = split_seq(slice_seq(k, streams * seq), streams)
  vm = slice_seq(v, seq)
  vp = split_seq(slice_seq(v, streams * seq), streams)
  ym = matmul(softmax(matmul(qm, transpose(km))), vm)
  kk = concat_seq(split_seq(km, 1), kp)                         # [B, heads, streams, 2 seq, d]: main keys, then own
  vv = concat_seq(split_seq(vm, 1), vp)
  yp = merge_seq(matmul(softmax(matmul(qp, transpose(kk))), vv))
  return linear(merge_heads(concat_seq(ym, yp)), H, name = out_proj)
}"""}
