"""LoRA and QLoRA: low-rank adapters on a frozen (optionally quantized) base,
read off the operator graph.

One entry function, :func:`lora`, picks the graph's ``linear`` nodes named by
the targets and returns a :class:`LoRA`: the adapter weights, the frozen base
weights, the adapters' activations and the base storages PyTorch no longer
keeps. :func:`lora_states` gives the model states (through
:func:`costgraph.training.states.model_states`); :func:`quantized_weight_bytes`
the bytes of a 4-/8-bit base (schemes as data in ``quantization.toml``, read by
:mod:`costgraph.training.quant_schemes`, whose names stay importable from here).

Conventions (PEFT's ``LoraLayer`` / ``lora.Linear``, peft/tuners/lora/layer.py)
-------------------------------------------------------------------------------
* **Adapters.** On a linear ``y = x·Wᵀ`` with ``W`` of ``[out, in]``:
  ``lora_A`` ``[r, in]`` and ``lora_B`` ``[out, r]``, no biases (PEFT's
  ``lora_bias = False``), one pair per instance of the node (× its count:
  every layer of a ``repeat l``; every expert of a mixture). The forward is
  ``y + lora_B(lora_A(dropout(x))) · α/r``.
* **Targets.** A node name (``q_proj``: the last path component, as PEFT
  matches ``target_modules`` by the module name's suffix), a glob on the path
  (``layers/*/self_attn/*``), a callable ``path → bool``, or ``all-linear``:
  every linear except the output head (PEFT's ``"all-linear"`` leaves out
  ``model.get_output_embeddings()``; here the heads of
  :func:`~costgraph.training.states.output_heads`).
* **Frozen.** Every base weight (embeddings, norms, biases and the head
  included): parameters only, no gradients or optimizer states.
* **Activations** (what autograd keeps for the adapter path, bytes):
  ``lora_A`` keeps its input: without dropout that is ``x`` itself — the
  storage the base linear keeps in the full fine-tuning graph, counted once;
  with dropout (``nn.Dropout(p)``, PEFT ``lora_dropout > 0``) a new tensor of
  ``x``'s shape plus the dropout's 1-byte mask (the ``mask`` role; CUDA's
  ``native_dropout``). ``lora_B`` keeps the ``[..., r]`` output of
  ``lora_A``. The ``· α/r`` by a Python number and the ``+`` keep nothing.
  ``adapter_fp32=True``: PEFT's ``autocast_adapter_dtype`` (adapters in fp32
  under a 16-bit base): ``x`` is cast to fp32 first, so ``lora_A`` keeps a
  new fp32 copy (or the fp32 dropout output) and ``lora_B`` an fp32
  ``[..., r]``.
* **Released storages.** A frozen weight needs no gradient, and PyTorch's
  autograd then keeps no tensor that only its gradient reads
  (``mm(x, Wᵀ)`` with ``W`` frozen saves ``Wᵀ`` only). Per operator: a
  linear's input ``x`` (``dW = dYᵀ·x``), an embedding's token ids, the
  ``pytorch`` profile's RMSNorm ``normalized`` ``x̂`` (only ``dγ`` reads
  it). :attr:`LoRA.released` lists the storages kept for nothing else — a
  target's ``x`` stays kept by ``lora_A`` unless dropout or the fp32 cast
  gives ``lora_A`` its own copy.
* **Not modelled.** Before the first adapter no tensor needs a gradient
  (frozen embeddings), so PyTorch keeps nothing there (layer 0's first norm)
  unless the inputs are made to require one (``enable_input_require_grads``,
  which gradient checkpointing under PEFT needs): costgraph counts those
  storages, an upper bound by them. DoRA, rsLoRA's scaling (parameters are
  the same), LoRA on embeddings, and tensor-parallel splits of the adapters.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace

import sympy

from ..choices import ZERO_STAGE
from ..engine.symbols import as_expr
from ..errors import CostgraphValueError
from ..hints import listing
from ..engine.grad_only import weight_grad_only
from ..engine.graph import ZERO, Cost, CostGraph, Weight, numel
from ..ops.registry import has_role
from ..engine.precision import Precision, precision as get_precision
from .data import optimizer as get_optimizer, policy as get_policy
from .quant_schemes import (QUANT, QUANT_NUMBERS, QUANTIZATION, QuantScheme, per_param_bytes, quant_scheme,
                            quant_schemes, quantized_weight_bytes, quantized_weights, tensor_quantized_bytes)
from .states import _local_shape, model_states, outermost_groups, output_heads, sharding_degree

Expr = sympy.Expr

ALL_LINEAR = "all-linear"
# PEFT's default target_modules for LLaMA (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING)
DEFAULT_TARGETS = ("q_proj", "v_proj")


@dataclass(frozen=True)
class Adapter:
    """The adapter pair on one linear node ``base``: ``A`` ``[r, in]`` and
    ``B`` ``[out, r]`` weight ids, the input tensor ``x``, ``count`` and
    ``active`` instances (as the base node's)."""

    base: str
    A: str
    B: str
    x: str
    inputs: Expr
    outputs: Expr
    count: Expr
    active: Expr


@dataclass(frozen=True)
class LoRA:
    """:func:`lora`'s result.

    ``graph``: the model's graph with the adapters added as ``linear`` nodes
    ``<base>/lora_A`` and ``<base>/lora_B`` (weights ``<base>/lora_A/weight``
    ...), for :func:`~costgraph.training.states.model_states`; its tensors,
    edges and groups are the model's (the adapter nodes are not wired: use
    the model's own graph for activations, tensor and pipeline parallelism).
    ``adapters``: one :class:`Adapter` per target node; ``weights``: adapter
    weight id → :class:`~costgraph.engine.graph.Weight`; ``base_weight``: adapter
    weight id → the weight id of its base linear (to place an adapter on the
    device, pipeline stage or ZeRO unit of its base); ``frozen``: every base
    weight id; ``released``: storage ids the frozen base keeps no more
    (module docstring); ``params``: trainable parameters, all copies.
    """

    rank: Expr
    alpha: Expr
    dropout: bool
    adapter_fp32: bool
    graph: CostGraph = field(repr=False)
    adapters: tuple[Adapter, ...]
    weights: dict[str, Weight]
    base_weight: dict[str, str]
    frozen: frozenset[str]
    released: frozenset[str]
    params: Expr
    base: CostGraph = field(repr=False, default=None)

    @property
    def scaling(self) -> Expr:
        """``α / r`` (PEFT's ``scaling``; rsLoRA's ``α/√r`` is not used)."""
        return self.alpha / self.rank

    @property
    def targets(self) -> tuple[str, ...]:
        """Paths of the target linear nodes, in program order."""
        return tuple(a.base for a in self.adapters)

    def activation_rows(self, prec: str | Precision = "bf16") -> list[dict]:
        """One row per target: ``path`` (the base node), ``active`` (instances a
        token passes through, the base node's), ``activation_bytes`` of one
        instance, and its parts ``A_input`` (what ``lora_A`` keeps beyond the
        base graph's storages), ``mask`` (dropout), ``B_input`` (the ``[.., r]``
        intermediate)."""
        p = get_precision(prec) if isinstance(prec, str) else prec
        act = p.bytes("act")
        ab = 4 if self.adapter_fp32 else act
        out = []
        for a in self.adapters:
            x = self.base.tensors[a.x]
            rows = x.numel / x.shape[-1]
            a_in = rows * a.inputs * ab if (self.dropout or self.adapter_fp32) else ZERO
            mask = rows * a.inputs * p.bytes("mask") if self.dropout else ZERO
            b_in = rows * self.rank * ab
            out.append({"path": a.base, "active": a.active, "A_input": a_in, "mask": mask, "B_input": b_in,
                        "activation_bytes": sympy.expand(a_in + mask + b_in)})
        return out

    def activation_bytes(self, prec: str | Precision = "bf16") -> Expr:
        """What the adapter paths keep for backward, whole model (bytes): Σ over
        targets of the active instances × :meth:`activation_rows`' bytes. The
        storages of :attr:`released` are not subtracted here."""
        return sympy.expand(sympy.Add(*[r["active"] * r["activation_bytes"] for r in self.activation_rows(prec)]))


def lora(cg: CostGraph, *, rank, targets: str | Collection[str] | Callable[[str], bool] = DEFAULT_TARGETS,
         alpha=None, dropout: bool | float = False, adapter_fp32: bool = False) -> LoRA:
    """LoRA adapters of rank ``rank`` on ``cg``'s linear nodes named by ``targets``.

    Parameters
    ----------
    cg : CostGraph
        The model's graph (a :class:`~costgraph.Model` is accepted too).
    rank : int or SymPy expression
        ``r`` (PEFT ``r``).
    targets : str, collection of str, or callable
        Node names (last path component), globs on the path, ``"all-linear"``,
        or a predicate on the node path. Default PEFT's for LLaMA:
        ``q_proj``, ``v_proj``.
    alpha : number, optional
        ``lora_alpha`` (default ``r``: scaling 1). Changes no byte.
    dropout : bool or float
        Dropout on the adapter input (PEFT ``lora_dropout``): true or a
        probability > 0 keeps a copy of the input and a mask.
    adapter_fp32 : bool
        Adapters computed in fp32 under a 16-bit base (PEFT's
        ``autocast_adapter_dtype``): the adapter activations in fp32.

    Raises
    ------
    CostgraphValueError
        A rank that is not a positive integer, a target naming no node, a
        named target that is not a linear, or no target at all.
    """
    if not isinstance(cg, CostGraph):
        cg = getattr(cg, "graph", cg)
    r = _positive(rank, "rank")
    paths = _select(cg, targets)
    if isinstance(dropout, bool):
        drop = dropout
    elif isinstance(dropout, (int, float)) and 0 <= dropout < 1:
        drop = dropout > 0
    else:
        raise CostgraphValueError(f"lora dropout must be a probability in [0, 1), not {dropout!r}")
    nodes: dict[str, dict] = {}
    weights = dict(cg.weights)
    adapters, adapter_weights, base_weight = [], {}, {}
    for path, d in cg.nodes.items():
        nodes[path] = d
        if path not in paths:
            continue
        x = d["inputs"][0]
        k = cg.tensors[x].shape[-1]
        n = cg.tensors[d["outputs"][0]].shape[-1]
        cost = d["cost"]
        own = (*cost.weights, *cost.tied)
        base_w = next((w for w in own if w.endswith("/weight")), own[0] if own else path)
        ids = {}
        for name, shape in (("lora_A", (r, k)), ("lora_B", (n, r))):
            node = f"{path}/{name}"
            wid = f"{node}/weight"
            w = Weight(wid, shape, d["count"], d["active"])
            weights[wid] = adapter_weights[wid] = w
            base_weight[wid] = base_w
            nodes[node] = {"kind": "linear", "inputs": (), "outputs": (),
                           "attrs": {"out": shape[0], "bias": False, "tied": None, "lora_of": path},
                           "loc": d.get("loc"), "count": d["count"], "active": d["active"],
                           "cost": Cost(weights=(wid,)), "group": d.get("group")}
            ids[name] = wid
        adapters.append(Adapter(path, ids["lora_A"], ids["lora_B"], x, k, n, d["count"], d["active"]))
    graph = replace(cg, nodes=nodes, weights=weights, _nx=None)
    keeps_x = not drop and not adapter_fp32
    kept_by_adapters = {cg.tensors[a.x].storage for a in adapters} if keeps_x else set()
    params = sympy.expand(sympy.Add(*[w.count * w.numel for w in adapter_weights.values()]))
    return LoRA(r, r if alpha is None else as_expr(alpha), drop, adapter_fp32, graph, tuple(adapters),
                adapter_weights, base_weight, frozenset(cg.weights), released_storages(cg, kept_by_adapters),
                params, cg)


def rank_warnings(lo: "LoRA", values: dict | None) -> list[str]:
    """Warnings for targets whose smaller side is below the rank at ``values`` (dimension name →
    number): an adapter ``B·A`` of a ``k → n`` linear has rank at most ``min(k, n)``, so a larger
    ``r`` adds parameters, FLOPs and optimizer state that change nothing (PEFT's ``LoraConfig``
    accepts it without a word; issue 30). One line per target, the first five named."""
    if not values:
        return []
    cg = lo.base if lo.base is not None else lo.graph
    subs = {cg.dims[str(k)].symbol: v for k, v in values.items() if str(k) in cg.dims}
    rank = as_expr(lo.rank).subs(subs)
    low = []
    for a in lo.adapters:
        side = sympy.Min(a.inputs, a.outputs).subs(subs)
        if rank.is_number and side.is_number and rank > side:
            low.append(f"{a.base} ({as_expr(a.inputs).subs(subs)} → {as_expr(a.outputs).subs(subs)})")
    if not low:
        return []
    more = f" and {len(low) - 5} more" if len(low) > 5 else ""
    return [f"LoRA rank {rank} is above the smaller side of {', '.join(low[:5])}{more}: an adapter's "
            "update B·A has at most that rank, so the rest adds parameters, FLOPs and optimizer state "
            "that change nothing (give --lora at most the smaller side)"]


def released_storages(cg: CostGraph, kept: Collection[str] = ()) -> frozenset[str]:
    """Storage ids that ``cg`` keeps only for the gradients of its weights —
    none kept once every weight is frozen (module docstring) — less ``kept``
    (storages something else still keeps: a LoRA target's input)."""
    candidates, needed = set(), set(kept)
    for path, d in cg.ops():
        cost = d["cost"]
        grad_only = weight_grad_only(d["kind"], path, d["inputs"]) if cost.weights or cost.tied else frozenset()
        for tid in cost.saved:
            sid = cg.tensors[tid].storage
            (candidates if tid in grad_only else needed).add(sid)
    return frozenset(candidates - needed)


def lora_states(l: LoRA, *, policy="mixed", optimizer="adam", zero: int = ZERO_STAGE.default, dp=None, hsdp_group=None,
                shard: Mapping | None = None, select: Callable[[str], bool] | None = None,
                quantization: str | None = None, adapter_policy=None) -> dict[str, Expr]:
    """Model-state bytes per device of a LoRA / QLoRA model: the keys of
    :func:`~costgraph.training.states.model_states`.

    Base weights are frozen (parameters only, in the policy's weight bytes, or
    quantized with ``quantization``: a scheme of ``quantization.toml``, applied
    to :func:`quantized_weights`); adapters have parameters, gradients, master
    copy and optimizer states under ``policy`` (or ``adapter_policy``: PEFT
    keeps fp32 adapters under a 16-bit base, ``"fp32"``). ``select`` and
    ``shard`` take weight ids of the model (an adapter follows its base:
    :attr:`LoRA.base_weight`). ZeRO-3 gathers one unit (one layer) in flight:
    the largest unit's base (quantized where quantized) and adapter weights.
    """
    sel = (lambda w: True) if select is None else select
    on = lambda w: sel(l.base_weight.get(w, w))   # noqa: E731  an adapter where its base is
    q = quantized_weights(l.base) if quantization is not None else set()
    scheme = quant_scheme(quantization) if quantization is not None else None
    common = dict(optimizer=optimizer, zero=zero, dp=dp, hsdp_group=hsdp_group, shard=shard, frozen=l.frozen)
    if adapter_policy is None:
        parts = [model_states(l.graph, policy=policy, select=lambda w: on(w) and w not in q, **common)]
    else:
        parts = [model_states(l.graph, policy=policy, select=lambda w: on(w) and w not in q
                              and w not in l.weights, **common),
                 model_states(l.graph, policy=adapter_policy, select=lambda w: on(w) and w in l.weights, **common)]
    out = {k: sympy.Add(*[p[k] for p in parts]) for k in parts[0]}
    if q or (zero == 3 and len(parts) > 1):
        n = sharding_degree(zero, dp, hsdp_group) if zero == 3 else 1
        qbytes = quantized_weight_bytes(l.base, scheme, shard=shard, select=lambda w: on(w) and w in q) \
            if q else ZERO
        out["weights"] += qbytes / n
        if zero == 3:   # one gathered unit, all its weights as stored
            gathered = _largest_unit(l, on, q, scheme, shard, policy, adapter_policy, optimizer)
            out["weights"] += gathered - out["gathered"]
            out["gathered"] = gathered
        out["total"] = out["weights"] + out["gradients"] + out["optimizer"]
    return {k: sympy.expand(v) for k, v in out.items()}


def _largest_unit(l, on, q, scheme, shard, policy, adapter_policy, optimizer) -> Expr:
    g = l.graph
    opt = get_optimizer(optimizer)
    shard = dict(shard or {})
    units: dict[str, list[Expr]] = {}
    outer = outermost_groups(g)
    for wid, w in g.weights.items():
        if not on(wid):
            continue
        unit = next((u for u in outer if wid.startswith(u + "/")), "")
        per = sympy.cancel(w.count / g.groups[unit].multiplicity) if unit else w.count
        div = shard.get(l.base_weight.get(wid, wid) if wid in l.weights else wid, 1)
        shape = _local_shape(wid, w.shape, div, opt) if wid not in l.weights else w.shape
        if wid in q:
            b = tensor_quantized_bytes(scheme, shape)
        else:
            pol = get_policy(adapter_policy if adapter_policy is not None and wid in l.weights else policy)
            b = numel(shape) * pol.weights
        units.setdefault(unit, []).append(per * b)
    sizes = [sympy.Add(*u) for u in units.values()]
    return sympy.Max(*sizes) if sizes else ZERO


# ---------------------------------------------------------------- helpers


def _positive(v, what: str) -> Expr:
    if isinstance(v, bool):
        raise CostgraphValueError(f"{what} must be a positive integer, not {v!r}")
    if isinstance(v, int):
        v = sympy.Integer(v)
    if not isinstance(v, sympy.Expr) or v.is_positive is False or v.is_integer is False or \
            (v.is_number and not (v.is_Integer and v > 0)):
        raise CostgraphValueError(f"{what} must be a positive integer, not {v!r}")
    return v


def _select(cg: CostGraph, targets) -> list[str]:
    linears = [p for p, d in cg.ops() if has_role(d["kind"], "matrix")]
    if callable(targets):
        chosen = [p for p in linears if targets(p)]
    elif targets == ALL_LINEAR:
        heads = output_heads(cg)
        chosen = [p for p in linears if p not in heads]
    else:
        if isinstance(targets, str) or not hasattr(targets, "__iter__"):   # one name, or a value the check names
            targets = (targets,)
        targets = tuple(targets)
        if not targets or not all(isinstance(t, str) and t for t in targets):
            raise CostgraphValueError(f"lora targets must be node names or globs, not {targets!r}",
                                      hint=f"linear nodes' names (q_proj), globs (*_proj) or {ALL_LINEAR!r}")
        chosen = []
        for t in targets:
            glob = any(ch in t for ch in "*?[/")
            hit = [p for p, _ in cg.ops() if (fnmatch.fnmatchcase(p, t) if glob else p.rsplit("/", 1)[-1] == t)]
            if not hit:
                names = " ".join(n.strip() for n in t.split(",") if n.strip())
                comma = f"one name each, apart (--lora-targets {names}, not commas); " if "," in t else ""
                raise CostgraphValueError(f"lora target {t!r} names no node of model '{cg.name}'",
                                          hint=comma + "linear nodes: " + listing(p.rsplit("/", 1)[-1] for p in linears))
            bad = [p for p in hit if not has_role(cg.nodes[p]["kind"], "matrix")]
            if bad and not glob:
                raise CostgraphValueError(f"lora target {t!r} is a {cg.nodes[bad[0]]['kind']}, not a linear",
                                          hint="LoRA adapts linear layers")
            chosen += [p for p in hit if has_role(cg.nodes[p]["kind"], "matrix")]
    chosen = set(chosen)
    if not chosen:
        raise CostgraphValueError(f"no linear node of model '{cg.name}' matches the lora targets")
    return [p for p in linears if p in chosen]
