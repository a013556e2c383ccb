"""Megatron-LM's theoretical memory estimate, as a named profile beside costgraph's own.

A transcription of ``megatron/training/theoretical_memory_usage.py`` of
NVIDIA/Megatron-LM at commit ``d98e8a64ddf34856e74b24714e3bedb2f5a39553``
(:data:`MEGATRON_COMMIT`; line numbers below are of that file), arithmetic for
arithmetic, faults included, in exact SymPy (Megatron computes in Python floats;
its ``1.05`` is ``Rational(21, 20)`` here, its ``3 / 2`` ``Rational(3, 2)``):

``weights_and_optimizer`` (``compute_weight_and_optimizer_memory``, l. 12–305)
    Parameters on the most-loaded shard (first pipeline stage: ``1/p`` of the
    layers plus the word embedding; with ``p = 1`` and an untied head a second
    ``V·h``), TP-sharded ones ÷ t, norms replicated, routed experts ÷ (etp·e),
    times ``18`` bytes (bf16 weight, fp32 main grad, fp32 master and Adam
    moments), or ``6 + 12/d`` with the distributed optimizer (``d`` the
    data-parallel size without CP; experts over ``world // (etp·e·p)``).
    Counts no linear biases (only a MoE router's), no position table.
``activations`` (l. 308–453, chosen at l. 466)
    With sequence parallelism *and* selective recompute,
    ``compute_activation_memory``: ``sbh(18 + 4·ffn/h)·L + 8sbp + sbhp``,
    × the interleaving penalty ``1 + (p−1)/(p·v)`` or ``min(1, m/p)``,
    + ``4sbh(1 + V/h)`` when ``p = 1``, all ÷ t. Otherwise
    ``compute_activation_memory_without_sp``: ``sbh(10 + 24/t)·L + 8sbp + sbhp``,
    same pipeline factor, + ``2(sbV/t + sbh)`` when ``p = 1``, × 1.05.
    Neither has the ``5as/h`` (s²) term; ``recompute = none`` and ``full`` are
    both charged as selective without SP; SP without selective is charged as
    no SP; MoE layers use the dense ``ffn_hidden_size``; CP is ignored.
``total``
    The sum. Megatron prints each ÷ 2²⁰ with two decimals labelled "MB"
    (they are MiB): :func:`megatron_report` gives that line.

Megatron's arguments come from the model's dimensions through the per-family
mapping ``megatron_args.toml`` (data read by :mod:`costgraph.datafiles`, built
into SymPy by construction), the
vocabulary padded as Megatron pads it (``vocab_size_with_padding``,
``megatron/core/tokenizers/utils/build_tokenizer.py`` l. 133–146: up to a
multiple of ``128·t``), and from the :class:`~costgraph.parallel.layout.Layout`:
t, p, v (interleaved schedule only), d, c (only into the world size), e, etp,
``sp``, ``recompute``, ``zero ≥ 1`` as ``use_distributed_optimizer``, and
``m`` as ``num_microbatches``. The layout's ``policy``, ``optimizer``,
``attention``, ``precision`` and ``loss`` do not enter: Megatron's estimate
assumes bf16 with Adam, fused attention and its own loss terms.
"""

from __future__ import annotations

from functools import cache
from types import SimpleNamespace

import sympy


from .. import datafiles
from ..datafiles import Field, Kind, Schema
from ..errors import CostgraphValueError
from ..engine.graph import CostGraph
from ..engine.symbols import as_expr, dim
from .result_parts import MegatronBeside, MemoryEstimate

MEGATRON_REPO = "NVIDIA/Megatron-LM"
MEGATRON_COMMIT = "d98e8a64ddf34856e74b24714e3bedb2f5a39553"
MEGATRON_FILE = "megatron/training/theoretical_memory_usage.py"
KEYS = ("weights_and_optimizer", "activations", "total")
MIB = 1024 * 1024   # NUM_BYTES_IN_MEGABYTE, l. 9

#: Megatron's defaults for the arguments the families do not set (megatron/training/arguments.py).
DEFAULTS = {
    "num_experts": None, "moe_router_topk": None, "moe_ffn_hidden_size": None, "moe_layer_freq": 1,
    "moe_shared_expert_intermediate_size": None, "moe_shared_expert_gate": False, "moe_latent_size": None,
    "mtp_num_layers": None, "multi_latent_attention": False, "q_lora_rank": None, "kv_lora_rank": None,
    "qk_head_dim": None, "qk_pos_emb_head_dim": None, "v_head_dim": None,
    "make_vocab_size_divisible_by": 128, "group_query_attention": False, "add_bias_linear": True,
    "normalization": "LayerNorm", "swiglu": False, "untie_embeddings_and_output_weights": False,
}

#: What Megatron's estimate counts and omits, beside what costgraph counts (README table).
DIFFERENCES = (
    ("bytes per parameter", "18 (bf16 + fp32 main grad, master, Adam), or 6 + 12/d distributed",
     "the layout's precision policy and optimizer (policy 'megatron' gives 18 / 6 + 12/d)"),
    ("parameters", "matrices and norms only: no linear biases, no position table; vocabulary padded to 128·t",
     "every weight of the graph, vocabulary as given"),
    ("distributed optimizer", "shards over d only (CP ranks not counted)", "ZeRO over d·c"),
    ("attention scores", "no s² term (assumes fused attention), whatever the setting",
     "5as/h per layer with eager attention; none with flash"),
    ("recompute none / full", "charged as selective without SP: sbh(10 + 24/t) per layer",
     "none keeps everything; full keeps each layer's input plus one live layer"),
    ("sequence parallelism", "divides only when selective recompute is on too", "divides the replicated regions by t"),
    ("×1.05", "on the whole activation figure of the non-SP path", "no overhead factor"),
    ("MoE layers", "activations at the dense ffn_hidden_size", "each expert's tensors, k of E per token"),
    ("context parallelism", "ignored (full s on every rank)", "sequence-bearing tensors ÷ c"),
    ("pipeline", "first stage: all L layers' activations × min(1, m/p) or × 1 + (p−1)/(p·v); "
     "token ids 8sbp and embedding dropout sbhp", "per stage from the graph: in-flight micro-batches × its layers"),
    ("output layer", "only when p = 1, on the same (first) stage: 4sbh(1 + V/h)/t, or 2(sbV/t + sbh)",
     "on the last stage: the cross-entropy's buffers, 6sbV/t under the default --cross-entropy megatron "
     "(fp32 softmax + bf16 gradient), 4sbV/t under logits"),
    ("MTP depths", "one more layer each (MoE if the last is), on the first stage's count; no eh_proj, no MTP norms",
     "each depth's layer, eh_proj 2h² and three norms, a mean share per stage"),
)


#: Megatron arguments a family may map (besides :data:`DEFAULTS`' keys), all read by ``_value``.
ARGUMENTS = ("num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
             "num_query_groups", "vocab_size", "seq_length", "micro_batch_size", *DEFAULTS)
_ARGS = tuple(Field(k, "spec", required=False) for k in dict.fromkeys(ARGUMENTS))
#: ``megatron_args.toml``: a mapping (model dimensions → Megatron's arguments), not numbers with sources.
FAMILY = Kind("model family", (
    Field("source", "text", required=False), Field("like", "ref", required=False),
    Field("options_ignored", "names", required=False), Field("if_option", "table", required=False), *_ARGS))
MEGATRON_ARGS = Schema("megatron_args.toml", __package__, entries=FAMILY)


@cache
def _families() -> dict:
    """The families of ``megatron_args.toml``, validated by :mod:`costgraph.datafiles`
    (known argument names, a ``like`` naming another family), as plain dicts."""
    data = datafiles.bundled(MEGATRON_ARGS)
    out = {}
    for name, e in data.entries.items():
        for option, table in e.get("if_option", {}).items():
            unknown = sorted(set(table) - set(ARGUMENTS)) if isinstance(table, dict) else [option]
            if unknown:
                raise e.error(f"if_option.{option} sets unknown Megatron arguments {', '.join(unknown)}", "if_option")
        out[name] = {k: (list(v) if k == "options_ignored" else v) for k, v in e.values.items()}
    return out


def _family(cg: CostGraph) -> tuple[str, dict]:
    fams = _families()
    name = cg.name
    if name not in fams:
        raise CostgraphValueError(f"Megatron's estimate has no argument mapping for model '{name}'",
                                  hint="families in megatron_args.toml: " + ", ".join(sorted(fams)))
    entry = fams[name]
    seen = {name}
    while "like" in entry:
        base = entry["like"]
        if base in seen or base not in fams:
            raise CostgraphValueError(f"megatron_args.toml: '{name}' is like unknown or cyclic '{base}'")
        seen.add(base)
        entry = {**fams[base], **{k: v for k, v in entry.items() if k != "like"}}
    return name, entry


def _value(spec, cg: CostGraph, where: str):
    """A TOML value → a SymPy expression, flag or name (module docstring of the TOML file)."""
    if isinstance(spec, bool):
        return spec
    if isinstance(spec, int):
        return sympy.Integer(spec)
    if isinstance(spec, str):
        if where in ("normalization",):
            return spec
        if spec not in cg.dims:
            raise CostgraphValueError(f"megatron_args.toml: {where} names '{spec}', not a dimension of '{cg.name}'",
                                      hint="dimensions: " + ", ".join(cg.dims))
        d = cg.dims[spec]
        return d.derived if d.derived is not None else d.symbol
    if isinstance(spec, list):
        return sympy.Mul(*[_value(x, cg, where) for x in spec])
    if isinstance(spec, dict) and set(spec) == {"num", "den"}:
        return _value(spec["num"], cg, where) / _value(spec["den"], cg, where)
    if isinstance(spec, dict) and set(spec) == {"dense_first"}:   # moe_layer_freq: k dense layers, then MoE
        return ("dense_first", _value(spec["dense_first"], cg, where))
    if isinstance(spec, dict) and "option" in spec and set(spec) <= {"option", "negate"}:
        on = bool(cg.options.get(spec["option"], False))
        return (not on) if spec.get("negate") else on
    raise CostgraphValueError(f"megatron_args.toml: cannot read {where} = {spec!r}")


def _num(x):
    return x if isinstance(x, (bool, str, type(None), list)) else as_expr(x)


def _subs(x, values):
    return x.xreplace(values) if isinstance(x, sympy.Basic) else x


def _concrete_int(x, what):
    x = as_expr(x)
    if not x.is_Integer:
        raise CostgraphValueError(f"Megatron's estimate branches on {what}; give it a number, got {x}",
                                  hint="set it in the layout or in values")
    return int(x)


def megatron_args(model, values: dict | None = None, layout=None, **overrides) -> SimpleNamespace:
    """Megatron's ``args`` for ``model`` under ``layout``, as SymPy values.

    ``values`` (symbol or name → number) are substituted; what they leave
    free stays symbolic. ``overrides`` set any Megatron argument directly
    (``make_vocab_size_divisible_by=1``, ``moe_layer_freq=[0, 1, ...]``,
    ``padded_vocab_size=...``). ``padded_vocab_size`` is the model's ``V``
    padded as Megatron pads it unless given.

    Raises
    ------
    CostgraphValueError
        A model family without a mapping in ``megatron_args.toml``, or a model
        option set that Megatron's estimate has no form for.
    """
    from .memory import Layout

    cg = model.graph if hasattr(model, "graph") and not isinstance(model, CostGraph) else model
    name, fam = _family(cg)
    L = (layout or Layout()).filled()
    vals = {}
    for k, v in (values or {}).items():
        sym = k if isinstance(k, sympy.Symbol) else (cg.dims[k].symbol if k in cg.dims else dim(k))
        vals[sym] = as_expr(v)
    ignored = set(fam.get("options_ignored", ()))
    cond = fam.get("if_option", {})
    for opt, on in cg.options.items():
        if on is True and opt not in ignored and opt not in cond and not _is_option_ref(fam, opt):
            raise CostgraphValueError(f"Megatron's estimate has no form for option '{opt}' of '{cg.name}'",
                                      hint="its theoretical_memory_usage.py knows GPT and LLaMA shapes only")
    spec = {k: v for k, v in fam.items() if k not in ("source", "like", "options_ignored", "if_option")}
    for opt, table in cond.items():
        if cg.options.get(opt) is True:
            spec.update(table)
    a = dict(DEFAULTS)
    for k, v in spec.items():
        a[k] = _subs(_value(v, cg, k), vals)
    if isinstance(a.get("moe_layer_freq"), tuple):   # ("dense_first", k): Megatron's [0]*k + [1]*(L - k)
        k, n = as_expr(_subs(a["moe_layer_freq"][1], vals)), as_expr(a["num_layers"])
        if not (k.is_Integer and n.is_Integer):
            raise CostgraphValueError("Megatron's moe_layer_freq lists each layer: give the layer counts numbers",
                                      hint="pass values (model.values(config=...))")
        a["moe_layer_freq"] = [0] * int(k) + [1] * (int(n) - int(k))
    if a.get("moe_ffn_hidden_size") is None and a.get("num_experts") is not None:
        a["moe_ffn_hidden_size"] = a["ffn_hidden_size"]      # arguments.py l. 1650-1651
    t, p, c, d = (_subs(as_expr(getattr(L, n)), vals) for n in ("t", "p", "c", "d"))
    a.update(
        tensor_model_parallel_size=t, pipeline_model_parallel_size=p, context_parallel_size=c,
        data_parallel_size=d,
        world_size=t * p * c * d,                          # arguments.py l. 442-448: d = world // (t·p·c)
        virtual_pipeline_model_parallel_size=(_subs(as_expr(L.v), vals) if L.schedule == "interleaved" else None),
        expert_model_parallel_size=_subs(as_expr(L.e), vals),
        expert_tensor_parallel_size=_subs(as_expr(L.etp), vals),
        use_distributed_optimizer=L.zero >= 1,
        sequence_parallel=bool(L.sp),
        recompute_granularity=None if L.recompute == "none" else L.recompute,
        num_microbatches=_subs(as_expr(L.m), vals),
    )
    vocab = a.pop("vocab_size")
    a.update({k: _num(v) for k, v in overrides.items()})
    if "padded_vocab_size" not in overrides:
        # build_tokenizer.py l. 133-146: int(math.ceil(V / multiple) * multiple), multiple = 128·t
        multiple = a["make_vocab_size_divisible_by"] * t
        a["padded_vocab_size"] = sympy.ceiling(vocab / multiple) * multiple
    return SimpleNamespace(**a)


def _is_option_ref(fam, opt):
    return any(isinstance(v, dict) and v.get("option") == opt for v in fam.values())


def megatron_estimate(model, values: dict | None = None, layout=None, **overrides) -> dict[str, sympy.Expr]:
    """Megatron-LM's theoretical memory per device, first pipeline stage, in bytes.

    ``model``: a :class:`costgraph.Model` or its :class:`CostGraph`;
    ``values``: dimension values (``model.values(config=...)``), partial or
    none (the result is then a formula in the rest); ``layout``: a
    :class:`~costgraph.parallel.layout.Layout`; ``overrides``: Megatron
    arguments set directly (see :func:`megatron_args`).

    Returns ``{"weights_and_optimizer", "activations", "total"}`` as exact
    SymPy expressions (module docstring for what each counts).

    Raises
    ------
    CostgraphValueError
        No mapping for the model family; or ``p`` (and, where Megatron
        branches on them, ``num_layers`` with ``moe_layer_freq`` ≠ 1, ``v``)
        not a number.
    """
    args = megatron_args(model, values, layout, **overrides)
    w = compute_weight_and_optimizer_memory(args)
    if args.sequence_parallel and args.recompute_granularity == "selective":      # l. 466
        act = compute_activation_memory(args, args.num_microbatches)
    else:
        act = compute_activation_memory_without_sp(args, args.num_microbatches)
    return {"weights_and_optimizer": w, "activations": act, "total": w + act}


def megatron_report(estimate: dict[str, sympy.Expr]) -> str:
    """The line Megatron prints (l. 481–484): each figure ÷ 2²⁰, two decimals, "MB" (MiB)."""
    w, a, t = (float(estimate[k] / MIB) for k in KEYS)
    return (f"Theoretical memory footprints: weight and optimizer={w:.2f} MB, "
            f"activation={a:.2f} MB, total={t:.2f} MB")


def megatron_beside(model, values: dict | None = None, layout=None, **overrides) -> MegatronBeside:
    """Megatron's estimate beside costgraph's own figure for the first pipeline stage.

    A :class:`~costgraph.training.result_parts.MegatronBeside`: ``megatron``, ``costgraph``,
    ``difference``, each a :class:`~costgraph.training.result_parts.MemoryEstimate` of
    :data:`KEYS` in bytes (also read as ``r["megatron"]["total"]``; costgraph's ``weights_and_optimizer`` is its weights +
    gradients + optimizer states); ``difference`` is costgraph − Megatron.
    :data:`DIFFERENCES` says why they differ."""
    from .memory import training_memory

    cg = model.graph if hasattr(model, "graph") and not isinstance(model, CostGraph) else model
    meg = megatron_estimate(cg, values, layout, **overrides)
    vals = {(k if isinstance(k, sympy.Symbol) else cg.dims[k].symbol if k in cg.dims else dim(k)): as_expr(v)
            for k, v in (values or {}).items()}
    mem = training_memory(cg, layout).stages[0].memory
    own = {"weights_and_optimizer": mem["weights"] + mem["gradients"] + mem["optimizer"],
           "activations": mem["activations"], "total": mem["total"]}
    own = {k: sympy.expand(v.xreplace(vals)) for k, v in own.items()}
    return MegatronBeside(MemoryEstimate(**meg), MemoryEstimate(**own),
                          MemoryEstimate(**{k: sympy.expand(own[k] - meg[k]) for k in KEYS}))


# --- the transcription ------------------------------------------------------------------------
# Line numbers: megatron/training/theoretical_memory_usage.py at MEGATRON_COMMIT. Python's `/`
# on ints is true division: here SymPy's exact Rational; `//` is floor.

def _R(p, q):
    return sympy.Rational(p, q)


def _layer_counts(args):
    """l. 29–57: dense and MoE layers of the model and of its MTP block, the MoE FFN size."""
    L = args.num_layers
    if args.num_experts is not None:                                                        # l. 29-44
        freq = args.moe_layer_freq
        if isinstance(freq, list):
            pattern = list(freq)
            if len(pattern) != _concrete_int(L, "num_layers (moe_layer_freq as a list)"):
                raise CostgraphValueError(f"moe_layer_freq has {len(pattern)} entries for {L} layers")
            num_moe_layers = sum(pattern)
        elif freq == 1:
            pattern = None                          # [1] * num_layers, kept symbolic in L
            num_moe_layers = L
        else:
            n = _concrete_int(L, "num_layers (moe_layer_freq ≠ 1)")
            pattern = [1 if i % freq == 0 else 0 for i in range(n)]
            num_moe_layers = sum(pattern)
        num_dense_layers = L - num_moe_layers
        moe_ffn_hidden_size = args.moe_ffn_hidden_size
        last_is_moe = 1 if pattern is None else pattern[-1]
    else:                                                                                   # l. 45-49
        num_dense_layers, num_moe_layers, moe_ffn_hidden_size, last_is_moe = L, 0, 0, 0
    if args.mtp_num_layers is not None:                                                     # l. 51-57
        mtp_num_moe_layers = last_is_moe * args.mtp_num_layers
        mtp_num_dense_layers = (1 - last_is_moe) * args.mtp_num_layers
    else:
        mtp_num_moe_layers = mtp_num_dense_layers = 0
    return num_dense_layers, num_moe_layers, moe_ffn_hidden_size, mtp_num_dense_layers, mtp_num_moe_layers


def _self_attention_params(args, num_query_groups, query_projection_to_hidden_size_ratio):
    """l. 60–93: the norm's size (1 for RMSNorm, 2 for LayerNorm) and one layer's self-attention
    parameters (multi-latent attention, or grouped-query attention)."""
    norm_size = 1 if args.normalization == "RMSNorm" else 2                                 # l. 60
    h = args.hidden_size
    if args.multi_latent_attention:                                                         # l. 62-80
        a = args.num_attention_heads
        if args.q_lora_rank is None:
            q_term = h * a * (args.qk_head_dim + args.qk_pos_emb_head_dim)
        else:
            q_term = args.q_lora_rank * (h + a * (args.qk_head_dim + args.qk_pos_emb_head_dim) + norm_size)
        self_attn_term = (q_term
                          + args.kv_lora_rank * (h + a * (args.qk_head_dim + args.v_head_dim) + norm_size)
                          + h * args.qk_pos_emb_head_dim
                          + (a * args.v_head_dim) * h)
    else:                                                                                   # l. 82-93
        self_attn_term = 2 * h * h * ((1 + (num_query_groups / args.num_attention_heads))
                                      * query_projection_to_hidden_size_ratio)
    return norm_size, self_attn_term


def compute_weight_and_optimizer_memory(args) -> sympy.Expr:
    """Megatron's ``compute_weight_and_optimizer_memory`` (l. 12–305), in exact arithmetic."""
    query_projection_size = args.kv_channels * args.num_attention_heads                     # l. 14
    query_projection_to_hidden_size_ratio = query_projection_size / args.hidden_size        # l. 15
    num_query_groups = args.num_query_groups
    if not args.group_query_attention:                                                      # l. 17-18
        num_query_groups = args.num_attention_heads
    num_experts = 1 if args.num_experts is None else args.num_experts                       # l. 20
    gated_linear_multiplier = _R(3, 2) if args.swiglu else 1                                # l. 21
    shared_expert_ffn_hidden_size = (0 if args.moe_shared_expert_intermediate_size is None
                                     else args.moe_shared_expert_intermediate_size)        # l. 23-27
    (num_dense_layers, num_moe_layers, moe_ffn_hidden_size,
     mtp_num_dense_layers, mtp_num_moe_layers) = _layer_counts(args)                        # l. 29-57
    norm_size, self_attn_term = _self_attention_params(
        args, num_query_groups, query_projection_to_hidden_size_ratio)                     # l. 60-93
    h = args.hidden_size
    embedding_size = h * args.padded_vocab_size                                             # l. 95
    final_layernorm = norm_size * h                                                         # l. 96
    attention_params = self_attn_term                                                       # l. 102
    dense_mlp_params = 2 * h * args.ffn_hidden_size * gated_linear_multiplier               # l. 103
    shared_expert_params = 2 * h * shared_expert_ffn_hidden_size * gated_linear_multiplier  # l. 104
    routed_expert_hidden_size = args.moe_latent_size if args.moe_latent_size is not None else h
    routed_expert_params = (2 * routed_expert_hidden_size * moe_ffn_hidden_size * num_experts
                            * gated_linear_multiplier)                                      # l. 110-112
    latent_projection_params = (2 * h * args.moe_latent_size
                                if args.num_experts is not None and args.moe_latent_size is not None else 0)
    layernorm_params = 2 * h * norm_size                                                    # l. 127
    router_params = ((h * num_experts) + (num_experts if args.add_bias_linear else 0)
                     if args.num_experts is not None else 0)                                # l. 128-132
    shared_expert_gate_params = (h if shared_expert_ffn_hidden_size != 0 and args.moe_shared_expert_gate
                                 else 0)                                                    # l. 133-137

    p, t = args.pipeline_model_parallel_size, args.tensor_model_parallel_size
    etp, ep = args.expert_tensor_parallel_size, args.expert_model_parallel_size
    expert_data_parallel_size = sympy.floor(args.world_size / (etp * ep * p))               # l. 205-212

    tp_sharded_params_in_transformer_block = ((attention_params + dense_mlp_params) * num_dense_layers
                                              + (attention_params + shared_expert_params) * num_moe_layers)
    replicated_params_in_transformer_block = (
        layernorm_params * num_dense_layers
        + (layernorm_params + latent_projection_params + router_params + shared_expert_gate_params)
        * num_moe_layers
        + final_layernorm)                                                                  # l. 219-229
    expert_sharded_params_in_transformer_block = routed_expert_params * num_moe_layers      # l. 230
    tp_sharded_params_in_mtp_block = ((attention_params + dense_mlp_params) * mtp_num_dense_layers
                                      + (attention_params + shared_expert_params) * mtp_num_moe_layers)
    replicated_params_in_mtp_block = (
        layernorm_params * mtp_num_dense_layers
        + (layernorm_params + latent_projection_params + router_params + shared_expert_gate_params)
        * mtp_num_moe_layers)                                                               # l. 235-244
    expert_sharded_params_in_mtp_block = routed_expert_params * mtp_num_moe_layers          # l. 245

    tp_sharded_params_on_most_loaded_shard = (
        (tp_sharded_params_in_transformer_block / p) + tp_sharded_params_in_mtp_block + embedding_size
    ) / t                                                                                   # l. 248-252
    replicated_params_on_most_loaded_shard = (replicated_params_in_transformer_block / p
                                              + replicated_params_in_mtp_block)             # l. 253-255
    expert_sharded_params_on_most_loaded_shard = (
        (expert_sharded_params_in_transformer_block / p) + expert_sharded_params_in_mtp_block
    ) / (etp * ep)                                                                          # l. 256-259
    if args.untie_embeddings_and_output_weights and _concrete_int(p, "pipeline_model_parallel_size") == 1:
        tp_sharded_params_on_most_loaded_shard += embedding_size / t                        # l. 265-267

    def num_bytes_per_parameter(data_parallel_size):                                        # l. 293-296
        return 18 if not args.use_distributed_optimizer else 6 + (12 / as_expr(data_parallel_size))

    return as_expr(
        (tp_sharded_params_on_most_loaded_shard + replicated_params_on_most_loaded_shard)
        * num_bytes_per_parameter(args.data_parallel_size)
        + expert_sharded_params_on_most_loaded_shard * num_bytes_per_parameter(expert_data_parallel_size)
    )                                                                                       # l. 298-303


def _pipeline_factor(args, activation_memory, num_microbatches):
    """l. 341–366 (and 411–435): the interleaving penalty, or min(1, m/p) for 1F1B."""
    p = args.pipeline_model_parallel_size
    v = args.virtual_pipeline_model_parallel_size
    if v is not None:
        interleaved_schedule_memory_penalty = 1 + ((p - 1) / (p * v))
        activation_memory *= interleaved_schedule_memory_penalty
    if v is None and _concrete_int(p, "pipeline_model_parallel_size") > 1:
        if num_microbatches is not None:
            activation_memory *= sympy.Min(1, num_microbatches / as_expr(p))
    return activation_memory


def compute_activation_memory(args, num_microbatches) -> sympy.Expr:
    """Megatron's ``compute_activation_memory`` (l. 308–379): the SP + selective path."""
    s, b, h = args.seq_length, args.micro_batch_size, args.hidden_size
    p, t = args.pipeline_model_parallel_size, args.tensor_model_parallel_size
    activation_memory = (s * b * h) * (18 + (4 * (args.ffn_hidden_size / h)))              # l. 317-319
    activation_memory *= args.num_layers                                                    # l. 325
    activation_memory += 8 * s * b * p                                                      # l. 330-332
    activation_memory += s * b * h * p                                                      # l. 334-339
    activation_memory = _pipeline_factor(args, activation_memory, num_microbatches)
    if _concrete_int(p, "pipeline_model_parallel_size") == 1:                               # l. 368-376
        activation_memory += s * b * h * 4 * (1 + (args.padded_vocab_size / h))
    return as_expr(activation_memory / t)                                             # l. 379


def compute_activation_memory_without_sp(args, num_microbatches) -> sympy.Expr:
    """Megatron's ``compute_activation_memory_without_sp`` (l. 382–453), with its ×1.05."""
    s, b, h = args.seq_length, args.micro_batch_size, args.hidden_size
    p, t = args.pipeline_model_parallel_size, args.tensor_model_parallel_size
    per_layer_memory = s * b * h * (10 + (24 / as_expr(t)))                          # l. 386
    total_activation_memory = per_layer_memory * args.num_layers                            # l. 395
    total_activation_memory += 8 * s * b * p                                                # l. 399-401
    total_activation_memory += s * b * h * p                                                # l. 403-408
    total_activation_memory = _pipeline_factor(args, total_activation_memory, num_microbatches)
    if _concrete_int(p, "pipeline_model_parallel_size") == 1:                               # l. 438-447
        logits_size = s * b * args.padded_vocab_size / as_expr(t)
        final_ln_output = s * b * h
        total_activation_memory += (logits_size + final_ln_output) * 2
    overhead_factor = _R(105, 100)                                                          # l. 450 (1.05)
    return as_expr(total_activation_memory * overhead_factor)                         # l. 451-453
