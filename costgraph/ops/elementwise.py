"""Elementwise operators, activations, softmax and dropout.

None of these is a matrix product, so under the default ``matmul`` FLOP
convention they cost 0; under ``all`` they cost :data:`PER_ELEMENT` FLOPs per
output element forward and as many again for the input gradient (our
convention: the backward of an elementwise op re-evaluates the same
expression once, chained with the incoming gradient).

Saved for backward (what autograd needs; Korthikanti et al. 2022 §4.1):
GELU and SiLU their input; ReLU and softmax their output; dropout its mask
(1 byte per element); a product of two activations both operands; add,
subtract and scaling by a constant nothing.

Dropout exists only while training with dropout on: with the setting
``dropout=False`` it is the identity, has no node, and its mask vanishes.
"""

from __future__ import annotations

from ..graph import Flops
from .registry import op

# FLOPs per element under the `all` convention. Each elementary arithmetic
# operation and each transcendental (exp, tanh, rsqrt) counts 1.
PER_ELEMENT: dict[str, int] = {
    "add": 1, "sub": 1, "mul": 1,
    "scale": 1,       # multiply by a constant
    "dropout": 1,     # multiply by the pre-scaled mask (drawing it not counted)
    "relu": 1,        # max(x, 0)
    "gelu": 9,        # tanh form: x³ (2), ×0.044715, +x, ×√(2/π), tanh, +1, ×x, ×0.5
    "silu": 4,        # x / (1 + exp(-x)): exp, +1, divide, ×x
    "softmax": 5,     # max, subtract, exp, sum, divide
    "layernorm": 5,   # mean, subtract, square, mean of squares, × rsqrt
    "rmsnorm": 3,     # square, mean, × rsqrt
    "rope": 3,        # x·cos + rotate_half(x)·sin
}


def _unary(c, kind: str, save: str):
    x = c["x"]
    y = c.output(x.shape)
    n = x.numel
    c.forward(Flops(other=PER_ELEMENT[kind] * n))
    c.backward_input(Flops(other=PER_ELEMENT[kind] * n))
    if save == "input":
        c.save(x)
    elif save == "output":
        c.save(y)
    return y


@op("gelu", "GELU activation (Hendrycks & Gimpel 2016)", x="tensor")
def gelu(c):
    return _unary(c, "gelu", save="input")


@op("silu", "SiLU / swish activation", x="tensor")
def silu(c):
    return _unary(c, "silu", save="input")


@op("relu", "ReLU activation", x="tensor")
def relu(c):
    return _unary(c, "relu", save="output")


@op("softmax", "softmax over the last dimension; fp32 = true computes it in fp32 and casts back",
    x="tensor", fp32=("bool", False))
def softmax(c):
    """Keeps its output. With ``fp32 = true`` (LLaMA-family code:
    ``softmax(x, dtype=float32).to(x.dtype)``) the ``pytorch`` profile keeps
    the fp32 result, 4 bytes an element, and the cast copy is a new tensor."""
    if c["fp32"] and c.settings.profile == "pytorch":
        y = _unary(c, "softmax", save="none")
        c.save(c.aux("probs_fp32", y.shape, "fp32"))
        return y
    return _unary(c, "softmax", save="output")


@op("scale", "multiplication by a constant (e.g. 1/√d before softmax)", x="tensor")
def scale(c):
    return _unary(c, "scale", save="none")


@op("dropout", "dropout; the identity when training without dropout", x="tensor")
def dropout(c):
    x = c["x"]
    if not c.settings.dropout:
        return c.identity(x)
    y = _unary(c, "dropout", save="none")
    c.save(c.aux("mask", x.shape, role="mask"))
    return y


def _binary(c, kind: str, save: bool):
    x, y = c["x"], c["y"]
    out = c.output(c.broadcast(x, y))
    n = out.numel
    c.forward(Flops(other=PER_ELEMENT[kind] * n))
    if save:  # d(xy)/dx = y, d(xy)/dy = x: one multiply each
        c.backward_input(Flops(other=2 * n))
        c.save(x, y)
    return out


@op("add", "elementwise sum (written x + y; broadcasts)", x="tensor", y="tensor")
def add(c):
    return _binary(c, "add", save=False)


@op("sub", "elementwise difference (written x - y; broadcasts)", x="tensor", y="tensor")
def sub(c):
    return _binary(c, "sub", save=False)


@op("mul", "elementwise product of two activations (written x * y; broadcasts)",
    x="tensor", y="tensor")
def mul(c):
    return _binary(c, "mul", save=True)


@op("rope", "rotary position embedding (Su et al. 2021) on the first `dims` entries of the "
    "last dimension (all when omitted): no parameters", x="tensor", dims=("dim", None))
def rope(c):
    """x·cos + rotate_half(x)·sin over the rotated entries: 3 FLOPs each
    (`all` convention). Autograd keeps only the cos and sin tables ([1, S, r]
    in the compute dtype, made once per forward and shared by every layer:
    one storage each, in the ``pytorch`` profile); Korthikanti et al. keep
    nothing for it."""
    x = c["x"]
    dims = x.shape[-1] if c["dims"] is None else c["dims"]
    c.at_most(dims, x.shape[-1], "rotates")
    rotated = x.numel / x.shape[-1] * dims
    y = c.output(x.shape)
    if c.settings.profile == "pytorch":
        seq = x.shape[-2]
        c.save(c.shared_aux(f"rope_cos[{seq},{dims}]", (1, seq, dims), "act"),
               c.shared_aux(f"rope_sin[{seq},{dims}]", (1, seq, dims), "act"))
    c.forward(Flops(other=PER_ELEMENT["rope"] * rotated))
    c.backward_input(Flops(other=PER_ELEMENT["rope"] * rotated))
    return y
