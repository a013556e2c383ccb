"""Model states for a bare parameter count Ψ, as the ZeRO paper writes them,
and DeepSpeed's ZeRO estimators as a named convention.

:func:`bare_model_states` uses the same policies, optimizers and ZeRO rules
as :func:`costgraph.training.model_states`, for ``Ψ`` parameters without a
graph: the parameters are one flat tensor of ``Ψ`` elements (which is how
8-bit Adam's block statistics are counted; optimizers that need shapes —
Adafactor, Muon — need a graph). The ZeRO paper (Rajbhandari et al. 2020,
§5, Figure 1), with the ``mixed`` policy and Adam (K = 12):

* baseline ``(2 + 2 + K)Ψ``; stage 1 ``4Ψ + KΨ/N_d``; stage 2
  ``2Ψ + (2 + K)Ψ/N_d``; stage 3 ``(2 + 2 + K)Ψ/N_d`` (no gathered unit: the
  paper leaves it out, as ``gathered_params = 0`` does here).

:func:`deepspeed_zero_estimate` reproduces ``estimate_zero2_model_states_mem_needs``
and ``estimate_zero3_model_states_mem_needs`` (``deepspeed/runtime/zero/
stage_1_and_2.py`` and ``stage3.py``, DeepSpeed commit edaa722, 2026-08) with
offload off: ZeRO-2 ``2Ψ + int(18Ψ/N)``, ZeRO-3 ``4·L + int(18Ψ/N)`` with
``L`` the parameters of the largest single module. Their ``18`` is
``2_grads_16bit + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit``:
the ``mixed-fp32-grads`` policy. :func:`deepspeed_gb` prints bytes as they do,
``bytes / 2**30`` labelled "GB" (GiB in fact).
"""

from __future__ import annotations

import sympy

from ..choices import DEFAULT_OPTIMIZER, DEFAULT_POLICY, ZERO_STAGE
from ..errors import CostgraphValueError
from ..engine.graph import ZERO
from ..engine.symbols import dim
from .data import Optimizer, Policy, optimizer as get_optimizer, policy as get_policy
from .states import assemble, sharding_degree, tensor_state_bytes

# The parameter count when none is given (the ZeRO paper's Ψ).
PSI = dim("Psi")


def bare_model_states(params: int | sympy.Expr = PSI, *, policy: str | Policy = DEFAULT_POLICY,
                      optimizer: str | Optimizer = DEFAULT_OPTIMIZER, zero: int = ZERO_STAGE.default,
                      dp: int | sympy.Expr | None = None, hsdp_group: int | sympy.Expr | None = None,
                      gathered_params: int | sympy.Expr = 0) -> dict[str, sympy.Expr]:
    """Bytes per device of the model states of ``params`` parameters.

    Parameters
    ----------
    params : int or SymPy expression
        Ψ, the parameter count (default the symbol :data:`PSI`).
    policy, optimizer, zero, dp, hsdp_group
        As :func:`costgraph.training.model_states`.
    gathered_params : int or SymPy expression
        Parameters of the unit kept gathered at stage 3 (default 0, as the
        ZeRO paper counts).

    Returns
    -------
    dict
        The keys of :func:`costgraph.training.model_states`, bytes.

    Raises
    ------
    CostgraphValueError
        What :func:`model_states` raises; an optimizer that needs the
        weights' shapes (Adafactor, Muon); a parameter count that is not a
        positive integer.

    Examples
    --------
    >>> bare_model_states(7_500_000_000, policy="mixed", zero=3, dp=64)["total"]
    1875000000
    """
    pol, opt = get_policy(policy), get_optimizer(optimizer)
    n = sharding_degree(zero, dp, hsdp_group)
    if not opt.elementwise:
        raise CostgraphValueError(f"optimizer {opt.name!r} needs the shapes of the weights, not a bare count",
                                  hint="use model_states on a model's graph")
    psi = _count(params, "params")
    gathered = _count(gathered_params, "gathered_params", zero_ok=True) * pol.weights
    states = tensor_state_bytes(opt, pol, (psi,))
    return assemble(psi * pol.weights, psi * pol.gradients, psi * pol.grad_copy, psi * pol.master, states,
                    zero=zero, n=n, gathered=gathered)


def deepspeed_zero_estimate(total_params: int | sympy.Expr, *, stage: int, gpus: int | sympy.Expr,
                            largest_layer_params: int | sympy.Expr = 0) -> sympy.Expr:
    """GPU bytes per device of DeepSpeed's ZeRO-2 or ZeRO-3 estimator, offload off.

    ``stage`` 2: ``2Ψ + ⌊18Ψ/N⌋`` (``estimate_zero2_model_states_mem_needs``,
    ``stage_1_and_2.py``); 3: ``4·L + ⌊18Ψ/N⌋``
    (``estimate_zero3_model_states_mem_needs``, ``stage3.py``), ``N`` =
    nodes × GPUs per node, ``L`` = ``largest_layer_params`` (the largest
    module's own parameters: :func:`costgraph.training.largest_module_params`).
    Their ``int()`` is the floor here. What they leave out, against
    ``model_states(policy="mixed-fp32-grads")``: at stage 3 the sharded 16-bit
    parameters ``2Ψ/N``; they count ``4·L`` where the gathered unit in flight
    is ``2·(one layer)``.
    """
    if stage not in (2, 3) or isinstance(stage, bool):
        raise CostgraphValueError(f"DeepSpeed's estimators cover ZeRO stages 2 and 3, not {stage!r}")
    psi = _count(total_params, "total_params")
    n = _count(gpus, "gpus")
    sharded = sympy.floor(18 * psi / n)   # int(18 * total_params / total_gpus)
    if stage == 2:
        return 2 * psi + sharded           # gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
    return 4 * _count(largest_layer_params, "largest_layer_params", zero_ok=True) + sharded


def deepspeed_gb(nbytes: int | sympy.Expr) -> str:
    """``nbytes`` as DeepSpeed's estimators print it: ``f"{gpu_mem/2**30:6.2f}GB"``
    (gibibytes labelled "GB")."""
    value = sympy.Integer(nbytes) if isinstance(nbytes, int) else nbytes
    if not getattr(value, "is_Integer", False):
        raise CostgraphValueError("deepspeed_gb needs a whole number of bytes", hint="evaluate the dimensions first")
    return f"{int(value) / 2**30:6.2f}GB"


def _count(value, what: str, zero_ok: bool = False) -> sympy.Expr:
    if isinstance(value, bool):
        raise CostgraphValueError(f"{what} must be a whole number, not {value!r}")
    if isinstance(value, int):
        value = sympy.Integer(value)
    if isinstance(value, float) and value.is_integer():
        raise CostgraphValueError(f"{what} must be an integer, not the float {value!r}",
                                  hint=f"write {int(value)} (floats are not exact)")
    if not isinstance(value, sympy.Expr) or value.is_integer is False or value.is_negative \
            or (value.is_zero and not zero_ok):
        raise CostgraphValueError(f"{what} must be a {'non-negative' if zero_ok else 'positive'} integer, not {value!r}")
    return value if value != 0 else ZERO
