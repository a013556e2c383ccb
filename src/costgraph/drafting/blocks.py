"""Recognise one module as a block of the bundled ``std/`` library: attention, MLP, mixture of experts, norm.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts (names, classes, parameter
shapes, attributes) and returns the call as model-language text, or None when the module is not
that block. Sizes are written in the probe's symbols (:meth:`Draft.size`); a size no symbol
explains is written as its number with a warning. Nothing is guessed: a module no rule recognises
is left to the caller, which writes a TODO.
"""

from __future__ import annotations

from .facts import Module

Q, K, V, O = ("q_proj", "query", "q", "wq"), ("k_proj", "key", "k", "wk"), ("v_proj", "value", "v", "wv"), \
    ("o_proj", "dense", "out_proj", "o", "wo", "c_proj")
FUSED_QKV = ("c_attn", "qkv_proj", "query_key_value", "Wqkv", "qkv")
GATED = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))
PLAIN = (("c_fc", "c_proj"), ("fc1", "fc2"), ("fc_in", "fc_out"), ("dense_h_to_4h", "dense_4h_to_h"),
         ("up_proj", "down_proj"))
QK_NORMS = ("q_norm", "k_norm", "q_layernorm", "k_layernorm")


def _only(m: Module, names) -> bool:
    """Every parameter of ``m`` is in its children called ``names``: nothing a block leaves out."""
    return not m.params and all(c.name in names for c in m.children if c.param_count())
ROUTERS = ("gate", "router")


def _yes(flag: bool) -> str:
    return "true" if flag else "false"


def activation(m: Module) -> str | None:
    """``silu``, ``gelu`` or ``relu`` from a module's activation attribute or child, else None."""
    names = [str(m.attrs.get("act", ""))] + [c.cls for c in m.children]
    for n in names:
        low = n.lower()
        if "silu" in low or "swish" in low:
            return "silu"
        if "gelu" in low:
            return "gelu"
        if "relu" in low:
            return "relu"
    return None


def is_norm(m: Module) -> bool:
    """A LayerNorm or RMSNorm over the last dimension (one 1-D weight, perhaps a bias, or none)."""
    return "norm" in m.cls.lower() and all(len(s) == 1 for s in m.params.values()) and not m.children


def norm_call(m: Module, arg: str) -> str:
    """``rmsnorm(...)`` or ``layernorm(...)``, with ``bias``/``weight`` as the module holds them."""
    rms = "rms" in m.cls.lower()
    opts = []
    if "weight" not in m.params:
        opts.append("weight = false")
    if not rms and "bias" not in m.params:
        opts.append("bias = false")
    return f"{'rmsnorm' if rms else 'layernorm'}({arg}{''.join(', ' + o for o in opts)}, name = {m.name})"


def _linear(m: Module | None) -> tuple[int, int, bool] | None:
    """(in, out, bias) of a Linear (weight [out, in]) or GPT-2's Conv1D (weight [in, out])."""
    if m is None or m.children or len(m.params.get("weight", ())) != 2:
        return None
    w = m.params["weight"]
    if m.cls == "Conv1D":
        return w[0], w[1], "bias" in m.params
    if "linear" in m.cls.lower():
        return w[1], w[0], "bias" in m.params
    return None


def attention_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """``gqa_attention`` (separate Q, K, V, O projections) or ``attention`` (GPT-2's fused ``c_attn`` of
    3h), or None. ``d``: the :class:`~costgraph.drafting.draft.Draft` sizing text."""
    fused = next((c for c in m.children if c.name in FUSED_QKV), None)
    o = _linear(m.child(*O))
    if fused is not None and o is not None:
        if any(c.name in QK_NORMS for c in m.children):
            return None
        return _fused_attention(m, _linear(fused), o, arg, d, rotary)
    q, k, v = (_linear(m.child(*names)) for names in (Q, K, V))
    if None in (q, k, v, o) or not (q[2] == v[2] and (k[2] == q[2] or not k[2])):
        return None
    head_dim = m.attrs.get("head_dim")
    heads = m.attrs.get("num_heads") or m.attrs.get("num_attention_heads")
    if not isinstance(head_dim, int):
        if not isinstance(heads, int):
            return None
        head_dim = q[1] // heads
    if q[1] % head_dim or k[1] % head_dim or k[1] != v[1]:
        return None
    opts = [f"qkv_bias = {_yes(q[2])}"] if q[2] else []
    if q[2] and not k[2]:          # Whisper's k_proj: no bias beside Q's and V's
        opts.append("k_bias = false")
    if o[2]:
        opts.append("out_bias = true")
    norms = [c for c in m.children if c.name in QK_NORMS]
    whole = len(norms) == 2 and all("rms" in c.cls.lower() for c in norms) and \
        sorted(c.params.get("weight", (0,))[0] for c in norms) == sorted((q[1], k[1]))
    if whole and not q[2] and not o[2] and rotary:     # OLMo 2's QK-norm over the whole projection
        d.blocks.add("proj_norm_attention")
        sizes = [d.size(q[1] // head_dim, "query heads"), d.size(k[1] // head_dim, "key/value heads"),
                 d.size(head_dim, "head size")]
        return f"proj_norm_attention({arg}, {', '.join(sizes)}, name = {m.name})"
    if norms:
        if len(norms) != 2 or any("rms" not in c.cls.lower() or c.params.get("weight") != (head_dim,) for c in norms):
            return None
        opts.append("qk_norm = true")
    if not rotary:
        opts.append("rotary = false")
    sizes = [d.size(q[1] // head_dim, "query heads"), d.size(k[1] // head_dim, "key/value heads"),
             d.size(head_dim, "head size")]
    return f"gqa_attention({arg}, {', '.join(sizes)}{''.join(', ' + x for x in opts)}, name = {m.name})"


def _fused_attention(m: Module, f, o, arg: str, d, rotary: bool) -> str | None:
    """One projection to Q, K and V (GPT-2's ``c_attn``, GPT-NeoX's ``query_key_value``): ``attention``
    when it is GPT-2's (3h, no rotary, biases alike), else ``gqa_attention``, which costs the same
    (three projections of a·d, kv·d, kv·d columns are one of (a + 2kv)·d)."""
    probe = d.probe.symbol_values()
    heads = m.attrs.get("num_heads") or m.attrs.get("n_head") or m.attrs.get("num_attention_heads") or probe.get("a")
    if f is None or not isinstance(heads, int):
        return None
    if not rotary and f[2] == o[2] and d.size(f[1], quiet=True) == "3 * h":
        return f"attention({arg}, {d.size(heads, 'attention heads')}, bias = {_yes(f[2])}, name = {m.name})"
    head_dim = m.attrs.get("head_dim") or m.attrs.get("head_size") or probe.get("h", 0) // heads
    kv = m.attrs.get("num_key_value_heads") or m.attrs.get("num_kv_heads")
    if not isinstance(kv, int) and isinstance(head_dim, int) and head_dim and (f[1] // head_dim - heads) % 2 == 0:
        kv = (f[1] // head_dim - heads) // 2      # what is left of the columns is K and V
    if not isinstance(head_dim, int) or not isinstance(kv, int) or kv < 1 or (heads + 2 * kv) * head_dim != f[1]:
        return None
    opts = ([f"qkv_bias = {_yes(f[2])}"] if f[2] else []) + (["out_bias = true"] if o[2] else [])
    opts += [] if rotary else ["rotary = false"]
    sizes = [d.size(heads, "query heads"), d.size(kv, "key/value heads"), d.size(head_dim, "head size")]
    return f"gqa_attention({arg}, {', '.join(sizes)}{''.join(', ' + x for x in opts)}, name = {m.name})"


def mlp_call(m: Module, arg: str, d) -> str | None:
    """``swiglu``/``geglu`` (gate, up, down), ``mlp`` (GELU) or ``relu_mlp`` (two matrices), or None."""
    act = activation(m)
    for g, u, dn in GATED:
        gate, up, down = (_linear(m.child(n)) for n in (g, u, dn))
        if None not in (gate, up, down) and act in ("silu", "gelu") and gate[2] == up[2] == down[2]:
            block = "swiglu" if act == "silu" else "geglu"
            bias = ", bias = true" if gate[2] else ""
            return f"{block}({arg}, {d.size(up[1], 'MLP width')}{bias}, name = {m.name})"
    fused, down = _linear(m.child("gate_up_proj")), _linear(m.child("down_proj"))
    if fused is not None and down is not None and act in ("silu", "gelu") and fused[1] == 2 * down[0] \
            and fused[2] == down[2]:       # Phi-3's one gate_up_proj of 2w columns: as two of w
        block = "swiglu" if act == "silu" else "geglu"
        bias = ", bias = true" if fused[2] else ""
        return f"{block}({arg}, {d.size(down[0], 'MLP width')}{bias}, name = {m.name})"
    for first, second in PLAIN:
        a, b = _linear(m.child(first)), _linear(m.child(second))
        if a is None or b is None or a[2] != b[2] or m.child(*(x[0] for x in GATED)) is not None:
            continue
        width = d.size(a[1], "MLP width")
        if act == "gelu":
            drop = any(c.cls == "Dropout" and c.attrs.get("p", 0) for c in m.children)
            return f"mlp({arg}, {width}, bias = {_yes(a[2])}, dropout = {_yes(drop)}, name = {m.name})"
        if act == "relu":
            return f"relu_mlp({arg}, {width}, bias = {_yes(a[2])}, name = {m.name})"
    return None


def moe_call(m: Module, arg: str, d) -> str | None:
    """``moe`` (a router linear H → E and E SwiGLU experts, top-k each token), or None.

    The experts are transformers 5's fused tensors (``gate_up_proj`` [E, 2w, H], ``down_proj``
    [E, H, w]) or a ModuleList of gated MLPs. Shared experts are not recognised (None)."""
    router = m.child(*ROUTERS)
    experts = m.child("experts")
    if router is None or experts is None or len(router.params.get("weight", ())) != 2:
        return None
    gate = _linear(m.child("shared_expert_gate"))
    shared = [c for c in m.children if c.name.startswith("shared_expert") and c.name != "shared_expert_gate"]
    if len(shared) > 1 or (shared and shared[0].name not in ("shared_experts", "shared_expert")) or \
            (gate is not None and (not shared or gate[1:] != (1, False))):
        return None
    n_experts, hidden = router.params["weight"]
    top_k = m.attrs.get("top_k", router.attrs.get("top_k"))
    if not isinstance(top_k, int):
        return None
    gu, dn = experts.params.get("gate_up_proj"), experts.params.get("down_proj")
    if gu is not None and dn is not None and len(gu) == 3 and len(dn) == 3:
        if gu[0] != n_experts or gu[1] != 2 * dn[2] or activation(experts) != "silu":
            return None
        width = dn[2]
    elif experts.cls == "ModuleList" and len(experts.children) == n_experts:
        first = experts.children[0]
        up = _linear(first.child("up_proj", "w3"))
        if up is None or mlp_call(first, "x", d.quiet()) is None or activation(first) != "silu":
            return None
        width = up[1]
    else:
        return None
    if not set(router.params) <= {"weight", "bias", "e_score_correction_bias"} or \
            {"bias", "e_score_correction_bias"} <= set(router.params):
        return None
    # a router bias of E: a bias, or ERNIE 4.5's e_score_correction_bias held as a Parameter (std moe's router_bias)
    bias = ", router_bias = true" if {"bias", "e_score_correction_bias"} & set(router.params) else ""
    sizes = [d.size(n_experts, "experts"), d.size(top_k, "top-k", count="k"), d.size(width, "expert width")]
    if shared:       # DeepSeek-V3's, GLM-4.5's always-active shared experts: std's shared_moe
        up = _linear(shared[0].child("up_proj"))
        if up is None or mlp_call(shared[0], "x", d.quiet()) is None or not mlp_call(shared[0], "x", d.quiet()) \
                .startswith("swiglu("):
            return None
        corr = "e_score_correction_bias" in str(router.attrs.get("buffers", "")).split(",")
        if gate is not None:     # Qwen2-MoE's shared expert scaled by sigmoid(shared_expert_gate(x))
            if bias or corr:
                return None
            d.blocks.add("gated_shared_moe")
            return f"gated_shared_moe({arg}, {', '.join(sizes)}, {d.size(up[1], 'shared expert width')}, name = {m.name})"
        return f"shared_moe({arg}, {', '.join(sizes)}, {d.size(up[1], 'shared expert width')}{bias}, " \
               f"correction_bias = {_yes(corr)}, name = {m.name})"
    return f"moe({arg}, {', '.join(sizes)}{bias}, name = {m.name})"


RG_LRU = {"recurrent_param", "input_gate_weight", "input_gate_bias", "recurrent_gate_weight", "recurrent_gate_bias"}


def recurrent_call(m: Module, arg: str, d) -> str | None:
    """Griffin's recurrent block (transformers' ``RecurrentGemmaRecurrentBlock``: ``linear_y`` then GeLU,
    ``linear_x`` then a depthwise ``Conv1d`` padded by K − 1 and the RG-LRU ``rg_lru``, their product
    through ``linear_out``, every linear with a bias) as the draft's ``griffin_recurrent``, or None."""
    y, xs, out = (_linear(m.child(n)) for n in ("linear_y", "linear_x", "linear_out"))
    conv, lru = m.child("conv_1d"), m.child("rg_lru")
    if None in (y, xs, out) or conv is None or lru is None or m.params or lru.children or set(lru.params) != RG_LRU:
        return None
    width, (heads, block, _), kernel = y[1], lru.params["input_gate_weight"], conv.params.get("weight", (0, 0, 0))
    if not (y[2] and xs[2] and out[2]) or xs[1] != width or heads * block != width or activation(m) != "gelu" \
            or tuple(conv.params.get("weight", ())) != (width, 1, kernel[2]) or "bias" not in conv.params \
            or conv.attrs.get("groups") != width or conv.attrs.get("padding") != kernel[2] - 1:
        return None
    d.blocks.add("griffin_recurrent")
    sizes = [d.size(width, "recurrent width"), d.size(heads, "recurrent heads"), d.size(kernel[2], "convolution width")]
    return f"griffin_recurrent({arg}, {', '.join(sizes)}, name = {m.name})"


def mamba_call(m: Module, arg: str, d) -> str | None:
    """Mamba's mixer (transformers' ``MambaMixer``: ``in_proj`` H → 2D, a depthwise ``Conv1d`` padded by
    K − 1, ``x_proj`` D → R + 2N, ``dt_proj``'s weight applied by hand, the selective scan owning ``A_log``
    [D, N] and ``D`` [D], ``out_proj``) as the draft's ``mamba_mixer``, or None."""
    inp, xp, dt, out = (_linear(m.child(n)) for n in ("in_proj", "x_proj", "dt_proj", "out_proj"))
    conv = m.child("conv1d")
    if None in (inp, xp, dt, out) or conv is None or set(m.params) != {"A_log", "D"}:
        return None
    inner, state = m.params["A_log"]
    kernel = conv.params.get("weight", (0, 0, 0))[2]
    if inp[1] != 2 * inner or xp[:2] != (inner, dt[0] + 2 * state) or dt[1] != inner or not dt[2] or xp[2] \
            or out[0] != inner or inp[2] != out[2] or activation(m) != "silu" or conv.attrs.get("groups") != inner \
            or conv.attrs.get("padding") != kernel - 1 or tuple(conv.params["weight"]) != (inner, 1, kernel):
        return None
    norms = [m.child(n) for n in ("dt_layernorm", "b_layernorm", "c_layernorm")]
    weights = {"weight" in n.params for n in norms if n is not None}
    if any(n is not None and not is_norm(n) for n in norms) or (any(norms) and (None in norms or len(weights) > 1)):
        return None
    d.blocks.add("mamba_mixer")
    sizes = [d.size(inner, "inner width"), d.size(state, "state size"), d.size(dt[0], "Δ rank"),
             d.size(kernel, "convolution width")]
    opts = ("" if "bias" in conv.params else ", conv_bias = false") + (", proj_bias = true" if inp[2] else "")
    if weights:      # RMSNorm on Δ, B and C: Jamba's (with weights), FalconMamba's (weightless)
        opts += ", inner_norms = true" + ("" if True in weights else ", norm_weight = false")
    return f"mamba_mixer({arg}, {', '.join(sizes)}{opts}, name = {m.name})"


def mla_call(m: Module, arg: str, d) -> str | None:
    """Multi-head latent attention (DeepSeek-V2/V3; transformers' ``DeepseekV3Attention`` with a query
    rank: ``q_a_proj``, ``q_a_layernorm``, ``q_b_proj``, ``kv_a_proj_with_mqa``, ``kv_a_layernorm``,
    ``kv_b_proj``, ``o_proj``, no biases) as std ``mla``, or None. Sizes: ``heads`` from ``o_proj``'s
    input over ``v_head_dim``, the rest from the projections' shapes."""
    names = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
    qa, qb, kva, kvb, o = (_linear(m.child(n)) for n in names)
    qn, kvn = m.child("q_a_layernorm"), m.child("kv_a_layernorm")
    heads = m.attrs.get("num_heads") or m.attrs.get("num_attention_heads")
    if None in (qa, qb, kva, kvb, o, qn, kvn) or not isinstance(heads, int) or m.params \
            or any(x[2] for x in (qa, qb, kva, kvb, o)) or not (is_norm(qn) and is_norm(kvn)):
        return None
    q_rank, kv_rank = qa[1], kvn.params.get("weight", (0,))[0]
    rope, nope_v, v_dim = kva[1] - kv_rank, kvb[1] // heads, o[0] // heads
    nope = nope_v - v_dim
    if qn.params.get("weight") != (q_rank,) or qb[:2] != (q_rank, heads * (nope + rope)) or kvb[0] != kv_rank \
            or kvb[1] != heads * nope_v or o[0] != heads * v_dim or min(rope, nope, v_dim) < 1:
        return None
    d.imports.add("std/mla.cg")
    sizes = [d.size(heads, "attention heads"), d.size(q_rank, "query rank"), d.size(kv_rank, "latent rank"),
             d.size(nope, "head size without rotary"), d.size(rope, "rotary head size"), d.size(v_dim, "value head size")]
    return f"mla({arg}, {', '.join(sizes)}, name = {m.name})"


def mixer_call(m: Module, arg: str, d, rotary: bool) -> str | None:
    """The first recogniser that reads ``m``: Griffin's recurrent block, attention, MoE, MLP; else None.
    A module with a parameter the block does not hold (a bias of its own, a sink per head) is not
    recognised."""
    recurrent = recurrent_call(m, arg, d) or mamba_call(m, arg, d) or mla_call(m, arg, d)
    if recurrent is not None:
        return recurrent
    known = {*Q, *K, *V, *O, *FUSED_QKV, *QK_NORMS, *(n for g in GATED for n in g), *(n for p in PLAIN for n in p),
             *ROUTERS, "experts", "gate_up_proj", "shared_experts", "shared_expert", "shared_expert_gate"}
    if not _only(m, known):
        return None
    return attention_call(m, arg, d, rotary) or moe_call(m, arg, d) or mlp_call(m, arg, d)


#: blocks a draft defines itself when it uses them (no std/ file has them); from models/olmo2.cg
#: (OLMo 2, Groeneveld et al. / AI2 2024: RMSNorm over the whole Q and K projections, fp32 scale), and
#: Griffin's recurrent block (transformers' modeling_recurrent_gemma.py)
LOCAL_BLOCKS = {"proj_norm_attention": """# Attention with RMSNorm over the whole Q and K projections (OLMo 2; models/olmo2.cg's olmo2_attention).
block proj_norm_attention(x[B, S, H], heads, kv_heads, head_dim) {
  q = rmsnorm(linear(x, heads * head_dim, bias = false, name = q_proj), fp32_scale = true, name = q_norm)
  k = rmsnorm(linear(x, kv_heads * head_dim, bias = false, name = k_proj), fp32_scale = true, name = k_norm)
  v = linear(x, kv_heads * head_dim, bias = false, name = v_proj)
  q = rope(split_heads(q, heads))
  k = rope(split_heads(k, kv_heads))
  k = repeat_kv(cache(k, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(split_heads(v, kv_heads), name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true)
  return linear(merge_heads(matmul(p, v, causal = true)), H, bias = false, name = o_proj)
}""", "griffin_recurrent": """# Griffin's recurrent block (De et al. 2024 §2.4; transformers' RecurrentGemmaRecurrentBlock): a GeLU branch, and a
# branch through a depthwise causal Conv1d (padding K - 1, cut to S) and the RG-LRU; their product projected back.
block griffin_recurrent(x[B, S, H], width, heads, kernel) {
  y = gelu(linear(x, width, name = linear_y))
  u = conv1d(linear(x, width, name = linear_x), kernel, padded = true, name = conv_1d)
  return linear(rg_lru(u, heads, name = rg_lru) * y, H, name = linear_out)
}""", "gated_shared_moe": """# Routed experts plus one shared expert scaled per token by sigmoid(shared_expert_gate(x)), a linear H -> 1
# without bias (Qwen2-MoE; models/qwen2_moe.cg's qwen2_moe_mlp).
block gated_shared_moe(x[B, S, H], experts, top_k, width, shared_width) {
  g = sigmoid(linear(x, 1, bias = false, name = shared_expert_gate))
  return moe(x, experts, top_k, width, name = routed) + g * swiglu(x, shared_width, name = shared_expert)
}""", "mamba_mixer": """# Mamba's mixer (Gu & Dao 2023 §3.4; transformers' MambaMixer; models/mamba.cg's mamba_mixer): the input u and the
# gate z, a depthwise causal Conv1d (padding K - 1, cut to S) and SiLU, Δ, B and C from x_proj, Δ through dt_proj
# and softplus, the selective scan (A_log [D, N], D [D]; state [b, D, N] at inference), y · SiLU(z) projected back.
# inner_norms: RMSNorm on Δ, B and C (Jamba's; FalconMamba's weightless: norm_weight = false).
block mamba_mixer(x[B, S, H], inner, state, rank, kernel, conv_bias = true, proj_bias = false, inner_norms = false,
                  norm_weight = true) {
  u, z = split(linear(x, 2 * inner, bias = proj_bias, name = in_proj), 2)
  u = silu(conv1d(u, kernel, bias = conv_bias, padded = true, name = conv1d))
  dbc = linear(u, rank + 2 * state, bias = false, name = x_proj)
  dt = slice(dbc, rank)
  bm = slice(dbc, state)
  cm = slice(dbc, state)
  if inner_norms {
    dt = rmsnorm(dt, weight = norm_weight, name = dt_layernorm)
    bm = rmsnorm(bm, weight = norm_weight, name = b_layernorm)
    cm = rmsnorm(cm, weight = norm_weight, name = c_layernorm)
  }
  dt = softplus(linear(dt, inner, bias = true, name = dt_proj))
  y = selective_scan(u, dt, bm, cm, name = ssm)
  return linear(y * silu(z), H, bias = proj_bias, name = out_proj)
}"""}
