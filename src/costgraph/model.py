"""The Python API: load a model, get its costs as SymPy expressions, evaluate them.

>>> import costgraph
>>> gpt = costgraph.load("gpt")
>>> layer = gpt.costs("layer")
>>> layer.flops_forward                       # doctest: +SKIP
24*b*h**2*s + 4*b*h*s**2
>>> gpt.costs("model").evaluate(config="gpt2")["params"]
124439808

:class:`Costs` (:mod:`costgraph.costs`) renders as LaTeX in Jupyter; :meth:`Model.values` and the
whole-size check are :mod:`costgraph.model_values`.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    import networkx

from . import arguments
from .choices import CAUSAL as _CAUSAL, CONVENTION, PRECISION, PROFILE
from .costs import Costs
from .engine.builder import PROFILES, Settings, build
from .engine.conventions import check_convention
from .engine.graph import CostGraph
from .engine.precision import Precision, precision as get_precision
from .engine.totals import breakdown, grouped_totals, resolve_scope
from .errors import CostgraphValueError
from .language.loader import load_program
from .model_values import DimensionValues
from .numbers.units import LABELS  # noqa: F401  (costgraph.model.LABELS, as before)
from .results import renderer

__all__ = ["Model", "Costs", "load", "loads"]


class Model(DimensionValues):
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
        (:func:`costgraph.export.graph.model_html`, through :mod:`costgraph.results`)."""
        return renderer().model_html(self)

    def graph_svg(self, scope: str = "model", **settings) -> str:
        """The operator graph of ``scope`` as SVG text (``costgraph graph --format svg``;
        :func:`costgraph.export.graph.render`). Raises ``CostgraphError`` without Graphviz's ``dot``."""
        return renderer().graph_svg(self, scope, **settings)

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
        return train(self, layout_argument(layout, settings), values=self._or_default(values), options=options)

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
        values = arguments.model_values(self, self._or_default(values))
        check(o)   # each option's check, declared on its field (costgraph.infer_options)
        prompt, generate, batch = (arguments.whole(arguments.token_count(x, f"--{n}"), f"--{n}")   # "1e12" or 1e12,
                                   for n, x in (("prompt", o.prompt), ("generate", o.generate), ("batch", o.batch)))
        arguments.whole_at_prompt(self, values, prompt, batch)   # as the CLI
        kw = {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
        kw.update(t=kw.pop("tp"), prompt=prompt, generate=generate, batch=batch, values=values,
                  reserve=o.reserve,   # read, with its own hint, by costgraph.inference.inputs.serving_reserve
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

        return plan_layouts(self, self._or_default(values), options, **overrides)

    def fit(self, values=None, options=None, layout=None, **overrides):
        """Does this model fit (``costgraph fit``; :func:`costgraph.fit`, which documents each argument)?
        ``options``: a :class:`costgraph.FitOptions` (``mode``, ``hardware``, ``gpus``, ...) or its
        fields as keywords; ``layout`` (training): a Layout, or its fields as keywords.
        Returns a :class:`costgraph.FitResult`; raises CostgraphValueError as :func:`costgraph.fit`."""
        from .verdict import fit

        return fit(self, values, options, layout, **overrides)


def load(model: str, *, dropout: bool = True, options: Mapping[str, object] | None = None,
         profile: str = PROFILE.default, config: str | None = None, input_grads: bool = False) -> Model:
    """Load and build a model by bundled name or path. See :class:`Model`.

    ``input_grads``: whether float inputs need gradients (False: PyTorch's default; see ``Settings``).

    ``profile`` names what operators keep for backward:
    :data:`costgraph.engine.builder.PROFILES` (``korthikanti`` or ``pytorch``).
    ``config``: a configuration of the file whose options (``bias = false``)
    the graph is built with (``options`` given here take precedence) and whose
    sizes are the model's values when none are given, as the command line's
    ``--config``: ``values()``, ``costs().evaluate()``, ``train``, ``infer``, ``plan``
    and ``fit`` without ``values`` use them (``load("gpt", config="gpt2").plan(gpus=8, ...)``).

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
    if not all(graph.options.get(k) == v for k, v in options.items()):
        settings = replace(settings, options=options)
        # the options the configuration chose count as given: values(config) accepts them
        graph = build(program, settings)
    # its sizes too, as the command line's --config: values(), costs().evaluate(), train, infer, plan and fit
    # use them when given none (a config.json's "hf" likewise: costgraph.sources)
    graph.default_config = config
    return Model(graph, settings, program)


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
