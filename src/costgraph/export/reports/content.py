"""What a report says, independent of its format (TeX, HTML, Markdown).

:func:`build` gathers, from the engine only:

* the **conventions** the numbers depend on (FLOP convention, causal
  counting, bytes per element of the precision, activation profile, dropout,
  options, decimal GB = 10⁹ bytes vs binary GiB = 2³⁰ bytes);
* the **symbol legend** (:attr:`costgraph.model.Model.symbols`: each
  dimension's meaning, and its value when one is given);
* **totals per scope**: the model (the grouped form ``l (…) + …`` that
  ``costgraph derive`` prints) and one iteration of each top-level repeat group
  (``layer`` where the model has one group), each quantity a formula and,
  with every symbol given, an exact number with its unit;
* **per-block rows** (:attr:`costgraph.model.Costs.rows` at model scope): every
  block and repeat group, and every top-level node and shared storage, per
  instance, with its count;
* the **training-memory breakdown per device** (:mod:`costgraph.training`:
  weights, gradients, optimizer states, activations, total, per pipeline
  stage, and the fit verdict) when a layout is given;
* the **inference summary** (:func:`costgraph.inference.infer`) when an
  inference setting is given.

Formulas stay SymPy expressions (in the field's order, :mod:`costgraph.export.printing`);
each writer prints them with SymPy's LaTeX or MathML printer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import sympy

from ...choices import CAUSAL, CONVENTION, PRECISION
from ...numbers import units
from ...numbers.units import LABELS
from ..printing import field_order
from ...engine.totals import QUANTITIES

#: Quantities of a block row, in column order.
BLOCK_QUANTITIES = ("params", "flops_forward", "activation_bytes", "kv_cache_bytes")
#: Inference quantities shown, with labels and kinds (``bytes``, ``flops``, ``ratio``, ``seconds``, ``rate``).
INFER_ROWS = (
    ("weight_bytes", "weights in memory", "bytes"),
    ("kv_cache_bytes_per_token", "KV cache per token", "bytes"),
    ("kv_cache_bytes", "KV cache, b sequences of P + G tokens", "bytes"),
    ("kv_cache_bytes_paged", "KV cache, paged", "bytes"),
    ("memory_bytes", "weights + paged KV cache", "bytes"),
    ("prefill.flops", "prefill FLOPs", "flops"),
    ("prefill.bytes", "prefill bytes moved", "bytes"),
    ("prefill.intensity", "prefill intensity (FLOP/byte)", "ratio"),
    ("prefill.seconds", "prefill time (time to first token)", "seconds"),
    ("decode.flops", "decode step FLOPs", "flops"),
    ("decode.bytes", "decode step bytes moved", "bytes"),
    ("decode.intensity", "decode intensity (FLOP/byte)", "ratio"),
    ("decode.seconds", "decode step time (last step)", "seconds"),
    ("time_per_output_token_mean", "time per output token (mean)", "seconds"),
    ("tokens_per_second", "tokens/s (all sequences)", "rate"),
)


@dataclass
class Row:
    """One line of a table: a label, a formula (None: none shown) and a number as text (None: none)."""

    label: str
    expr: sympy.Expr | None = None
    value: str | None = None


@dataclass
class Table:
    """A titled table of :class:`Row` s; ``note`` is printed under it."""

    title: str
    rows: list[Row]
    note: str = ""


@dataclass
class BlockRow:
    """One block, repeat group, top-level node or shared storage: quantities of one instance.

    ``quantities``: quantity → (formula, number text or None)."""

    path: str
    kind: str
    count: sympy.Expr
    count_value: int | None
    quantities: dict[str, tuple[sympy.Expr, str | None]]


@dataclass
class Section:
    """Training or inference: ``settings`` lines, tables, verdict lines and assumptions."""

    title: str
    settings: list[str]
    tables: list[Table]
    verdict: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class Report:
    """Everything a report shows (see the module docstring)."""

    model: str
    title: str
    conventions: list[tuple[str, str]]
    symbols: list[tuple[str, str, int | None]]
    scopes: list[Table]
    blocks: list[BlockRow]
    block_quantities: tuple[str, ...]
    training: Section | None = None
    inference: Section | None = None
    warnings: list[str] = field(default_factory=list)
    numbers: bool = False
    costs: object = None
    values: dict | None = None


def label(q: str) -> str:
    """The label of quantity ``q`` (:data:`costgraph.numbers.units.LABELS`), whole when it stands alone."""
    return "KV cache bytes per token" if q == "kv_cache_bytes_per_token" else LABELS[q].strip()


def _complete(expr, values) -> bool:
    return values is not None and expr.free_symbols <= set(values)


def number(q: str, expr, values) -> str | None:
    """The exact value of quantity ``q`` with its unit (:func:`costgraph.numbers.units.with_unit`), or None."""
    if not _complete(expr, values):
        return None
    v = expr.xreplace(values)
    if not v.is_integer:   # an average layer (a layer pattern), a per-instance share: worded as derive does
        return units.with_unit(q, Fraction(int(v.p), int(v.q))) if v.is_Rational else f"{v} {units.UNITS[q]}"
    return units.with_unit(q, int(v))


def nbytes(expr, values) -> str | None:
    """Bytes with units, rounded up where a padded table makes a share fractional; or None."""
    if not _complete(expr, values):
        return None
    return units.with_unit("activation_bytes", int(sympy.ceiling(expr.xreplace(values))))


def conventions(costs, layout=None) -> list[tuple[str, str]]:
    """(name, text) of each convention the numbers follow."""
    m, p = costs.model, costs.precision
    causal = {"full": "attention products over the full s × s square (PaLM, Megatron-LM, FlopCounterMode)",
              "half": "causal attention products over the pairs the mask keeps, as an area (s²/2)",
              "exact": "causal attention products over the whole pairs the mask keeps (s(s+1)/2)"}[costs.causal]
    flop = ("'matmul': matrix products only, 2 FLOPs per multiply-add" if costs.convention == "matmul" else
            "'all': matrix products (2 per multiply-add) and elementwise operators at their per-element counts")
    opts = ", ".join(f"{k} = {str(v).lower()}" for k, v in m.graph.options.items())
    out = [("FLOPs", flop), ("attention", causal),
           ("precision", f"'{p.name}': activations {p.activation} B, dropout masks {p.mask} B, "
                         f"token ids {p.index} B per element; the KV cache in the activation dtype"),
           ("activation profile", f"'{m.settings.profile}'" + (" (Korthikanti et al. 2022, Sec. 4.1)"
                                                                if m.settings.profile == "korthikanti" else
                                                                " (what PyTorch autograd keeps)")),
           ("dropout", "on" if m.settings.dropout else "off")]
    if opts:
        out.append(("options", opts))
    out.append(("units", "counts and FLOPs with decimal SI prefixes (G = 10⁹); bytes both decimal "
                         "GB = 10⁹ bytes and binary GiB = 2³⁰ bytes, each labelled; exact integers always shown"))
    out.append(("scopes", "a block row is one instance; it counts 'count' times in the model"))
    if layout is not None:
        out.append(("training", f"precision policy '{layout.policy}', optimizer '{layout.optimizer}', "
                                f"activations {layout.precision}"))
    return out


def _scope_table(costs, title: str, values, grouped: bool) -> Table:
    rows = []
    for q in QUANTITIES:
        e = costs[q]
        if q.startswith("kv_cache") and e == 0:
            continue
        shown = costs.grouped(q) if grouped else costs.ordered(q)
        rows.append(Row(label(q), shown, number(q, e, values)))
    return Table(title, rows)


def scope_tables(model, costs, values, convention: str, precision, causal: str) -> list[Table]:
    """The model's totals, then one iteration of each top-level repeat group."""
    g = model.graph
    tops = [p for p in g.groups if "/" not in p]
    out = [_scope_table(costs, "whole model", values, grouped=bool(g.groups))]
    for path in tops:
        name = "one layer" if len(tops) == 1 else "one iteration"
        c = model.costs(path, convention=convention, precision=precision, causal=causal)
        count = field_order(g.groups[path].count)
        out.append(_scope_table(c, f"{name} of '{path}' (repeated {sympy.sstr(count)} times)", values,
                                grouped=False))
    return out


def block_rows(costs, values) -> list[BlockRow]:
    """The model-scope breakdown rows shown per block: every block and repeat
    group, and every top-level node and shared storage, with any quantity not 0."""
    out = []
    shown = [q for q in BLOCK_QUANTITIES if not (q == "kv_cache_bytes" and costs[q] == 0)]
    first = {}
    for i, r in enumerate(costs.leaves):   # program order: a row where its first node is, outer before inner
        for anc in [r["path"]] + ["/".join(r["path"].split("/")[:k]) for k in range(1, r["path"].count("/") + 1)]:
            first.setdefault(anc, i)
    rows = sorted(costs.rows, key=lambda r: (first.get(r["path"], len(first)), r["path"].count("/")))
    for r in rows:
        if r["kind"] != "block" and "/" in r["path"]:
            continue
        if all(r[q] == 0 for q in shown):
            continue
        kind = r["block"] if r["kind"] == "block" else r["kind"]
        count = field_order(r["count"])
        cv = int(r["count"].xreplace(values)) if _complete(r["count"], values) else None
        out.append(BlockRow(r["path"], kind, count, cv,
                            {q: (field_order(r[q]), number(q, r[q], values)) for q in shown}))
    return out


def training_section(model, result, values, fits, extra_settings: list[str] | None = None) -> Section:
    """Per device, per pipeline stage: weights, gradients, optimizer states, activations, total."""
    from ...training.memory import MEMORY_KEYS
    from ..training_report import LABELS as TRAIN_LABELS, plan_dict

    L = result.layout
    plan = plan_dict(result, {})
    settings = [f"layout: {plan['gpus'] or '?'} GPUs = tp {plan['tp']} × pp {plan['pp']} × cp {plan['cp']} × dp "
                f"{plan['dp']}; ep {plan['ep']}" + (", sequence parallel" if L.sp else "") + f"; ZeRO {L.zero}"
                + (f" (HSDP groups of {plan['hsdp']})" if L.hsdp is not None else ""),
                f"precision '{L.policy}', optimizer '{L.optimizer}', activations {L.precision}; recompute "
                f"{L.recompute}, attention {L.attention}; micro-batches m = {plan['micro_batches']}, "
                f"schedule {L.schedule}"] + list(extra_settings or [])
    top = result.most_loaded(values)
    tables = []
    for st in result.stages:
        rows = [Row(TRAIN_LABELS[k], field_order(st.memory[k]), nbytes(st.memory[k], values)) for k in MEMORY_KEYS]
        ex = st.memory.get("experts", 0)
        if ex != 0:
            rows.append(Row("of which routed experts' states", field_order(ex), nbytes(ex, values)))
        title = st.name + (" (most loaded)" if st is top and len(result.stages) > 1 else "")
        tables.append(Table(title, rows))
    verdict = []
    if fits is not None:
        cap = units.with_unit("activation_bytes", fits["capacity_bytes"])
        held = fits.get("reserve_bytes", 0)
        verdict.append(f"device memory {cap}"
                       + (f" less a reserve of {units.with_unit('activation_bytes', held)}" if held else "")
                       + ": the most-loaded device "
                       + (f"fits (headroom {units.with_unit('activation_bytes', fits['headroom_bytes'])})"
                          if fits["fits"] else "does NOT fit"))
        for name, what in (("b", "micro-batch b"), ("s", "sequence length s")):
            if f"largest_{name}" in fits:
                v = fits[f"largest_{name}"]
                verdict.append(f"largest {what} that fits (the rest as given): "
                               + (f"{v:,}" if v else f"none ({name} = 1 does not fit)"))
    return Section("Training memory per device", settings, tables, verdict)


def _seconds(x) -> str:
    x = float(x)
    return f"{x * 1e3:.4g} ms" if x < 1 else f"{x:.4g} s"


def _infer_value(kind: str, v) -> str | None:
    if v is None:
        return None
    if kind == "bytes":
        return units.with_unit("activation_bytes", int(sympy.ceiling(v)))
    if kind == "flops":
        return units.with_unit("flops_forward", int(v))
    if kind == "seconds":
        return _seconds(v)
    if kind == "rate":
        return f"{float(v):,.1f} tokens/s"
    return f"{float(v):,.4g}"


def _short_formula(e):
    """A formula worth printing: a polynomial (bytes, FLOPs), not a sum of maxima."""
    from ...engine.symbols import as_expr

    e = as_expr(e)
    try:
        if e.free_symbols and e.is_polynomial():
            return field_order(e)
    except (TypeError, ValueError, AttributeError):
        return None
    return None


def inference_section(rep) -> Section:
    """The inference summary of an :class:`~costgraph.inference.InferenceReport`."""
    q, v, st = rep.quantities, rep.values, rep.settings
    settings = [f"hardware {st.hardware}" + (f" × {st.tp} (tensor parallel; figures per device)"
                                                 if st.tp > 1 else ""),
                f"batch b = {st.batch} sequences, prompt P = {st.prompt}, generate G = {st.generate}; "
                f"weights {st.weights} (peak of {st.compute}), KV cache {st.kv}; "
                f"'{st.convention}' FLOPs, attention {st.causal}"]
    rows = []
    for key, label, kind in INFER_ROWS:
        if key not in q and key not in v:
            continue
        rows.append(Row(label, _short_formula(q[key]) if key in q and kind in ("bytes", "flops") else None,
                        _infer_value(kind, v.get(key))))
    cb = v.get("compute_bound_batch")
    verdict = [f"decode turns compute-bound from b = {cb:,}" if cb is not None else
               "decode never turns compute-bound (the bytes each sequence reads — its KV cache or recurrent state — grow as fast as its FLOPs)",
               f"capacity {st.capacity_bytes:,} bytes usable (reserve {st.reserve}): "
               + ("fits" if v["fits"] else "does NOT fit")
               + (f"; largest batch {v['max_batch']:,}" if v.get("max_batch") else "")
               + (f"; longest context {v['max_context']:,} tokens" if v.get("max_context") else "")]
    verdict += [f"warning: {w}" for w in rep.warnings]   # as costgraph infer prints them (P + G > s_max)
    return Section("Inference", settings, [Table("per device", rows)], verdict, list(rep.notes))


def build(model, values=None, *, config: str | None = None, convention: str = CONVENTION.default, precision=PRECISION.default,
          causal: str = CAUSAL.default, training=None, fits=None, inference=None) -> Report:
    """The content of a report on ``model`` (a :class:`~costgraph.model.Model`).

    ``values``: symbol → int (None: formulas only); ``config``: the
    configuration's name, for the title; ``training``: a
    :class:`~costgraph.training.memory.TrainingMemory` (``model.train(layout)``);
    ``fits``: :func:`costgraph.training.api.training_fits`'s verdict; ``inference``: an
    :class:`~costgraph.inference.InferenceReport`.
    """
    from ..text_report import warnings

    costs = model.costs("model", convention=convention, precision=precision, causal=causal)
    title = f"{model.name}" + (f" ({config})" if config else "") + ": cost model"
    syms = [(k, meaning, int(values[model.graph.dims[k].symbol])
             if values is not None and k in model.graph.dims and model.graph.dims[k].symbol in values else None)
            for k, meaning in model.symbols.items()]
    numbers = values is not None and all(e.free_symbols <= set(values) for e in costs.quantities.values())
    rep = Report(model.name, title, conventions(costs, training.layout if training is not None else None), syms,
                 scope_tables(model, costs, values, convention, precision, causal), block_rows(costs, values),
                 tuple(q for q in BLOCK_QUANTITIES if not (q == "kv_cache_bytes" and costs[q] == 0)),
                 warnings=warnings(costs, values), numbers=numbers, costs=costs, values=values)
    if training is not None:
        rep.training = training_section(model, training, values, fits)
    if inference is not None:
        rep.inference = inference_section(inference)
    return rep
