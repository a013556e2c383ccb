"""Weight and KV-cache dtypes of inference, read from ``dtypes.toml`` (data,
a source beside every layout). All sizes in bits, exact.

The file is read and validated by :mod:`costgraph.datafiles` against
:data:`SCHEMA` (``[weights.NAME]`` and ``[kv.NAME]`` tables, the top-level
``unquantized_bits``); a ``$COSTGRAPH_DATA/dtypes.toml`` may add dtypes of
one's own (a bundled name is refused)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import sympy

from .. import datafiles
from ..datafiles import Field, Schema, Kind
from ..errors import CostgraphValueError

#: The dtypes of the matrix products (a peak of the hardware preset).
COMPUTE = ("bf16", "fp16", "fp8")
_B = "bits"
_TEXTS = (Field("description", "text"), Field("source", "text", doc="the source of the layout's numbers"),
          Field("note", "text", required=False))
#: ``[weights.NAME]``: a linear weight's storage (see ``dtypes.toml``).
WEIGHTS = Kind("weight dtype", (
    *_TEXTS, Field("element_bits", unit=_B, positive=True),
    Field("group_size", unit="elements", required=False, positive=True),
    Field("group_stat_bits", unit=_B, required=False), Field("row_stat_bits", unit=_B, required=False),
    Field("tensor_stat_bits", unit=_B, required=False), Field("compute", "text", required=False),
), together=(("group_size", "group_stat_bits"),))
#: ``[kv.NAME]``: a KV cache's storage.
KV = Kind("KV cache dtype", (
    *_TEXTS, Field("element_bits", unit=_B, positive=True),
    Field("vector_stat_bits", unit=_B, required=False), Field("tensor_stat_bits", unit=_B, required=False),
))
SCHEMA = Schema("dtypes.toml", "costgraph.inference", groups=(("weights", WEIGHTS), ("kv", KV)),
                top=(Field("unquantized_bits", unit=_B, positive=True,
                           doc="bits of the weights no quantizer touches (embeddings, head, norms)"),), user=True)


@dataclass(frozen=True)
class WeightDtype:
    """A weight storage dtype of ``dtypes.toml`` ``[weights.NAME]``: bits per
    element, per group of ``group_size`` input features, per output row and per
    tensor; ``compute`` is the dtype of the matrix products."""

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
    """A KV cache dtype of ``dtypes.toml`` ``[kv.NAME]``: bits per cached
    element, per cached vector and per cached tensor."""

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
def _dtypes(data: datafiles.DataSet) -> dict:
    for name, e in data.groups["weights"].items():
        if e.get("compute", "bf16") not in COMPUTE:
            raise e.error("compute names no matmul dtype", "compute", hint="one of " + ", ".join(COMPUTE))
    return {"unquantized_bits": data.top["unquantized_bits"],
            "weights": {n: WeightDtype(name=n, **e.values) for n, e in data.groups["weights"].items()},
            "kv": {n: KVDtype(name=n, **e.values) for n, e in data.groups["kv"].items()}}


def _table() -> dict:
    return _dtypes(datafiles.load(SCHEMA))


def unquantized_bits() -> int:
    """Bits of one weight element no quantizer touches (16: bf16/fp16 checkpoints)."""
    return _table()["unquantized_bits"]


def weight_dtypes() -> tuple[str, ...]:
    """The weight dtype names, bundled then the user's (``bf16``, ``fp16``, ``fp8``, ``int8``, ``int4``)."""
    return tuple(_table()["weights"])


def kv_dtypes() -> tuple[str, ...]:
    """The KV cache dtype names, bundled then the user's."""
    return tuple(_table()["kv"])


def weight_dtype(name: str | WeightDtype) -> WeightDtype:
    if isinstance(name, WeightDtype):
        return name
    table = _table()["weights"]
    if name not in table:
        raise CostgraphValueError(f"unknown weight dtype {name!r}", hint="choose one of: " + ", ".join(table))
    return table[name]


def kv_dtype(name: str | KVDtype) -> KVDtype:
    if isinstance(name, KVDtype):
        return name
    table = _table()["kv"]
    if name not in table:
        raise CostgraphValueError(f"unknown KV cache dtype {name!r}", hint="choose one of: " + ", ".join(table))
    return table[name]
