"""Precision policies and optimizers, read from the data files beside this module.

``policies.toml`` gives, per named policy, the bytes per parameter of the
weights, the gradients, an fp32 gradient copy, an fp32 master copy, and the
bytes of one optimizer-state element. ``optimizers.toml`` gives, per named
optimizer, how many states it keeps and their special forms (block-wise
quantized, factored, Muon's split). Each number carries its source in a comment
beside it in the file.

The files are parsed with :mod:`tomllib` and validated here: every number must
be a non-negative TOML integer (it becomes a SymPy ``Integer``; floats are
refused so that formulas stay exact), every key known, every name referred to
defined. Nothing read from a file is evaluated.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import sympy

from ..errors import CostgraphValueError

POLICY_NUMBERS = ("weights", "gradients", "grad_copy", "master", "state")
OPTIMIZER_NUMBERS = ("states", "state_bytes", "block_size", "block_stat_bytes",
                     "min_quantized_numel", "small_state_bytes", "matrix_states")
_TEXT = ("description", "source")


@dataclass(frozen=True)
class Policy:
    """A training precision policy: bytes per parameter element of each model state.

    ``weights``, ``gradients``: the parameters and gradients as the model reads
    and writes them; ``grad_copy``: an fp32 copy of the gradients kept by the
    optimizer step; ``master``: an fp32 master copy of the parameters;
    ``state``: bytes of one optimizer-state element (Adam's ``m`` or ``v``).
    """

    name: str
    description: str
    source: str
    weights: sympy.Integer
    gradients: sympy.Integer
    grad_copy: sympy.Integer
    master: sympy.Integer
    state: sympy.Integer


@dataclass(frozen=True)
class Optimizer:
    """What an optimizer keeps per parameter (see ``optimizers.toml``).

    ``states`` element-wise states of the parameter's shape, each of
    ``state_bytes`` (``None``: the policy's); block-wise quantization adds
    ``block_stat_bytes`` per ``block_size`` elements and state, and tensors
    under ``min_quantized_numel`` elements keep ``small_state_bytes`` states;
    ``factored`` adds Adafactor's second moment; ``matrix_states``,
    ``matrix_kinds`` and ``rest`` describe Muon's split.
    """

    name: str
    description: str
    source: str
    states: sympy.Integer
    state_bytes: sympy.Integer | None = None
    block_size: sympy.Integer | None = None
    block_stat_bytes: sympy.Integer | None = None
    min_quantized_numel: sympy.Integer | None = None
    small_state_bytes: sympy.Integer | None = None
    factored: bool = False
    matrix_states: sympy.Integer | None = None
    matrix_kinds: tuple[str, ...] = ()
    rest: str | None = None

    @property
    def elementwise(self) -> bool:
        """Whether the state of a tensor depends on its element count only
        (not on its shape nor on the operator that owns it)."""
        return not self.factored and self.matrix_states is None


def _read(name: str) -> dict:
    return tomllib.loads((files("costgraph.training") / name).read_text(encoding="utf-8"))


def _number(file: str, entry: str, key: str, value) -> sympy.Integer:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CostgraphValueError(
            f"{file}: [{entry}] {key} = {value!r} is not a non-negative integer",
            hint="bytes and counts are exact integers")
    return sympy.Integer(value)


def _text(file: str, entry: str, table: dict, key: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise CostgraphValueError(f"{file}: [{entry}] needs a {key} string")
    return value


def _check_keys(file: str, entry: str, table: dict, allowed: tuple[str, ...]) -> None:
    unknown = sorted(set(table) - set(allowed))
    if unknown:
        raise CostgraphValueError(f"{file}: [{entry}] has unknown keys {', '.join(unknown)}",
                                  hint="known keys: " + ", ".join(allowed))


@cache
def policies() -> dict[str, Policy]:
    """The named precision policies of ``policies.toml``, in file order."""
    file = "policies.toml"
    out = {}
    for name, table in _read(file).items():
        _check_keys(file, name, table, (*_TEXT, *POLICY_NUMBERS))
        missing = [k for k in POLICY_NUMBERS if k not in table]
        if missing:
            raise CostgraphValueError(f"{file}: [{name}] lacks {', '.join(missing)}")
        out[name] = Policy(name, _text(file, name, table, "description"), _text(file, name, table, "source"),
                           **{k: _number(file, name, k, table[k]) for k in POLICY_NUMBERS})
    return out


@cache
def optimizers() -> dict[str, Optimizer]:
    """The named optimizers of ``optimizers.toml``, in file order."""
    file = "optimizers.toml"
    raw = _read(file)
    out = {}
    for name, table in raw.items():
        _check_keys(file, name, table, (*_TEXT, *OPTIMIZER_NUMBERS, "factored", "matrix_kinds", "rest"))
        if "states" not in table:
            raise CostgraphValueError(f"{file}: [{name}] lacks states")
        nums = {k: _number(file, name, k, table[k]) for k in OPTIMIZER_NUMBERS if k in table}
        block = [k for k in ("block_size", "block_stat_bytes") if k in nums]
        if len(block) == 1 or nums.get("block_size") == 0:
            raise CostgraphValueError(f"{file}: [{name}] needs both block_size (> 0) and block_stat_bytes")
        if ("min_quantized_numel" in nums) != ("small_state_bytes" in nums):
            raise CostgraphValueError(f"{file}: [{name}] needs both min_quantized_numel and small_state_bytes")
        factored = table.get("factored", False)
        if not isinstance(factored, bool):
            raise CostgraphValueError(f"{file}: [{name}] factored must be true or false")
        kinds = table.get("matrix_kinds", [])
        if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
            raise CostgraphValueError(f"{file}: [{name}] matrix_kinds must be a list of operator names")
        rest = table.get("rest")
        muon = ("matrix_states" in nums, bool(kinds), rest is not None)
        if any(muon) and not all(muon):
            raise CostgraphValueError(f"{file}: [{name}] needs matrix_states, matrix_kinds and rest together")
        if rest is not None:
            if not isinstance(rest, str) or rest not in raw or rest == name:
                raise CostgraphValueError(f"{file}: [{name}] rest = {rest!r} names no other optimizer")
            if "matrix_states" in raw[rest] or raw[rest].get("factored"):
                raise CostgraphValueError(f"{file}: [{name}] rest = {rest!r} must be element-wise")
        out[name] = Optimizer(name, _text(file, name, table, "description"), _text(file, name, table, "source"),
                              factored=factored, matrix_kinds=tuple(kinds), rest=rest, **nums)
    return out


def _lookup(kind: str, table: dict, name):
    if not isinstance(name, str):
        raise CostgraphValueError(f"the {kind} must be a name, not {type(name).__name__}",
                                  hint="choose one of: " + ", ".join(table))
    try:
        return table[name]
    except KeyError:
        raise CostgraphValueError(f"unknown {kind} {name!r}", hint="choose one of: " + ", ".join(table)) from None


def policy(name: str | Policy) -> Policy:
    """The precision policy called ``name`` (a :class:`Policy` is returned as it is).

    Raises
    ------
    CostgraphValueError
        For an unknown name, listing the known ones.
    """
    return name if isinstance(name, Policy) else _lookup("precision policy", policies(), name)


def optimizer(name: str | Optimizer) -> Optimizer:
    """The optimizer called ``name`` (an :class:`Optimizer` is returned as it is).

    Raises
    ------
    CostgraphValueError
        For an unknown name, listing the known ones.
    """
    return name if isinstance(name, Optimizer) else _lookup("optimizer", optimizers(), name)
