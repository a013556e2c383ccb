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

The rules live in :data:`RULE_MODULES`, which import SymPy. They are
imported on the first lookup of an operator's spec; until then the
operators' names, parameters and summaries (what ``costgraph ops`` prints
and what the loader checks block names against) are read from the
``@op(...)`` declarations in those modules' source by :func:`catalogue`,
without importing them. The declarations are the one source of both.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TYPE_CHECKING = False   # not typing's: `costgraph ops` starts without importing typing
if TYPE_CHECKING:
    from typing import Callable

REQUIRED = object()
KINDS = ("tensor", "dim", "bool", "ident")
# The modules of operator rules (in costgraph.ops); a new one is added here.
RULE_MODULES = ("elementwise", "index", "matmul", "norm", "shape", "ssm")


@dataclass(frozen=True)
class ParamSpec:
    name: str
    kind: str
    default: object = REQUIRED


@dataclass(frozen=True)
class OpSpec:
    """An operator: its ``name``, parameters, rule and a one-line summary."""

    name: str
    params: tuple[ParamSpec, ...]
    rule: Callable | None   # None in the catalogue read from the source
    summary: str


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
        return name in {spec.name for spec in catalogue()}


REGISTRY = Registry()


def _params(params: dict) -> tuple[ParamSpec, ...]:
    specs = []
    for pname, spec in params.items():
        kind, default = spec if isinstance(spec, tuple) else (spec, REQUIRED)
        assert kind in KINDS, kind
        specs.append(ParamSpec(pname, kind, default))
    return tuple(specs)


def op(name: str, summary: str, **params):
    """Register a rule as operator ``name``.

    ``params`` maps argument name → kind, or → ``(kind, default)``. The
    arguments are literals (strings, ``None``, true/false, tuples of them),
    so that :func:`catalogue` can read them from the source.
    """

    def register(rule):
        REGISTRY._specs[name] = OpSpec(name, _params(params), rule, summary)
        return rule

    return register


def catalogue() -> tuple[OpSpec, ...]:
    """Every operator's name, parameters and summary, sorted by name, without
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
    raise _NotLiteral(ast.dump(node))


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
                        specs.append(OpSpec(name, _params(params), None, summary))
    except (OSError, SyntaxError, ValueError, _NotLiteral):
        return None
    return tuple(sorted(specs, key=lambda s: s.name))
