"""Recognise mixture-of-experts layers of their own form (std ``moe`` reads SwiGLU experts behind a softmax or
sigmoid router): Nemotron-H's squared-ReLU experts, as blocks the draft defines itself; gpt-oss's clamped SwiGLU
experts, as std ``clamped_moe``; MiniMax-M3's (a sigmoid router and a shared expert), as std ``clamped_shared_moe``;
AFMoE's routing bias held by the block and A.X-K1's MoE normalising its output, as std ``shared_moe`` / ``moe``.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts and returns the call as model-language text, or
None; the blocks' text (:data:`EXPERT_BLOCKS`) follows transformers 5.24's modeling code of each layer.
"""

from __future__ import annotations

from dataclasses import replace

from .blocks import _linear, is_norm, moe_call, norm_call, squared_relu
from .facts import Module


def relu2_mlp_call(m: Module, arg: str, d) -> str | None:
    """Nemotron's MLP without gate (transformers' ``NemotronHMLP``, ``NemotronMLP``: ``up_proj``, squared ReLU,
    ``down_proj``, biases alike) as the draft's ``relu2_mlp``, or None."""
    up, down = _linear(m.child("up_proj")), _linear(m.child("down_proj"))
    if up is None or down is None or m.params or not squared_relu(m) or up[2] != down[2] \
            or (up[1], up[0]) != down[:2] or any(c.param_count() for c in m.children if c.name not in ("up_proj",
                                                                                                     "down_proj")):
        return None
    d.blocks.add("relu2_mlp")
    bias = ", bias = true" if up[2] else ""
    return f"relu2_mlp({arg}, {d.size(up[1], 'MLP width')}{bias}, name = {m.name})"


def relu2_moe_call(m: Module, arg: str, d) -> str | None:
    """Nemotron-H's MoE (transformers 5.24 ``NemotronHMoE``): a sigmoid router ``gate`` (``NemotronHTopkRouter``:
    its own ``weight`` [E, H] in fp32, the ``e_score_correction_bias`` [E] an fp32 buffer), E experts without gate
    (``NemotronHExperts``: ``up_proj`` [E, m, H], squared ReLU, ``down_proj`` [E, H, m]), top-k of them per token,
    plus an always-active ``shared_experts`` MLP of the same form; the latent projections ``fc1_latent_proj`` and
    ``fc2_latent_proj`` as ``nn.Identity`` (no ``moe_latent_size``). The draft's ``relu2_moe``, or None."""
    router, experts, shared = m.child("gate"), m.child("experts"), m.child("shared_experts")
    latent = [m.child(n) for n in ("fc1_latent_proj", "fc2_latent_proj")]
    if None in (router, experts, shared) or m.params or any(c is None or c.cls != "Identity" for c in latent) \
            or len(m.children) != 5:
        return None
    w = router.params.get("weight")
    if w is None or len(w) != 2 or set(router.params) != {"weight"} or router.children \
            or router.attrs.get("buffers") != "e_score_correction_bias":
        return None
    n_experts, hidden = w
    top_k = router.attrs.get("top_k")
    up, down = experts.params.get("up_proj"), experts.params.get("down_proj")
    if not isinstance(top_k, int) or set(experts.params) != {"up_proj", "down_proj"} or len(up) != 3 \
            or up[0] != n_experts or up[2] != hidden or down != (n_experts, hidden, up[1]) or not squared_relu(experts):
        return None
    shared_call = relu2_mlp_call(shared, "x", d.quiet())
    if shared_call is None or "bias = true" in shared_call:
        return None
    width = _linear(shared.child("up_proj"))[1]
    d.blocks.add("relu2_moe")
    d.blocks.add("relu2_mlp")
    sizes = [d.size(n_experts, "experts"), d.size(top_k, "top-k", count="k"), d.size(up[1], "expert width"),
             d.size(width, "shared expert width")]
    return f"relu2_moe({arg}, {', '.join(sizes)}, name = {m.name})"


def clamped_moe_call(m: Module, arg: str, d) -> str | None:
    """gpt-oss's MoE (transformers 5.24 modeling_gpt_oss.py ``GptOssMLP``): a ``router`` (``GptOssTopKRouter``:
    ``weight`` [E, H], ``bias`` [E], ``top_k``) and ``experts`` (``GptOssExperts``: ``gate_up_proj`` [E, H, 2w] with
    ``gate_up_proj_bias`` [E, 2w], ``down_proj`` [E, w, H] with ``down_proj_bias`` [E, H], and a ``limit``: the
    clamped SwiGLU of ``_apply_gate``) as std ``clamped_moe`` (models/std/moe.cg, which models/gpt_oss.cg calls), or
    None."""
    router, experts = m.child("router"), m.child("experts")
    if router is None or experts is None or m.params or len(m.children) != 2 or router.children or experts.children:
        return None
    w, top_k = router.params.get("weight"), router.attrs.get("top_k")
    if w is None or len(w) != 2 or set(router.params) != {"weight", "bias"} or router.params["bias"] != w[:1] \
            or not isinstance(top_k, int) or not isinstance(experts.attrs.get("limit"), (int, float)):
        return None
    n_experts, hidden = w
    gu, dn = experts.params.get("gate_up_proj", ()), experts.params.get("down_proj", ())
    if len(gu) != 3 or gu[:2] != (n_experts, hidden) or gu[2] % 2 or dn != (n_experts, gu[2] // 2, hidden) \
            or experts.params.get("gate_up_proj_bias") != (n_experts, gu[2]) \
            or experts.params.get("down_proj_bias") != (n_experts, hidden) or len(experts.params) != 4:
        return None
    sizes = [d.size(n_experts, "experts"), d.size(top_k, "top-k", count="k"), d.size(dn[1], "expert width")]
    return f"clamped_moe({arg}, {', '.join(sizes)}, name = {m.name})"


def _clamped_dense(m: Module | None) -> tuple[int, int] | None:
    """(H, w) of a clamped SwiGLU MLP without biases (MiniMax-M3's ``MiniMaxM3VLDenseMLP``: ``gate_up_proj`` H → 2w,
    ``down_proj`` w → H, a ``swiglu_limit``), else None."""
    if m is None or m.params or len(m.children) != 2 or not isinstance(m.attrs.get("swiglu_limit"), (int, float)):
        return None
    gu, dn = _linear(m.child("gate_up_proj")), _linear(m.child("down_proj"))
    if gu is None or dn is None or gu[2] or dn[2] or gu[1] != 2 * dn[0] or dn[1] != gu[0]:
        return None
    return gu[0], dn[0]


def clamped_shared_moe_call(m: Module, arg: str, d) -> str | None:
    """MiniMax-M3's MoE (transformers 5.24 modeling_minimax_m3_vl.py ``MiniMaxM3VLSparseMoeBlock``): a sigmoid router
    ``gate`` (``MiniMaxM3VLTopKRouter``: ``weight`` [E, H], the ``e_score_correction_bias`` buffer, ``top_k``),
    ``experts`` (``MiniMaxM3VLExperts``: ``gate_up_proj`` [E, 2w, H], ``down_proj`` [E, H, w], no biases, a ``limit``:
    the clamped SwiGLU) and ``shared_experts`` (a clamped SwiGLU MLP) as std ``clamped_shared_moe``, or None."""
    router, experts = m.child("gate"), m.child("experts")
    shared = _clamped_dense(m.child("shared_experts"))
    if router is None or experts is None or shared is None or m.params or len(m.children) != 3 \
            or router.children or experts.children:
        return None
    w, top_k = router.params.get("weight"), router.attrs.get("top_k")
    if w is None or len(w) != 2 or set(router.params) != {"weight"} or not isinstance(top_k, int) \
            or router.attrs.get("buffers") != "e_score_correction_bias" \
            or not isinstance(experts.attrs.get("limit"), (int, float)):
        return None
    n_experts, hidden = w
    gu, dn = experts.params.get("gate_up_proj", ()), experts.params.get("down_proj", ())
    if set(experts.params) != {"gate_up_proj", "down_proj"} or len(gu) != 3 or gu[0] != n_experts \
            or gu[2] != hidden or gu[1] % 2 or dn != (n_experts, hidden, gu[1] // 2) or shared[0] != hidden:
        return None
    sizes = [d.size(n_experts, "experts"), d.size(top_k, "top-k", count="k"), d.size(dn[2], "expert width"),
             d.size(shared[1], "shared expert width")]
    return f"clamped_shared_moe({arg}, {', '.join(sizes)}, name = {m.name})"


def bias_held_moe_call(m: Module, arg: str, d) -> str | None:
    """AFMoE's MoE block (transformers 5.24 modeling_afmoe.py ``AfmoeSparseMoeBlock``): the block holds the routing
    bias ``expert_bias`` [E] (an ``nn.Parameter``, added to the sigmoid scores to choose the top-k) and its router
    ``AfmoeTokenChoiceRouter`` holds the linear ``gate`` H → E; shared experts beside. Read as std ``shared_moe`` with
    ``router_bias = true`` (a parameter of E per layer; choosing the top-k is no product), or None."""
    router = m.child("router")
    gate = router.child("gate") if router is not None else None
    if set(m.params) != {"expert_bias"} or router is None or router.params or len(router.children) != 1 \
            or _linear(gate) is None or set(gate.params) != {"weight"} \
            or m.params["expert_bias"] != (gate.params["weight"][0],):
        return None
    held = Module(router.path, router.name, router.cls, {"weight": gate.params["weight"],
                                                         "e_score_correction_bias": m.params["expert_bias"]},
                  attrs=dict(router.attrs))
    inner = replace(m, params={}, children=[held if c is router else c for c in m.children])
    return moe_call(inner, arg, d)


def normed_moe_call(m: Module, arg: str, d) -> str | None:
    """A MoE block that normalises its own output (transformers 5.24 modeling_axk1.py ``AXK1MoE``: DeepSeek-V3's
    routed and shared experts, then ``post_mlp_layernorm``, an RMSNorm over H, on their sum): the std block read
    from the other children, wrapped in the norm; or None."""
    last = max((c for c in m.children if c.order is not None), key=lambda c: c.order, default=None)
    if last is None or not is_norm(last) or not last.name.startswith("post_") or m.params:
        return None
    inner = moe_call(replace(m, children=[c for c in m.children if c is not last]), arg, d)
    return None if inner is None else norm_call(last, inner)


def expert_call(m: Module, arg: str, d) -> str | None:
    """The first recogniser of this module that reads ``m``, else None."""
    return relu2_moe_call(m, arg, d) or relu2_mlp_call(m, arg, d) or clamped_moe_call(m, arg, d) \
        or clamped_shared_moe_call(m, arg, d) or bias_held_moe_call(m, arg, d) or normed_moe_call(m, arg, d)


#: the blocks a draft defines itself when it uses them
EXPERT_BLOCKS = {"relu2_mlp": """# An MLP without gate, squared ReLU (So et al. 2021, Primer; transformers' NemotronHMLP; models/nemotron.cg's
# nemotron_mlp): up_proj, relu(x)^2, down_proj.
block relu2_mlp(x[B, S, H], width, bias = false) {
  return linear(relu2(linear(x, width, bias = bias, name = up_proj)), H, bias = bias, name = down_proj)
}""", "relu2_moe": """# Nemotron-H's MoE (transformers' NemotronHMoE): a sigmoid router gate [E, H] kept in fp32 with DeepSeek-V3's
# e_score_correction_bias (an fp32 buffer, not a parameter), E experts without gate (up_proj, squared ReLU,
# down_proj of width m), top_k per token, plus an always-active shared expert of the same form.
block relu2_moe(x[B, S, H], experts, top_k, width, shared_width) {
  param e_score_correction_bias[experts]: buffer(fp32)
  weights = sigmoid(linear(x, experts, bias = false, name = gate))
  y = zeros(x)
  repeat experts as experts active top_k {
    y = y + relu2_mlp(x, width, name = expert)
  }
  return y + relu2_mlp(x, shared_width, name = shared_experts)
}"""}
