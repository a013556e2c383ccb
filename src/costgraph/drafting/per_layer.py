"""Recognise per-layer embeddings (Gemma 4's and Gemma 3n's per-layer inputs, "PLE"): a second token table of
``l · p`` columns and a projection of the embeddings to ``l · p``, combined once before the layers, of which each
layer reads its ``p`` columns through a gate of its own.

transformers 5.24 modeling_gemma4.py: ``Gemma4TextModel.get_per_layer_inputs`` (``embed_tokens_per_layer``
[V_pl, l·p], scaled by √p, viewed [b, s, l, p]) and ``project_per_layer_inputs`` (``per_layer_model_projection``
h → l·p times h^-1/2, viewed [b, s, l, p], ``per_layer_projection_norm`` an RMSNorm over p, the two summed times
2^-1/2); ``Gemma4TextDecoderLayer.forward`` after the MLP's residual: ``x + post_per_layer_input_norm(
per_layer_projection(act(per_layer_input_gate(x)) · per_layer_input))`` (gate h → p, projection p → h, no biases).

The draft computes the per-layer inputs once as ``pli`` [b, s, l·p] (the norm over p on a ``split_heads`` view of
l heads) and each layer multiplies its gate's output by ``slice(pli, p)``: a view of p columns, as transformers'
``per_layer_inputs[:, :, i, :]`` (which columns changes no count). Torch-free: reads
:class:`costgraph.drafting.facts.Module` facts.
"""

from __future__ import annotations

from .blocks import _linear, activation, is_norm
from .facts import Module

#: the modules of the model (outside the layers) that make the per-layer inputs, by name
MODEL_PARTS = ("embed_tokens_per_layer", "per_layer_model_projection", "per_layer_projection_norm")
#: the modules of each layer that read them, by name
LAYER_PARTS = ("per_layer_input_gate", "per_layer_projection", "post_per_layer_input_norm")


def _layers_times(n: int, sz) -> str | None:
    """``n`` = layers × a size, as ``l * SIZE`` (the layer count is never read from a shape), else None."""
    layers = sz.probe.symbol_values().get("l")
    if not layers or n % layers:
        return None
    per = sz.size(n // layers, "per-layer input size", quiet=True)
    if not per[0].isalpha():
        return None
    sz.size(n // layers, "per-layer input size")       # recorded
    sz.used.add("l")
    return f"l * {per}"


def per_layer_inputs(pre: list[Module], sz) -> tuple[list[Module], list[str]] | None:
    """(the modules read, the statements making ``pli``) for a model with per-layer embeddings among the modules
    called before its layers (``pre``, in call order), or None. The statements follow ``x = <embeddings>``."""
    by = {m.name: m for m in pre}
    table, proj, norm = (by.get(n) for n in MODEL_PARTS)
    if None in (table, proj, norm) or not is_norm(norm) or "rms" not in norm.cls.lower():
        return None
    rows_cols, lin = table.params.get("weight", ()), _linear(proj)
    if len(rows_cols) != 2 or lin is None or lin[2] or lin[1] != rows_cols[1] or norm.params.get("weight") is None:
        return None
    p = norm.params["weight"][0]
    width = _layers_times(rows_cols[1], sz)
    if width is None or rows_cols[1] != p * sz.probe.symbol_values()["l"]:
        return None
    rows, p_text = sz.size(rows_cols[0], "per-layer embedding rows"), sz.size(p, "per-layer input size")
    scaled = "scaled" in table.cls.lower()
    ids = f"embedding(tokens, {rows}, {width}, name = {table.name})"
    lines = [
        "# per-layer inputs [b, s, l p]: a token table of their own and the embeddings projected, normalised per layer",
        f"pe = {f'scale({ids}, name = {table.name}_scale)' if scaled else ids}",
        f"pp = split_heads(scale(linear(x, {width}, bias = false, name = {proj.name}), name = {proj.name}_scale), l)",
        f"pli = scale(merge_heads(rmsnorm(pp, name = {norm.name})) + pe, name = per_layer_inputs_scale)"]
    return [table, proj, norm], lines


def per_layer_tail(layer: Module, sz) -> tuple[set, str] | None:
    """(the names of the layer's per-layer modules, the statement adding their output to ``x``), or None."""
    gate, proj, norm = (layer.child(n) for n in LAYER_PARTS)
    if None in (gate, proj, norm) or not is_norm(norm):
        return None
    g, o = _linear(gate), _linear(proj)
    act = activation(layer)
    if g is None or o is None or g[2] or o[2] or (g[1], g[0]) != o[:2] or act is None:
        return None
    p = sz.size(g[1], "per-layer input size")
    h = sz.size(o[1], "hidden size")
    y = f"linear({act}(linear(x, {p}, bias = false, name = {gate.name})) * slice(pli, {p}), {h}, bias = false, " \
        f"name = {proj.name})"
    opts = "" if "weight" in norm.params else ", weight = false"
    return set(LAYER_PARTS), f"x = x + rmsnorm({y}{opts}, name = {norm.name})"
