"""SigLIP's attention-pooling head (MAP), drafted from its traced modules (issue 28 item 2).

transformers 5.24 modeling_siglip.py ``SiglipMultiheadAttentionPoolingHead``: a learned ``probe [1, 1, h]``
repeated over the batch (``probe.repeat(batch_size, 1, 1)``) attends over the encoder's output through PyTorch's
``nn.MultiheadAttention(h, heads, batch_first=True)(probe, x, x)``; key is value, so ``F.multi_head_attention_forward``
(torch/nn/functional.py ``_in_projection_packed``) applies the packed ``in_proj_weight [3h, h]`` as a query part
``[h, h]`` on the probe and a key-value part ``[2h, h]`` on the sequence; the query is scaled before QKᵀ, the
softmax and the product with V are ``bmm`` (``need_weights`` defaults to True: the attention weights are also averaged
over the heads, no FLOPs counted), then ``out_proj`` (its weight read by the functional form: the Linear is never
called); then a residual ``layernorm`` + ``mlp`` (SiglipMLP) and the one token ``[:, 0]``. The statements are those of
the bundled ``models/siglip.cg`` block ``siglip_map_head`` (the repeat written as a gather of the probe's one row, b
times: ``input probe_rows[b, 1]``). Torch-free: module facts only.
"""

from __future__ import annotations

from .facts import Module
from .writer import Sizer


def map_head(root: Module) -> Module | None:
    """The module holding a learned ``probe`` and an ``nn.MultiheadAttention`` it calls (SigLIP's ``head``), else
    None."""
    return next((m for m in root.walk() if "probe" in m.params and m.order is not None
                 and any(c.cls == "MultiheadAttention" and c.order is not None for c in m.children)), None)


def map_head_lines(head: Module, sz: Sizer, label: str) -> tuple[list[str], list[str]] | None:
    """(input declarations, statements) of the head ``head`` over ``x`` (the encoder's normed output), its node names
    prefixed ``label``; None where a part is not SigLIP's (a norm and a two-Linear MLP after the attention)."""
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
