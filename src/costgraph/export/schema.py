"""The JSON Schemas (draft 2020-12) of costgraph's JSON documents.

Each document a command writes with ``--format json`` has a schema file in
``costgraph/export/schemas/`` (shipped with the package): ``derive``,
``train`` (a model's training memory, or the model states of a bare
``--params`` count), ``infer``, ``plan``, ``fit`` (the verdict and next steps of ``costgraph fit``), ``hardware``, ``graph`` (``costgraph
graph --format json``), ``sweep``, and ``expression`` (the expression tree beside every
``expr``, :mod:`costgraph.export.exprtree`), which the others reference as
``expression.json#/$defs/...``. Their ``$id``\\ s
(``https://costgraph.invalid/schemas/v1/NAME.json``; ``.invalid`` is a
reserved domain) name them: nothing is fetched from the network.

:func:`schema` returns one as a dict, :func:`bundled` the same with the
schemas it references embedded under ``$defs`` (one self-contained document,
as draft 2020-12 allows: each embedded schema keeps its ``$id``), and
:func:`validator` a ``jsonschema.Draft202012Validator`` that resolves the
references (``jsonschema`` is in the ``test`` extra).
"""

from __future__ import annotations

import json
from importlib.resources import files

from ..errors import CostgraphValueError

#: the schemas, by the name `costgraph schema NAME` takes
NAMES = ("derive", "train", "infer", "plan", "hardware", "graph", "sweep", "solve", "sensitivity", "leading", "diff",
         "optimal", "fit", "expression", "launch")
BASE = "https://costgraph.invalid/schemas/v1/"


def names() -> tuple[str, ...]:
    """The schemas shipped (:data:`NAMES`, and any other file in the folder), sorted."""
    found = {p.name[:-5] for p in files(__package__).joinpath("schemas").iterdir() if p.name.endswith(".json")}
    return tuple(sorted(found))


def schema(name: str) -> dict:
    """The schema ``name`` (see :func:`names`) as a dict.

    Raises
    ------
    CostgraphValueError
        No schema of that name (the message lists them).
    """
    if not isinstance(name, str) or name not in names():
        from ..errors import tidy

        raise CostgraphValueError(f"no schema {tidy(str(name))[:40]!r}", hint="schemas: " + ", ".join(names()))
    doc = json.loads(files(__package__).joinpath("schemas", f"{name}.json").read_text(encoding="utf-8"))
    return with_options(doc, name)


#: the schemas of the documents whose command's options are an options dataclass (costgraph.train_options)
OPTIONS = {"train": "train_options.TrainOptions", "plan": "train_options.PlanOptions",
           "infer": "infer_options.InferOptions", "fit": "fit_options.FitOptions"}


#: the schemas whose command takes a layout too: ``$defs/layout`` (:class:`costgraph.layout_options.LayoutOptions`)
WITH_LAYOUT = ("train", "fit")


def with_options(doc: dict, name: str) -> dict:
    """``doc`` with the options of its command read from their declaration
    (:mod:`costgraph.option_fields`): ``$defs/options`` (one property per option, its JSON name, type,
    ``enum`` and unit: the input a launch file or a notebook gives), and the ``enum`` of each property of
    the document named after an option with choices (``scope`` of ``train``, ``attention`` and
    ``overlap`` of ``plan``, ``runtime`` of ``infer``) replaced by the option's choices (``null`` kept where the file allows it);
    for the commands of :data:`WITH_LAYOUT`, ``$defs/layout``: the layout's settings, generated the same way."""
    if name not in OPTIONS:
        return doc
    from importlib import import_module

    from ..option_fields import json_schema, specs

    module, cls_name = OPTIONS[name].split(".")
    cls = getattr(import_module(f"costgraph.{module}"), cls_name)
    enums = {n: list(s.values) for n, (_, s) in specs(cls).items() if s.values is not None}

    def walk(node):
        if isinstance(node, dict):
            for prop, sub in (node.get("properties") or {}).items():
                if prop in enums and isinstance(sub, dict) and "enum" in sub:
                    sub["enum"] = enums[prop] + ([None] if None in sub["enum"] else [])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(doc)
    doc.setdefault("$defs", {})["options"] = json_schema(cls)
    if name in WITH_LAYOUT:   # the layout's settings (costgraph.layout_options): Model.train's other keywords
        from ..layout_options import LayoutOptions

        doc["$defs"]["layout"] = json_schema(LayoutOptions)
    return doc


def _refs(node, out: set[str]) -> set[str]:
    """Names of the other schema files ``node`` references (``expression.json#/...``)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            out.add(ref.split("#", 1)[0].removesuffix(".json"))
        for v in node.values():
            _refs(v, out)
    elif isinstance(node, list):
        for v in node:
            _refs(v, out)
    return out


def bundled(name: str) -> dict:
    """Schema ``name`` with every schema it references (transitively)
    embedded in its ``$defs`` under their names, keeping their ``$id``: one
    self-contained document for tools that do not load several files."""
    doc = schema(name)
    todo, done = sorted(_refs(doc, set()) - {name}), set()
    while todo:
        other = todo.pop()
        if other in done:
            continue
        done.add(other)
        sub = schema(other)
        sub.pop("$schema", None)
        doc.setdefault("$defs", {})[f"{other}.json"] = sub
        todo.extend(sorted(_refs(sub, set()) - done - {name}))
    return doc


def registry():
    """A ``referencing.Registry`` holding every shipped schema by its ``$id``, crawled (its
    subresources and anchors indexed once, not again at each ``$ref`` a validation follows)."""
    from referencing import Registry, Resource

    return Registry().with_resources(
        (schema(n)["$id"], Resource.from_contents(schema(n))) for n in names()).crawl()


def validator(name: str):
    """A ``jsonschema.Draft202012Validator`` of schema ``name``, its references resolved.

    Raises
    ------
    CostgraphValueError
        ``jsonschema`` is not installed (the hint says how), or no such schema.
    """
    try:
        import jsonschema
    except ImportError:
        raise CostgraphValueError("validating needs the jsonschema package",
                                  hint="pip install 'costgraph[test]' or pip install jsonschema") from None
    return jsonschema.Draft202012Validator(schema(name), registry=registry())
