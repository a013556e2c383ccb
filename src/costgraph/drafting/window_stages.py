"""A Swin layer (shifted-window attention, Liu et al. 2021) of a staged vision Transformer, drafted from its traced
modules (issue 28 items 1 and 2; task k28conv12). Torch-free: module facts and integers only.

transformers 5.24 modeling_swin.py ``SwinLayer.forward``: ``layernorm_before``; the ``[B, R, R, C]`` map rolled by
the shift (``torch.roll``: no FLOPs) and cut into ``(R/W)²`` windows of ``W²`` tokens (``window_partition``);
``attention`` on each window (``SwinAttention``: ``q_proj``, ``k_proj``, ``v_proj`` C → C with ``qkv_bias``,
``a`` heads of ``C/a``, the scores plus ``relative_position_bias``, a ``[(2W−1)², a]`` table gathered into ``[a, W²,
W²]``, plus the shifted windows' mask: no matrix FLOPs, then ``o_proj``); the windows merged back
(``window_reverse``, the reverse roll) and added to the input; ``layernorm_after``, ``mlp`` (``fc1`` C →
mlp_ratio·C, activation, ``fc2``), added. ``SwinPatchMerging`` between stages: the 2×2 neighbours side by side (a
``torch.cat``: ``merge_tokens(x, 4)``), ``norm`` over 4C, ``reduction`` 4C → 2C without bias. The drafted window
statements are ``windows``/``unwindows`` of :mod:`costgraph.ops.conv_stages` around the bundled ``gqa_attention``
(no rotary, every key of the window). A stage's side R is ``image / (2^(i−1)·p)`` at stage i; the windows are W a
side where R divides by W (the probes' images are chosen so: :meth:`costgraph.drafting.probe.Probe.make`); where R
≤ W transformers shrinks the window to R (``set_shift_and_window_size``), which the draft does not follow.
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer


def _find(m: Module | None, *paths: str) -> Module | None:
    """:meth:`Module.find` of ``m``, None where ``m`` is None."""
    return m.find(*paths) if m is not None else None


def _parts(layer: Module) -> tuple[Module, ...] | None:
    """(q, o, fc1, fc2, the module holding the MLP's activation) of a Swin layer: transformers 5.24 modeling_swin.py's
    names (``attention.q_proj``, ``attention.o_proj``, ``mlp.fc1``, ``mlp.fc2``) or those of its copies,
    modeling_donut_swin.py's and modeling_maskformer_swin.py's (``attention.self.query``, ``attention.output.dense``,
    ``intermediate.dense``, ``output.dense``); None where one is missing."""
    att = layer.child("attention")
    found = (_find(att, "q_proj", "self.query"), _find(att, "o_proj", "output.dense"),
             _find(layer, "mlp.fc1", "intermediate.dense"), _find(layer, "mlp.fc2", "output.dense"),
             _find(layer, "mlp", "intermediate"))
    return found if all(x is not None for x in found) else None


def is_swin_layer(layer: Module) -> bool:
    """A layer with ``layernorm_before``, ``attention`` (holding a relative position table), ``layernorm_after`` and
    an MLP (:func:`_parts`)."""
    att = layer.child("attention")
    return all(layer.child(n) is not None for n in ("layernorm_before", "layernorm_after")) and att is not None \
        and _table(att) is not None and _parts(layer) is not None


def _table(att: Module) -> tuple[int, int] | None:
    """(rows, heads) of the attention's ``relative_position_bias_table``, else None."""
    m = next((m for m in att.walk() if "relative_position_bias_table" in m.params), None)
    shape = m.params["relative_position_bias_table"] if m is not None else ()
    return (shape[0], shape[1]) if len(shape) == 2 else None


def _window(rows: int) -> int | None:
    """W of a table of (2W − 1)² rows, else None."""
    side = round(rows ** 0.5)
    return (side + 1) // 2 if side * side == rows and side % 2 == 1 else None


def swin_layer_lines(layer: Module, sz: Sizer, stage: int, side: str) -> list[str] | None:
    """The statements of one Swin layer of stage ``stage`` (from 1) on tokens ``x`` ``[b, R², C]``, ``side`` the text
    of R; None where the layer is not one (:func:`is_swin_layer`) or its window or heads are no probe symbol."""
    if not is_swin_layer(layer):
        return None
    att = layer.child("attention")
    q, o, fc1, fc2, mlp = _parts(layer)
    rows, heads = _table(att)
    window = _window(rows)
    values = sz.probe.symbol_values()
    sym = f"a_{stage}"
    if window is None or values.get("W") != window or values.get(sym) != heads:
        return None
    sz.used.update({"W", sym})
    width = layer.child("layernorm_before").params["weight"][0]
    c = sz.size(width, "stage width")
    qkv_bias, out_bias = ("true" if "bias" in m.params else "false" for m in (q, o))
    n = f"({side} / W) * ({side} / W)"
    head = f"{c} / {sym}" if " " not in c else f"({c}) / {sym}"
    act = next((k for k in ("gelu", "relu", "silu") if any(k in x.cls.lower() for x in mlp.children)), None)
    if act is None:
        return None
    y = f"y_{stage}"     # a name of the stage's own: a repeat hands on each name's shape unchanged
    return [f"{y} = windows(layernorm(x, name = layernorm_before), {n})   # [b (R/W)^2, W^2, C], R = {side}",
            f"{y} = gqa_attention({y}, {sym}, {sym}, {head}, qkv_bias = {qkv_bias}, out_bias = {out_bias}, "
            "rotary = false, name = attention)",
            f"param relative_position_bias_table[(2 * W - 1) * (2 * W - 1), {sym}]   # gathered into each window's "
            "bias (no FLOPs)",
            f"x = x + unwindows({y}, {n})",
            f"{y} = linear(layernorm(x, name = layernorm_after), {sz.size(fc1.params['weight'][0], 'MLP width')}, "
            f"bias = {'true' if 'bias' in fc1.params else 'false'}, name = fc1)",
            f"x = x + linear({act}({y}), {c}, bias = {'true' if 'bias' in fc2.params else 'false'}, name = fc2)"]


def _continuous_bias(att: Module) -> tuple[Module, Module, Module] | None:
    """(the MLP's first Linear, its second, the module holding ``logit_scale``) of a Swin V2 attention, else None."""
    mlp = next((m for m in att.walk() if m.name == "continuous_position_bias_mlp"), None)
    scale = next((m for m in att.walk() if "logit_scale" in m.params), None)
    lins = [c for c in (mlp.children if mlp is not None else []) if "weight" in c.params]
    return (lins[0], lins[1], scale) if len(lins) == 2 and scale is not None else None


def swinv2_layer_lines(layer: Module, sz: Sizer, stage: int, side: str) -> list[str] | None:
    """The statements of one Swin V2 layer (Liu et al. 2022; transformers 5.24 modeling_swinv2.py ``Swinv2Layer``):
    post-norm (``layernorm_before`` on the attention's output before the residual sum, ``layernorm_after`` on the
    MLP's), a key without bias, cosine attention (``F.normalize`` of q and k: no matrix FLOPs) scaled by
    ``logit_scale [a, 1, 1]``, and the bias of each head from ``continuous_position_bias_mlp`` (Linear 2 → 512 with
    bias, ReLU, Linear 512 → a without) on the constant ``relative_coords_table`` ``[1, 2W − 1, 2W − 1, 2]`` (a
    buffer: the draft's input ``relative_coords``), 16·sigmoid of it gathered per window pair (no matrix FLOPs).
    None where the layer is not one."""
    att = layer.child("attention")
    parts = _parts(layer) if att is not None else None
    bias = _continuous_bias(att) if att is not None else None
    values = sz.probe.symbol_values()
    sym = f"a_{stage}"
    if parts is None or bias is None or any(layer.child(n) is None for n in ("layernorm_before", "layernorm_after")):
        return None
    q, o, fc1, fc2, mlp = parts
    k = _find(att, "self.key")
    first, second, scale = bias
    heads, hidden = second.params["weight"]
    if k is None or values.get(sym) != heads or scale.params["logit_scale"][0] != heads:
        return None
    sz.used.update({"W", sym})
    width = layer.child("layernorm_before").params["weight"][0]
    c = sz.size(width, "stage width")
    n = f"({side} / W) * ({side} / W)"
    head = f"{c} / {sym}" if " " not in c else f"({c}) / {sym}"
    act = next((a for a in ("gelu", "relu", "silu") if any(a in x.cls.lower() for x in mlp.children)), None)
    if act is None or "bias" in second.params:
        return None
    y, has = f"y_{stage}", (lambda m: "true" if "bias" in m.params else "false")
    return [f"{y} = windows(x, {n})   # [b (R/W)^2, W^2, C], R = {side}",
            f"{y} = gqa_attention({y}, {sym}, {sym}, {head}, qkv_bias = {has(q)}, k_bias = {has(k)}, "
            f"out_bias = {has(o)}, rotary = false, name = attention)",
            f"param logit_scale[{sym}]   # [a, 1, 1]: the cosine scores' scale per head",
            f"cpb_{stage} = linear(relu(linear(relative_coords, {hidden}, bias = {has(first)}, name = cpb_fc1)), "
            f"{sym}, bias = false, name = cpb_fc2)   # the bias of each head at each of the (2W-1)^2 offsets",
            f"x = x + layernorm(unwindows({y}, {n}), name = layernorm_before)",
            f"{y} = linear(x, {sz.size(fc1.params['weight'][0], 'MLP width')}, bias = {has(fc1)}, name = fc1)",
            f"x = x + layernorm(linear({act}({y}), {c}, bias = {has(fc2)}, name = fc2), name = layernorm_after)"]
