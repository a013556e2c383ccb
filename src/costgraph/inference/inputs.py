"""The checks of :func:`costgraph.inference.roofline.infer`'s inputs, before any analysis: the counts,
the efficiencies, the vLLM engine, and the memory kept free (``--reserve``, the same setting as vLLM's
``--gpu-memory-utilization``: reserve = 1 − utilization, read exactly, never evaluated)."""

from __future__ import annotations

import sympy

from ..choices import GPU_MEMORY_UTILIZATION, VLLM_ENGINE
from ..errors import CostgraphValueError


#: what to do with a --reserve that infer cannot take (it is vLLM's 1 - gpu_memory_utilization, a fraction)
RESERVE_HINT = ("give the share of each GPU's memory kept free, a fraction below 1: --reserve 0.1 (the default, vLLM's "
                "gpu_memory_utilization 0.9), or --gpu-memory-utilization 0.9; for memory in bytes, --memory (the "
                "device's) or --kv-memory (the KV cache's)")


def serving_reserve(value) -> sympy.Rational:
    """``infer``'s ``--reserve`` as a Rational in [0, 1) (None: 0.1, vLLM's 1 − ``gpu_memory_utilization``):
    a number, or text read exactly (``0.1``, ``1/10``: :func:`costgraph.arguments.parse_fraction`, never evaluated).

    Raises
    ------
    CostgraphValueError
        Text that is no number (``100GB``: a size, which ``train``'s ``--reserve`` takes and ``infer``'s
        does not), or a number outside [0, 1); the hint says what to give (:data:`RESERVE_HINT`)."""
    from ..arguments import parse_fraction, rational

    if value is None:   # vLLM's default gpu_memory_utilization, kept free
        return 1 - sympy.Rational(GPU_MEMORY_UTILIZATION)
    try:
        r = parse_fraction(value, "--reserve") if isinstance(value, str) else rational(value, "--reserve")
    except CostgraphValueError as e:
        size = isinstance(value, str) and value.strip()[-1:].upper() == "B"
        raise CostgraphValueError(f"infer's --reserve is a fraction, not a size: {value.strip()[:40]!r}" if size
                                  else e.message, hint=RESERVE_HINT) from None
    if not 0 <= r < 1:
        shown = f"{float(r):g}" if r.q != 1 else str(r)
        raise CostgraphValueError(f"--reserve {shown} is not a fraction in [0, 1): it keeps {'all' if r >= 1 else 'less than none'} "
                                  "of the device memory free", hint=RESERVE_HINT)
    return r


def _check_inputs(prompt, generate, batch, page, reserve, compute_efficiency, bandwidth_efficiency,
                  vllm_engine=VLLM_ENGINE.default):
    """Check the counts, fractions and the vLLM engine of :func:`infer` (before any analysis); returns
    ``reserve`` as a Rational (None: the default 0.1)."""
    try:
        VLLM_ENGINE.check(vllm_engine)
    except ValueError as e:
        raise CostgraphValueError(str(e), hint=VLLM_ENGINE.hint()) from None
    for name, v in (("prompt", prompt), ("generate", generate), ("batch", batch), ("page-size", page)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise CostgraphValueError(f"--{name} must be a positive whole number, not {v!r}")
    reserve = serving_reserve(reserve)
    for name, e in (("compute-efficiency", compute_efficiency), ("bandwidth-efficiency", bandwidth_efficiency)):
        e = sympy.nsimplify(e)
        if not (e.is_Rational and 0 < e <= 1):
            raise CostgraphValueError(f"--{name} must be a fraction in (0, 1], not {e}",
                                      hint="the share of the " + ("peak" if name.startswith("compute") else "HBM bandwidth")
                                           + " reached: 1 is the ideal roofline, e.g. 0.45")
    return reserve


def _utilization(reserve, utilization, given: bool = True):
    """``reserve`` (a Rational) from ``--gpu-memory-utilization`` when given: ``1 − utilization``
    (the same setting, :data:`costgraph.choices.GPU_MEMORY_UTILIZATION`); both given (``given``:
    ``reserve`` was not the default) must agree."""
    if utilization is None:
        return reserve
    from ..arguments import rational

    u = rational(utilization, "--gpu-memory-utilization")
    if not 0 < u <= 1:
        raise CostgraphValueError(f"--gpu-memory-utilization must be a fraction in (0, 1], not {u}",
                                  hint="the share of device memory vLLM may use: 0.9 by default")
    if reserve != 1 - u and (given or reserve != 1 - sympy.Rational(GPU_MEMORY_UTILIZATION)):
        raise CostgraphValueError(f"--reserve {reserve} and --gpu-memory-utilization {u} disagree",
                                  hint="they are one setting (reserve = 1 - utilization): give one of them")
    return 1 - u
