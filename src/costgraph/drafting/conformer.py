"""A Conformer layer drafted from its traced modules (issue 28 item 2): wav2vec2-conformer's
``Wav2Vec2ConformerEncoderLayer`` (transformers 5.24 modeling_wav2vec2_conformer.py), its blocks read by
:func:`costgraph.drafting.recurrent.mixer_call` (the attention with relative positions and the convolution module of
:mod:`costgraph.drafting.speech_attention`, the feed-forwards as ``mlp``).
"""

from __future__ import annotations

from .blocks import norm_call
from .facts import Module
from .fast_conformer import layer_lines as fast_conformer_lines
from .recurrent import mixer_call

#: a Conformer layer's modules, in its forward's order (Wav2Vec2ConformerEncoderLayer)
CONFORMER = ("ffn1_layer_norm", "ffn1", "self_attn_layer_norm", "self_attn", "conv_module", "ffn2_layer_norm", "ffn2",
             "final_layer_norm")


def conformer_layer_lines(layer: Module, sz, rotary: bool) -> list[str] | None:
    """The statements of a Conformer layer (Gulati et al. 2020 §2; transformers 5.24 modeling_wav2vec2_conformer.py
    ``Wav2Vec2ConformerEncoderLayer.forward``): a half-step feed-forward (``ffn1(ffn1_layer_norm(x)) * 0.5 + x``), the
    attention on ``self_attn_layer_norm(x)`` added, the convolution module (its own LayerNorm first) added, the second
    half-step feed-forward, ``final_layer_norm``. A FastConformer layer (Parakeet's, LASR's) is read by
    :func:`costgraph.drafting.fast_conformer.layer_lines`. None where ``layer`` is neither (a module missing or not
    read)."""
    parts = {c.name: c for c in layer.children}
    if any(n not in parts for n in CONFORMER) or layer.params:
        return fast_conformer_lines(layer, sz, rotary, mixer_call)
    calls = {n: mixer_call(parts[n], "y", sz, rotary) for n in ("ffn1", "self_attn", "conv_module", "ffn2")}
    if any(c is None for c in calls.values()):
        return None
    norm = {n: norm_call(parts[n], "x") for n in ("ffn1_layer_norm", "self_attn_layer_norm", "ffn2_layer_norm")}
    ffn = {n: "scale(" + calls[n].replace("(y,", f"({norm[n + '_layer_norm']},", 1) + ")" for n in ("ffn1", "ffn2")}
    return [f"x = x + {ffn['ffn1']}   # x 0.5: a half step",
            f"x = x + {calls['self_attn'].replace('(y,', '(' + norm['self_attn_layer_norm'] + ',', 1)}",
            f"x = x + {calls['conv_module'].replace('(y,', '(x,', 1)}",
            f"x = {norm_call(parts['final_layer_norm'], 'x + ' + ffn['ffn2'])}   # x 0.5: a half step"]
