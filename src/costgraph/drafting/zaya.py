"""Recognise ZAYA's decoder layer (Zyphra; transformers 5.24 modeling_zaya.py) as statements and blocks the draft
defines itself.

* ``ZayaAttention``: compressed convolutional attention (CCA; Figliolia et al. 2025, arXiv:2510.04476), its
  ``ZayaCCAProjection``: ``q_proj`` (H → a·d) and ``k_proj`` (H → kv·d), joined and padded ``cca_time0 - 1 +
  cca_time1 - 1`` steps on the left, mixed by a depthwise ``Conv1d`` (kernel ``cca_time0``, a group per channel) and a
  grouped one (kernel ``cca_time1``, ``a + kv`` groups of d channels), plus their residual paths (additions and
  means: no product); values half from ``v_proj_current`` and half from ``v_proj_delayed`` of the previous token
  (kv·d/2 each), the delayed projection run once more on a zero token per sequence (``hidden_states.new_zeros(b, 1,
  H)``: b more rows); ``ZayaQKNorm`` (L2 norms, a learned ``temp`` [kv] on the keys: no product); rotary; eager
  attention; ``o_proj``. The draft's ``cca_attention`` (:data:`ZAYA_BLOCKS`).
* ``ZayaResidualScaling`` (``post_attention_residual_scale``, ``post_mlp_residual_scale``): ``(y + b_y)·s_y + (r +
  b_r)·s_r``, four vectors [H]: the draft's ``residual_scaling``.
* ``ZayaSparseMoeBlock``: ``ZayaRouter`` (``down_proj`` H → router_hidden_size with a bias; from the second layer on,
  plus the previous layer's router state times ``router_states_scale``, the state passed from layer to layer: the
  draft's ``r``, carried through the layers; ``router_mlp``: RMSNorm, ``fc1`` and ``fc2`` (GELU, biases), ``out_proj``
  to E + 1 classes, the last a skip expert that computes nothing) and ``ZayaExperts`` (SwiGLU experts stacked [E, ., .],
  ``@use_experts_implementation``: a token routed to the skip expert runs through expert 0 with weight 0, so every
  token passes through k experts' products, the draft's ``repeat E as experts active k``).
* ``ZayaModel``: the embeddings times ``input_hidden_states_scale`` plus ``input_hidden_states_bias`` [H] before the
  layers (:func:`model_lines`).

Torch-free: reads :class:`costgraph.drafting.facts.Module` facts.
"""

from __future__ import annotations

from .blocks import _linear, activation, is_norm, norm_call
from .facts import Module

#: ZayaResidualScaling's parameters
SCALING = frozenset({"hidden_states_scale", "hidden_states_bias", "residual_scale", "residual_bias"})
#: ZayaModel's own parameters, applied to the embeddings before the layers
INPUT_SCALING = ("input_hidden_states_bias", "input_hidden_states_scale")


def _is_scaling(m: Module | None) -> bool:
    return m is not None and set(m.params) == SCALING and len({s for s in m.params.values()}) == 1 \
        and len(next(iter(m.params.values()))) == 1 and not m.children


def cca_call(m: Module, arg: str, d) -> str | None:
    """``cca_attention`` for a ZayaAttention-like module (``qkv_proj`` holding ``q_proj``, ``k_proj``,
    ``v_proj_current``, ``v_proj_delayed``, ``conv_qk_depthwise``, ``conv_qk_grouped``; ``qk_norm`` holding ``temp``
    [kv]; ``o_proj``; no biases on the projections), else None."""
    proj, norm, o = m.child("qkv_proj"), m.child("qk_norm"), _linear(m.child("o_proj"))
    if proj is None or norm is None or o is None or o[2] or m.params:
        return None
    q, k, vc, vd = (_linear(proj.child(n)) for n in ("q_proj", "k_proj", "v_proj_current", "v_proj_delayed"))
    c0, c1 = proj.child("conv_qk_depthwise"), proj.child("conv_qk_grouped")
    head_dim = m.attrs.get("head_dim")
    if None in (q, k, vc, vd, c0, c1) or not isinstance(head_dim, int) or any(x[2] for x in (q, k, vc, vd)) \
            or q[1] % head_dim or k[1] % head_dim or vc[1] != vd[1] or 2 * vc[1] != k[1] or o[:2] != (q[1], q[0]):
        return None
    heads, kv = q[1] // head_dim, k[1] // head_dim
    channels = q[1] + k[1]
    w0, w1 = c0.params.get("weight", ()), c1.params.get("weight", ())
    if len(w0) != 3 or len(w1) != 3 or w0[:2] != (channels, 1) or w1[:2] != (channels, head_dim) \
            or set(c0.params) != {"weight", "bias"} or set(c1.params) != {"weight", "bias"} \
            or norm.params != {"temp": (kv,)} or len(proj.children) != 6:
        return None
    t0, t1 = w0[2], w1[2]
    if (t0 + t1) % 2:     # the left padding of t0 + t1 - 2 steps, written as half on each side: the same lengths
        return None
    d.blocks.add("cca_attention")
    sizes = [d.size(heads, "query heads"), d.size(kv, "key/value heads"), d.size(head_dim, "head size")]
    return f"cca_attention({arg}, {', '.join(sizes)}, {t0}, {t1}, {(t0 + t1 - 2) // 2}, name = {m.name})"


def _router(gate: Module, sz) -> tuple[str, list[str]] | None:
    """(the router's width in symbols, the statements making the router state ``r`` and its probabilities), or None."""
    down, mlp = _linear(gate.child("down_proj")), gate.child("router_mlp")
    if down is None or mlp is None or not down[2] or set(gate.params) - {"router_states_scale"}:
        return None
    fc1, fc2, out = (_linear(mlp.child(n)) for n in ("fc1", "fc2", "out_proj"))
    norm = mlp.child("norm")
    width = down[1]
    if None in (fc1, fc2, out, norm) or not is_norm(norm) or fc1[:2] != (width, width) or fc2[:2] != (width, width) \
            or not fc1[2] or not fc2[2] or out[2] or out[0] != width or activation(mlp) != "gelu":
        return None
    r = sz.size(width, "router width")
    state = gate.params.get("router_states_scale")
    lines = []
    if state is not None:
        if state != (width,):
            return None
        lines.append(f"param router_states_scale[{r}]")
    call = f"linear(y, {r}, bias = true, name = {gate.name}_down_proj)"
    lines.append(f"r = {call} + r * router_states_scale" if state is not None else f"r = {call}")
    lines.append(f"p = zaya_router_mlp(r, {sz.size(out[1], 'router classes')}, name = {gate.name}_router_mlp)")
    return r, lines


def layer_lines(layer: Module, sz, rotary: bool) -> list[str] | None:
    """A ZAYA decoder layer as statements on ``x`` and the router state ``r``, or None."""
    names = ("self_attn", "mlp", "input_layernorm", "post_attention_layernorm", "post_attention_residual_scale",
             "post_mlp_residual_scale")
    attn, moe, n1, n2, s1, s2 = (layer.child(n) for n in names)
    if None in (attn, moe, n1, n2) or not (_is_scaling(s1) and _is_scaling(s2)) or layer.params \
            or len(layer.children) != 6 or not (is_norm(n1) and is_norm(n2)):
        return None
    gate, experts = moe.child("gate"), moe.child("experts")
    if gate is None or experts is None or moe.params or len(moe.children) != 2:
        return None
    up, down = experts.params.get("gate_up_proj"), experts.params.get("down_proj")
    act = activation(experts)
    if set(experts.params) != {"gate_up_proj", "down_proj"} or len(up) != 3 or len(down) != 3 \
            or down != (up[0], up[2], up[1] // 2) or act not in ("silu", "gelu"):
        return None
    top_k, router = gate.attrs.get("top_k"), _router(gate, sz)
    if router is None or not isinstance(top_k, int):
        return None
    call = cca_call(attn, norm_call(n1, "x"), sz)     # last: it adds its block to the draft
    if call is None:
        return None
    sz.blocks.update({"residual_scaling", "zaya_router_mlp"})
    block = "swiglu" if act == "silu" else "geglu"
    return [f"x = residual_scaling({call}, x, name = {s1.name})",
            f"y = {norm_call(n2, 'x')}",
            *router[1],
            "z = zeros(y)",
            f"repeat {sz.size(up[0], 'experts')} as experts active {sz.size(top_k, 'top-k', count='k')} {{",
            f"  z = z + {block}(y, {sz.size(down[2], 'expert width')}, name = expert)",
            "}",
            f"x = residual_scaling(z, x, name = {s2.name})"]


def model_lines(root: Module, layers: Module, sz) -> list[str]:
    """The statements before ZAYA's layers: the embeddings' scale and bias (``ZayaModel``'s own parameters) and the
    router state before the first layer (which does not read it); none for another model."""
    parent = layers.path.rsplit(".", 1)[0] if "." in layers.path else ""
    model = next((m for m in root.walk() if m.path == parent), None)
    first = layers.children[0] if layers.children else None
    gate = first.child("mlp").child("gate") if first is not None and first.child("mlp") is not None else None
    if model is None or set(model.params) != set(INPUT_SCALING) or gate is None \
            or any(len(s) != 1 for s in model.params.values()):
        return []
    down = _linear(gate.child("down_proj"))
    if down is None:
        return []
    h = sz.size(model.params[INPUT_SCALING[0]][0], "hidden size")
    return [f"param {n}[{h}]" for n in INPUT_SCALING] + [
        f"x = (x + {INPUT_SCALING[0]}) * {INPUT_SCALING[1]}",
        f"r = zeros(slice(x, {sz.size(down[1], 'router width')}))     # the router state before the first layer, "
        "which does not read it"]


#: the blocks a draft defines itself
ZAYA_BLOCKS = {"cca_attention": """# ZAYA's compressed convolutional attention (arXiv:2510.04476; transformers 5.24 ZayaCCAProjection, ZayaQKNorm,
# ZayaAttention): q and k joined, padded t0 + t1 - 2 steps on the left (written as pad each side: the same lengths),
# a depthwise convolution (kernel t0) and a grouped one (kernel t1, a group per head), plus q's and k's residual paths
# (no product); values half current, half the previous token's (v_proj_delayed, run once more on a zero token per
# sequence: the select below); L2 norms and a learned key scale per KV head (no product); rotary; eager attention.
block cca_attention(x[B, S, H], heads, kv_heads, head_dim, t0, t1, pad) {
  q = linear(x, heads * head_dim, bias = false, name = q_proj)
  k = linear(x, kv_heads * head_dim, bias = false, name = k_proj)
  c = dense_conv1d(transpose(concat(q, k)), (heads + kv_heads) * head_dim, t0, padding = pad,
                   groups = (heads + kv_heads) * head_dim, name = conv_qk_depthwise)
  c = transpose(dense_conv1d(c, (heads + kv_heads) * head_dim, t1, groups = heads + kv_heads, name = conv_qk_grouped))
  q = split_heads(slice(c, heads * head_dim) + q, heads)
  k = split_heads(slice(c, kv_heads * head_dim) + k, kv_heads)
  param temp[kv_heads]
  vd = linear(x, kv_heads * head_dim / 2, bias = false, name = v_proj_delayed)
  v0 = linear(select(x), kv_heads * head_dim / 2, bias = false, tied = v_proj_delayed, name = v_proj_delayed_state)
  v = split_heads(concat(linear(x, kv_heads * head_dim / 2, bias = false, name = v_proj_current), vd), kv_heads)
  k = repeat_kv(cache(rope(k), name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(rope(q), transpose(k), causal = true)), fp32 = true)
  y = merge_heads(matmul(p, v, causal = true))
  return linear(y, H, bias = false, name = o_proj)
}""", "residual_scaling": """# ZAYA's residual scaling (transformers 5.24 ZayaResidualScaling): (y + b_y) s_y + (r + b_r) s_r, four vectors [H].
block residual_scaling(y[B, S, H], r[B, S, H]) {
  param hidden_states_scale[H]
  param hidden_states_bias[H]
  param residual_scale[H]
  param residual_bias[H]
  return (y + hidden_states_bias) * hidden_states_scale + (r + residual_bias) * residual_scale
}""", "zaya_router_mlp": """# ZAYA's router MLP (transformers 5.24 ZayaRouterMLP): RMSNorm, fc1 and fc2 with GELU (biases), out_proj to the
# experts and one skip expert; softmax (the top-k and the skip expert's mask: no product).
block zaya_router_mlp(r[B, S, R], classes) {
  z = gelu(linear(rmsnorm(r, name = norm), R, name = fc1))
  z = gelu(linear(z, R, name = fc2))
  return softmax(linear(z, classes, bias = false, name = out_proj))
}"""}
