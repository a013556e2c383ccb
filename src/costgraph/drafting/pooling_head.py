"""The attention-pooling heads of vision towers (SigLIP's MAP, AIMv2's), drafted from their traced modules (issue 28
item 2).

transformers 5.24 modeling_siglip.py ``SiglipMultiheadAttentionPoolingHead``: a learned ``probe [1, 1, h]``
repeated over the batch (``probe.repeat(batch_size, 1, 1)``) attends over the encoder's output through PyTorch's
``nn.MultiheadAttention(h, heads, batch_first=True)(probe, x, x)``; key is value, so ``F.multi_head_attention_forward``
(torch/nn/functional.py ``_in_projection_packed``) applies the packed ``in_proj_weight [3h, h]`` as a query part
``[h, h]`` on the probe and a key-value part ``[2h, h]`` on the sequence; the query is scaled before QKᵀ, the
softmax and the product with V are ``bmm`` (``need_weights`` defaults to True: the attention weights are also averaged
over the heads, no FLOPs counted), then ``out_proj`` (its weight read by the functional form: the Linear is never
called); then a residual ``layernorm`` + ``mlp`` (SiglipMLP) and the one token ``[:, 0]``. The statements are those of
the bundled ``models/siglip.cg`` block ``siglip_map_head`` (the repeat written as a gather of the probe's one row, b
times: ``input probe_rows[b, 1]``).

AIMv2 (transformers 5.24 modeling_aimv2.py ``Aimv2AttentionPoolingHead.forward``): its ``cls_token [1, 1, h]``,
expanded over the batch, is the query itself (no projection) of ``F.scaled_dot_product_attention`` over ``k_proj`` and
``v_proj`` of the sequence (biases as ``qkv_bias``), the one token's heads merged (the mean over that one position
costs nothing counted), then ``output_proj`` (bias) → ``[b, h]``. Torch-free: module facts only.
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer


def map_head(root: Module) -> Module | None:
    """The module holding a learned ``probe`` and an ``nn.MultiheadAttention`` it calls (SigLIP's ``head``), or a
    learned ``cls_token`` beside ``k_proj``, ``v_proj`` and ``output_proj`` (AIMv2's), else None."""
    return next((m for m in root.walk() if m.order is not None and (
        ("probe" in m.params and any(c.cls == "MultiheadAttention" and c.order is not None for c in m.children))
        or ("cls_token" in m.params and all(m.child(n) is not None for n in ("k_proj", "v_proj", "output_proj"))))),
        None)


def _aimv2_lines(head: Module, sz: Sizer, label: str) -> tuple[list[str], list[str]]:
    """AIMv2's head (the module docstring)."""
    k, v, o = head.child("k_proj"), head.child("v_proj"), head.child("output_proj")
    h, a = sz.size(k.params["weight"][1], "hidden size"), sz.size(head.attrs.get("num_heads", 0), "heads")

    def bias(m):
        return "true" if "bias" in m.params else "false"

    return ["input probe_rows[b, 1]: index   # the class token's row, b times: cls_token.expand(b, -1, -1) as a gather"], [
        f"param {label}_cls_token[1, 1, {h}]",
        f"pq = split_heads(gather({label}_cls_token, probe_rows), {a})   # the query: no projection",
        f"pk = split_heads(linear(x, {h}, bias = {bias(k)}, name = {label}_k_proj), {a})",
        f"pv = split_heads(linear(x, {h}, bias = {bias(v)}, name = {label}_v_proj), {a})",
        "pw = softmax(scale(matmul(pq, transpose(pk))))   # [b, a, 1, s]",
        f"x = linear(select(merge_heads(matmul(pw, pv))), {h}, bias = {bias(o)}, name = {label}_output_proj)"]


def map_head_lines(head: Module, sz: Sizer, label: str) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of the head ``head`` over ``x`` (the encoder's normed output), its node names
    prefixed ``label``; None where a part is not SigLIP's (a norm and a two-Linear MLP after the attention)."""
    if "cls_token" in head.params:
        return _aimv2_lines(head, sz, label)
    att = next(c for c in head.children if c.cls == "MultiheadAttention")
    norm, mlp = head.child("layernorm"), head.child("mlp")
    fcs = [c for c in (mlp.children if mlp is not None else []) if len(c.params.get("weight", ())) == 2]
    w = att.params.get("in_proj_weight")
    if norm is None or len(fcs) != 2 or w is None or w[0] != 3 * w[1] or "num_heads" not in att.attrs:
        return None
    h, a, i = sz.size(w[1], "hidden size"), sz.size(att.attrs["num_heads"], "heads"), sz.size(fcs[0].params["weight"][0],
                                                                                             "MLP width")
    bias = "true" if "in_proj_bias" in att.params else "false"
    for m in att.walk():     # out_proj: its weight read by F.multi_head_attention_forward, the Linear never called
        m.order = att.order if m.order is None else m.order
    return ["input probe_rows[b, 1]: index   # the probe's row, b times: probe.repeat(b, 1, 1) as a gather"], [
        f"param {label}_probe[1, 1, {h}]",
        f"pq = split_heads(scale(linear(gather({label}_probe, probe_rows), {h}, bias = {bias}, name = {label}_q_proj)), "
        f"{a})   # [b, a, 1, h / a], × sqrt(a / h)",
        f"pk, pv = split(linear(x, 2 * {h}, bias = {bias}, name = {label}_kv_proj), 2)   # key is value: views",
        f"pw = softmax(matmul(pq, transpose(split_heads(pk, {a}))))   # [b, a, 1, s]",
        f"py = linear(merge_heads(matmul(pw, split_heads(pv, {a}))), {h}, "
        f"bias = {'true' if 'bias' in (att.child('out_proj') or att).params else 'false'}, name = {label}_out_proj)",
        f"py = py + mlp(layernorm(py, name = {label}_{norm.name}), {i}, bias = true, dropout = false, "
        f"name = {label}_mlp)",
        "x = select(py)   # the one token [b, h]"]
