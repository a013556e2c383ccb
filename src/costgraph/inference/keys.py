"""The key axis of a graph built for inference: :data:`KEYS` and :func:`split_keys`.

Under :func:`split_keys` (what :func:`costgraph.inference.load` does) the ``cache``
operator gives its cached tensor's sequence axis (axis −2, the ``CacheEntry``
contract) the symbol :data:`KEYS`, so every shape and cost computed from the cache
carries it; :mod:`costgraph.inference.phases` substitutes ``KEYS → n + q`` per step
(its module docstring: how the key axis is found)."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import sympy

from .request import built_from_tokens

#: the key length of attention inside a graph built by :func:`split_keys`
KEYS = sympy.Symbol("n_keys", positive=True, integer=True)


@contextmanager
def split_keys():
    """Within this block, models are built with the cached tensors' sequence
    axis as :data:`KEYS` (see the module docstring), and ``conv1d`` computes the
    ``q`` positions it outputs whatever its ``padded`` (serving runs the
    ``causal_conv1d`` kernels: ``causal_conv1d_fn`` over a prompt,
    ``causal_conv1d_update`` one position per decoded token; ``padded`` is how
    transformers' PyTorch training path computes it). Not thread-safe: it swaps
    the ``cache`` and ``conv1d`` rules of the operator registry for the duration."""
    from ..ops.registry import REGISTRY

    spec, conv = REGISTRY["cache"], REGISTRY["conv1d"]

    def conv_rule(c):
        c.args["padded"] = False
        return conv.rule(c)

    def rule(c):
        x = c["x"]
        if len(x.shape) < 3:
            c.fail(f"cache needs [B, ..., S, d], got {x.shape_str()}")
        c.cache(x, c["window"], shared=bool(c["shared"]), topk=c["topk"], fp8_block=c["fp8_block"])
        if not built_from_tokens(c.b.cg, x):   # computed once per request (inference/request.py): fixed length
            return c.output(x.shape, view_of=x)
        return c.output((*x.shape[:-2], KEYS, x.shape[-1]), view_of=x)

    REGISTRY._specs["cache"] = replace(spec, rule=rule)   # its traits kept
    REGISTRY._specs["conv1d"] = replace(conv, rule=conv_rule)
    try:
        yield
    finally:
        REGISTRY._specs["cache"] = spec
        REGISTRY._specs["conv1d"] = conv
