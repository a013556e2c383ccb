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
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Mapping

import sympy

if TYPE_CHECKING:
    import networkx

from . import arguments
from .choices import CAUSAL as _CAUSAL, CONVENTION, PRECISION, PROFILE
from .engine.builder import PROFILES, Settings, build
from .engine.conventions import check_convention
from .errors import CostgraphValueError, Location
from .numbers.evaluator import Compiled, ExactEvaluator, NotWhole
from .engine.graph import CostGraph
from .engine.sizes import named_difference
from .language.loader import load_program
from .engine.precision import Precision, precision as get_precision
from .export.printing import field_order, grouped, to_text
from .engine.totals import QUANTITIES, aggregate, breakdown, grouped_totals, resolve_scope
from .numbers.units import LABELS  # noqa: F401  (costgraph.model.LABELS, as before)


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

    def __init__(self, graph: CostGraph, settings: Settings, program=None):
        self.graph = graph
        self.settings = settings
        self._program = program          # the loaded program, to build again for inference
        self._inference = None
        self._size_list = None
        self._checkers: dict = {}

    @property
    def name(self) -> str:
        return self.graph.name

    def __repr__(self) -> str:
        g = self.graph
        opts = "".join(f", {k}={str(v).lower()}" for k, v in g.options.items())
        return (f"<costgraph.Model {g.name!r}: {len(g.ops())} operator nodes, symbols "
                f"{' '.join(self.symbols)}{opts}, profile={self.settings.profile}>")

    @property
    def nx(self) -> "networkx.MultiDiGraph":
        """The NetworkX graph (nodes by path; see :mod:`costgraph.engine.graph`)."""
        return self.graph.graph

    def _repr_html_(self) -> str:
        """Jupyter: a table (name, options, symbols, model-scope formulas) and the
        operator graph as inline SVG when Graphviz's ``dot`` is installed
        (:func:`costgraph.export.graph.model_html`)."""
        from .export.graph import model_html

        return model_html(self)

    def graph_svg(self, scope: str = "model", **settings) -> str:
        """The operator graph of ``scope`` as SVG text (``costgraph graph --format svg``;
        :func:`costgraph.export.graph.render`). Raises ``CostgraphError`` without Graphviz's ``dot``."""
        from .export.graph import render

        return render(self, "svg", scope, **settings)

    @property
    def symbols(self) -> dict[str, str]:
        """Free dimension symbols → meaning."""
        return self.graph.symbols()

    @property
    def configs(self) -> dict[str, dict[str, int]]:
        return self.graph.configs

    def costs(self, scope: str = "model", *, convention: str = CONVENTION.default,
              precision: str | Precision = PRECISION.default, causal: str = _CAUSAL.default) -> "Costs":
        """Closed-form costs of ``scope``: ``model``, ``layer``, or a group/block/node path.

        ``convention``: FLOP convention (``matmul`` or ``all``, see
        :mod:`costgraph.engine.conventions`); ``precision``: bytes per element
        (``bf16`` default: activations 2 bytes, masks 1, token ids 8);
        ``causal``: ``full`` (default) counts attention's whole ``s × s``
        square, ``half`` halves the products marked ``causal = true``.

        Raises
        ------
        CostgraphValueError
            Unknown scope, convention or precision.
        """
        arguments.costs_args(scope, convention, precision, causal, Precision)
        check_convention(convention)
        if causal not in _CAUSAL.values:
            raise CostgraphValueError(f"unknown causal convention {causal!r}", hint=_CAUSAL.hint())
        prec = get_precision(precision) if isinstance(precision, str) else precision
        sc = resolve_scope(self.graph, scope)
        leaves = breakdown(self.graph, sc, convention, prec, causal, leaves_only=True)
        sums, parts = grouped_totals(self.graph, sc, leaves)
        return Costs(self, sc.name, convention, prec, sums, leaves, causal, _scope=sc, _parts=parts)

    def train(self, layout=None, values=None, options=None, **overrides):
        """Training costs per device (``costgraph train``; :func:`costgraph.training.api.train`).

        ``layout``: a :class:`costgraph.parallel.layout.Layout`, or its fields as keywords
        (``t=8, sp=True, zero=1, recompute="selective", gpus=64``). ``values``: dimension values
        (``self.values("llama-2-7b")``) for numbers. ``options``: a :class:`costgraph.TrainOptions`
        (``hardware``, ``tokens``, ``mfu``, ``achieved``, ``peak``, ``price``, ``global_batch``,
        ``memory``, ``efficiency``, ``megatron``, ``scope``, ``convention``, ``causal``, ``router``,
        ``reserve``, ``rate_covers``, ``efficiency_profile``: the options of ``costgraph train``, each
        declared once with its flag, unit and check), or its fields as keywords in ``overrides``
        (numbers as ints, floats read by their decimal digits, or text such as ``"2e12"``).

        Returns a :class:`~costgraph.training.result.TrainingResult`: ``stages[i].memory[k]`` the
        bytes of ``weights``, ``gradients``, ``optimizer``, ``activations``, ``total`` per device
        (SymPy expressions in the model's dimensions), ``fits``, ``flops``, ``communication``
        (bytes; seconds with ``hardware``), ``step``, ``megatron``, ``warnings``;
        ``to_dict()`` is the JSON of ``costgraph train --format json``.

        Raises
        ------
        CostgraphValueError
            A keyword neither an option nor a Layout field (did-you-mean hinted), as
            :meth:`Layout.filled`, or as ``costgraph train`` for the options.
        """
        from .option_fields import resolve
        from .parallel.layout import Layout
        from .train_options import TrainOptions
        from .training.api import layout_argument, train

        options, settings = resolve(TrainOptions, options, overrides, "train", also=Layout.__dataclass_fields__)
        return train(self, layout_argument(layout, settings), values=values, options=options)

    def calibrate(self, runs, *, hardware, **options):
        """A calibration :class:`~costgraph.training.calibration.Profile` fitted to measured ``runs`` on
        ``hardware`` (``costgraph calibrate``; :func:`costgraph.training.calibration.calibrate`, its ``options``)."""
        from .training.calibration import calibrate

        return calibrate(self, runs, hardware, **options)

    def infer(self, values=None, options=None, **overrides):
        """Inference on a hardware preset (``costgraph infer``; :func:`costgraph.inference.infer`):
        prefill and decode FLOPs and bytes, KV cache, roofline latency, throughput and capacity.

        The model is built again as inference needs it (dropout off, the key axis of cached
        tensors split: :func:`costgraph.inference.load`), with this model's options and profile.
        ``values``: dimension values (``self.values("llama-2-7b")``; ``b`` and ``s`` are set by
        ``batch``, ``prompt`` and ``generate``). ``options``: a :class:`costgraph.InferOptions`
        (``prompt`` and ``generate`` required; ``hardware``, ``batch``, ``tp``, ``weights``, ``kv``,
        ``page``, ``reserve``, ``compute_efficiency``, ``bandwidth_efficiency`` (fractions: numbers, or
        text such as ``"0.1"``, read exactly), device figures, quantization scope, serving keywords
        (``draft`` a :class:`Model`; ``draft_mtp=True``: this model with ``options={"mtp": True}``),
        ``ep``, ``dp_attention``, ``pp``, ``tp_overlap``, ``runtime``: as :func:`costgraph.inference.infer`),
        or its fields as keywords in ``overrides``.

        Returns an :class:`~costgraph.inference.InferenceReport` (``quantities`` formulas,
        ``values`` numbers; ``to_dict()`` is the JSON of ``costgraph infer --format json``).

        Raises :class:`CostgraphValueError` as ``costgraph infer`` for the same inputs, for a keyword
        that is no option (did-you-mean hinted), and for a model that is not decoder-only."""
        import dataclasses

        from .infer_options import InferOptions
        from .inference.roofline import infer
        from .option_fields import check, resolve

        o = resolve(InferOptions, options, overrides, "infer")[0]
        values = arguments.model_values(self, values)
        check(o)   # each option's check, declared on its field (costgraph.infer_options)
        prompt, generate, batch = (arguments.whole(arguments.token_count(x, f"--{n}"), f"--{n}")   # "1e12" or 1e12,
                                   for n, x in (("prompt", o.prompt), ("generate", o.generate), ("batch", o.batch)))
        arguments.whole_at_prompt(self, values, prompt, batch)   # as the CLI
        kw = {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
        kw.update(t=kw.pop("tp"), prompt=prompt, generate=generate, batch=batch, values=values,
                  reserve=None if o.reserve is None else arguments.rational(o.reserve, "--reserve"),
                  compute_efficiency=arguments.rational(o.compute_efficiency, "--compute-efficiency"),
                  bandwidth_efficiency=arguments.rational(o.bandwidth_efficiency, "--bandwidth-efficiency"),
                  draft=o.draft._inference_model() if isinstance(o.draft, Model) else o.draft,
                  draft_values=arguments.model_values(o.draft, o.draft_values) if isinstance(o.draft, Model) else None)
        return infer(self._inference_model(), **kw)

    def _inference_model(self) -> "Model":
        """This model built for inference: dropout off, the key axis split (kept once built)."""
        if self._inference is None:
            from .errors import CostgraphSemanticError
            from .inference.phases import _wrap_build_error, split_keys

            if self._program is None:
                raise CostgraphValueError("this model was not loaded from a model file: it cannot be built for inference",
                                          hint="load it with costgraph.load(...) or costgraph.loads(...)")
            built = replace(self.settings, dropout=False, options=dict(self.settings.options))
            with split_keys():
                try:
                    self._inference = _build(self._program, built, None)
                except CostgraphSemanticError as e:
                    _wrap_build_error(e)
        return self._inference

    def plan(self, values=None, options=None, **overrides):
        """The parallel layouts that fit a device, fastest first (``costgraph plan``;
        :func:`costgraph.training.planning.plan_layouts`).

        ``values``: every dimension's value but ``b`` (``self.values("gpt2")``; the planner
        chooses the micro-batch). ``options``: a :class:`costgraph.PlanOptions` (``gpus``,
        ``hardware``, ``global_batch`` required; ``tokens``, ``efficiency``, ``memory``,
        ``precision``, ``optimizer``, ``attention``, ``overlap``, ``pipeline_layout``, ``allow_fp8``,
        ``allow_offload``, ``exhaustive``, ``top``, ``reserve``, ``efficiency_profile`` as the flags of
        ``costgraph plan``; ``command``: the ``costgraph train`` words naming the model in the
        result's ``check`` command), or its fields as keywords in ``overrides``.

        Returns a :class:`~costgraph.training.planning.PlanResult` (``layouts``, ``considered``,
        ``refused``; ``to_dict()`` is the JSON of ``costgraph plan --format json``).

        Raises
        ------
        CostgraphValueError
            A keyword that is no option (did-you-mean hinted); as ``costgraph plan`` for the same inputs.
        """
        from .training.planning import plan_layouts

        return plan_layouts(self, values, options, **overrides)

    def values(self, config: str | None = None, given: Mapping | None = None, /, **overrides) -> dict:
        """Dimension values (symbol → Integer): the dims' defaults, then ``config`` (unnamed: "hf" for a model
        from a config.json), then ``given`` (a mapping, name → value), then ``overrides`` (:func:`arguments.dims_given`).

        Raises
        ------
        CostgraphValueError
            Unknown configuration or dimension, a value that is not a positive
            whole number, or a shape that comes out fractional (``h/a`` with
            h = 768, a = 7).
        """
        config, overrides = arguments.dims_given(self.graph.dims, config, given, overrides)
        vals = self._int_values(config, overrides)
        return {self.graph.dims[k].symbol: sympy.Integer(v) for k, v in vals.items()}

    def _int_values(self, config, overrides) -> dict[str, int]:
        """:meth:`values` as plain ints by name (the fast path of :meth:`Costs.evaluate`)."""
        config = self.graph.default_config if config is None else config
        vals: dict[str, int] = {d.name: d.default for d in self.graph.dims.values()
                                if d.default is not None and d.derived is None}
        if config is not None:
            if config not in self.graph.configs:
                raise CostgraphValueError(
                    f"model '{self.name}' has no configuration '{config}'",
                    hint="its configurations: " + (", ".join(self.graph.configs) or "none"))
            for k, v in self.graph.configs[config].items():
                if isinstance(v, bool) and k not in self.settings.options and self.graph.options.get(k) != v:
                    raise CostgraphValueError(
                        f"configuration '{config}' sets option {k} = {str(v).lower()}, but this model was built "
                        f"with {k} = {str(self.graph.options.get(k)).lower()}",
                        hint=f"load the model with the configuration: costgraph.load(..., config={config!r}) "
                             f"(the command line's --config does), or with options={{{k!r}: {v}}}")
            vals.update({k: v for k, v in self.graph.configs[config].items() if k in self.graph.dims})
        for k, v in overrides.items():
            info = self.graph.dims.get(k)
            if info is None:
                if k in self.graph.options:
                    raise CostgraphValueError(f"'{k}' is an option of model '{self.name}', not a dimension",
                                              hint=f"set it to true or false: {k}=false")
                raise CostgraphValueError(f"model '{self.name}' has no dimension '{k}'",
                                          hint="its dimensions: " + ", ".join(self.symbols))
            if info.derived is not None:
                raise CostgraphValueError(f"'{k}' is derived ({info.derived}); set the dimensions it depends on")
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise CostgraphValueError(f"'{k}' must be a positive whole number, got {v!r}")
            vals[k] = v
        self._check_whole(vals)
        return vals

    def _sizes(self) -> list[tuple[sympy.Expr, str, Location | None, str]]:
        """Every size the graph uses, each distinct expression once (first use): ``(expr, what, location, path)``.
        Tensor dimensions, operators' dimension arguments, repeat/active counts, ``graph.limits`` (r ≤ h/a)."""
        if self._size_list is None:
            seen, out = set(), []
            def add(d, what, loc, path):
                if isinstance(d, sympy.Expr) and not d.is_Integer and d not in seen:
                    seen.add(d)
                    out.append((d, what, loc, path))
            for g in self.graph.groups.values():
                add(g.count, f"the repeat count of '{g.path}'", g.loc, g.path)
                add(g.active, f"the active count of '{g.path}'", g.loc, g.path)
            for path, d in self.graph.ops():
                for name, v in d["attrs"].items():
                    add(v, f"argument '{name}' of {d['kind']} '{path}'", d["loc"], path)
            for t in self.graph.tensors.values():
                producer = self.graph.nodes.get(t.producer)
                loc = producer["loc"] if producer else None
                for d in t.shape:
                    add(d, f"a dimension of tensor '{t.id}'", loc, t.producer)
            for limit in self.graph.limits:
                add(*limit)
            self._size_list = out
        return self._size_list

    def _size_checker(self, given: frozenset[str]):
        """A compiled check of the sizes whose symbols all have values in ``given``."""
        checker = self._checkers.get(given)
        if checker is None:
            names = sorted(given)
            syms = {self.graph.dims[n].symbol for n in names}
            sizes = [e for e, *_ in self._sizes() if e.free_symbols <= syms]
            pairs = [(g.count, g.active) for g in self.graph.groups.values()
                     if (g.count.free_symbols | g.active.free_symbols) <= syms]
            exprs = sizes + [n - k for n, k in pairs]
            ev = ExactEvaluator(exprs, [self.graph.dims[n].symbol for n in names]) if exprs else None
            checker = self._checkers[given] = (names, ev, len(sizes))
        return checker

    def _check_whole(self, vals: dict[str, int]) -> None:
        """Every size the graph uses must come out a positive whole number for
        these values, and a group's active copies cannot outnumber its copies
        (top-k ≤ experts). Compiled once per set of given names; the located
        message comes from :meth:`_explain_sizes`."""
        names, ev, n_sizes = self._size_checker(frozenset(vals))
        if ev is None:
            return
        try:
            out = ev([vals[n] for n in names])
            ok = all(v > 0 for v in out[:n_sizes]) and all(v >= 0 for v in out[n_sizes:])
        except (NotWhole, ZeroDivisionError):
            ok = False
        if not ok:
            self._explain_sizes({self.graph.dims[k].symbol: sympy.Integer(v) for k, v in vals.items()})

    def _explain_sizes(self, subs) -> None:
        """The slow path of :meth:`_check_whole`: the first size not a positive whole number, located."""
        def check(d, what, loc, path):
            if not isinstance(d, sympy.Expr) or not d.free_symbols <= set(subs):
                return None
            v = d.xreplace(subs)
            if not (v.is_integer and v > 0):
                calls = [f"{b.loc} ({b.path})" for b in (self.graph.blocks.get(a) for a in _prefixes(path)) if b]
                named = named_difference(self.graph.dims, d, subs) if v.is_number and v <= 0 else ("", "")
                raise CostgraphValueError(f"{what} is {named[0] or d} = {v} for these values, not a positive whole "
                                          f"number", loc, hint="; ".join(filter(None, [named[1], f"at {path}"]))
                                          + (f", called from {'; '.join(calls)}" if calls else "")
                                          + "; choose values that divide evenly and keep counts positive")
            return v
        for g in self.graph.groups.values():
            n = check(g.count, f"the repeat count of '{g.path}'", g.loc, g.path)
            k = check(g.active, f"the active count of '{g.path}'", g.loc, g.path)
            if n is not None and k is not None and k > n:
                raise CostgraphValueError(
                    f"'{g.path}' has {n} copies but {k} active ({g.active} > {g.count})", g.loc,
                    hint="a token can pass through at most all of them")
        for d, what, loc, path in self._sizes():
            check(d, what, loc, path)


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

    model: Model
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
        return Compiled(self.quantities, syms, dtype, defaults)

    def __repr__(self) -> str:
        return (f"<costgraph.Costs of {self.model.name!r} at scope {self.scope!r} "
                f"({self.convention}, {self.precision.name}, causal={self.causal}): "
                f"params = {to_text(self.ordered('params'))}>")

    def _repr_latex_(self) -> str:
        """Jupyter: the rows of ``costgraph derive --format latex`` (see :func:`costgraph.export.text_report.to_latex_doc`)."""
        from .export.text_report import to_latex_doc

        return "$" + to_latex_doc(self).replace("\n", " ") + "$"


def _exact_number(v: sympy.Expr):
    """A SymPy rational as ``int`` when whole, else ``fractions.Fraction``."""
    return int(v) if v.is_Integer else Fraction(int(v.p), int(v.q))


def _prefixes(path: str) -> list[str]:
    """``a/b/c`` → ``["a", "a/b"]``: the enclosing paths, outermost first."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def load(model: str, *, dropout: bool = True, options: Mapping[str, object] | None = None,
         profile: str = PROFILE.default, config: str | None = None, input_grads: bool = False) -> Model:
    """Load and build a model by bundled name or path. See :class:`Model`.

    ``input_grads``: whether float inputs need gradients (False: PyTorch's default; see ``Settings``).

    ``profile`` names what operators keep for backward:
    :data:`costgraph.engine.builder.PROFILES` (``korthikanti`` or ``pytorch``).
    ``config``: a configuration of the file whose options (``bias = false``)
    the graph is built with (``options`` given here take precedence); its
    dimensions are used by ``values(config)``.

    Raises
    ------
    CostgraphError
        Any mistake in the model file (located) or in the arguments.
    """
    if not isinstance(model, (str, os.PathLike)):
        raise CostgraphValueError(f"a model is named by a string or a path, not {type(model).__name__}")
    settings = _settings(dropout, options, profile, input_grads)
    return _build(load_program(os.fspath(model)), settings, config)


def _build(program, settings: Settings, config) -> Model:
    """Build ``program``; when ``config`` sets options, again with them (the
    configurations are read by the first build)."""
    config = arguments.optional_text(config, "config")
    graph = build(program, settings)
    if config is None or config not in graph.configs:   # an unknown name is reported by values()
        return Model(graph, settings, program)
    chosen = {k: v for k, v in graph.configs[config].items() if isinstance(v, bool)}
    options = {**chosen, **settings.options}
    if all(graph.options.get(k) == v for k, v in options.items()):
        return Model(graph, settings, program)
    built = replace(settings, options=options)
    # the options the configuration chose count as given: values(config) accepts them
    return Model(build(program, built), built, program)


def _settings(dropout, options, profile, input_grads=False) -> Settings:
    dropout, options, profile = arguments.flag(dropout, "dropout"), arguments.options(options), arguments.text(profile, "profile")
    if profile not in PROFILES:
        raise CostgraphValueError(f"unknown activation profile {profile!r}",
                                  hint="choose one of: " + ", ".join(PROFILES))
    return Settings(dropout, dict(options or {}), profile, arguments.flag(input_grads, "input_grads"))


def loads(text: str, *, path: str = "<string>", dropout: bool = True,
          options: Mapping[str, object] | None = None, profile: str = PROFILE.default,
          config: str | None = None, input_grads: bool = False) -> Model:
    """Like :func:`load`, from model-file text (imports resolve from ``path``'s folder)."""
    text, path = arguments.model_text(text), arguments.text(path, "path")
    settings = _settings(dropout, options, profile, input_grads)
    return _build(load_program(text=text, path=path), settings, config)
