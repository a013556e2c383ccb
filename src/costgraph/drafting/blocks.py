"""Recognise one module as a block of the bundled ``std/`` library: attention, MLP, mixture of experts, norm.

Each recogniser reads :class:`costgraph.drafting.facts.Module` facts (names, classes, parameter
shapes, attributes) and returns the call as model-language text, or None when the module is not
that block. Sizes are written in the probe's symbols (:meth:`Draft.size`); a size no symbol
explains is written as its number with a warning. Nothing is guessed: a module no rule recognises
is left to the caller, which writes a TODO.
"""

from __future__ import annotations

from .facts import Module

Q, K, V, O = ("q_proj", "query", "q", "wq", "q_lin", "Wq"), ("k_proj", "key", "k", "wk", "k_lin", "Wk"), \
    ("v_proj", "value", "v", "wv", "v_lin", "Wv"), ("o_proj", "dense", "out_proj", "o", "wo", "c_proj", "out_lin", "Wo",
                                     "projection_layer")     # k28patch2: InternVL's vision attention (modeling_internvl.py)
FUSED_QKV = ("c_attn", "qkv_proj", "query_key_value", "Wqkv", "qkv")
GATED = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))
#: two-matrix MLPs' (first, second); ("0", "2"): CTRL's Sequential(Linear, ReLU, Linear)
PLAIN = (("c_fc", "c_proj"), ("fc1", "fc2"), ("fc_in", "fc_out"), ("dense_h_to_4h", "dense_4h_to_h"),
         ("up_proj", "down_proj"), ("lin1", "lin2"), ("0", "2"),
         ("intermediate", "output"),     # ProphetNet's ProphetNetFeedForward
         ("intermediate_dense", "output_dense"))     # wav2vec2's Wav2Vec2FeedForward (transformers 5.24)
QK_NORMS = ("q_norm", "k_norm", "q_layernorm", "k_layernorm", "query_layernorm", "key_layernorm")


def _only(m: Module, names) -> bool:
    """Every parameter of ``m`` is in its children called ``names`` (or is an attention's ``sinks``, one per head):
    nothing a block leaves out."""
    return set(m.params) <= {"sinks", "dense_bias"} and all(c.name in names for c in m.children if c.param_count())
ROUTERS = ("gate", "router")
#: an MoE layer's always-active shared expert (HunYuan-MoE's shared_mlp)
SHARED = ("shared_experts", "shared_expert", "shared_mlp")


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


def squared_relu(m: Module) -> bool:
    """The module's activation is the squared ReLU (transformers' ``ReLUSquaredActivation``, ACT2FN's ``relu2``)."""
    names = [str(m.attrs.get("act", ""))] + [c.cls for c in m.children]
    return any("relusquared" in n.lower().replace("_", "") or n.lower() == "relu2" for n in names)


def is_norm(m: Module) -> bool:
    """A LayerNorm or RMSNorm over the last dimension (one 1-D weight, perhaps a bias, or none)."""
    return "norm" in m.cls.lower() and all(len(s) == 1 for s in m.params.values()) and not m.children


def norm_call(m: Module, arg: str) -> str:
    """``rmsnorm(...)`` or ``layernorm(...)``, with ``bias``/``weight`` as the module holds them; a norm of a block's
    own form (:func:`costgraph.drafting.gated_norms.as_norm`) by its ``norm_text``."""
    if isinstance(m.attrs.get("norm_text"), str):
        return m.attrs["norm_text"].replace("{arg}", arg)
    rms = "rms" in m.cls.lower() or m.attrs.get("rms") is True     # CPM-Ant's CpmAntLayerNorm (trace._rms_source)
    opts = []
    if "weight" not in m.params:
        opts.append("weight = false")
    if not rms and "bias" not in m.params:
        opts.append("bias = false")
    return f"{'rmsnorm' if rms else 'layernorm'}({arg}{''.join(', ' + o for o in opts)}, name = {m.name})"


def _linear(m: Module | None) -> tuple[int, int, bool] | None:
    """(in, out, bias) of a Linear (weight [out, in]) or GPT-2's Conv1D (weight [in, out]), or of the one Linear a
    module of its own wraps, holding nothing else (Moshi's ``MoshiLinear``, transformers 5.24 modeling_moshi.py: its
    ``linear``, a ``nn.Linear`` where ``use_flexible_linear`` is off, as in the text decoder's layers)."""
    if m is not None and not m.params and len(m.children) == 1 and m.children[0].name == "linear":
        return _linear(m.children[0])
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
    if "dense_bias" in m.params:     # GPT-NeoX-Japanese's last layer: the output's bias [H] held by the attention
        if o is None or o[2] or m.params["dense_bias"] != (o[1],):  # (transformers 5.24 GPTNeoXJapaneseAttention)
            return None
        o = (o[0], o[1], True)
    if fused is not None and o is not None:
        if any(c.name in QK_NORMS for c in m.children):
            return _ln_qk_attention(m, _linear(fused), o, arg, d, rotary)
        return _fused_attention(m, _linear(fused), o, arg, d, rotary)
    q, k, v = (_linear(m.child(*names)) for names in (Q, K, V))
    if None in (q, k, v, o) or not (q[2] == v[2] and (k[2] == q[2] or not k[2])) \
            or any(c.param_count() and c.name not in (*Q, *K, *V, *O, *QK_NORMS) for c in m.children):
        return None     # a projection no block here holds (AFMoE's gate_proj): another recogniser's, or a TODO
    head_dim = m.attrs.get("head_dim")
    heads = m.attrs.get("num_heads") or m.attrs.get("num_attention_heads") or m.attrs.get("n_heads")   # DistilBERT's
    if not isinstance(head_dim, int):
        if not isinstance(heads, int):
            return None
        head_dim = q[1] // heads
    groups = m.attrs.get("num_key_value_groups")
    if not isinstance(heads, int) and isinstance(groups, int) and k[1] % head_dim == 0:
        heads = k[1] // head_dim * groups
    if isinstance(heads, int) and q[1] == 2 * heads * head_dim:     # Qwen3-Next: q_proj holds a gate per head
        return _gated_attention(m, q, k, o, heads, head_dim, arg, d)
    if q[1] % head_dim or k[1] % head_dim or k[1] != v[1]:
        return None
    opts = [f"qkv_bias = {_yes(q[2])}"] if q[2] else []
    if q[2] and not k[2]:          # Whisper's k_proj: no bias beside Q's and V's
        opts.append("k_bias = false")
    if o[2]:
        opts.append("out_bias = true")
    if m.attrs.get("is_causal") is False and not d.causal_lm:   # transformers' is_causal: an encoder's attention
        opts.append("causal = false")                          # (ViT, ALBERT, a VLM's tower): no mask, no K/V cache
    # an nn.Identity in a QK-norm's place is no norm (InternVL's vision attention without use_qk_norm: k28patch2)
    norms = [c for c in m.children if c.name in QK_NORMS and c.cls != "Identity"]
    whole = len(norms) == 2 and all("rms" in c.cls.lower() for c in norms) and \
        sorted(c.params.get("weight", (0,))[0] for c in norms) == sorted((q[1], k[1]))
    if whole and not q[2] and not o[2] and rotary:     # OLMo 2's QK-norm over the whole projection
        d.blocks.add("proj_norm_attention")
        sizes = head_sizes(d, q[1] // head_dim, k[1], head_dim)
        return f"proj_norm_attention({arg}, {', '.join(sizes + _window(m, d))}, name = {m.name})"
    if "sinks" in m.params:     # gpt-oss's learned sink logit per head (transformers' sinks [a])
        if m.params["sinks"] != (q[1] // head_dim,) or not rotary or (k[2] != q[2]) or (norms and (
                len(norms) != 2 or any(c.params.get("weight") != (head_dim,) for c in norms))):
            return None
        return _sink_attention(m, q, k, o, head_dim, arg, d, bool(norms))
    if norms:
        bare = all(not c.params and not c.children for c in norms)     # NanoChat's RMSNorms without a weight
        if len(norms) != 2 or any("rms" not in c.cls.lower() or (c.params.get("weight") != (head_dim,) and not bare)
                                  for c in norms):
            return None
        opts += ["qk_norm = true"] + (["qk_norm_weight = false"] if bare else [])
    if not rotary:
        opts.append("rotary = false")
    opts += _window(m, d)
    sizes = head_sizes(d, q[1] // head_dim, k[1], head_dim)
    return f"gqa_attention({arg}, {', '.join(sizes)}{''.join(', ' + x for x in opts)}, name = {m.name})"


def _sink_attention(m: Module, q, k, o, head_dim: int, arg: str, d, qk_norm: bool) -> str:
    """GQA whose softmax also meets a learned sink logit per head (gpt-oss, Granite SWA: ``sinks`` [a]; Flint's with
    RMSNorm on each head's q and k)."""
    d.blocks.add("sink_attention")
    sizes = head_sizes(d, q[1] // head_dim, k[1], head_dim)
    opts = (["qkv_bias = true"] if q[2] else []) + (["out_bias = true"] if o[2] else []) + _window(m, d)
    opts += ["qk_norm = true"] if qk_norm else []
    return f"sink_attention({arg}, {', '.join(sizes + opts)}, name = {m.name})"


def _gated_attention(m: Module, q, k, o, heads: int, head_dim: int, arg: str, d) -> str | None:
    """Qwen3-Next's attention (transformers' ``Qwen3NextAttention``): ``q_proj`` of 2·a·d columns, the query and a
    gate per head; RMSNorm on each head's q and k; the output times ``sigmoid(gate)`` before ``o_proj``; no bias."""
    norms = [c for c in m.children if c.name in QK_NORMS]
    if q[2] or k[2] or o[2] or len(norms) != 2 or any(c.params.get("weight") != (head_dim,) for c in norms):
        return None
    d.blocks.add("gated_attention")
    sizes = head_sizes(d, heads, k[1], head_dim)
    return f"gated_attention({arg}, {', '.join(sizes + _window(m, d))}, name = {m.name})"


def _ln_qk_attention(m: Module, f, o, arg: str, d, rotary: bool) -> str | None:
    """Persimmon's attention (transformers 5.24 ``PersimmonAttention``, Fuyu's language model): one
    ``query_key_value`` H → 3·a·d with a bias, a LayerNorm (weight and bias [d]) on each head's q and k
    (``q_layernorm``, ``k_layernorm``), (partial) rotary, ``dense`` a·d → H with a bias; the draft's
    ``ln_qk_attention``, or None."""
    heads, head_dim = m.attrs.get("num_heads"), m.attrs.get("head_dim")
    norms = [m.child(n) for n in ("q_layernorm", "k_layernorm")]
    if f is None or not isinstance(heads, int) or not isinstance(head_dim, int) or None in norms or not rotary \
            or f[1] != 3 * heads * head_dim or o[:2] != (heads * head_dim, f[0]) or not (f[2] and o[2]) \
            or any(n.cls != "LayerNorm" or n.params != {"weight": (head_dim,), "bias": (head_dim,)} for n in norms) \
            or len([c for c in m.children if c.param_count()]) != 4:
        return None
    d.blocks.add("ln_qk_attention")
    return f"ln_qk_attention({arg}, {d.size(heads, 'attention heads')}, {d.size(head_dim, 'head size')}, " \
           f"name = {m.name})"


def head_sizes(d, heads: int, kv_width: int, head_dim: int) -> list[str]:
    """The draft's sizes of an attention block: query heads, key/value heads (``kv_width // head_dim``) and the
    head size, each named by :meth:`costgraph.drafting.writer.Sizer.size` (a symbol or a probe-resolved number)."""
    return [d.size(heads, "query heads"), d.size(kv_width // head_dim, "key/value heads"),
            d.size(head_dim, "head size")]


def _window(m: Module, d) -> list[str]:
    """``window = W`` when the attention module reads a sliding window (its ``sliding_window``, or its config's
    that its forward passes on: Mistral's): every pair beyond it is masked (transformers' sliding-window mask) and
    its cache keeps the last positions only (``DynamicSlidingWindowLayer``)."""
    w = m.attrs.get("sliding_window")
    if not isinstance(w, int) or isinstance(w, bool) or w < 1:
        return []
    if d.probe.symbol_values().get("W") == w - 1:     # k28text13: the config's window + 1 (transformers 5.24
        # modeling_ultrabert.py UltrabertAttention ``config.sliding_window + 1``, modeling_openai_privacy_filter.py
        # OpenAIPrivacyFilterAttention: "Account for FA symmetry using -1"), read as W + 1, not 6 * kv
        return [f"window = {d.size(w - 1, 'sliding window', count='W')} + 1"]
    return [f"window = {d.size(w, 'sliding window', count='W')}"]


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
    opts += ([] if rotary else ["rotary = false"]) + _window(m, d)
    opts += ["causal = false"] if m.attrs.get("is_causal") is False and not d.causal_lm else []   # an encoder's
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
    # Granite 4's shared_mlp: input_linear, output_linear; ModernBERT's Wi (2w: input and gate), Wo
    # Moshi's MoshiGatingMLP: fc1 of 2w columns viewed as [2, w] (gate, value), fc2 from w
    fused = _linear(m.child("gate_up_proj", "input_linear", "Wi", "fc1"))
    down = _linear(m.child("down_proj", "output_linear", "Wo", "fc2"))
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
        xielu = next((c for c in m.children if c.cls == "XIELUActivation" and c.params == {"alpha_p": (1,),
                                                                                         "alpha_n": (1,)}), None)
        if xielu is not None:     # Apertus: up_proj → xIELU (two learned scalars) → down_proj, written out
            bias = _yes(a[2])
            return f"linear(xielu(linear({arg}, {width}, bias = {bias}, name = {first}), name = {xielu.name}), " \
                   f"{d.size(b[1], 'MLP output')}, bias = {bias}, name = {second})"
        if act == "relu" and squared_relu(m):     # Persimmon's relu2 MLP: written out, its two linears by name
            bias = _yes(a[2])
            return f"linear(relu2(linear({arg}, {width}, bias = {bias}, name = {first})), " \
                   f"{d.size(b[1], 'MLP output')}, bias = {bias}, name = {second})"
        if act == "relu":
            return f"relu_mlp({arg}, {width}, bias = {_yes(a[2])}, name = {m.name})"
    return None


def moe_call(m: Module, arg: str, d) -> str | None:
    """``moe`` (a router linear H → E and E SwiGLU experts, top-k each token), or None.

    The experts are transformers 5's fused tensors (``gate_up_proj`` [E, 2w, H], ``down_proj``
    [E, H, w]) or a ModuleList of gated MLPs. Shared experts are not recognised (None)."""
    router = m.child(*ROUTERS)
    experts = m.child("experts")
    wg = router.child("wg") if router is not None and not router.params and len(router.children) == 1 else None
    if wg is not None and wg.cls == "Linear" and set(wg.params) == {"weight"}:   # HunYuan-MoE's gate holds its wg
        router = Module(router.path, router.name, router.cls, dict(wg.params), attrs=dict(router.attrs))
    if router is None or experts is None or len(router.params.get("weight", ())) != 2:
        return None
    gate = _linear(m.child("shared_expert_gate"))
    shared = [c for c in m.children if c.name in SHARED or c.name.startswith("shared_expert")
              and c.name != "shared_expert_gate"]
    if len(shared) > 1 or (shared and shared[0].name not in SHARED) or \
            (gate is not None and (not shared or gate[1:] != (1, False))):
        return None
    n_experts, hidden = router.params["weight"]
    top_k = m.attrs.get("top_k", router.attrs.get("top_k"))
    if not isinstance(top_k, int):
        return None
    gu, dn = experts.params.get("gate_up_proj"), experts.params.get("down_proj")
    if gu is not None and dn is not None and len(gu) == 3 and len(dn) == 3 and gu[1] == hidden \
            and dn == (n_experts, gu[2] // 2, hidden):     # Aria's experts: [E, H, 2w] and [E, w, H] (x @ W)
        gu, dn = (n_experts, gu[2], hidden), (n_experts, hidden, gu[2] // 2)
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
    rparams = dict(router.params)
    for c in router.children:     # ERNIE 4.5's router keeps e_score_correction_bias [1, E] in a child moe_statics
        if c.name != "moe_statics" or set(c.params) != {"e_score_correction_bias"} or c.children \
                or c.params["e_score_correction_bias"] not in ((n_experts,), (1, n_experts)):
            return None
        rparams.update(c.params)
    if not set(rparams) <= {"weight", "bias", "e_score_correction_bias"} or \
            {"bias", "e_score_correction_bias"} <= set(rparams):
        return None
    # a router bias of E: a bias, or ERNIE 4.5's e_score_correction_bias held as a Parameter (std moe's router_bias)
    bias = ", router_bias = true" if {"bias", "e_score_correction_bias"} & set(rparams) else ""
    k_text = "2" if router.attrs.get("routes_two") else d.size(top_k, "top-k", count="k")
    if router.attrs.get("routes_two"):      # Phi-MoE's sparsemixer: two experts per token, num_experts_per_tok unread
        if not d.silent:
            d.warnings.append(f"{router.path}: routes by sparsemixer, two experts per token whatever "
                              "num_experts_per_tok: written top-k 2")
    sizes = [d.size(n_experts, "experts"), k_text, d.size(width, "expert width")]
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


def mla_call(m: Module, arg: str, d, rotary: bool = True) -> str | None:
    """Multi-head latent attention (DeepSeek-V2/V3; transformers' ``DeepseekV3Attention`` with a query
    rank: ``q_a_proj``, ``q_a_layernorm``, ``q_b_proj``, ``kv_a_proj_with_mqa``, ``kv_a_layernorm``,
    ``kv_b_proj``, ``o_proj``, no biases) as std ``mla``, or None. Sizes: ``heads`` from ``o_proj``'s
    input over ``v_head_dim``, the rest from the projections' shapes."""
    names = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
    qa, qb, kva, kvb, o = (_linear(m.child(n)) for n in names)
    if qa is None and qb is None and m.child("q_a_layernorm") is None and m.child("q_proj") is not None:
        return None if rotary else _mla_nope(m, arg, d, kva, kvb, o)
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


def _mla_nope(m: Module, arg: str, d, kva, kvb, o) -> str | None:
    """Kimi Linear's MLA (transformers 5.24 ``KimiLinearAttention`` without ``q_lora_rank``): ``q_proj``
    H → a·(d_n + d_r), the latent ``kv_a_proj_with_mqa`` H → r_kv + d_r, ``kv_a_layernorm``, ``kv_b_proj``
    r_kv → a·(d_n + d_v), ``o_proj``; no rotary at all (NoPE); the draft's ``mla_nope`` (models/kimi_linear.cg's),
    or None."""
    q, kvn = _linear(m.child("q_proj")), m.child("kv_a_layernorm")
    heads = m.attrs.get("num_heads") or m.attrs.get("num_attention_heads")
    if None in (q, kva, kvb, o, kvn) or not isinstance(heads, int) or m.params or not is_norm(kvn) \
            or any(x[2] for x in (q, kva, kvb, o)) or len([c for c in m.children if c.param_count()]) != 5:
        return None
    kv_rank = kvn.params.get("weight", (0,))[0]
    rope, v_dim = kva[1] - kv_rank, o[0] // heads
    nope = kvb[1] // heads - v_dim
    if q[1] != heads * (nope + rope) or kvb[0] != kv_rank or o[0] != heads * v_dim or min(rope, nope, v_dim) < 1:
        return None
    d.blocks.add("mla_nope")
    sizes = [d.size(heads, "attention heads"), d.size(kv_rank, "latent rank"), d.size(nope, "head size of the latent "
             "part"), d.size(rope, "shared key part"), d.size(v_dim, "value head size")]
    return f"mla_nope({arg}, {', '.join(sizes)}, name = {m.name})"


#: blocks a draft defines itself when it uses them (no std/ file has them); from models/olmo2.cg
#: (OLMo 2, Groeneveld et al. / AI2 2024: RMSNorm over the whole Q and K projections, fp32 scale), and
#: Griffin's recurrent block (transformers' modeling_recurrent_gemma.py)
LOCAL_BLOCKS = {"mla_nope": """# Multi-head latent attention without a query rank and without rotary (Kimi Linear's NoPE MLA; transformers'
# KimiLinearAttention; models/kimi_linear.cg's mla_nope): the cache keeps the latent and the shared key part.
block mla_nope(x[B, S, H], heads, kv_rank, nope_dim, rope_dim, v_dim) {
  q = split_heads(linear(x, heads * (nope_dim + rope_dim), bias = false, name = q_proj), heads)
  latent = cache(split_heads(linear(x, kv_rank + rope_dim, bias = false, name = kv_a_proj_with_mqa), 1),
                 name = kv_cache)
  c = rmsnorm(slice(latent, kv_rank), name = kv_a_layernorm)
  k_pe = slice(latent, rope_dim)
  kv = split_heads(linear(merge_heads(c), heads * (nope_dim + v_dim), bias = false, name = kv_b_proj), heads)
  k = concat(slice(kv, nope_dim), k_pe)
  v = slice(kv, v_dim)
  y = merge_heads(matmul(softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true), v, causal = true))
  return linear(y, H, bias = false, name = o_proj)
}""", "ln_qk_attention": """# Attention with a LayerNorm on each head's q and k (Persimmon, Fuyu; transformers' PersimmonAttention):
# one query_key_value projection with a bias, q, k, v per head, LayerNorm (weight and bias) on q and k,
# (partial) rotary, which costs no product; dense back, with a bias.
block ln_qk_attention(x[B, S, H], heads, head_dim) {
  q, k, v = split(split_heads(linear(x, 3 * heads * head_dim, bias = true, name = query_key_value), heads), 3)
  q = rope(layernorm(q, name = q_layernorm))
  k = rope(layernorm(k, name = k_layernorm))
  k = cache(k, name = k_cache)
  v = cache(v, name = v_cache)
  p = softmax(scale(matmul(q, transpose(k), causal = true)), fp32 = true)
  return linear(merge_heads(matmul(p, v, causal = true)), H, bias = true, name = dense)
}""", "sink_attention": """# GQA with a learned sink logit per head (gpt-oss; models/gpt_oss.cg's oss_attention): the softmax over the
# scores and the sink's column, the sink's column dropped before scores·V.
block sink_softmax(logits[B, A, S, K1]) {
  return slice(softmax(logits), K1 - 1)
}

block sink_attention(x[B, S, H], heads, kv_heads, head_dim, qkv_bias = false, out_bias = false, window = none,
                     qk_norm = false) {
  q = split_heads(linear(x, heads * head_dim, bias = qkv_bias, name = q_proj), heads)
  k = split_heads(linear(x, kv_heads * head_dim, bias = qkv_bias, name = k_proj), kv_heads)
  if qk_norm {
    q = rmsnorm(q, name = q_norm)
    k = rmsnorm(k, name = k_norm)
  }
  q = rope(q)
  k = rope(k)
  v = split_heads(linear(x, kv_heads * head_dim, bias = qkv_bias, name = v_proj), kv_heads)
  k = repeat_kv(cache(k, window = window, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, window = window, name = v_cache), heads / kv_heads)
  param sinks[1, heads, 1, 1]
  logits = concat(scale(matmul(q, transpose(k), window = window, causal = true)), sinks)
  p = sink_softmax(logits, name = sinks_softmax)
  return linear(merge_heads(matmul(p, v, window = window, causal = true)), H, bias = out_bias, name = o_proj)
}""", "proj_norm_attention": """# Attention with RMSNorm over the whole Q and K projections (OLMo 2; models/olmo2.cg's olmo2_attention).
block proj_norm_attention(x[B, S, H], heads, kv_heads, head_dim, window = none) {
  q = rmsnorm(linear(x, heads * head_dim, bias = false, name = q_proj), fp32_scale = true, name = q_norm)
  k = rmsnorm(linear(x, kv_heads * head_dim, bias = false, name = k_proj), fp32_scale = true, name = k_norm)
  v = linear(x, kv_heads * head_dim, bias = false, name = v_proj)
  q = rope(split_heads(q, heads))
  k = rope(split_heads(k, kv_heads))
  k = repeat_kv(cache(k, window = window, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(split_heads(v, kv_heads), window = window, name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), window = window, causal = true)), fp32 = true)
  return linear(merge_heads(matmul(p, v, window = window, causal = true)), H, bias = false, name = o_proj)
}""", "gated_shared_moe": """# Routed experts plus one shared expert scaled per token by sigmoid(shared_expert_gate(x)), a linear H -> 1
# without bias (Qwen2-MoE; models/qwen2_moe.cg's qwen2_moe_mlp).
block gated_shared_moe(x[B, S, H], experts, top_k, width, shared_width) {
  g = sigmoid(linear(x, 1, bias = false, name = shared_expert_gate))
  return moe(x, experts, top_k, width, name = routed) + g * swiglu(x, shared_width, name = shared_expert)
}""", "gated_attention": """# Attention with a sigmoid gate per head (Qwen3-Next; models/qwen3_next.cg's gated_attention): q_proj holds
# the query and the gate, RMSNorm on each head's q and k; rotary (partial) costs no product.
block gated_attention(x[B, S, H], heads, kv_heads, head_dim, window = none) {
  q, gate = split(linear(x, 2 * heads * head_dim, bias = false, name = q_proj), 2)
  q = rope(rmsnorm(split_heads(q, heads), name = q_norm))
  k = rope(rmsnorm(split_heads(linear(x, kv_heads * head_dim, bias = false, name = k_proj), kv_heads), name = k_norm))
  v = split_heads(linear(x, kv_heads * head_dim, bias = false, name = v_proj), kv_heads)
  k = repeat_kv(cache(k, window = window, name = k_cache), heads / kv_heads)
  v = repeat_kv(cache(v, window = window, name = v_cache), heads / kv_heads)
  p = softmax(scale(matmul(q, transpose(k), window = window, causal = true)), fp32 = true)
  y = merge_heads(matmul(p, v, window = window, causal = true))
  return linear(y * sigmoid(gate), H, bias = false, name = o_proj)
}"""}
