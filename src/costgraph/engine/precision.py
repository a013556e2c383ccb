"""Precision settings: bytes per element of each tensor role.

Tensors in the graph carry a *role*, not a byte count: ``act`` (activations
in the compute dtype), ``mask`` (dropout masks), ``index`` (token ids),
``fp32`` (tensors kept in float32 whatever the compute dtype), ``bf16`` and
``fp16`` (2 bytes whatever the compute dtype; ``cast(x, bf16)``). A
:class:`Precision` maps roles to bytes, so the same graph gives activation
memory for bf16 or fp32 training.

The default, ``bf16``, is the convention of Korthikanti et al. 2022 §4.1
("Reducing Activation Recomputation in Large Transformer Models"):
activations 2 bytes, dropout masks 1 byte.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CostgraphValueError

ROLES = ("act", "mask", "index", "fp32", "bf16", "fp16")
#: the roles of floating-point values (what ``cast`` converts between)
FLOAT_ROLES = ("act", "fp32", "bf16", "fp16")


@dataclass(frozen=True)
class Precision:
    """Bytes per element of each tensor role, and the dtype name shown on edges."""

    name: str
    activation: int = 2
    mask: int = 1
    index: int = 8
    activation_dtype: str = "bf16"

    def bytes(self, role: str) -> int:
        """Bytes per element of a tensor with this ``role`` (one of :data:`ROLES`)."""
        return {"act": self.activation, "mask": self.mask, "index": self.index, "fp32": 4, "bf16": 2, "fp16": 2}[role]

    def dtype(self, role: str) -> str:
        """The dtype name of a tensor with this ``role``."""
        return {"act": self.activation_dtype, "mask": "uint8", "index": "int64", "fp32": "fp32",
                "bf16": "bf16", "fp16": "fp16"}[role]


PRECISIONS: dict[str, Precision] = {
    "bf16": Precision("bf16"),
    "fp16": Precision("fp16", activation_dtype="fp16"),
    "fp32": Precision("fp32", activation=4, activation_dtype="fp32"),
}


def precision(name: str) -> Precision:
    """The named precision setting (``bf16``, ``fp16`` or ``fp32``).

    Raises
    ------
    CostgraphValueError
        For an unknown name, listing the known ones.
    """
    try:
        return PRECISIONS[name]
    except (KeyError, TypeError):   # TypeError: a list or dict (unhashable)
        raise CostgraphValueError(
            f"unknown precision {name!r}", hint="choose one of: " + ", ".join(PRECISIONS)) from None
