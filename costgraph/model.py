"""The Python API: load a model, get its costs as SymPy expressions, evaluate them.

>>> import costgraph
>>> gpt = costgraph.load("gpt")
>>> layer = gpt.costs("layer")
>>> layer.flops_forward                       # doctest: +SKIP
24*b*h**2*s + 4*b*h*s**2
>>> gpt.costs("model").evaluate(config="gpt2")["params"]
124439808

:class:`Costs` renders as LaTeX in Jupyter.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import sympy

if TYPE_CHECKING:
    import networkx

from .builder import PROFILES, Settings, build
from .conventions import check_convention
from .errors import CostgraphValueError
from .graph import CostGraph
from .loader import load_program
from .precision import Precision, precision as get_precision
from .printing import field_order, grouped, to_latex
from .totals import CAUSAL, QUANTITIES, breakdown, resolve_scope, totals

LABELS = {
    "params": "parameters",
    "params_active": "active parameters",
    "flops_forward": "forward FLOPs",
    "flops_backward": "backward FLOPs",
    "flops_backward_input": "  of which input gradients",
    "flops_backward_weight": "  of which weight gradients",
    "activation_bytes": "activation bytes",
    "kv_cache_bytes": "KV cache bytes",
    "kv_cache_bytes_per_token": "  per token",
}


class Model:
    """A model file built into its operator graph.

    Parameters (of :func:`load`)
    ----------
    model : str
        A bundled name (``"gpt"``) or a path to a ``.cg`` file.
    dropout : bool
        Train with dropout (default). Without, dropout nodes and masks vanish.
    options : mapping
        Values for the model's ``option`` switches, e.g. ``{"bias": False}``.
    """

    def __init__(self, graph: CostGraph, settings: Settings):
        self.graph = graph
        self.settings = settings

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def nx(self) -> "networkx.MultiDiGraph":
        """The NetworkX graph (nodes by path; see :mod:`costgraph.graph`)."""
        return self.graph.graph

    @property
    def symbols(self) -> dict[str, str]:
        """Free dimension symbols → meaning."""
        return self.graph.symbols()

    @property
    def configs(self) -> dict[str, dict[str, int]]:
        return self.graph.configs

    def costs(self, scope: str = "model", *, convention: str = "matmul",
              precision: str | Precision = "bf16", causal: str = "full") -> "Costs":
        """Closed-form costs of ``scope``: ``model``, ``layer``, or a group/block/node path.

        ``convention``: FLOP convention (``matmul`` or ``all``, see
        :mod:`costgraph.conventions`); ``precision``: bytes per element
        (``bf16`` default: activations 2 bytes, masks 1, token ids 8);
        ``causal``: ``full`` (default) counts attention's whole ``s × s``
        square, ``half`` halves the products marked ``causal = true``.

        Raises
        ------
        CostgraphValueError
            Unknown scope, convention or precision.
        """
        check_convention(convention)
        if causal not in CAUSAL:
            raise CostgraphValueError(f"unknown causal convention {causal!r}", hint="full or half")
        prec = get_precision(precision) if isinstance(precision, str) else precision
        sc = resolve_scope(self.graph, scope)
        rows = breakdown(self.graph, sc, convention, prec, causal)
        return Costs(self, sc.name, convention, prec, totals(self.graph, sc, convention, prec, causal),
                     rows, causal)

    def values(self, config: str | None = None, **overrides) -> dict[sympy.Symbol, int]:
        """Dimension values: the dims' defaults, then ``config``, then ``overrides``.

        Raises
        ------
        CostgraphValueError
            Unknown configuration or dimension, a value that is not a positive
            whole number, or a shape that comes out fractional (``h/a`` with
            h = 768, a = 7).
        """
        vals: dict[str, int] = {d.name: d.default for d in self.graph.dims.values()
                                if d.default is not None and d.derived is None}
        if config is not None:
            if config not in self.graph.configs:
                raise CostgraphValueError(
                    f"model '{self.name}' has no configuration '{config}'",
                    hint="its configurations: " + (", ".join(self.graph.configs) or "none"))
            vals.update({k: v for k, v in self.graph.configs[config].items() if k in self.graph.dims})
        for k, v in overrides.items():
            info = self.graph.dims.get(k)
            if info is None:
                raise CostgraphValueError(f"model '{self.name}' has no dimension '{k}'",
                                          hint="its dimensions: " + ", ".join(self.symbols))
            if info.derived is not None:
                raise CostgraphValueError(f"'{k}' is derived ({info.derived}); set the dimensions it depends on")
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise CostgraphValueError(f"'{k}' must be a positive whole number, got {v!r}")
            vals[k] = v
        subs = {self.graph.dims[k].symbol: sympy.Integer(v) for k, v in vals.items()}
        self._check_whole(subs)
        return subs

    def _check_whole(self, subs):
        """Every size the graph uses must come out a positive whole number for
        these values: tensor dimensions, dimension arguments of operators
        (heads, K/V groups, rotary entries) and repeat counts; and a group's
        active copies cannot outnumber its copies (top-k ≤ experts)."""
        def check(d, what, where):
            if not isinstance(d, sympy.Expr) or not d.free_symbols <= set(subs):
                return None
            v = d.subs(subs)
            if not (v.is_integer and v > 0):
                raise CostgraphValueError(
                    f"{what} is {d} = {v} for these values, not a positive whole number",
                    hint=f"at {where}; choose values that divide evenly and keep counts positive")
            return v
        for g in self.graph.groups.values():
            n = check(g.count, f"the repeat count of '{g.path}'", g.loc)
            k = check(g.active, f"the active count of '{g.path}'", g.loc)
            if n is not None and k is not None and k > n:
                raise CostgraphValueError(
                    f"'{g.path}' has {n} copies but {k} active ({g.active} > {g.count})",
                    hint=f"at {g.loc}; a token can pass through at most all of them")
        for path, d in self.graph.ops():
            for name, v in d["attrs"].items():
                check(v, f"argument '{name}' of {d['kind']} '{path}'", d["loc"])
        for t in self.graph.tensors.values():
            for d in t.shape:
                check(d, f"a dimension of tensor '{t.id}'", t.producer)


@dataclass
class Costs:
    """The closed-form costs of one scope of a model.

    Attributes are SymPy expressions in the model's dimension symbols:
    ``params`` (count), ``flops_forward``, ``flops_backward`` (=
    ``flops_backward_input + flops_backward_weight``; FLOPs under
    ``convention``), ``activation_bytes`` (bytes under ``precision``).
    ``rows`` is the breakdown by node, block and repeat group.
    """

    model: Model
    scope: str
    convention: str
    precision: Precision
    quantities: dict[str, sympy.Expr]
    rows: list[dict]
    causal: str = "full"

    def __getitem__(self, q: str) -> sympy.Expr:
        return self.quantities[q]

    def __getattr__(self, q: str):
        if q in QUANTITIES:
            return self.quantities[q]
        raise AttributeError(q)

    def ordered(self, q: str) -> sympy.Expr:
        """Quantity ``q`` as an unevaluated sum in the field's order (for printing)."""
        return field_order(self.quantities[q])

    def grouped(self, q: str) -> sympy.Expr:
        """At model scope: ``l (per-layer) + rest`` for each top-level repeat group."""
        parts, inside = [], sympy.Integer(0)
        for r in self.rows:
            if r["kind"] == "block" and r["block"] == "repeat" and "/" not in r["path"]:
                parts.append((r["count"], r[q]))
                inside += r["count"] * r[q]
        return grouped(parts, sympy.expand(self.quantities[q] - inside))

    def evaluate(self, config: str | None = None, **values: int) -> dict[str, int]:
        """Exact integer values of every quantity for a configuration.

        Raises
        ------
        CostgraphValueError
            If a symbol has no value (the message lists them), or see
            :meth:`Model.values`.
        """
        subs = self.model.values(config, **values)
        out = {}
        for q, e in self.quantities.items():
            missing = sorted(str(s) for s in e.free_symbols if s not in subs)
            if missing:
                raise CostgraphValueError(f"no value for {', '.join(missing)}",
                                          hint="give them with --set NAME=VALUE or a configuration")
            v = e.subs(subs)
            if not v.is_integer:   # every size checked whole: cannot happen for model totals
                raise CostgraphValueError(f"{q} is {v} for these values, not a whole number")
            out[q] = int(v)
        return out

    def _repr_latex_(self) -> str:
        rows = " \\\\ ".join(f"\\text{{{LABELS[q].strip()}}} &= {to_latex(self.ordered(q))}"
                             for q in ("params", "flops_forward", "flops_backward", "activation_bytes"))
        return f"$\\begin{{aligned}} {rows} \\end{{aligned}}$"


def load(model: str, *, dropout: bool = True, options: Mapping[str, object] | None = None,
         profile: str = "korthikanti") -> Model:
    """Load and build a model by bundled name or path. See :class:`Model`.

    ``profile`` names what operators keep for backward:
    :data:`costgraph.builder.PROFILES` (``korthikanti`` or ``pytorch``).

    Raises
    ------
    CostgraphError
        Any mistake in the model file (located) or in the arguments.
    """
    if not isinstance(model, (str, os.PathLike)):
        raise CostgraphValueError(f"a model is named by a string or a path, not {type(model).__name__}")
    settings = _settings(dropout, options, profile)
    return Model(build(load_program(os.fspath(model)), settings), settings)


def _settings(dropout, options, profile) -> Settings:
    if profile not in PROFILES:
        raise CostgraphValueError(f"unknown activation profile {profile!r}",
                                  hint="choose one of: " + ", ".join(PROFILES))
    return Settings(dropout=dropout, options=dict(options or {}), profile=profile)


def loads(text: str, *, path: str = "<string>", dropout: bool = True,
          options: Mapping[str, object] | None = None, profile: str = "korthikanti") -> Model:
    """Like :func:`load`, from model-file text (imports resolve from ``path``'s folder)."""
    settings = _settings(dropout, options, profile)
    return Model(build(load_program(text=text, path=path), settings), settings)
