"""``costgraph plan`` on models whose sequence length is derived (ViT's ``s = n + 1``,
``n = (image/p)^2``; DiT's tokens from its latent size): the planner reads ``s`` through
:meth:`costgraph.engine.graph.CostGraph.dim_expr` (it raised ``TypeError: Cannot convert
symbols to int``, an internal error, before). Each planned layout is confirmed against
``costgraph train`` for the same layout: the memory of the most loaded device, exactly."""

from __future__ import annotations

import json

import pytest

from costgraph.cli import main


def _json(capsys, *argv):
    capsys.readouterr()
    assert main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("model, config", [("vit", "vit-base-patch16-224"), ("dit", "dit-xl-2-256")])
def test_plan_on_a_derived_sequence_matches_train(capsys, train_check, model, config):
    planned = _json(capsys, "plan", model, "--config", config, "--gpus", "8", "--hardware", "h100-sxm",
                    "--global-batch", "64", "--top", "1")
    best = planned["layouts"][0]
    # the plan's own "check the first with" command (every option of the row: CP, SP, the schedule), run as
    # `costgraph train` runs it but without printing its JSON, which cost 464 s of CPU for ViT (the step's
    # closed forms expanded in field order); tests/test_api_parity.py holds that JSON to Model.train's to_dict()
    peak, _, _ = train_check(planned["check"])
    assert peak == best["memory_bytes"]


def test_dim_expr_follows_definitions():
    import sympy

    import costgraph

    cg = costgraph.load("vit").graph
    image, p = cg.dims["image"].symbol, cg.dims["p"].symbol
    assert sympy.simplify(cg.dim_expr("s") - (image**2 / p**2 + 1)) == 0   # n = (image/p)^2 patches + the class token
    assert cg.dim_expr("h") == cg.dims["h"].symbol
