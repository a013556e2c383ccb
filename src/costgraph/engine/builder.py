"""A :class:`~costgraph.language.loader.Program` → a :class:`~costgraph.engine.graph.CostGraph`.

Walks the model's statements once. Names are resolved here: a call names a
block (user or library) or an operator of :data:`costgraph.ops.REGISTRY`.
Each operator call becomes one node whose cost record comes from its rule;
a ``repeat`` body is walked once with its count multiplied into every node
and tensor made inside it. SymPy objects are made from the syntax tree only
(never from text). Every mistake raises a located
:class:`~costgraph.errors.CostgraphSemanticError`.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Mapping

import sympy

from ..language import ast
from .builder_blocks import MAX_BLOCK_DEPTH, Blocks
from .builder_calls import Calls
from .builder_expressions import Expressions
from .builder_scope import CONSTANTS, Return, Scope, declared_dims, describe, did_you_mean
from .builder_statements import Statements
from ..errors import CostgraphSemanticError, Location
from .graph import ONE, CostGraph, Tensor
from ..language.loader import Program
from ..language.patterns import Level as _Level

__all__ = ["Settings", "PROFILES", "Builder", "build", "CONSTANTS", "Scope", "MAX_BLOCK_DEPTH", "MAX_GRAPH_SIZE"]


@dataclass(frozen=True)
class Settings:
    """Build-time settings: what changes the graph itself.

    ``dropout`` — training with dropout (default) or without: without, every
    ``dropout`` call is the identity and its mask is not kept.
    ``options`` — values for the model's ``option`` switches (``bias=False``).
    ``profile`` — what operators keep for backward (see :data:`PROFILES`).
    ``input_grads`` — whether the model's float ``input`` tensors need gradients: the one rule
    every operator follows (the builder marks the inputs; a node whose tensor inputs need none
    and which has no trained weight has no backward, one with trained weights only weight
    gradients). False (default): PyTorch's default, ``requires_grad=False`` on the data a loader
    yields; True: as inputs made with ``requires_grad=True``. Token ids and masks never do.
    """

    dropout: bool = True
    options: Mapping[str, object] = field(default_factory=dict)
    profile: str = "korthikanti"
    input_grads: bool = False


PROFILES = {
    "korthikanti": "the tensors of Korthikanti et al. 2022 §4.1: norm inputs, matmul operands, "
                   "softmax and activation outputs/inputs, 1-byte dropout masks, all in the compute dtype",
    "pytorch": "what PyTorch autograd keeps in Hugging Face's eager bf16 implementations "
               "(transformers 5.24, torch 2.13): LayerNorm mean/rstd and RMSNorm's fp32 copies, "
               "fp32 softmax where the model upcasts, the rotary cos/sin tables",
}


# Most operator nodes, inputs and block instances one model may build: 10,000.
# Every block call is built anew (inlined), so blocks that each call the one
# below twice double at every level; this stops such a file after about half a
# second instead of building 2^n nodes. The largest bundled model
# (deepseek_v3) builds 88 nodes and 7 block instances: layers are a repeat,
# built once whatever their count.
MAX_GRAPH_SIZE = 10_000


class Builder(Statements, Expressions, Calls, Blocks):
    """Walks a program once and fills a :class:`CostGraph`.

    The walk is split by concern: statements (:mod:`costgraph.engine.builder_statements`),
    expressions and conditions (:mod:`costgraph.engine.builder_expressions`), operator
    calls (:mod:`costgraph.engine.builder_calls`) and block calls
    (:mod:`costgraph.engine.builder_blocks`); this class holds the walk's state, the
    naming of nodes, and the model and its configurations."""

    def __init__(self, program: Program, settings: Settings):
        self.program = program
        self.settings = settings
        self.cg = CostGraph(program.model.name, program.model.loc.file)
        self.count = ONE
        self.active = ONE
        self.shared: dict[str, Tensor] = {}
        self.path: list[str] = []
        self.used: dict[tuple, set] = {}
        self._next_suffix: dict[tuple, int] = {}
        self.block_stack: list[str] = []
        self.size = 0   # operator nodes, inputs and block instances built so far
        self.levels: list[_Level] = []   # the repeats around the statement being built
        self.branch_depth = 0   # inside a branch of an if on a repeat's index
        #: inside a call given ``frozen = true`` (its weights untrained) or ``no_grad = true``
        #: (no backward at all): see :meth:`costgraph.engine.builder_calls.Calls.call`
        self.frozen = False
        self.share_next = None   # block(..., reuse = NAME): the source of the next block call (builder_calls)
        self.sharing = None      # (source, this instance, location) while a shared call is built
        self.own = False         # inside a call given own = true: its weights its own under sharing (builder_calls)
        self.no_grad = False
        #: tensor ids no gradient flows into (made under no_grad, or from frozen parameters only)
        self.grad_free: set[str] = set()

    def grow(self, loc: Location):
        """Count one more node or block instance; refuse past :data:`MAX_GRAPH_SIZE`."""
        self.size += 1
        if self.size > MAX_GRAPH_SIZE:
            raise CostgraphSemanticError(
                f"the model is too large: building it makes more than {MAX_GRAPH_SIZE:,} operator nodes "
                "and block instances (this call crosses the limit)", loc,
                hint="every block call is built anew, so blocks that call the block below twice double at "
                     "each level; write layers as `repeat COUNT as NAME { ... }`, built once and counted COUNT times")

    # --- naming ------------------------------------------------------------
    def claim(self, name: str, explicit: bool, loc: Location) -> str:
        used = self.used.setdefault(tuple(self.path), set())
        if name in used:
            if explicit:
                where = "/".join(self.path) or "the model"
                raise CostgraphSemanticError(f"the name '{name}' is used twice in {where}", loc,
                                             hint="give each call its own name=" if not self.branch_depth else
                                             "each branch of an if on a repeat's index builds nodes of its own: "
                                             f"name them apart ({name}_local, {name}_global)")
            # names are never released, so the search resumes where it last
            # stopped (linear, not quadratic, in the number of calls)
            key = (tuple(self.path), name)
            i = self._next_suffix.get(key, 1)
            while f"{name}_{i}" in used:
                i += 1
            self._next_suffix[key] = i
            name = f"{name}_{i}"
        used.add(name)
        return "/".join([*self.path, name])

    def find_weight(self, name: str, loc: Location) -> str:
        for depth in range(len(self.path), -1, -1):
            wid = "/".join([*self.path[:depth], name, "weight"])
            if wid in self.cg.weights:
                return wid
        for depth in range(len(self.path), -1, -1):
            node = self.cg.nodes.get("/".join([*self.path[:depth], name]))
            if node is None:
                continue
            tied = [w for w in node["cost"].tied if w.endswith("/weight")]
            if tied:   # tying to a tie: name the weight's owner
                owner = tied[0].rsplit("/", 1)[0]
                raise CostgraphSemanticError(
                    f"'{name}' has no weight of its own: it is tied to the weight of '{owner}'", loc,
                    hint=f"tie to the owner: tied = {self._name_of(owner)}")
            article = "an" if node["kind"][:1] in "aeiou" else "a"
            raise CostgraphSemanticError(f"'{name}' ({article} {node['kind']}) has no weight to tie to", loc,
                                         hint="tie to a node built earlier that has a weight, e.g. tied=wte")
        owners = sorted({w.rsplit("/", 1)[0] for w in self.cg.weights})
        close = difflib.get_close_matches(name, owners, n=1)
        raise CostgraphSemanticError(
            f"nothing named '{name}' with a weight to tie to", loc,
            hint=f"did you mean '{close[0]}'?" if close else "tie to a node built earlier, e.g. tied=wte")

    def _name_of(self, path: str) -> str:
        """How ``tied=`` names the node at ``path`` from here: its last part when
        that finds it, else its whole path."""
        last = path.rsplit("/", 1)[-1]
        for depth in range(len(self.path), -1, -1):
            if "/".join([*self.path[:depth], last, "weight"]) in self.cg.weights:
                return last if "/".join([*self.path[:depth], last]) == path else path
        return path

    # --- model -------------------------------------------------------------
    def build(self) -> CostGraph:
        model = self.program.model
        scope = Scope()
        for opt, value in self.settings.options.items():
            if not any(isinstance(s, ast.Option) and s.name == opt for s in model.body):
                options = [s.name for s in model.body if isinstance(s, ast.Option)]
                raise CostgraphSemanticError(
                    f"model '{model.name}' has no option '{opt}'", model.loc,
                    hint=("its options: " + ", ".join(options)) if options else "it has no options")
        try:
            self.run(model.body, scope, where="model")
        except Return as r:
            outs = r.value if isinstance(r.value, tuple) else (r.value,)
            for o in outs:
                if not isinstance(o, Tensor):
                    raise CostgraphSemanticError(f"a model returns tensors, not {describe(o)}", r.loc or model.loc,
                                                 hint="return the model's output tensor, e.g. return logits")
            self.cg.outputs = tuple(o.id for o in outs)
            self._configs()
            return self.cg
        raise CostgraphSemanticError(f"model '{model.name}' returns nothing", model.loc,
                                     hint="end the model with `return logits` (its output tensor)")

    def _configs(self):
        # a configuration may set a dimension that only some option values
        # declare (Mistral's window w, absent with sliding_window = false)
        declared = declared_dims(self.program.model.body)
        for cfg in self.program.file.configs:
            values = {}
            for name, expr, loc in cfg.settings:
                if name in values:
                    raise CostgraphSemanticError(f"configuration '{cfg.name}' sets '{name}' twice", loc)
                if name in declared and name not in self.cg.dims:
                    values[name] = None    # not a dimension under these options: ignored
                    continue
                if name not in self.cg.dims and name not in self.cg.options:
                    raise CostgraphSemanticError(
                        f"configuration '{cfg.name}' sets '{name}', which is not a dimension of '{self.cg.name}'",
                        loc, hint=did_you_mean(name, set(self.cg.dims) | set(self.cg.options)))
                if name in self.cg.dims and self.cg.dims[name].derived is not None:
                    raise CostgraphSemanticError(f"'{name}' is derived; a configuration cannot set it", loc)
                v = self.evaluate(expr, Scope())
                if not (isinstance(v, sympy.Integer) and v > 0) and not isinstance(v, bool):
                    raise CostgraphSemanticError(f"'{name}' must be a positive whole number, got {describe(v)}", loc)
                values[name] = v if isinstance(v, bool) else int(v)
            if cfg.name in self.cg.configs:
                raise CostgraphSemanticError(f"configuration '{cfg.name}' is defined twice", cfg.loc)
            self.cg.configs[cfg.name] = {k: v for k, v in values.items() if v is not None}



def build(program: Program, settings: Settings = Settings()) -> CostGraph:
    """Build the operator graph of ``program`` under ``settings``.

    Raises
    ------
    CostgraphSemanticError
        For unknown names, wrong arguments, shape mismatches (with both
        shapes), block cycles, and other mistakes, located in the file; and
        past the limits: :data:`MAX_GRAPH_SIZE` nodes and block instances,
        :data:`MAX_BLOCK_DEPTH` nested block calls, dimension expressions of
        :data:`~costgraph.engine.context.MAX_TERMS` terms and degree
        :data:`~costgraph.engine.context.MAX_DEGREE` once multiplied out.
    """
    try:
        return Builder(program, settings).build()
    except RecursionError:   # the parser and the block-depth limit keep well below this; a backstop
        raise CostgraphSemanticError(
            "the model nests too deeply to build (blocks, repeats and expressions together)",
            program.model.loc, hint="flatten it: fewer nested blocks or intermediate names") from None
