"""A SegFormer layer (Xie et al. 2021; PVT v2's alike) of a staged vision Transformer, drafted from its traced
modules (issue 28 items 1 and 2; task k28conv12). Torch-free: module facts and integers only.

transformers 5.24 modeling_segformer.py ``SegformerLayer.forward``: ``layernorm_before``; ``attention``
(``SegformerAttention``: ``q_proj`` on the tokens, ``k_proj`` and ``v_proj`` on the tokens reduced by
``sequence_reduction`` where the stage's ratio r is above 1: the ``[B, C, R, R]`` map, a Conv2d of kernel = stride
= r, flattened, a LayerNorm: ``(R/r)²`` keys; a heads of C/a; every query against every key, then ``o_proj``), added;
``layernorm_after``, ``mlp`` (``SegformerMixMLP``: ``fc1`` C → mlp_ratio·C, a 3×3 depthwise Conv2d on the map
(``dwconv.dwconv``, padding 1), the activation, ``fc2``), added. modeling_pvt_v2.py ``PvtV2BlockLayer`` is the same
layer under other names (``layer_norm_1``, ``query``, ``key``, ``value``, ``proj``, ``spatial_reduction`` and the
attention's ``layer_norm``, ``dense1``, ``dense2``, ``layer_norm_2``; its ``linear_attention`` variant is not
drafted). modeling_pvt.py ``PvtLayer`` (PVT v1; task k28vision2): the attention's parts under ``attention.self``
(``query``, ``key``, ``value``, ``sequence_reduction`` and ``layer_norm``) and ``attention.output.dense``, its
``PvtFFN`` ``dense1``, the activation, ``dense2`` with no depthwise convolution; modeling_glpn.py ``GLPNLayer`` the
same attention with the reduction under ``attention.self.sr`` and SegFormer's MLP. The ratios and kernel sizes are
the config's lists (``sr_ratios``, ``sequence_reduction_ratios``, ``mlp_ratios``), written as numbers.
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer


def _find(m: Module | None, *paths: str) -> Module | None:
    """:meth:`Module.find` of ``m``, None where ``m`` is None."""
    return m.find(*paths) if m is not None else None


def segformer_layer_lines(layer: Module, sz: Sizer, stage: int, side: str) -> list[str] | None:
    """The statements of one SegFormer layer of stage ``stage`` (from 1) on tokens ``x`` ``[b, R², C]``, ``side`` the
    text of R; None where the layer is not one or its heads are not the probe's ``a_{stage}``."""
    att, mlp = layer.child("attention"), layer.child("mlp")
    parts = [_find(att, *n) for n in (("q_proj", "query", "self.query"), ("k_proj", "key", "self.key"),
                                      ("v_proj", "value", "self.value"), ("o_proj", "proj", "output.dense"))] \
        + [_find(mlp, *n) for n in (("fc1", "dense1"), ("dwconv.dwconv",), ("fc2", "dense2"))]
    norms = [_find(layer, *n) for n in (("layernorm_before", "layer_norm_1"), ("layernorm_after", "layer_norm_2"))]
    plain = mlp is not None and not any(m.cls == "Conv2d" for m in mlp.walk())   # PVT v1's PvtFFN: no dwconv
    if att is None or mlp is None or any(p is None for i, p in enumerate(parts + norms) if not (plain and i == 5)):
        return None
    q, k, v, o, fc1, dw, fc2 = parts
    heads, sym = (att.attrs.get("num_attention_heads") or _find(att, "self").attrs.get("num_attention_heads")
                  if _find(att, "self") is not None else att.attrs.get("num_attention_heads")), f"a_{stage}"
    act = next((a for a in ("gelu", "relu", "silu") if any(a in x.cls.lower() for x in mlp.children)), None)
    if heads != sz.probe.symbol_values().get(sym) or act is None or not plain and dw.attrs.get("kernel_size") != 3:
        return None
    sz.used.add(sym)
    c = sz.size(norms[0].params["weight"][0], "stage width")
    wide = sz.size(fc1.params["weight"][0], "MLP width")
    y, kv = f"y_{stage}", f"kv_{stage}"
    has = (lambda m: "true" if "bias" in m.params else "false")
    lines = [f"{y} = layernorm(x, name = layernorm_before)"]
    red = _find(att, "sequence_reduction", "spatial_reduction",     # SegFormer's, PVT v2's
                "self.sequence_reduction", "self.sr")             # PVT v1's, GLPN's
    if red is not None:
        conv, norm = (_find(red, "sequence_reduction"), _find(red, "layer_norm")) if red.children else \
            (red, _find(att, "layer_norm", "self.layer_norm"))
        r = conv.attrs.get("kernel_size") if conv is not None else None
        if norm is None or not isinstance(r, int) or conv.attrs.get("stride") != r:
            return None
        lines.append(f"{kv} = layernorm(flatten_patches(conv2d(unflatten_patches({y}, {side}), {c}, kernel = {r}, "
                     f"stride = {r}, bias = {has(conv)}, name = sr)), name = sr_norm)   # (R/{r})^2 keys")
    else:
        lines.append(f"{kv} = {y}")
    head = f"{c} / {sym}" if " " not in c else f"({c}) / {sym}"
    lines += [f"q_{stage} = split_heads(linear({y}, {c}, bias = {has(q)}, name = q_proj), {sym})",
              f"{y} = merge_heads(matmul(softmax(scale(matmul(q_{stage}, transpose(split_heads(linear({kv}, {c}, "
              f"bias = {has(k)}, name = k_proj), {sym})))), fp32 = true), split_heads(linear({kv}, {c}, "
              f"bias = {has(v)}, name = v_proj), {sym})))   # a heads of {head}",
              f"x = x + linear({y}, {c}, bias = {has(o)}, name = o_proj)",
              f"{y} = linear(layernorm(x, name = layernorm_after), {wide}, bias = {has(fc1)}, name = fc1)",
              f"{y} = {act}({y})" if plain else
              f"{y} = {act}(flatten_patches(conv2d(unflatten_patches({y}, {side}), {wide}, kernel = 3, padding = 1, "
              f"groups = {wide}, bias = {has(dw)}, name = dwconv)))",
              f"x = x + linear({y}, {c}, bias = {has(fc2)}, name = fc2)"]
    return lines
