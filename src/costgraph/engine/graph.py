"""The operator graph and the records its nodes carry.

A :class:`CostGraph` holds the nodes and edges below; :attr:`CostGraph.graph`
presents them as a ``networkx.MultiDiGraph``, built the first time it is asked
for (NetworkX is not imported by the cost analyses, which read the plain
dictionaries, so a start that only derives costs never pays for it):

* one node per operator instance, keyed by its hierarchical path
  (``layers/attn/c_attn``), with attributes ``kind`` (operator name),
  ``inputs``/``outputs`` (tensor ids), ``attrs`` (the call's arguments),
  ``loc`` (source location), ``count`` (how many instances: the product of the
  counts of the enclosing ``repeat`` groups, a SymPy expression such as ``l``)
  and ``cost`` (a :class:`Cost`);
* model inputs are nodes of kind ``input``;
* one edge per tensor flowing from its producer to a consumer, keyed by the
  tensor id, with attributes ``tensor``, ``shape`` and ``role``.

A repeated group is built once (its nodes carry the count); the graph stays a
DAG: the value a group hands from one iteration to the next is a separate
*carried* tensor whose producer is the node that feeds the first iteration.
Analyses (totals, KV cache, sharding, ...) are functions over this structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from ..errors import Location

Expr = sympy.Expr
ZERO = sympy.Integer(0)
ONE = sympy.Integer(1)


def numel(shape: tuple[Expr, ...]) -> Expr:
    """Number of elements of a tensor of this shape (1 for a scalar)."""
    return sympy.Mul(*shape) if shape else ONE


@dataclass(frozen=True)
class Tensor:
    """A tensor value: ``shape`` (SymPy expressions), ``role`` (see
    :mod:`costgraph.engine.precision`), and the tensor whose ``storage`` it shares
    (itself unless it is a view: split, transpose, split_heads).
    ``count`` is how many such tensors exist (product of enclosing repeats);
    ``active`` how many a token passes through (fewer inside the experts of
    a mixture: ``repeat E as experts active k``)."""

    id: str
    shape: tuple[Expr, ...]
    role: str
    storage: str
    count: Expr
    producer: str
    active: Expr

    @property
    def numel(self) -> Expr:
        return numel(self.shape)

    def shape_str(self) -> str:
        return "[" + ", ".join(str(d) for d in self.shape) + "]"


@dataclass(frozen=True)
class Weight:
    """A parameter tensor owned by one node (``path`` = ``node/weight``);
    ``count`` copies exist, ``active`` of them serve each token. ``frozen``: not
    trained (``param NAME[shape]: frozen``, or built inside a call with
    ``frozen = true`` / ``no_grad = true``: PyTorch's ``requires_grad = False``),
    so no gradient, master copy or optimizer state and no weight-gradient FLOPs.
    ``buffer``: a tensor of the module's state that is not a parameter (PyTorch's
    ``register_buffer``/``nn.Buffer``, ``param NAME[shape]: buffer``, ``: buffer(fp32)``): frozen, in memory and in
    the weights' bytes, not counted in ``params`` (as ``model.parameters()`` leaves it out).
    ``dtype``: its own dtype (``fp32``, ``bf16``, ``fp16``: transformers'
    ``_keep_in_fp32_modules_strict``), else the weights'."""

    path: str
    shape: tuple[Expr, ...]
    count: Expr
    active: Expr
    frozen: bool = False
    buffer: bool = False
    dtype: str | None = None

    @property
    def numel(self) -> Expr:
        return numel(self.shape)

    @property
    def element_bytes(self) -> int | None:
        """Bytes of one element in its own ``dtype``; None: the weights' dtype."""
        return {"fp32": 4, "bf16": 2, "fp16": 2}.get(self.dtype)


@dataclass(frozen=True)
class Flops:
    """FLOPs split by kind: ``matmul`` (2 per multiply-add of a matrix
    product) and ``other`` (norms, softmax, activations, elementwise ops; the
    per-element counts are in :mod:`costgraph.ops.elementwise`)."""

    matmul: Expr = ZERO
    other: Expr = ZERO

    def __add__(self, o: "Flops") -> "Flops":
        return Flops(self.matmul + o.matmul, self.other + o.other)

    def under(self, convention: str) -> Expr:
        """The count under a FLOP convention (see :mod:`costgraph.engine.conventions`)."""
        return self.matmul if convention == "matmul" else self.matmul + self.other


@dataclass(frozen=True)
class Cost:
    """The cost record of one operator instance (one instance, not × count).

    ``forward``; ``backward_input`` (gradients with respect to the inputs)
    and ``backward_weight`` (gradients with respect to the parameters);
    ``weights`` (ids of parameters this node owns), ``tied`` (ids of
    parameters it reads but another node owns), ``saved`` (ids of tensors it
    keeps for the backward pass; bytes are counted per storage, once).
    """

    forward: Flops = Flops()
    backward_input: Flops = Flops()
    backward_weight: Flops = Flops()
    weights: tuple[str, ...] = ()
    tied: tuple[str, ...] = ()
    saved: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    """A ``repeat`` group: ``path``, its own ``count`` and the product of the
    counts around and including it (``multiplicity``); likewise ``active``
    (copies each token passes through) and ``active_multiplicity``."""

    path: str
    count: Expr
    multiplicity: Expr
    loc: Location
    carried: tuple[str, ...]
    active: Expr
    active_multiplicity: Expr


@dataclass(frozen=True)
class BlockInstance:
    """A call of a user block (``attention``) at ``path``."""

    path: str
    kind: str
    count: Expr
    loc: Location
    active: Expr


@dataclass(frozen=True)
class CacheEntry:
    """A tensor kept in the KV cache at inference (marked by ``cache(x)``).

    ``tensor``'s shape is ``[B, ..., S, d]``: axis 0 is the batch, axis -2
    the sequence; ``window`` limits the cached positions (sliding-window
    attention keeps the last ``w``), ``None`` keeps all ``S``.

    ``state = True``: a fixed-size recurrent state (Mamba's SSM state
    ``[B, d_inner, d_state]``, a convolution's last inputs) with no sequence
    axis: kept whole per sequence, whatever the number of tokens.

    ``shared = True``: another layer's cache, read (KV sharing: Gemma 3n/4's
    ``num_kv_shared_layers``): nothing stored or written here; a step reads
    its positions.

    ``topk``: a step's queries each read at most this many of the cached
    positions (DeepSeek-V3.2's attention over its indexer's top-k); all are
    stored. ``fp8_block``: kept in FP8 with one fp32 scale per block of that
    many values, whatever the run's KV dtype (vLLM's DeepSeek-V3.2 indexer
    key cache)."""

    tensor: str
    window: Expr | None
    path: str
    state: bool = False
    shared: bool = False
    topk: Expr | None = None
    fp8_block: Expr | None = None


@dataclass(frozen=True)
class DimInfo:
    """A dimension of the model: its symbol, meaning, default value, or the
    expression it stands for when derived (``ffn = 4*h``)."""

    name: str
    symbol: sympy.Symbol
    meaning: str
    default: int | None = None
    derived: Expr | None = None


@dataclass
class CostGraph:
    """A model's operator graph with everything analyses need.

    ``nodes`` maps a node's path to its attributes (program order);
    ``edges`` lists ``(producer, consumer, tensor id, attributes)``.
    """

    name: str
    source: str
    nodes: dict[str, dict] = field(default_factory=dict)
    edges: list[tuple[str, str, str, dict]] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    weights: dict[str, Weight] = field(default_factory=dict)
    groups: dict[str, Group] = field(default_factory=dict)
    blocks: dict[str, BlockInstance] = field(default_factory=dict)
    dims: dict[str, DimInfo] = field(default_factory=dict)
    options: dict[str, object] = field(default_factory=dict)
    configs: dict[str, dict[str, int]] = field(default_factory=dict)
    #: the configuration ``Model.values()``, ``Costs.evaluate()`` and ``compile()`` use when none is named:
    #: ``"hf"`` for a model loaded from a config.json by ``costgraph.load``; None (the dims' defaults) otherwise
    default_config: str | None = None
    outputs: tuple[str, ...] = ()
    caches: list[CacheEntry] = field(default_factory=list)
    #: bounds SymPy could not decide at build time, checked when values are given:
    #: ``(room, what, location, path)`` with ``room = whole - part + 1`` (positive when part ≤ whole)
    limits: list[tuple] = field(default_factory=list)

    _nx: object = field(default=None, repr=False, compare=False)
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def memo(self, kind: str) -> dict:
        """The analyses' cache ``kind`` of this graph (``"placement"``, ``"derived"``, ``"kernel_times"``):
        a dict the graph holds, so its entries live and die with the graph (a cached value may refer to the
        graph: the cycle is collected with it) and no other graph can meet them. Emptied when a node or an
        edge is added."""
        return self._memo.setdefault(kind, {})

    def add_node(self, path: str, **attrs) -> None:
        """Add the node ``path`` with its attributes (see the module docstring)."""
        self.nodes[path] = attrs
        self._nx = None
        self._memo.clear()

    def add_edge(self, producer: str, consumer: str, tensor: str, **attrs) -> None:
        """Add the edge carrying ``tensor`` from ``producer`` to ``consumer``."""
        self.edges.append((producer, consumer, tensor, {"tensor": tensor, **attrs}))
        self._memo.clear()
        self._nx = None

    @property
    def graph(self):
        """The nodes and edges as a ``networkx.MultiDiGraph`` (edges keyed by tensor id)."""
        if self._nx is None:
            import networkx as nx

            g = nx.MultiDiGraph()
            g.add_nodes_from(self.nodes.items())
            g.add_edges_from((u, v, k, d) for u, v, k, d in self.edges)
            self._nx = g
        return self._nx

    def ops(self):
        """Operator nodes (``kind`` ≠ ``input``) in program order: ``(path, data)``."""
        return [(n, d) for n, d in self.nodes.items() if d["kind"] != "input"]

    def node(self, path: str) -> dict:
        return self.nodes[path]

    def symbols(self) -> dict[str, str]:
        """Free dimension symbols (not derived) → meaning."""
        return {d.name: d.meaning for d in self.dims.values() if d.derived is None}

    def dim_expr(self, name: str) -> Expr:
        """Dimension ``name`` in the free dimensions: its symbol, or for a derived one its
        definition with every derived dimension in it replaced by its own (ViT's
        ``s = n + 1`` with ``n = (image/p)^2`` → ``(image/p)^2 + 1``)."""
        derived = {d.symbol: d.derived for d in self.dims.values() if d.derived is not None}
        expr = self.dims[name].symbol
        for _ in range(len(derived) + 1):   # each pass removes one level of definitions
            new = expr.xreplace(derived)
            if new == expr:
                break
            expr = new
        return expr
