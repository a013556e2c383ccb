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
    Field("group_rows", unit="rows", required=False, positive=True,
          doc="output rows one group spans (FP8 block-wise 128 x 128: 128)"),
    Field("column_stat_bits", unit=_B, required=False, doc="bits per input feature (GPTQ act-order g_idx)"),
), together=(("group_size", "group_stat_bits"),))
#: ``[kv.NAME]``: a KV cache's storage.
KV = Kind("KV cache dtype", (
    *_TEXTS, Field("element_bits", unit=_B, positive=True),
    Field("vector_stat_bits", unit=_B, required=False), Field("tensor_stat_bits", unit=_B, required=False),
    Field("block_size", unit="elements", required=False, positive=True,
          doc="elements per block along a cached vector (llama.cpp q8_0: 32)"),
    Field("block_stat_bits", unit=_B, required=False, doc="bits per block besides its elements (q8_0: fp16 d)"),
), together=(("block_size", "block_stat_bits"),))
SCHEMA = Schema("dtypes.toml", "costgraph.inference", groups=(("weights", WEIGHTS), ("kv", KV)),
                top=(Field("unquantized_bits", unit=_B, positive=True,
                           doc="bits of the weights no quantizer touches (embeddings, head, norms)"),), user=True)


@dataclass(frozen=True)
class WeightDtype:
    """A weight storage dtype of ``dtypes.toml`` ``[weights.NAME]``: bits per
    element, per group of ``group_size`` input features × ``group_rows`` output
    rows, per output row, per input feature and per tensor; ``compute`` is the
    dtype of the matrix products."""

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
    group_rows: int = 1
    column_stat_bits: int = 0

    @property
    def quantized(self) -> bool:
        """Whether this layout differs from the unquantized one (other element bits or any statistics)."""
        return bool(self.element_bits != unquantized_bits() or self.row_stat_bits or self.tensor_stat_bits
                    or self.group_size or self.column_stat_bits)

    def bytes(self, shape: tuple) -> sympy.Expr:
        """Bytes of one linear weight ``[out, in]`` in this dtype, exact:
        ``out·in·element_bits`` + ``⌈out/group_rows⌉·⌈in/group_size⌉`` group
        statistics + ``out`` row statistics + ``in`` column statistics + the
        tensor's, over 8 (a 1-D weight is one row)."""
        n = sympy.Mul(*shape)
        out = shape[0] if len(shape) > 1 else sympy.Integer(1)
        total = n * self.element_bits
        if self.group_size is not None:
            rows = out if self.group_rows == 1 else sympy.ceiling(out / self.group_rows)
            total += rows * sympy.ceiling(n / out / self.group_size) * self.group_stat_bits
        total += out * self.row_stat_bits + n / out * self.column_stat_bits + self.tensor_stat_bits
        return total / 8


@dataclass(frozen=True)
class KVDtype:
    """A KV cache dtype of ``dtypes.toml`` ``[kv.NAME]``: bits per cached
    element, per cached vector, per block of ``block_size`` elements along a
    vector (llama.cpp ``q8_0``) and per cached tensor."""

    name: str
    description: str
    source: str
    element_bits: int
    vector_stat_bits: int = 0
    tensor_stat_bits: int = 0
    note: str = ""
    block_size: int | None = None
    block_stat_bits: int = 0

    def position_bytes(self, elements: sympy.Expr, vectors: sympy.Expr) -> sympy.Expr:
        """Bytes of one cached position holding ``elements`` values in ``vectors``
        vectors of equal length: elements, per-vector statistics and
        ``vectors · ⌈(elements/vectors)/block_size⌉`` block statistics."""
        bits = elements * self.element_bits + vectors * self.vector_stat_bits
        if self.block_size is not None:
            bits += vectors * sympy.ceiling(elements / vectors / self.block_size) * self.block_stat_bits
        return bits / 8


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
    """The weight dtype names, bundled then the user's (``bf16``, ``fp16``, ``fp8``, ``int8``, ``int4``,
    ``awq``, ``gptq``, ``gptq-act-order``, ``fp8-per-channel``, ``fp8-block``, ``mxfp4``, ``nvfp4``)."""
    return tuple(_table()["weights"])


def kv_dtypes() -> tuple[str, ...]:
    """The KV cache dtype names, bundled then the user's."""
    return tuple(_table()["kv"])


def weight_dtype(name: str | WeightDtype) -> WeightDtype:
    """The weight dtype called ``name`` (a :class:`WeightDtype` is returned as is).

    Raises CostgraphValueError for an unknown name, listing the known ones."""
    if isinstance(name, WeightDtype):
        return name
    table = _table()["weights"]
    if not isinstance(name, str) or name not in table:   # a list: not a TypeError (unhashable)
        raise CostgraphValueError(f"unknown weight dtype {name!r}", hint="choose one of: " + ", ".join(table))
    return table[name]


def kv_dtype(name: str | KVDtype) -> KVDtype:
    """The KV cache dtype called ``name`` (a :class:`KVDtype` is returned as is).

    Raises CostgraphValueError for an unknown name, listing the known ones."""
    if isinstance(name, KVDtype):
        return name
    table = _table()["kv"]
    if not isinstance(name, str) or name not in table:   # a list: not a TypeError (unhashable)
        raise CostgraphValueError(f"unknown KV cache dtype {name!r}", hint="choose one of: " + ", ".join(table))
    return table[name]


def derived_weight_dtype(name: str, fields: dict | None = None) -> WeightDtype:
    """The weight dtype ``name`` with some fields changed, as a checkpoint ships it
    (an AWQ ``group_size`` of 64, FP8 blocks of ``[rows, cols]``): named
    ``"awq (group_size 64)"``; ``name`` itself when ``fields`` is empty.

    Raises CostgraphValueError for an unknown name or field."""
    from dataclasses import fields as _fields, replace

    base = weight_dtype(name)
    if not fields:
        return base
    known = {f.name for f in _fields(WeightDtype)} - {"name", "description", "source", "note"}
    bad = sorted(set(fields) - known)
    if bad:
        raise CostgraphValueError(f"weight dtype field {bad[0]!r} is not one of the layout's",
                                  hint="one of: " + ", ".join(sorted(known)))
    said = ", ".join(f"{k} {v}" for k, v in fields.items())
    return replace(base, name=f"{name} ({said})", **fields)
