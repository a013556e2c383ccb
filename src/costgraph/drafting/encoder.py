"""BERT's layer as transformers writes it (RoBERTa, ELECTRA, XLM-R, ERNIE ... share it): post-norm,
the norms inside the ``attention.output`` and ``output`` submodules.

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
    selfatt, attout = att.child("self"), att.child("output")
    if selfatt is None or attout is None or attout.child("dense") is None or out.child("dense") is None:
        return None
    n1, n2 = attout.child("LayerNorm"), out.child("LayerNorm")
    if n1 is None or n2 is None or not (is_norm(n1) and is_norm(n2)) or inter.child("dense") is None:
        return None
    core = Module(att.path, att.name, att.cls, attrs=dict(selfatt.attrs),
                  children=[*selfatt.children, attout.child("dense")])
    if not isinstance(core.attrs.get("num_heads"), int):
        heads = selfatt.attrs.get("num_attention_heads")
        if isinstance(heads, int):
            core.attrs["num_heads"] = heads
    a = attention_call(core, "x", sz, rotary)
    ffn = Module(f"{layer.path}.mlp", "mlp", "BertMLP", attrs=dict(inter.attrs),
                 children=[replace(inter.child("dense"), name="fc1"), replace(out.child("dense"), name="fc2"),
                           *(c for c in inter.children if c.name != "dense")])
    f = mlp_call(ffn, "x", sz)
    if a is None or f is None:
        return None
    n1 = replace(n1, name=f"{att.name}_{n1.name}")
    n2 = replace(n2, name=f"{out.name}_{n2.name}")
    return [f"x = {norm_call(n1, 'x + ' + _dropout(attout, a, 'attention_dropout'))}",
            f"x = {norm_call(n2, 'x + ' + _dropout(out, f, 'output_dropout'))}"]
