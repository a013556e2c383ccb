"""The planner's exact figures from its own closed forms: the confirmation without a new derivation.

The screen's forms (:class:`~costgraph.training.plan_forms.Forms`) are train's closed forms —
:func:`~costgraph.training.memory.training_memory` and :func:`~costgraph.training.steptime.step_time`
derived with the degrees ``t, p, c, e, d``, the micro-batches ``m``, the virtual stages ``v`` (and
``b``) as symbols. Evaluated exactly (SymPy rationals, :func:`costgraph.numbers.substitute.exact_value`,
not float64) at a row's numbers they give the number train's derivation at those numbers gives —
where the two derivations take the same code paths. Two kinds of row do not:

* an uneven pipeline split (Megatron's ``--decoder-first/last-pipeline-num-layers``, the embedding or
  the loss counted as a layer, a chunk layout text): the forms are the even split's
  (:mod:`costgraph.training.plan_forms`), so such a row is always derived exactly (:func:`eligible`);
* a code path that reads a number (a pipeline of ``p`` stages built stage by stage, DualPipe's
  pairs of stages): the rows of one :func:`structure` share those paths, so the first row of each structure is derived exactly by train's path
  (:func:`costgraph.training.plan_confirm.exact_figures`) and compared with its forms' exact figures;
  only when they are equal do the structure's other rows take the forms' figures
  (:class:`Checked`); else every row of it is derived.

So a listed row's figures are always train's (tests/training/test_plan_equals_train.py), and the
confirmation of ``--top 100`` costs one derivation per structure shown, not one per row
(issue 27 item 6).
"""

from __future__ import annotations

import sympy

from ..numbers.substitute import exact_value
from .plan_forms import at_zero
from .steptime import combine


def eligible(c) -> bool:
    """Whether candidate ``c``'s screen forms are its own: an even pipeline split, no chunk layout text,
    and its forms known (``c.screen``)."""
    return (c.screen is not None and c.first_stage_layers is None and c.last_stage_layers is None
            and not c.account_embedding and not c.account_loss and not (c.options or {}).get("pipeline_layout"))


def structure(c) -> tuple:
    """What fixes the code paths train's derivation takes for candidate ``c`` where they read a number:
    the pipeline (``p``, ``v``, schedule) and the forms it was screened with (its variant fields)."""
    return id(c.screen[0]), c.pp, c.virtual_stages, c.schedule


def form_figures(c) -> tuple[int, sympy.Expr]:
    """``(bytes of the most-loaded device, step seconds)`` of candidate ``c`` from its screen forms
    (``c.screen = (forms, pipe index)``), exact: the largest stage's states plus activations rounded up
    (as :func:`costgraph.training.plan_confirm.exact_memory`), the step's parts combined by
    :func:`~costgraph.training.steptime.combine` with Python's ``max`` (as
    :func:`~costgraph.training.plan_confirm.exact_figures`)."""
    forms, w = c.screen
    numbers = (c.tp, c.pp, c.cp, c.ep, c.dp, c.micro_batches, c.virtual_stages, c.micro_batch)
    at = {s: sympy.Integer(n) for s, n in zip(forms.args, numbers)}   # the forms' stand-ins of the degrees
    memo: dict = {}

    def value(i):
        return exact_value(forms.exprs[i], at, memo)
    z, r, sp = c.zero, c.recompute, c.sp
    memory = max(value(s) + value(a) for s, a in zip(forms.states[z][w], forms.acts[(r, sp)][w]))
    parts = at_zero(forms.parts[(r, sp)][w], forms.overlapped[z][w])
    step = combine({k: v.mapped(value) if hasattr(v, "mapped") else value(v) for k, v in parts.items()},
                   "compute", max)
    return int(sympy.ceiling(memory)), step


class Checked:
    """The structures (:func:`structure`) whose first row's forms gave train's exact figures
    (``True``) or did not (``False``), for one confirmation."""

    def __init__(self):
        self.agrees: dict = {}

    def figures(self, c, derive) -> tuple[int, sympy.Expr]:
        """Candidate ``c``'s exact figures: its forms' (:func:`form_figures`) when its structure's first
        row agreed with train's derivation, else ``derive()`` (train's path; for the first row of a
        structure, compared with the forms'): ``(memory, step)``, or ``(memory, None)`` over the capacity."""
        if not eligible(c):
            return derive()
        key = structure(c)
        if self.agrees.get(key):
            return form_figures(c)
        exact = derive()
        if key not in self.agrees and exact[1] is not None:   # (memory, None): over the capacity, no step derived
            self.agrees[key] = form_figures(c) == exact
        return exact
