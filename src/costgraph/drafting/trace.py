"""Trace a transformers model on the meta device into :class:`costgraph.drafting.facts.Module` facts.

The model is built from its config (``AutoConfig.for_model``, ``AutoModelForCausalLM.from_config``
on ``torch.device("meta")``: shapes only, no weights) and run once on ``[b, s]`` token ids under
``torch.no_grad``; forward pre-hooks and hooks on every module record the order of first calls and
which tensor each call consumed and produced (by identity, the tensors kept alive meanwhile). Torch
and transformers are imported inside the functions: the ``torch`` extra stays optional.
"""

from __future__ import annotations

from .facts import Module

#: module attributes the recognisers read, when they are ints, floats, bools or strings
ATTRS = ("num_heads", "num_attention_heads", "n_head", "num_key_value_heads", "num_kv_heads", "head_dim", "head_size", "top_k", "p",
         "sliding_window", "num_experts", "is_causal", "padding_idx", "nf", "eps", "n_groups", "ssm_state_size",
         "chunk_size", "num_k_heads", "head_k_dim", "num_key_value_groups", "block_size", "limit", "swiglu_limit",
         "index_topk", "v_head_dim", "num_buckets", "num_segments", "dim_head",
         "ln_before_adapter", "adapter_reuse_layer_norm", "ngram", "num_attn_heads",
         "data_format", "num_groups",    # ConvNeXt's LayerNorm: "channels_first" permutes around the norm (k28conv12)
         "is_causal",     # transformers' attention modules: False where no causal mask is applied (an encoder's)
         "n_heads",     # DistilBERT's (transformers 5.24 modeling_distilbert.py DistilBertSelfAttention.n_heads)
         "input_scale")     # k28speech13: FastConformer's √h or 1.0 (modeling_parakeet.py ParakeetEncoder.input_scale)
#: module attributes that list layer indices, read as tuples (k28patch13: Qwen3-VL's tower, transformers 5.24
#: modeling_qwen3_vl.py ``Qwen3VLVisionModel.deepstack_visual_indexes``, the layers whose output a merger of
#: ``deepstack_merger_list`` reads; Qwen2.5-VL's ``fullatt_block_indexes``, the layers of full attention)
LAYER_LISTS = ("deepstack_visual_indexes", "fullatt_block_indexes")
#: set by :func:`costgraph.drafting.inputs_patches.patch_inputs` on a model it gives flattened patches: m², the
#: patches of one image token (k28patch13)
FLATTENED = "flattened_patches"
#: attributes that hold an activation function (a module or a function)
ACT_ATTRS = ("act_fn", "act", "activation_fn", "activation")


def _causal_conv(mod) -> bool:
    """Whether ``mod`` is a causal subclass of ``nn.Conv1d``/``nn.Conv2d`` padding in its own forward (k28speech2:
    transformers 5.24 modeling_nemotron_asr_streaming.py ``NemotronAsrStreamingEncoderCausalConv1d``/``…Conv2D``)."""
    return type(mod).__name__.endswith(("CausalConv1d", "CausalConv2D")) \
        and any(c.__name__ in ("Conv1d", "Conv2d") for c in type(mod).__mro__)


def _first_tensor(torch, args, kwargs=None):
    """The tensor a call is about: its first tensor argument, else ``hidden_states``, else any."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a
    kwargs = kwargs or {}
    if isinstance(kwargs.get("hidden_states"), torch.Tensor):
        return kwargs["hidden_states"]
    for v in kwargs.values():
        if isinstance(v, torch.Tensor):
            return v
    return None


def _out_tensor(torch, out):
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)):
        return next((o for o in out if isinstance(o, torch.Tensor)), None)
    values = getattr(out, "values", None)
    if callable(values):
        return next((o for o in values() if isinstance(o, torch.Tensor)), None)
    return None


def _config_window(mod):
    """The config's ``sliding_window`` an attention module without an attribute of its own reads in its forward
    (Mistral's, Mixtral's, Starcoder2's ``sliding_window=getattr(self.config, "sliding_window", None)``), else None."""
    import inspect

    cfg = getattr(mod, "config", None)
    try:
        w = getattr(cfg, "sliding_window", None)
    except RuntimeError:   # a per-layer field the config refuses to read globally (NeoMME's: transformers 5.24
        return None        # heterogeneity's AmbiguousGlobalPerLayerAttributeError, a RuntimeError): k28text13
    if not isinstance(w, int) or isinstance(w, bool) or not type(mod).__name__.endswith("Attention"):
        return None
    try:
        source = inspect.getsource(type(mod).forward)
    except (OSError, TypeError):
        return None
    return w if 'getattr(self.config, "sliding_window"' in source else None


def _sparsemixer(mod) -> bool:
    """A router whose forward routes by transformers' ``sparsemixer`` (Phi-MoE's ``PhimoeTopKRouter``): two experts
    per token whatever its ``top_k`` (modeling_phimoe.py's sparsemixer selects a first and a second expert only)."""
    import inspect

    if not type(mod).__name__.endswith("Router"):
        return False
    try:
        return "sparsemixer(" in inspect.getsource(type(mod).forward)
    except (OSError, TypeError):
        return False


def _attrs(mod) -> dict:
    out = {}
    if _sparsemixer(mod):
        out["routes_two"] = True
    for a in ATTRS:
        v = getattr(mod, a, None)
        if isinstance(v, (bool, int, float, str)):
            out[a] = v
    if getattr(mod, "attention_type", None) == "local":   # GPT-Neo's local layers: a causal band of window_size keys
        w = getattr(getattr(mod, "config", None), "window_size", None)
        if isinstance(w, int) and not isinstance(w, bool):
            out["sliding_window"] = w
    if "sliding_window" not in out and not hasattr(mod, "sliding_window"):
        w = _config_window(mod)
        if w is not None:
            out["sliding_window"] = w
    ratio = getattr(getattr(mod, "config", None), "mask_ratio", None)
    if callable(getattr(mod, "random_masking", None)) and isinstance(ratio, float):   # ViT-MAE's embeddings (k28tower12)
        out["mask_ratio"] = ratio
    for a in ("kernel_size", "padding", "groups", "stride", "output_size"):   # a convolution's or pool's, (k,) and
        v = getattr(mod, a, None)                                              # square (k, k) tuples read as k
        if isinstance(v, tuple) and len(v) in (1, 2) and isinstance(v[0], int) and len(set(v)) == 1:
            v = v[0]
        if isinstance(v, int) and (type(mod).__name__.startswith(("Conv", "ParametrizedConv", "MaxPool", "AvgPool",
                                                                   "AdaptiveAvgPool")) or _causal_conv(mod)):
            out[a] = v                                                         # weight-normed convs too
    if getattr(mod, "padding", None) == "same" and type(mod).__name__ == "Conv1d":    # k28speech13: LASR's depthwise
        out["padding"] = "same"       # convolution (modeling_lasr.py LasrEncoderConvolutionModule: padding="same")
    for a in ("feed_forward_residual_weights", "conv_residual_weights"):    # k28speech13: LASR's block scales
        v = getattr(mod, a, None)      # (modeling_lasr.py LasrEncoderBlock: residual and output weighted)
        if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(w, (int, float)) for w in v):
            out[a] = ",".join(str(float(w)) for w in v)
    if isinstance(getattr(mod, FLATTENED, None), int):
        out[FLATTENED] = getattr(mod, FLATTENED)
    for a in LAYER_LISTS:     # k28patch13: which layers a VLM tower's forward reads out (a list of layer indices)
        v = getattr(mod, a, None)
        if isinstance(v, (list, tuple)) and v and all(isinstance(j, int) and not isinstance(j, bool) for j in v):
            out[a] = tuple(v)
    for a in ACT_ATTRS:
        v = getattr(mod, a, None)
        if v is not None and callable(v):
            out["act"] = type(v).__name__ if not hasattr(v, "__name__") else v.__name__
    if hasattr(mod, "g_proj") and type(mod).__name__.endswith("Attention"):
        gate = _gate_fn(mod)
        if gate is not None:
            out["gate_fn"] = gate
    if "norm" in type(mod).__name__.lower() and "rms" not in type(mod).__name__.lower() and _rms_source(mod):
        out["rms"] = True
    if "act" not in out and type(mod).__name__.endswith("MLP"):
        act = _source_act(mod)
        if act is not None:
            out["act"] = act
    return out


def _gate_fn(mod) -> str | None:
    """The function an attention's forward applies to its ``g_proj`` output, from its source: ``sigmoid`` (LFM3's
    ``torch.sigmoid(self.g_proj(hidden_states))``, transformers 5.24 modeling_lfm3.py) or ``softplus`` (Laguna's
    ``F.softplus(self.g_proj(hidden_states).float())``); None when neither or both."""
    import inspect

    try:
        source = inspect.getsource(type(mod).forward)
    except (OSError, TypeError):
        return None
    found = [f for f in ("sigmoid", "softplus") if f"{f}(self.g_proj(" in source]
    return found[0] if len(found) == 1 else None


def _rms_source(mod) -> bool:
    """A norm whose class name does not say RMS but whose forward is one (CPM-Ant's ``CpmAntLayerNorm``,
    transformers 5.24 modeling_cpmant.py: ``variance = hidden_states.to(torch.float32).pow(2).mean(dim=-1,
    keepdim=True)``, ``hidden_states * torch.rsqrt(variance + self.eps)``, times its weight): the mean of squares under
    ``rsqrt`` and no mean subtracted."""
    import inspect

    try:
        source = inspect.getsource(type(mod).forward)
    except (OSError, TypeError):
        return False
    return "pow(2).mean(" in source and "rsqrt(" in source and " - " not in source


def _source_act(mod) -> str | None:
    """The activation an MLP without an activation attribute calls by name in its forward (LFM's ``Lfm3MLP``:
    ``self.w2(F.silu(self.w1(x)) * self.w3(x))``, transformers 5.24 modeling_lfm3.py): ``silu``, ``gelu`` or ``relu``
    when its source calls exactly one of ``F.silu``, ``F.gelu``, ``F.relu``; else None."""
    import inspect

    try:
        source = inspect.getsource(type(mod).forward)
    except (OSError, TypeError):
        return None
    found = [a for a in ("silu", "gelu", "relu") if f"F.{a}(" in source]
    return found[0] if len(found) == 1 else None


def trace(torch, model, inputs: dict, run) -> Module:
    """The facts of ``model`` after one forward ``run(model, inputs)`` (``run`` sets the context:
    :func:`costgraph.torch_measure.meta_forward`, no grad)."""
    nodes: dict[str, Module] = {}
    pids: dict[str, dict[str, int]] = {}
    mods = dict(model.named_modules(remove_duplicate=False))   # a module shared by layers has each path
    for path, mod in mods.items():
        m = nodes[path] = Module(path, path.rsplit(".", 1)[-1] if path else "", type(mod).__name__, attrs=_attrs(mod))
        buffers = [n for n, _ in mod.named_buffers(recurse=False)]
        if buffers:
            m.attrs["buffers"] = ",".join(buffers)
        for pname, p in mod.named_parameters(recurse=False, remove_duplicate=False):
            m.params[pname] = tuple(int(x) for x in p.shape)
            pids.setdefault(path, {})[pname] = id(p)
        frozen = [n for n, p in mod.named_parameters(recurse=False) if not p.requires_grad]
        if frozen:     # requires_grad_(False): Whisper's sinusoidal position table (a parameter training leaves alone)
            m.attrs["frozen"] = ",".join(frozen)
    keep, produced, consumed = [], {}, {}
    counter = [0]
    handles = []

    def pre(path):
        def hook(mod, args, kwargs):
            node = nodes[path]
            if node.order is None:
                node.order = counter[0]
                counter[0] += 1
                t = _first_tensor(torch, args, kwargs)
                if t is not None:
                    keep.append(t)
                    consumed[path] = id(t)
                    node.tokens = int(t.shape[1]) if t.dim() >= 2 else None
                    if type(mod).__name__ == "Conv2d":     # its input's height and width (AST's spectrogram)
                        node.attrs["in_shape"] = ",".join(str(int(n)) for n in t.shape)
                    if "norm" in node.cls.lower():     # ConvNeXt's final norm reads the pooled [B, C]
                        node.attrs["in_rank"] = t.dim()
                    if t.numel() == 0:     # called on no rows (X-MOD's adapter of a language no sequence is in)
                        node.attrs["empty_input"] = True
            else:
                node.again.append(counter[0])
                counter[0] += 1
        return hook

    def post(path):
        def hook(mod, args, kwargs, out):
            t = _out_tensor(torch, out)
            if t is not None and path not in produced:
                keep.append(t)
                produced[path] = id(t)
        return hook

    for path, mod in mods.items():
        handles.append(mod.register_forward_pre_hook(pre(path), with_kwargs=True))
        handles.append(mod.register_forward_hook(post(path), with_kwargs=True))
    try:
        run(model, inputs)
    finally:
        for h in handles:
            h.remove()
    owner: dict[int, str] = {}      # a shared Parameter belongs to the module that runs first (the embedding)
    for node in sorted(nodes.values(), key=lambda n: (n.order is None, n.order or 0)):
        for pname, pid in pids.get(node.path, {}).items():
            holder = owner.setdefault(pid, node.path)
            if holder != node.path:
                node.tied[pname] = holder
    for path, mod in mods.items():
        node = nodes[path]
        kids = [nodes[f"{path}.{n}" if path else n] for n, _ in mod.named_children()]
        kids.sort(key=lambda k: (k.order is None, k.order if k.order is not None else 0))
        node.children = kids
        for k in kids:
            cid = consumed.get(k.path)
            if cid is None:
                continue
            if cid == consumed.get(path):
                k.src = "input"
            else:
                k.src = next((s.name for s in kids if s is not k and produced.get(s.path) == cid), "?")
    del keep
    return nodes[""]
