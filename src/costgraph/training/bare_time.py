"""Training time from a bare parameter count: the seeds' rule of thumb, no model.

``time = c · N · D / (n · X)`` seconds, with ``c = 6`` (forward + backward,
Kaplan et al. 2020's ``C ≈ 6ND``) or ``c = 8`` with full recomputation (one
more forward: Narayanan et al. 2021 §5.1, the seeds' ``8TP/(nX)``); ``N``
parameters, ``D`` tokens, ``n`` devices and ``X`` FLOP/s per device: the peak
times an assumed utilization (``mfu``), or achieved FLOP/s given directly.
The rule counts no attention-score FLOPs and, for a mixture of experts, ``N``
must be the *active* parameters (give a model to have them counted). This is
what ``costgraph train --params N --tokens D --gpus n --hardware X --mfu u``
prints (:mod:`costgraph.commands._bare`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ..errors import CostgraphValueError
from ..result_fields import json_fields, quantity
from ..results import Tabular
from .compute import PF_DAY, SECONDS_PER_DAY, rule_of_thumb_time

#: FLOPs per parameter per token of the rule: no recomputation, full recomputation.
FACTORS = {"none": 6, "full": 8}


@dataclass(frozen=True)
class BareTime(Tabular):
    """The rule of thumb's answer (module docstring); exact SymPy numbers. Each field is a
    :func:`~costgraph.results.quantity` with its unit and JSON name: :meth:`to_dict` and the table
    (``print``, Jupyter, ``to_pandas()``) are read from them.

    ``params`` N, ``tokens`` D, ``gpus`` n; ``recompute`` ``none`` or ``full`` (``factor`` 6 or 8);
    ``hardware``: the preset the peak is from (None with ``peak`` given); ``peak``, ``achieved``:
    FLOP/s per device, ``mfu`` a fraction of the peak; ``flops`` = factor·N·D; ``seconds`` =
    flops / (n·X); ``price`` per GPU-hour. Derived: ``rate`` X (``peak · mfu`` or ``achieved``),
    ``days``, ``gpu_hours``, ``pf_days`` (model FLOPs / 8.64·10¹⁹), ``cost`` (None without a price)."""

    params: int = quantity(label="parameters N")
    tokens: sympy.Expr = quantity("tokens", label="tokens D")
    gpus: int = quantity(label="devices n")
    recompute: str = quantity(label="recompute")
    hardware: str | None = quantity(label="hardware")
    peak: sympy.Expr | None = quantity("FLOP/s", label="peak per device", json="peak_flops")
    mfu: sympy.Expr | None = quantity(label="MFU")
    achieved: sympy.Expr | None = quantity("FLOP/s", label="achieved per device", json="achieved_flops")
    flops: sympy.Expr = quantity("FLOP", label="model FLOPs")
    seconds: sympy.Expr = quantity("s", label="time")
    factor: int = quantity(label="FLOPs per parameter per token", json=None)
    price: sympy.Expr | None = quantity(label="price per GPU-hour", json=None, default=None)
    rate: sympy.Expr = quantity("FLOP/s", label="rate per device", json=None, init=False)
    days: sympy.Expr = quantity("days", label="days", init=False)
    gpu_hours: sympy.Expr = quantity("GPU-hours", label="GPU-hours", init=False)
    pf_days: sympy.Expr = quantity("PF-days", label="PF-days", init=False)
    cost: sympy.Expr | None = quantity(label="cost (price × GPU-hours)", omit_none=True, init=False)

    def __post_init__(self):
        rate = self.achieved if self.achieved is not None else self.peak * self.mfu
        gpu_hours = self.gpus * self.seconds / 3600
        for name, v in (("rate", rate), ("days", self.seconds / SECONDS_PER_DAY), ("gpu_hours", gpu_hours),
                        ("pf_days", self.flops / PF_DAY),
                        ("cost", None if self.price is None else gpu_hours * self.price)):
            object.__setattr__(self, name, v)   # frozen: derived once

    @property
    def title(self) -> str:
        """The table's title: the rule and the recompute setting."""
        return f"training time by the rule {self.factor}·N·D / (n·X) (recompute {self.recompute})"

    def to_dict(self) -> dict:
        """JSON-ready: the rule, then each quantity field by its JSON name (exact values as floats,
        counts as ints)."""
        return {"rule": f"{self.factor}·N·D / (n·X)", **json_fields(self, _float)}


def _float(v, q) -> int | float:
    """A count (a Python int without a unit: N, n) as it is, any other number as a float."""
    return v if type(v) is int and not q.unit else float(v)


def bare_training_time(params: int, *, tokens, gpus: int, hardware=None, peak=None, mfu=None, achieved=None,
                       recompute: str = "none", price=None) -> BareTime:
    """Training time of ``params`` parameters on ``tokens`` tokens over ``gpus``
    devices by the rule ``6ND/(nX)`` (``8ND/(nX)`` with ``recompute="full"``).

    ``hardware`` (a preset name or :class:`~costgraph.hardware.Hardware`) gives
    the dense BF16 peak unless ``peak`` (FLOP/s per device) is given; ``mfu`` a
    fraction in (0, 1] of it, or ``achieved`` FLOP/s per device instead; ``price``
    per GPU-hour. Numbers may be ints, exact strings (``"0.45"``) or SymPy
    rationals; the result is exact.

    Raises
    ------
    CostgraphValueError
        A count that is not a positive whole number; ``recompute`` other than
        ``none``/``full`` (selective recomputation has no rule of thumb: give a
        model); no rate (``mfu`` with a peak, or ``achieved``); the checks of
        ``costgraph train`` on the rates.
    """
    from ..hardware import preset
    from .api import _rates

    if recompute not in FACTORS:
        raise CostgraphValueError(f"the rule of thumb knows recompute none (6ND) or full (8ND), not {recompute!r}",
                                  hint="give a model for selective recomputation")
    for name, v in (("--params", params), ("--gpus", gpus)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise CostgraphValueError(f"{name} must be a positive whole number, got {v!r}",
                                      hint=f"a whole number above 0, e.g. {name} {'7e9' if name == '--params' else '8'}")
    if tokens is None:
        raise CostgraphValueError("the training time needs --tokens D", hint="e.g. --tokens 300e9")
    hw = preset(hardware) if hardware is not None else None
    peak, mfu, achieved, tokens, price = _rates(hw, peak, mfu, achieved, tokens, price)
    if mfu is None and achieved is None:
        raise CostgraphValueError("the training time needs a rate: --mfu (with --hardware or --peak) or --achieved")
    factor = FACTORS[recompute]
    rate = achieved if achieved is not None else peak * mfu
    seconds = rule_of_thumb_time(params, tokens, gpus, rate, recompute=recompute == "full")
    hw_name = hw.key if hw is not None and peak == hw.peak_flops_bf16 else None
    return BareTime(params=params, tokens=tokens, gpus=gpus, recompute=recompute, hardware=hw_name, peak=peak,
                    mfu=mfu, achieved=achieved, flops=sympy.Integer(factor) * params * tokens, seconds=seconds,
                    factor=factor, price=price)
