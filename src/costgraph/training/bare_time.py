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
from ..export.display import Tabular
from .compute import PF_DAY, SECONDS_PER_DAY, rule_of_thumb_time

#: FLOPs per parameter per token of the rule: no recomputation, full recomputation.
FACTORS = {"none": 6, "full": 8}


@dataclass(frozen=True)
class BareTime(Tabular):
    """The rule of thumb's answer (module docstring); exact SymPy numbers.

    ``params`` N, ``tokens`` D, ``gpus`` n; ``factor`` 6 or 8 (``recompute``
    ``none`` or ``full``); ``rate`` X, FLOP/s per device (``peak · mfu`` or
    ``achieved``); ``hardware``: the preset the peak is from (None with
    ``peak`` given); ``flops`` = factor·N·D; ``seconds`` = flops / (n·X);
    ``cost`` with a price per GPU-hour."""

    params: int
    tokens: sympy.Expr
    gpus: int
    recompute: str
    factor: int
    peak: sympy.Expr | None
    mfu: sympy.Expr | None
    achieved: sympy.Expr | None
    hardware: str | None
    flops: sympy.Expr
    seconds: sympy.Expr
    price: sympy.Expr | None = None

    @property
    def rate(self) -> sympy.Expr:
        """FLOP/s per device the rule divides by."""
        return self.achieved if self.achieved is not None else self.peak * self.mfu

    @property
    def days(self) -> sympy.Expr:
        return self.seconds / SECONDS_PER_DAY

    @property
    def gpu_hours(self) -> sympy.Expr:
        return self.gpus * self.seconds / 3600

    def to_dict(self) -> dict:
        """JSON-ready: exact values as floats beside the formula's name."""
        out = {"rule": f"{self.factor}·N·D / (n·X)", "params": self.params, "tokens": float(self.tokens),
               "gpus": self.gpus, "recompute": self.recompute, "hardware": self.hardware,
               "peak_flops": None if self.peak is None else float(self.peak),
               "mfu": None if self.mfu is None else float(self.mfu),
               "achieved_flops": None if self.achieved is None else float(self.achieved),
               "flops": float(self.flops), "seconds": float(self.seconds), "days": float(self.days),
               "gpu_hours": float(self.gpu_hours), "pf_days": float(self.flops / PF_DAY)}
        if self.price is not None:
            out["cost"] = float(self.gpu_hours * self.price)
        return out

    def _table(self):
        """Jupyter (:class:`~costgraph.export.display.Tabular`): the rule's numbers."""
        from ..export.results_html import bare_time_table

        return bare_time_table(self)


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
            raise CostgraphValueError(f"{name} must be a positive whole number, got {v!r}")
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
    return BareTime(params, tokens, gpus, recompute, factor, peak, mfu, achieved, hw_name,
                    sympy.Integer(factor) * params * tokens, seconds, price)
