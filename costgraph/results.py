"""The typed results of the API and the one door by which they reach a renderer.

A result is a dataclass. A field that is a quantity carries its unit, its label and its JSON name in
the field's metadata (:func:`quantity`); :func:`quantities` reads them back, so the renderers (text,
HTML, LaTeX, JSON, pandas: :mod:`costgraph.export.present`) take the names, labels and units from the
one declaration instead of guessing them from key names. A result section held as a dict of
SymPy expressions (the FLOPs and time of ``costgraph train``) declares its keys the same way, with
:class:`Quantity` entries in a table beside the code that fills it
(:data:`costgraph.training.compute.QUANTITIES`).

:class:`Tabular` is the mixin of the results: ``print(result)``, IPython's pretty printer,
``_repr_html_``, ``_repr_latex_`` and ``to_pandas()`` all show the one :class:`Table` of
``result._table()``; ``to_dict()``, ``to_json()`` and ``to_text()`` of the results that have a
document (``costgraph train``, ``infer``) are their command's JSON and text. The analyses
(``training/``, ``inference/``) import nothing from ``export/``: the mixin asks the renderer that
the package's face installs (:func:`install`; ``costgraph/__init__.py`` installs
:mod:`costgraph.export.present`, imported on the first rendering). The planner's progress bar
(:func:`progress`) comes through the same door.

Light at import: the standard library only (no SymPy).
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import MISSING, dataclass, field, fields

#: the loader of the renderer module (costgraph.export.present), installed by the package's face
_LOADER = None


def install(loader) -> None:
    """Install ``loader``: a function returning the renderer module (``costgraph/__init__.py`` does,
    with :mod:`costgraph.export.present`)."""
    global _LOADER
    _LOADER = loader


def renderer():
    """The renderer module (:mod:`costgraph.export.present`): ``table``, ``to_dict``, ``to_json``,
    ``to_text``, ``text``, ``html``, ``latex``, ``frame``, ``progress``."""
    if _LOADER is None:   # pragma: no cover - importing any costgraph module runs the package's face first
        raise RuntimeError("no renderer installed (costgraph/__init__.py installs costgraph.export.present)")
    return _LOADER()


def progress(description: str, total: float | None = None):
    """A progress bar on standard error for a long search (:func:`costgraph.export.progress.progress`),
    or a bar that draws nothing when no renderer is installed."""
    if _LOADER is None:   # pragma: no cover - see renderer()
        return nullcontext(_Silent())
    return renderer().progress(description, total=total)


class _Silent:
    def update(self, *_args, **_kw) -> None:   # pragma: no cover - see renderer()
        pass


@dataclass(frozen=True)
class Quantity:
    """What a renderer needs to show one quantity: ``unit`` (``bytes``, ``s``, ``FLOP``, ``FLOP/token``,
    ``FLOP/s``, ``tokens``, ``tokens/s``, ``days``, ``GPU-hours``, ``PF-days``; ``""`` for a count, a
    ratio or a text), ``label`` (the words a table or the text report shows), ``json`` (its key in the
    command's JSON; None: not in the JSON), ``omit_none`` (left out of the JSON when None rather than
    written as ``null``)."""

    unit: str = ""
    label: str = ""
    json: str | None = ""
    omit_none: bool = False


def quantity(unit: str = "", *, label: str = "", json: str | None = "", omit_none: bool = False,
             default=MISSING, default_factory=MISSING, init: bool = True):
    """A dataclass field that is a quantity: its :class:`Quantity` (unit, label, JSON name) in the
    field's metadata (key ``"quantity"``; an empty ``label`` or ``json`` is the field's name, a
    ``json`` of None keeps the field out of the JSON)."""
    meta = {"quantity": Quantity(unit, label, json, omit_none)}
    return field(default=default, default_factory=default_factory, init=init, metadata=meta)


def quantities(result) -> list[tuple[str, Quantity]]:
    """The quantity fields of a dataclass (or its instance), in their order: ``(field name, Quantity)``
    with the label and the JSON name filled in (the field's name where none is given)."""
    out = []
    for f in fields(result):
        q = f.metadata.get("quantity")
        if q is not None:
            out.append((f.name, Quantity(q.unit, q.label or f.name, f.name if q.json == "" else q.json, q.omit_none)))
    return out


def json_fields(result, number) -> dict:
    """The JSON of ``result``'s quantity fields, by their JSON names in field order: each value through
    ``number(value, quantity)`` (the caller's conversion of an exact number, which may read the unit:
    a float, an int, a text), None as ``null`` (or left out: ``omit_none``), text and bools as they are."""
    out = {}
    for name, q in quantities(result):
        v = getattr(result, name)
        if q.json is None or (v is None and q.omit_none):
            continue
        out[q.json] = v if v is None or isinstance(v, (str, bool)) else number(v, q)
    return out


@dataclass(frozen=True)
class Q:
    """A number and its unit (``bytes``, ``s``, ``FLOP``, ``FLOP/s``, ``tokens/s``; ``""`` for none)."""

    value: object
    unit: str = ""


@dataclass
class Table:
    """A titled table: ``heads`` the column names, ``rows`` tuples of cells (plain or :class:`Q`)."""

    title: str
    heads: tuple
    rows: list = field(default_factory=list)


class Tabular:
    """Mixin of the typed results: ``print(result)``, ``_repr_pretty_`` (IPython's text),
    ``_repr_html_``, ``_repr_latex_`` and ``to_pandas()`` from the one :class:`Table` of
    ``self._table()``, made once per result (Jupyter asks for every format in turn; a result is not
    changed once made). A result that does not define ``_table`` gets the renderer's table of its
    type (:func:`costgraph.export.present.table`)."""

    def __init_subclass__(cls, **kwargs):
        """Each result class holds ``_repr_pretty_`` itself: IPython's pretty printer takes the first
        class of the MRO with either ``_repr_pretty_`` or ``__repr__``, and ``@dataclass`` writes a
        ``__repr__`` into the result's own class, which would hide the table behind the fields."""
        super().__init_subclass__(**kwargs)
        if "_repr_pretty_" not in cls.__dict__:
            cls._repr_pretty_ = Tabular._repr_pretty_

    def _table(self) -> Table:
        """The result's table, as the renderer builds it for its type."""
        return renderer().table(self)

    def __str__(self) -> str:
        """``print(result)``: the table as aligned text (``repr`` keeps the dataclass's fields)."""
        return renderer().text(self._shown())

    def _shown(self) -> Table:
        t = self.__dict__.get("_shown_table")
        if t is None:
            t = self._table()
            object.__setattr__(self, "_shown_table", t)   # frozen dataclasses too
        return t

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """IPython's text/plain: the table as aligned text (not the dataclass's fields)."""
        printer.text(renderer().text(self._shown()))

    def _repr_html_(self) -> str:
        """Jupyter: the result as an HTML table."""
        return renderer().html(self._shown())

    def _repr_latex_(self) -> str:
        """Jupyter (and nbconvert to PDF): the result as a LaTeX tabular."""
        return renderer().latex(self._shown())

    def to_pandas(self):
        """The result's table as a :class:`pandas.DataFrame`: numbers in their column, units in a
        ``unit`` column (exact ints stay ints). Raises CostgraphValueError without pandas (the
        ``notebook`` extra)."""
        return renderer().frame(self._shown())


class Document(Tabular):
    """A result that is a command's whole answer: ``to_dict()`` (the JSON of ``--format json``),
    ``to_json()`` and ``to_text()`` (what the command prints), rendered by the renderer of its type
    (:mod:`costgraph.export.present`)."""

    def to_dict(self) -> dict:
        """The document the command prints with ``--format json`` (JSON values only)."""
        return renderer().to_dict(self)

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text."""
        return renderer().to_json(self)

    def to_text(self) -> str:
        """The text the command prints."""
        return renderer().to_text(self)
