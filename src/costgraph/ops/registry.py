"""The operator registry: the one place an operator is added.

An operator is a *rule*: a function that receives an :class:`OpContext`
(its arguments, and methods to declare outputs, parameters, FLOPs and saved
tensors) and returns its output tensor(s). Rules are registered with
:func:`op`, naming each argument's kind:

* ``tensor`` — a tensor value;
* ``dim`` — a dimension expression (``4*h``) or a whole number;
* ``bool`` — ``true`` / ``false``;
* ``ident`` — a bare name, not evaluated (``tied=wte``).

Every call also accepts ``name=IDENT``, the node's name in its path.

An operator also declares its *traits*, what the analyses that do not run its
rule need to know of it:

* ``layout`` — how it behaves under a tensor-parallel layout: one of
  :data:`LAYOUTS` (a name, or a tuple of the name and its arguments), applied
  by the rule of that name in :mod:`costgraph.parallel.tensor`. An operator
  without one is assumed to need its inputs whole, with a warning naming it.
* ``roles`` — which of :data:`ROLES` it plays for the training analyses
  (Muon's matrices, LoRA targets and quantized weights; MoE routers).

The rules live in :data:`RULE_MODULES`, which import SymPy. They are
imported on the first lookup of an operator's spec; until then the
operators' names, parameters, summaries and traits (what ``costgraph ops`` prints
and what the loader checks block names against) are read from the
``@op(...)`` declarations in those modules' source by :func:`catalogue`,
without importing them. The declarations are the one source of both.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

TYPE_CHECKING = False   # not typing's: `costgraph ops` starts without importing typing
if TYPE_CHECKING:
    from typing import Callable

REQUIRED = object()
KINDS = ("tensor", "dim", "bool", "ident")
# The modules of operator rules (in costgraph.ops); a new one is added here.
RULE_MODULES = ("elementwise", "index", "matmul", "norm", "shape", "ssm", "vision", "linear_attention",
                "linear_attention_ssd",
                "sparse_attention", "linear_attention_kda", "linear_attention_lightning", "recurrent",
                "conv_stages")   # staged backbones: ConvNeXt's layout changes, spatial mean, GRN


# How an operator's output is split under tensor parallelism, given its inputs'
# splits (see costgraph.parallel.tensor; one rule there per name) → what it means.
LAYOUTS = {
    "follow": "its output is split as its first input is (activations, scale, dropout, casts, copies)",
    "whole_last": "needs its last axis whole (a split there replicates the linears before it); "
                  "another split carries through",
    "slice_last": "takes entries of its last axis: needs it whole, except where the model says the "
                  "projection before is laid out rank by rank (grouped = true: each rank takes its "
                  "shard of every part, as vLLM loads Qwen3-Next's fused in_proj_qkvz); another split "
                  "carries through",
    "norm_last": "normalises along its last axis: needs it whole, except a split by heads (its output "
                 "split into heads next: QK-norm over the whole projection), kept split with the sum of "
                 "squares all-reduced (vLLM's MiniMaxText01RMSNormTP); another split carries through",
    "whole": "needs its inputs whole; its output is replicated",
    "broadcast": "elementwise over operands aligned from the right; a replicated operand is sliced "
                 "locally to match a split one",
    "per_channel": "works per channel: the named operands split along their last axis (channels), the "
                   "others whole; its weights and kept states split with the channels",
    "view": "moves axes: a split on input axis r+i lands on output axis r+j for each (i, j) given "
            "(r: the input's rank), on the same axis otherwise",
    "join_last": "joins along the last axis: needs that axis whole; a split elsewhere, the same in "
                 "every operand, carries through",
    "column_row": "Megatron's linear: column-parallel reading a replicated input (weight split by "
                  "output features), row-parallel reading one split along its features",
    "vocab": "vocabulary-parallel when its table has a row per entry of the model's output "
             "(the table split by rows, the output replicated); else replicated",
    "batched": "product of two activations: a split on a batch axis (heads) carries through; any "
               "other split needs both operands whole",
}
# Roles an operator plays for the training analyses → what they mean.
ROLES = {
    "matrix": "its weight multiplies activations: a hidden matrix for Muon (2-D or more, not the "
              "output head), a LoRA target, stored quantized by a 4-/8-bit base",
    "glu_gate": "an activation a fused GLU kernel recomputes in its backward (Megatron-LM's "
                "bias_swiglu_impl / bias_geglu_impl keep the activation's input only): under the "
                "korthikanti profile a product that reads its output does not keep it",
    "kv_expand": "a copy of grouped K/V heads to the query heads (GQA/MQA): fused attention kernels "
                 "(FlashAttention 2+, cuDNN/TE fused attention) read the grouped heads, so under flash "
                 "attention what is kept of its output is its input",
    "router": "an MoE router when its output has one entry per routed expert (left out of the "
              "FLOPs with router = false, as Megatron-LM counts)",
    "embedding": "a table indexed by token ids: its parameters are the embedding that 6N-style counts "
                 "(Kaplan et al. 2020's N) leave out",
    "weight_grad_input": "keeps its first input for its weights' gradient only (dW = dYᵀ·x, an "
                         "embedding's ids): with its weight frozen autograd keeps nothing of it",
    "weight_grad_normalized": "under the pytorch profile keeps its normalized x̂ for dγ only: with "
                              "γ frozen autograd keeps nothing of it",
    "cache": "marks the tensor kept in the KV (or state) cache at inference",
    "view": "a view of its input: moves no data (serving's memory traffic counts none for it)",
    "kv_passthrough": "K and V pass through it unchanged between their projection and the attention "
                      "products: context parallelism exchanges the tensor it reads",
    "timestep": "embeds a diffusion timestep: a model that calls it is a diffusion denoiser",
    "expert_act": "an expert's activation or its GLU product: inside a routed expert, Megatron-LM's moe_act "
                  "recompute module frees its output and re-runs it (moe/experts.py: CheckpointWithoutOutput "
                  "over bias_act_func)",
}


@dataclass(frozen=True)
class ParamSpec:
    name: str
    kind: str
    default: object = REQUIRED


@dataclass(frozen=True)
class OpSpec:
    """An operator: its ``name``, parameters, rule, a one-line summary and its
    traits: ``layout`` (a name of :data:`LAYOUTS` then its arguments, or None
    when not declared) and ``roles`` (names of :data:`ROLES`)."""

    name: str
    params: tuple[ParamSpec, ...]
    rule: Callable | None   # None in the catalogue read from the source
    summary: str
    layout: tuple | None = None
    roles: tuple[str, ...] = ()


class Registry(Mapping):
    """Operator name → :class:`OpSpec`. Membership (``name in REGISTRY``) is
    answered from :func:`catalogue` while the rules are not imported; any
    other access imports :data:`RULE_MODULES` (and so SymPy) first."""

    def __init__(self):
        self._specs: dict[str, OpSpec] = {}
        self._loaded = False

    def load(self) -> None:
        """Import the rule modules: their ``@op`` decorators fill the registry."""
        if not self._loaded:
            for module in RULE_MODULES:
                importlib.import_module(f"{__package__}.{module}")
            self._loaded = True

    def __getitem__(self, name: str) -> OpSpec:
        if name not in self._specs and not self._loaded:
            module = declared_modules().get(name) if isinstance(name, str) else None
            if module is not None:   # the one module that declares it (a cold start imports only the rules used)
                importlib.import_module(f"{__package__}.{module}")
            if name not in self._specs:
                self.load()
        return self._specs[name]

    def __iter__(self):
        self.load()
        return iter(self._specs)

    def __len__(self) -> int:
        self.load()
        return len(self._specs)

    def __contains__(self, name: object) -> bool:
        if self._loaded or name in self._specs:
            return name in self._specs
        names = declared_names()
        return name in (names if names is not None else {spec.name for spec in catalogue()})


REGISTRY = Registry()


def _params(params: dict) -> tuple[ParamSpec, ...]:
    specs = []
    for pname, spec in params.items():
        kind, default = spec if isinstance(spec, tuple) else (spec, REQUIRED)
        assert kind in KINDS, kind
        specs.append(ParamSpec(pname, kind, default))
    return tuple(specs)


def _layout(name: str, layout, params: tuple[ParamSpec, ...]) -> tuple | None:
    """``layout`` as declared (a name, or a tuple of a name and its arguments)
    → the tuple, checked: a name of :data:`LAYOUTS`; ``per_channel``'s
    arguments tensor parameters; ``view``'s ``(i, j)`` pairs of whole numbers."""
    if layout is None:
        return None
    out = (layout,) if isinstance(layout, str) else tuple(layout)
    kind, args = out[0], out[1:]
    if kind not in LAYOUTS:
        raise ValueError(f"operator {name!r}: layout {kind!r} is none of {', '.join(LAYOUTS)}")
    tensors = [p.name for p in params if p.kind == "tensor"]
    if kind == "per_channel" and not (args and all(a in tensors for a in args)):
        raise ValueError(f"operator {name!r}: per_channel names its per-channel tensor arguments "
                         f"(of {', '.join(tensors)}), got {args!r}")
    if kind == "view" and not all(isinstance(a, tuple) and len(a) == 2 and all(type(i) is int for i in a)
                                  for a in args):
        raise ValueError(f"operator {name!r}: view takes (input axis, output axis) pairs, got {args!r}")
    if kind not in ("per_channel", "view") and args:
        raise ValueError(f"operator {name!r}: layout {kind!r} takes no arguments, got {args!r}")
    return out


def _roles(name: str, roles) -> tuple[str, ...]:
    out = (roles,) if isinstance(roles, str) else tuple(roles)
    unknown = [r for r in out if r not in ROLES]
    if unknown:
        raise ValueError(f"operator {name!r}: role {unknown[0]!r} is none of {', '.join(ROLES)}")
    return out


def op(name: str, summary: str, *, layout=None, roles=(), **params):
    """Register a rule as operator ``name``.

    ``params`` maps argument name → kind, or → ``(kind, default)``.
    ``layout``: its behaviour under tensor parallelism, a name of
    :data:`LAYOUTS` or a tuple of the name and its arguments
    (``("per_channel", "x", "dt")``, ``("view", (-1, -2), (-2, -1))``);
    ``roles``: names of :data:`ROLES` (a string for one). All the arguments
    are literals (strings, numbers, ``None``, true/false, tuples of them), so
    that :func:`catalogue` can read them from the source.

    Raises ValueError for a layout or role that is not one of those names
    (a mistake in the operator's declaration, not in a model).
    """
    specs = _params(params)
    spec = OpSpec(name, specs, None, summary, _layout(name, layout, specs), _roles(name, roles))

    def register(rule):
        REGISTRY._specs[name] = replace(spec, rule=rule)
        return rule

    return register


def traits(kind: str) -> OpSpec | None:
    """The spec of the operator ``kind`` (its ``layout`` and ``roles``), from
    the registry once its rules are imported (its module's imported first where others are: a cold start
    imports the modules a model calls), else from :func:`catalogue`; None for a node kind that is no
    operator (``input``, ``param``)."""
    if REGISTRY._loaded or kind in REGISTRY._specs:
        return REGISTRY._specs.get(kind)
    modules = declared_modules()
    if modules is not None and kind not in modules:   # a node kind that is no operator (input, param)
        return None
    if modules is not None and REGISTRY._specs:   # rules imported already (SymPy too): its module's own
        return REGISTRY[kind]
    return next((s for s in catalogue() if s.name == kind), None)


def has_role(kind: str, role: str) -> bool:
    """Whether the operator ``kind`` declares ``role`` (one of :data:`ROLES`);
    False for a node kind that is no operator."""
    assert role in ROLES, role
    spec = traits(kind)
    return spec is not None and role in spec.roles


def describe_traits(spec: OpSpec) -> str:
    """One line of ``spec``'s traits, as ``costgraph ops`` prints them:
    ``layout: view (-1→-2, -2→0) · roles: matrix``."""
    if spec.layout is None:
        text = "layout: none declared (under --tp: inputs assumed whole, with a warning)"
    else:
        kind, args = spec.layout[0], spec.layout[1:]
        shown = ", ".join(f"{a[0]}→{a[1]}" if isinstance(a, tuple) else str(a) for a in args)
        text = f"layout: {kind}" + (f" ({shown})" if shown else "")
    if spec.roles:
        text += " · roles: " + ", ".join(spec.roles)
    return text


def catalogue() -> tuple[OpSpec, ...]:
    """Every operator's name, parameters, summary and traits, sorted by name, without
    importing the rules (``rule`` is None) unless they are imported already."""
    if REGISTRY._loaded:
        return tuple(REGISTRY[name] for name in sorted(REGISTRY))
    declared = _declared()
    if declared is None:   # the source cannot be read (a build without .py files)
        REGISTRY.load()
        return catalogue()
    return declared


class _NotLiteral(Exception):
    pass


def _literal(node):
    import ast

    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value   # -1: an axis counted from the end
    raise _NotLiteral(ast.dump(node))


@cache
def declared_names() -> frozenset[str] | None:
    """The names of the ``@op("name", ...)`` declarations of :data:`RULE_MODULES`, read from their text
    (a decorator at the start of a line, its name a string literal: tests/ops check this equals
    :func:`catalogue`'s names): membership (``name in REGISTRY``, the loader's check of every block's
    name) without importing the rules or parsing them (:func:`_declared`'s ``ast`` walk is a tenth of
    a second of a cold ``derive``); None where the source cannot be read."""
    modules = declared_modules()
    return None if modules is None else frozenset(modules)


@cache
def declared_modules() -> dict[str, str] | None:
    """Operator name → the module of :data:`RULE_MODULES` that declares it, read from the modules' text as
    :func:`declared_names` reads them: a lookup (``REGISTRY[name]``) imports that module alone, so a cold
    start imports the rules a model calls, not all of them; None where the source cannot be read."""
    import re

    try:
        return {m: module for module in RULE_MODULES for m in re.findall(
            r'^@op\(\s*"([^"]+)"', Path(__file__).with_name(f"{module}.py").read_text(encoding="utf-8"), re.M)}
    except OSError:
        return None


@cache
def _declared() -> tuple[OpSpec, ...] | None:
    """The ``@op(...)`` declarations of :data:`RULE_MODULES`, read with Python's
    own parser (the :mod:`ast` module; nothing is executed)."""
    import ast

    specs = []
    try:
        for module in RULE_MODULES:
            tree = ast.parse(Path(__file__).with_name(f"{module}.py").read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(node, ast.FunctionDef):
                    continue
                for dec in node.decorator_list:
                    if isinstance(dec, ast.Call) and isinstance(dec.func, ast.Name) and dec.func.id == "op":
                        name, summary = (_literal(a) for a in dec.args)
                        params = {k.arg: _literal(k.value) for k in dec.keywords}
                        layout, roles = params.pop("layout", None), params.pop("roles", ())
                        p = _params(params)
                        specs.append(OpSpec(name, p, None, summary, _layout(name, layout, p), _roles(name, roles)))
    except (OSError, SyntaxError, ValueError, _NotLiteral):
        return None
    return tuple(sorted(specs, key=lambda s: s.name))
