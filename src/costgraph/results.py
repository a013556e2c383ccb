"""The typed results of the API and the one door by which they reach a renderer.

A result is a dataclass. A field that is a quantity carries its unit, its label and its JSON name in
the field's metadata (:func:`costgraph.result_fields.quantity`); ``quantities`` reads them back, so the
renderers (text, HTML, LaTeX, JSON, pandas: :mod:`costgraph.export.present`) take the names, labels
and units from the one declaration instead of guessing them from key names. A result section held as a
dict of SymPy expressions (the FLOPs and time of ``costgraph train``) declares its keys the same way,
with :class:`~costgraph.result_fields.Quantity` entries in a table beside the code that fills it
(:data:`costgraph.training.compute.FLOPS`, ``TIME``; :mod:`costgraph.inference.quantities`).

:class:`Tabular` is the mixin of the results: ``print(result)``, IPython's pretty printer,
``_repr_html_``, ``_repr_latex_`` and ``to_pandas()`` all show the one :class:`Table` of
``result._table()``; ``to_dict()``, ``to_json()`` and ``to_text()`` of the results that have a
document (``costgraph train``, ``infer``) are their command's JSON and text. The analyses
(``training/``, ``inference/``) import nothing from ``export/``: the mixin asks the renderer that
the package's face installs (:func:`install`; ``costgraph/__init__.py`` installs
:mod:`costgraph.export.present`, imported on the first rendering). The planner's progress bar
(:func:`progress`) comes through the same door.

Light at import (the package's face imports it at every start): no import, no dataclass; the fields'
declarations and the table cells are :mod:`costgraph.result_fields`.
"""

from __future__ import annotations

TYPE_CHECKING = False   # not typing's: this module is imported by the package's face at every start
if TYPE_CHECKING:
    from .result_fields import Table

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
    """A progress bar on standard error for a long search (:func:`costgraph.export.progress.progress`:
    drawn only on a terminal, after a second)."""
    return renderer().progress(description, total=total)


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
