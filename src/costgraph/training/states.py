"""Model states per device: weights, gradients, optimizer states and master copies.

One entry function, :func:`model_states`, reads every weight of the operator
graph (its shape, how many copies exist, the operator that owns it) and
returns exact SymPy byte counts per device under a precision policy, an
optimizer and a ZeRO stage (see :mod:`costgraph.training.data` for the named
policies and optimizers). No formula is typed per model: GPT, Llama, a
mixture of experts or a new architecture get their figures from their graph.

Conventions
-----------
* **Bytes**, per device, summed over all copies of every distinct weight
  (a weight inside ``repeat l`` counts ``l`` times; the experts of a mixture
  all count: memory needs the total, not the active parameters; a tied head
  owns nothing and adds nothing).
* **Keys.** ``weights`` (the parameters in the policy's dtype, plus at ZeRO
  stage 3 the gathered unit in flight), ``gradients`` (the gradients and, if
  the policy keeps one, their fp32 copy), ``optimizer`` (the optimizer states
  **and** the fp32 master copy of the parameters), ``total`` = weights +
  gradients + optimizer. Two keys tell parts already counted above:
  ``master`` (the master copy, inside ``optimizer``) and ``gathered`` (the
  gathered unit, inside ``weights``).
* **ZeRO** (Rajbhandari et al. 2020, §5) over a sharding group of ``n``
  devices (``n`` = the data-parallel degree ``dp``, or ``hsdp_group``):
  stage 1 divides the optimizer states, the master copy and the fp32
  gradient copy by ``n`` (Megatron's distributed optimizer is stage 1);
  stage 2 also the gradients; stage 3 (FSDP's FULL_SHARD) also the
  parameters. Divided quantities are the average per device (exact when
  ``n`` divides them).
* **Stage 3 keeps one gathered unit in flight**: the full parameters of the
  largest *unit*, where a unit is one instance of an outermost ``repeat``
  group's body (one Transformer layer; one pair of layers in Gemma 2's
  ``repeat l/2``), or all weights outside any repeat group together (FSDP's
  root module: embeddings, final norm, head). The all-gathered buffer is
  separate from the device's own shard, so the unit's bytes add to the
  shards. Prefetching a second unit, and the transient full gradients of
  the unit before their reduce-scatter, are not counted.
* **HSDP** (``hsdp_group = g``): shard within groups of ``g`` devices,
  replicate across the ``dp / g`` groups; the stages apply with ``n = g``.
* **Frozen** weights (LoRA's base) keep their parameters only: no
  gradients, no master copy, no optimizer states; they are sharded at
  stage 3 and gathered like the others.
* **Model-parallel shards** (``shard``): a device holds ``1/divisor`` of a
  weight, or ``shape[i]/divisor[i]`` along each axis, and with a
  :class:`~costgraph.parallel.placement.WeightShard` (what
  :func:`costgraph.parallel.placement.placement` gives) also ``1/experts``
  of its copies (routed experts under expert parallelism). The state of a
  block-quantized or factored optimizer is that of the local shard
  (bitsandbytes and Adafactor see the local tensor).
* PyTorch's per-tensor ``step`` scalars and bitsandbytes' shared
  quantization maps (two tables of 256 floats per optimizer) are not
  counted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping

import sympy

from ..choices import DEFAULT_OPTIMIZER, DEFAULT_POLICY, DP_SYMBOL, ZERO_STAGE
from ..errors import CostgraphValueError
from ..engine.graph import ZERO, CostGraph, numel
from ..ops.registry import has_role
from ..parallel.placement import WeightShard
from ..engine.symbols import dim
from ..numbers.minmax import smax
from .data import Optimizer, Policy, optimizer as get_optimizer, policy as get_policy

# The data-parallel degree when none is given. Not ``d``: Llama-style models
# already use ``d`` for the head dimension. N_d is the ZeRO paper's name.
DP = dim(DP_SYMBOL)

STAGES = ZERO_STAGE.values
KEYS = ("weights", "gradients", "optimizer", "total", "master", "gathered")

Expr = sympy.Expr


def model_states(graph: CostGraph, *, policy: str | Policy = DEFAULT_POLICY, optimizer: str | Optimizer = DEFAULT_OPTIMIZER,
                 zero: int = ZERO_STAGE.default, dp: int | Expr | None = None, hsdp_group: int | Expr | None = None,
                 shard: Mapping[str, Expr | int | tuple] | None = None, weight_bytes: Mapping[str, int] | None = None,
                 frozen: Callable[[str], bool] | Collection[str] | None = None,
                 select: Callable[[str], bool] | None = None, gathered_units: str = "largest") -> dict[str, Expr]:
    """Bytes per device of the model states of ``graph``'s weights.

    Parameters
    ----------
    graph : CostGraph
        The model's operator graph (``costgraph.load(...).graph``; a
        :class:`~costgraph.Model` is accepted too).
    policy : str or Policy
        Precision policy (``fp32``, ``bf16``, ``mixed``, ``megatron``,
        ``mixed-fp32-grads``; see ``policies.toml``).
    optimizer : str or Optimizer
        ``sgd``, ``sgd-momentum``, ``adam``, ``adamw``, ``lion``,
        ``adam-8bit``, ``adamw-8bit``, ``adafactor``, ``adafactor-beta1``,
        ``muon`` (see ``optimizers.toml``).
    zero : int
        ZeRO stage 0–3 (3 is FSDP's full sharding).
    dp : int or SymPy expression
        Data-parallel degree; default the symbol :data:`DP` (``N_d``).
    hsdp_group : int or SymPy expression, optional
        HSDP: the size of the groups the states are sharded within (it must
        divide ``dp``); default: shard over all of ``dp``.
    shard : mapping, optional
        Weight id (``layers/attn/c_attn/weight``) → divisor of the weight on
        this device from model parallelism: one expression for the whole
        tensor, a tuple with one divisor per axis (needed by Adafactor's
        factored state), or a
        :class:`~costgraph.parallel.placement.WeightShard` (per axis, and a
        divisor of the copies: routed experts). Missing ids: 1.
    frozen : callable or collection of weight ids, optional
        Weights that are not trained (no gradients, master copy or states), besides
        those the model declares frozen (:attr:`~costgraph.engine.graph.Weight.frozen`).
    select : callable, optional
        Weight id → whether this device holds the weight at all (a pipeline stage); default: all.
    weight_bytes : mapping, optional
        Weight id → bytes an element where not the policy's (:func:`~costgraph.training.fp8.fp8_param_bytes`).
    gathered_units : str
        What ZeRO-3 holds gathered (:data:`costgraph.choices.ZERO3_GATHERED`; :func:`_gathered`):
        ``largest`` (one unit) or ``fsdp2`` (the root unit plus the largest layer unit).

    Returns
    -------
    dict
        Exact SymPy expressions in bytes for the keys :data:`KEYS` (see the
        module docstring: ``master`` is part of ``optimizer``, ``gathered``
        part of ``weights``; ``total`` = weights + gradients + optimizer).

    Raises
    ------
    CostgraphValueError
        Unknown policy or optimizer, a stage outside 0–3, a degree that is not
        a positive integer, an HSDP group that does not divide ``dp``, a
        shard for an unknown weight, or a whole-tensor shard of a matrix under
        a factored optimizer.

    Examples
    --------
    >>> import costgraph
    >>> from costgraph.training import model_states
    >>> g = costgraph.load("gpt").graph
    >>> s = model_states(g, policy="mixed", optimizer="adam", zero=1, dp=8)
    >>> s["total"].subs(costgraph.load("gpt").values(config="gpt2"))
    684418944
    """
    if not isinstance(graph, CostGraph):
        graph = getattr(graph, "graph", graph)   # a costgraph.Model
    pol, opt = get_policy(policy), get_optimizer(optimizer)
    n = sharding_degree(zero, dp, hsdp_group)
    if DP.name in graph.dims and dp is None:
        raise CostgraphValueError(f"model '{graph.name}' has a dimension named {DP.name}, the default "
                                  "data-parallel symbol", hint="give dp explicitly")
    return _kept(graph, (pol, opt, zero, n, gathered_units if zero == 3 else None), _checked_shard(graph, shard),
                 _predicate(frozen), select, weight_bytes or {})


def _kept(graph: CostGraph, settings: tuple, shard: dict, is_frozen, select, weight_bytes) -> dict[str, Expr]:
    """:func:`model_states` of the checked arguments (``settings``: policy, optimizer, stage, sharding
    degree, gathered convention), once per graph and key (:func:`_memo_key`); a copy each time."""
    key = _memo_key(graph, settings, shard, is_frozen, select, weight_bytes)
    store = graph.memo("model_states")
    if key is None or key not in store:
        pol, opt, zero, n, convention = settings
        (W, G, C, M, S), units = _per_weight(graph, pol, opt, shard, is_frozen, select, weight_bytes)
        gathered = _gathered(units, convention) if zero == 3 else ZERO
        out = assemble(sympy.Add(*W), sympy.Add(*G), sympy.Add(*C), sympy.Add(*M), sympy.Add(*S),
                       zero=zero, n=n, gathered=gathered)
        if key is None:
            return out
        store[key] = out
    return dict(store[key])   # a copy: the caller may add keys


def _memo_key(graph: CostGraph, settings: tuple, shard: dict, is_frozen, select, weight_bytes) -> tuple | None:
    """What :func:`model_states` reads besides the graph, as a key of the graph's own cache
    (``CostGraph.memo("model_states")``; the calculator page asks for one layout's states ~1,400 times):
    ``settings`` (policy, optimizer, stage, sharding degree, gathered convention), the shards, and the
    weights selected and frozen (the predicates' answers, not the functions); None where a part cannot
    be a key (no cache then)."""
    ids = graph.weights
    try:
        key = (settings, tuple(sorted(shard.items())),
               None if select is None else frozenset(w for w in ids if select(w)),
               frozenset(w for w in ids if is_frozen(w)), tuple(sorted(weight_bytes.items())))
        hash(key)
    except TypeError:   # an unhashable policy, shard or byte count
        return None
    return key


def _checked_shard(graph: CostGraph, shard) -> dict:
    """``shard`` as a dict; a weight id the graph does not have is an error."""
    shard = dict(shard or {})
    unknown = sorted(set(shard) - set(graph.weights))
    if unknown:
        raise CostgraphValueError(f"shard names no weight {unknown[0]!r} of model '{graph.name}'",
                                  hint="weight ids look like " + next(iter(graph.weights), "node/weight"))
    return shard


def _per_weight(graph: CostGraph, pol: Policy, opt: Optimizer, shard: dict, is_frozen, select, weight_bytes):
    """The byte terms of every selected weight on this device: lists of weights, gradients, their
    fp32 copy, master copy and optimizer states, and the weights of each ZeRO-3 unit (outermost
    group instance; ``""``: outside every group)."""
    heads = output_heads(graph) if opt.matrix_states is not None else set()
    units: dict[str, list[Expr]] = {}
    outer = outermost_groups(graph)
    W, G, C, M, S = [], [], [], [], []
    for wid, w in graph.weights.items():
        if select is not None and not select(wid):
            continue
        div = shard.get(wid, 1)
        count = w.count / _degree(div.experts, f"shard of {wid!r}") if isinstance(div, WeightShard) else w.count
        shape = _local_shape(wid, w.shape, div.axes if isinstance(div, WeightShard) else div, opt)
        n_el = numel(shape)
        each = pol.weights if w.element_bytes is None else w.element_bytes   # a buffer in its own dtype
        each = weight_bytes.get(wid, each)   # an FP8 parameter (fp8_params)
        W.append(count * n_el * each)
        unit = next((g for g in outer if wid.startswith(g + "/")), "")
        per = _cancelled(count / graph.groups[unit].multiplicity) if unit else count
        units.setdefault(unit, []).append(per * n_el * each)
        if w.frozen or is_frozen(wid):   # declared frozen in the model, or frozen by the caller (LoRA)
            continue
        G.append(count * n_el * pol.gradients)
        C.append(count * n_el * pol.grad_copy)
        M.append(count * n_el * pol.master)
        owner = wid.rsplit("/", 1)[0]
        matrix = len(w.shape) >= 2 and has_role(graph.nodes[owner]["kind"], "matrix") and owner not in heads
        S.append(count * tensor_state_bytes(opt, pol, shape, matrix=matrix))
    return (W, G, C, M, S), units


@functools.lru_cache(maxsize=4096)
def _cancelled(x: Expr) -> Expr:
    """``sympy.cancel(x)``, once per distinct ``x`` (every ZeRO-3 unit's weights, each call of
    :func:`model_states` on the same graph: the planner asks for many layouts)."""
    return sympy.cancel(x)


def sharding_degree(zero, dp, hsdp_group) -> Expr:
    """The number of devices the states are sharded over: ``hsdp_group`` or ``dp``.

    Raises
    ------
    CostgraphValueError
        A stage outside 0–3, a degree that is not a positive integer, or an
        HSDP group that does not divide ``dp``.
    """
    if isinstance(zero, bool) or zero not in STAGES:
        raise CostgraphValueError(f"unknown ZeRO stage {zero!r}", hint="0, 1, 2 or 3 (3 is FSDP)")
    d = DP if dp is None else _degree(dp, "dp")
    if hsdp_group is None:
        return d
    g = _degree(hsdp_group, "hsdp_group")
    if d.is_Integer and g.is_Integer and d % g:
        raise CostgraphValueError(f"the HSDP group {g} does not divide the data-parallel degree {d}",
                                  hint="HSDP shards within groups of g devices and replicates across dp/g")
    return g


def _gathered(units: dict, convention: str) -> Expr:
    """The full parameters ZeRO-3 holds beside the shards, of ``units`` (unit → its weights' bytes;
    ``""`` the root, the weights outside any layer) under ``convention``
    (:data:`costgraph.choices.ZERO3_GATHERED`): the largest unit, or (``fsdp2``) the root unit, which
    FSDP2 does not reshard after the forward, plus the largest layer unit."""
    if convention == "fsdp2" and "" in units:
        layers = [sympy.Add(*u) for k, u in units.items() if k]
        return sympy.Add(*units[""]) + (_largest(tuple(layers)) if layers else ZERO)
    sizes = [sympy.Add(*u) for u in units.values()]
    return _largest(tuple(sizes)) if sizes else ZERO


@functools.lru_cache(maxsize=1024)
def _largest(sizes: tuple) -> Expr:
    """``Max(*sizes)``, once per ``sizes`` (SymPy's Max compares its arguments; the calculator page's and the
    planner's layouts ask again with the same units under other optimizers and sharding degrees; SymPy's object,
    built by :func:`costgraph.numbers.minmax.smax`)."""
    return smax(*sizes)


def assemble(W: Expr, G: Expr, C: Expr, M: Expr, S: Expr, *, zero: int, n: Expr,
             gathered: Expr = ZERO) -> dict[str, Expr]:
    """The per-device keys from the unsharded sums (bytes): weights ``W``,
    gradients ``G``, fp32 gradient copy ``C``, master copy ``M``, optimizer
    states ``S``, sharded over ``n`` devices at ZeRO stage ``zero`` (see the
    module docstring); ``gathered`` is added to the weights at stage 3."""
    k1 = n if zero >= 1 else 1
    k2 = n if zero >= 2 else 1
    k3 = n if zero >= 3 else 1
    out = {
        "weights": W / k3 + (gathered if zero >= 3 else ZERO),
        "gradients": G / k2 + C / k1,
        "optimizer": (M + S) / k1,
    }
    out["master"] = M / k1
    out["gathered"] = gathered if zero >= 3 else ZERO
    done = {k: sympy.expand(v) for k, v in out.items()}
    total = out["weights"] + out["gradients"] + out["optimizer"]
    # the total from the expanded parts: SymPy's expand of a sum is the sum of its terms' expansions (the same
    # canonical Add, exact rationals collected in any order), without expanding the parts twice; a Float's
    # rounding depends on the order its terms are added in, so a total with one is expanded as a whole
    done["total"] = sympy.expand(total) if total.has(sympy.Float) else \
        done["weights"] + done["gradients"] + done["optimizer"]
    return {k: done[k] for k in ("weights", "gradients", "optimizer", "total", "master", "gathered")}


def tensor_state_bytes(opt: Optimizer, pol: Policy, shape: tuple[Expr, ...], *, matrix: bool = False) -> Expr:
    """Optimizer-state bytes of one tensor of ``shape`` (as the device holds it).

    ``matrix``: whether Muon treats it as a hidden matrix. Element-wise states
    take ``states · numel · bytes``; block-wise quantized states add one
    statistic per block and state, ``⌈numel / block_size⌉`` blocks, and fall
    back to ``small_state_bytes`` under ``min_quantized_numel`` elements
    (bitsandbytes ``Optimizer2State.init_state``); a factored second moment
    keeps ``numel(shape[:-1]) + numel(shape[:-2])·shape[-1]`` elements (rows
    and columns of the last two axes) for 2 or more axes, ``numel`` for one
    (Shazeer & Stern 2018, Algorithms 4–5; ``torch.optim.Adafactor``)."""
    n = numel(shape)
    if opt.matrix_states is not None:
        if matrix:
            return opt.matrix_states * n * (opt.state_bytes if opt.state_bytes is not None else pol.state)
        return tensor_state_bytes(get_optimizer(opt.rest), pol, shape)
    per_el = opt.state_bytes if opt.state_bytes is not None else pol.state
    out = opt.states * n * per_el
    if opt.block_size is not None:
        out += opt.states * sympy.ceiling(n / opt.block_size) * opt.block_stat_bytes
    if opt.min_quantized_numel is not None:
        small = opt.states * n * opt.small_state_bytes
        out = sympy.Piecewise((small, n < opt.min_quantized_numel), (out, True))
    if opt.factored:
        if len(shape) >= 2:
            out += (numel(shape[:-1]) + numel(shape[:-2]) * shape[-1]) * pol.state
        else:
            out += n * pol.state
    return out


def outermost_groups(graph: CostGraph) -> list[str]:
    """Paths of the repeat groups not inside another group (the units of ZeRO-3)."""
    return [p for p in graph.groups if not any(p.startswith(q + "/") for q in graph.groups if q != p)]


def output_heads(graph: CostGraph) -> set[str]:
    """Nodes that own or tie a weight and reach a model output through
    weightless nodes only: the output head (``lm_head``), which Muon leaves
    to AdamW (Jordan et al. 2024)."""
    return first_weighted(graph, [graph.tensors[t].producer for t in graph.outputs])


def first_weighted(graph: CostGraph, starts, passes: Callable[[dict, list[str]], bool] | None = None) -> set[str]:
    """The nodes owning or tying a weight that are first on a path walked from ``starts`` (node names) back through
    their inputs: the walk stops at each of them, and at a weightless node whose ``passes(data, inputs)`` is False
    (default: every weightless node passes). Used for the output head (:func:`output_heads`) and the logits the
    cross-entropy reads (:func:`costgraph.training.cross_entropy.token_heads`)."""
    found: set[str] = set()
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        node = todo.pop()
        if node in seen or node not in graph.nodes:
            continue
        seen.add(node)
        data = graph.nodes[node]
        cost = data.get("cost")
        if cost is not None and (cost.weights or cost.tied):
            found.add(node)
            continue
        ins = [t for t in data.get("inputs", ()) if t in graph.tensors]
        if passes is None or passes(data, ins):
            todo.extend(graph.tensors[t].producer for t in ins)
    return found


def largest_module_params(graph: CostGraph) -> Expr:
    """The most parameters one operator node owns or ties (its weights and
    biases): DeepSpeed's ``largest_layer_params``, which ``model_to_params``
    (``deepspeed/runtime/zero/stage3.py``) takes over ``model.modules()`` with
    ``parameters(recurse=False)`` — one ``nn.Linear`` or ``nn.Embedding``,
    not one Transformer layer. Symbolic: a ``Max`` of the candidates."""
    sizes = []
    for _, data in graph.ops():
        cost = data["cost"]
        ids = (*cost.weights, *cost.tied)
        if ids:
            sizes.append(sympy.Add(*[graph.weights[w].numel for w in ids]))
    return sympy.Max(*sizes) if sizes else ZERO


def _degree(value, what: str) -> Expr:
    if isinstance(value, bool):
        raise CostgraphValueError(f"{what} must be a positive integer, not {value!r}")
    if isinstance(value, int):
        value = sympy.Integer(value)
    if not isinstance(value, sympy.Expr) or value.is_positive is False or value.is_integer is False:
        raise CostgraphValueError(f"{what} must be a positive integer, not {value!r}")
    return value


def _predicate(frozen) -> Callable[[str], bool]:
    if frozen is None:
        return lambda wid: False
    if callable(frozen):
        return lambda wid: bool(frozen(wid))
    ids = frozenset(frozen)
    return lambda wid: wid in ids


def _local_shape(wid: str, shape: tuple[Expr, ...], divisor, opt: Optimizer) -> tuple[Expr, ...]:
    """``shape`` as one device holds it under a model-parallel ``divisor``
    (a :class:`WeightShard` dividing copies counts as its whole divisor)."""
    if isinstance(divisor, WeightShard):
        divisor = divisor.axes if divisor.experts == 1 else divisor.total
    if isinstance(divisor, tuple):
        if len(divisor) != len(shape):
            raise CostgraphValueError(f"shard of {wid!r} gives {len(divisor)} divisors for {len(shape)} axes")
        return tuple(s / _degree(k, f"shard of {wid!r}") for s, k in zip(shape, divisor))
    k = _degree(divisor, f"shard of {wid!r}")
    if k == 1:
        return shape
    if opt.factored and len(shape) >= 2:
        raise CostgraphValueError(f"a factored optimizer needs to know which axis of {wid!r} is split",
                                  hint="give the shard as one divisor per axis, e.g. (t, 1)")
    # one divisor for the whole tensor: only its element count matters
    return (numel(shape) / k,)
