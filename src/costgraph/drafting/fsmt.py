"""Recognise FSMT's encoder-decoder (issue 28 item 2, task k28text2): BART's layers (:func:`.seq2seq._bart_stack`)
with a token table of its own per stack and the decoder's logits inside the base model.

transformers 5.24 modeling_fsmt.py: ``FSMTEncoder.__init__`` builds ``embed_tokens = nn.Embedding(
config.src_vocab_size, config.d_model, config.pad_token_id)``, ``FSMTDecoder.__init__`` its own ``nn.Embedding(
config.tgt_vocab_size, config.d_model, padding_idx)`` (no table shared: two vocabularies, symbols ``V_src`` and ``V``)
and ``output_projection = nn.Linear(config.d_model, config.tgt_vocab_size, bias=False)``, its weight tied to the
decoder's table where the config ties word embeddings (``FSMTModel._tied_weights_keys``; ``tie_word_embeddings``
False by default in configuration_fsmt.py: then a weight of its own), called at the end of ``FSMTDecoder.forward``
(``x = self.output_projection(x)``: the base model returns logits, 2·b·t·h·V FLOPs). Each stack's ``embed_positions``
is a ``SinusoidalPositionalEmbedding`` (an ``nn.Embedding`` whose weight is a parameter without gradient, counted by
``sum(p.numel())``) of ``config.max_position_embeddings + padding_idx + 1`` rows: the probes keep the config's
``pad_token_id`` (:data:`KEEPS_PAD`), so that the rows read ``s_max + pad_token_id + 1`` with the config's id.
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import _linear
from .facts import Module
from .seq2seq import BART_BLOCK, _bart_stack

#: the model types whose position tables' rows follow ``pad_token_id`` (FSMT's ``max_position_embeddings +
#: padding_idx + 1``): the probes keep the config's id instead of setting it to 0
KEEPS_PAD = ("fsmt",)


def fsmt_body(root: Module, sz) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of an ``FSMTModel``: an encoder and a decoder of BART-like post-norm layers,
    each stack with its own token table (no ``tied``), the decoder's ``output_projection`` h → V (tied to its table
    where the model ties it);
    else None (any other model: the tables tied, or no ``output_projection``)."""
    enc, dec = root.child("encoder"), root.child("decoder")
    if enc is None or dec is None or root.params or any(c.param_count() for c in root.children
                                                         if c.name not in ("encoder", "decoder")):
        return None
    tokens, out = dec.child("embed_tokens"), dec.child("output_projection")
    if tokens is None or out is None or enc.child("embed_tokens") is None \
            or tokens.tied.get("weight") is not None or out.tied.get("weight") not in (None, tokens.path):
        return None
    proj = _linear(out)
    if proj is None or len(tokens.params.get("weight", ())) != 2 or proj != (*reversed(tokens.params["weight"]), False):
        return None
    bare = replace(dec, children=[c for c in dec.children if c is not out])
    lines_enc = _bart_stack(enc, sz, "tokens", "s", False, None)
    lines_dec = _bart_stack(bare, sz, "decoder_tokens", "t", True, None)
    if lines_enc is None or lines_dec is None:
        return None
    if BART_BLOCK not in sz.defined:
        sz.defined.append(BART_BLOCK)
    sz.used.add("t")
    inputs = ["input tokens[b, s]: index", "input decoder_tokens[b, t]: index"]
    inputs += [f"input {s.name}_positions[{n}]: index" for s, n in ((enc, "s"), (dec, "t"))
               if s.child("embed_positions").params]
    tied = f"tied = {dec.name}_embed_tokens, " if out.tied.get("weight") else ""
    logits = f"linear(x, {sz.size(proj[1], 'vocabulary size')}, bias = false, {tied}name = output_projection)"
    return inputs, [*lines_enc, "enc = x   # the encoder's output, read by every decoder layer's cross-attention",
                    *lines_dec, f"return {logits}   # FSMTDecoder.forward: x = self.output_projection(x)"]
