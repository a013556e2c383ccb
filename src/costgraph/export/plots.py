"""Plots of a model's costs (matplotlib): memory per device by part across a
sweep, forward FLOPs by block, and a roofline with the prefill and decode steps.

Each plot is two steps: a ``*_data`` function computes exact integers (or
exact rationals) from the engine, and a ``*_figure`` function draws them on a
:class:`matplotlib.figure.Figure` made directly (no ``pyplot``, no global
state; the canvas is Agg, set inside the function). :func:`save` writes PNG or
SVG by the file's suffix; :func:`svg_text` gives the SVG as text for an HTML
page. SVG text stays text (``svg.fonttype = 'none'``), so labels can be
searched and read by a screen reader.

Units, named on every axis:

* bytes: decimal ``GB`` (10⁹) or binary ``GiB`` (2³⁰), chosen by ``unit``;
* FLOPs: decimal SI prefixes (``TFLOP`` = 10¹²), as :mod:`costgraph.numbers.units`;
* FLOP/s: ``TFLOP/s``; arithmetic intensity: FLOP per byte of HBM traffic.

The roofline model is Williams, Waterman & Patterson, "Roofline: an
insightful visual performance model for multicore architectures", CACM 52(4),
2009: attainable FLOP/s = min(peak, intensity × bandwidth).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

from ..errors import CostgraphValueError, no_value
from ..optional import need
from .display import Tabular, json_exact

#: Bytes per unit of the memory axis.
BYTE_UNITS = {"GB": 10**9, "GiB": 2**30}
#: The parts of a training device's memory (costgraph.training.memory.MEMORY_KEYS but the total), and
#: of an inference device's, in stacking order, with their labels.
TRAIN_PARTS = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer states",
               "activations": "activations"}
INFER_PARTS = {"weights": "weights", "kv_cache": "KV cache"}
#: Colours of the parts (matplotlib's tab10), the same part the same colour in every plot.
COLOURS = {"weights": "#1f77b4", "gradients": "#ff7f0e", "optimizer": "#2ca02c", "activations": "#d62728",
           "kv_cache": "#9467bd"}
_SI = ((10**18, "E"), (10**15, "P"), (10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "k"), (1, ""))
FORMATS = (".png", ".svg")


def _figure(width: float = 7.0, height: float = 4.2):
    """A Figure on an Agg canvas (no pyplot) that a notebook shows inline (:func:`_inline_class`)."""
    need("matplotlib", "plot", "drawing a plot")
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = _inline_class()(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


_INLINE = []


def _inline_class():
    """A :class:`matplotlib.figure.Figure` with ``_repr_png_``, so that Jupyter shows it inline
    without pyplot (IPython registers a PNG printer for Figure only once pyplot is set up)."""
    if not _INLINE:
        from matplotlib.figure import Figure

        class InlineFigure(Figure):
            """A Figure that displays itself in a notebook (PNG, as :func:`save` writes it)."""

            def _repr_png_(self) -> bytes:
                buf = io.BytesIO()
                with _rc():
                    self.savefig(buf, format="png", dpi=110, metadata={"Software": None})
                return buf.getvalue()

        _INLINE.append(InlineFigure)
    return _INLINE[0]


def _wrap(title: str, width: int = 95) -> str:
    """A title broken into lines of at most ``width`` characters (the figure is 7 inches wide)."""
    import textwrap

    return "\n".join(textwrap.wrap(title, width))


def si_unit(largest: int | float) -> tuple[int, str]:
    """The decimal SI prefix for numbers up to ``largest``: ``(10**12, "T")`` for 3.1e14."""
    for scale, prefix in _SI:
        if largest >= scale:
            return scale, prefix
    return 1, ""


# ---------------------------------------------------------------- memory per device

@dataclass
class MemorySweep(Tabular):
    """Bytes per device by part at each point of a sweep (exact integers).

    ``symbol``: the swept dimension (``s`` or ``b``); ``points``: its values;
    ``parts``: part → bytes at each point (keys of :data:`TRAIN_PARTS` or
    :data:`INFER_PARTS`); ``totals``: their sums; ``phase``: ``train`` or
    ``infer``; ``capacity``: device memory (bytes) or None; ``title``."""

    symbol: str
    points: list[int]
    parts: dict[str, list[int]]
    phase: str
    title: str
    capacity: int | None = None
    totals: list[int] = field(default_factory=list)

    def __post_init__(self):
        if not self.totals:
            self.totals = [sum(col) for col in zip(*self.parts.values())]

    def to_dict(self) -> dict:
        """JSON values: the points, bytes per part and totals (exact ints), capacity, title."""
        return {"symbol": self.symbol, "points": list(self.points), "phase": self.phase, "title": self.title,
                "parts": {k: [json_exact(v) for v in col] for k, col in self.parts.items()},
                "totals": [json_exact(v) for v in self.totals], "capacity_bytes": json_exact(self.capacity)}

    def _table(self):
        from .results_html import memory_sweep_table

        return memory_sweep_table(self)


def _ceil(v) -> int:
    """A byte count as a whole number: a per-device share of a table padded to a
    multiple of t can be fractional (rounded up, as ``costgraph train`` does)."""
    import sympy

    return int(sympy.ceiling(v))


def _sweep_values(model, values: dict, symbol: str, points: list[int]) -> list[dict]:
    """``values`` with ``symbol`` set to each point (checked by :meth:`Model.values`)."""
    if symbol not in model.graph.dims:
        raise CostgraphValueError(f"model '{model.name}' has no dimension '{symbol}' to sweep",
                                  hint="its dimensions: " + ", ".join(model.symbols))
    given = {str(k): int(v) for k, v in values.items()}
    return [model.values(None, {**given, symbol: p}) for p in points]


def _fixed(model, values: dict, symbol: str) -> str:
    """``, b = 1`` / ``, s = 8,192``: the value of the other of b and s, for a title."""
    out = ""
    for name in ("b", "s"):
        info = model.graph.dims.get(name)
        if name != symbol and info is not None and info.symbol in values:
            out += f", {name} = {int(values[info.symbol]):,}"
    return out


def memory_sweep_train(model, result, values: dict, symbol: str, points: list[int],
                       capacity: int | None = None, name: str | None = None) -> MemorySweep:
    """Training memory of the most-loaded device at each point.

    ``result``: the model's :class:`~costgraph.training.memory.TrainingMemory`
    (``model.train(layout)``); ``values``: every dimension's value (symbol →
    int) but the swept one may be anything; ``symbol``: the name swept
    (``s``, ``b``); ``name``: the model's name in the title (default
    ``model.name``; e.g. ``llama (llama-3-8b)``). Bytes are exact: each part's
    closed form at the point, rounded up where a padded table makes it fractional.

    Raises
    ------
    CostgraphValueError
        An unknown symbol, a value the model refuses, or a symbol left without a value.
    """
    parts = {k: [] for k in TRAIN_PARTS}
    for vals in _sweep_values(model, values, symbol, points):
        top = result.most_loaded(vals)
        for k in TRAIN_PARTS:
            e = top.memory[k]
            if not e.free_symbols <= set(vals):
                missing = sorted(str(x) for x in e.free_symbols - set(vals))
                raise no_value(missing)
            parts[k].append(_ceil(e.xreplace(vals)))
    L = result.layout
    title = (f"{name or model.name}: training memory per device ({L.gpus or '?'} GPUs, tp {L.t}"
             + (", SP" if L.sp else "") + f", pp {L.p}, "
             f"ZeRO {L.zero}, recompute {L.recompute}, {L.policy}/{L.optimizer}{_fixed(model, values, symbol)})")
    return MemorySweep(symbol, list(points), parts, "train", title, capacity)


def memory_sweep_infer(inf, values: dict, symbol: str, points: list[int],
                       capacity: int | None = None, name: str | None = None) -> MemorySweep:
    """Inference memory of one device at each point: weights in their dtype and
    the KV cache of ``b`` sequences of ``s`` positions (``inf``: a
    :class:`costgraph.inference.Inference`; per device under its ``t``).

    Raises
    ------
    CostgraphValueError
        As :func:`memory_sweep_train`.
    """
    exprs = {"weights": inf.weight_memory(), "kv_cache": inf.kv_cache_bytes()}
    parts = {k: [] for k in INFER_PARTS}
    for vals in _sweep_values(inf.model, values, symbol, points):
        for k, e in exprs.items():
            if not e.free_symbols <= set(vals):
                missing = sorted(str(x) for x in e.free_symbols - set(vals))
                raise no_value(missing)
            parts[k].append(_ceil(e.xreplace(vals)))
    title = (f"{name or inf.cg.name}: inference memory per device (weights {inf.weights.name}, KV cache {inf.kv.name}"
             + (f", tp {inf.t}" if inf.t > 1 else "") + f"{_fixed(inf.model, values, symbol)})")
    return MemorySweep(symbol, list(points), parts, "infer", title, capacity)


def memory_figure(data: MemorySweep, unit: str = "GB"):
    """Stacked bars, one per point, one segment per part, in ``unit`` (GB or GiB).

    Each segment's height is its exact byte count divided by the unit
    (``n / 10**9``); the device capacity, when known, is a dashed line."""
    if unit not in BYTE_UNITS:
        raise CostgraphValueError(f"unknown byte unit {unit!r}", hint="GB (10^9 bytes) or GiB (2^30 bytes)")
    scale = BYTE_UNITS[unit]
    labels = TRAIN_PARTS if data.phase == "train" else INFER_PARTS
    fig = _figure()
    ax = fig.add_subplot()
    xs = list(range(len(data.points)))
    bottom = [0.0] * len(xs)
    for k, label in labels.items():
        heights = [n / scale for n in data.parts[k]]
        ax.bar(xs, heights, bottom=bottom, label=label, color=COLOURS[k], width=0.7, gid=f"part-{k}")
        bottom = [b + h for b, h in zip(bottom, heights)]
    if data.capacity is not None:
        ax.axhline(data.capacity / scale, color="black", linestyle="--", linewidth=1,
                   label=f"device memory {data.capacity / scale:,.1f} {unit}")
    ax.set_xticks(xs, [f"{p:,}" for p in data.points])
    what = {"s": "sequence length s (tokens)", "b": "micro-batch b (sequences)" if data.phase == "train"
            else "batch b (sequences)"}.get(data.symbol, data.symbol)
    ax.set_xlabel(what)
    ax.set_ylabel(f"memory per device ({unit} = {'10⁹' if unit == 'GB' else '2³⁰'} bytes)")
    ax.set_title(_wrap(data.title), fontsize=9)
    ax.legend(fontsize=8)
    return fig


# ---------------------------------------------------------------- FLOPs by block

def flops_buckets(costs, quantity: str = "flops_forward") -> list[tuple[str, object]]:
    """``quantity`` of the whole scope split by part of the graph.

    Each top-level node or shared storage is its own part (``lm_head``). A
    top-level block or repeat group is split into the blocks and groups
    directly inside it (``layers/attn``, ``layers/mlp``), its other nodes
    together as ``<group>/other``; a block or group holding a single block
    (Mixtral's ``layers/layer``) is looked through first. Returns ``[(label,
    expr), ...]`` in program order, every instance counted (``l·(per layer)``);
    the exprs add up to ``costs[quantity]`` exactly."""
    import sympy

    g = costs.model.graph
    prefix = costs._scope.prefix
    nested = set(g.groups) | set(g.blocks)
    rels = [((r["path"][len(prefix) + 1:] if prefix else r["path"]).split("/"), r) for r in costs.leaves]

    def full(parts):
        return "/".join(([prefix] if prefix else []) + parts)

    def container(parts):
        """The leading components to split at: the top one, then through single-block wrappers."""
        depth = 1
        while full(parts[:depth]) in nested:
            inside = {tuple(p[:depth + 1]) for p, _ in rels if p[:depth] == parts[:depth] and len(p) > depth}
            if len(inside) == 1 and len(parts) > depth + 1 and full(parts[:depth + 1]) in nested:
                depth += 1
            else:
                break
        return depth

    order: dict[str, list] = {}
    for parts, r in rels:
        depth = container(parts)
        if len(parts) <= depth or full(parts[:depth]) not in nested:
            label = "/".join(parts[:depth])
        elif len(parts) > depth + 1 and full(parts[:depth + 1]) in nested:
            label = "/".join(parts[:depth + 1])
        else:
            label = "/".join(parts[:depth]) + "/other"
        order.setdefault(label, []).append(r["count"] * r[quantity])
    return [(k, sympy.expand(sympy.Add(*v))) for k, v in order.items()]


@dataclass
class FlopsShare(Tabular):
    """Forward FLOPs (or another quantity) by part, exact integers, at one configuration."""

    model: str
    parts: list[tuple[str, int]]
    total: int
    quantity: str
    title: str

    def to_dict(self) -> dict:
        """JSON values: each part's FLOPs and the total (exact ints)."""
        return {"model": self.model, "quantity": self.quantity, "title": self.title, "total": json_exact(self.total),
                "parts": [{"part": label, "value": json_exact(n)} for label, n in self.parts]}

    def _table(self):
        from .results_html import flops_share_table

        return flops_share_table(self)


def flops_share(costs, values: dict, quantity: str = "flops_forward", name: str | None = None) -> FlopsShare:
    """:func:`flops_buckets` evaluated at ``values`` (symbol → int); parts with 0 left out.

    Raises
    ------
    CostgraphValueError
        A symbol without a value.
    """
    out = []
    for label, e in flops_buckets(costs, quantity):
        if not e.free_symbols <= set(values):
            missing = sorted(str(x) for x in e.free_symbols - set(values))
            raise no_value(missing)
        n = e.xreplace(values)
        if n != 0:
            out.append((label, int(n)))
    total = costs[quantity].xreplace(values)
    what = {"flops_forward": "forward FLOPs", "flops_backward": "backward FLOPs"}.get(quantity, quantity)
    title = (f"{name or costs.model.name}: {what} by block ('{costs.convention}' convention, attention {costs.causal}; "
             f"total {int(total):,})")
    return FlopsShare(costs.model.name, out, int(total), quantity, title)


def flops_figure(data: FlopsShare):
    """Horizontal bars, one per part, in the SI unit of the largest; each bar
    labelled with its share of the total."""
    scale, prefix = si_unit(max((n for _, n in data.parts), default=1))
    fig = _figure(7.0, 0.8 + 0.32 * max(len(data.parts), 3))
    ax = fig.add_subplot()
    ys = list(range(len(data.parts)))
    widths = [n / scale for _, n in data.parts]
    bars = ax.barh(ys, widths, color="#1f77b4", gid="flops-bars")
    ax.set_yticks(ys, [label for label, _ in data.parts], fontsize=8)
    ax.invert_yaxis()
    for bar, (_, n) in zip(bars, data.parts):
        ax.annotate(f"{float(Fraction(n, data.total)):.1%}", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    unit = f"{prefix}FLOP"
    ax.set_xlabel(f"{'forward FLOPs' if data.quantity == 'flops_forward' else data.quantity} ({unit})")
    ax.set_title(_wrap(data.title), fontsize=9)
    ax.margins(x=0.12)
    return fig


# ---------------------------------------------------------------- roofline

@dataclass
class Roofline(Tabular):
    """A device's roof and the model's steps on it (exact rationals).

    ``peak``: dense FLOP/s of the compute dtype; ``bandwidth``: HBM bytes/s
    (each times its efficiency); ``points``: ``[(label, intensity FLOP/byte,
    FLOP/s)]`` where FLOP/s = the step's FLOPs / its roofline time (per-op
    roofline of :mod:`costgraph.inference.roofline`, so on or under the roof)."""

    device: str
    peak: object
    bandwidth: object
    points: list[tuple[str, object, object]]
    title: str

    @property
    def ridge(self):
        """Intensity where the roof turns flat: peak / bandwidth (FLOP/byte)."""
        return self.peak / self.bandwidth

    def to_dict(self) -> dict:
        """JSON values, exact: ints, or rationals as ``"p/q"`` text (FLOP/s, bytes/s, FLOP/byte)."""
        return {"device": self.device, "title": self.title, "peak_flops": json_exact(self.peak),
                "bandwidth": json_exact(self.bandwidth), "ridge": json_exact(self.ridge),
                "points": [{"step": label, "intensity": json_exact(i), "flops_per_second": json_exact(f)}
                           for label, i, f in self.points]}

    def _table(self):
        from .results_html import roofline_table

        return roofline_table(self)


def roofline(rep, compute_efficiency=1, bandwidth_efficiency=1, name: str | None = None) -> Roofline:
    """The roofline of an :class:`~costgraph.inference.InferenceReport`:
    the device of its ``hardware`` setting (:func:`costgraph.inference.machine`,
    the numbers ``infer`` used) and its prefill and decode steps.

    Raises
    ------
    CostgraphValueError
        A step without numbers (a symbol without a value).
    """
    from ..inference import machine

    st = rep.settings
    m = machine(st.hardware, st.compute, st.tp, compute_efficiency, bandwidth_efficiency,
                peak=st.peak_flops, bandwidth=st.memory_bandwidth)   # the figures infer used
    if m.peak is None or m.bandwidth is None:
        raise CostgraphValueError("a roofline needs a peak and an HBM bandwidth",
                                  hint="--hardware NAME, or --peak FLOP/s and --bandwidth B/s")
    pts = []
    for phase, label in (("prefill", f"prefill (b = {st.batch}, P = {st.prompt})"),
                         ("decode", f"decode (b = {st.batch}, last of G = {st.generate})")):
        v = rep.values
        if f"{phase}.intensity" not in v or f"{phase}.seconds" not in v:
            raise CostgraphValueError(f"the {phase} step has no numbers", hint="give every dimension a value")
        pts.append((label, v[f"{phase}.intensity"], v[f"{phase}.flops"] / v[f"{phase}.seconds"]))
    title = (f"{name or rep.model} on {m.name or 'the given device'}: roofline ({st.weights} weights, {st.compute} peak"
             + (f", per device at tp {st.tp}" if st.tp > 1 else "") + ")")
    return Roofline(m.name or "the given device", m.peak, m.bandwidth, pts, title)


def roofline_figure(data: Roofline):
    """Log-log roofline: the roof ``min(peak, x·bandwidth)`` in TFLOP/s over
    intensity x, the ridge point dashed, one marker per step."""
    import numpy as np

    ridge = float(data.ridge)
    xs_pts = [float(x) for _, x, _ in data.points]
    lo = min(xs_pts + [ridge]) / 10
    hi = max(xs_pts + [ridge]) * 10
    xs = np.geomspace(lo, hi, 200)
    xs = np.unique(np.append(xs, ridge))
    peak, bw = float(data.peak) / 1e12, float(data.bandwidth) / 1e12
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(xs, np.minimum(peak, xs * bw), color="black", linewidth=1.5,
            label=f"roof: peak {peak:,.1f} TFLOP/s, HBM {float(data.bandwidth) / 1e12:,.2f} TB/s", gid="roof")
    ax.axvline(ridge, color="grey", linestyle="--", linewidth=1, label=f"ridge point {ridge:,.0f} FLOP/byte")
    for (label, x, y), marker, colour in zip(data.points, ("o", "s", "^", "D"), ("#d62728", "#1f77b4", "#2ca02c", "#9467bd")):
        ax.plot([float(x)], [float(y) / 1e12], marker=marker, linestyle="none", color=colour, markersize=8,
                label=f"{label}: {float(x):,.3g} FLOP/byte, {float(y) / 1e12:,.3g} TFLOP/s", gid=f"point-{label.split()[0]}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte of HBM traffic)")
    ax.set_ylabel("performance (TFLOP/s)")
    ax.set_title(_wrap(data.title), fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return fig


# ---------------------------------------------------------------- output

def _rc():
    matplotlib = need("matplotlib", "plot", "drawing a plot")

    return matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "costgraph"})


def save(fig, path: str | Path) -> Path:
    """Write ``fig`` as PNG or SVG, by the suffix of ``path``; SVG text stays text.

    Raises
    ------
    CostgraphValueError
        Another suffix, or a folder that does not exist.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise CostgraphValueError(f"cannot tell the picture format of {str(path)!r}",
                                  hint="name the file .png or .svg")
    if not path.parent.is_dir():
        raise CostgraphValueError(f"no folder {str(path.parent)!r} to write {path.name!r} into")
    with _rc():
        if suffix == ".svg":
            fig.savefig(path, format="svg", metadata={"Date": None})
        else:
            fig.savefig(path, format="png", dpi=110, metadata={"Software": None})
    return path


def svg_text(fig, inline: bool = False, prefix: str = "") -> str:
    """``fig`` as SVG text; ``inline``: for an HTML page — no XML declaration,
    DOCTYPE, metadata or namespace declarations (HTML's parser gives ``<svg>``
    its namespace), so the page names no URL at all; ``prefix`` goes before
    every ``id`` and every reference to one (``url(#…)``, ``href="#…"``), so
    that several figures on one page keep their clip paths apart."""
    import re

    buf = io.StringIO()
    with _rc():
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    if inline:
        text = text[text.index("<svg"):]
        text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
        text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
        text = text.replace("<style type=\"text/css\">*{", "<style type=\"text/css\">svg *{")   # not the whole page
    if prefix:
        text = re.sub(r'\bid="', f'id="{prefix}', text)
        text = text.replace("url(#", f"url(#{prefix}").replace('href="#', f'href="#{prefix}')
    return text
