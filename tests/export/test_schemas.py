"""The JSON Schemas of every JSON document costgraph writes (costgraph/export/schemas, `costgraph schema`),
checked with jsonschema's Draft 2020-12 validator against real outputs of each command; they must reject
broken documents. The expression trees inside real documents evaluate (tests/exprtree_reference.py) to the
document's own `value`s; the trees themselves against the engine's formulas: tests/export/test_exprtree.py."""

from __future__ import annotations

import copy
import functools
import json
import math

import jsonschema
import pytest

import costgraph
from costgraph.cli import main
from costgraph.export import schema as schemas
from exprtree_reference import ref_eval


# one validator per schema for the module (its registry crawled once: costgraph.export.schema.validator)
_validator = functools.cache(schemas.validator)


@functools.cache
def _bundled_validator(name: str):
    """A validator of the bundled form of schema ``name`` alone: a registry of that one document (no other
    file), crawled once (its embedded ``$defs`` found once, not again at each ``$ref`` a validation follows)."""
    from referencing import Registry, Resource

    doc = schemas.bundled(name)
    one = Registry().with_resource(doc["$id"], Resource.from_contents(doc)).crawl()
    return jsonschema.Draft202012Validator(doc, registry=one)


def run_json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0, argv
    return json.loads(capsys.readouterr().out)


DERIVE = [
    ("derive", "gpt", "--config", "gpt2"),
    ("derive", "gpt", "--scope", "layer"),
    ("derive", "mistral", "--config", "mistral-7b", "--causal", "half"),
    ("derive", "mixtral", "--config", "mixtral-8x7b", "--no-breakdown"),
    ("derive", "t5", "--config", "t5-small", "--profile", "pytorch"),
    ("derive", "jamba", "--config", "jamba-v0.1", "--convention", "all"),
    ("derive", "llama", "--config", "llama-2-7b", "--scope", "layers/layer/self_attn", "--precision", "fp32"),
]
TRAIN = [
    ("train", "llama", "--config", "llama-3-8b", "--gpus", "8", "--tp", "2", "--pp", "2", "--zero", "1"),
    ("train", "gpt", "--config", "gpt3-175b", "--gpus", "1024", "--tp", "8", "--pp", "8", "--hardware",
     "a100-80gb-sxm", "--mfu", "0.45", "--tokens", "300e9", "--price", "2", "--megatron", "--memory", "80GB"),
    ("train", "mixtral", "--config", "mixtral-8x7b", "--gpus", "16", "--tp", "2", "--ep", "4", "--zero", "1",
     "--recompute", "selective", "--sp", "--scope", "layer"),
    ("train", "llama"),                                          # no values: formulas only
    # interleaved (fractional micro-batches in flight) with an uneven split (issue 16 items 1-2)
    ("train", "llama", "--config", "llama-3-8b", "--gpus", "16", "--pp", "4", "--schedule", "interleaved",
     "--virtual-stages", "2", "--micro-batches", "8", "--decoder-first-pipeline-num-layers", "6",
     "--decoder-last-pipeline-num-layers", "10"),
    ("train", "--params", "7.5e9", "--gpus", "64", "--zero", "3", "--memory", "80GB"),
    ("train", "--params", "175e9", "--gpus", "1024", "--zero", "3", "--hardware", "a100-40gb-sxm", "--mfu", "0.45",
     "--tokens", "300e9", "--recompute", "full", "--price", "2"),   # the 8ND/(nX) time of a bare count
]
INFER = [
    ("infer", "llama", "--config", "llama-2-7b", "--hardware", "h100-sxm", "--prompt", "512", "--generate", "128"),
    ("infer", "mixtral", "--config", "mixtral-8x7b", "--hardware", "h100-sxm", "--prompt", "512",
     "--generate", "64", "--batch", "8"),
    ("infer", "llama", "--config", "llama-2-70b", "--hardware", "h200", "--prompt", "1024", "--generate", "16",
     "--tp", "4"),
    # no preset (issue 17, item 1): bytes and FLOPs only; then figures given without one, TP on a given link
    ("infer", "llama", "--config", "llama-2-7b", "--prompt", "512", "--generate", "128"),
    ("infer", "llama", "--config", "llama-2-70b", "--peak", "989.4e12", "--bandwidth", "3.35e12", "--prompt", "1024",
     "--generate", "16", "--tp", "4", "--link-bandwidth", "450e9"),
]
PLAN = [("plan", "llama", "--config", "llama-2-7b", "--gpus", "16", "--hardware", "h100-sxm", "--global-batch", "64",
         "--top", "3", "--tokens", "1e12")]
HARDWARE = [("hardware",), ("hardware", "h100-sxm")]
GRAPH = [("graph", "gpt", "--config", "gpt2"), ("graph", "mixtral", "--scope", "layer"),
         ("graph", "t5", "--scope", "decoder")]
SWEEP = [("sweep", "llama", "--config", "llama-2-7b", "--over", "s=512:2048:x2", "--over", "b=1,2", "--no-progress"),
         ("sweep", "gpt", "--config", "gpt2", "--over", "s=128,1024", "--dtype", "exact", "--quantity", "params",
          "kv_cache_bytes", "--no-progress")]
CASES = ([(a, "derive") for a in DERIVE] + [(a, "train") for a in TRAIN] + [(a, "infer") for a in INFER]
         + [(a, "plan") for a in PLAN] + [(a, "hardware") for a in HARDWARE] + [(a, "graph") for a in GRAPH]
         + [(a, "sweep") for a in SWEEP])


@pytest.fixture(scope="module")
def documents():
    """The JSON document of each case (run once)."""
    import contextlib
    import io

    out = {}
    for argv, _ in CASES:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main([*argv, "--format", "json"]) == 0, argv
        out[argv] = json.loads(buf.getvalue())
    return out


def test_every_schema_is_valid_draft_2020_12():
    names = schemas.names()
    assert set(names) >= {"derive", "train", "infer", "plan", "hardware", "graph", "sweep", "expression"}
    ids = set()
    for name in names:
        doc = schemas.schema(name)
        jsonschema.Draft202012Validator.check_schema(doc)
        assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert doc["$id"] == f"{schemas.BASE}{name}.json"
        assert doc["description"] and doc["title"]
        ids.add(doc["$id"])
        jsonschema.Draft202012Validator.check_schema(schemas.bundled(name))
    assert len(ids) == len(names)


def _named_modules(node, out: set):
    """The dotted ``costgraph.x.y`` names in every description of a schema."""
    import re

    if isinstance(node, dict):
        for k, v in node.items():
            if k == "description" and isinstance(v, str):
                out.update(n.rstrip(".") for n in re.findall(r"costgraph(?:\.[a-z_0-9]+)+\.?", v))
            else:
                _named_modules(v, out)
    elif isinstance(node, list):
        for v in node:
            _named_modules(v, out)
    return out


def test_schema_descriptions_name_modules_that_exist():
    # the descriptions name the module that writes each document (or figure): after the restructuring (issue 31)
    # costgraph.training.report and costgraph.inference.report were gone; each name resolves to a module or to an
    # attribute of one
    import importlib

    for name in schemas.names():
        for dotted in sorted(_named_modules(schemas.schema(name), set())):
            parts, obj = dotted.split("."), None
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                for attr in parts[i:]:
                    obj = getattr(obj, attr, None)
                break
            assert obj is not None, f"{name}.json names {dotted}, which does not exist"


_ERRORS: dict = {}


def _errors(documents, argv, name) -> list[str]:
    """The errors schema ``name`` finds in the document of ``argv`` (validated once for the module)."""
    if (argv, name) not in _ERRORS:
        _ERRORS[argv, name] = [f"{list(e.absolute_path)}: {e.message[:200]}"
                               for e in _validator(name).iter_errors(documents[argv])]
    return _ERRORS[argv, name]


@pytest.mark.parametrize("argv, name", CASES, ids=[" ".join(a[:2]) + f"-{i}" for i, (a, _) in enumerate(CASES)])
def test_real_documents_validate(documents, argv, name):
    doc = documents[argv]
    assert _errors(documents, argv, name) == []
    # the bundled form (one file, no registry) says the same
    assert _bundled_validator(name).is_valid(doc)


def _entries(doc, path=()):
    """Every ``{expr, tree, ...}`` object in a document, with its path."""
    if isinstance(doc, dict):
        if "tree" in doc and "expr" in doc:
            yield path, doc
        for k, v in doc.items():
            yield from _entries(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _entries(v, path + (i,))


@pytest.mark.parametrize("argv", [a for a, n in CASES if n in ("derive", "train", "infer", "graph")],
                         ids=lambda a: " ".join(a[:2]))
def test_document_trees_evaluate_to_the_documents_values(documents, argv):
    """Each tree, evaluated with the document's own `values` by the reference
    evaluator, gives the document's `value` (exact integers; a per-device share
    rounded up where `rounded_up`; floats to 1e-12)."""
    doc = documents[argv]
    values = doc.get("values") or doc.get("graph", {}).get("values") or {}
    checked = 0
    for path, entry in _entries(doc):
        if entry.get("value") is None:
            continue
        got = ref_eval(entry["tree"], values)
        want = entry["value"]
        if isinstance(want, float):
            assert math.isclose(float(got), want, rel_tol=1e-12), path
        elif entry.get("rounded_up"):
            assert math.ceil(got) == want and got != want, path
        elif path == ("compute_bound_batch",):   # the formula is the root; the value the first whole batch past it
            assert math.ceil(got) == want, path
        else:
            assert got == want, path
        checked += 1
    assert checked > 0 or not values


def test_train_params_document_trees(documents):
    doc = documents[TRAIN[-1]]
    for k, e in doc["memory"].items():
        assert math.ceil(ref_eval(e["tree"], {})) == e["value"], k


# keys each document always has (README "JSON output" and the writers' docstrings)
ALWAYS = {"derive": ["costgraph", "model", "scope", "quantities", "symbols", "values"],
          "train": ["costgraph", "plan", "memory", "stages", "most_loaded_stage"],
          "train --params": ["params", "plan", "memory"],
          "infer": ["settings", "prefill", "decode", "kv_cache_bytes", "fits", "max_batch"],
          "plan": ["model", "layouts", "considered", "refused"],
          "hardware": ["key", "memory_bytes", "peak_flops_bf16", "sources"],
          "graph": ["nodes", "edges", "graph", "directed"],
          "sweep": ["rows", "columns", "over", "dtype"]}


def _broken(doc: dict, kind: str):
    """Documents one edit away from ``doc`` that its schema must refuse."""
    out = []
    for key in ALWAYS[kind]:
        d = copy.deepcopy(doc)
        del d[key]
        out.append((f"without {key}", d))
    d = copy.deepcopy(doc)
    d["unexpected"] = 1
    out.append(("an unknown key", d))
    first = next(iter(doc))
    d = copy.deepcopy(doc)
    d[first] = [d[first]]
    out.append((f"{first} of the wrong type", d))
    entries = list(_entries(doc))
    if entries:
        path, _ = entries[0]
        for what, change in (("tree without args", lambda e: e.update({"tree": {"op": "add"}})),
                             ("int as a JSON number", lambda e: e.update({"tree": {"int": 12}})),
                             ("expr not a string", lambda e: e.update({"expr": 12})),
                             ("tree missing", lambda e: e.pop("tree"))):
            d = copy.deepcopy(doc)
            target = d
            for p in path:
                target = target[p]
            change(target)
            out.append((what, d))
    return out


@pytest.mark.parametrize("argv, name", [CASES[0], (TRAIN[1], "train"), (TRAIN[-1], "train"), (INFER[0], "infer"),
                                        (PLAN[0], "plan"), (HARDWARE[1], "hardware"), (GRAPH[0], "graph"),
                                        (SWEEP[0], "sweep")],
                         ids=lambda x: x if isinstance(x, str) else " ".join(x[:2]))
def test_schemas_refuse_broken_documents(documents, argv, name):
    doc = documents[argv]
    v = _validator(name)
    assert _errors(documents, argv, name) == []   # valid as it is
    kind = "train --params" if "params" in doc else name
    for what, bad in _broken(doc, kind):
        assert not v.is_valid(bad), what


def test_schemas_refuse_a_wrong_type_deep_inside(documents):
    doc = copy.deepcopy(documents[DERIVE[0]])
    v = _validator("derive")
    doc["quantities"]["params"]["value"] = "124439808"                   # a string, not an integer
    assert not v.is_valid(doc)
    doc = copy.deepcopy(documents[DERIVE[0]])
    doc["breakdown"]["layers/attn/c_attn"]["type"] = "operator"           # not one of the row types
    assert not v.is_valid(doc)
    doc = copy.deepcopy(documents[DERIVE[0]])
    del doc["quantities"]["kv_cache_bytes"]
    assert not v.is_valid(doc)
    doc = copy.deepcopy(documents[PLAN[0]])
    doc["layouts"][0]["zero"] = 4
    assert not _validator("plan").is_valid(doc)
    doc = copy.deepcopy(documents[PLAN[0]])
    assert doc["searched"]["zero"] == [0, 1, 2, 3] and "zb-h1" in doc["searched"]["schedule"]   # issue 27 item 2
    assert "ep_overlap" in doc["not_searched"]
    doc["pruned"]["slower than the rows shown (screened, not derived exactly)"] = -1   # a count is never negative
    assert not _validator("plan").is_valid(doc)
    doc = copy.deepcopy(documents[HARDWARE[0]])
    doc["presets"][0]["memory_bytes"] = -1
    assert not _validator("hardware").is_valid(doc)


def test_derive_document_carries_trees_beside_expr(documents):
    """The tree sits beside `expr` (README, JSON output): GPT-2's attention
    projection, 3 h^2 + 3 h = 1,771,776 parameters (HF GPT-2: c_attn weight
    768 x 2304 + bias 2304)."""
    row = documents[DERIVE[0]]["breakdown"]["layers/attn/c_attn"]
    params = row["quantities"]["params"]
    assert params["expr"] == "3*h**2 + 3*h"
    assert params["tree"] == {"op": "add", "args": [
        {"op": "mul", "args": [{"int": "3"}, {"op": "pow", "args": [{"sym": "h"}, {"int": "2"}]}]},
        {"op": "mul", "args": [{"int": "3"}, {"sym": "h"}]}]}
    assert params["value"] == 768 * 2304 + 2304 == 1771776
    assert row["count_tree"] == {"sym": "l"}                              # l instances at model scope
    assert documents[DERIVE[0]]["breakdown"]["ln_f"]["count_tree"] == {"int": "1"}


def test_schema_command(capsys):
    assert main(["schema", "derive"]) == 0
    assert json.loads(capsys.readouterr().out) == schemas.schema("derive")
    assert main(["schema", "graph", "--bundle"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["$defs"]["expression.json"]["$id"] == schemas.schema("expression")["$id"]
    assert main(["schema"]) == 0
    listing = capsys.readouterr().out
    assert all(n in listing for n in schemas.names())
    assert main(["schema", "nope"]) == 2
    assert "schemas: derive" in capsys.readouterr().err
