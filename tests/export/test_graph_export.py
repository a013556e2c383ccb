"""`costgraph graph` and the Jupyter view of a model (costgraph.export.graph):
each output is consumed by a real tool — Graphviz's `dot` parses the DOT,
NetworkX reads the GraphML and the node-link JSON back, the SVG parses as
XML — and checked for content: clusters with their counts, the nodes'
formulas, tied weights, stored tensors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

import networkx as nx
import pytest
import sympy

import costgraph
from costgraph.cli import main
from costgraph.errors import CostgraphError
from costgraph.export import graph as G
from costgraph.export.exprtree import from_tree
from costgraph.engine.totals import QUANTITIES

SVG = "{http://www.w3.org/2000/svg}"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def cli(capsys, *argv) -> str:
    assert main(list(argv)) == 0, argv
    return capsys.readouterr().out


def svg_texts(svg: str) -> tuple[list[str], list[str]]:
    """(texts, titles) of an SVG document, parsed as XML."""
    root = ET.fromstring(svg)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    titles = [t.text or "" for t in root.iter(f"{SVG}title")]
    return texts, titles


@pytest.fixture(scope="module")
def gpt():
    return costgraph.load("gpt")


def test_view_of_gpt(gpt):
    g = G.operator_graph(gpt)
    assert set(g.nodes) == set(gpt.graph.nodes)                 # every operator and input, nothing else
    assert g.number_of_edges() == len(gpt.graph.edges) + 1      # the tensors and one tied weight
    c = g.nodes["layers/attn/c_attn"]
    assert (c["kind"], c["cluster"], c["count"]) == ("linear", "layers/attn", "l")
    assert c["outputs"][0]["shape"] == "[b, s, 3 h]"
    assert c["quantities"]["params"]["text"] == "3 h^2 + 3 h"   # W: h x 3h, b: 3h (Radford et al. 2019, c_attn)
    assert c["quantities"]["flops_forward"]["text"] == "6 b s h^2"
    assert [cl["label"] for cl in g.graph["clusters"]] == ["layers × l", "attn (attention)", "mlp (mlp)"]
    tied = [(u, v) for u, v, d in g.edges(data=True) if d["type"] == "tied"]
    assert tied == [("wte", "lm_head")]                          # GPT-2's head reads the token embedding
    assert g.nodes["layers/attn/k_cache"]["kv_cache"] and g.nodes["layers/attn/v_cache"]["kv_cache"]
    saved = {(u, v) for u, v, d in g.edges(data=True) if d.get("saved")}
    assert ("layers/attn/softmax", "layers/attn/attn_dropout") in saved   # softmax keeps its output
    assert ("layers/mlp/c_fc", "layers/mlp/gelu") in saved                # GELU keeps its input


@pytest.mark.parametrize("name", ["gpt", "mixtral", "t5", "deepseek_v3", "jamba", "gemma2", "mamba"])
def test_node_formulas_add_up_to_the_model_totals(name):
    """Σ count × (per-instance quantity) over the picture's nodes, read back
    from their expression trees, is the model's total for every quantity."""
    model = costgraph.load(name)
    g = G.operator_graph(model)
    costs = model.costs()
    rows = {r["path"]: r for r in costs.leaves}
    for q in QUANTITIES:
        total = 0
        for n, d in g.nodes(data=True):
            if d["type"] in ("op", "storage"):
                total += rows[n]["count"] * from_tree(d["quantities"][q]["tree"])
        assert sympy.expand(total - costs[q]) == 0, (name, q)


@needs_dot
@pytest.mark.parametrize("name, scope", [("gpt", "model"), ("gpt", "layer"), ("mixtral", "model"), ("t5", "model"),
                                         ("deepseek_v3", "model"), ("jamba", "model"), ("llama", "layers/layer/self_attn")])
def test_dot_parses_with_graphviz(capsys, name, scope):
    dot_text = cli(capsys, "graph", name, "--scope", scope, "--format", "dot")
    run = subprocess.run(["dot", "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    texts, titles = svg_texts(run.stdout)
    g = G.operator_graph(costgraph.load(name), scope)
    assert set(g.nodes) <= set(titles)                           # every node drawn, under its path
    labels = [c["label"] for c in g.graph["clusters"]]
    assert labels and all(label in texts for label in labels)


@needs_dot
def test_svg_of_gpt(capsys, tmp_path):
    out = tmp_path / "gpt.svg"
    assert "wrote" in cli(capsys, "graph", "gpt", "--format", "svg", "-o", str(out))
    texts, titles = svg_texts(out.read_text())
    assert "layers × l" in texts
    assert "layers/attn/c_attn" in titles and "lm_head" in titles
    assert "params 3 h^2 + 3 h" in texts and "FLOPs 6 b s h^2" in texts
    assert "KV 2 b s h B" in texts                                # k_cache: [b, a, s, h/a] at 2 bytes
    root = ET.fromstring(out.read_text())
    shapes = {"".join(g.find(f"{SVG}title").itertext()): g for g in root.iter(f"{SVG}g")
              if g.get("class") == "node"}
    cylinder = list(shapes["layers/attn/k_cache"].iter(f"{SVG}path"))   # body and the rim of its top
    assert len(cylinder) == 2 and cylinder[0].get("fill") == "#fde0c5"
    assert len(list(shapes["layers/attn/c_attn"].iter(f"{SVG}path"))) == 1
    edges = [g for g in root.iter(f"{SVG}g") if g.get("class") == "edge"]
    tied = [e for e in edges if "".join(e.find(f"{SVG}title").itertext()) == "wte->lm_head"]
    assert tied and "stroke-dasharray" in ET.tostring(tied[0]).decode()
    red = [e for e in edges if G.SAVED_COLOR in ET.tostring(e).decode()]
    assert len(red) >= 10


@needs_dot
def test_svg_labels_patterns_and_experts(capsys):
    mixtral = cli(capsys, "graph", "mixtral", "--scope", "layer", "--format", "svg")
    assert "experts × E (active k)" in svg_texts(mixtral)[0]
    jamba = G.to_svg(G.operator_graph(costgraph.load("jamba")))
    texts = svg_texts(jamba)[0]
    assert "moe (moe) × floor(l/2)" in texts                     # every other layer (Jamba, Lieber et al. 2024)
    assert "experts × E (active k)" in texts


def test_graphml_reads_back(capsys, tmp_path, gpt):
    out = tmp_path / "gpt.graphml"
    cli(capsys, "graph", "gpt", "--config", "gpt2", "--format", "graphml", "-o", str(out))
    h = nx.read_graphml(out, force_multigraph=True)
    g = G.operator_graph(gpt)
    assert h.number_of_nodes() == g.number_of_nodes() and h.number_of_edges() == g.number_of_edges()
    c = h.nodes["layers/attn/c_attn"]
    assert c["kind"] == "linear" and c["params"] == "3*h**2 + 3*h" and c["cluster"] == "layers/attn"
    assert c["params_value"] == str(768 * 2304 + 2304)          # GPT-2: 1,771,776
    assert c["outputs"] == "[b, s, 3 h]" and c["kv_cache"] == "false"
    assert h.nodes["layers/attn/k_cache"]["kv_cache"] == "true"
    assert {d["type"] for _, _, d in h.edges(data=True)} == {"tensor", "tied"}
    assert json.loads(h.graph["clusters"])[0]["label"] == "layers × l"
    assert all(isinstance(v, str) for _, d in h.nodes(data=True) for v in d.values())


def test_json_node_link_reads_back(capsys):
    doc = json.loads(cli(capsys, "graph", "mixtral", "--config", "mixtral-8x7b", "--format", "json"))
    g = nx.node_link_graph(doc, edges="edges")
    assert g.is_multigraph() and g.is_directed()
    gate = g.nodes["layers/layer/mlp/experts/expert/gate_proj"]
    assert from_tree(gate["quantities"]["params"]["tree"]) == sympy.Symbol("h", positive=True, integer=True) \
        * sympy.Symbol("i", positive=True, integer=True)
    assert gate["quantities"]["params"]["value"] == 4096 * 14336   # Mixtral-8x7B w1: 4096 x 14336
    assert gate["count"] == "l E"
    assert {c["label"] for c in doc["graph"]["clusters"]} >= {"layers × l", "experts × E (active k)"}


def test_scope_and_errors(capsys, monkeypatch, tmp_path):
    assert main(["graph", "gpt", "--scope", "nope"]) == 2
    assert "no scope 'nope'" in capsys.readouterr().err
    assert main(["graph", "gpt", "-o", str(tmp_path / "no" / "such" / "dir.dot")]) == 2
    assert "cannot write" in capsys.readouterr().err
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert main(["graph", "gpt", "--format", "svg"]) == 2
    err = capsys.readouterr().err
    assert "'dot' program" in err and "apt-get install graphviz" in err


def test_svg_without_the_dot_program(monkeypatch, gpt):
    """The graphviz package cannot run dot (PATH without it): a CostgraphError with the install hint."""
    monkeypatch.setenv("PATH", "")
    with pytest.raises(CostgraphError, match="apt-get install graphviz"):
        G.to_svg(G.operator_graph(gpt, "layers/mlp"))


@needs_dot
def test_jupyter_view(gpt):
    html = gpt._repr_html_()
    assert "<table>" in html and "l (12 h^2 + 13 h) + h V + h s_max + 2 h" in html
    svg = html[html.index("<svg"):html.rindex("</svg>") + len("</svg>")]
    texts, titles = svg_texts(svg)
    assert "layers × l" in texts and "layers/attn/c_attn" in titles
    assert gpt.graph_svg("layers/attn").startswith("<?xml")


def test_jupyter_view_without_graphviz(monkeypatch, gpt):
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    html = gpt._repr_html_()
    assert "<svg" not in html and "parameters" in html
    ET.fromstring(html)                                          # the table alone is well-formed XHTML
    assert re.search(r"forward FLOPs</th><td[^>]*><code>l \(24 b s h\^2 \+ 4 b s\^2 h\) \+ 2 b s h V", html)


def test_the_readme_picture_is_costgraphs():
    """docs/graph-gpt-layer.svg (README, "The operator graph") is
    `costgraph graph gpt --scope layer --format svg` output: the layer's
    cluster, its nodes and their formulas."""
    from pathlib import Path

    svg = (Path(__file__).resolve().parents[2] / "docs" / "graph-gpt-layer.svg").read_text()
    texts, titles = svg_texts(svg)
    assert "layers × l" in texts and "attn (attention)" in texts and "mlp (mlp)" in texts
    assert "params 3 h^2 + 3 h" in texts and "layers/mlp/c_fc" in titles
