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

With offload (issue 16 item 6; DeepSpeed @ 38327e07, the same two functions):
:func:`deepspeed_offload_estimate` gives every row — CPU bytes per node and GPU
bytes per GPU, optimizer offload, parameter offload, ``zero_init`` — with their
float rounding; :func:`deepspeed_table` prints their ``..._all_cold`` tables line
for line; :func:`deepspeed_document` is what ``costgraph train --deepspeed-table``
shows; :func:`bare_offload` splits a bare count's states between the device and
the host (:mod:`costgraph.training.offload`).
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


#: DeepSpeed's ``additional_buffer_factor`` default (its estimators' host-memory margin)
BUFFER_FACTOR = sympy.Rational(3, 2)


def deepspeed_offload_estimate(total_params, *, stage: int, largest_layer_params=0, gpus_per_node=1, nodes=1,
                               offload_optimizer: bool = True, offload_params: bool = False,
                               zero_init: bool = True, additional_buffer_factor=BUFFER_FACTOR) -> tuple:
    """``(cpu_bytes, gpu_bytes)`` of one row of DeepSpeed's ZeRO estimators, offload on or off.

    ``estimate_zero2_model_states_mem_needs`` (``stage`` 2; ``cpu_offload`` =
    ``offload_optimizer``) and ``estimate_zero3_model_states_mem_needs``
    (``stage`` 3; ``cpu_offload_params`` = ``offload_params``, which needs
    ``offload_optimizer`` there), DeepSpeed @ 38327e07,
    ``deepspeed/runtime/zero/stage_1_and_2.py`` and ``stage3.py``. ``G`` =
    ``nodes·gpus_per_node``, ``f`` = ``additional_buffer_factor``, ``LL`` =
    ``4·largest_layer_params``; GPU bytes per GPU, CPU bytes per node:

    * ZeRO 2, offload: GPU ``2P``, CPU ``P·max(4G, 16)·f``; none: GPU
      ``2P + int(18P/G)``, CPU ``4P·gpus_per_node·f``.
    * ZeRO 3, optimizer + parameters: GPU ``LL``; CPU ``18P/nodes·f``
      (``zero_init``), else ``P·max(4·gpus_per_node, 18/nodes)·f``. Optimizer
      only: GPU ``LL + int(2P/G)``; CPU with 16 for 18. None: GPU
      ``LL + int(18P/G)``; CPU ``4·largest_layer_params·gpus_per_node·f``
      (``zero_init``), else ``4P·gpus_per_node·f``.

    Rounding as theirs: with whole numbers (or floats) given, the arithmetic is
    DeepSpeed's own — Python floats in its order, ``int()`` at the end — so
    ``1/nodes`` of 3 nodes rounds as theirs does; with SymPy expressions, the exact
    value and ``floor``. Integers come back as SymPy Integers.

    Raises
    ------
    CostgraphValueError
        A stage other than 2 or 3; ``offload_params`` at stage 2 or without
        ``offload_optimizer``; a count that is not a positive whole number.
    """
    if isinstance(stage, bool) or stage not in (2, 3):
        raise CostgraphValueError(f"DeepSpeed's estimators cover ZeRO stages 2 and 3, not {stage!r}")
    if offload_params and (stage != 3 or not offload_optimizer):
        raise CostgraphValueError("DeepSpeed's estimators offload parameters only at ZeRO 3 with the optimizer "
                                  "offloaded too", hint="offload_optimizer=True, stage=3")
    args = [total_params, largest_layer_params, gpus_per_node, nodes]
    plain = lambda a: isinstance(a, (int, float)) and not isinstance(a, bool)
    numeric = all(plain(a) for a in args) and (plain(additional_buffer_factor)
                                               or additional_buffer_factor == BUFFER_FACTOR)
    for value, what, zero_ok in ((total_params, "total_params", False), (largest_layer_params,
                                 "largest_layer_params", True), (gpus_per_node, "gpus_per_node", False),
                                 (nodes, "nodes", False)):
        _count(int(value) if isinstance(value, float) and value.is_integer() else value, what, zero_ok)
    if numeric:   # DeepSpeed's own float arithmetic
        f = float(additional_buffer_factor)
        ops = (lambda a, b: a / b, int, max)
    else:
        args = [_count(a, "a count", zero_ok=True) for a in args]
        f = sympy.Rational(additional_buffer_factor) if not isinstance(additional_buffer_factor, sympy.Basic) \
            else additional_buffer_factor
        ops = (lambda a, b: sympy.Integer(a) / b if isinstance(a, int) else a / b, sympy.floor, sympy.Max)
    P, L, gpn, n = args
    rows = _zero2_row if stage == 2 else _zero3_row
    cpu, gpu = rows(P, L, gpn, n, offload_optimizer, offload_params, zero_init, f, *ops)
    return (sympy.Integer(cpu), sympy.Integer(gpu)) if numeric else (cpu, gpu)


def _zero2_row(P, L, gpn, nodes, cpu_offload, _params, _zero_init, f, div, trunc, mx):
    """``estimate_zero2_model_states_mem_needs``, line by line (DeepSpeed @ 38327e07)."""
    total_gpus = nodes * gpn
    if cpu_offload:
        gpu_mem = 2 * P
        cpu_mem = P * mx(4 * total_gpus, 16) * f
    else:
        gpu_mem = 2 * P + trunc(div(18 * P, total_gpus))
        cpu_mem = P * 4 * gpn * f
    return trunc(cpu_mem), trunc(gpu_mem)


def _zero3_row(P, L, gpn, nodes, cpu_offload, cpu_offload_params, zero_init, f, div, trunc, mx):
    """``estimate_zero3_model_states_mem_needs``, line by line (DeepSpeed @ 38327e07)."""
    total_gpus = nodes * gpn
    gpus_factor = div(1, nodes)
    largest_layer_memory = 4 * L
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            cpu_mem = P * 18 * gpus_factor * f if zero_init else P * mx(4 * gpn, 18 * gpus_factor) * f
        else:
            gpu_mem = largest_layer_memory + trunc(div(2 * P, total_gpus))
            cpu_mem = P * 16 * gpus_factor * f if zero_init else P * mx(4 * gpn, 16 * gpus_factor) * f
    else:
        gpu_mem = largest_layer_memory + trunc(div(18 * P, total_gpus))
        cpu_mem = L * 4 * gpn * f if zero_init else P * 4 * gpn * f
    return trunc(cpu_mem), trunc(gpu_mem)


#: the rows of DeepSpeed's ``..._all_cold`` tables, in their order: (offload_optimizer, offload_params, zero_init)
TABLE_ROWS = {2: ((True, False, True), (False, False, True)),
              3: ((True, True, True), (True, True, False), (True, False, True), (True, False, False),
                  (False, False, True), (False, False, False))}


def deepspeed_table(total_params, *, stage: int, largest_layer_params=0, gpus_per_node: int = 1, nodes: int = 1,
                    additional_buffer_factor=BUFFER_FACTOR, device: str = "cpu ") -> str:
    """The table ``estimate_zero2_model_states_mem_needs_all_cold`` (``stage`` 2) or
    ``estimate_zero3_model_states_mem_needs_all_cold`` (3) prints, line for line
    (DeepSpeed @ 38327e07): ``" {cpu/2**30:7.2f}GB | {gpu/2**30:6.2f}GB | options"``, CPU per
    node, GPU per GPU, in gibibytes labelled "GB". ``device``: how they print the CPU device,
    ``f'{OffloadDeviceEnum.cpu:4}'`` — ``"cpu "`` under Python 3.10 and before (their
    docs/code-docs/source/memory.rst shows it so); Python 3.11+ formats that enum member as
    ``"OffloadDeviceEnum.cpu"``. The ``..._all_live`` forms print the same table for a model's
    own counts (``total_params``: shared parameters once; ``largest_layer_params``:
    :func:`costgraph.training.largest_module_params`)."""
    if isinstance(stage, bool) or stage not in TABLE_ROWS:
        raise CostgraphValueError(f"DeepSpeed's estimators cover ZeRO stages 2 and 3, not {stage!r}")
    lines = ["Estimated memory needed for params, optim states and gradients for a:",
             f"HW: Setup with {nodes} {'nodes' if nodes > 1 else 'node'}, {gpus_per_node} "
             f"{'GPUs' if gpus_per_node > 1 else 'GPU'} per node.",
             f"SW: Model with {int(total_params / 1e6)}M total params"
             + (f", {int(largest_layer_params / 1e6)}M largest layer params." if stage == 3 else "."),
             "  per CPU  |  per GPU |   Options"]
    for opt, par, init in TABLE_ROWS.get(stage, ()):
        cpu, gpu = deepspeed_offload_estimate(total_params, stage=stage, largest_layer_params=largest_layer_params,
                                              gpus_per_node=gpus_per_node, nodes=nodes, offload_optimizer=opt,
                                              offload_params=par, zero_init=init,
                                              additional_buffer_factor=additional_buffer_factor)
        if stage == 2:
            options = f"offload_optimizer={device if opt else 'none'}"
        else:
            options = (f"offload_param={device if par else 'none'}, offload_optimizer={device if opt else 'none'}, "
                       f"zero_init={1 if init else 0}")
        lines.append(f" {int(cpu) / 2**30:7.2f}GB | {int(gpu) / 2**30:6.2f}GB | {options}")
    return "\n".join(lines)


def deepspeed_document(total_params: int, *, stage: int, gpus: int, gpus_per_node: int | None = None,
                       largest_layer_params: int = 0) -> dict:
    """DeepSpeed's estimator table for ``gpus`` GPUs, ``gpus_per_node`` a node (default: all on
    one node), as ``costgraph train --deepspeed-table`` shows it: ``nodes``, ``gpus_per_node``,
    ``total_params``, ``largest_layer_params``, ``rows`` (``offload_optimizer``, ``offload_param``,
    ``zero_init``, ``cpu_bytes`` per node, ``gpu_bytes`` per GPU) and ``table`` (the text
    :func:`deepspeed_table` prints).

    Raises
    ------
    CostgraphValueError
        ``gpus`` not a multiple of ``gpus_per_node``, a stage other than 2 or 3."""
    gpn = gpus if gpus_per_node is None else gpus_per_node
    if isinstance(gpn, bool) or not isinstance(gpn, int) or gpn <= 0 or gpus % gpn:
        raise CostgraphValueError(f"{gpus} GPUs do not fill nodes of {gpn} (--gpus-per-node)",
                                  hint="DeepSpeed's estimators take num_nodes × num_gpus_per_node GPUs")
    nodes = gpus // gpn
    table = deepspeed_table(total_params, stage=stage, largest_layer_params=largest_layer_params,
                            gpus_per_node=gpn, nodes=nodes)
    rows = []
    for opt, par, init in TABLE_ROWS[stage]:
        cpu, gpu = deepspeed_offload_estimate(total_params, stage=stage, largest_layer_params=largest_layer_params,
                                              gpus_per_node=gpn, nodes=nodes, offload_optimizer=opt,
                                              offload_params=par, zero_init=init)
        rows.append({"offload_optimizer": "cpu" if opt else "none", "offload_param": "cpu" if par else "none",
                     "zero_init": init, "cpu_bytes": int(cpu), "gpu_bytes": int(gpu)})
    return {"source": "DeepSpeed @ 38327e07, deepspeed/runtime/zero/"
                      + ("stage_1_and_2.py::estimate_zero2_model_states_mem_needs_all_cold" if stage == 2 else
                         "stage3.py::estimate_zero3_model_states_mem_needs_all_cold"),
            "stage": stage, "nodes": nodes, "gpus_per_node": gpn, "total_params": int(total_params),
            "largest_layer_params": int(largest_layer_params), "rows": rows, "table": table}


def bare_offload(params: int, layout) -> dict:
    """Device, host and NVMe bytes per device of ``params`` parameters (a bare count) under
    ``layout``'s offload settings (:func:`costgraph.training.offload.offload_memory`; no
    activations, no gathered unit), after :func:`bare_model_states`: ``weights``,
    ``gradients``, ``optimizer``, ``device`` (their sum), ``host``, ``nvme``."""
    from .offload import offload_memory

    L = layout.filled()
    st = bare_model_states(params, policy=L.policy, optimizer=L.optimizer, zero=L.zero, dp=L.d, hsdp_group=L.hsdp)
    moved = offload_memory({**st, "activations": sympy.Integer(0)}, L)
    out = {k: moved[k] for k in ("weights", "gradients", "optimizer")}
    out["device"] = out["weights"] + out["gradients"] + out["optimizer"]
    out["host"], out["nvme"] = moved["host"], moved["nvme"]
    return out
