"""BERT's layer as transformers writes it (RoBERTa, ELECTRA, XLM-R, ERNIE ... share it): post-norm,
the norms inside the ``attention.output`` and ``output`` submodules; and its pre-norm form (RoBERTa-PreLayerNorm,
XLM-RoBERTa-XL, MegatronBERT: a LayerNorm before each block, the outputs adding the residual).

``attention`` = ``self`` (query, key, value) + ``output`` (dense, LayerNorm, dropout);
``intermediate`` = dense + activation; ``output`` = dense, LayerNorm, dropout. Written as
``x = layernorm(x + gqa_attention(x, ...))`` and ``x = layernorm(x + mlp(x, ...))`` (Devlin et al.
2019, §3; the projections' names are the std blocks', the costs the same).
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import attention_call, is_norm, mlp_call, norm_call
from .facts import Module


def _dropout(m: Module, text: str, name: str) -> str:
    drop = m.child("dropout")
    return f"dropout({text}, name = {name})" if drop is not None and drop.attrs.get("p", 0) else text


def bert_lines(layer: Module, sz, rotary: bool) -> list[str] | None:
    """The two statements of a BERT-style layer, or None when ``layer`` is not one."""
    att, inter, out = layer.child("attention"), layer.child("intermediate"), layer.child("output")
    if att is None or inter is None or out is None:
        return None
    if att.child("attn") is not None and att.child("self") is None:
        bert = _mpnet_as_bert(layer, att)
        return bert_lines(bert, sz, rotary) if bert is not None else None
    selfatt, attout = att.child("self", "attention"), att.child("output")   # Data2VecVision's: attention.attention
    if selfatt is None or attout is None or attout.child("dense") is None or out.child("dense") is None:
        return None
    if inter.child("dense") is None:
        return None
    n1, n2 = attout.child("LayerNorm"), out.child("LayerNorm")
    if n1 is None and n2 is None:
        return _pre_norm_lines(layer, sz, rotary)
    if n1 is None or n2 is None or not (is_norm(n1) and is_norm(n2)):
        return None
    a, f = _blocks(layer, sz, rotary, "x")
    if a is None or f is None:
        return None
    adapters = _adapter_lines(out, sz)
    if adapters is None:
        return None
    n1 = replace(n1, name=f"{att.name}_{n1.name}")
    n2 = replace(n2, name=f"{out.name}_{n2.name}")
    return [f"x = {norm_call(n1, 'x + ' + _dropout(attout, a, 'attention_dropout'))}",
            f"x = {norm_call(n2, 'x + ' + _dropout(out, f, 'output_dropout'))}", *adapters]


def _adapter_lines(out: Module, sz) -> list[str] | None:
    """X-MOD's language adapters after the output's LayerNorm (transformers 5.24 modeling_xmod.py
    ``XmodOutput.lang_adapter``, with ``adapter_reuse_layer_norm`` and ``ln_before_adapter``, its defaults: the
    LayerNorm's output is the residual, each language's ``XmodAdapter`` (``dense1`` H → H / r, the activation,
    ``dense2`` back, with biases) runs on its own sequences): the adapter the traced language ran as ``x = x +
    mlp(x, ...)``, the other languages' as parameters only; ``[]`` for an output without adapters, None for other
    forms."""
    held = out.child("adapter_modules")
    if held is None:
        return []
    if not held.children or out.child("adapter_layer_norm") is not None \
            or out.attrs.get("ln_before_adapter") is not True or out.attrs.get("adapter_reuse_layer_norm") is not True:
        return None
    ran = [c for c in held.children if c.order is not None and not c.attrs.get("empty_input")]
    if len(ran) != 1:
        return None
    first = ran[0]
    shapes = {c.name: c.params for c in first.children if c.params}
    width = shapes.get("dense1", {}).get("weight", (0, 0))[0]
    hidden = shapes.get("dense2", {}).get("weight", (0, 0))[0]
    if [c.name for c in first.children if c.params or c.children] != ["dense1", "dense2"] or first.params \
            or shapes != {"dense1": {"weight": (width, hidden), "bias": (width,)},
                          "dense2": {"weight": (hidden, width), "bias": (hidden,)}} \
            or any(c.signature() != first.signature() for c in held.children):
        return None
    name = "".join(ch if ch.isalnum() else "_" for ch in f"adapter_{first.name}")
    call = f"mlp(x, {sz.size(width, 'adapter width')}, dropout = false, name = {name})"
    lines = [f"x = x + {_dropout(out, call, 'adapter_dropout')}   # {first.cls}: the language the sequences are in"]
    for c in held.children:
        if c is first:
            continue
        for k in c.children:
            for p, shape in k.params.items():
                label = "".join(ch if ch.isalnum() else "_" for ch in f"adapter_{c.name}_{k.name}_{p}")
                dims = ", ".join(sz.size(n, f"{k.path}.{p}") for n in shape)
                lines.append(f"param {label}[{dims}]   # another language's adapter (parameters only)")
    return lines


def _blocks(layer: Module, sz, rotary: bool, arg: str) -> tuple[str | None, str | None]:
    """The attention (``self`` and ``attention.output.dense``) and the MLP (``intermediate.dense``, its
    activation, ``output.dense``) of a BERT-style layer as std blocks of ``arg``."""
    att, inter, out = layer.child("attention"), layer.child("intermediate"), layer.child("output")
    selfatt, attout = att.child("self", "attention"), att.child("output")
    core = Module(att.path, att.name, att.cls, attrs=dict(selfatt.attrs),
                  children=[*selfatt.children, attout.child("dense")])
    if not isinstance(core.attrs.get("num_heads"), int):
        heads = selfatt.attrs.get("num_attention_heads")
        if isinstance(heads, int):
            core.attrs["num_heads"] = heads
    ffn = Module(f"{layer.path}.mlp", "mlp", "BertMLP", attrs=dict(inter.attrs),
                 children=[replace(inter.child("dense"), name="fc1"), replace(out.child("dense"), name="fc2"),
                           *(c for c in inter.children if c.name not in ("dense", "LayerNorm"))])
    return attention_call(core, arg, sz, rotary), mlp_call(ffn, arg, sz)


def _pre_norm_lines(layer: Module, sz, rotary: bool) -> list[str] | None:
    """A pre-norm BERT-style layer: a LayerNorm before the attention and one before the MLP, each output adding
    the residual itself (transformers 5.24 modeling_roberta_prelayernorm.py: ``attention.LayerNorm`` and
    ``intermediate.LayerNorm``; modeling_xlm_roberta_xl.py: ``attention.self_attn_layer_norm`` and the layer's
    ``LayerNorm``, called in ``feed_forward_chunk``; modeling_megatron_bert.py: ``attention.ln`` and the layer's
    ``ln``; modeling_data2vec_vision.py: the layer's ``layernorm_before`` and ``layernorm_after``, its ``attention.attention``
    and the layer scale ``lambda_1``, ``lambda_2 [h]`` on each block's output, ``Data2VecVisionLayer.forward``). Written
    ``x = x + gqa_attention(layernorm(x))`` and ``x = x + mlp(layernorm(x))``; None when the norms
    are not found so."""
    att, inter, out = layer.child("attention"), layer.child("intermediate"), layer.child("output")
    n1 = att.child("LayerNorm", "self_attn_layer_norm", "ln") or layer.child("layernorm_before")
    n2 = inter.child("LayerNorm") or layer.child("LayerNorm", "ln", "layernorm_after")
    if n1 is None or n2 is None or not (is_norm(n1) and is_norm(n2)) or out.child("LayerNorm") is not None \
            or sum(1 for c in layer.walk() if is_norm(c)) != 2:
        return None
    a, f = _blocks(layer, sz, rotary, "x")
    if a is None or f is None:
        return None
    n1 = norm_call(replace(n1, name=f"{att.name}_{n1.name}") if n1 in att.children else n1, "x")
    n2 = norm_call(replace(n2, name=f"{inter.name}_{n2.name}") if n2 in inter.children else n2, "x")
    a, f = _blocks(layer, sz.quiet(), rotary, n1)[0], _blocks(layer, sz.quiet(), rotary, n2)[1]
    scales = [n for n in ("lambda_1", "lambda_2") if n in layer.params]     # Data2VecVision's layer scale
    if sorted(layer.params) != scales or len(scales) not in (0, 2):
        return None
    a, f = (f"{a} * lambda_1", f"{f} * lambda_2") if scales else (a, f)
    return [*(f"param {n}[{sz.size(layer.params[n][0], 'layer scale width')}]" for n in scales),
            f"x = x + {_dropout(att.child('output'), a, 'attention_dropout')}",
            f"x = x + {_dropout(out, f, 'output_dropout')}"]


def _mpnet_as_bert(layer: Module, att: Module) -> Module | None:
    """MPNet's layer in BERT's form, or None: transformers 5.24 modeling_mpnet.py ``MPNetAttention`` holds ``attn``
    (``MPNetSelfAttention``: ``q``, ``k``, ``v`` and the output ``o``, with biases) and the ``LayerNorm`` of
    ``LayerNorm(dropout(o(...)) + hidden_states)``, where BERT's ``attention`` holds ``self`` (query, key, value) and
    ``output`` (``dense``, ``LayerNorm``); its relative position bias, computed once by ``MPNetEncoder`` and added
    to the scores, is no FLOP of the matmul convention (its table a ``param`` outside the layers)."""
    attn, norm = att.child("attn"), att.child("LayerNorm")
    o = attn.child("o") if attn is not None else None
    if o is None or norm is None or att.params or any(c.param_count() for c in att.children if c not in (attn, norm)):
        return None
    selfatt = replace(attn, name="self", children=[c for c in attn.children if c is not o])
    output = Module(f"{att.path}.output", "output", "MPNetAttentionOutput", children=[replace(o, name="dense"), norm])
    attention = replace(att, children=[selfatt, output])
    return replace(layer, children=[attention if c is att else c for c in layer.children])
