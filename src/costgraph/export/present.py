"""The renderers of the API's typed results, behind the one door of :mod:`costgraph.results`.

A result (:class:`costgraph.results.Tabular`, :class:`~costgraph.results.Document`) asks this module,
which ``costgraph/__init__.py`` installs, for its table (:func:`table`), its JSON document
(:func:`to_dict`, :func:`to_json`) and its text (:func:`to_text`); a table becomes text, HTML, LaTeX
or a pandas DataFrame here too (:func:`text`, :func:`html`, :func:`latex`, :func:`frame`, from
:mod:`costgraph.export.display`). The analyses import nothing from ``export/``; this module imports
them, once, to know which renderer draws which result type:

- :class:`~costgraph.training.result.TrainingResult`: :mod:`costgraph.export.training_report` (JSON,
  text), :func:`costgraph.export.results_html.training_table`;
- :class:`~costgraph.inference.roofline.InferenceReport`: :mod:`costgraph.export.inference_report`,
  :func:`costgraph.export.results_html.inference_table`;
- :class:`~costgraph.training.planning.PlanResult`: :mod:`costgraph.export.plan_report` (text; its
  JSON is its own ``to_dict``), :func:`costgraph.export.results_html.plan_table`;
- :class:`~costgraph.training.bare_time.BareTime` and any result whose fields are declared with
  :func:`costgraph.results.quantity`: :func:`costgraph.export.results_html.fields_table` (a row per
  quantity field: its label, its value, its unit).

A :class:`~costgraph.Model` shows its graph (:func:`model_html`, :func:`graph_svg`) and a
:class:`~costgraph.Costs` its closed forms (:func:`latex_doc`) through the same door.
"""

from __future__ import annotations

import functools
import json

from .display import frame, html, latex, text   # noqa: F401 - a Table as text, HTML, LaTeX, pandas
from .progress import progress   # noqa: F401 - the planner's bar (costgraph.results.progress)
from .tables import table as text_table   # noqa: F401 - aligned text columns (costgraph hardware's table)


@functools.cache
def _renderers() -> dict:
    """Result type → ``(table, to_dict, to_json, to_text)`` (None where the result renders that itself)."""
    from ..inference.roofline import InferenceReport
    from ..training.planning import PlanResult
    from ..training.result import TrainingResult
    from . import inference_report, plan_report, results_html, training_report

    return {TrainingResult: (results_html.training_table, training_report.to_dict, training_report.to_json_doc,
                             training_report.to_text_doc),
            InferenceReport: (results_html.inference_table, lambda r: inference_report.to_dict(r, r.symbols),
                              lambda r: inference_report.to_json(r, r.symbols), inference_report.to_text_doc),
            PlanResult: (results_html.plan_table, None, None, plan_report.to_text)}


def _of(result, which: int):
    for cls in type(result).__mro__:
        found = _renderers().get(cls)
        if found is not None and found[which] is not None:
            return found[which]
    return None


def table(result):
    """The :class:`~costgraph.results.Table` of ``result``: its type's table, or a row per quantity
    field (:func:`costgraph.export.results_html.fields_table`)."""
    from .results_html import fields_table

    draw = _of(result, 0)
    return draw(result) if draw is not None else fields_table(result)


def to_dict(result) -> dict:
    """The JSON document of ``result`` (a dict of JSON values), as its command prints it; for a type
    without its own, the quantity fields by their JSON names (:func:`costgraph.result_fields.json_fields`;
    exact numbers as :func:`costgraph.export.display.json_exact` writes them)."""
    draw = _of(result, 1)
    if draw is None:
        from ..result_fields import json_fields
        from .display import json_exact

        return json_fields(result, lambda v, _q: json_exact(v))
    return draw(result)


def to_json(result) -> str:
    """:func:`to_dict` as indented JSON text, as ``result``'s command prints it."""
    draw = _of(result, 2)
    return draw(result) if draw is not None else json.dumps(to_dict(result), indent=2)


def to_text(result) -> str:
    """The text ``result``'s command prints; for a type without its own, its table as text."""
    draw = _of(result, 3)
    return draw(result) if draw is not None else text(table(result))


def model_html(model) -> str:
    """:meth:`costgraph.Model._repr_html_`: :func:`costgraph.export.graph.model_html`."""
    from .graph import model_html as draw

    return draw(model)


def graph_svg(model, scope: str, **settings) -> str:
    """:meth:`costgraph.Model.graph_svg`: :func:`costgraph.export.graph.render` as SVG."""
    from .graph import render

    return render(model, "svg", scope, **settings)


def latex_doc(costs) -> str:
    """:meth:`costgraph.Costs._repr_latex_`: :func:`costgraph.export.text_report.to_latex_doc`."""
    from .text_report import to_latex_doc

    return to_latex_doc(costs)
