"""Weight and KV-cache dtypes of inference, read from ``dtypes.toml`` (data,
a source beside every layout). All sizes in bits, exact."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

import sympy

from ..errors import CostgraphValueError

_WEIGHT_KEYS = {"description", "source", "note", "element_bits", "group_size", "group_stat_bits",
                "row_stat_bits", "tensor_stat_bits", "compute"}
_KV_KEYS = {"description", "source", "note", "element_bits", "vector_stat_bits", "tensor_stat_bits"}
COMPUTE = ("bf16", "fp16", "fp8")


@dataclass(frozen=True)
class WeightDtype:
    name: str
    description: str
    source: str
    element_bits: int
    group_size: int | None = None
    group_stat_bits: int = 0
    row_stat_bits: int = 0
    tensor_stat_bits: int = 0
    compute: str = "bf16"
    note: str = ""

    def bytes(self, shape: tuple) -> sympy.Expr:
        """Bytes of one linear weight ``[out, in]`` in this dtype (exact: ⌈in/group⌉ groups)."""
        n = sympy.Mul(*shape)
        out = shape[0] if len(shape) > 1 else sympy.Integer(1)
        total = n * self.element_bits
        if self.group_size is not None:
            total += out * sympy.ceiling(n / out / self.group_size) * self.group_stat_bits
        total += out * self.row_stat_bits + self.tensor_stat_bits
        return total / 8


@dataclass(frozen=True)
class KVDtype:
    name: str
    description: str
    source: str
    element_bits: int
    vector_stat_bits: int = 0
    tensor_stat_bits: int = 0
    note: str = ""

    def position_bytes(self, elements: sympy.Expr, vectors: sympy.Expr) -> sympy.Expr:
        """Bytes of one cached position holding ``elements`` values in ``vectors`` vectors."""
        return (elements * self.element_bits + vectors * self.vector_stat_bits) / 8


@cache
def _table() -> dict:
    data = tomllib.loads(files(__package__).joinpath("dtypes.toml").read_text(encoding="utf-8"))
    for kind, keys in (("weights", _WEIGHT_KEYS), ("kv", _KV_KEYS)):
        for name, entry in data[kind].items():
            extra = set(entry) - keys
            if extra or "source" not in entry or not isinstance(entry.get("element_bits"), int):
                raise AssertionError(f"dtypes.toml [{kind}.{name}]: bad entry {sorted(extra)}")
            for k, v in entry.items():
                if k.endswith("_bits") or k == "group_size":
                    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                        raise AssertionError(f"dtypes.toml [{kind}.{name}] {k}: not a non-negative integer")
    return data


def unquantized_bits() -> int:
    return _table()["unquantized_bits"]


def weight_dtypes() -> tuple[str, ...]:
    return tuple(_table()["weights"])


def kv_dtypes() -> tuple[str, ...]:
    return tuple(_table()["kv"])


def weight_dtype(name: str | WeightDtype) -> WeightDtype:
    if isinstance(name, WeightDtype):
        return name
    table = _table()["weights"]
    if name not in table:
        raise CostgraphValueError(f"unknown weight dtype {name!r}", hint="choose one of: " + ", ".join(table))
    return WeightDtype(name=name, **table[name])


def kv_dtype(name: str | KVDtype) -> KVDtype:
    if isinstance(name, KVDtype):
        return name
    table = _table()["kv"]
    if name not in table:
        raise CostgraphValueError(f"unknown KV cache dtype {name!r}", hint="choose one of: " + ", ".join(table))
    return KVDtype(name=name, **table[name])
