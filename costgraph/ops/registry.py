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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

REQUIRED = object()
KINDS = ("tensor", "dim", "bool", "ident")


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
    rule: Callable
    summary: str


REGISTRY: dict[str, OpSpec] = {}


def op(name: str, summary: str, **params):
    """Register a rule as operator ``name``.

    ``params`` maps argument name → kind, or → ``(kind, default)``.
    """

    def register(rule):
        specs = []
        for pname, spec in params.items():
            kind, default = spec if isinstance(spec, tuple) else (spec, REQUIRED)
            assert kind in KINDS, kind
            specs.append(ParamSpec(pname, kind, default))
        REGISTRY[name] = OpSpec(name, tuple(specs), rule, summary)
        return rule

    return register
