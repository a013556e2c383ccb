"""The storage schemes of a quantized (QLoRA) base: ``quantization.toml`` read, and the bytes of a base stored under one.

:func:`quant_schemes` / :func:`quant_scheme` read the schemes (bitsandbytes' NF4, NF4 with double
quantization, int8; a user's own through ``$COSTGRAPH_DATA/quantization.toml``), validated by
:mod:`costgraph.datafiles` and here (the stated ``bytes_per_param`` equal to the one the fields give);
:func:`quantized_weights` says which weights a 4-/8-bit base stores quantized (transformers'
``replace_with_bnb_linear``: the linears but the output head); :func:`tensor_quantized_bytes` and
:func:`quantized_weight_bytes` their bytes, exactly as bitsandbytes allocates them or asymptotically
(QLoRA, Dettmers et al. 2023, §3). Read by :mod:`costgraph.training.lora` for a QLoRA run's model states.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache

import sympy

from .. import datafiles
from ..datafiles import Field, Kind, Schema
from ..engine.graph import ZERO, CostGraph, numel
from ..errors import CostgraphValueError
from ..ops.registry import has_role
from .data import optimizer as get_optimizer
from .states import _local_shape, output_heads

Expr = sympy.Expr

QUANT_NUMBERS = ("element_bits", "block_size", "block_stat_bits", "second_block_size", "second_stat_bits",
                 "tensor_stat_bits", "row_stat_bits")


@dataclass(frozen=True)
class QuantScheme:
    """A storage scheme of ``quantization.toml`` (fields in bits, see the file)."""

    name: str
    description: str
    source: str
    bytes_per_param: sympy.Rational
    element_bits: sympy.Integer
    block_size: sympy.Integer | None = None
    block_stat_bits: sympy.Integer | None = None
    second_block_size: sympy.Integer | None = None
    second_stat_bits: sympy.Integer | None = None
    tensor_stat_bits: sympy.Integer | None = None
    row_stat_bits: sympy.Integer | None = None


_B = "bits"
#: A quantized storage scheme of ``quantization.toml`` (fields in bits, see the file).
QUANT = Kind("quantization scheme", (
    Field("description", "text"), Field("source", "text", doc="the source of the scheme's numbers"),
    Field("element_bits", unit=_B),
    Field("block_size", unit="elements", required=False, positive=True), Field("block_stat_bits", unit=_B, required=False),
    Field("second_block_size", unit="blocks", required=False, positive=True),
    Field("second_stat_bits", unit=_B, required=False),
    Field("tensor_stat_bits", unit=_B, required=False), Field("row_stat_bits", unit=_B, required=False),
    Field("bytes_per_param", "ratio", unit="B", doc="asymptotic bytes per weight element, checked against the rest"),
), together=(("block_size", "block_stat_bits"), ("second_block_size", "second_stat_bits")))
QUANTIZATION = Schema("quantization.toml", "costgraph.training", entries=QUANT, user=True)


def _scheme(name: str, e: datafiles.Entry) -> QuantScheme:
    if "second_block_size" in e and "block_size" not in e:
        raise e.error("has second-level blocks without first-level ones", "second_block_size",
                      hint="give block_size and block_stat_bits too")
    bpp = e["bytes_per_param"]
    s = QuantScheme(name, e["description"], e["source"], sympy.Rational(bpp.numerator, bpp.denominator),
                    **{k: sympy.Integer(e[k]) for k in QUANT_NUMBERS if k in e})
    if s.bytes_per_param != per_param_bytes(s):
        said = f" {s.bytes_per_param}" if e.bundled else ""     # a user's values are not repeated
        raise e.error(f"bytes_per_param{said} disagrees with its fields"
                      + (f" ({per_param_bytes(s)})" if e.bundled else ""), "bytes_per_param",
                      hint="element_bits/8 + block_stat_bits/(8·block_size) + second_stat_bits/(8·block_size·"
                           "second_block_size)")
    return s


@cache
def _schemes(data: datafiles.DataSet) -> dict[str, QuantScheme]:
    return {name: _scheme(name, e) for name, e in data.entries.items()}


def quant_schemes() -> dict[str, QuantScheme]:
    """The schemes of ``quantization.toml`` (and of ``$COSTGRAPH_DATA/quantization.toml``,
    added), validated by :mod:`costgraph.datafiles` (integers only, a source per
    scheme) and here (the stated ``bytes_per_param`` equal to the one the fields give)."""
    return _schemes(datafiles.load(QUANTIZATION))


def quant_scheme(name: str | QuantScheme) -> QuantScheme:
    """The scheme called ``name`` (``nf4``, ``nf4-double``, ``int8``).

    Raises
    ------
    CostgraphValueError
        For an unknown name, listing the known ones.
    """
    if isinstance(name, QuantScheme):
        return name
    table = quant_schemes()
    if not isinstance(name, str) or name not in table:
        raise CostgraphValueError(f"unknown quantization {name!r}", hint="choose one of: " + ", ".join(table))
    return table[name]


def per_param_bytes(s: QuantScheme) -> sympy.Rational:
    """Asymptotic bytes per weight element: ``element_bits/8`` plus the block
    statistics spread over their blocks (QLoRA §3's ``4 + 32/64`` bits, or
    ``4 + 8/64 + 32/(64·256)`` with double quantization)."""
    bits = sympy.Rational(s.element_bits)
    if s.block_size is not None:
        bits += sympy.Rational(s.block_stat_bits, s.block_size)
        if s.second_block_size is not None:
            bits += sympy.Rational(s.second_stat_bits, s.block_size * s.second_block_size)
    return bits / 8


def tensor_quantized_bytes(scheme: str | QuantScheme, shape: tuple, *, exact: bool = True) -> Expr:
    """Bytes of one weight of ``shape`` ``[out, ...]`` stored under ``scheme``.

    ``exact``: as bitsandbytes allocates them — ``⌈n·bits/8⌉`` packed bytes,
    ``⌈n/block⌉`` statistics, ``⌈⌈n/block⌉/block₂⌉`` second-level statistics,
    the per-tensor offset, one statistic per output row; otherwise
    :func:`per_param_bytes` × n plus the per-row statistics."""
    s = quant_scheme(scheme)
    n = numel(tuple(shape))
    rows = shape[0] if shape else sympy.Integer(1)
    row = rows * s.row_stat_bits / 8 if s.row_stat_bits is not None else ZERO
    if not exact:
        return s.bytes_per_param * n + row
    out = sympy.ceiling(n * s.element_bits / 8)
    if s.block_size is not None:
        blocks = sympy.ceiling(n / s.block_size)
        out += blocks * s.block_stat_bits / 8
        if s.second_block_size is not None:
            out += sympy.ceiling(blocks / s.second_block_size) * s.second_stat_bits / 8
    if s.tensor_stat_bits is not None:
        out += s.tensor_stat_bits / 8
    return out + row


def quantized_weights(cg: CostGraph) -> set[str]:
    """The weights a 4-/8-bit base stores quantized: the ``weight`` of every
    operator of role ``matrix`` (``linear``) except the output head.
    transformers' bitsandbytes integration replaces ``nn.Linear`` modules
    only (``replace_with_bnb_linear``) and keeps
    ``get_keys_to_not_convert(model)`` — the output embedding and tied
    weights — in 16 bits; embeddings, norms and biases stay 16-bit (QLoRA §3:
    'we only quantize the linear layers')."""
    if not isinstance(cg, CostGraph):
        cg = getattr(cg, "graph", cg)
    heads = output_heads(cg)
    return {w for p, d in cg.ops() if has_role(d["kind"], "matrix") and p not in heads
            for w in d["cost"].weights if w.endswith("/weight")}


def quantized_weight_bytes(cg: CostGraph, scheme: str | QuantScheme, *, exact: bool = True,
                           shard: Mapping | None = None, select: Callable[[str], bool] | None = None) -> Expr:
    """Bytes of :func:`quantized_weights` stored under ``scheme`` (all copies;
    ``shard``: weight id → the model-parallel divisor as in ``model_states``,
    the blocks taken over the local shard; ``select``: which of them)."""
    if not isinstance(cg, CostGraph):
        cg = getattr(cg, "graph", cg)
    shard = dict(shard or {})
    opt = get_optimizer("sgd")
    total = []
    for wid in sorted(quantized_weights(cg)):
        if select is not None and not select(wid):
            continue
        w = cg.weights[wid]
        shape = _local_shape(wid, w.shape, shard.get(wid, 1), opt)
        total.append(w.count * tensor_quantized_bytes(scheme, shape, exact=exact))
    return sympy.Add(*total)
