"""The closed-form costs of one scope of a model (:meth:`costgraph.Model.costs`): :class:`Costs`, its
quantities as SymPy expressions in the model's dimension symbols, its breakdown rows, exact
evaluation (:meth:`Costs.evaluate`) and vectorized evaluation (:meth:`Costs.compile`).
``costgraph.model.Costs`` and ``costgraph.Costs`` name it too."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Mapping

import sympy

from . import arguments
from .choices import CAUSAL as _CAUSAL
from .engine.precision import Precision
from .engine.totals import QUANTITIES, aggregate, grouped_totals
from .errors import CostgraphValueError
TYPE_CHECKING = False   # the evaluators are imported where a number is asked for (a cold derive prints formulas)
if TYPE_CHECKING:
    from .numbers.evaluator import Compiled
from .numbers.printing import field_order, grouped, to_text
from .results import renderer


@dataclass(repr=False)
class Costs:
    """The closed-form costs of one scope of a model.

    Attributes are SymPy expressions in the model's dimension symbols:
    ``params`` (count), ``flops_forward``, ``flops_backward`` (=
    ``flops_backward_input + flops_backward_weight``; FLOPs under
    ``convention``), ``activation_bytes`` (bytes under ``precision``).
    ``rows`` is the breakdown by node, shared storage, block and repeat
    group (:func:`costgraph.engine.totals.breakdown`); ``leaves`` only its node and
    storage rows.
    """

    model: object   # the costgraph.model.Model whose graph these are
    scope: str
    convention: str
    precision: Precision
    quantities: dict[str, sympy.Expr]
    leaves: list[dict]
    causal: str = _CAUSAL.default
    _scope: object = field(default=None, repr=False, compare=False)
    _compiled: object = field(default=None, repr=False, compare=False)
    _rows: list | None = field(default=None, repr=False, compare=False)
    _parts: dict | None = field(default=None, repr=False, compare=False)

    @property
    def rows(self) -> list[dict]:
        """The whole breakdown: leaf rows, then block and repeat rows (built on first use)."""
        if self._rows is None:
            self._rows = self.leaves + aggregate(self.model.graph, self._scope, self.leaves)
        return self._rows

    def __getitem__(self, q: str) -> sympy.Expr:
        return self.quantities[q]

    def __getattr__(self, q: str):
        if q in QUANTITIES:
            return self.quantities[q]
        raise AttributeError(q)

    def ordered(self, q: str) -> sympy.Expr:
        """Quantity ``q`` as an unevaluated sum in the field's order (for printing)."""
        return field_order(self.quantities[q], expanded=True)

    def grouped(self, q: str) -> sympy.Expr:
        """At model scope: ``l (per-layer) + rest`` for each top-level repeat group."""
        if self._parts is None:
            self._parts = grouped_totals(self.model.graph, self._scope, self.leaves)[1]
        parts, rest = self._parts[q]
        return grouped(parts, rest)

    def evaluate(self, config: str | None = None, given: Mapping | None = None, /, **values: int) -> dict[str, int]:
        """Exact integer values of every quantity for a configuration and values (as :meth:`Model.values`;
        unnamed, a model loaded from a config.json or a Hub id takes that config's values, configuration "hf").

        One exception: a per-layer view of a model with a layer pattern (``--scope layer`` or a repeat group's
        path) is the *average* layer — ``floor(l/6)/l`` of a global one in Gemma 3 — and its values are exact
        ``fractions.Fraction`` where they are not whole (Gemma-3-1B's 26 layers: 4 global, 22 local).

        Raises
        ------
        CostgraphValueError
            If a symbol has no value (the message lists them), or see :meth:`Model.values`.
        """
        from .numbers.evaluator import NotWhole

        config, values = arguments.dims_given(self.model.graph.dims, config, given, values)
        vals = self.model._int_values(config, values)
        names, ev = self._exact()
        missing = [n for n in names if n not in vals]
        if missing:
            raise CostgraphValueError(f"no value for {', '.join(missing)}",
                                      hint=arguments.missing_values_hint(self.model.graph.configs))
        try:
            return dict(zip(self.quantities, ev([vals[n] for n in names])))
        except NotWhole as e:   # every size checked whole: only an average layer can be fractional
            if self.averaged:
                subs = {x: sympy.Integer(vals[str(x)]) for x in
                        set().union(*(q.free_symbols for q in self.quantities.values()))}
                return {q: _exact_number(e.xreplace(subs)) for q, e in self.quantities.items()}
            q = list(self.quantities)[e.index]
            raise CostgraphValueError(f"{q} is {e.value} for these values, not a whole number") from None

    @property
    def averaged(self) -> bool:
        """True for a per-layer view of a model with a layer pattern: the layer scope or a
        repeat group's scope when some node's count holds a ``floor`` (the copies of a
        pattern branch), so the view is the average of the layer kinds."""
        g = self.model.graph
        if self.scope != "layer" and self.scope not in g.groups:
            return False
        return any(d["count"].has(sympy.floor) for _, d in g.ops())

    def _exact(self):
        """The quantities compiled for exact evaluation (once per Costs)."""
        if self._compiled is None:
            from .numbers.evaluator import ExactEvaluator

            syms = sorted(set().union(*(e.free_symbols for e in self.quantities.values())), key=str)
            self._compiled = ([str(x) for x in syms], ExactEvaluator(list(self.quantities.values()), syms))
        return self._compiled

    def compile(self, config=None, given: Mapping | None = None, /, *, dtype="float64", **fixed) -> "Compiled":
        """A vectorized evaluator of every quantity (NumPy; install ``numpy``).

        The returned function takes every symbol of the quantities by keyword, as NumPy arrays (broadcast
        together) or numbers, and returns ``{quantity: array}``; ``config`` (unnamed: a config.json's values)
        and ``fixed`` (``h=8192``) give defaults for the symbols a call leaves out::

            f = costs.compile("llama-2-70b", dtype="int64")
            f(b=np.arange(1, 65)[:, None], s=np.array([2048, 4096, 8192]))

        ``dtype``: ``float64`` (fast, rounded to 53 bits), ``int64`` (exact;
        raises :class:`CostgraphValueError` when some intermediate could pass
        2⁶³ − 1 instead of wrapping around silently) or ``exact`` (Python
        integers in object arrays; slow, never overflows). Sizes are not
        checked per point (``h/a`` whole): :meth:`evaluate` checks them.

        Raises
        ------
        CostgraphValueError
            Unknown dtype, or as :meth:`Model.values` for ``config``/``fixed``.
        """
        config, fixed = arguments.dims_given(self.model.graph.dims, config, given, fixed)
        if dtype not in ("float64", "int64", "exact"):
            raise CostgraphValueError(f"unknown dtype {dtype!r} for compile", hint="float64, int64 or exact")
        vals = self.model._int_values(config, fixed) if (config or fixed or self.model.graph.default_config) else {}
        syms = sorted(set().union(*(e.free_symbols for e in self.quantities.values())), key=str)
        defaults = {str(x): vals[str(x)] for x in syms if str(x) in vals}
        from .numbers.evaluator import Compiled

        return Compiled(self.quantities, syms, dtype, defaults)

    def __repr__(self) -> str:
        return (f"<costgraph.Costs of {self.model.name!r} at scope {self.scope!r} "
                f"({self.convention}, {self.precision.name}, causal={self.causal}): "
                f"params = {to_text(self.ordered('params'))}>")

    def _repr_latex_(self) -> str:
        """Jupyter: the rows of ``costgraph derive --format latex`` (see :func:`costgraph.export.text_report.to_latex_doc`)."""
        return "$" + renderer().latex_doc(self).replace("\n", " ") + "$"


def _exact_number(v: sympy.Expr):
    """A SymPy rational as ``int`` when whole, else ``fractions.Fraction``."""
    return int(v) if v.is_Integer else Fraction(int(v.p), int(v.q))
