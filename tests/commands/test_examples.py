"""Every bundled model derives, at every scope and convention, and its
configurations evaluate to whole numbers."""

import pytest
import sympy

import costgraph
from costgraph.language.resources import bundled_model_names


@pytest.mark.parametrize("name", bundled_model_names())
def test_bundled_model_derives(name):
    m = costgraph.load(name)
    for convention in ("matmul", "all"):
        c = m.costs("model", convention=convention)
        assert c.params != 0 and c.flops_forward != 0
        for cfg in m.configs:
            # a configuration may set options (starcoder2-15b: tied = false): the model is built with them
            values = costgraph.load(name, config=cfg).costs("model", convention=convention).evaluate(config=cfg)
            # a model whose every cache is a fixed-size recurrent state (Mamba) adds 0 bytes per token
            per_token = () if all(e.state for e in m.graph.caches) else ("kv_cache_bytes_per_token",)
            assert all(isinstance(v, int) and v >= 0 for v in values.values())
            # an encoder (BERT) keeps no cache at all: 0 KV cache bytes
            no_cache = ("kv_cache_bytes",) if not m.graph.caches else ()
            assert all(v > 0 for q, v in values.items()
                       if (q != "kv_cache_bytes_per_token" or q in per_token) and q not in no_cache)


def test_api_renders_latex_in_jupyter(gpt):
    assert "24 b s h^{2} + 4 b s^{2} h" in gpt.costs("layer")._repr_latex_()


def test_expressions_are_sympy(gpt):
    assert isinstance(gpt.costs("layer").params, sympy.Expr)
